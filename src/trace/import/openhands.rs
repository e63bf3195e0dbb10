//! OpenHands event streams: a saved trajectory (`save_trajectory_path`, `tests/runtime/trajs`), a
//! JSON list of events `{id, source, message, action, args, tool_call_metadata?}` or
//! `{id, source, observation, content, extras, cause}`; and eval output (`output.jsonl`), one
//! instance a line with `history` (those events, or very old `[[action, observation], …]`
//! pairs) and `error`, one conversation a line. The 2024 resolver output holds flat events
//! (no `id`, `args` or `extras`; fields at the top, `exit_code` among them).
//!
//! - **Model calls.** The distinct `tool_call_metadata.model_response.id` (one response with N
//!   tool calls gives N actions sharing it; its text and `usage` come from that response), plus
//!   each agent `message` action without metadata, plus each agent `error` observation with no
//!   `cause` and no metadata (a malformed call the agent raised on before any action existed: a
//!   model call with no tool call). In flat legacy events, every agent action is one call.
//! - **Tool calls.** Actions with `tool_call_metadata`: name `function_name`, id `tool_call_id`,
//!   arguments the model's own (`function.arguments` of that call in the metadata's
//!   `model_response`), else the action's `args` (`finish` and `think` are tool calls too). Agent actions of a
//!   tool kind without metadata (legacy events, agents that do not call functions) are tool
//!   calls named by their action type. System, recall, state-change and user-sourced actions
//!   are not model activity and are skipped.
//! - **Results.** Observations whose `cause` is the action's `id` (or whose metadata names its
//!   `tool_call_id`); legacy observations pair by type and position. Structural flags:
//!   `extras.metadata.exit_code` (legacy: top-level `exit_code`), else a top-level `success`,
//!   for `run`; `observation: "error"`; the 2024 editor's `[No exact match found in …]`. A
//!   command's text is what the model read: `extras.metadata.prefix`, the output, its `suffix`
//!   (where OpenHands says a command with no new output still runs: exit code -1). A `user_rejected` observation is a call the user
//!   cancelled. `run_ipython` results carry no code: the text rules decide.
//! - **Endings.** A `finish` action is an answer (text `final_thought`, else `thought`, else its
//!   message; `task_completed` or the resolver's `success` as the verdict), `reject` gave up; in
//!   raw streams `agent_state_changed` to `error` is an error (`extras.reason`), to `stopped` or
//!   `paused` interrupted, to `awaiting_user_input` or `finished` an answer; a later user message
//!   reopens the conversation. An eval line's `error` (when no `finish` came) is cut off for
//!   the maximum iteration or budget, else an error; the text is the reason.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::ImportError;
use super::conversation::{CallItem, Conversation, Ending, Item, parse_args};
use crate::trace::{Args, FinalOutcome};

/// Action types a model makes through a tool (when no metadata says so).
const TOOL_ACTIONS: [&str; 13] = [
    "run",
    "run_ipython",
    "read",
    "write",
    "edit",
    "browse",
    "browse_interactive",
    "call_tool_mcp",
    "delegate",
    "think",
    "finish",
    "reject",
    "task_tracking",
];

/// Whether `v` is an OpenHands trajectory (a list of events) or eval output (instances with a
/// `history`, one a line).
pub fn fits(v: &Value) -> Result<(), ImportError> {
    match v {
        Value::Array(list) => match list.first() {
            None => Err(ImportError::at("", "an OpenHands event list or eval output (not empty)")),
            Some(first) if first.get("history").is_some() => {
                for (k, line) in list.iter().enumerate() {
                    instance_fits(line, &format!("/{k}"))?;
                }
                Ok(())
            }
            Some(first) => event_fits(first, "/0", true),
        },
        Value::Object(_) => instance_fits(v, ""),
        _ => Err(ImportError::at("", "an OpenHands event list or eval output")),
    }
}

/// An event: `action` or `observation`, with the `id` and `source` of the event stream (`modern`)
/// or, in legacy flat events, neither.
fn event_fits(e: &Value, at: &str, modern: bool) -> Result<(), ImportError> {
    if !(e.get("action").is_some_and(Value::is_string) || e.get("observation").is_some_and(Value::is_string)) {
        return Err(ImportError::at(format!("{at}/action"), "an OpenHands event's `action` or `observation`"));
    }
    if modern && e.get("source").is_none() {
        return Err(ImportError::at(format!("{at}/source"), "an OpenHands event's `source`"));
    }
    if modern && e.get("id").is_none() {
        return Err(ImportError::at(format!("{at}/id"), "an OpenHands event's `id`"));
    }
    Ok(())
}

/// An eval output line: `history` events, and the instance's `instruction` or `instance_id`.
fn instance_fits(v: &Value, at: &str) -> Result<(), ImportError> {
    let Some(history) = v.get("history").and_then(Value::as_array) else {
        return Err(ImportError::at(format!("{at}/history"), "an OpenHands eval output line's `history` list"));
    };
    if !["instruction", "instance_id", "metrics"].iter().any(|k| v.get(k).is_some()) {
        return Err(ImportError::at(format!("{at}/instruction"), "an OpenHands eval output line's `instruction`"));
    }
    match history.first() {
        Some(Value::Array(pair)) => match pair.first() {
            Some(e) => event_fits(e, &format!("{at}/history/0/0"), false),
            None => Err(ImportError::at(format!("{at}/history/0/0"), "an [action, observation] pair")),
        },
        Some(e) => event_fits(e, &format!("{at}/history/0"), false),
        None => Ok(()),
    }
}

/// One conversation per event list or eval output line.
pub fn conversations(v: &Value, id: &str) -> Result<Vec<Conversation>, ImportError> {
    fits(v)?;
    let instances: Vec<&Value> = match v {
        Value::Array(list) if list.first().is_some_and(|f| f.get("history").is_some()) => list.iter().collect(),
        Value::Array(_) => return Ok(vec![read(v.as_array().into_iter().flatten().collect(), None, id.to_owned())]),
        other => vec![other],
    };
    let n = instances.len();
    Ok(instances.into_iter().enumerate().map(|(k, line)| instance(line, instance_id(id, k, n))).collect())
}

/// The id of line `k` (0-based) of `n`: the file's own id alone, else numbered from 1.
pub fn instance_id(id: &str, k: usize, n: usize) -> String {
    if n == 1 { id.to_owned() } else { format!("{id}#{}", k + 1) }
}

/// Whether `v` is one eval output line (`history` and the instance's fields); `at` names it.
pub fn line_fits(v: &Value, at: &str) -> Result<(), ImportError> {
    instance_fits(v, at)
}

/// The conversation of one eval output line: its `history` events (pairs flattened).
pub fn instance(line: &Value, id: String) -> Conversation {
    let events: Vec<&Value> = match line.get("history").and_then(Value::as_array) {
        Some(h) => {
            h.iter().flat_map(|e| if let Value::Array(pair) = e { pair.iter().collect() } else { vec![e] }).collect()
        }
        None => Vec::new(),
    };
    read(events, Some(line), id)
}

fn key(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str).filter(|s| !s.trim().is_empty())
}

/// A legacy flat event's arguments: its fields but the action and thought.
fn flat_args(e: &Value) -> Value {
    let o: Map<String, Value> = e
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !matches!(k.as_str(), "action" | "thought"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Value::Object(o)
}

/// The structural verdict of an observation.
fn flag_of(e: &Value, obs: &str) -> Option<(bool, &'static str)> {
    match obs {
        "error" => Some((true, "observation: error")),
        "run" => {
            if let Some(code) = e.pointer("/extras/metadata/exit_code").and_then(Value::as_i64) {
                Some(if code == 0 {
                    (false, "extras.metadata.exit_code 0")
                } else {
                    (true, "extras.metadata.exit_code not 0")
                })
            } else if let Some(code) = e.get("exit_code").and_then(Value::as_i64) {
                Some(if code == 0 { (false, "exit_code 0") } else { (true, "exit_code not 0") })
            } else {
                e.get("success")
                    .and_then(Value::as_bool)
                    .map(|ok| if ok { (false, "success: true") } else { (true, "success: false") })
            }
        }
        // The 2024 editor's answer to an edit whose old text is not in the file: nothing changed.
        _ if str_at(e, "/content").is_some_and(|c| c.trim_start().starts_with("[No exact match found in")) => {
            Some((true, "OpenHands editor: `[No exact match found in …]` (the edit did not apply)"))
        }
        _ => None,
    }
}

/// The arguments the model wrote for its tool call `id`, from the response in the action's
/// metadata (`choices[0].message.tool_calls[].function.arguments`); the action's own `args` are
/// OpenHands' rewriting of them (defaults filled in, values it parsed), so they come second.
fn model_arguments(response: &Value, id: Option<&str>) -> Option<Args> {
    let id = id?;
    let calls = response.pointer("/choices/0/message/tool_calls")?.as_array()?;
    let call = calls.iter().find(|c| c.get("id").and_then(Value::as_str) == Some(id))?;
    call.pointer("/function/arguments").and_then(Value::as_str).map(parse_args)
}

/// The ending a `finish` action gives.
fn finish(e: &Value, args: &Value) -> Ending {
    let text = str_at(args, "/final_thought")
        .or(str_at(args, "/thought"))
        .or(str_at(e, "/thought"))
        .or(str_at(e, "/message"))
        .map(str::to_owned);
    let success = match args.get("task_completed").and_then(Value::as_str) {
        Some("true") => Some(true),
        Some("false") => Some(false),
        _ => None,
    };
    Ending { text, success, ..Ending::new(FinalOutcome::Answer, "finish") }
}

/// The conversation of one event list; `line` is its eval output line, if any.
fn read(events: Vec<&Value>, line: Option<&Value>, id: String) -> Conversation {
    let mut conv = Conversation::new(id, "openhands");
    conv.model = line.and_then(|l| str_at(l, "/metadata/llm_config/model")).map(str::to_owned);
    let mut items: Vec<Item> = Vec::with_capacity(events.len());
    // Model response id → its item; action event id → the call's (id, name).
    let mut responses: HashMap<String, usize> = HashMap::new();
    let mut actions: HashMap<String, (Option<String>, String)> = HashMap::new();
    let mut ending: Option<Ending> = None;
    for e in events {
        let event = key(e.get("id"));
        let source = e.get("source").and_then(Value::as_str);
        let legacy = e.get("args").is_none() && e.get("extras").is_none() && event.is_none();
        if let Some(action) = e.get("action").and_then(Value::as_str) {
            let args = if legacy { flat_args(e) } else { e.get("args").cloned().unwrap_or(Value::Null) };
            let thought = str_at(&args, "/thought").or(str_at(e, "/thought")).map(str::to_owned);
            let tcm = e.get("tool_call_metadata").filter(|m| m.is_object());
            let agent = source == Some("agent") || (legacy && source.is_none());
            match (tcm, action) {
                (None, "message") => {
                    let content = str_at(&args, "/content").or(str_at(e, "/message")).unwrap_or_default().to_owned();
                    let asks = legacy && args.get("wait_for_response").and_then(Value::as_bool) == Some(true);
                    if source == Some("agent") || asks {
                        items.push(Item::model(Some(content), Vec::new()));
                    } else {
                        items.push(Item::User(content));
                        ending = None; // the conversation goes on
                    }
                }
                (Some(m), _) => {
                    let response = m.get("model_response").unwrap_or(&Value::Null);
                    let rid = str_at(response, "/id").map(str::to_owned);
                    let k = match rid.as_ref().and_then(|r| responses.get(r)) {
                        Some(k) => *k,
                        None => {
                            let text = str_at(response, "/choices/0/message/content").map(str::to_owned).or(thought);
                            let mut item = Item::model(text, Vec::new());
                            if let (Item::Model { tokens_in, tokens_out, .. }, Some(u)) =
                                (&mut item, response.get("usage"))
                            {
                                *tokens_in = u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0);
                                *tokens_out = u.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0);
                            }
                            items.push(item);
                            if let Some(r) = rid {
                                responses.insert(r, items.len() - 1);
                            }
                            if conv.model.is_none() {
                                conv.model = str_at(response, "/model").map(str::to_owned);
                            }
                            items.len() - 1
                        }
                    };
                    if action != "message" {
                        let id = str_at(m, "/tool_call_id");
                        let call = CallItem {
                            id: id.map(str::to_owned),
                            name: str_at(m, "/function_name").unwrap_or_default().to_owned(),
                            args: model_arguments(response, id).unwrap_or_else(|| Args::new(&args)),
                        };
                        if let Some(ev) = &event {
                            actions.insert(ev.clone(), (call.id.clone(), call.name.clone()));
                        }
                        if let Some(Item::Model { calls, .. }) = items.get_mut(k) {
                            calls.push(call);
                        }
                    }
                }
                (None, a) if agent && TOOL_ACTIONS.contains(&a) => {
                    let call_id = event.as_ref().map(|ev| format!("openhands-event-{ev}"));
                    if let Some(ev) = &event {
                        actions.insert(ev.clone(), (call_id.clone(), a.to_owned()));
                    }
                    items.push(Item::model(
                        thought,
                        vec![CallItem { id: call_id, name: a.to_owned(), args: Args::new(&args) }],
                    ));
                }
                _ => {}
            }
            match action {
                "finish" if agent => ending = Some(finish(e, &args)),
                "reject" if agent => ending = Some(Ending::new(FinalOutcome::GaveUp, "reject")),
                _ => {}
            }
            continue;
        }
        let Some(obs) = e.get("observation").and_then(Value::as_str) else { continue };
        match obs {
            "agent_state_changed" => {
                let state = str_at(e, "/extras/agent_state").unwrap_or_default();
                let why = str_at(e, "/extras/reason").map(str::to_owned);
                match state {
                    "error" => {
                        ending = Some(Ending { text: why, ..Ending::new(FinalOutcome::Error, "agent_state: error") })
                    }
                    "stopped" | "paused" => {
                        ending = Some(Ending::new(FinalOutcome::Interrupted, format!("agent_state: {state}")))
                    }
                    "rejected" => ending = Some(Ending::new(FinalOutcome::GaveUp, "agent_state: rejected")),
                    "awaiting_user_input" | "finished" if ending.is_none() => {
                        ending = Some(Ending::new(FinalOutcome::Answer, format!("agent_state: {state}")))
                    }
                    _ => {}
                }
                continue;
            }
            "null" | "recall" => continue,
            _ => {}
        }
        // A command's output reaches the model between its metadata's `prefix` and `suffix`
        // (`CmdOutputObservation.to_agent_observation`): the suffix says a command still runs
        // ("no new output after 30 seconds", exit code -1) or was stopped.
        let text = e.get("content").and_then(Value::as_str).unwrap_or_default();
        let around = |k: &str| e.pointer(&format!("/extras/metadata/{k}")).and_then(Value::as_str).unwrap_or_default();
        let content =
            if obs == "run" { format!("{}{text}{}", around("prefix"), around("suffix")) } else { text.to_owned() };
        let tcm_id = str_at(e, "/tool_call_metadata/tool_call_id").map(str::to_owned);
        let cause = key(e.get("cause"));
        let answered = cause.as_ref().and_then(|c| actions.get(c)).cloned();
        let (call_id, name) = match (answered, tcm_id, legacy) {
            (Some((id, name)), _, _) => (id, Some(name)),
            (None, Some(id), _) => (Some(id), None),
            (None, None, true) => (None, Some(obs.to_owned())),
            (None, None, false) if cause.is_some() => continue, // answers a skipped action (a user's, a recall)
            (None, None, false) if obs == "error" => {
                // A malformed call: the model answered, no action came of it.
                items.push(Item::model(None, Vec::new()));
                continue;
            }
            (None, None, false) => {
                let at = event.as_deref().unwrap_or("?");
                conv.gaps.push(format!("event {at}: a `{obs}` observation answers no action and was left out"));
                continue;
            }
        };
        if obs == "user_rejected" {
            items.push(Item::Cancelled { id: call_id, content, why: "the user rejected the call (user_rejected)" });
            continue;
        }
        let flag = flag_of(e, obs);
        items.push(Item::Result { id: call_id, name, content, flag });
    }
    if let Some(l) = line {
        let finished = ending.as_ref().is_some_and(|e| e.reason.as_deref() == Some("finish"));
        if let Some(err) = str_at(l, "/error").filter(|_| !finished) {
            let limit = err.contains("maximum iteration") || err.contains("maximum budget");
            ending = Some(Ending::new(if limit { FinalOutcome::CutOff } else { FinalOutcome::Error }, err));
        }
        if let (Some(e), Some(ok)) = (ending.as_mut(), l.get("success").and_then(Value::as_bool)) {
            e.success = e.success.or(Some(ok));
        }
    }
    conv.items = items;
    conv.ending = ending;
    conv
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn one(v: Value) -> Conversation {
        conversations(&v, "t").unwrap().remove(0)
    }

    fn tcm(call: &str, resp: &str, name: &str) -> Value {
        json!({"function_name": name, "tool_call_id": call, "model_response": {"id": resp, "choices": [{"message": {"content": "thinking"}}], "usage": {"prompt_tokens": 10, "completion_tokens": 2}}})
    }

    fn counts(c: &Conversation) -> (usize, usize, Vec<Option<(bool, &'static str)>>) {
        let models = c.items.iter().filter(|i| matches!(i, Item::Model { .. })).count();
        let calls = c.items.iter().map(|i| if let Item::Model { calls, .. } = i { calls.len() } else { 0 }).sum();
        let flags =
            c.items.iter().filter_map(|i| if let Item::Result { flag, .. } = i { Some(*flag) } else { None }).collect();
        (models, calls, flags)
    }

    #[test]
    fn recognises_event_lists_and_eval_lines_only() {
        assert!(fits(&json!([{"id": 0, "source": "user", "action": "message", "args": {}}])).is_ok());
        assert!(
            fits(&json!([{"instance_id": "x", "history": [{"id": 0, "source": "user", "action": "message"}]}])).is_ok()
        );
        assert!(fits(&json!({"instance_id": "x", "history": [], "error": null})).is_ok());
        assert!(fits(&json!([{"role": "user", "content": "hi"}])).is_err());
        // A SWE-agent history-only file.
        let e = fits(&json!({"history": [{"role": "user", "content": "x", "agent": "main"}]})).unwrap_err();
        assert_eq!(e.at, "/instruction");
        let e = fits(&json!({"instruction": "i", "history": [{"role": "user", "content": "x", "agent": "main"}]}))
            .unwrap_err();
        assert_eq!(e.at, "/history/0/action");
    }

    #[test]
    fn parallel_calls_share_a_response_and_codes_flag_results() {
        let c = one(json!([
            {"id": 0, "source": "user", "action": "message", "args": {"content": "go"}},
            {"id": 1, "source": "agent", "action": "run", "args": {"command": "false"}, "tool_call_metadata": tcm("a", "r1", "execute_bash")},
            {"id": 2, "source": "agent", "action": "read", "args": {"path": "/x"}, "tool_call_metadata": tcm("b", "r1", "str_replace_editor")},
            {"id": 3, "source": "agent", "observation": "run", "cause": 1, "content": "", "extras": {"metadata": {"exit_code": 1}}},
            {"id": 4, "source": "agent", "observation": "read", "cause": 2, "content": "x", "extras": {}},
            {"id": 5, "source": "agent", "observation": "error", "content": "Parameter 'command' is expected", "extras": {}},
            {"id": 6, "source": "agent", "action": "edit", "args": {}, "tool_call_metadata": tcm("c", "r2", "str_replace_editor")},
            {"id": 7, "source": "agent", "observation": "error", "cause": 6, "content": "bad path", "extras": {}},
            {"id": 8, "source": "agent", "action": "finish", "args": {"final_thought": "done", "task_completed": "true"}, "tool_call_metadata": tcm("d", "r3", "finish")}
        ]));
        let (models, calls, flags) = counts(&c);
        assert_eq!(models, 4, "r1, the malformed call, r2, r3");
        assert_eq!(calls, 4);
        assert_eq!(flags, [Some((true, "extras.metadata.exit_code not 0")), None, Some((true, "observation: error"))]);
        assert!(matches!(&c.items[2], Item::Result { id: Some(a), .. } if a == "a"));
        let e = c.ending.unwrap();
        assert_eq!(
            (e.outcome, e.reason.as_deref(), e.text.as_deref(), e.success),
            (FinalOutcome::Answer, Some("finish"), Some("done"), Some(true))
        );
        assert!(matches!(&c.items[1], Item::Model { tokens_in: 10, tokens_out: 2, .. }));
    }

    #[test]
    fn eval_lines_and_their_errors() {
        let line = |error: Value| {
            json!({"instance_id": "x", "history": [
            {"id": 1, "source": "agent", "action": "run", "args": {}, "tool_call_metadata": tcm("a", "r1", "execute_bash")},
            {"id": 2, "source": "agent", "observation": "run", "cause": 1, "content": "", "extras": {"metadata": {"exit_code": 0}}}
        ], "error": error})
        };
        let cs = conversations(
            &json!([
                line(json!("RuntimeError: Agent reached maximum iteration in headless mode.")),
                line(json!("LLM down")),
                line(Value::Null)
            ]),
            "o",
        )
        .unwrap();
        assert_eq!(cs.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["o#1", "o#2", "o#3"]);
        assert_eq!(cs[0].ending.as_ref().map(|e| e.outcome), Some(FinalOutcome::CutOff));
        assert_eq!(cs[1].ending.as_ref().map(|e| e.outcome), Some(FinalOutcome::Error));
        assert_eq!(cs[2].ending, None);
        assert_eq!(counts(&cs[2]).2, [Some((false, "extras.metadata.exit_code 0"))]);
    }

    #[test]
    fn raw_streams_states_and_agent_messages() {
        let c = one(json!([
            {"id": 0, "source": "environment", "observation": "agent_state_changed", "content": "", "extras": {"agent_state": "running"}},
            {"id": 1, "source": "user", "action": "message", "args": {"content": "hi"}},
            {"id": 2, "source": "agent", "action": "message", "args": {"content": "hello"}},
            {"id": 3, "source": "agent", "observation": "null", "cause": 2, "content": "", "extras": {}},
            {"id": 4, "source": "environment", "observation": "agent_state_changed", "content": "", "extras": {"agent_state": "error", "reason": "boom"}}
        ]));
        assert_eq!(counts(&c).0, 1);
        let e = c.ending.unwrap();
        assert_eq!((e.outcome, e.text.as_deref()), (FinalOutcome::Error, Some("boom")));
    }

    #[test]
    fn legacy_flat_events() {
        let c = one(json!({"instruction": "i", "success": true, "history": [
            {"content": "fix it", "action": "message", "wait_for_response": false},
            {"command": "ls", "thought": "look", "action": "run"},
            {"content": "x", "command": "ls", "exit_code": 2, "observation": "run"},
            {"outputs": {}, "thought": "done", "action": "finish"}
        ]}));
        let (models, calls, flags) = counts(&c);
        assert_eq!((models, calls), (2, 2));
        assert_eq!(flags, [Some((true, "exit_code not 0"))]);
        let e = c.ending.unwrap();
        assert_eq!((e.text.as_deref(), e.success), (Some("done"), Some(true)));
    }
}
