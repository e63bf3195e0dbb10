//! Compiles a trace into what the engine replays: the task (the calls the agent needed, in the
//! recording's own turns, with their successful results) and the recorded fault schedule
//! (which attempt on which target failed, and how) as `at` rules.
//!
//! A recorded call is either new work or a re-issue of an earlier call of the same tool that
//! failed (or said more may be available) in an earlier turn: identical arguments (a retry) or
//! changed ones (a correction), sent in its place. Each chain of re-issues is one call of the
//! task, in the step of the turn that first issued it, so parallel calls stay parallel and a
//! failure is fixed only by the call sent in its place, never by a sibling.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::{Trace, TraceEvent};
use crate::engine::fault_plan::{FaultRule, Target, Trigger};
use crate::engine::task::Task;
use crate::fault::{BROKEN_STREAM_STATUS, ErrorClass, Fault, StreamBreak, http_class};

pub struct Compiled {
    pub task: Task,
    pub rules: Vec<FaultRule>,
    /// Every answered tool call of the recording, in call order, with its place in the task.
    pub calls: Vec<RecordedCall>,
    /// For each model call of the recording (in order), the provider rule its failure became.
    pub model_rules: Vec<Option<u16>>,
}

/// How a recorded call relates to the call it was sent in place of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Issue {
    /// New work: the first call of its chain.
    First,
    /// The identical call again (same tool, same canonical arguments).
    Identical,
    /// The same tool with changed arguments.
    Changed,
}

/// One answered tool call of a recording.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedCall {
    pub turn: u32,
    pub call_id: String,
    pub tool: String,
    pub args: Value,
    pub canon: String,
    /// `None` for a success; `Partial` for a result that said more may be available.
    pub class: Option<ErrorClass>,
    pub status: Option<u16>,
    pub content: String,
    /// The chain (the task call) it belongs to, and how it continues it.
    pub chain: usize,
    pub issue: Issue,
    /// The fault rule behind its outcome, and whether the rule's trigger fired here (false for
    /// a failure the faults' memory repeats by itself).
    pub rule: Option<(u16, bool)>,
}

/// The fault a recorded failure stands for: its status when known, else its class.
pub fn recorded_fault(status: Option<u16>, class: Option<&str>) -> Fault {
    match (status, class) {
        (Some(s), _) if http_class(s).is_some() => Fault::http(s),
        (_, Some("partial")) => Fault::Ambiguous { cursor: false },
        (_, Some("rate_limited")) => Fault::http(429),
        (_, Some("bad_args")) => Fault::http(400),
        (_, Some("terminal")) => Fault::http(404),
        _ => Fault::http(503),
    }
}

/// A result's content as the task's result value: JSON when it parses, else the string.
fn result_value(content: &str) -> Value {
    serde_json::from_str(content).unwrap_or_else(|_| Value::String(content.to_owned()))
}

/// The answered tool calls of a trace in call order, each with its recorded outcome.
fn answered_calls(trace: &Trace) -> Vec<RecordedCall> {
    let mut calls: Vec<RecordedCall> = Vec::new();
    let mut answered: Vec<bool> = Vec::new();
    // The latest call with each id: a result answers it.
    let mut latest: HashMap<&str, usize> = HashMap::new();
    for ev in &trace.events {
        match ev {
            TraceEvent::ToolCall { turn, call_id, name, args } => {
                latest.insert(call_id, calls.len());
                calls.push(RecordedCall {
                    turn: *turn,
                    call_id: call_id.clone(),
                    tool: name.clone(),
                    canon: args.as_json().to_owned(),
                    args: args.value(),
                    class: None,
                    status: None,
                    content: String::new(),
                    chain: 0,
                    issue: Issue::First,
                    rule: None,
                });
                answered.push(false);
            }
            // A cancelled call never ran: it is not answered.
            TraceEvent::ToolResult { cancelled: true, .. } => {}
            TraceEvent::ToolResult { call_id, ok, status, content, error_class, .. } => {
                let Some(&i) = latest.get(call_id.as_str()) else { continue };
                let partial = error_class.as_deref() == Some("partial");
                let c = &mut calls[i];
                c.class = if partial {
                    Some(ErrorClass::Partial)
                } else if *ok {
                    None
                } else {
                    Some(recorded_fault(*status, error_class.as_deref()).class())
                };
                c.status = *status;
                c.content.clone_from(content);
                answered[i] = true;
            }
            TraceEvent::ModelCall { .. }
            | TraceEvent::Final { .. }
            | TraceEvent::Mcp { .. }
            | TraceEvent::Breaker { .. }
            | TraceEvent::Decision { .. } => {}
        }
    }
    calls.into_iter().zip(answered).filter(|(_, a)| *a).map(|(c, _)| c).collect()
}

/// Links every call to the chain it continues (see the module comment); returns the number of
/// chains.
fn link_chains(calls: &mut [RecordedCall]) -> usize {
    struct Chain {
        canon: String,
        turn: u32,
    }
    let mut chains: Vec<Chain> = Vec::new();
    // Per tool, its open chains (last call failed or was partial), oldest first.
    let mut open: HashMap<String, Vec<usize>> = HashMap::new();
    let mut turn_start = 0;
    while turn_start < calls.len() {
        let turn = calls[turn_start].turn;
        let end = calls[turn_start..].iter().position(|c| c.turn != turn).map_or(calls.len(), |p| turn_start + p);
        let mut used: HashSet<usize> = HashSet::new();
        for c in &mut calls[turn_start..end] {
            let candidates = open.get(&c.tool).map_or(&[][..], Vec::as_slice);
            let free = |k: &&usize| chains[**k].turn < turn && !used.contains(*k);
            let identical = candidates.iter().filter(free).find(|&&k| chains[k].canon == c.canon).copied();
            let (k, issue) = match (identical, candidates.iter().find(free).copied()) {
                (Some(k), _) => (k, Issue::Identical),
                (None, Some(k)) => (k, Issue::Changed),
                (None, None) => {
                    chains.push(Chain { canon: String::new(), turn });
                    (chains.len() - 1, Issue::First)
                }
            };
            used.insert(k);
            c.chain = k;
            c.issue = issue;
            chains[k].canon.clone_from(&c.canon);
            chains[k].turn = turn;
        }
        // A chain stays open while its last call failed or said more may be available.
        for c in &calls[turn_start..end] {
            let list = open.entry(c.tool.clone()).or_default();
            list.retain(|&k| k != c.chain);
            if c.class.is_some() {
                let at = list.partition_point(|&k| k < c.chain);
                list.insert(at, c.chain);
            }
        }
        turn_start = end;
    }
    chains.len()
}

pub fn compile(trace: &Trace) -> Compiled {
    let mut calls = answered_calls(trace);
    let n_chains = link_chains(&mut calls);
    let mut task = Task::default();
    for t in &trace.header.tools {
        task.tools.push(t.name.clone());
    }
    let mut rules = Vec::new();

    // Provider failures, at the provider attempt they happened on.
    let mut model_rules = Vec::new();
    let mut provider_attempt = 0;
    for ev in &trace.events {
        match ev {
            TraceEvent::ModelCall { status, tokens_in, .. } => {
                provider_attempt += 1;
                model_rules.push(if *status == 200 {
                    None
                } else {
                    // A failed call whose input was billed is an answer whose stream broke (as
                    // tracefault records one); any other failure, its status.
                    let fault = if *status == BROKEN_STREAM_STATUS && *tokens_in > 0 {
                        Fault::Stream { after_events: 1, how: StreamBreak::Cut }
                    } else {
                        Fault::http(if http_class(*status).is_some() { *status } else { 500 })
                    };
                    rules.push(at_rule(Target::Provider, "provider", provider_attempt, fault));
                    Some(rules.len() as u16 - 1)
                });
            }
            TraceEvent::Final { text, .. } => task.final_text.clone_from(text),
            TraceEvent::ToolCall { .. }
            | TraceEvent::ToolResult { .. }
            | TraceEvent::Mcp { .. }
            | TraceEvent::Breaker { .. }
            | TraceEvent::Decision { .. } => {}
        }
    }

    // Tool failures at their attempt on the tool. Faults with memory repeat by themselves
    // (the book: faults): a terminal fault sticks to the tool, a partial result to the call, bad
    // arguments to the arguments — and a correction that fails again is the recorded model's
    // failed fix, which the profile's `p_fix_args` models, not a scheduled fault.
    let mut attempts: HashMap<String, u32> = HashMap::new();
    let mut terminal: HashMap<String, u16> = HashMap::new();
    let mut tool_index: HashMap<String, usize> = task.tools.iter().enumerate().map(|(i, t)| (t.clone(), i)).collect();
    let mut chain_memory: Vec<Vec<(ErrorClass, u16)>> = vec![Vec::new(); n_chains];
    for c in &mut calls {
        let attempt = {
            let a = attempts.entry(c.tool.clone()).or_insert(0);
            *a += 1;
            *a
        };
        let Some(class) = c.class else { continue };
        let remembered = match class {
            ErrorClass::Terminal => terminal.get(&c.tool).copied(),
            ErrorClass::BadArgs | ErrorClass::Partial => {
                chain_memory[c.chain].iter().find(|m| m.0 == class).map(|m| m.1)
            }
            ErrorClass::Transient | ErrorClass::RateLimited => None,
        };
        c.rule = Some(match remembered {
            Some(r) => (r, false),
            None => {
                let tool_idx = *tool_index.entry(c.tool.clone()).or_insert_with(|| {
                    task.tools.push(c.tool.clone());
                    task.tools.len() - 1
                });
                let fault = if class == ErrorClass::Partial {
                    Fault::Ambiguous { cursor: false }
                } else {
                    recorded_fault(c.status, Some(class.name()))
                };
                rules.push(at_rule(Target::Tool(tool_idx as u16), &c.tool, attempt, fault));
                let r = rules.len() as u16 - 1;
                match class {
                    ErrorClass::Terminal => {
                        terminal.insert(c.tool.clone(), r);
                    }
                    ErrorClass::BadArgs | ErrorClass::Partial => chain_memory[c.chain].push((class, r)),
                    _ => {}
                }
                (r, true)
            }
        });
    }

    // One task call per chain: its first arguments, its corrections, its successful result.
    let mut chain_calls: Vec<Vec<&RecordedCall>> = vec![Vec::new(); n_chains];
    for c in &calls {
        chain_calls[c.chain].push(c);
    }
    let mut steps: Vec<(u32, Vec<u32>)> = Vec::new();
    for members in &chain_calls {
        let first = members[0];
        let mut fixes: Vec<Value> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::from([first.canon.as_str()]);
        for m in &members[1..] {
            if seen.insert(&m.canon) {
                fixes.push(m.args.clone());
            }
        }
        let result = members
            .iter()
            .rev()
            .find(|m| !m.class.is_some_and(ErrorClass::is_failure))
            .map_or_else(|| Value::String("ok".into()), |m| result_value(&m.content));
        let idx = task.push_call(&first.tool, &first.args, &fixes, &result, None);
        match steps.last_mut() {
            Some((turn, step)) if *turn == first.turn => step.push(idx),
            _ => steps.push((first.turn, vec![idx])),
        }
    }
    task.steps = steps.into_iter().map(|s| s.1).collect();
    Compiled { task, rules, calls, model_rules }
}

/// A recorded fault: `fault` at attempt `attempt` of `target` (named `name` in its label).
pub(crate) fn at_rule(target: Target, name: &str, attempt: u32, fault: Fault) -> FaultRule {
    FaultRule {
        target,
        trigger: Trigger { at: Some(vec![attempt]), ..Trigger::default() },
        label: format!("{name} at [{attempt}]: {} (recorded)", fault.label()),
        fault,
        fleet: false,
        transport: false,
        key: None,
        commits: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse(src: &str) -> Trace {
        Trace::parse(src, Path::new("t.jsonl")).unwrap()
    }

    #[test]
    fn worked_example_compiles_to_one_call_a_schedule_and_its_fix() {
        let t = parse(
            r#"{"tracefault_trace":1,"id":"w","source_format":"native","tools":[{"name":"search"}]}
{"type":"tool_call","turn":1,"call_id":"a","name":"search","args":{"q":"weather Paris"}}
{"type":"tool_result","call_id":"a","ok":false,"status":503,"content":"unavailable","error_class":"transient"}
{"type":"tool_call","turn":2,"call_id":"b","name":"search","args":{"q":"weather Paris"}}
{"type":"tool_result","call_id":"b","ok":false,"status":503,"content":"unavailable","error_class":"transient"}
{"type":"tool_call","turn":3,"call_id":"c","name":"search","args":{"q":"weather Paris"}}
{"type":"tool_result","call_id":"c","ok":false,"status":400,"content":"bad","error_class":"bad_args"}
{"type":"tool_call","turn":4,"call_id":"d","name":"search","args":{"q":"Paris"}}
{"type":"tool_result","call_id":"d","ok":true,"content":"{\"t\":18}"}
{"type":"final","text":"18C","outcome":"answer"}
"#,
        );
        let c = compile(&t);
        assert_eq!(c.task.steps, vec![vec![0]]);
        let call = &c.task.calls[0];
        assert_eq!(call.args, r#"{"q":"weather Paris"}"#, "the task starts from the first arguments");
        assert_eq!(call.args_for(1), r#"{"q":"Paris"}"#, "and the recorded correction is its first fix");
        assert_eq!(call.result_json, r#"{"t":18}"#);
        let at: Vec<_> = c.rules.iter().map(|r| (r.trigger.at.clone().unwrap()[0], r.fault.status())).collect();
        assert_eq!(at, [(1, Some(503)), (2, Some(503)), (3, Some(400))]);
        let issues: Vec<Issue> = c.calls.iter().map(|c| c.issue).collect();
        assert_eq!(issues, [Issue::First, Issue::Identical, Issue::Identical, Issue::Changed]);
        assert_eq!(c.task.final_text, "18C");
    }

    #[test]
    fn a_failed_call_with_its_input_billed_is_a_broken_stream() {
        // A 502 with input tokens (a stream that broke, as recorded) and one without (the
        // provider's 502), at provider attempts 1 and 2.
        let t = parse(
            r#"{"tracefault_trace":1,"id":"s","source_format":"native","tools":[]}
{"type":"model_call","turn":1,"status":502,"tokens_in":40,"tokens_out":0,"stop":"error"}
{"type":"model_call","turn":1,"status":502,"tokens_in":0,"tokens_out":0,"stop":"error"}
{"type":"model_call","turn":1,"status":200,"tokens_in":40,"tokens_out":5,"stop":"end","text":"done"}
{"type":"final","text":"done","outcome":"answer"}
"#,
        );
        let faults: Vec<Fault> = compile(&t).rules.into_iter().map(|r| r.fault).collect();
        assert_eq!(faults, [Fault::Stream { after_events: 1, how: StreamBreak::Cut }, Fault::http(502)]);
    }

    #[test]
    fn a_failing_parallel_call_is_not_fixed_by_its_sibling() {
        // get_location("Londos") fails beside get_location("London"): two calls in one step.
        let t = parse(
            r#"{"tracefault_trace":1,"id":"p","source_format":"native","tools":[{"name":"get_location"}]}
{"type":"tool_call","turn":1,"call_id":"x","name":"get_location","args":{"loc_name":"Londos"}}
{"type":"tool_call","turn":1,"call_id":"y","name":"get_location","args":{"loc_name":"London"}}
{"type":"tool_result","call_id":"x","ok":false,"content":"Unknown place","error_class":"bad_args"}
{"type":"tool_result","call_id":"y","ok":true,"content":"{\"lat\":51}"}
{"type":"final","text":"done","outcome":"answer"}
"#,
        );
        let c = compile(&t);
        assert_eq!(c.task.steps, vec![vec![0, 1]]);
        assert_eq!(c.task.calls[0].args, r#"{"loc_name":"Londos"}"#);
        assert_eq!(c.task.calls[1].args, r#"{"loc_name":"London"}"#);
        assert_eq!(c.rules.len(), 1);
        assert_eq!(c.rules[0].trigger.at, Some(vec![1]));
    }

    #[test]
    fn a_retried_parallel_call_stays_in_its_turn_and_memory_is_not_rescheduled() {
        let t = parse(
            r#"{"tracefault_trace":1,"id":"p","source_format":"native","tools":[{"name":"a"},{"name":"b"}]}
{"type":"tool_call","turn":1,"call_id":"x","name":"a","args":{}}
{"type":"tool_call","turn":1,"call_id":"y","name":"b","args":{"k":1}}
{"type":"tool_result","call_id":"y","ok":false,"status":400,"content":"ERROR: bad","error_class":"bad_args"}
{"type":"tool_result","call_id":"x","ok":true,"content":"{}"}
{"type":"tool_call","turn":2,"call_id":"z","name":"b","args":{"k":1}}
{"type":"tool_result","call_id":"z","ok":false,"status":400,"content":"ERROR: bad","error_class":"bad_args"}
{"type":"tool_call","turn":3,"call_id":"w","name":"b","args":{"k":2}}
{"type":"tool_result","call_id":"w","ok":false,"status":400,"content":"ERROR: bad","error_class":"bad_args"}
{"type":"tool_call","turn":4,"call_id":"v","name":"b","args":{"k":3}}
{"type":"tool_result","call_id":"v","ok":true,"content":"{\"done\":1}"}
{"type":"final","text":"done","outcome":"answer"}
"#,
        );
        let c = compile(&t);
        assert_eq!(c.task.steps, vec![vec![0, 1]]);
        assert_eq!(c.rules.len(), 1, "the identical repeat and the failed fix are memory and the model's");
        let rules: Vec<_> = c.calls.iter().map(|c| c.rule).collect();
        assert_eq!(rules, [None, Some((0, true)), Some((0, false)), Some((0, false)), None]);
        assert_eq!(c.task.calls[1].args_for(1), r#"{"k":2}"#);
        assert_eq!(c.task.calls[1].args_for(2), r#"{"k":3}"#);
    }
}
