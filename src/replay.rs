//! Reproducing a captured trace: `as-recorded` replays the recorded decisions and faults through
//! the engine and must reproduce the recorded counts exactly; what-if replays the same task and
//! fault schedule under other strategies and says where each first departs from the recording.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::engine::Scenario;
use crate::engine::events::{By, Event, Observer, TerminatedBy};
use crate::engine::fault_plan::{FaultPlan, FaultRule, Target};
use crate::engine::fleet::Fleet;
use crate::engine::limits::{ProviderLoad, ToolLoad};
use crate::engine::profile::Profile;
use crate::engine::rng::fnv1a64;
use crate::engine::strategy::{Partials, Routing, Strategy};
use crate::engine::task::{Ending, Policy, Script, Task};
use crate::envelope::Encoding;
use crate::fault::{ErrorClass, Fault, http_class};
use crate::metrics::recorded::recorded_metrics;
use crate::provider::Format;
use crate::scenario::Loaded;
use crate::trace::compile::{compile, recorded_fault};
use crate::trace::inspect::stats;
use crate::trace::{FinalOutcome, Stop, Trace, TraceEvent};

pub const AS_RECORDED: &str = "as-recorded";

/// The counts a replay must reproduce.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub model_calls: u64,
    pub tool_calls: u64,
    pub tool_failures: u64,
    pub failing_repeats: u64,
    pub ended: String,
}

pub fn recorded_counts(trace: &Trace) -> Counts {
    let s = stats(trace);
    Counts {
        model_calls: s.model_calls,
        tool_calls: s.tool_calls,
        tool_failures: s.tool_failures,
        failing_repeats: s.failing_repeats,
        ended: s.ended.to_owned(),
    }
}

/// The provider format a trace's model saw.
pub fn trace_format(trace: &Trace) -> Format {
    trace.header.provider.as_deref().and_then(Format::parse).unwrap_or(Format::OpenAiChat)
}

fn scenario(
    name: &str,
    format: Format,
    task: Task,
    rules: Vec<FaultRule>,
    strategies: Vec<Strategy>,
    seed: u64,
    runs: u64,
) -> Scenario {
    let mut target_hashes: Vec<u64> = task.tools.iter().map(|t| fnv1a64(t.as_bytes())).collect();
    target_hashes.push(fnv1a64(b"provider"));
    Scenario {
        name: name.to_owned(),
        name_hash: fnv1a64(name.as_bytes()),
        description: format!("Replay of trace {name}."),
        path: std::path::PathBuf::from(name),
        seed,
        runs,
        format,
        strategies,
        baseline: 0,
        faults: FaultPlan::new(rules, task.tools.len()),
        loads: vec![ToolLoad::default(); task.tools.len()],
        loaded: false,
        tool_upstreams: vec![None; task.tools.len()],
        effects: vec![crate::engine::scenario::Effect::default(); task.tools.len()],
        provider_load: ProviderLoad::default(),
        pricing: None,
        prices: Default::default(),
        fleet: Fleet::default(),
        task,
        policy: Policy::default(),
        profile: Profile::bundled_default(),
        gates: Vec::new(),
        target_hashes,
    }
}

/// The strategy that replays recorded decisions: the model sees every failure, nothing guards.
pub fn as_recorded_strategy(format: Format) -> Strategy {
    Strategy {
        name: AS_RECORDED.into(),
        encoding: if format.has_error_flag() { Encoding::Flag } else { Encoding::Prefix },
        routing: Routing::Model,
        partials: Partials::Ambiguous,
        breaker: false,
        fleet_breaker: false,
        budgets: false,
        loop_guard: false,
        retry: None,
        max_result_kb: None,
    }
}

/// The recorded turns as a script, and the recorded outcome of every attempt as rules. The
/// trace is taken apart: each result's text is let go once the task holds it.
pub fn as_recorded_scenario(trace: Trace) -> Scenario {
    let format = trace_format(&trace);
    let mut task = Task::default();
    for t in &trace.header.tools {
        task.tools.push(t.name.clone());
    }
    let ok_models: Vec<(u32, Stop)> = trace
        .events
        .iter()
        .filter_map(|e| match e {
            TraceEvent::ModelCall { turn, status: 200, stop, .. } => Some((*turn, *stop)),
            _ => None,
        })
        .collect();
    let outcome = trace.events.iter().rev().find_map(|e| match e {
        TraceEvent::Final { outcome, text, success, .. } => Some((*outcome, text.clone(), *success)),
        _ => None,
    });
    // The last model call is the final turn when it asked for no tool.
    let last_call_turn = trace.events.iter().rev().find_map(|e| match e {
        TraceEvent::ToolCall { turn, .. } => Some(*turn),
        _ => None,
    });
    let final_turn = ok_models.last().filter(|(t, _)| last_call_turn != Some(*t)).map(|m| m.0);
    let ending = match (final_turn, outcome.as_ref().map(|o| (o.0, o.2))) {
        (
            Some(_),
            Some((FinalOutcome::GaveUp | FinalOutcome::Interrupted | FinalOutcome::Error, _) | (_, Some(false))),
        ) => Ending::GaveUp,
        (Some(_), _) => Ending::Answer,
        (None, _) => Ending::CutOff,
    };
    let claimed = outcome.as_ref().is_some_and(|o| o.0 == FinalOutcome::Answer && o.2 == Some(false));
    task.final_text = outcome.map(|o| o.1).unwrap_or_default();
    task.script = Some(Script { ending, claimed });

    let mut rules = Vec::new();
    let mut provider_attempt = 0;
    let mut tool_attempts: Vec<u32> = Vec::new();
    // The latest call with each id, and its attempt number on its tool: a result answers it.
    let mut calls: HashMap<String, (u32, u32)> = HashMap::new();
    for ev in trace.events {
        match ev {
            TraceEvent::ModelCall { turn, status, .. } => {
                provider_attempt += 1;
                if status != 200 {
                    let status = if http_class(status).is_some() { status } else { 500 };
                    rules.push(rule(
                        Target::Provider,
                        provider_attempt,
                        Fault::Http { status, retry_after_ms: None, param: None, message: None },
                        "provider",
                    ));
                } else if Some(turn) != final_turn {
                    task.steps.push(Vec::new());
                }
            }
            TraceEvent::ToolCall { call_id, name, args, .. } => {
                let idx = task.push_recorded_call(&name, args.as_json());
                let tool = usize::from(task.calls[idx as usize].tool);
                tool_attempts.resize(task.tools.len(), 0);
                tool_attempts[tool] += 1;
                if task.steps.is_empty() {
                    task.steps.push(Vec::new());
                }
                task.steps.last_mut().expect("pushed").push(idx);
                calls.insert(call_id, (idx, tool_attempts[tool]));
            }
            TraceEvent::ToolResult { cancelled: true, .. } => {}
            TraceEvent::ToolResult { call_id, ok, status, content, error_class, .. } => {
                let Some(&(idx, attempt)) = calls.get(&call_id) else { continue };
                let spec = &mut task.calls[idx as usize];
                spec.set_result_text(&content);
                drop(content);
                let partial = error_class.as_deref() == Some("partial");
                if !ok || partial {
                    let tool = usize::from(spec.tool);
                    let fault = recorded_fault(status, error_class.as_deref());
                    let name = task.tools[tool].clone();
                    rules.push(rule(Target::Tool(tool as u16), attempt, fault, &name));
                }
            }
            TraceEvent::Final { .. }
            | TraceEvent::Mcp { .. }
            | TraceEvent::Breaker { .. }
            | TraceEvent::Decision { .. } => {}
        }
    }
    let strategy = as_recorded_strategy(format);
    let mut sc = scenario(&trace.header.id, format, task, rules, vec![strategy], 0, 1);
    sc.policy.max_steps = u32::MAX;
    sc
}

fn rule(target: Target, attempt: u32, fault: Fault, name: &str) -> FaultRule {
    crate::trace::compile::at_rule(target, name, attempt, fault)
}

/// Counts what a replayed run did, the way [`recorded_counts`] counts a trace.
#[derive(Default)]
struct Counter {
    model_calls: u64,
    tool_calls: u64,
    tool_failures: u64,
    failing_repeats: u64,
    /// (tool, canonical args, variant) of each call awaiting its result, by call id.
    open: HashMap<u32, (String, String, u32)>,
    /// Calls whose result failed.
    failed: HashSet<(String, String, u32)>,
    ended: Option<TerminatedBy>,
}

impl Observer for Counter {
    fn event(&mut self, e: &Event<'_>) {
        match *e {
            Event::ModelCall { .. } => self.model_calls += 1,
            Event::ToolCall { call_id, tool, args, variant, .. } => {
                let key = (tool.to_owned(), args.to_owned(), variant);
                if self.failed.contains(&key) {
                    self.failing_repeats += 1;
                }
                self.open.insert(call_id, key);
            }
            Event::Attempt { class, .. } => {
                self.tool_calls += 1;
                if class.is_some_and(ErrorClass::is_failure) {
                    self.tool_failures += 1;
                }
            }
            Event::ToolResult { call_id, class, .. } => {
                if let Some(key) = self.open.remove(&call_id)
                    && class.is_some_and(ErrorClass::is_failure)
                {
                    self.failed.insert(key);
                }
            }
            Event::End { by, .. } => self.ended = Some(by),
            Event::Rejected { .. }
            | Event::BreakerTrip { .. }
            | Event::Misled { .. }
            | Event::ProtocolViolation { .. }
            | Event::Decision { .. }
            | Event::Done { .. } => {}
        }
    }
}

/// Counts what the recording did, then replays its decisions through the engine and counts
/// what happened: (recorded, replayed).
pub fn replay_as_recorded(trace: Trace) -> (Counts, Counts) {
    let recorded = recorded_counts(&trace);
    let sc = as_recorded_scenario(trace);
    let mut counter = Counter::default();
    crate::suite::run_one(&sc, 0, 0, &mut counter);
    // A recorded answer judged a failure replays as a give-up that claims success: an answer.
    let claimed = sc.task.script.is_some_and(|s| s.claimed);
    let ended = match counter.ended {
        Some(TerminatedBy::Answer) => "answer".to_owned(),
        Some(TerminatedBy::GaveUp) if claimed => "answer".to_owned(),
        Some(TerminatedBy::GaveUp) => "gave_up".to_owned(),
        // The script ran out without a final model call: it ended as the recording did there.
        Some(TerminatedBy::StepCap) => {
            if recorded.ended == "answer" {
                "cut_off".to_owned()
            } else {
                recorded.ended.clone()
            }
        }
        Some(other) => other.name().to_owned(),
        None => "none".to_owned(),
    };
    let replayed = Counts {
        model_calls: counter.model_calls,
        tool_calls: counter.tool_calls,
        tool_failures: counter.tool_failures,
        failing_repeats: counter.failing_repeats,
        ended,
    };
    (recorded, replayed)
}

/// The task the recording needed and its fault schedule, under `strategies`, every one with
/// the same simulated model; what the recorded model did is the scenario's `recorded` run.
pub fn whatif_scenario(trace: &Trace, strategies: Vec<Strategy>, seed: u64, runs: u64) -> Loaded {
    let c = compile(trace);
    let recorded = Some(recorded_metrics(trace, &c));
    Loaded {
        scenario: scenario(&trace.header.id, trace_format(trace), c.task, c.rules, strategies, seed, runs),
        recorded,
    }
}

/// One tool call as both sides can describe it.
#[derive(Clone, Debug, PartialEq)]
struct Step {
    tool: String,
    args: String,
    outcome: String,
    by: Option<By>,
}

fn recorded_steps(trace: &Trace) -> Vec<Step> {
    stats(trace)
        .rows
        .into_iter()
        .map(|r| Step { tool: r.tool.to_owned(), args: r.args.to_owned(), outcome: r.outcome.to_owned(), by: None })
        .collect()
}

#[derive(Default)]
struct Steps {
    steps: Vec<Step>,
    /// Call id → its step.
    open: HashMap<u32, usize>,
}

impl Observer for Steps {
    fn event(&mut self, e: &Event<'_>) {
        match *e {
            Event::ToolCall { call_id, tool, args, .. } => {
                self.open.insert(call_id, self.steps.len());
                let step =
                    Step { tool: tool.to_owned(), args: args.to_owned(), outcome: "unanswered".into(), by: None };
                self.steps.push(step);
            }
            Event::Attempt { call_id, class, by, .. } => {
                if let Some(&i) = self.open.get(&call_id) {
                    if by == By::Orchestrator {
                        // Each orchestrator retry is an extra attempt the recording did not show.
                        let mut s = self.steps[i].clone();
                        s.by = Some(By::Orchestrator);
                        s.outcome = class.map_or("ok", |c| c.name()).to_owned();
                        self.steps.push(s);
                    } else {
                        self.steps[i].outcome = class.map_or("ok", |c| c.name()).to_owned();
                    }
                }
            }
            _ => {}
        }
    }
}

/// Where run `run` of strategy `s` first departs from the recording, and why; `None` when it
/// makes exactly the recorded calls with the recorded outcomes.
pub fn divergence(trace: &Trace, sc: &Scenario, s: usize, run: u64) -> Option<String> {
    let rec = recorded_steps(trace);
    let mut obs = Steps::default();
    crate::suite::run_one(sc, s, run, &mut obs);
    let rep = obs.steps;
    let strat = &sc.strategies[s];
    // The same situation as the engine uses to follow a recording: same tool, same outcome, no
    // extra orchestrator attempt. (Arguments may differ: the task carries the fixed ones.)
    let same = |a: Option<&Step>, b: Option<&Step>| match (a, b) {
        (Some(a), Some(b)) => a.tool == b.tool && a.outcome == b.outcome && b.by.is_none(),
        (None, None) => true,
        _ => false,
    };
    let i = (0..rec.len().max(rep.len())).find(|&i| !same(rec.get(i), rep.get(i)))?;
    let show = |x: Option<&Step>| {
        x.map_or("nothing (the run had ended)".to_owned(), |x| format!("{} {} → {}", x.tool, clip(&x.args), x.outcome))
    };
    let (r, p) = (rec.get(i), rep.get(i));
    let repeated_success =
        r.is_some_and(|r| rec[..i].iter().any(|e| e.tool == r.tool && e.args == r.args && e.outcome == "ok"));
    let why = match (r, p) {
        (Some(_), _) if repeated_success => {
            "the recording repeated a call that had already succeeded; the replayed task needs each call once".to_owned()
        }
        (_, Some(p)) if p.by == Some(By::Orchestrator) => {
            "the orchestrator retried a retryable failure (routing = orchestrator); the recorded agent handed it to the model".to_owned()
        }
        (Some(r), Some(p)) if r.tool == p.tool => format!(
            "a different injected fault: the recorded schedule is by attempt number, and attempts shifted under {}",
            strat.name
        ),
        (Some(_), Some(_)) => format!(
            "a model decision: the simulated model (profile `{}`) read the previous result under encoding `{}` and chose otherwise",
            sc.profile.name,
            strat.encoding.name()
        ),
        (Some(_), None) => "the replay ended earlier (a guard, a budget, or the model giving up)".to_owned(),
        (None, _) => "the replay went on after the recording ended".to_owned(),
    };
    Some(format!("call {}: recorded {}; replay {}; why: {why}", i + 1, show(r), show(p)))
}

fn clip(s: &str) -> String {
    if s.chars().count() > 60 { s.chars().take(59).collect::<String>() + "…" } else { s.to_owned() }
}
