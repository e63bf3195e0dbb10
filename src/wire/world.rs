//! The mock world of one run in wire mode: the scenario's tools and provider with the same
//! seeded fault injector as the engine, on a clock that follows the agent's real waiting
//! (scaled by `--time-scale`), the faults' memory, the conversations the mock model holds, and
//! a record of all traffic as a native trace.

use crate::wire::checks::{Check, Finding};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::engine::Scenario;
use crate::engine::fault_plan::{Fired, Injector};
use crate::engine::fleet::agent_key;
use crate::engine::rng::{LazyStream, domain, key};
use crate::fault::{ErrorClass, Fault};
use crate::trace::{Header, Trace};

use super::conversation::Conversation;

/// Virtual time in wire mode: real time since the run started, divided by the time scale
/// (0.01 makes a 60 s outage last 0.6 s of real time). Waits the mocks announce are scaled the
/// other way, so an agent that honours them waits exactly long enough.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
    scale: f64,
}

impl Clock {
    #[allow(clippy::disallowed_methods)] // Wire mode follows the agent's real waiting, by design.
    pub fn new(scale: f64) -> Clock {
        Clock { start: Instant::now(), scale }
    }

    /// Virtual milliseconds since the run started.
    pub fn now_ms(&self) -> u64 {
        (self.start.elapsed().as_secs_f64() * 1000.0 / self.scale) as u64
    }

    /// A virtual wait as the real milliseconds to announce (at least 1 when there is a wait).
    pub fn real_ms(&self, virtual_ms: u64) -> u64 {
        ((virtual_ms as f64 * self.scale).ceil() as u64).max(u64::from(virtual_ms > 0))
    }

    pub fn scale(&self) -> f64 {
        self.scale
    }
}

/// Responses kept for `previous_response_id` (memory stays bounded on a long `serve`).
pub const MAX_STORED_RESPONSES: usize = 4096;

/// Bytes of Responses API conversations kept for `previous_response_id` (the oldest go first).
pub const MAX_STORED_RESPONSE_BYTES: usize = 32 << 20;
/// Conversations kept at once.
pub const MAX_CONVERSATIONS: usize = 1024;
/// Findings kept (a run that has more has shown its problem).
pub const MAX_FINDINGS: usize = 1000;
/// Entries kept in each per-call memory (outcomes, failures, sticky arguments) and findings.
pub const MAX_MEMORY: usize = 10_000;

/// A server's announced wait on a target: calls before `until_ms` are refused the same way.
#[derive(Clone, Copy, Debug, Default)]
pub struct Refusal {
    pub until_ms: u64,
    pub rule: u16,
}

/// An attempt's number on its target: the agent's own, and the fleet's (0 where the fleet
/// counts none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptNo {
    pub own: u32,
    pub fleet: u32,
}

/// What the world decided for one attempt on a target.
#[derive(Clone, Copy, Debug)]
pub struct Decision {
    pub rule: u16,
    /// The wait the answer announces, in virtual ms.
    pub retry_after_ms: Option<u64>,
    /// A refusal repeating an earlier answer (the call came back too early).
    pub refused: bool,
}

/// What a fleet's fault rules with `scope = "fleet"` count, shared by its agents' worlds: their
/// injector (keyed as agent 0, as the engine keys it) and the fleet's attempts and successes on
/// each target.
#[derive(Default)]
pub struct FleetFaults {
    injector: Injector,
    attempts: Vec<u32>,
    successes: Vec<u32>,
}

/// [`FleetFaults`] as a fleet's worlds hold it (read under the mocks' lock, so never contended).
pub type SharedFaults = Arc<Mutex<FleetFaults>>;

impl FleetFaults {
    /// The state for run `run` of `scenario` when its fleet counts attempts fleet-wide: several
    /// agents, or tools with limits (as the engine decides), and a rule with `scope = "fleet"`.
    pub fn for_run(scenario: &Scenario, run: u64, agents: u32) -> Option<SharedFaults> {
        if !(scenario.faults.has_fleet_rules() && (agents > 1 || scenario.loaded)) {
            return None;
        }
        let mut injector = Injector::default();
        let sc = scenario;
        sc.faults.reset(&mut injector, sc.seed, sc.name_hash, run, 0, &sc.target_hashes);
        let targets = sc.task.tools.len() + 1;
        let state = FleetFaults { injector, attempts: vec![0; targets], successes: vec![0; targets] };
        Some(Arc::new(Mutex::new(state)))
    }
}

fn lock(faults: &SharedFaults) -> MutexGuard<'_, FleetFaults> {
    faults.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub struct World {
    pub scenario: Scenario,
    pub run: u64,
    /// Which agent of the fleet this world is (0 for a lone agent): its fault and model draws
    /// are that agent's in the engine.
    pub agent: u32,
    pub clock: Clock,
    injector: Injector,
    /// The fleet's count of its `scope = "fleet"` rules, when those count fleet-wide.
    fleet: Option<SharedFaults>,
    /// Per target (tools, then the provider): attempts, successes, a sticky terminal fault, an
    /// announced wait.
    attempts: Vec<u32>,
    /// Per tool: whether a call of it came through the mock tools (its faults are met there;
    /// live mode's rewriting leaves its results alone).
    pub arrived: Vec<bool>,
    /// Times each fault rule's trigger fired (a refusal during an announced wait and a sticky
    /// terminal fault repeat a fire; they are not new ones), as the engine counts them.
    pub rule_fired: Vec<u64>,
    successes: Vec<u32>,
    /// Per target: calls whose result was no failure (a partial one too, unlike `successes`,
    /// which the fault triggers read), and whether the latest call's was one (the task's goal).
    returned_ok: Vec<u32>,
    last_failed: Vec<bool>,
    terminal: Vec<Option<u16>>,
    refusals: Vec<Refusal>,
    /// Arguments (tool, canonical) a bad-arguments fault sticks to, corrections the model did not
    /// get right, and calls whose partial result sticks.
    pub bad_args: BTreeMap<(u16, u64), u16>,
    pub partial: BTreeMap<(u16, u64), u16>,
    /// Per tool: the `schema_drift` rule whose change the caller has not seen yet (every call
    /// fails with it until the tools are listed again), and how often its schema changed.
    pub drift: Vec<Option<u16>>,
    pub revisions: Vec<u32>,
    /// What each tool call (tool, canonical arguments) last returned: its class, `None` for ok.
    pub outcomes: BTreeMap<(String, u64), Option<ErrorClass>>,
    /// What each tool last returned, whatever the arguments.
    pub last_outcome: BTreeMap<String, Option<ErrorClass>>,
    /// The last failure of each call, and whether a model turn has passed since.
    pub last_failure: BTreeMap<(String, u64), (ErrorClass, bool)>,
    /// The conversations the mock model holds, by id (the oldest are dropped past
    /// [`MAX_CONVERSATIONS`], so a long `serve` keeps flat memory).
    pub conversations: BTreeMap<usize, Conversation>,
    next_conversation: usize,
    /// Whether traffic is recorded as a trace (`exec`, whose runs end; not `serve`).
    pub record_trace: bool,
    /// Ids the mock gave (tool call ids, response ids) → the conversation that gave them.
    pub owner: BTreeMap<String, usize>,
    /// Whether a request handed tool results back as plain messages (said once in the notes).
    pub read_plain: bool,
    /// Responses API: each response's whole conversation (input and output items), so a request
    /// naming it as `previous_response_id` continues it. The oldest are dropped past
    /// [`MAX_STORED_RESPONSES`].
    pub responses: BTreeMap<String, Vec<serde_json::Value>>,
    response_order: std::collections::VecDeque<String>,
    /// The size of the stored responses' items, at most [`MAX_STORED_RESPONSE_BYTES`].
    stored_bytes: usize,
    pub next_id: u32,
    pub trace: Trace,
    /// What the trace has kept of arguments, results and MCP messages so far (capped).
    recorded: super::recorded::Recorded,
    /// The tool calls recorded, by id: the latest call of each id, as the trace keeps it, and
    /// its place in `recorded_order` (at most [`MAX_MEMORY`]; the oldest go first), so a result
    /// finds its call without reading the trace back.
    recorded_calls: BTreeMap<String, (u64, String, crate::exchange::Args)>,
    recorded_order: std::collections::VecDeque<(u64, String)>,
    /// The trace's oldest events, on disk once it grows long ([`super::spill`]), and whether
    /// moving them failed once (a temporary file could not be made or written: later events
    /// then stay in memory).
    spill: Option<super::spill::Spill>,
    spill_failed: bool,
    /// Problems for the checklist: (item, detail).
    pub findings: Vec<Finding>,
    pub model_calls: u64,
    pub tool_calls: u64,
    pub faults_injected: u64,
    pub wasted_retries: u64,
    /// Live mode: requests refused by the spending limit, and those the upstream never answered.
    pub spending_refusals: u64,
    pub upstream_failures: u64,
    /// Tool results rewritten to a fault (live mode, `--rewrite`).
    pub rewritten_results: u64,
    /// Live mode: calls the user's real tools failed (no injected fault: the tool's own answer).
    pub real_tool_failures: u64,
    /// Calls the fleet's shared limits refused (tool rate and concurrency, provider rpm/tpm).
    pub load_rejections: u64,
    /// Write tools' calls that committed again: the same arguments written before, under no
    /// idempotency key the tool had written ([`World::wrote`]).
    pub duplicate_writes: u64,
    /// Tools injected instructions asked for and not called yet, and the instructions followed:
    /// a call of such a tool with arguments no call of the task has.
    pub injections_pending: Vec<usize>,
    pub injection_followed: u64,
    /// The tainting rule behind each (tool, arguments' key)'s latest result, for the mock
    /// model and [`World::wrong_accepted`] (at most [`MAX_MEMORY`]).
    pub tainted: BTreeMap<(usize, u64), u16>,
    /// What write tools committed: (tool, arguments' key), and (tool, idempotency key); at most
    /// [`MAX_MEMORY`] of each.
    written: BTreeSet<(usize, u64)>,
    written_keys: BTreeSet<(usize, String)>,
    /// Until when each target's shared rate limit said it would refuse this agent.
    pub load_until: Vec<u64>,
    /// Service-time draws, like the engine's.
    pub service: LazyStream,
    /// Requests as the HTTP layer counted them, apart from the mocks' own counts: provider,
    /// tool calls, anything else, tool listings (`GET /tools`).
    pub http_requests: [u64; 4],
    /// Requests to paths no mock serves, with the nearest served path.
    pub unknown_paths: BTreeSet<String>,
    /// Requests meant for somewhere else (through the proxy variables `exec` sets).
    pub elsewhere: BTreeSet<String>,
    /// The MCP `tools/call` messages as they crossed, requests and answers, one JSON-RPC
    /// message each (an endpoint's HTTP refusal under `http_status`), when traffic is recorded;
    /// at most [`MAX_MEMORY`].
    pub mcp_log: Vec<serde_json::Value>,
}

impl World {
    /// Agent `agent`'s world in run `run`, on the fleet's `clock`; `fleet` counts the fleet's
    /// attempts for its `scope = "fleet"` rules ([`FleetFaults::for_run`]).
    pub fn new(scenario: Scenario, run: u64, agent: u32, clock: Clock, fleet: Option<SharedFaults>) -> World {
        let targets = scenario.task.tools.len() + 1;
        let mut injector = Injector::default();
        scenario.faults.reset(&mut injector, scenario.seed, scenario.name_hash, run, agent, &scenario.target_hashes);
        let mut service = LazyStream::default();
        service.reset(agent_key(key(&[scenario.seed, scenario.name_hash, run, domain::SERVICE]), agent));
        let id = format!("{}/exec/run{run}", scenario.name);
        let header =
            Header::for_scenario(&scenario, id, "tracefault-wire", None, format!("mock:{}", scenario.profile.name));
        World {
            run,
            agent,
            clock,
            injector,
            fleet,
            attempts: vec![0; targets],
            arrived: vec![false; targets - 1],
            rule_fired: vec![0; scenario.faults.rules.len()],
            successes: vec![0; targets],
            returned_ok: vec![0; targets],
            last_failed: vec![false; targets],
            terminal: vec![None; targets],
            refusals: vec![Refusal::default(); targets],
            bad_args: BTreeMap::new(),
            partial: BTreeMap::new(),
            drift: vec![None; targets - 1],
            revisions: vec![0; targets - 1],
            outcomes: BTreeMap::new(),
            last_outcome: BTreeMap::new(),
            last_failure: BTreeMap::new(),
            conversations: BTreeMap::new(),
            next_conversation: 0,
            record_trace: true,
            owner: BTreeMap::new(),
            read_plain: false,
            responses: BTreeMap::new(),
            response_order: std::collections::VecDeque::new(),
            stored_bytes: 0,
            recorded: super::recorded::Recorded::default(),
            recorded_calls: BTreeMap::new(),
            recorded_order: std::collections::VecDeque::new(),
            spill: None,
            spill_failed: false,
            next_id: 1,
            trace: Trace { header, events: Vec::new() },
            findings: Vec::new(),
            model_calls: 0,
            tool_calls: 0,
            faults_injected: 0,
            wasted_retries: 0,
            spending_refusals: 0,
            upstream_failures: 0,
            rewritten_results: 0,
            real_tool_failures: 0,
            load_rejections: 0,
            duplicate_writes: 0,
            injections_pending: Vec::new(),
            injection_followed: 0,
            tainted: BTreeMap::new(),
            written: BTreeSet::new(),
            written_keys: BTreeSet::new(),
            load_until: vec![0; targets],
            service,
            http_requests: [0; 4],
            unknown_paths: BTreeSet::new(),
            elsewhere: BTreeSet::new(),
            mcp_log: Vec::new(),
            scenario,
        }
    }

    pub fn provider_target(&self) -> usize {
        self.scenario.task.tools.len()
    }

    pub fn fault(&self, rule: u16) -> &Fault {
        &self.scenario.faults.rules[usize::from(rule)].fault
    }

    /// Counts an attempt on `target` as it is sent (before the fleet's limits, a queue or a
    /// remembered fault answer it, as the engine counts it): its number at this agent and, where
    /// the fleet counts them, in the fleet.
    pub fn attempt(&mut self, target: usize) -> AttemptNo {
        self.attempts[target] += 1;
        let fleet = self.fleet.as_ref().map_or(0, |f| {
            let n = &mut lock(f).attempts[target];
            *n += 1;
            *n
        });
        AttemptNo { own: self.attempts[target], fleet }
    }

    /// Counts the next attempt on `target` and decides it now ([`World::attempt`],
    /// [`World::decide_at`]).
    pub fn decide(&mut self, target: usize) -> Option<Decision> {
        let at = self.attempt(target);
        self.decide_at(target, at)
    }

    /// Decides attempt `at` on `target` now: a refusal while an announced wait runs, the
    /// target's sticky terminal fault, or the injector's draw. In a fleet that counts them, the
    /// rules with `scope = "fleet"` are decided first, on the fleet's counts (as in the engine).
    pub fn decide_at(&mut self, target: usize, at: AttemptNo) -> Option<Decision> {
        let now = self.clock.now_ms();
        let refusal = self.refusals[target];
        if now < refusal.until_ms {
            return Some(Decision { rule: refusal.rule, retry_after_ms: Some(refusal.until_ms - now), refused: true });
        }
        if let Some(r) = self.terminal[target] {
            return Some(Decision { rule: r, retry_after_ms: self.fault(r).retry_after_ms(), refused: false });
        }
        let attempt = at.own;
        let plan = &self.scenario.faults;
        let fired: Option<Fired> = match &self.fleet {
            None => plan.decide(&mut self.injector, target, attempt, now, self.successes[target]),
            Some(fleet) => {
                let f = &mut *lock(fleet);
                // Both are decided (every matching rate limit counts the request); a fleet rule wins.
                let shared = plan.decide_scoped(true, &mut f.injector, target, at.fleet, now, f.successes[target]);
                let own = plan.decide_scoped(false, &mut self.injector, target, attempt, now, self.successes[target]);
                shared.or(own)
            }
        };
        let d = fired.map(|f| Decision { rule: f.rule, retry_after_ms: f.retry_after_ms, refused: false })?;
        self.rule_fired[usize::from(d.rule)] += 1;
        if self.fault(d.rule).class() == ErrorClass::Terminal {
            self.terminal[target] = Some(d.rule);
        }
        if let Some(ms) = d.retry_after_ms {
            self.refusals[target] = Refusal { until_ms: now.saturating_add(ms), rule: d.rule };
        }
        Some(d)
    }

    /// Whether the task's goal is reached by the mock tools' outcomes: each goal tool (every
    /// tool of the task when it names none) has succeeded, and its latest call did not fail.
    /// `live` (a real model, whose agent may reach its tools without tracefault): a goal tool
    /// no call of which came here is not known unreached.
    pub fn goal_reached(&self, live: bool) -> bool {
        let task = &self.scenario.task;
        task.goal_reached(|t| (live && self.attempts[t] == 0) || (self.returned_ok[t] > 0 && !self.last_failed[t]))
    }

    /// Wrong values (`wrong_content`) the agent took as right: those whose call it did not make
    /// again.
    pub fn wrong_accepted(&self) -> u64 {
        self.tainted.values().filter(|&&r| *self.fault(r) == Fault::WrongContent).count() as u64
    }

    /// Counts stream fault `rule`'s firing as decided, or takes it back when the answer's
    /// stream ended before the fault's place.
    pub fn stream_fault(&mut self, rule: u16, fired: bool) {
        if fired {
            self.faults_injected += 1;
        } else {
            let n = &mut self.rule_fired[usize::from(rule)];
            *n = n.saturating_sub(1);
        }
    }

    /// Records a success on `target`.
    pub fn succeeded(&mut self, target: usize) {
        self.successes[target] += 1;
        if let Some(fleet) = &self.fleet {
            lock(fleet).successes[target] += 1;
        }
    }

    /// Notes that `key` (a call id, or `result:` and one) was seen in conversation `c` (live
    /// mode): it is forgotten with the conversation, so a long proxy's memory does not grow with
    /// every call.
    pub fn own(&mut self, key: String, c: usize) {
        if let Some(conv) = self.conversations.get_mut(&c) {
            conv.ids.push(key.clone());
            self.owner.insert(key, c);
        }
    }

    /// Live mode: conversation `c` handed the model the result of `tool` called with the
    /// arguments `args_key` names: a failure (of `class`, when known) or not. A success also
    /// settles the tool's calls that failed for their arguments (the model corrected them). A
    /// tool the scenario does not name is not the task's.
    pub fn result_read(&mut self, c: usize, (tool, args_key): (&str, u64), failed: bool, class: Option<ErrorClass>) {
        if !self.scenario.task.tools.iter().any(|t| t == tool) {
            return;
        }
        if let Some(conv) = self.conversations.get_mut(&c) {
            if failed {
                conv.failing.insert((tool.to_owned(), args_key), class);
            } else {
                conv.failing.remove(&(tool.to_owned(), args_key));
                conv.failing.retain(|(t, _), class| t != tool || *class != Some(ErrorClass::BadArgs));
            }
        }
    }

    /// The call `id` as recorded (the latest of that id): its tool and arguments.
    pub fn recorded_call(&self, id: &str) -> Option<(&str, &crate::exchange::Args)> {
        self.recorded_calls.get(id).map(|(_, name, args)| (name.as_str(), args))
    }

    /// Takes back a success counted for `target` (a real tool failed the call after all, or a
    /// write lost its conflict), and the result counted as returned for the task's goal when
    /// that call's was (`counted`, as [`World::returned`] said: a wrong value's was not). The
    /// call says, not the target's latest outcome, which may be another call's that ended
    /// while this one was served.
    pub fn unsucceeded(&mut self, target: usize, counted: bool) {
        self.successes[target] = self.successes[target].saturating_sub(1);
        if let Some(fleet) = &self.fleet {
            let n = &mut lock(fleet).successes[target];
            *n = n.saturating_sub(1);
        }
        if counted {
            self.returned_ok[target] = self.returned_ok[target].saturating_sub(1);
        }
    }

    /// Notes what a call of `target` returned, shaped by fault `rule` if one fired: a success
    /// to the triggers unless it failed (a partial or tainted result is one, as in the engine),
    /// and for the task's goal a result unless it failed or is a wrong value. Whether it counted
    /// for the goal is returned.
    pub fn returned(&mut self, target: usize, rule: Option<u16>) -> bool {
        let fault = rule.map(|r| self.fault(r));
        let failed = fault.is_some_and(|f| f.class().is_failure());
        let wrong = fault == Some(&Fault::WrongContent);
        if !failed {
            self.succeeded(target);
        }
        self.outcome_of(target, failed || wrong);
        !(failed || wrong)
    }

    /// Notes how a call of `target` ended for the task's goal: failed or not (a partial result
    /// is no failure).
    pub fn outcome_of(&mut self, target: usize, failed: bool) {
        self.last_failed[target] = failed;
        self.returned_ok[target] += u32::from(!failed);
    }

    /// Records a trace event (when this world records traffic).
    pub fn record(&mut self, ev: crate::trace::TraceEvent) {
        if self.record_trace {
            let ev = self.recorded.keep(ev);
            if let crate::trace::TraceEvent::ToolCall { call_id, name, args, .. } = &ev {
                self.index_call(call_id, name, args);
            }
            self.trace.events.push(ev);
            if self.trace.events.len() >= 2 * super::spill::KEEP_EVENTS {
                self.spill_oldest();
            }
        }
    }

    /// The trace's events recorded so far, those on disk included: a place in the trace that
    /// stays put when the oldest events go to disk.
    pub fn trace_len(&self) -> usize {
        self.spilled() + self.trace.events.len()
    }

    /// The events on disk, before `trace.events`.
    pub fn spilled(&self) -> usize {
        self.spill.as_ref().map_or(0, super::spill::Spill::events)
    }

    /// Moves the oldest [`super::spill::KEEP_EVENTS`] events to disk; when that fails, says
    /// so and keeps every later event in memory (those already out stay there).
    fn spill_oldest(&mut self) {
        use super::spill::{KEEP_EVENTS, Spill};
        if self.spill_failed {
            return;
        }
        if self.spill.is_none() {
            match Spill::new() {
                Ok(spill) => self.spill = Some(spill),
                Err(e) => {
                    self.spill_failed = true;
                    self.spill_note(format!(
                        "the trace stayed in memory: no temporary file for its oldest events ({e})"
                    ));
                    return;
                }
            }
        }
        let Some(spill) = &mut self.spill else { return };
        match spill.write(&self.trace.events[..KEEP_EVENTS]) {
            Ok(()) => drop(self.trace.events.drain(..KEEP_EVENTS)),
            Err(e) => {
                let out = spill.events();
                self.spill_failed = true;
                self.spill_note(format!(
                    "the trace's events after the first {out} stayed in memory: writing them out failed ({e})"
                ));
            }
        }
    }

    /// The whole trace in memory again, the events on disk in front, to score and write the
    /// run. Events that cannot be read back are said in a note (the trace then lacks them).
    pub fn unspill(&mut self) {
        let Some(spill) = self.spill.take() else { return };
        let n = spill.events();
        match spill.read_back() {
            Ok(mut back) => {
                back.append(&mut self.trace.events);
                self.trace.events = back;
            }
            Err(e) => self.spill_note(format!("the trace's first {n} events could not be read back from disk: {e}")),
        }
    }

    /// A note on where the trace's events went, past the bound on notes (at most two a run):
    /// a trace that lacks events never says nothing.
    fn spill_note(&mut self, detail: String) {
        self.findings.push(Finding { check: None, detail });
    }

    /// Files a recorded call under its id for [`World::recorded_call`].
    fn index_call(&mut self, id: &str, name: &str, args: &crate::exchange::Args) {
        let seq = self.recorded_order.back().map_or(0, |(s, _)| s + 1);
        self.recorded_calls.insert(id.to_owned(), (seq, name.to_owned(), args.clone()));
        self.recorded_order.push_back((seq, id.to_owned()));
        while self.recorded_order.len() > MAX_MEMORY {
            let Some((old, id)) = self.recorded_order.pop_front() else { break };
            // Gone unless the id was recorded again since.
            if self.recorded_calls.get(&id).is_some_and(|(s, ..)| *s == old) {
                self.recorded_calls.remove(&id);
            }
        }
    }

    /// A finding against a check, kept to a bounded number.
    pub fn finding(&mut self, check: Check, detail: String) {
        if self.findings.len() < MAX_FINDINGS {
            self.findings.push(Finding { check: Some(check), detail });
        }
    }

    /// A note for the report that fails no check, kept to the same bound.
    pub fn note(&mut self, detail: String) {
        if self.findings.len() < MAX_FINDINGS {
            self.findings.push(Finding { check: None, detail });
        }
    }

    /// The key of the draws of the conversation with index `index`: the first conversation of
    /// a run draws like the engine's run; others are keyed apart.
    pub fn conversation_key(&self, index: usize) -> u64 {
        let sc = &self.scenario;
        let mut parts = vec![sc.seed, sc.name_hash, self.run, domain::MODEL];
        if index > 0 {
            parts.push(index as u64);
        }
        agent_key(key(&parts), self.agent)
    }

    /// Starts a conversation made by `make(world, id)`; returns its id.
    pub fn add_conversation(&mut self, make: impl FnOnce(&World, usize) -> Conversation) -> usize {
        let id = self.next_conversation;
        self.next_conversation += 1;
        let conv = make(self, id);
        self.conversations.insert(id, conv);
        while self.conversations.len() > MAX_CONVERSATIONS {
            let Some((_, old)) = self.conversations.pop_first() else { break };
            for id in &old.ids {
                self.owner.remove(id);
            }
        }
        id
    }

    /// The conversation with id `c`, if it is still held.
    pub fn conversation_index(&self, c: usize) -> Option<usize> {
        self.conversations.contains_key(&c).then_some(c)
    }

    pub fn conversation(&mut self, c: usize) -> &mut Conversation {
        self.conversations.get_mut(&c).expect("a conversation the world holds")
    }

    /// A write tool's call committed (`tool` by index, its arguments' key, the idempotency key
    /// it carried): a key the tool honours and has written writes nothing; otherwise it is
    /// written, a duplicate when the same arguments were written before.
    pub fn wrote(&mut self, tool: usize, args_key: u64, key: Option<&str>) {
        let effect = self.scenario.effects[tool];
        if let Some(k) = key.filter(|_| effect.honours_key) {
            if self.written_keys.contains(&(tool, k.to_owned())) {
                return;
            }
            if self.written_keys.len() < MAX_MEMORY {
                self.written_keys.insert((tool, k.to_owned()));
            }
        }
        if self.written.contains(&(tool, args_key)) {
            self.duplicate_writes += 1;
        } else if self.written.len() < MAX_MEMORY {
            self.written.insert((tool, args_key));
        }
    }

    /// The caller read the tool list: every schema change so far is seen.
    pub fn listed(&mut self) {
        self.drift.fill(None);
    }

    /// Records one MCP message, in the MCP log and the native trace (when traffic is recorded,
    /// up to [`MAX_MEMORY`]).
    pub fn log_mcp(&mut self, message: serde_json::Value) {
        if self.record_trace && self.mcp_log.len() < MAX_MEMORY {
            let message = self.recorded.keep_message(message);
            self.record(crate::trace::TraceEvent::Mcp { message: message.clone() });
            self.mcp_log.push(message);
        }
    }

    /// Keeps the per-call memories bounded: past the limit, the oldest-keyed entries go.
    pub fn bound_memory(&mut self) {
        fn cap<K: Ord, V>(m: &mut BTreeMap<K, V>) {
            while m.len() > MAX_MEMORY {
                m.pop_first();
            }
        }
        cap(&mut self.outcomes);
        cap(&mut self.last_failure);
        cap(&mut self.bad_args);
        cap(&mut self.partial);
        cap(&mut self.last_outcome);
        cap(&mut self.tainted);
        self.injections_pending.truncate(MAX_MEMORY);
        while self.unknown_paths.len() > 100 {
            self.unknown_paths.pop_last();
        }
        while self.elsewhere.len() > 100 {
            self.elsewhere.pop_last();
        }
    }

    /// Keeps a Responses API response's whole conversation under its id.
    pub fn store_response(&mut self, id: String, items: Vec<serde_json::Value>) {
        let bytes: usize = items.iter().map(super::recorded::size_of).sum();
        while (self.response_order.len() >= MAX_STORED_RESPONSES
            || self.stored_bytes + bytes > MAX_STORED_RESPONSE_BYTES)
            && let Some(old) = self.response_order.pop_front()
        {
            if let Some(gone) = self.responses.remove(&old) {
                self.stored_bytes -= gone.iter().map(super::recorded::size_of).sum::<usize>();
            }
        }
        self.stored_bytes += bytes;
        self.response_order.push_back(id.clone());
        self.responses.insert(id, items);
    }

    /// A fresh id for something the mock gives out (`call_000001`, `toolu_000001`, …), owned by
    /// conversation `conv`.
    pub fn new_id(&mut self, prefix: &str, conv: usize) -> String {
        // Agents other than the first mark their ids, so one never passes for another's.
        let id = match self.agent {
            0 => format!("{prefix}{:06}", self.next_id),
            k => format!("{prefix}a{k}_{:06}", self.next_id),
        };
        self.next_id += 1;
        self.owner.insert(id.clone(), conv);
        if let Some(c) = self.conversations.get_mut(&conv) {
            c.ids.push(id.clone());
        }
        id
    }
}

/// A lone agent's world for a task of one `search` call (unit tests).
#[cfg(test)]
pub(crate) fn one_search() -> World {
    search_with("")
}

/// [`one_search`] with `faults`, TOML `[[faults]]` tables (unit tests).
#[cfg(test)]
pub(crate) fn search_with(faults: &str) -> World {
    let src = format!(
        "name = \"w\"\n[task]\n[[task.steps]]\ntool = \"search\"\nargs = {{ q = 1 }}\nresult = {{ r = 1 }}\n{faults}"
    );
    let sc = crate::scenario::load::load_str(&src, std::path::Path::new("w.toml")).unwrap().scenario;
    World::new(sc, 0, 0, Clock::new(1.0), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_finds_the_latest_call_of_its_id_within_the_memory_bound() {
        let mut w = one_search();
        let call = |id: &str, q: u64| crate::trace::TraceEvent::ToolCall {
            turn: 1,
            call_id: id.to_owned(),
            name: "search".to_owned(),
            args: crate::exchange::Args::new(&serde_json::json!({ "q": q })),
        };
        let args = |w: &World, id: &str| w.recorded_call(id).map(|(t, a)| format!("{t} {}", a.as_json()));
        w.record(call("a", 1));
        w.record(call("b", 2));
        w.record(call("a", 3));
        assert_eq!(args(&w, "a").as_deref(), Some(r#"search {"q":3}"#), "the latest call of an id");
        assert_eq!(args(&w, "b").as_deref(), Some(r#"search {"q":2}"#));
        assert_eq!(args(&w, "c"), None);
        // MAX_MEMORY more calls: "b" (recorded once, long ago) is forgotten; "a" went with its
        // old place, not with its latest one, until that one is the oldest too.
        for i in 0..MAX_MEMORY - 1 {
            w.record(call(&format!("x{i}"), i as u64));
        }
        assert_eq!(args(&w, "b"), None);
        assert_eq!(args(&w, "a").as_deref(), Some(r#"search {"q":3}"#));
        w.record(call("y", 0));
        assert_eq!(args(&w, "a"), None);
        assert_eq!(w.trace.events.len(), MAX_MEMORY + 3, "the trace keeps every call");
    }

    /// A long run holds at most twice KEEP_EVENTS events in memory; the trace read back is
    /// every event in the order recorded.
    #[test]
    fn a_long_trace_waits_on_disk_and_comes_back_whole() {
        use super::super::spill::KEEP_EVENTS;
        let mut w = one_search();
        let call = |i: usize| crate::trace::TraceEvent::ToolCall {
            turn: 1,
            call_id: format!("c{i}"),
            name: "search".to_owned(),
            args: crate::exchange::Args::new(&serde_json::json!({ "q": i })),
        };
        let total = 3 * KEEP_EVENTS + 5;
        for i in 0..total {
            w.record(call(i));
            assert!(w.trace.events.len() < 2 * KEEP_EVENTS, "at most this many in memory");
            assert_eq!(w.trace_len(), i + 1);
        }
        assert_eq!((w.spilled(), w.trace.events.len()), (2 * KEEP_EVENTS, KEEP_EVENTS + 5));
        w.unspill();
        assert_eq!((w.spilled(), w.trace.events.len()), (0, total));
        assert!(w.trace.events.iter().enumerate().all(|(i, e)| *e == call(i)), "every event, in order");
        assert!(w.findings.is_empty(), "{:?}", w.findings.iter().map(|f| &f.detail).collect::<Vec<_>>());
    }

    #[test]
    fn a_live_failure_stands_until_its_call_or_a_corrected_call_succeeds() {
        let mut w = one_search();
        w.conversations.insert(0, Conversation::new(0, 0, None, crate::provider::Format::OpenAiChat));
        let failing = |w: &World| w.conversations[&0].failing.keys().cloned().collect::<Vec<_>>();
        w.result_read(0, ("search", 1), true, Some(ErrorClass::BadArgs));
        w.result_read(0, ("search", 2), true, Some(ErrorClass::Transient));
        w.result_read(0, ("lookup", 3), true, None);
        assert_eq!(failing(&w), [("search".to_owned(), 1), ("search".to_owned(), 2)], "not the scenario's: ignored");
        // Another call of the tool succeeds: it corrected the bad arguments; the transient
        // failure of its other call still stands.
        w.result_read(0, ("search", 9), false, None);
        assert_eq!(failing(&w), [("search".to_owned(), 2)]);
        w.result_read(0, ("search", 2), false, None);
        assert!(failing(&w).is_empty());
    }
}
