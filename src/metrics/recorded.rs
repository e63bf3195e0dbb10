//! What the recorded model did, folded by the same definitions as a simulated run: the
//! `recorded` row reports show beside the strategies (the book: the simulated model), never mixed into them.
//!
//! The trace's events become the engine's events — each recorded call an attempt by the model
//! (new work or a re-issue in place of a failed call, as [`compile`](crate::trace::compile)
//! links them) — and [`RunMetrics`] folds them like any run.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::engine::events::{By, Event, Observer, TerminatedBy};
use crate::envelope::read::read_text;
use crate::fault::ErrorClass;
use crate::metrics::run::RunMetrics;
use crate::trace::compile::{Compiled, Issue};
use crate::trace::{FinalOutcome, Stop, Trace, TraceEvent};

/// The strategy name of the recorded row.
pub const RECORDED: &str = "recorded";

/// The recorded run's metrics. A recording that stops without a final answer counts as cut
/// off by its step cap (`step_cap`); virtual time is the sum of recorded latencies (model
/// calls, and the slowest result of each turn).
pub fn recorded_metrics(trace: &Trace, compiled: &Compiled) -> RunMetrics {
    let mut m = RunMetrics::default();
    m.reset(compiled.rules.len());
    let mut model_index = 0;
    let mut previous_failed = false;
    let mut t_ms = 0u64;
    let mut turn_latency = 0u64;
    // Calls asked for and not yet answered; a model turn that starts with any of them open is
    // a protocol violation, as in the engine.
    let mut open: HashSet<&str> = HashSet::new();
    // The compiled calls by id, in order: each result takes the first not yet taken.
    let mut by_id: HashMap<&str, VecDeque<usize>> = HashMap::new();
    for (k, c) in compiled.calls.iter().enumerate() {
        by_id.entry(c.call_id.as_str()).or_default().push_back(k);
    }
    // Per chain, the arguments that repeating cannot fix: they already failed as bad (the fault
    // sticks to them), failed terminally, or got a result complete in truth.
    let mut hopeless_args: Vec<HashSet<&str>> = Vec::new();
    let mut ended = false;
    for ev in &trace.events {
        match ev {
            TraceEvent::ModelCall { turn, status, tokens_in, tokens_out, latency_ms, stop, .. } => {
                for k in 0..open.len() {
                    m.event(&Event::ProtocolViolation { call_id: k as u32 });
                }
                open.clear();
                t_ms += std::mem::take(&mut turn_latency);
                let rule = compiled.model_rules.get(model_index).copied().flatten();
                model_index += 1;
                m.event(&Event::ModelCall {
                    turn: *turn,
                    t_ms,
                    status: *status,
                    tokens_in: *tokens_in,
                    tokens_out: *tokens_out,
                    retry: previous_failed,
                    rule,
                    fired: rule.is_some(),
                    wasted: false,
                    load: false,
                    ends: *stop == Stop::End,
                });
                previous_failed = *status != 200;
                t_ms += latency_ms.unwrap_or(0);
            }
            TraceEvent::ToolCall { call_id, .. } => {
                open.insert(call_id);
            }
            TraceEvent::ToolResult { call_id, content, latency_ms, .. } => {
                open.remove(call_id.as_str());
                let Some(k) = by_id.get_mut(call_id.as_str()).and_then(VecDeque::pop_front) else { continue };
                let c = &compiled.calls[k];
                turn_latency = turn_latency.max(latency_ms.unwrap_or(0));
                if hopeless_args.len() <= c.chain {
                    hopeless_args.resize_with(c.chain + 1, HashSet::new);
                }
                let hopeless = hopeless_args[c.chain].contains(c.canon.as_str());
                if matches!(c.class, Some(ErrorClass::BadArgs | ErrorClass::Terminal | ErrorClass::Partial)) {
                    hopeless_args[c.chain].insert(&c.canon);
                }
                let (rule, fired) = c.rule.map_or((None, false), |(r, f)| (Some(r), f));
                m.event(&Event::Attempt {
                    call_id: k as u32,
                    tool: 0,
                    attempt: 0,
                    by: if c.issue == Issue::First { By::Model } else { By::ModelReissue },
                    t_ms,
                    class: c.class,
                    status: c.status,
                    rule,
                    fired,
                    wasted: c.issue != Issue::First && hopeless,
                    load: false,
                    // A trace does not say which failed attempt had committed.
                    duplicate: false,
                });
                let failed = c.class.is_some_and(ErrorClass::is_failure);
                m.event(&Event::ToolResult {
                    call_id: k as u32,
                    class: c.class,
                    content,
                    raw_leak: failed && read_text(content, false).stack_trace,
                    latency_ms: latency_ms.unwrap_or(0),
                });
            }
            TraceEvent::Final { text, outcome, success, .. } => {
                // An answer the source judged wrong is not a success; an interruption or an
                // error stopped the run before an answer and not at a cap: both count as
                // giving up.
                let by = match (outcome, success) {
                    (_, Some(false)) => TerminatedBy::GaveUp,
                    (FinalOutcome::Answer, _) => TerminatedBy::Answer,
                    (FinalOutcome::GaveUp | FinalOutcome::Interrupted | FinalOutcome::Error, _) => TerminatedBy::GaveUp,
                    (FinalOutcome::CutOff, _) => TerminatedBy::StepCap,
                };
                // An answer the source judged wrong claimed a success that was not.
                let false_success = *outcome == FinalOutcome::Answer && *success == Some(false);
                m.event(&Event::End { by, t_ms: t_ms + turn_latency, started_ms: 0, text, false_success });
                ended = true;
            }
            TraceEvent::Mcp { .. } | TraceEvent::Breaker { .. } | TraceEvent::Decision { .. } => {}
        }
    }
    if !ended {
        let t_ms = t_ms + turn_latency;
        m.event(&Event::End { by: TerminatedBy::StepCap, t_ms, started_ms: 0, text: "", false_success: false });
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::compile::compile;
    use std::path::Path;

    #[test]
    fn the_worked_example_by_hand() {
        let t = Trace::parse(
            r#"{"tracefault_trace":1,"id":"w","source_format":"native","tools":[{"name":"search"}]}
{"type":"model_call","turn":1,"status":200,"tokens_in":100,"tokens_out":10,"latency_ms":900,"stop":"tool_calls"}
{"type":"tool_call","turn":1,"call_id":"a","name":"search","args":{"q":"weather Paris"}}
{"type":"tool_result","call_id":"a","ok":false,"status":503,"content":"ERROR: unavailable","error_class":"transient","latency_ms":200}
{"type":"model_call","turn":2,"status":200,"tokens_in":120,"tokens_out":10,"latency_ms":900,"stop":"tool_calls"}
{"type":"tool_call","turn":2,"call_id":"b","name":"search","args":{"q":"weather Paris"}}
{"type":"tool_result","call_id":"b","ok":false,"status":400,"content":"ERROR: bad","error_class":"bad_args","latency_ms":100}
{"type":"model_call","turn":3,"status":200,"tokens_in":140,"tokens_out":10,"latency_ms":900,"stop":"tool_calls"}
{"type":"tool_call","turn":3,"call_id":"c","name":"search","args":{"q":"weather Paris"}}
{"type":"tool_result","call_id":"c","ok":false,"status":400,"content":"ERROR: bad","error_class":"bad_args","latency_ms":100}
{"type":"model_call","turn":4,"status":200,"tokens_in":160,"tokens_out":10,"latency_ms":900,"stop":"tool_calls"}
{"type":"tool_call","turn":4,"call_id":"d","name":"search","args":{"q":"Paris"}}
{"type":"tool_result","call_id":"d","ok":true,"content":"{}","latency_ms":300}
{"type":"model_call","turn":5,"status":200,"tokens_in":180,"tokens_out":5,"latency_ms":800,"stop":"end"}
{"type":"final","text":"done","outcome":"answer"}
"#,
            Path::new("w.jsonl"),
        )
        .unwrap();
        let m = recorded_metrics(&t, &compile(&t));
        assert_eq!(m.terminated_by(), TerminatedBy::Answer);
        assert_eq!((m.model_calls, m.tool_calls), (5, 4));
        // Only the identical repeat after bad arguments (call c) could not help.
        assert_eq!(m.wasted_retries, 1);
        // The model turn after the 503 (turn 2) is a transient round trip.
        assert_eq!(m.model_transient_roundtrips, 1);
        assert_eq!(m.faults_injected, 3);
        assert_eq!(m.tokens, 110 + 130 + 150 + 170 + 185);
        // 4 × 900 + 800 of model time, and each turn's result: 200 + 100 + 100 + 300.
        assert_eq!(m.virtual_ms, 4 * 900 + 800 + 700);
        assert_eq!(m.protocol_violations, 0);
        assert!(!m.unnecessary_failure());
    }
}
