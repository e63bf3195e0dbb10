//! The run loop: one agent under one strategy, as a discrete-event simulation over virtual
//! time. A queue of timed events (model turns, tool attempts, their completions) drives it, so
//! parallel calls overlap in time and more agents can share the queue later.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::breaker::{Admit, Breaker};
use super::events::{By, Event, Observer, TerminatedBy};
use super::faults::Injector;
use super::loop_guard::LoopGuard;
use super::model::{Action, CallHistory, Perceived, act, perceive_failure};
use super::retry::{MAX_ATTEMPTS_LIMIT, RetryPolicy};
use super::rng::{LazyStream, domain, key};
use super::seen::{ResultCache, ResultKey, Seen, digits};
use super::strategy::{Partials, Routing, Strategy};
use super::task::Ending;
use crate::envelope::read::{Signal, read_message};
use crate::envelope::render::{Body, Renderer};
use crate::envelope::{ErrorKind, ToolError};
use crate::fault::{ErrorClass, Fault};
use crate::scenario::Scenario;

/// Model-decision draws per call per turn. Slots are laid out by call index, then turn, so a
/// one-call step's consecutive turns read neighbouring slots of one ChaCha block.
const DRAWS_PER_TURN: u64 = 4;
/// Turns per call index in the slot layout (far above any `max_steps`).
const TURN_SLOTS: u64 = 1 << 24;
/// Jitter slots for provider retries start here, apart from tool calls.
const PROVIDER_JITTER_BASE: u64 = 1 << 48;
/// A run that needs more events than this is an engine bug, not a long run.
const MAX_EVENTS_PER_RUN: u32 = 1_000_000;
const NEVER: u32 = u32::MAX;
pub const GIVE_UP_TEXT: &str = "I could not complete the task.";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    TurnStart,
    ModelAttempt,
    ToolAttempt(u32),
    ToolDone(u32),
}

/// The outcome of the latest attempt of a call.
#[derive(Clone, Copy, Debug, Default)]
struct Outcome {
    class: Option<ErrorClass>,
    rule: Option<u16>,
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
        }
    }
}

/// The pending events, ordered by (time, insertion); ties go to the earlier insertion, which
/// keeps runs deterministic. A run rarely holds more than a few, and a linear scan of a few
/// beats a heap; past `SMALL` (a wide parallel turn) they move to a binary heap, so pops stay
/// logarithmic.
#[derive(Default)]
struct Queue {
    small: Vec<(u64, u64, Ev)>,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
}

impl Queue {
    const SMALL: usize = 8;

    fn clear(&mut self) {
        self.small.clear();
        self.heap.clear();
        self.seq = 0;
    }

    // Inlined by hand: whether the compiler inlines these on its own shifted with unrelated
    // code elsewhere in the crate and cost the engine up to 20%.
    #[inline(always)]
    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        if self.heap.is_empty() && self.small.len() < Self::SMALL {
            self.small.push((t, self.seq, ev));
        } else {
            self.heap.extend(self.small.drain(..).map(Reverse));
            self.heap.push(Reverse((t, self.seq, ev)));
        }
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<(u64, Ev)> {
        if let Some(Reverse((t, _, ev))) = self.heap.pop() {
            return Some((t, ev));
        }
        let (i, &(t, _, ev)) = self.small.iter().enumerate().min_by_key(|(_, e)| (e.0, e.1))?;
        // Not `swap_remove`: it copies the last entry even onto itself, and that wide read of
        // an entry just written field by field stalls store forwarding (a run's queue mostly
        // holds the one event pushed a moment ago).
        let last = self.small.len() - 1;
        if i != last {
            self.small[i] = self.small[last];
        }
        self.small.truncate(last);
        Some((t, ev))
    }
}

/// Buffers reused across runs, so a run allocates nothing once they have grown.
#[derive(Default)]
pub struct Workspace {
    queue: Queue,
    slots: Vec<Slot>,
    attempts: Vec<u32>,
    successes: Vec<u32>,
    terminal: Vec<Option<u16>>,
    refusals: Vec<Refusal>,
    breakers: Vec<Breaker>,
    told_open: Vec<u32>,
    injector: Injector,
    guard: LoopGuard,
    model: LazyStream,
    jitter: LazyStream,
    renderer: Renderer,
    seen: ResultCache,
}

impl Workspace {
    /// Runs `f` with what the model reads in each result cached across the runs `f` simulates
    /// of `sc` (`sc` is borrowed throughout, so no other scenario can take its place).
    pub fn caching_for<R>(&mut self, sc: &Scenario, f: impl FnOnce(&mut Workspace) -> R) -> R {
        self.seen.pin(std::ptr::from_ref(sc) as usize);
        let r = f(self);
        self.seen.unpin();
        r
    }
}

/// Runs run number `run` of `sc` under `strat` with root seed `root`, reporting to `obs`.
pub fn simulate<O: Observer>(
    sc: &Scenario,
    strat: &Strategy,
    run: u64,
    root: u64,
    ws: &mut Workspace,
    obs: &mut O,
) -> TerminatedBy {
    let targets = sc.task.tools.len() + 1;
    ws.queue.clear();
    ws.slots.clear();
    for v in [&mut ws.attempts, &mut ws.successes] {
        v.clear();
        v.resize(targets, 0);
    }
    ws.terminal.clear();
    ws.terminal.resize(targets, None);
    ws.refusals.clear();
    ws.refusals.resize(targets, Refusal::default());
    ws.told_open.clear();
    ws.told_open.resize(targets, NEVER);
    ws.breakers.resize_with(targets, Breaker::default);
    ws.breakers.iter_mut().for_each(Breaker::reset);
    ws.guard.reset();
    ws.seen.serve(std::ptr::from_ref(sc) as usize);
    sc.faults.reset(&mut ws.injector, root, sc.name_hash, run, &sc.target_hashes);
    ws.model.reset(key(&[root, sc.name_hash, run, domain::MODEL]));
    ws.jitter.reset(key(&[root, sc.name_hash, run, domain::JITTER]));

    let mut sim = Sim {
        sc,
        strat,
        retry: strat.retry.as_ref().unwrap_or(&sc.policy.retry),
        ws,
        obs,
        now: 0,
        turn: 0,
        next_step: 0,
        next_call_id: 1,
        tokens_used: 0,
        context_tokens: u64::from(sc.profile.prompt_tokens),
        pending: 0,
        first_attempts: 0,
        orchestrator_retries: 0,
        provider_chain: 0,
        provider_prev_delay: 0,
        end: None,
    };
    let deadline_ms = sim.time_budget().unwrap_or(u64::MAX);
    sim.schedule(0, Ev::TurnStart);
    let mut events = 0;
    while sim.end.is_none() {
        events += 1;
        let Some((t, ev)) = sim.ws.queue.pop() else {
            sim.finish(TerminatedBy::ProtocolError);
            break;
        };
        if events > MAX_EVENTS_PER_RUN {
            sim.finish(TerminatedBy::ProtocolError);
            break;
        }
        if t > deadline_ms {
            // Something in flight (a slow tool, a timeout) would end past the time budget: the
            // agent's deadline stops the run at the budget.
            sim.now = deadline_ms;
            sim.finish(TerminatedBy::TimeBudget);
            break;
        }
        sim.now = t;
        match ev {
            Ev::TurnStart => sim.turn_start(),
            Ev::ModelAttempt => sim.model_attempt(),
            Ev::ToolAttempt(i) => sim.tool_attempt(i as usize),
            Ev::ToolDone(i) => sim.tool_done(i as usize),
        }
    }
    sim.end.unwrap_or(TerminatedBy::ProtocolError)
}

struct Sim<'a, O> {
    sc: &'a Scenario,
    strat: &'a Strategy,
    retry: &'a RetryPolicy,
    ws: &'a mut Workspace,
    obs: &'a mut O,
    now: u64,
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

impl<O: Observer> Sim<'_, O> {
    fn schedule(&mut self, t: u64, ev: Ev) {
        self.ws.queue.push(t, ev);
    }

    fn finish(&mut self, by: TerminatedBy) {
        let text = match by {
            TerminatedBy::Answer => self.sc.task.final_text.as_str(),
            TerminatedBy::GaveUp => GIVE_UP_TEXT,
            _ => "",
        };
        self.end = Some(by);
        self.obs.event(&Event::End { by, t_ms: self.now, text });
    }

    /// The strategy's virtual-time budget, if it has one.
    fn time_budget(&self) -> Option<u64> {
        self.sc.policy.max_virtual_ms.filter(|_| self.strat.budgets)
    }

    /// Whether work that ends at `end_ms` would exceed the time budget.
    fn past_time_budget(&self, end_ms: u64) -> bool {
        self.time_budget().is_some_and(|max| end_ms > max)
    }

    fn turn_start(&mut self) {
        for s in self.ws.slots.iter().filter(|s| s.active && s.delivered != 1) {
            self.obs.event(&Event::ProtocolViolation { call_id: s.call_id });
        }
        if let Some(script) = self.sc.task.script
            && script.ending == Ending::CutOff
            && self.next_step == self.sc.task.steps.len()
            && self.ws.slots.iter().all(|s| !s.active || s.delivered == 1)
        {
            // The recording stops here: no final model call.
            return self.finish(TerminatedBy::StepCap);
        }
        if self.turn >= self.sc.policy.max_steps {
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
        self.ws.attempts[prov] += 1;
        let attempt = self.ws.attempts[prov];
        let is_retry = self.provider_chain > 0;
        let refusal = self.ws.refusals[prov];
        // (rule, the wait the answer announces, whether the injector decided it now rather than
        // the provider refusing a call that came back before its announced wait)
        let fired = if sc.task.script.is_none() && self.now < refusal.until_ms {
            Some((refusal.rule, Some(refusal.until_ms - self.now), false))
        } else {
            plan.decide(&mut self.ws.injector, prov, attempt, self.now, self.ws.successes[prov])
                .map(|f| (f.rule, f.retry_after_ms, true))
        };
        if let Some((rule, retry_after_ms, fresh)) = fired {
            let fault = &plan.rules[usize::from(rule)].fault;
            self.provider_chain += 1;
            let latency = if let Fault::Timeout { after_ms } = fault { *after_ms } else { 0 };
            let answered = self.now.saturating_add(latency);
            if let (true, Some(ms)) = (fresh, retry_after_ms) {
                self.ws.refusals[prov] = Refusal { until_ms: answered.saturating_add(ms), rule };
            }
            let mut retry = sc.task.script.is_some()
                || (self.retry.may_retry(fault.class(), self.provider_chain, retry_after_ms)
                    && self.retry.budget_allows(self.orchestrator_retries, self.first_attempts.max(1)));
            let mut delay = 0;
            if retry && sc.task.script.is_none() {
                let slot = PROVIDER_JITTER_BASE
                    + u64::from(self.turn) * u64::from(MAX_ATTEMPTS_LIMIT)
                    + u64::from(self.provider_chain);
                let u = self.ws.jitter.unit(slot);
                delay = self.retry.delay_ms(self.provider_chain - 1, self.provider_prev_delay, u, retry_after_ms);
            }
            let next_at = answered.saturating_add(delay);
            let over_budget = self.past_time_budget(answered)
                || (retry && self.past_time_budget(next_at.saturating_add(sc.profile.model_latency_ms)));
            retry &= !over_budget;
            self.obs.event(&Event::ModelCall {
                turn: self.turn + 1,
                t_ms: self.now,
                status: fault.status().unwrap_or(0),
                tokens_in: 0,
                tokens_out: 0,
                retry: is_retry,
                rule: Some(rule),
                fired: fresh,
                wasted: !fresh && is_retry,
                ends: !retry,
            });
            if retry {
                self.provider_prev_delay = delay;
                self.orchestrator_retries += 1;
                self.schedule(next_at, Ev::ModelAttempt);
            } else if over_budget {
                // A slow answer ends at the agent's deadline; a retry that could not finish in
                // time is not sent.
                self.now = self.time_budget().map_or(answered, |max| answered.min(max));
                self.finish(TerminatedBy::TimeBudget);
            } else {
                self.now = answered;
                self.finish(TerminatedBy::GaveUp);
            }
            return;
        }
        self.ws.successes[prov] += 1;
        self.provider_chain = 0;
        self.provider_prev_delay = 0;
        self.turn += 1;
        let ending = self.decide();
        let tokens_out = match ending {
            Some(by) => {
                let text = if by == TerminatedBy::Answer { self.sc.task.final_text.len() } else { GIVE_UP_TEXT.len() };
                text as u64 / 4 + 8
            }
            None => {
                let calls = &sc.task.calls;
                self.ws
                    .slots
                    .iter()
                    .filter(|s| s.active)
                    .map(|s| calls[s.call as usize].args_for(s.variant).len() as u64 / 4 + 8)
                    .sum()
            }
        };
        let tokens_in = self.context_tokens;
        if self.strat.budgets && sc.policy.max_tokens.is_some_and(|max| self.tokens_used + tokens_in + tokens_out > max)
        {
            return self.finish(TerminatedBy::TokenBudget);
        }
        self.tokens_used += tokens_in + tokens_out;
        self.context_tokens += tokens_out;
        self.obs.event(&Event::ModelCall {
            turn: self.turn,
            t_ms: self.now,
            status: 200,
            tokens_in,
            tokens_out,
            retry: is_retry,
            rule: None,
            fired: false,
            wasted: false,
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
        let turn = u64::from(self.turn);
        let mut give_up = false;
        let mut reissue = false;
        let Workspace { slots, model, .. } = &mut *self.ws;
        for (i, s) in slots.iter_mut().enumerate().filter(|(_, s)| s.active) {
            let slot = (i as u64 * TURN_SLOTS + turn) * DRAWS_PER_TURN;
            let perceived = match s.last_class {
                None => Perceived::Ok,
                Some(ErrorClass::Partial) if s.more_available => Perceived::Partial,
                Some(ErrorClass::Partial) => Perceived::Ok,
                Some(c) => perceive_failure(profile, s.signal, c, model.unit(slot), model.unit(slot + 1)),
            };
            let u = if perceived == Perceived::Ok { 0.0 } else { model.unit(slot + 2) };
            match act(profile, perceived, &s.hist, u) {
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
                        s.bad_variant = if model.unit(slot + 3) < profile.p_fix_args { None } else { Some(s.variant) };
                    }
                    s.by = By::ModelReissue;
                    reissue = true;
                }
                Action::GiveUp => give_up = true,
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
        if self.next_step == self.sc.task.steps.len() {
            return Some(by);
        }
        self.ws.slots.clear();
        let step = &self.sc.task.steps[self.next_step];
        self.ws.slots.extend(step.iter().map(|&c| Slot::new(c)));
        self.next_step += 1;
        None
    }

    /// Sends the active calls the model's turn asked for, once that turn has taken its time.
    fn issue(&mut self) {
        let sc = self.sc;
        let calls = &sc.task.calls;
        let at = self.now;
        self.pending = 0;
        for i in 0..self.ws.slots.len() {
            let s = &mut self.ws.slots[i];
            if !s.active {
                continue;
            }
            s.call_id = self.next_call_id;
            self.next_call_id += 1;
            s.delivered = 0;
            s.chain = 1;
            s.chain_start_ms = at;
            s.prev_delay_ms = 0;
            let spec = &calls[s.call as usize];
            self.obs.event(&Event::ToolCall {
                turn: self.turn,
                call_id: s.call_id,
                tool: &sc.task.tools[usize::from(spec.tool)],
                args: spec.args_for(s.variant),
                variant: s.variant,
            });
            self.pending += 1;
            self.schedule(at, Ev::ToolAttempt(i as u32));
        }
        if self.pending == 0 {
            // A text-only turn (recorded scripts have them): the next turn follows it.
            self.schedule(at, Ev::TurnStart);
        }
    }

    fn tool_attempt(&mut self, i: usize) {
        let now = self.now;
        let sc = self.sc;
        let plan = &sc.faults;
        let spec = &sc.task.calls[self.ws.slots[i].call as usize];
        let tool = usize::from(spec.tool);
        // A re-issue that cannot help: identical to a call whose failure repeating does not fix.
        let hopeless = {
            let s = &self.ws.slots[i];
            match s.by {
                By::Model => false,
                By::Orchestrator => s.outcome.class.is_some_and(|c| !c.retryable()),
                By::ModelReissue => {
                    s.variant == s.last_variant
                        && matches!(
                            s.last_class,
                            Some(ErrorClass::BadArgs | ErrorClass::Terminal | ErrorClass::Partial)
                        )
                }
            }
        };
        let mut probe = false;
        if self.strat.breaker {
            match self.ws.breakers[tool].admit(&sc.policy.breaker, now) {
                Admit::Yes => {}
                Admit::Probe => probe = true,
                Admit::Reject { remaining_ms } => {
                    let s = &mut self.ws.slots[i];
                    s.outcome = Outcome {
                        class: Some(ErrorClass::Transient),
                        rule: None,
                        retry_after_ms: Some(remaining_ms),
                        announced: false,
                        circuit: true,
                        probe: false,
                    };
                    let call_id = s.call_id;
                    self.obs.event(&Event::Rejected { call_id, tool: spec.tool });
                    let told = self.ws.told_open[tool];
                    if told != NEVER && told < self.turn {
                        return self.finish(TerminatedBy::BreakerAbort);
                    }
                    self.ws.told_open[tool] = self.turn;
                    return self.schedule(now, Ev::ToolDone(i as u32));
                }
            }
        }
        if self.ws.slots[i].by == By::Model {
            self.first_attempts += 1;
        }
        let Workspace { slots, attempts, successes, terminal, refusals, injector, .. } = &mut *self.ws;
        attempts[tool] += 1;
        let attempt = attempts[tool];
        let s = &mut slots[i];
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
            match plan.decide(injector, tool, attempt, now, successes[tool]) {
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
        s.outcome = Outcome { class, rule, retry_after_ms, announced, circuit: false, probe };
        let latency = match fault {
            Some(Fault::Timeout { after_ms }) if !refused => *after_ms,
            _ => spec.latency_ms.unwrap_or(sc.profile.tool_latency_ms),
        };
        let ev = Event::Attempt {
            call_id: s.call_id,
            tool: spec.tool,
            attempt,
            by: s.by,
            t_ms: now,
            class,
            status: fault.and_then(Fault::status),
            rule,
            fired,
            // A retry refused because it came back before the server's announced wait is wasted
            // on either path, like a re-issue that repeating cannot fix.
            wasted: hopeless || (refused && s.by != By::Model),
        };
        self.obs.event(&ev);
        self.schedule(now.saturating_add(latency), Ev::ToolDone(i as u32));
    }

    fn tool_done(&mut self, i: usize) {
        let now = self.now;
        let s = self.ws.slots[i];
        let o = s.outcome;
        let spec = &self.sc.task.calls[s.call as usize];
        let tool = usize::from(spec.tool);
        if let (true, Some(ms), Some(rule)) = (o.announced, o.retry_after_ms, o.rule) {
            self.ws.refusals[tool] = Refusal { until_ms: now.saturating_add(ms), rule };
        }
        if self.strat.breaker && !o.circuit {
            let failed =
                matches!(o.class, Some(ErrorClass::Transient | ErrorClass::RateLimited | ErrorClass::Terminal));
            if self.ws.breakers[tool].record(&self.sc.policy.breaker, now, failed, o.probe) {
                self.ws.told_open[tool] = NEVER;
                self.obs.event(&Event::BreakerTrip { tool: tool as u16, t_ms: now });
            }
        }
        if !o.class.is_some_and(ErrorClass::is_failure) && !o.circuit {
            self.ws.successes[tool] += 1;
        }
        if let Some(c) = o.class
            && !o.circuit
            && self.strat.routing == Routing::Orchestrator
            && self.retry.may_retry(c, s.chain, o.retry_after_ms)
            && self.retry.budget_allows(self.orchestrator_retries, self.first_attempts)
        {
            let u = self.ws.jitter.unit(u64::from(s.call_id) * u64::from(MAX_ATTEMPTS_LIMIT) + u64::from(s.chain));
            let delay = self.retry.delay_ms(s.chain - 1, s.prev_delay_ms, u, o.retry_after_ms);
            let next_at = now.saturating_add(delay);
            let nominal = spec.latency_ms.unwrap_or(self.sc.profile.tool_latency_ms);
            if self.past_time_budget(next_at.saturating_add(nominal)) {
                return self.finish(TerminatedBy::TimeBudget);
            }
            let s = &mut self.ws.slots[i];
            s.prev_delay_ms = delay;
            s.chain += 1;
            s.by = By::Orchestrator;
            self.orchestrator_retries += 1;
            return self.schedule(next_at, Ev::ToolAttempt(i as u32));
        }
        self.deliver(i);
    }

    /// Hands the call's one result to the model, rendered as the model will see it.
    fn deliver(&mut self, i: usize) {
        let now = self.now;
        let sc = self.sc;
        let strat = self.strat;
        let Workspace { slots, renderer, guard, seen, .. } = &mut *self.ws;
        let s = &mut slots[i];
        let o = s.outcome;
        let spec = &sc.task.calls[s.call as usize];
        let tool_name = &sc.task.tools[usize::from(spec.tool)];
        let error = o.class.filter(|&c| c != ErrorClass::Partial);
        let body = match o.class {
            None => Body::Ok { json: &spec.result_json, text_literal: &spec.result_literal },
            Some(ErrorClass::Partial) => {
                Body::Partial { json: &spec.result_json, stated_complete: strat.partials == Partials::Terminal }
            }
            Some(class) => {
                let kind = match o.rule {
                    Some(r) if !o.circuit => ErrorKind::Fault(&sc.faults.rules[usize::from(r)].fault),
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
                rule: error.and(o.rule.filter(|_| !o.circuit)),
                attempts: if error.is_some() { s.chain } else { 0 },
                retry_after_ms: error.and(o.retry_after_ms),
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
        self.context_tokens += seen.len as u64 / 4;
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
        self.pending -= 1;
        if self.pending == 0 {
            self.schedule(now, Ev::TurnStart);
        }
    }
}
