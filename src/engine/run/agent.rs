//! An agent's state in a run (its calls, its view of every target, its streams, where it is in
//! the task), what the agents of a run share, and the buffers reused across runs.

use super::*;

/// The outcome of the latest attempt of a call.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Outcome {
    pub(super) class: Option<ErrorClass>,
    pub(super) rule: Option<u16>,
    /// Whether the rule's trigger fired now (not a sticky repeat).
    pub(super) fired: bool,
    /// A fault that came from the tool's load rather than a rule.
    pub(super) load: Option<LoadFault>,
    pub(super) retry_after_ms: Option<u64>,
    /// The server announced `retry_after_ms` with this answer (not a refusal repeating it).
    pub(super) announced: bool,
    pub(super) circuit: bool,
    pub(super) probe: bool,
    /// The rule whose fault changed the successful result (wrong, large or injected).
    pub(super) taint: Option<u16>,
}

/// A server's announced wait: attempts on the target before `until_ms` are refused with the
/// same answer (as real rate limiters do).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Refusal {
    pub(super) until_ms: u64,
    pub(super) rule: u16,
}

/// One call of the current step, with its memory across re-issues.
#[derive(Clone, Copy, Debug)]
pub(super) struct Slot {
    pub(super) call: u32,
    pub(super) call_id: u32,
    pub(super) variant: u32,
    /// Arguments variant that sticks to a bad-arguments fault, and that fault's rule.
    pub(super) bad_variant: Option<u32>,
    pub(super) bad_rule: u16,
    /// A partial result sticks to the call: asking again returns the same data.
    pub(super) partial_rule: Option<u16>,
    pub(super) hist: CallHistory,
    pub(super) active: bool,
    pub(super) by: By,
    pub(super) chain: u32,
    pub(super) chain_start_ms: u64,
    pub(super) prev_delay_ms: u64,
    pub(super) outcome: Outcome,
    pub(super) delivered: u32,
    pub(super) last_class: Option<ErrorClass>,
    pub(super) last_variant: u32,
    pub(super) signal: Signal,
    pub(super) more_available: bool,
    /// The attempt number at the tool of the latest attempt, and whether the breaker let it
    /// through as a probe (kept while it waits for a place).
    pub(super) attempt: u32,
    /// The attempt's number on the tool across the fleet (for `scope = "fleet"` rules).
    pub(super) fleet_attempt: u32,
    pub(super) probe: bool,
    /// The latest attempt holds a place at a concurrency-limited tool / is being served (since
    /// `served_ms`, having read `read` under optimistic concurrency).
    pub(super) place: bool,
    pub(super) serving: bool,
    pub(super) served_ms: u64,
    pub(super) read: u64,
    /// The latest attempt repeats what cannot help (see `hopeless`).
    pub(super) wasted: bool,
    /// A write tool's call: an attempt of it has committed, and one has under the idempotency
    /// key the latest attempt carried.
    pub(super) written: bool,
    pub(super) key_written: bool,
    /// The call id of the attempt that first carried the latest attempt's idempotency key.
    pub(super) key_call: u32,
    /// The rule that tainted the latest result delivered (as `last_class` is its class).
    pub(super) taint: Option<u16>,
    /// The model follows this result's injected instruction with this call (set while it
    /// decides, taken when the call is added).
    pub(super) follow: Option<u32>,
}

impl Slot {
    pub(super) fn new(call: u32) -> Slot {
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
            written: false,
            key_written: false,
            key_call: 0,
            taint: None,
            follow: None,
        }
    }
}

const _: () = assert!(MAX_AGENTS < 1 << AGENT_BITS);

/// Buffers reused across runs, so a run allocates nothing once they have grown.
#[derive(Default)]
pub struct Workspace {
    pub(super) agents: Vec<Agent>,
    pub(super) starts: Vec<u64>,
    /// The arrivals key and fleet `starts` were drawn for.
    pub(super) starts_for: Option<(u64, Fleet)>,
    pub(super) arrivals: LazyStream,
    pub(super) sh: Fleetwide,
}

/// What every agent of a run shares: the event queue, the tools' state, the fleet's breakers
/// and retry budget, and the rendering of results.
#[derive(Default)]
pub(super) struct Fleetwide {
    pub(super) queue: Queue<Ev>,
    pub(super) tools: Vec<ToolState>,
    pub(super) fleet_breakers: Vec<FleetBreaker>,
    pub(super) budget: Option<RetryBudget>,
    /// The fleet's view of every target for rules with `scope = "fleet"`: its injector, and
    /// its attempts and successes on each target.
    pub(super) fleet_injector: Injector,
    pub(super) fleet_attempts: Vec<u32>,
    pub(super) fleet_successes: Vec<u32>,
    pub(super) provider: ProviderState,
    /// Each tool's peak in flight at the end of a run, for [`Event::Done`].
    pub(super) peaks: Vec<u32>,
    pub(super) renderer: Renderer,
    pub(super) seen: ResultCache,
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
pub(super) struct Agent {
    pub(super) slots: Vec<Slot>,
    pub(super) attempts: Vec<u32>,
    pub(super) successes: Vec<u32>,
    /// Whether each target's latest attempt failed or returned a wrong value (the task's goal
    /// reads it).
    pub(super) last_failed: Vec<bool>,
    pub(super) terminal: Vec<Option<u16>>,
    pub(super) refusals: Vec<Refusal>,
    /// Until when each target's shared rate limit said it would refuse this agent (fleets).
    pub(super) load_until: Vec<u64>,
    pub(super) breakers: Vec<Breaker>,
    pub(super) told_open: Vec<u32>,
    /// When the fleet breaker this agent was told about had opened.
    pub(super) told_opened_at: Vec<u64>,
    pub(super) injector: Injector,
    pub(super) guard: LoopGuard,
    pub(super) model: LazyStream,
    pub(super) jitter: LazyStream,
    pub(super) service: LazyStream,
    /// What this run's strategies have drawn from `service`.
    pub(super) service_times: ServiceTimes,
    pub(super) keyed_for: Option<(u64, u64, u64, u32)>,
    pub(super) start_ms: u64,
    /// Model turns completed.
    pub(super) turn: u32,
    pub(super) next_step: usize,
    pub(super) next_call_id: u32,
    pub(super) tokens_used: u64,
    pub(super) context_tokens: u64,
    pub(super) pending: u32,
    pub(super) first_attempts: u32,
    pub(super) orchestrator_retries: u32,
    pub(super) provider_chain: u32,
    pub(super) provider_prev_delay: u64,
    pub(super) end: Option<TerminatedBy>,
}

impl Agent {
    /// Agent `agent` of run `run`, starting at `start_ms`.
    /// `SHARED`: the run shares something (see [`drive`]); only then are the fleet's notes kept.
    #[inline(always)]
    pub(super) fn reset<const SHARED: bool>(&mut self, sc: &Scenario, root: u64, run: u64, agent: u32, start_ms: u64) {
        let targets = sc.task.tools.len() + 1;
        self.slots.clear();
        for v in [&mut self.attempts, &mut self.successes] {
            v.clear();
            v.resize(targets, 0);
        }
        self.last_failed.clear();
        self.last_failed.resize(targets, false);
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
