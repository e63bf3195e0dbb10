//! Compiles a trace into what the engine replays: the task (the distinct calls the agent
//! needed, turn by turn, with their successful results) and the recorded fault schedule
//! (which attempt on which tool failed, and how) as `at` rules.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Trace, TraceEvent};
use crate::engine::faults::{ErrorClass, Fault, FaultRule, Target, Trigger};
use crate::engine::task::{Recorded, Task, canonical_json};

pub struct Compiled {
    pub task: Task,
    pub rules: Vec<FaultRule>,
}

/// The fault a recorded failure stands for: its status when known, else its class.
pub fn recorded_fault(status: Option<u16>, class: Option<&str>) -> Fault {
    let http = |status| Fault::Http { status, retry_after_ms: None, param: None, message: None };
    match (status, class) {
        (Some(s), _) if crate::engine::faults::http_class(s).is_some() => http(s),
        (_, Some("partial")) => Fault::Ambiguous,
        (_, Some("rate_limited")) => http(429),
        (_, Some("bad_args")) => http(400),
        (_, Some("terminal")) => http(404),
        _ => http(503),
    }
}

/// A result's content as the task's result value: JSON when it parses, else the string.
fn result_value(content: &str) -> Value {
    serde_json::from_str(content).unwrap_or_else(|_| Value::String(content.to_owned()))
}

pub fn compile(trace: &Trace) -> Compiled {
    struct Call<'a> {
        turn: u32,
        name: &'a str,
        args: &'a Value,
        canon: String,
    }
    let mut calls: BTreeMap<&str, Call> = BTreeMap::new();
    // (call, ok, partial, status, class, content) in result order.
    let mut results = Vec::new();
    let mut final_text = String::new();
    for ev in &trace.events {
        match ev {
            TraceEvent::ToolCall { turn, call_id, name, args } => {
                calls.insert(call_id, Call { turn: *turn, name, args, canon: canonical_json(args) });
            }
            TraceEvent::ToolResult { call_id, ok, status, content, error_class, .. } => {
                if calls.contains_key(call_id.as_str()) {
                    let partial = error_class.as_deref() == Some("partial");
                    results.push((
                        call_id.as_str(),
                        *ok && !partial,
                        partial,
                        *status,
                        error_class.as_deref(),
                        content.as_str(),
                    ));
                }
            }
            TraceEvent::Final { text, .. } => final_text.clone_from(text),
            TraceEvent::ModelCall { .. } => {}
        }
    }

    let results: Vec<_> = results.into_iter().map(|(id, ok, p, st, cl, co)| (&calls[id], ok, p, st, cl, co)).collect();
    let mut task = Task { final_text, ..Task::default() };
    for t in &trace.header.tools {
        task.tools.push(t.name.clone());
    }
    let mut steps: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut rules = Vec::new();
    let mut attempts: BTreeMap<&str, u32> = BTreeMap::new();
    let mut taken: Vec<(&str, &str)> = Vec::new();
    let mut stuck: Vec<(&str, String, ErrorClass)> = Vec::new();
    for (i, &(call, ok, partial, status, class, content)) in results.iter().enumerate() {
        let attempt = attempts.entry(call.name).or_insert(0);
        *attempt += 1;
        let tool_idx = task.tools.iter().position(|t| t == call.name).unwrap_or_else(|| {
            task.tools.push(call.name.to_owned());
            task.tools.len() - 1
        }) as u16;
        // Faults with memory repeat by themselves (design 3.3): a terminal fault sticks to the
        // tool, bad arguments and partial results to the call, so only the first is a rule.
        let fault = recorded_fault(status, class);
        let sticky_key = match fault.class() {
            ErrorClass::Terminal => Some((call.name, String::new(), ErrorClass::Terminal)),
            c @ (ErrorClass::BadArgs | ErrorClass::Partial) => Some((call.name, call.canon.clone(), c)),
            _ => None,
        };
        let repeat = sticky_key.as_ref().is_some_and(|k| stuck.contains(k));
        if (!ok || partial) && !repeat {
            stuck.extend(sticky_key);
            rules.push(FaultRule {
                target: Target::Tool(tool_idx),
                trigger: Trigger { at: Some(vec![*attempt]), ..Trigger::default() },
                label: format!("{} at [{}]: {} (recorded)", call.name, attempt, fault.label()),
                fault,
            });
        }
        // A call is work the task needs when it is the first of its kind and it either
        // succeeded or no later call of the same tool did (so it is not a bad first try).
        let first = !taken.contains(&(call.name, call.canon.as_str()));
        let resolved_later = results[i + 1..].iter().any(|r| r.0.name == call.name && r.1);
        if first && (ok || partial || !resolved_later) {
            taken.push((call.name, call.canon.as_str()));
            let result = if ok || partial { result_value(content) } else { Value::String("ok".into()) };
            let idx = task.push_call(call.name, call.args, &result, None);
            steps.entry(call.turn).or_default().push(idx);
        }
    }
    task.steps = steps.into_values().collect();
    task.recording = recording(trace, &task);
    Compiled { task, rules }
}

/// The recorded model's decisions, result by result, until the first unanswered call.
fn recording(trace: &Trace, task: &Task) -> Vec<Recorded> {
    use crate::engine::model::Action;
    use crate::envelope::Format;
    use crate::envelope::read::{Reader, Signal};
    use crate::trace::inspect::{Next, follow_up, stats};
    let s = stats(trace);
    let reader = Reader::default();
    let format = trace.header.provider.as_deref().and_then(Format::parse).unwrap_or(Format::OpenAiChat);
    let mut out = Vec::new();
    for (i, row) in s.rows.iter().enumerate() {
        let class = match row.outcome.as_str() {
            "ok" => None,
            "unanswered" => break,
            "partial" => Some(ErrorClass::Partial),
            "transient" => Some(ErrorClass::Transient),
            "rate_limited" => Some(ErrorClass::RateLimited),
            "terminal" => Some(ErrorClass::Terminal),
            _ => Some(ErrorClass::BadArgs),
        };
        let Some(tool) = task.tools.iter().position(|t| *t == row.tool) else { break };
        let signal = class.filter(|c| c.is_failure()).map(|_| {
            // Read the recorded content as the model received it in the trace's format.
            let mut wrapped = String::from(r#"{"role":"tool","content":"#);
            crate::envelope::render::push_json_str(&mut wrapped, &row.content);
            wrapped.push('}');
            let read = reader.signal(&wrapped);
            let flagged = row.evidence.as_deref().is_some_and(|e| e.contains("is_error: true"));
            if flagged && format.has_error_flag() && read > Signal::Flag { Signal::Flag } else { read }
        });
        let action = match follow_up(&s, i) {
            Next::RetryIdentical => Action::Repeat,
            Next::ChangedArgs => Action::FixArgs,
            Next::MovedOn => Action::Accept,
            Next::GaveUp => Action::GiveUp,
        };
        let more_available =
            class == Some(ErrorClass::Partial) && row.content.to_lowercase().contains("may be available");
        out.push(Recorded { tool: tool as u16, class, signal, more_available, action });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn worked_example_compiles_to_one_step_and_a_schedule() {
        let src = r#"{"tracefault_trace":1,"id":"w","source_format":"native","tools":[{"name":"search"}]}
{"type":"tool_call","turn":1,"call_id":"a","name":"search","args":{"q":"Paris"}}
{"type":"tool_result","call_id":"a","ok":false,"status":503,"content":"unavailable","error_class":"transient"}
{"type":"tool_call","turn":2,"call_id":"b","name":"search","args":{"q":"Paris"}}
{"type":"tool_result","call_id":"b","ok":false,"status":400,"content":"bad","error_class":"bad_args"}
{"type":"tool_call","turn":3,"call_id":"c","name":"search","args":{"q":"Paris, FR"}}
{"type":"tool_result","call_id":"c","ok":true,"content":"{\"t\":18}"}
{"type":"final","text":"18C","outcome":"answer"}
"#;
        let t = Trace::parse(src, Path::new("w.jsonl")).unwrap();
        let c = compile(&t);
        assert_eq!(c.task.steps, vec![vec![0]]);
        assert_eq!(c.task.calls[0].args, r#"{"q":"Paris, FR"}"#);
        assert_eq!(c.task.calls[0].result_json, r#"{"t":18}"#);
        assert_eq!(c.rules.len(), 2);
        assert_eq!(c.rules[0].trigger.at, Some(vec![1]));
        assert_eq!(c.rules[1].fault.status(), Some(400));
        assert_eq!(c.task.final_text, "18C");
    }

    #[test]
    fn recording_pairs_results_with_their_calls_whatever_their_order() {
        let src = r#"{"tracefault_trace":1,"id":"p","source_format":"native","tools":[{"name":"a"},{"name":"b"}]}
{"type":"tool_call","turn":1,"call_id":"x","name":"a","args":{}}
{"type":"tool_call","turn":1,"call_id":"y","name":"b","args":{}}
{"type":"tool_result","call_id":"y","ok":false,"status":503,"content":"ERROR: b is down","error_class":"transient"}
{"type":"tool_result","call_id":"x","ok":true,"content":"{}"}
{"type":"tool_call","turn":2,"call_id":"z","name":"b","args":{}}
{"type":"tool_result","call_id":"z","ok":true,"content":"{}"}
{"type":"final","text":"done","outcome":"answer"}
"#;
        let c = compile(&Trace::parse(src, Path::new("p.jsonl")).unwrap());
        let r = &c.task.recording;
        assert_eq!((r[0].tool, r[0].class, r[0].signal), (0, None, None));
        assert_eq!((r[1].tool, r[1].class), (1, Some(ErrorClass::Transient)));
        assert_eq!(r[1].signal, Some(crate::envelope::read::Signal::Prefix));
        assert_eq!(r[1].action, crate::engine::model::Action::Repeat);
    }
}
