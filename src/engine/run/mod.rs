//! The run loop: a fleet of agents (one, unless the scenario says otherwise) under one
//! strategy, as a discrete-event simulation over virtual time. One queue of timed events
//! (model turns, tool attempts, their completions) drives every agent, so parallel calls
//! overlap in time and agents contend for the tools they share.
//!
//! This file holds the loop (an event handed to its handler, the run's end); the handlers live
//! in rooms of their own: `agent.rs` (an agent's state and what agents share), `provider.rs` (a
//! model turn at the provider), `turn.rs` (what the model does with what it read, and the calls
//! it issues), `tools.rs` (a tool call's admission, attempts and completion) and `deliver.rs` (a
//! result handed to the model). Debug builds assert what the loop relies on: a result is
//! delivered at most once, the pending count agrees with the calls awaiting a result, and a
//! strategy that keeps budgets never spends past them.

use super::breaker::{Admit, Breaker, FleetBreaker};
use super::events::{By, Event, Misled, Observer, TerminatedBy};
use super::fault_plan::{FaultPlan, Fired, Injector};
use super::fleet::{Fleet, MAX_AGENTS, agent_key};
use super::limits::{Admission, Leg, LoadFault, ProviderState, ServiceTimes, ToolState};
use super::loop_guard::LoopGuard;
use super::model::{Action, CallHistory, Perceived, TaintTaken, act, perceive_failure, take_tainted};
use super::probabilities::{Prob, Probabilities};
use super::queue::{AGENT_BITS, Queue};
use super::result_cache::{ResultCache, ResultKey, Seen, digits};
use super::retry::{MAX_ATTEMPTS_LIMIT, RetryPolicy};
use super::retry_budget::RetryBudget;
use super::rng::{LazyStream, domain, key};
use super::strategy::{Partials, Routing, Strategy};
use super::task::{CallSpec, Ending, MAX_PARALLEL_CALLS};
use crate::engine::Scenario;
use crate::envelope::read::{Signal, read_message};
use crate::envelope::render::{Body, Renderer};
use crate::envelope::{ErrorKind, ToolError, stated_seconds};
use crate::fault::{ErrorClass, Fault, StreamBreak};

mod agent;
mod deliver;
mod provider;
mod tools;
mod turn;

#[cfg(test)]
mod tests;

pub use agent::Workspace;
use agent::{Agent, Fleetwide, Outcome, Refusal, Slot};

/// Model-decision draws per call per turn. Slots are laid out by call index, then turn, so a
/// one-call step's consecutive turns read neighbouring slots of one ChaCha block.
const DRAWS_PER_TURN: u64 = 4;
/// Turns per call index in the slot layout (far above any `max_steps`).
const TURN_SLOTS: u64 = 1 << 24;
/// The tag of the draw, from the model stream's key, that decides whether a give-up claims
/// success ([`LazyStream::tagged_unit`]).
pub const CLAIM_TAG: u64 = crate::engine::rng::fnv1a64(b"claim");
/// Jitter slots for provider retries start here, apart from tool calls.
const PROVIDER_JITTER_BASE: u64 = 1 << 48;
/// Jitter slots per call (or provider turn) for its first retries; later retries of a long
/// chain draw from [`LONG_CHAIN_JITTER_BASE`] on, so the first ones keep their slots.
const CHAIN_SLOTS: u64 = 16;
const LONG_CHAIN_JITTER_BASE: u64 = 1 << 56;
/// An agent that needs more events than this in a run is an engine bug, not a long run.
const MAX_EVENTS_PER_AGENT: u64 = 1_000_000;
const NEVER: u32 = u32::MAX;
pub const GIVE_UP_TEXT: &str = "I could not complete the task.";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    TurnStart,
    ModelAttempt,
    ToolAttempt(u32),
    /// A call that waited for a place at a tool gets one.
    ToolServe(u32),
    /// An attempt's request reaches its tool, the tool's network delay after it was sent.
    ToolArrive(u32),
    ToolDone(u32),
    /// The tool's answer reaches the agent, the tool's network delay after it was made.
    ToolReply(u32),
}

/// What the fleet shares, set for run `run` of `sc`: tool and provider limits, the fleet's
/// breakers, and the fleet's fault injector with its attempt counts.
#[inline(always)]
fn reset_fleetwide(sh: &mut Fleetwide, sc: &Scenario, run: u64, root: u64) {
    sh.tools.resize_with(sc.loads.len(), ToolState::default);
    for (t, load) in sh.tools.iter_mut().zip(&sc.loads) {
        t.reset(load);
    }
    sh.provider.reset(&sc.provider_load);
    sh.fleet_breakers.resize_with(sc.loads.len(), FleetBreaker::default);
    sh.fleet_breakers.iter_mut().for_each(FleetBreaker::reset);
    if sc.faults.has_fleet_rules() {
        // Keyed as agent 0: a fleet of one meets the faults a lone agent meets.
        sc.faults.reset(&mut sh.fleet_injector, root, sc.name_hash, run, 0, &sc.target_hashes);
        for v in [&mut sh.fleet_attempts, &mut sh.fleet_successes] {
            v.clear();
            v.resize(sc.task.tools.len() + 1, 0);
        }
    }
}

/// The run's `n` agents reset and their first turns queued at their start times (a fleet's
/// arrivals, drawn once for all strategies of a run; a lone agent starts at 0).
#[inline(always)]
fn place_agents<const SHARED: bool>(ws: &mut Workspace, sc: &Scenario, run: u64, root: u64, n: usize) {
    let fleet = SHARED && n > 1;
    if fleet {
        // The strategies of one run share its arrivals: only the first draws them.
        let id = (key(&[root, sc.name_hash, run, domain::ARRIVALS]), sc.fleet);
        if ws.starts_for != Some(id) {
            ws.arrivals.reset(id.0);
            sc.fleet.start_times(&mut ws.arrivals, &mut ws.starts);
            ws.starts_for = Some(id);
        }
    } else {
        ws.starts.clear();
        ws.starts.push(0);
        ws.starts_for = None;
    }
    if ws.agents.len() < n {
        ws.agents.resize_with(n, Agent::default);
    }
    for (k, (agent, &start)) in ws.agents.iter_mut().zip(&ws.starts).enumerate() {
        agent.reset::<SHARED>(sc, root, run, k as u32, start);
        ws.sh.queue.push(start, k as u32, Ev::TurnStart);
    }
}

/// The jitter slot of retry `chain` of call (or provider turn) `index`, from `base`.
fn jitter_slot(base: u64, index: u64, chain: u32) -> u64 {
    let chain = u64::from(chain);
    if chain < CHAIN_SLOTS {
        base + index * CHAIN_SLOTS + chain
    } else {
        LONG_CHAIN_JITTER_BASE + (base >> 8) + index * u64::from(MAX_ATTEMPTS_LIMIT) + chain
    }
}

/// Runs run number `run` of `sc` under `strat` with root seed `root`, reporting to `obs`:
/// every agent of the scenario's fleet, in one queue. Returns how agent 0's run ended.
#[inline(always)]
pub fn simulate<O: Observer>(
    sc: &Scenario,
    strat: &Strategy,
    run: u64,
    root: u64,
    ws: &mut Workspace,
    obs: &mut O,
) -> TerminatedBy {
    simulate_with(sc, strat, run, root, ws, obs, &mut &sc.profile)
}

/// [`simulate`] with the model's probabilities read from `probs` rather than the scenario's
/// profile (its caps and latencies still come from the profile).
#[inline(always)]
pub fn simulate_with<O: Observer, J: Probabilities>(
    sc: &Scenario,
    strat: &Strategy,
    run: u64,
    root: u64,
    ws: &mut Workspace,
    obs: &mut O,
    probs: &mut J,
) -> TerminatedBy {
    let what = RunOf { sc, strat, run, root };
    if sc.fleet.agents > 1 || sc.loaded {
        drive_shared(what, ws, obs, probs)
    } else {
        drive::<O, J, false>(what, ws, obs, probs)
    }
}

/// Which run to simulate: run number `run` of `sc` under `strat`, with root seed `root`.
#[derive(Clone, Copy)]
struct RunOf<'a> {
    sc: &'a Scenario,
    strat: &'a Strategy,
    run: u64,
    root: u64,
}

/// The shared loop, kept out of line: inlined beside the lone agent's, its copy of the engine
/// would crowd the lone agent's hot loop out of the instruction cache.
#[inline(never)]
fn drive_shared<O: Observer, J: Probabilities>(
    what: RunOf<'_>,
    ws: &mut Workspace,
    obs: &mut O,
    probs: &mut J,
) -> TerminatedBy {
    drive::<O, J, true>(what, ws, obs, probs)
}

/// [`simulate`], compiled apart for runs where agents share something (`SHARED`: several
/// agents, or tools with limits) and for a lone agent, whose loop then carries nothing of it.
#[inline(always)]
fn drive<O: Observer, J: Probabilities, const SHARED: bool>(
    what: RunOf<'_>,
    ws: &mut Workspace,
    obs: &mut O,
    probs: &mut J,
) -> TerminatedBy {
    let RunOf { sc, strat, run, root } = what;
    // A lone agent's loop knows it has one agent (the constant folds through it).
    let n = if SHARED { sc.fleet.agents as usize } else { 1 };
    let fleet = SHARED && n > 1;
    let shared_breaker = SHARED && strat.breaker && (strat.fleet_breaker || sc.policy.breaker.fleet);
    ws.sh.queue.clear();
    ws.sh.seen.serve(std::ptr::from_ref(sc) as usize);
    if SHARED {
        reset_fleetwide(&mut ws.sh, sc, run, root);
    }
    place_agents::<SHARED>(ws, sc, run, root, n);

    let retry = strat.retry.as_ref().unwrap_or(&sc.policy.retry);
    // A fleet shares one retry budget (a lone agent keeps its own count of the whole run).
    if SHARED {
        ws.sh.budget = retry.budget_ratio.filter(|_| fleet).map(|r| RetryBudget::new(r, 1, retry.budget_window_ms));
    }
    let Workspace { agents, sh, .. } = ws;
    let time_budget = sc.policy.max_virtual_ms.filter(|_| strat.budgets);
    // One event of agent `a` at `now`, over what the fleet shares.
    macro_rules! sim {
        ($ag:expr, $a:expr, $now:expr) => {
            Handler::<O, J, SHARED> {
                sc,
                strat,
                retry,
                obs,
                probs,
                sh: &mut *sh,
                shared_breaker,
                ag: $ag,
                a: $a,
                now: $now,
            }
        };
    }
    if !SHARED {
        // A lone agent keeps one `Handler` for its whole run. Built anew for every event, as a
        // fleet's must be, it was 2% of the lone agent's instructions in the criterion bench
        // (whose crate keeps the handlers out of line, so a `Handler` lives in memory).
        let mut sim = sim!(&mut agents[0], 0, 0);
        let mut events = 0;
        while sim.ag.end.is_none() {
            events += 1;
            let popped = sim.sh.queue.pop().filter(|_| events <= MAX_EVENTS_PER_AGENT);
            let Some((t, _, ev)) = popped else {
                // Nothing left to happen (or far too much): the agent is stuck.
                sim.finish(TerminatedBy::ProtocolError);
                break;
            };
            sim.now = t;
            sim.handle(ev, time_budget);
        }
        return agents[0].end.unwrap_or(TerminatedBy::ProtocolError);
    }
    let mut live = n;
    let mut events = 0;
    let mut last_t = 0;
    while live > 0 {
        events += 1;
        let popped = sh.queue.pop().filter(|_| events <= MAX_EVENTS_PER_AGENT * n as u64);
        let Some((t, a, ev)) = popped else {
            // Nothing left to happen (or far too much): whoever is still running is stuck.
            for (k, ag) in agents[..n].iter_mut().enumerate().filter(|(_, ag)| ag.end.is_none()) {
                if fleet {
                    obs.agent(k as u32);
                }
                sim!(ag, k as u32, last_t).finish(TerminatedBy::ProtocolError);
            }
            break;
        };
        last_t = t;
        let ag = &mut agents[a as usize];
        if ag.end.is_some() {
            abandon(sc, sh, ag, t, ev);
            continue;
        }
        if fleet {
            obs.agent(a);
        }
        let mut sim = sim!(ag, a, t);
        sim.handle(ev, time_budget);
        if sim.ag.end.is_some() {
            live -= 1;
        }
    }
    wind_down(sc, sh, agents, obs);
    agents[0].end.unwrap_or(TerminatedBy::ProtocolError)
}

/// The end of a shared run: calls the ended agents left at the tools end there (every tool is
/// idle again), and the tools' peak concurrency is reported (counted only where something is
/// shared: a lone agent's tools are not tracked).
fn wind_down<O: Observer>(sc: &Scenario, sh: &mut Fleetwide, agents: &mut [Agent], obs: &mut O) {
    while let Some((t, a, ev)) = sh.queue.pop() {
        abandon(sc, sh, &mut agents[a as usize], t, ev);
    }
    debug_assert!(sh.tools.iter().all(ToolState::idle), "a call kept its place at a tool");
    sh.peaks.clear();
    sh.peaks.extend(sh.tools.iter().map(ToolState::peak));
    obs.event(&Event::Done { peaks: &sh.peaks });
}

/// An event of an agent that has ended: a call it left at a tool still ends there, giving its
/// place to the next waiting call (and committing its write, which reached the tool).
fn abandon(sc: &Scenario, sh: &mut Fleetwide, ag: &mut Agent, t: u64, ev: Ev) {
    let Fleetwide { queue, tools, .. } = sh;
    let i = match ev {
        Ev::ToolServe(i) | Ev::ToolDone(i) => i as usize,
        _ => return,
    };
    let s = &mut ag.slots[i];
    let tool = usize::from(sc.task.calls[s.call as usize].tool);
    if std::mem::take(&mut s.serving) {
        tools[tool].end(sc.loads[tool].occ.then_some(s.read));
    }
    if std::mem::take(&mut s.place) || matches!(ev, Ev::ToolServe(_)) {
        hand_on(queue, &mut tools[tool], t);
    }
}

/// One attempt to decide: its target, its number there by this agent and by the fleet, and
/// the agent's successes there.
#[derive(Clone, Copy)]
struct Attempt {
    target: usize,
    attempt: u32,
    fleet_attempt: u32,
    successes: u32,
}

/// Decides an attempt by the agent's injector `inj`. A lone agent reads every rule in file
/// order; an agent of a fleet (`SHARED` with fleet rules) reads the rules with
/// `scope = "fleet"` first, on the fleet's counts, then its own.
#[inline(always)]
fn decide_fault<const SHARED: bool>(
    plan: &FaultPlan,
    sh: &mut Fleetwide,
    inj: &mut Injector,
    at: Attempt,
    now: u64,
) -> Option<Fired> {
    if !(SHARED && plan.has_fleet_rules()) {
        return plan.decide(inj, at.target, at.attempt, now, at.successes);
    }
    let t = at.target;
    // Both are decided (every matching rate limit counts the request); a fleet rule wins.
    let fleet = plan.decide_scoped(true, &mut sh.fleet_injector, t, at.fleet_attempt, now, sh.fleet_successes[t]);
    let own = plan.decide_scoped(false, inj, t, at.attempt, now, at.successes);
    fleet.or(own)
}

/// A place at `tool` is free at `t`: the first waiting call takes it.
fn hand_on(queue: &mut Queue<Ev>, tool: &mut ToolState, t: u64) {
    if let Some((agent, slot)) = tool.release() {
        queue.push(t, agent, Ev::ToolServe(slot));
    }
}

/// What handles one event of one agent: the agent, what it shares with the fleet, and the
/// time (each handler is a method, in the room of its kind).
struct Handler<'a, O, J, const SHARED: bool> {
    sc: &'a Scenario,
    strat: &'a Strategy,
    retry: &'a RetryPolicy,
    obs: &'a mut O,
    /// Where the model's probabilities are read.
    probs: &'a mut J,
    sh: &'a mut Fleetwide,
    /// The strategy's breaker is the fleet's (one per tool, `Fleetwide::fleet_breakers`).
    shared_breaker: bool,
    ag: &'a mut Agent,
    a: u32,
    now: u64,
}

impl<O: Observer, J: Probabilities, const SHARED: bool> Handler<'_, O, J, SHARED> {
    /// Handles `ev` at `self.now`. Past the agent's time budget (`time_budget` after its
    /// start, when the strategy keeps one), the budget ends its run instead.
    #[inline(always)]
    fn handle(&mut self, ev: Ev, time_budget: Option<u64>) {
        match time_budget.map(|max| self.ag.start_ms + max) {
            Some(deadline) if self.now > deadline => {
                // Something in flight (a slow tool, a timeout) would end past the time budget:
                // the agent's deadline stops its run at the budget (and what it left at a tool
                // still ends there).
                let t = std::mem::replace(&mut self.now, deadline);
                self.finish(TerminatedBy::TimeBudget);
                if SHARED {
                    abandon(self.sc, self.sh, self.ag, t, ev);
                }
            }
            _ => match ev {
                Ev::TurnStart => self.turn_start(),
                Ev::ModelAttempt => self.model_attempt(),
                Ev::ToolAttempt(i) => self.tool_attempt(i as usize),
                Ev::ToolServe(i) => self.tool_serve(i as usize),
                Ev::ToolArrive(i) => self.tool_arrive(i as usize),
                Ev::ToolDone(i) => self.tool_done(i as usize),
                Ev::ToolReply(i) => self.tool_reply(i as usize),
            },
        }
    }

    fn schedule(&mut self, t: u64, ev: Ev) {
        self.sh.queue.push(t, self.a, ev);
    }

    fn finish(&mut self, by: TerminatedBy) {
        let claimed = self.claims_success(by);
        // A give-up that claims success says what an answer says.
        let text = match by {
            TerminatedBy::Answer => self.sc.task.final_text.as_str(),
            TerminatedBy::GaveUp if claimed => self.sc.task.final_text.as_str(),
            TerminatedBy::GaveUp => GIVE_UP_TEXT,
            _ => "",
        };
        self.ag.end = Some(by);
        let false_success = claimed && !self.goal_reached();
        self.obs.event(&Event::End { by, t_ms: self.now, started_ms: self.ag.start_ms, text, false_success });
    }

    /// Whether the run's ending claims the task done: an answer does; a give-up does with the
    /// profile's `p_claim_success` (one draw from the model stream's key, apart from its
    /// slots), or as the recording did when it replays recorded decisions; no other ending
    /// answers at all.
    fn claims_success(&mut self, by: TerminatedBy) -> bool {
        match (by, self.sc.task.script) {
            (TerminatedBy::Answer, _) => true,
            // Recorded decisions: as the recording ended.
            (TerminatedBy::GaveUp, Some(script)) => script.claimed,
            (TerminatedBy::GaveUp, None) => self.ag.model.tagged_unit(CLAIM_TAG) < self.sc.profile.p_claim_success,
            _ => false,
        }
    }

    /// Whether the task's goal is reached: each goal tool (every tool when the task names
    /// none) has succeeded, and its latest attempt did not fail.
    fn goal_reached(&self) -> bool {
        self.sc.task.goal_reached(|t| self.ag.successes[t] > 0 && !self.ag.last_failed[t])
    }

    /// Counts an attempt on `target` across the fleet; returns its number there (0 where no
    /// rule counts the fleet's attempts, or for a lone agent, whose own count is the fleet's).
    #[inline(always)]
    fn count_fleet_attempt(&mut self, target: usize) -> u32 {
        if !(SHARED && self.sc.faults.has_fleet_rules()) {
            return 0;
        }
        self.sh.fleet_attempts[target] += 1;
        self.sh.fleet_attempts[target]
    }

    #[inline(always)]
    fn count_fleet_success(&mut self, target: usize) {
        if SHARED && self.sc.faults.has_fleet_rules() {
            self.sh.fleet_successes[target] += 1;
        }
    }

    /// Whether the retry budget allows one more retry now (a fleet's shared budget counts it);
    /// `first_attempts` is what a lone agent's budget weighs its retries against.
    fn budget_allows(&mut self, first_attempts: u32) -> bool {
        if SHARED && let Some(b) = self.sh.budget.as_mut() {
            return b.try_retry(self.now);
        }
        self.retry.budget_allows(self.ag.orchestrator_retries, first_attempts)
    }

    /// When the strategy's virtual-time budget runs out for this agent, if it has one.
    fn deadline(&self) -> Option<u64> {
        self.sc.policy.max_virtual_ms.filter(|_| self.strat.budgets).map(|max| self.ag.start_ms + max)
    }

    /// Whether work that ends at `end_ms` would exceed the time budget.
    fn past_time_budget(&self, end_ms: u64) -> bool {
        self.deadline().is_some_and(|d| end_ms > d)
    }
}
