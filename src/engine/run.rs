//! The run loop: a fleet of agents (one, unless the scenario says otherwise) under one
//! strategy, as a discrete-event simulation over virtual time. One queue of timed events
//! (model turns, tool attempts, their completions) drives every agent, so parallel calls
//! overlap in time and agents contend for the tools they share.

use super::breaker::{Admit, Breaker, FleetBreaker};
use super::events::{By, Event, Observer, TerminatedBy};
use super::faults::{FaultPlan, Fired, Injector};
use super::fleet::{Fleet, MAX_AGENTS, agent_key};
use super::judge::{Judge, Prob};
use super::load::{Admission, LoadFault, ProviderState, ServiceTimes, ToolState};
use super::loop_guard::LoopGuard;
use super::model::{Action, CallHistory, Perceived, act, perceive_failure};
use super::queue::{AGENT_BITS, Queue};
use super::retry::{MAX_ATTEMPTS_LIMIT, RetryPolicy};
use super::retry_budget::RetryBudget;
use super::rng::{LazyStream, domain, key};
use super::seen::{ResultCache, ResultKey, Seen, digits};
use super::strategy::{Partials, Routing, Strategy};
use super::task::Ending;
use crate::engine::Scenario;
use crate::envelope::read::{Signal, read_message};
use crate::envelope::render::{Body, Renderer};
use crate::envelope::{ErrorKind, ToolError, stated_seconds};
use crate::fault::{ErrorClass, Fault};

/// Model-decision draws per call per turn. Slots are laid out by call index, then turn, so a
/// one-call step's consecutive turns read neighbouring slots of one ChaCha block.
const DRAWS_PER_TURN: u64 = 4;
/// Turns per call index in the slot layout (far above any `max_steps`).
const TURN_SLOTS: u64 = 1 << 24;
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
    ToolDone(u32),
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

/// The outcome of the latest attempt of a call.
#[derive(Clone, Copy, Debug, Default)]
struct Outcome {
    class: Option<ErrorClass>,
    rule: Option<u16>,
    /// Whether the rule's trigger fired now (not a sticky repeat).
    fired: bool,
    /// A fault that came from the tool's load rather than a rule.
    load: Option<LoadFault>,
    retry_after_ms: Option<u64>,
    /// The server announced `retry_after_ms` with this answer (not a refusal repeating it).
    announced: bool,
    circuit: bool,
    probe: bool,
}

/// A server's announced wait: attempts on the target before `until_ms` are refused with the
/// same answer (as real rate limiters do).
#[derive(Clone, Copy, Debug, Default)]
struct Refusal {
    until_ms: u64,
    rule: u16,
}

/// One call of the current step, with its memory across re-issues.
#[derive(Clone, Copy, Debug)]
struct Slot {
    call: u32,
    call_id: u32,
    variant: u32,
    /// Arguments variant that sticks to a bad-arguments fault, and that fault's rule.
    bad_variant: Option<u32>,
    bad_rule: u16,
    /// A partial result sticks to the call: asking again returns the same data.
    partial_rule: Option<u16>,
    hist: CallHistory,
    active: bool,
    by: By,
    chain: u32,
    chain_start_ms: u64,
    prev_delay_ms: u64,
    outcome: Outcome,
    delivered: u32,
    last_class: Option<ErrorClass>,
    last_variant: u32,
    signal: Signal,
    more_available: bool,
    /// The attempt number at the tool of the latest attempt, and whether the breaker let it
    /// through as a probe (kept while it waits for a place).
    attempt: u32,
    /// The attempt's number on the tool across the fleet (for `scope = "fleet"` rules).
    fleet_attempt: u32,
    probe: bool,
    /// The latest attempt holds a place at a concurrency-limited tool / is being served (since
    /// `served_ms`, having read `read` under optimistic concurrency).
    place: bool,
    serving: bool,
    served_ms: u64,
    read: u64,
    /// The latest attempt repeats what cannot help (see `hopeless`).
    wasted: bool,
}

impl Slot {
    fn new(call: u32) -> Slot {
        Slot {
            call,
            call_id: 0,
            variant: 0,
            bad_variant: None,
            bad_rule: 0,
            partial_rule: None,
            hist: CallHistory::default(),
            active: true,
            by: By::Model,
            chain: 1,
            chain_start_ms: 0,
            prev_delay_ms: 0,
            outcome: Outcome::default(),
            delivered: 0,
            last_class: None,
            last_variant: 0,
            signal: Signal::Unmarked,
            more_available: false,
            attempt: 0,
            fleet_attempt: 0,
            probe: false,
            place: false,
            serving: false,
            served_ms: 0,
            read: 0,
            wasted: false,
        }
    }
}

const _: () = assert!(MAX_AGENTS < 1 << AGENT_BITS);

/// Buffers reused across runs, so a run allocates nothing once they have grown.
#[derive(Default)]
pub struct Workspace {
    agents: Vec<Agent>,
    starts: Vec<u64>,
    /// The arrivals key and fleet `starts` were drawn for.
    starts_for: Option<(u64, Fleet)>,
    arrivals: LazyStream,
    sh: Shared,
}

/// What every agent of a run shares: the event queue, the tools' state, the fleet's breakers
/// and retry budget, and the rendering of results.
#[derive(Default)]
struct Shared {
    queue: Queue<Ev>,
    tools: Vec<ToolState>,
    fleet_breakers: Vec<FleetBreaker>,
    budget: Option<RetryBudget>,
    /// The fleet's view of every target for rules with `scope = "fleet"`: its injector, and
    /// its attempts and successes on each target.
    fleet_injector: Injector,
    fleet_attempts: Vec<u32>,
    fleet_successes: Vec<u32>,
    provider: ProviderState,
    /// Each tool's peak in flight at the end of a run, for [`Event::Done`].
    peaks: Vec<u32>,
    renderer: Renderer,
    seen: ResultCache,
}

impl Workspace {
    /// Runs `f` with what the model reads in each result cached across the runs `f` simulates
    /// of `sc` (`sc` is borrowed throughout, so no other scenario can take its place).
    pub fn caching_for<R>(&mut self, sc: &Scenario, f: impl FnOnce(&mut Workspace) -> R) -> R {
        self.sh.seen.pin(std::ptr::from_ref(sc) as usize);
        let r = f(self);
        self.sh.seen.unpin();
        r
    }
}

/// One agent of a run: its calls, its own view of every target, its random streams and where
/// it is in the task.
#[derive(Default)]
struct Agent {
    slots: Vec<Slot>,
    attempts: Vec<u32>,
    successes: Vec<u32>,
    terminal: Vec<Option<u16>>,
    refusals: Vec<Refusal>,
    /// Until when each target's shared rate limit said it would refuse this agent (fleets).
    load_until: Vec<u64>,
    breakers: Vec<Breaker>,
    told_open: Vec<u32>,
    /// When the fleet breaker this agent was told about had opened.
    told_opened_at: Vec<u64>,
    injector: Injector,
    guard: LoopGuard,
    model: LazyStream,
    jitter: LazyStream,
    service: LazyStream,
    /// What this run's strategies have drawn from `service`.
    service_times: ServiceTimes,
    keyed_for: Option<(u64, u64, u64, u32)>,
    start_ms: u64,
    /// Model turns completed.
    turn: u32,
    next_step: usize,
    next_call_id: u32,
    tokens_used: u64,
    context_tokens: u64,
    pending: u32,
    first_attempts: u32,
    orchestrator_retries: u32,
    provider_chain: u32,
    provider_prev_delay: u64,
    end: Option<TerminatedBy>,
}

impl Agent {
    /// Agent `agent` of run `run`, starting at `start_ms`.
    /// `SHARED`: the run shares something (see [`drive`]); only then are the fleet's notes kept.
    #[inline(always)]
    fn reset<const SHARED: bool>(&mut self, sc: &Scenario, root: u64, run: u64, agent: u32, start_ms: u64) {
        let targets = sc.task.tools.len() + 1;
        self.slots.clear();
        for v in [&mut self.attempts, &mut self.successes] {
            v.clear();
            v.resize(targets, 0);
        }
        self.terminal.clear();
        self.terminal.resize(targets, None);
        self.refusals.clear();
        self.refusals.resize(targets, Refusal::default());
        if SHARED && sc.loaded {
            self.load_until.clear();
            self.load_until.resize(targets, 0);
        }
        self.told_open.clear();
        self.told_open.resize(targets, NEVER);
        // Read only beside a `told_open` set in this run, which writes it too (fleet breakers).
        if SHARED && self.told_opened_at.len() < targets {
            self.told_opened_at.resize(targets, 0);
        }
        self.breakers.resize_with(targets, Breaker::default);
        self.breakers.iter_mut().for_each(Breaker::reset);
        self.guard.reset();
        sc.faults.reset(&mut self.injector, root, sc.name_hash, run, agent, &sc.target_hashes);
        // The strategies of one run share the agent's streams: only the first keys them.
        let id = (root, sc.name_hash, run, agent);
        if self.keyed_for != Some(id) {
            self.keyed_for = Some(id);
            let stream = |domain| agent_key(key(&[root, sc.name_hash, run, domain]), agent);
            self.model.reset(stream(domain::MODEL));
            self.jitter.reset(stream(domain::JITTER));
            self.service.reset(stream(domain::SERVICE));
            self.service_times.clear();
        }
        self.start_ms = start_ms;
        self.turn = 0;
        self.next_step = 0;
        self.next_call_id = 1;
        self.tokens_used = 0;
        self.context_tokens = u64::from(sc.profile.prompt_tokens);
        self.pending = 0;
        self.first_attempts = 0;
        self.orchestrator_retries = 0;
        self.provider_chain = 0;
        self.provider_prev_delay = 0;
        self.end = None;
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
    simulate_judged(sc, strat, run, root, ws, obs, &mut &sc.profile)
}

/// [`simulate`] with the model's probabilities read from `judge` rather than the scenario's
/// profile (its caps and latencies still come from the profile).
#[inline(always)]
pub fn simulate_judged<O: Observer, J: Judge>(
    sc: &Scenario,
    strat: &Strategy,
    run: u64,
    root: u64,
    ws: &mut Workspace,
    obs: &mut O,
    judge: &mut J,
) -> TerminatedBy {
    let what = RunOf { sc, strat, run, root };
    if sc.fleet.agents > 1 || sc.loaded {
        drive_shared(what, ws, obs, judge)
    } else {
        drive::<O, J, false>(what, ws, obs, judge)
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
fn drive_shared<O: Observer, J: Judge>(
    what: RunOf<'_>,
    ws: &mut Workspace,
    obs: &mut O,
    judge: &mut J,
) -> TerminatedBy {
    drive::<O, J, true>(what, ws, obs, judge)
}

/// [`simulate`], compiled apart for runs where agents share something (`SHARED`: several
/// agents, or tools with limits) and for a lone agent, whose loop then carries nothing of it.
#[inline(always)]
fn drive<O: Observer, J: Judge, const SHARED: bool>(
    what: RunOf<'_>,
    ws: &mut Workspace,
    obs: &mut O,
    judge: &mut J,
) -> TerminatedBy {
    let RunOf { sc, strat, run, root } = what;
    // A lone agent's loop knows it has one agent (the constant folds through it).
    let n = if SHARED { sc.fleet.agents as usize } else { 1 };
    let fleet = SHARED && n > 1;
    ws.sh.queue.clear();
    ws.sh.seen.serve(std::ptr::from_ref(sc) as usize);
    let shared_breaker = SHARED && strat.breaker && (strat.fleet_breaker || sc.policy.breaker.fleet);
    if SHARED {
        ws.sh.tools.resize_with(sc.loads.len(), ToolState::default);
        for (t, load) in ws.sh.tools.iter_mut().zip(&sc.loads) {
            t.reset(load);
        }
        ws.sh.provider.reset(&sc.provider_load);
        ws.sh.fleet_breakers.resize_with(sc.loads.len(), FleetBreaker::default);
        ws.sh.fleet_breakers.iter_mut().for_each(FleetBreaker::reset);
        if sc.faults.has_fleet_rules() {
            // Keyed as agent 0: a fleet of one meets the faults a lone agent meets.
            sc.faults.reset(&mut ws.sh.fleet_injector, root, sc.name_hash, run, 0, &sc.target_hashes);
            for v in [&mut ws.sh.fleet_attempts, &mut ws.sh.fleet_successes] {
                v.clear();
                v.resize(sc.task.tools.len() + 1, 0);
            }
        }
    }
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
            Sim::<O, J, SHARED> {
                sc,
                strat,
                retry,
                obs,
                judge,
                sh: &mut *sh,
                shared_breaker,
                ag: $ag,
                a: $a,
                now: $now,
            }
        };
    }
    if !SHARED {
        // A lone agent keeps one `Sim` for its whole run. Built anew for every event, as a
        // fleet's must be, it was 2% of the lone agent's instructions in the criterion bench
        // (whose crate keeps the handlers out of line, so a `Sim` lives in memory).
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
    // Calls the ended agents left at the tools end there; then every tool is idle again.
    while let Some((t, a, ev)) = sh.queue.pop() {
        abandon(sc, sh, &mut agents[a as usize], t, ev);
    }
    debug_assert!(sh.tools.iter().all(ToolState::idle), "a call kept its place at a tool");
    // Counted only where something is shared (a lone agent's tools are not tracked).
    sh.peaks.clear();
    sh.peaks.extend(sh.tools.iter().map(ToolState::peak));
    obs.event(&Event::Done { peaks: &sh.peaks });
    agents[0].end.unwrap_or(TerminatedBy::ProtocolError)
}

/// An event of an agent that has ended: a call it left at a tool still ends there, giving its
/// place to the next waiting call (and committing its write, which reached the tool).
fn abandon(sc: &Scenario, sh: &mut Shared, ag: &mut Agent, t: u64, ev: Ev) {
    let Shared { queue, tools, .. } = sh;
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
    sh: &mut Shared,
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

/// One event of one agent: the agent, what it shares with the fleet, and the time.
struct Sim<'a, O, J, const SHARED: bool> {
    sc: &'a Scenario,
    strat: &'a Strategy,
    retry: &'a RetryPolicy,
    obs: &'a mut O,
    /// Where the model's probabilities are read.
    judge: &'a mut J,
    sh: &'a mut Shared,
    /// The strategy's breaker is the fleet's (one per tool, `Shared::fleet_breakers`).
    shared_breaker: bool,
    ag: &'a mut Agent,
    a: u32,
    now: u64,
}

impl<O: Observer, J: Judge, const SHARED: bool> Sim<'_, O, J, SHARED> {
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
                Ev::ToolDone(i) => self.tool_done(i as usize),
            },
        }
    }

    fn schedule(&mut self, t: u64, ev: Ev) {
        self.sh.queue.push(t, self.a, ev);
    }

    fn finish(&mut self, by: TerminatedBy) {
        let text = match by {
            TerminatedBy::Answer => self.sc.task.final_text.as_str(),
            TerminatedBy::GaveUp => GIVE_UP_TEXT,
            _ => "",
        };
        self.ag.end = Some(by);
        self.obs.event(&Event::End { by, t_ms: self.now, started_ms: self.ag.start_ms, text });
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

    fn turn_start(&mut self) {
        for s in self.ag.slots.iter().filter(|s| s.active && s.delivered != 1) {
            self.obs.event(&Event::ProtocolViolation { call_id: s.call_id });
        }
        if let Some(script) = self.sc.task.script
            && script.ending == Ending::CutOff
            && self.ag.next_step == self.sc.task.steps.len()
            && self.ag.slots.iter().all(|s| !s.active || s.delivered == 1)
        {
            // The recording stops here: no final model call.
            return self.finish(TerminatedBy::StepCap);
        }
        if self.ag.turn >= self.sc.policy.max_steps {
            return self.finish(TerminatedBy::StepCap);
        }
        self.schedule(self.now, Ev::ModelAttempt);
    }

    /// One attempt at the provider: a fault (retried by the orchestrator, or the end of the
    /// run), or the model's next turn.
    fn model_attempt(&mut self) {
        // Budgets are checked before every model call with the cost that call will add.
        if self.past_time_budget(self.now.saturating_add(self.sc.profile.model_latency_ms)) {
            return self.finish(TerminatedBy::TimeBudget);
        }
        let sc = self.sc;
        let plan = &sc.faults;
        let prov = plan.provider_target();
        self.ag.attempts[prov] += 1;
        let attempt = self.ag.attempts[prov];
        let fleet_attempt = self.count_fleet_attempt(prov);
        let is_retry = self.ag.provider_chain > 0;
        let refusal = self.ag.refusals[prov];
        // A retry sent before the wait the fleet's rate limit announced is refused again.
        let early = SHARED && sc.loaded && is_retry && self.now < self.ag.load_until[prov];
        // (the fault, its rule if scheduled, the wait the answer announces, whether it was
        // decided now rather than the provider refusing a call that came back before its wait)
        let fired = if sc.task.script.is_none() && self.now < refusal.until_ms {
            let fault = &plan.rules[usize::from(refusal.rule)].fault;
            Some((fault, Some(refusal.rule), Some(refusal.until_ms - self.now), false))
        } else if SHARED
            && sc.loaded
            && let Err(wait) = self.sh.provider.admit(self.now, self.ag.context_tokens)
        {
            Some((LoadFault::RateLimited.fault(), None, wait, true))
        } else {
            let at = Attempt { target: prov, attempt, fleet_attempt, successes: self.ag.successes[prov] };
            decide_fault::<SHARED>(plan, self.sh, &mut self.ag.injector, at, self.now)
                .map(|f| (&plan.rules[usize::from(f.rule)].fault, Some(f.rule), f.retry_after_ms, true))
        };
        if let Some((fault, rule, retry_after_ms, fresh)) = fired {
            self.ag.provider_chain += 1;
            let latency = if let Fault::Timeout { after_ms } = fault { *after_ms } else { 0 };
            let answered = self.now.saturating_add(latency);
            match (fresh, retry_after_ms, rule) {
                (true, Some(ms), Some(rule)) => {
                    self.ag.refusals[prov] = Refusal { until_ms: answered.saturating_add(ms), rule };
                }
                (true, Some(ms), None) => self.ag.load_until[prov] = answered.saturating_add(ms),
                _ => {}
            }
            let mut retry = sc.task.script.is_some()
                || (self.retry.may_retry(fault.class(), self.ag.provider_chain, retry_after_ms)
                    && self.budget_allows(self.ag.first_attempts.max(1)));
            let mut delay = 0;
            if retry && sc.task.script.is_none() {
                let slot = jitter_slot(PROVIDER_JITTER_BASE, u64::from(self.ag.turn), self.ag.provider_chain);
                let u = self.ag.jitter.unit(slot);
                delay = self.retry.delay_ms(self.ag.provider_chain - 1, self.ag.provider_prev_delay, u, retry_after_ms);
            }
            let next_at = answered.saturating_add(delay);
            let over_budget = self.past_time_budget(answered)
                || (retry && self.past_time_budget(next_at.saturating_add(sc.profile.model_latency_ms)));
            retry &= !over_budget;
            self.obs.event(&Event::ModelCall {
                turn: self.ag.turn + 1,
                t_ms: self.now,
                status: fault.status().unwrap_or(0),
                tokens_in: 0,
                tokens_out: 0,
                retry: is_retry,
                rule,
                fired: fresh && rule.is_some(),
                wasted: (!fresh && is_retry) || early,
                load: rule.is_none(),
                ends: !retry,
            });
            if retry {
                self.ag.provider_prev_delay = delay;
                self.ag.orchestrator_retries += 1;
                self.schedule(next_at, Ev::ModelAttempt);
            } else if over_budget {
                // A slow answer ends at the agent's deadline; a retry that could not finish in
                // time is not sent.
                self.now = self.deadline().map_or(answered, |d| answered.min(d));
                self.finish(TerminatedBy::TimeBudget);
            } else {
                self.now = answered;
                self.finish(TerminatedBy::GaveUp);
            }
            return;
        }
        self.ag.successes[prov] += 1;
        self.count_fleet_success(prov);
        self.ag.provider_chain = 0;
        self.ag.provider_prev_delay = 0;
        self.ag.turn += 1;
        let ending = self.decide();
        let tokens_out = match ending {
            Some(by) => {
                let text = if by == TerminatedBy::Answer { self.sc.task.final_text.len() } else { GIVE_UP_TEXT.len() };
                text as u64 / 4 + 8
            }
            None => {
                let calls = &sc.task.calls;
                self.ag
                    .slots
                    .iter()
                    .filter(|s| s.active)
                    .map(|s| calls[s.call as usize].args_for(s.variant).len() as u64 / 4 + 8)
                    .sum()
            }
        };
        let tokens_in = self.ag.context_tokens;
        if self.strat.budgets
            && sc.policy.max_tokens.is_some_and(|max| self.ag.tokens_used + tokens_in + tokens_out > max)
        {
            return self.finish(TerminatedBy::TokenBudget);
        }
        self.ag.tokens_used += tokens_in + tokens_out;
        self.ag.context_tokens += tokens_out;
        if SHARED && sc.loaded {
            self.sh.provider.charge(tokens_out);
        }
        self.obs.event(&Event::ModelCall {
            turn: self.ag.turn,
            t_ms: self.now,
            status: 200,
            tokens_in,
            tokens_out,
            retry: is_retry,
            rule: None,
            fired: false,
            wasted: false,
            load: false,
            ends: ending.is_some(),
        });
        self.now = self.now.saturating_add(sc.profile.model_latency_ms);
        match ending {
            Some(by) => self.finish(by),
            None => self.issue(),
        }
    }

    /// The model reads every result of its last turn and decides the next one: `Some` ends
    /// the run that way; `None` leaves the calls to send in the active slots.
    fn decide(&mut self) -> Option<TerminatedBy> {
        if let Some(script) = self.sc.task.script {
            // Recorded decisions: accept every result and take the next recorded turn.
            let by = if script.ending == Ending::GaveUp { TerminatedBy::GaveUp } else { TerminatedBy::Answer };
            return self.advance(by);
        }
        let sc = self.sc;
        let profile = &sc.profile;
        let turn = u64::from(self.ag.turn);
        let mut give_up = false;
        let mut reissue = false;
        let Agent { slots, model, .. } = &mut *self.ag;
        for (i, s) in slots.iter_mut().enumerate().filter(|(_, s)| s.active) {
            let slot = (i as u64 * TURN_SLOTS + turn) * DRAWS_PER_TURN;
            let perceived = match s.last_class {
                None => Perceived::Ok,
                Some(ErrorClass::Partial) if s.more_available => Perceived::Partial,
                Some(ErrorClass::Partial) => Perceived::Ok,
                Some(c) => perceive_failure(&mut *self.judge, s.signal, c, model.unit(slot), model.unit(slot + 1)),
            };
            let u = if perceived == Perceived::Ok { 0.0 } else { model.unit(slot + 2) };
            let action = act(profile, &mut *self.judge, perceived, &s.hist, u);
            match action {
                Action::Accept => s.active = false,
                Action::Repeat => {
                    if matches!(perceived, Perceived::Transient | Perceived::Terminal) {
                        s.hist.model_retries += 1;
                    }
                    s.by = By::ModelReissue;
                    reissue = true;
                }
                Action::FixArgs => {
                    s.hist.fix_attempts += 1;
                    let old = s.variant;
                    s.variant += 1;
                    if s.bad_variant == Some(old) {
                        let fixed = self.judge.below(Prob::FixArgs, model.unit(slot + 3));
                        s.bad_variant = if fixed { None } else { Some(s.variant) };
                    }
                    s.by = By::ModelReissue;
                    reissue = true;
                }
                Action::GiveUp => give_up = true,
            }
            if O::EXPLAINS
                && perceived != Perceived::Ok
                && let Some(truth) = s.last_class
            {
                let draws = self.judge.take_draws();
                let (call_id, signal) = (s.call_id, s.signal);
                self.obs.event(&Event::Decision { call_id, signal, truth, perceived, action, draws: &draws });
            }
        }
        if give_up {
            return Some(TerminatedBy::GaveUp);
        }
        if reissue {
            return None;
        }
        self.advance(TerminatedBy::Answer)
    }

    /// Loads the task's next step into the slots, or ends with `by` when the task has none left.
    fn advance(&mut self, by: TerminatedBy) -> Option<TerminatedBy> {
        if self.ag.next_step == self.sc.task.steps.len() {
            return Some(by);
        }
        self.ag.slots.clear();
        let step = &self.sc.task.steps[self.ag.next_step];
        self.ag.slots.extend(step.iter().map(|&c| Slot::new(c)));
        self.ag.next_step += 1;
        None
    }

    /// Sends the active calls the model's turn asked for, once that turn has taken its time.
    fn issue(&mut self) {
        let sc = self.sc;
        let calls = &sc.task.calls;
        let at = self.now;
        self.ag.pending = 0;
        for i in 0..self.ag.slots.len() {
            let s = &mut self.ag.slots[i];
            if !s.active {
                continue;
            }
            s.call_id = self.ag.next_call_id;
            self.ag.next_call_id += 1;
            s.delivered = 0;
            s.chain = 1;
            s.chain_start_ms = at;
            s.prev_delay_ms = 0;
            let spec = &calls[s.call as usize];
            self.obs.event(&Event::ToolCall {
                turn: self.ag.turn,
                call_id: s.call_id,
                tool: &sc.task.tools[usize::from(spec.tool)],
                args: spec.args_for(s.variant),
                variant: s.variant,
            });
            self.ag.pending += 1;
            self.schedule(at, Ev::ToolAttempt(i as u32));
        }
        if self.ag.pending == 0 {
            // A text-only turn (recorded scripts have them): the next turn follows it.
            self.schedule(at, Ev::TurnStart);
        }
    }

    /// A re-issue that cannot help: identical to a call whose failure repeating does not fix.
    #[inline(always)]
    fn hopeless(&self, i: usize) -> bool {
        let s = &self.ag.slots[i];
        match s.by {
            By::Model => false,
            By::Orchestrator => s.outcome.class.is_some_and(|c| !c.retryable()),
            By::ModelReissue => {
                s.variant == s.last_variant
                    && matches!(s.last_class, Some(ErrorClass::BadArgs | ErrorClass::Terminal | ErrorClass::Partial))
            }
        }
    }

    /// An attempt leaves for the tool: the breaker may answer instead; a tool under load may
    /// refuse it or keep it waiting; else it is served.
    fn tool_attempt(&mut self, i: usize) {
        let now = self.now;
        let sc = self.sc;
        let spec = &sc.task.calls[self.ag.slots[i].call as usize];
        let tool = usize::from(spec.tool);
        let mut probe = false;
        if self.strat.breaker {
            let shared = SHARED && self.shared_breaker;
            let cfg = &sc.policy.breaker;
            let admit = if shared {
                self.sh.fleet_breakers[tool].admit(cfg, now, self.a)
            } else {
                self.ag.breakers[tool].admit(cfg, now)
            };
            match admit {
                Admit::Yes => {}
                Admit::Probe => probe = true,
                Admit::Reject { remaining_ms } => {
                    let s = &mut self.ag.slots[i];
                    s.outcome = Outcome {
                        class: Some(ErrorClass::Transient),
                        retry_after_ms: Some(remaining_ms),
                        circuit: true,
                        ..Outcome::default()
                    };
                    let call_id = s.call_id;
                    self.obs.event(&Event::Rejected { call_id, tool: spec.tool });
                    let told = self.ag.told_open[tool];
                    // A fleet breaker that opened again since this agent was told is news.
                    let same_opening =
                        !shared || self.ag.told_opened_at[tool] == self.sh.fleet_breakers[tool].opened_at;
                    if told != NEVER && told < self.ag.turn && same_opening {
                        return self.finish(TerminatedBy::BreakerAbort);
                    }
                    self.ag.told_open[tool] = self.ag.turn;
                    if shared {
                        self.ag.told_opened_at[tool] = self.sh.fleet_breakers[tool].opened_at;
                    }
                    return self.schedule(now, Ev::ToolDone(i as u32));
                }
            }
        }
        if self.ag.slots[i].by == By::Model {
            self.ag.first_attempts += 1;
            if let (true, Some(b)) = (SHARED, self.sh.budget.as_mut()) {
                b.first(now);
            }
        }
        self.ag.attempts[tool] += 1;
        let fleet_attempt = self.count_fleet_attempt(tool);
        // A retry before the wait the tool's shared rate limit announced is refused again.
        let early = SHARED && sc.loaded && self.ag.slots[i].by != By::Model && now < self.ag.load_until[tool];
        let wasted = self.hopeless(i) || early;
        let s = &mut self.ag.slots[i];
        s.attempt = self.ag.attempts[tool];
        if SHARED {
            s.fleet_attempt = fleet_attempt;
        }
        s.probe = probe;
        s.wasted = wasted;
        if SHARED && sc.loaded {
            match self.sh.tools[tool].admit(now, (self.a, i as u32)) {
                Admission::Served { place } => s.place = place,
                Admission::Queued => return,
                Admission::Refused(load, wait) => {
                    if let Some(w) = wait {
                        self.ag.load_until[tool] = now.saturating_add(w);
                    }
                    s.outcome = Outcome {
                        class: Some(load.class()),
                        load: Some(load),
                        retry_after_ms: wait,
                        probe,
                        ..Outcome::default()
                    };
                    s.served_ms = now;
                    self.attempt_event(i);
                    return self.schedule(now, Ev::ToolDone(i as u32));
                }
            }
        }
        self.serve(i);
    }

    /// A call that waited for a place at its tool has one now.
    #[inline(always)]
    fn tool_serve(&mut self, i: usize) {
        self.ag.slots[i].place = true;
        self.serve(i);
    }

    /// The tool serves the attempt: a scheduled fault, or the tool's answer after its latency.
    #[inline(always)]
    fn serve(&mut self, i: usize) {
        let now = self.now;
        let sc = self.sc;
        let plan = &sc.faults;
        let spec = &sc.task.calls[self.ag.slots[i].call as usize];
        let tool = usize::from(spec.tool);
        let Agent { slots, successes, terminal, refusals, injector, service, service_times, .. } = &mut *self.ag;
        let s = &mut slots[i];
        let attempt = s.attempt;
        let memory = sc.task.script.is_none();
        let refused = memory && now < refusals[tool].until_ms;
        // (rule, whether its trigger fired now, the wait it announces, whether the server sent it now)
        let (rule, fired, retry_after_ms, announced) = if refused {
            (Some(refusals[tool].rule), false, Some(refusals[tool].until_ms - now), false)
        } else if let (true, Some(r)) = (memory, terminal[tool]) {
            let ra = plan.rules[usize::from(r)].fault.retry_after_ms();
            (Some(r), false, ra, ra.is_some())
        } else if memory && s.bad_variant == Some(s.variant) {
            (Some(s.bad_rule), false, None, false)
        } else if let (true, Some(r)) = (memory, s.partial_rule) {
            (Some(r), false, None, false)
        } else {
            let at = Attempt { target: tool, attempt, fleet_attempt: s.fleet_attempt, successes: successes[tool] };
            match decide_fault::<SHARED>(plan, self.sh, injector, at, now) {
                Some(f) => (Some(f.rule), true, f.retry_after_ms, f.retry_after_ms.is_some()),
                None => (None, false, None, false),
            }
        };
        let fault = rule.map(|r| &plan.rules[usize::from(r)].fault);
        let class = fault.map(Fault::class);
        if let (true, Some(r), Some(c)) = (fired, rule, class) {
            match c {
                ErrorClass::Terminal => terminal[tool] = Some(r),
                ErrorClass::BadArgs => {
                    s.bad_variant = Some(s.variant);
                    s.bad_rule = r;
                }
                ErrorClass::Partial => s.partial_rule = Some(r),
                ErrorClass::Transient | ErrorClass::RateLimited => {}
            }
        }
        // A retry refused because it came back before the server's announced wait is wasted
        // on either path, like a re-issue that repeating cannot fix.
        s.wasted |= refused && s.by != By::Model;
        s.outcome = Outcome { class, rule, fired, retry_after_ms, announced, probe: s.probe, ..Outcome::default() };
        let latency = match (fault, if SHARED { sc.loads[tool].service } else { None }) {
            (Some(Fault::Timeout { after_ms }), _) if !refused => *after_ms,
            (_, Some(dist)) => service_times.get(tool, attempt, dist, || {
                let slot = (tool as u64) << 40 | u64::from(attempt) << 1;
                dist.sample(service.unit(slot), service.unit(slot + 1))
            }),
            _ => spec.latency_ms.unwrap_or(sc.profile.tool_latency_ms),
        };
        s.served_ms = now;
        if SHARED {
            s.serving = true;
            s.read = self.sh.tools[tool].start();
        }
        if !(SHARED && sc.loads[tool].occ) {
            self.attempt_event(i);
        }
        self.schedule(now.saturating_add(latency), Ev::ToolDone(i as u32));
    }

    /// Reports the latest attempt of slot `i` (a write under optimistic concurrency once it
    /// ends, when its outcome is known).
    #[inline(always)]
    fn attempt_event(&mut self, i: usize) {
        let s = &self.ag.slots[i];
        let o = s.outcome;
        let fault = match (o.load, o.rule) {
            (Some(l), _) => Some(l.fault()),
            (None, r) => r.map(|r| &self.sc.faults.rules[usize::from(r)].fault),
        };
        self.obs.event(&Event::Attempt {
            call_id: s.call_id,
            tool: self.sc.task.calls[s.call as usize].tool,
            attempt: s.attempt,
            by: s.by,
            t_ms: s.served_ms,
            class: o.class,
            status: fault.and_then(Fault::status),
            rule: o.rule,
            fired: o.fired,
            wasted: s.wasted,
            load: o.load.is_some(),
        });
    }

    fn tool_done(&mut self, i: usize) {
        let now = self.now;
        let spec = &self.sc.task.calls[self.ag.slots[i].call as usize];
        let tool = usize::from(spec.tool);
        let s = &mut self.ag.slots[i];
        if SHARED && std::mem::take(&mut s.serving) {
            let occ = self.sc.loads[tool].occ;
            let write = (occ && s.outcome.class.is_none()).then_some(s.read);
            if !self.sh.tools[tool].end(write) {
                s.outcome =
                    Outcome { class: Some(ErrorClass::Transient), load: Some(LoadFault::Conflict), ..s.outcome };
            }
            if occ {
                self.attempt_event(i);
            }
        }
        if SHARED && std::mem::take(&mut self.ag.slots[i].place) {
            hand_on(&mut self.sh.queue, &mut self.sh.tools[tool], now);
        }
        let s = self.ag.slots[i];
        let o = s.outcome;
        if let (true, Some(ms), Some(rule)) = (o.announced, o.retry_after_ms, o.rule) {
            self.ag.refusals[tool] = Refusal { until_ms: now.saturating_add(ms), rule };
        }
        if self.strat.breaker && !o.circuit {
            let failed =
                matches!(o.class, Some(ErrorClass::Transient | ErrorClass::RateLimited | ErrorClass::Terminal));
            let cfg = &self.sc.policy.breaker;
            let tripped = if SHARED && self.shared_breaker {
                self.sh.fleet_breakers[tool].record(cfg, now, failed, o.probe, self.a)
            } else {
                self.ag.breakers[tool].record(cfg, now, failed, o.probe)
            };
            if tripped {
                self.ag.told_open[tool] = NEVER;
                self.obs.event(&Event::BreakerTrip { tool: tool as u16, t_ms: now });
            }
        }
        if !o.class.is_some_and(ErrorClass::is_failure) && !o.circuit {
            self.ag.successes[tool] += 1;
            self.count_fleet_success(tool);
        }
        if let Some(c) = o.class
            && !o.circuit
            && self.strat.routing == Routing::Orchestrator
            && self.retry.may_retry(c, s.chain, o.retry_after_ms)
            && self.budget_allows(self.ag.first_attempts)
        {
            let u = self.ag.jitter.unit(jitter_slot(0, u64::from(s.call_id), s.chain));
            let delay = self.retry.delay_ms(s.chain - 1, s.prev_delay_ms, u, o.retry_after_ms);
            let next_at = now.saturating_add(delay);
            let nominal = spec.latency_ms.unwrap_or(self.sc.profile.tool_latency_ms);
            if self.past_time_budget(next_at.saturating_add(nominal)) {
                return self.finish(TerminatedBy::TimeBudget);
            }
            let s = &mut self.ag.slots[i];
            s.prev_delay_ms = delay;
            s.chain += 1;
            s.by = By::Orchestrator;
            self.ag.orchestrator_retries += 1;
            return self.schedule(next_at, Ev::ToolAttempt(i as u32));
        }
        self.deliver(i);
    }

    /// Hands the call's one result to the model, rendered as the model will see it.
    fn deliver(&mut self, i: usize) {
        let now = self.now;
        let sc = self.sc;
        let strat = self.strat;
        let Agent { slots, guard, context_tokens, .. } = &mut *self.ag;
        let Shared { renderer, seen, .. } = &mut *self.sh;
        let s = &mut slots[i];
        let o = s.outcome;
        let spec = &sc.task.calls[s.call as usize];
        let tool_name = &sc.task.tools[usize::from(spec.tool)];
        let error = o.class.filter(|&c| c != ErrorClass::Partial);
        let body = match o.class {
            None => Body::Ok { json: &spec.result_json, text_literal: spec.result_literal() },
            Some(ErrorClass::Partial) => Body::Partial {
                json: &spec.result_json,
                stated_complete: strat.partials == Partials::Terminal,
                cursor: o
                    .rule
                    .is_some_and(|r| sc.faults.rules[usize::from(r)].fault == Fault::Ambiguous { cursor: true }),
            },
            Some(class) => {
                let kind = match (o.load, o.rule) {
                    (Some(l), _) => ErrorKind::Fault(l.fault()),
                    (None, Some(r)) if !o.circuit => ErrorKind::Fault(&sc.faults.rules[usize::from(r)].fault),
                    _ => ErrorKind::CircuitOpen,
                };
                let err = ToolError {
                    kind,
                    class,
                    tool: tool_name,
                    attempts: s.chain,
                    retry_after_ms: o.retry_after_ms,
                    body: &spec.result_json,
                };
                Body::Error { err, encoding: strat.encoding }
            }
        };
        let read = |bytes: &str| Seen { len: bytes.len(), reading: o.class.map(|_| read_message(sc.format, bytes)) };
        let (content, seen) = if O::READS_CONTENT {
            let bytes = renderer.render(sc.format, s.call_id, tool_name, body);
            (bytes, read(bytes))
        } else {
            let key = ResultKey {
                call: s.call,
                class: o.class,
                rule: o.class.and(o.rule.filter(|_| !o.circuit)),
                load: error.and(o.load),
                attempts: if error.is_some() { s.chain } else { 0 },
                retry_after_s: error.and(o.retry_after_ms).map(stated_seconds),
                encoding: error.map(|_| strat.encoding),
                stated_complete: o.class == Some(ErrorClass::Partial) && strat.partials == Partials::Terminal,
            };
            let cached = seen.get_or_make(key, || {
                let bytes = renderer.render(sc.format, 0, tool_name, body);
                Seen { len: bytes.len() - 1, ..read(bytes) }
            });
            ("", Seen { len: cached.len + digits(s.call_id), ..cached })
        };
        let failed = o.class.is_some_and(ErrorClass::is_failure);
        let reading = seen.reading;
        s.signal = reading.filter(|_| failed).map_or(Signal::Unmarked, |r| r.signal);
        s.more_available = o.class == Some(ErrorClass::Partial) && reading.is_some_and(|r| r.more_available);
        let raw_leak = failed && reading.is_some_and(|r| r.stack_trace);
        *context_tokens += seen.len as u64 / 4;
        self.obs.event(&Event::ToolResult {
            call_id: s.call_id,
            class: o.class,
            content,
            raw_leak,
            latency_ms: now - s.chain_start_ms,
        });
        s.delivered += 1;
        s.last_class = o.class;
        s.last_variant = s.variant;
        if self.strat.loop_guard
            && let Some(c) = o.class
            && guard.hit(spec.tool, spec.args_id, s.variant, c) >= sc.policy.loop_guard_k
        {
            return self.finish(TerminatedBy::LoopGuard);
        }
        self.ag.pending -= 1;
        if self.ag.pending == 0 {
            self.schedule(now, Ev::TurnStart);
        }
    }
}
