//! The mocks of one run in wire mode: each agent's own world (its fault and model draws, its
//! conversations, its trace) and what the fleet shares — the tools' and the provider's limits
//! (`[tools.NAME]`, `provider = { rpm, tpm }`) and the counts of its `scope = "fleet"` fault
//! rules — on one clock.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::oneshot;

use super::world::{Clock, FleetFaults, SharedFaults, World};
use crate::engine::Scenario;
use crate::engine::limits::{Admission, LoadFault, ProviderState, ToolState, Waiter};

/// What the fleet shares in one run.
#[derive(Debug, Default)]
pub struct Limits {
    pub tools: Vec<ToolState>,
    pub provider: ProviderState,
    /// Calls waiting for a place at a tool (`queue = true`), told through their channel.
    waiters: BTreeMap<Waiter, oneshot::Sender<()>>,
    next_ticket: u32,
}

/// How a call fares at a tool's door.
#[derive(Debug)]
pub enum Door {
    /// Served now, holding a place when the tool limits concurrency.
    Served {
        place: bool,
    },
    /// Waiting: the channel says when a place is this call's.
    Queued(oneshot::Receiver<()>),
    Refused(LoadFault, Option<u64>),
}

impl Limits {
    /// Agent `agent`'s call arrives at `tool` at `now_ms`.
    pub fn admit(&mut self, agent: u32, tool: usize, now_ms: u64) -> Door {
        let ticket = self.next_ticket;
        self.next_ticket = self.next_ticket.wrapping_add(1);
        match self.tools[tool].admit(now_ms, (agent, ticket)) {
            Admission::Served { place } => Door::Served { place },
            Admission::Refused(load, wait) => Door::Refused(load, wait),
            Admission::Queued => {
                let (tx, rx) = oneshot::channel();
                self.waiters.insert((agent, ticket), tx);
                Door::Queued(rx)
            }
        }
    }

    /// A call gives its place back: the first waiting call still there takes it.
    pub fn hand_on(&mut self, tool: usize) {
        while let Some(next) = self.tools[tool].release() {
            // A waiter whose client went away passes the place on.
            if self.waiters.remove(&next).is_some_and(|tx| tx.send(()).is_ok()) {
                return;
            }
        }
    }

    /// The most calls one tool served at once.
    pub fn peak_in_flight(&self) -> u32 {
        self.tools.iter().map(ToolState::peak).max().unwrap_or(0)
    }
}

pub struct Mocks {
    /// Unique to these mocks: a call begun under other mocks (a run since reset) holds nothing here.
    pub epoch: u64,
    scenario: Scenario,
    run: u64,
    pub clock: Clock,
    /// Agents that may call: `/agents/K/` with K below it (the plain paths are agent 0).
    agents: u32,
    /// Each agent's world, made at its first request.
    worlds: BTreeMap<u32, World>,
    /// What the fleet's `scope = "fleet"` fault rules count, shared by the worlds.
    fleet_faults: Option<SharedFaults>,
    /// Whether traffic is recorded as traces (`exec`, whose runs end; not `serve`).
    record_trace: bool,
    pub limits: Limits,
}

impl Mocks {
    pub fn new(scenario: Scenario, run: u64, agents: u32, time_scale: f64, record_trace: bool) -> Mocks {
        let mut tools = Vec::with_capacity(scenario.loads.len());
        for load in &scenario.loads {
            let mut t = ToolState::default();
            t.reset(load);
            tools.push(t);
        }
        let mut provider = ProviderState::default();
        provider.reset(&scenario.provider_load);
        let fleet_faults = FleetFaults::for_run(&scenario, run, agents.max(1));
        static EPOCHS: AtomicU64 = AtomicU64::new(0);
        Mocks {
            epoch: EPOCHS.fetch_add(1, Ordering::Relaxed),
            scenario,
            run,
            clock: Clock::new(time_scale),
            agents: agents.max(1),
            worlds: BTreeMap::new(),
            fleet_faults,
            record_trace,
            limits: Limits { tools, provider, ..Limits::default() },
        }
    }

    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    pub fn agents(&self) -> u32 {
        self.agents
    }

    /// Agent `agent`'s world and the fleet's limits; `None` past the fleet.
    pub fn agent(&mut self, agent: u32) -> Option<(&mut World, &mut Limits)> {
        if agent >= self.agents {
            return None;
        }
        let (sc, run, clock, fleet, record) =
            (&self.scenario, self.run, self.clock, self.agents > 1, self.record_trace);
        let faults = &self.fleet_faults;
        let world = self.worlds.entry(agent).or_insert_with(|| {
            let mut w = World::new(sc.clone(), run, agent, clock, faults.clone());
            w.record_trace = record;
            if fleet {
                // Named as the engine names a fleet's agents.
                w.trace.header.id = format!("{}/exec/run{run}/agent{agent}", sc.name);
                w.trace.header.agent = Some(agent);
            }
            w
        });
        Some((world, &mut self.limits))
    }

    /// Agent `agent`'s world (made now if it never called).
    pub fn world(&mut self, agent: u32) -> Option<&mut World> {
        self.agent(agent).map(|(w, _)| w)
    }

    /// The worlds of the agents that called, in agent order.
    pub fn worlds(&self) -> impl Iterator<Item = &World> {
        self.worlds.values()
    }

    /// [`Mocks::worlds`], to change.
    pub fn worlds_mut(&mut self) -> impl Iterator<Item = &mut World> {
        self.worlds.values_mut()
    }
}
