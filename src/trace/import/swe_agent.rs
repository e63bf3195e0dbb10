//! SWE-agent trajectories (`*.traj`, 0.x and 1.x): one JSON object per instance with
//! `trajectory` (one step per action as executed: `action`, `observation`, `thought`,
//! `response`, `state`, …), `history` (the messages sent to the model; `is_demo` or
//! `message_type: "demonstration"` entries are demonstrations) and `info` (`exit_status`,
//! `submission`, `model_stats`). Demonstration files can hold `history` alone. RetryAgent files
//! add `attempts`; the top level copies the best one (`info.best_attempt_idx`).
//!
//! - **Model calls.** One per trajectory step, except the step an error exit appends (empty
//!   action, thought "Exit due to …"), which made none. When `info.model_stats.api_calls`
//!   (the best attempt's, for a RetryAgent) is larger, the difference is calls recorded nowhere
//!   else (0.x format requeries, resamples): that many calls with no text and no tool call are
//!   put after the task, their place not being recorded. A count smaller than the steps (or 0,
//!   as replays and demonstrations record) is not trusted. The stats hold totals only: no
//!   per-call tokens are given.
//! - **Tool calls.** One per step with a non-empty `action`: the tool is the action's first word
//!   and the arguments `{"command": action}`. In function-calling configs the step's history
//!   message (the next assistant message with the same `action`) carries `tool_calls`: their
//!   id, name and arguments are used (a Python-repr string of them, as some files hold, gives
//!   its id and name; the arguments are then the command). A step with an empty action and no
//!   exit (a format requery) is a model call without a tool call. History-only files are read
//!   from `history`: assistant messages, their `tool_calls` (or `action`), and the `tool`
//!   (paired by `tool_call_ids`) or user observation after them.
//! - **Failures.** SWE-agent stores no exit code (`check="ignore"`), so failures are text rules
//!   only, and the evidence says so: the edit linter's rejection, the bash syntax check, a
//!   blocked command, an edit with no file open, the timeout texts of 1.x and 0.x, and the
//!   shell's `command not found` and
//!   `No such file or directory`; then the general text rules (a Python traceback, which can be
//!   the intended reproduction of a bug).
//! - **Endings.** `info.exit_status`: `submitted` and `submitted (<why>)` are answers (the text
//!   is `info.submission`); `exit_cost`, `exit_context`, `exit_format`,
//!   `exit_total_execution_time`, `exit_command_timeout` are cut off; `exit_error`, `exit_api`,
//!   `exit_environment_error`, `early_exit` are errors; `exit_command` and `exit_forfeit` gave
//!   up; any other value is cut off. The raw value is the reason. A history-only file whose last
//!   action is `submit` is an answer (reason `submit`).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};

use super::ImportError;
use super::conversation::{CallItem, Conversation, Ending, Item, parse_args, text_of};
use crate::trace::{Args, FinalOutcome};

const EXPECTED: &str = "a SWE-agent trajectory: an object with `trajectory`, `history` and `info`";

/// Whether `v` is a SWE-agent `.traj` object.
pub fn fits(v: &Value) -> Result<(), ImportError> {
    let Some(o) = v.as_object() else { return Err(ImportError::at("", EXPECTED)) };
    if o.contains_key("trajectory_format") || o.contains_key("messages") {
        return Err(ImportError::at(
            "/trajectory_format",
            "no `trajectory_format` or `messages` (mini-swe-agent has them)",
        ));
    }
    let history = o.get("history");
    if let Some(h) = history
        && !h.is_array()
    {
        return Err(ImportError::at("/history", "a list of SWE-agent history messages"));
    }
    match o.get("trajectory") {
        Some(Value::Array(steps)) => {
            if !o.get("info").is_some_and(Value::is_object) && history.is_none() {
                return Err(ImportError::at("/info", "the SWE-agent `info` object (or a `history` list)"));
            }
            match steps.first() {
                Some(step) if !step.get("action").is_some_and(Value::is_string) => {
                    Err(ImportError::at("/trajectory/0/action", "a SWE-agent step's `action` string"))
                }
                Some(step) if step.get("observation").is_none() => {
                    Err(ImportError::at("/trajectory/0/observation", "a SWE-agent step's `observation`"))
                }
                Some(_) => Ok(()),
                None => history_fits(history),
            }
        }
        Some(_) => Err(ImportError::at("/trajectory", "a list of SWE-agent steps")),
        None => history_fits(history),
    }
}

/// A history-only file: messages with a `role` and SWE-agent's per-message `agent` name.
fn history_fits(history: Option<&Value>) -> Result<(), ImportError> {
    let Some(first) = history.and_then(Value::as_array).and_then(|h| h.first()) else {
        return Err(ImportError::at("/trajectory", EXPECTED));
    };
    if !first.get("role").is_some_and(Value::is_string) {
        return Err(ImportError::at("/history/0/role", "a SWE-agent history message's `role`"));
    }
    if !first.get("agent").is_some_and(Value::is_string) {
        return Err(ImportError::at("/history/0/agent", "a SWE-agent history message's `agent` name"));
    }
    Ok(())
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// SWE-agent's own texts (and the shell's) for a command that failed or did not run.
const FAILURE_TEXTS: [(&str, &str); 11] = [
    (
        "Your proposed edit has introduced new syntax error(s)",
        "text rule (SWE-agent): the edit linter rejected the edit",
    ),
    ("Your bash command contained syntax errors and was NOT executed", "text rule (SWE-agent): bash syntax check"),
    ("is not supported by this environment", "text rule (SWE-agent): a blocked command"),
    ("was cancelled because it took more than", "text rule (SWE-agent): the command timed out"),
    ("EXECUTION TIMED OUT", "text rule (SWE-agent 0.x): EXECUTION TIMED OUT"),
    ("COMMAND FAILED TO EXECUTE", "text rule (SWE-agent 0.x): COMMAND FAILED TO EXECUTE"),
    ("BROKEN PIPE ERROR", "text rule (SWE-agent 0.x): BROKEN PIPE ERROR"),
    ("EXECUTION FAILED OR COMMAND MALFORMED", "text rule (SWE-agent 0.x): EXECUTION FAILED OR COMMAND MALFORMED"),
    ("No file open. Use the `open` command first.", "text rule (SWE-agent): no file open for the edit"),
    ("command not found", "text rule (shell): command not found"),
    ("No such file or directory", "text rule (shell): No such file or directory"),
];

/// The failure an observation's text shows, if any (else the general text rules decide).
fn text_flag(observation: &str) -> Option<(bool, &'static str)> {
    FAILURE_TEXTS.iter().find(|(t, _)| observation.contains(t)).map(|(_, why)| (true, *why))
}

/// The ending `info.exit_status` gives, with `info.submission` as an answer's text.
fn ending(info: &Value) -> Option<Ending> {
    let status = info.get("exit_status").and_then(Value::as_str)?;
    let outcome = if status.starts_with("submitted") {
        FinalOutcome::Answer
    } else {
        match status {
            "exit_error" | "exit_api" | "exit_environment_error" | "early_exit" => FinalOutcome::Error,
            "exit_command" | "exit_forfeit" => FinalOutcome::GaveUp,
            _ => FinalOutcome::CutOff,
        }
    };
    let text = match outcome {
        FinalOutcome::Answer => info.get("submission").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    };
    Some(Ending { text, ..Ending::new(outcome, status) })
}

static REPR_NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"['"]name['"]:\s*['"]([^'"]+)['"]"#).expect("valid"));
static REPR_ID: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"['"]id['"]:\s*['"]([^'"]+)['"]"#).expect("valid"));
static REPR_STR: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"['"]([^'"]+)['"]"#).expect("valid"));

/// The first word of a command: the tool SWE-agent runs.
fn tool_of(action: &str) -> String {
    action.split_whitespace().next().unwrap_or_default().to_owned()
}

/// The tool calls of a history message: its `tool_calls` (a list, or the Python repr of one),
/// else its `action` as one call.
fn calls_of(msg: Option<&Value>, action: &str) -> Vec<CallItem> {
    let command = || Args::new(&json!({ "command": action }));
    match msg.and_then(|m| m.get("tool_calls")) {
        Some(Value::Array(tcs)) if !tcs.is_empty() => tcs
            .iter()
            .map(|tc| CallItem {
                id: tc.get("id").and_then(Value::as_str).map(str::to_owned),
                name: tc.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                args: match tc.pointer("/function/arguments") {
                    Some(Value::String(s)) => parse_args(s),
                    Some(other) => Args::new(other),
                    None => command(),
                },
            })
            .collect(),
        Some(Value::String(repr)) if REPR_NAME.is_match(repr) => vec![CallItem {
            id: REPR_ID.captures(repr).map(|c| c[1].to_owned()),
            name: REPR_NAME.captures(repr).map(|c| c[1].to_owned()).unwrap_or_default(),
            args: command(),
        }],
        _ if action.trim().is_empty() => Vec::new(),
        _ => vec![CallItem { id: None, name: tool_of(action), args: command() }],
    }
}

/// The ids a `tool` message answers: `tool_call_ids` as a list or its Python repr.
fn answered_ids(msg: &Value) -> Vec<String> {
    match msg.get("tool_call_ids").or(msg.get("tool_call_id")) {
        Some(Value::Array(ids)) => ids.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        Some(Value::String(s)) if s.trim_start().starts_with('[') => {
            REPR_STR.captures_iter(s).map(|c| c[1].to_owned()).collect()
        }
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

fn is_demo(m: &Value) -> bool {
    m.get("is_demo").and_then(Value::as_bool) == Some(true) || str_of(m, "message_type") == "demonstration"
}

/// The model named in a 1.x `replay_config` (a JSON string or object).
fn model_of(v: &Value) -> Option<String> {
    let config = match v.get("replay_config")? {
        Value::String(s) => serde_json::from_str(s).ok()?,
        other => other.clone(),
    };
    config.pointer("/agent/model/name").and_then(Value::as_str).map(str::to_owned)
}

fn text(s: &str) -> Option<String> {
    Some(s.trim().to_owned()).filter(|t| !t.is_empty())
}

/// The conversation of one trajectory.
pub fn conversations(v: &Value, id: &str) -> Result<Vec<Conversation>, ImportError> {
    fits(v)?;
    let mut conv = Conversation::new(id.to_owned(), "swe-agent");
    conv.model = model_of(v);
    let empty = Vec::new();
    let history: Vec<&Value> = v
        .get("history")
        .and_then(Value::as_array)
        .unwrap_or(&empty)
        .iter()
        .filter(|m| !is_demo(m) && str_of(m, "role") != "system")
        .collect();
    let steps = v.get("trajectory").and_then(Value::as_array).unwrap_or(&empty);
    let info = v.get("info").unwrap_or(&Value::Null);
    if steps.is_empty() {
        conv.items = from_history(&history);
        let last = history.iter().rev().find(|m| str_of(m, "role") == "assistant");
        if info.get("exit_status").is_none() && last.is_some_and(|m| tool_of(str_of(m, "action")) == "submit") {
            conv.ending = Some(Ending::new(FinalOutcome::Answer, "submit"));
        }
    } else {
        conv.items = from_steps(v, steps, &history);
        if info.pointer("/model_stats/api_calls").and_then(Value::as_u64) == Some(0) {
            conv.gaps.push(format!(
                "`info.model_stats.api_calls` is 0 beside {} step(s): no model made them (a demonstration, \
                 or the `human` / `replay` model); each step is read as a model call",
                steps.len()
            ));
        }
    }
    conv.ending = ending(info).or(conv.ending);
    Ok(vec![conv])
}

/// The task, then per step a model call, its tool call and the observation.
fn from_steps(v: &Value, steps: &[Value], history: &[&Value]) -> Vec<Item> {
    let mut items = Vec::with_capacity(steps.len() * 2 + 1);
    if let Some(task) = history.iter().find(|m| str_of(m, "role") == "user") {
        items.push(Item::User(text_of(task.get("content").unwrap_or(&Value::Null))));
    }
    let after_task = items.len();
    let assistants: Vec<&Value> = history.iter().copied().filter(|m| str_of(m, "role") == "assistant").collect();
    let mut next = 0; // the next assistant message not yet matched to a step
    let mut calls_made = 0u64;
    for step in steps {
        let action = str_of(step, "action");
        let thought = str_of(step, "thought");
        if action.trim().is_empty() {
            let exit = thought.starts_with("Exit due to") || thought.starts_with("Exiting due to");
            if !exit {
                calls_made += 1;
                items.push(Item::model(text(thought).or_else(|| text(str_of(step, "response"))), Vec::new()));
            }
            continue;
        }
        let msg = assistants.get(next).copied().filter(|m| str_of(m, "action").trim() == action.trim());
        if msg.is_some() {
            next += 1;
        }
        let calls = calls_of(msg, action);
        let first = calls.first().map(|c| (c.id.clone(), c.name.clone()));
        calls_made += 1;
        items.push(Item::model(text(thought), calls));
        let observation = text_of(step.get("observation").unwrap_or(&Value::Null));
        let flag = text_flag(&observation);
        let (id, name) = first.unzip();
        items.push(Item::Result { id: id.flatten(), name, content: observation, flag });
    }
    let extra = api_calls(v).saturating_sub(calls_made);
    items.splice(after_task..after_task, (0..extra).map(|_| Item::model(None, Vec::new())));
    items
}

/// `info.model_stats.api_calls`, the best attempt's for a RetryAgent.
fn api_calls(v: &Value) -> u64 {
    let best = v
        .pointer("/info/best_attempt_idx")
        .and_then(Value::as_u64)
        .and_then(|k| v.get("attempts").and_then(Value::as_array).and_then(|a| a.get(usize::try_from(k).ok()?)));
    best.unwrap_or(v).pointer("/info/model_stats/api_calls").and_then(Value::as_u64).unwrap_or(0)
}

/// A history-only file: assistant messages and the observations after them.
fn from_history(history: &[&Value]) -> Vec<Item> {
    let mut items = Vec::with_capacity(history.len());
    // The last assistant message's calls still awaiting an observation: (id, name).
    let mut open: Vec<(Option<String>, String)> = Vec::new();
    for m in history {
        let content = text_of(m.get("content").unwrap_or(&Value::Null));
        match str_of(m, "role") {
            "assistant" => {
                let calls = calls_of(Some(m), str_of(m, "action"));
                open = calls.iter().map(|c| (c.id.clone(), c.name.clone())).collect();
                let thought = text(str_of(m, "thought")).or_else(|| text(&content));
                items.push(Item::model(thought, calls));
            }
            "tool" => {
                let ids = answered_ids(m);
                let id = ids.into_iter().next();
                open.retain(|(o, _)| o != &id);
                let flag = text_flag(&content);
                items.push(Item::Result { id, name: None, content, flag });
            }
            "user" if !open.is_empty() => {
                let (id, name) = open.remove(0);
                let flag = text_flag(&content);
                items.push(Item::Result { id, name: Some(name), content, flag });
            }
            "user" => items.push(Item::User(content)),
            _ => {}
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(v: Value) -> Conversation {
        conversations(&v, "t").unwrap().remove(0)
    }

    fn calls(c: &Conversation) -> Vec<&CallItem> {
        c.items
            .iter()
            .flat_map(|i| if let Item::Model { calls, .. } = i { calls.iter().collect() } else { vec![] })
            .collect()
    }

    fn models(c: &Conversation) -> usize {
        c.items.iter().filter(|i| matches!(i, Item::Model { .. })).count()
    }

    #[test]
    fn recognises_traj_files_and_nothing_else() {
        assert!(fits(&json!({"trajectory": [{"action": "ls", "observation": ""}], "history": [], "info": {}})).is_ok());
        assert!(fits(&json!({"history": [{"role": "system", "content": "x", "agent": "main"}]})).is_ok());
        // mini-swe-agent, a wrapped conversation, an OpenHands eval line.
        assert!(fits(&json!({"info": {}, "messages": [], "trajectory_format": "mini-swe-agent-1.1"})).is_err());
        let e = fits(&json!({"trajectory": [{"role": "user", "content": "hi"}]})).unwrap_err();
        assert_eq!(e.at, "/info");
        let e = fits(&json!({"trajectory": [{"role": "user", "content": "hi"}], "info": {}})).unwrap_err();
        assert_eq!(e.at, "/trajectory/0/action");
        assert!(fits(&json!({"instance_id": "x", "history": [{"id": 0, "action": "message"}]})).is_err());
        assert!(fits(&json!([{"trajectory": []}])).is_err());
    }

    #[test]
    fn exit_statuses_are_endings() {
        let end = |s: &str| ending(&json!({"exit_status": s, "submission": "diff"})).map(|e| (e.outcome, e.reason));
        assert_eq!(end("submitted"), Some((FinalOutcome::Answer, Some("submitted".into()))));
        assert_eq!(end("submitted (exit_cost)").map(|e| e.0), Some(FinalOutcome::Answer));
        for s in ["exit_cost", "exit_context", "exit_format"] {
            assert_eq!(end(s), Some((FinalOutcome::CutOff, Some(s.into()))));
        }
        for s in ["exit_error", "exit_api", "early_exit"] {
            assert_eq!(end(s).map(|e| e.0), Some(FinalOutcome::Error), "{s}");
        }
        assert_eq!(end("exit_forfeit").map(|e| e.0), Some(FinalOutcome::GaveUp));
        assert_eq!(ending(&json!({})), None);
        assert_eq!(
            ending(&json!({"exit_status": "submitted", "submission": "diff"})).unwrap().text.as_deref(),
            Some("diff")
        );
    }

    #[test]
    fn steps_calls_and_an_error_exit_step() {
        // Two steps that ran, a format requery (empty action) and the exit step (no model call).
        let c = read(json!({
            "history": [{"role": "user", "content": "task", "agent": "primary"}],
            "trajectory": [
                {"action": "find_file x.py\n", "observation": "Found 1 matches", "thought": "look"},
                {"action": "edit 1:1\nx\nend_of_edit\n", "observation": "Your proposed edit has introduced new syntax error(s). Please ...", "thought": "fix"},
                {"action": "", "observation": "", "thought": "garbled", "response": "garbled"},
                {"action": "", "observation": "", "thought": "Exit due to cost limit"}
            ],
            "info": {"exit_status": "exit_cost", "model_stats": {"api_calls": 2}}
        }));
        assert_eq!(models(&c), 3, "api_calls 2 is fewer than the 3 calls the steps show: not trusted");
        let cs = calls(&c);
        assert_eq!(cs.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["find_file", "edit"]);
        assert_eq!(cs[0].args, Args::new(&json!({"command": "find_file x.py\n"})));
        let flags: Vec<_> =
            c.items.iter().filter_map(|i| if let Item::Result { flag, .. } = i { Some(*flag) } else { None }).collect();
        assert_eq!(flags[0], None);
        assert!(flags[1].is_some_and(|f| f.0 && f.1.contains("edit linter")));
        assert_eq!(c.ending.unwrap().outcome, FinalOutcome::CutOff);
    }

    #[test]
    fn api_calls_beyond_the_steps_are_extra_calls() {
        let c = read(json!({
            "history": [],
            "trajectory": [{"action": "submit", "observation": "", "thought": ""}],
            "info": {"exit_status": "submitted", "model_stats": {"api_calls": 3}}
        }));
        assert_eq!(models(&c), 3);
        assert_eq!(calls(&c).len(), 1);
    }

    #[test]
    fn function_calling_history_gives_ids_names_and_arguments() {
        let c = read(json!({
            "history": [
                {"role": "system", "content": "s", "agent": "main"},
                {"role": "user", "content": "task", "agent": "main"},
                {"role": "assistant", "content": "t", "action": "open \"a.py\"", "agent": "main",
                 "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "open", "arguments": "{\"path\":\"a.py\"}"}}]},
                {"role": "tool", "content": "[File: a.py]", "agent": "main", "tool_call_ids": ["call_1"]}
            ],
            "trajectory": [
                {"action": "open \"a.py\"", "observation": "[File: a.py]", "thought": "t"},
                {"action": "submit", "observation": "diff", "thought": "done"}
            ],
            "info": {"exit_status": "submitted", "model_stats": {"api_calls": 2}}
        }));
        let cs = calls(&c);
        assert_eq!((cs[0].id.as_deref(), cs[0].name.as_str()), (Some("call_1"), "open"));
        assert_eq!(cs[0].args, Args::new(&json!({"path": "a.py"})));
        assert_eq!((cs[1].id.as_deref(), cs[1].name.as_str()), (None, "submit"), "the submit step is not in history");
    }

    #[test]
    fn history_only_with_python_repr_tool_calls() {
        let c = read(json!({"history": [
            {"role": "user", "content": "task", "agent": "main"},
            {"role": "assistant", "content": "t", "action": "submit", "agent": "main",
             "tool_calls": "[{'function': {'arguments': '{}', 'name': 'submit'}, 'id': 'call_9', 'type': 'function'}]"},
            {"role": "tool", "content": "diff", "agent": "main", "tool_call_ids": "['call_9']"}
        ]}));
        let cs = calls(&c);
        assert_eq!((cs[0].id.as_deref(), cs[0].name.as_str()), (Some("call_9"), "submit"));
        assert!(matches!(&c.items[2], Item::Result { id: Some(i), .. } if i == "call_9"));
        assert_eq!(c.ending.unwrap().reason.as_deref(), Some("submit"));
    }

    #[test]
    fn failure_texts() {
        assert!(text_flag("bash: foo: command not found").is_some());
        assert!(text_flag("EXECUTION TIMED OUT BECAUSE THE COMMAND WAS RUNNING FOR MORE THAN 25 SECONDS.").is_some());
        assert_eq!(text_flag("Your command ran successfully and did not produce any output."), None);
        assert_eq!(text_flag("Traceback (most recent call last):"), None, "left to the general text rules");
    }
}
