//! mini-swe-agent trajectories (`*.traj.json`): one object `{info, messages, trajectory_format}`
//! per run (`trajectory_format` "mini-swe-agent-1" in 1.x, "mini-swe-agent-1.1" in 2.x; `info`
//! holds `exit_status`, `submission`, `model_stats {api_calls, instance_cost}`, `config`,
//! `mini_version`), and the bare message lists 1.x wrote and its tests keep (assistant text with
//! one fenced action, user observations `<returncode>N</returncode>…`).
//!
//! - **Model calls.** Each `assistant` message, and each `user` message with
//!   `extra.interrupt_type: "FormatError"`: 2.x stores no assistant message for a reply it
//!   rejected (no action, or several), only the format error with the reply in
//!   `extra.response` — a model call without a tool call (the rejected text is not kept). Together they are
//!   `info.model_stats.api_calls`. Usage from `extra.response.usage` (`prompt_tokens`,
//!   `completion_tokens`).
//! - **Tool calls.** One per action: `tool_calls` (name and JSON arguments, the tool-calling
//!   configs of 2.x), else `extra.actions` (`{command, tool_call_id}`), else the one fenced block of
//!   the assistant's text (` ```mswea_bash_command `, ` ```bash `, ` ```sh `; a reply with no block
//!   or several ran nothing) — named `bash`, arguments `{"command": …}`. A format error is not a
//!   tool call.
//! - **Results.** `tool` messages (paired on `tool_call_id`) and `user` observations (the oldest
//!   open call). The structural flag is `extra.returncode`, else the return code the text shows
//!   (`<returncode>N</returncode>`, or the JSON `{"returncode": N, …}` of the `mini` CLI's
//!   template): not 0 is a failure (-1 with `exception_info`: the command raised or timed out).
//!   The one exception: -1 with "action was not executed" after a run that `Submitted` is the
//!   submit command itself, padded once `Submitted` was raised, and succeeded; elsewhere that text
//!   is an action that never ran (cancelled).
//! - **Endings.** `info.exit_status` (the same as the last `exit` message's
//!   `extra.exit_status`): `Submitted` is an answer (the text is `info.submission`),
//!   `LimitsExceeded` and `TimeExceeded` cut off, `RepeatedFormatError` and `FormatError` gave
//!   up, `UserInterruption` and `KeyboardInterrupt` interrupted, any other value (an exception's
//!   class name) an error. The raw value is the reason. The request that raised such an exception
//!   is counted in `api_calls` but has no message: it is a failed model call (status from the
//!   class: `RateLimitError` 429, `Timeout` 504, `ServiceUnavailableError` 503, … else 500). A bare 1.x list records no status: its
//!   last action printing `COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` (or `MINI_SWE_AGENT_FINAL_OUTPUT`)
//!   is its answer.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::ImportError;
use super::conversation::{CallItem, Conversation, Ending, Item, parse_args, text_of};
use crate::trace::{Args, FinalOutcome};

/// A fenced action in an assistant's text: its command.
static ACTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)```(?:mswea_bash_command|bash|sh)[ \t]*\n(.*?)\n?```").expect("valid"));

/// A return code at the start of an observation's text: the tag, or the JSON template's key.
static RETURNCODE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\A\s*(?:<returncode>\s*(-?\d+)\s*</returncode>|\{\s*"returncode"\s*:\s*(-?\d+))"#).expect("valid")
});

/// Whether `v` is a mini-swe-agent trajectory: an object with a mini-swe-agent
/// `trajectory_format` (or `info.exit_status` and `info.mini_version` beside `messages`), or a
/// bare 1.x message list whose observations carry return codes.
pub fn fits(v: &Value) -> Result<(), ImportError> {
    match v {
        Value::Object(o) => {
            let format = o.get("trajectory_format").and_then(Value::as_str);
            let by_info =
                o.get("info").is_some_and(|i| i.get("exit_status").is_some() && i.get("mini_version").is_some());
            if !format.is_some_and(|f| f.starts_with("mini-swe-agent")) && !by_info {
                return Err(ImportError::at(
                    "/trajectory_format",
                    "a mini-swe-agent trajectory's `trajectory_format` (\"mini-swe-agent-1.1\")",
                ));
            }
            if !o.get("messages").is_some_and(Value::is_array) {
                return Err(ImportError::at("/messages", "the trajectory's `messages` list"));
            }
            Ok(())
        }
        Value::Array(messages) => {
            let role = |m: &Value, r: &str| m.get("role").and_then(Value::as_str) == Some(r);
            if !messages.iter().all(|m| m.get("role").is_some_and(Value::is_string)) {
                return Err(ImportError::at("/0", "a mini-swe-agent message list: messages with a `role`"));
            }
            let observed = messages
                .iter()
                .any(|m| role(m, "user") && (returncode(m).is_some() || m.pointer("/extra/returncode").is_some()));
            let acted = messages
                .iter()
                .any(|m| role(m, "assistant") && ACTION.is_match(&text_of(m.get("content").unwrap_or(&Value::Null))));
            if observed && acted {
                Ok(())
            } else {
                Err(ImportError::at(
                    "",
                    "a mini-swe-agent message list: fenced actions answered by `<returncode>` observations",
                ))
            }
        }
        _ => Err(ImportError::at("", "a mini-swe-agent trajectory (an object with `trajectory_format`)")),
    }
}

/// The first line a submitting action prints (2.x, and 1.x's older word).
const SUBMIT_MARKS: [&str; 2] = ["COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT"];

/// The command of the last tool call among `items`.
fn last_command(items: &[Item]) -> Option<String> {
    items.iter().rev().find_map(|i| match i {
        Item::Model { calls, .. } => {
            calls.last().map(|c| c.args.value().get("command").map(text_of).unwrap_or_default())
        }
        _ => None,
    })
}

/// An observation's return code: `extra.returncode`, else the one its text starts with.
fn returncode(m: &Value) -> Option<i64> {
    if let Some(c) = m.pointer("/extra/returncode").and_then(Value::as_i64) {
        return Some(c);
    }
    let text = text_of(m.get("content").unwrap_or(&Value::Null));
    let c = RETURNCODE.captures(&text)?;
    c.get(1).or(c.get(2))?.as_str().parse().ok()
}

/// What an observation says of its action.
fn observation(m: &Value, id: Option<String>, submitted: bool) -> Item {
    let content = text_of(m.get("content").unwrap_or(&Value::Null));
    let exception = m.pointer("/extra/exception_info").map(text_of).unwrap_or_default();
    let not_run = exception.contains("action was not executed") || content.contains("action was not executed");
    let code = returncode(m);
    if code == Some(-1) && not_run && !submitted {
        return Item::Cancelled { id, content, why: "\"action was not executed\" (an earlier action raised)" };
    }
    let flag = match code {
        Some(-1) if not_run => Some((false, "returncode -1: the submit action, padded after Submitted")),
        Some(0) => Some((false, "returncode 0")),
        Some(-1) => Some((true, "returncode -1 (the command raised or timed out)")),
        Some(_) => Some((true, "returncode not 0")),
        None => None,
    };
    Item::Result { id, name: None, content, flag }
}

/// An assistant message's tool calls: `tool_calls`, else `extra.actions`, else its one fenced
/// action.
fn calls_of(m: &Value) -> Vec<CallItem> {
    if let Some(calls) = m.get("tool_calls").and_then(Value::as_array).filter(|c| !c.is_empty()) {
        return calls
            .iter()
            .map(|c| CallItem {
                id: c.get("id").and_then(Value::as_str).map(str::to_owned),
                name: c.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                args: parse_args(c.pointer("/function/arguments").and_then(Value::as_str).unwrap_or("{}")),
            })
            .collect();
    }
    let bash = |command: &str, id: Option<String>| CallItem {
        id,
        name: "bash".to_owned(),
        args: Args::new(&serde_json::json!({ "command": command })),
    };
    if let Some(actions) = m.pointer("/extra/actions").and_then(Value::as_array) {
        return actions
            .iter()
            .filter_map(|a| {
                let command = a.get("command").and_then(Value::as_str)?;
                Some(bash(command, a.get("tool_call_id").and_then(Value::as_str).map(str::to_owned)))
            })
            .collect();
    }
    let text = text_of(m.get("content").unwrap_or(&Value::Null));
    let found: Vec<&str> = ACTION.captures_iter(&text).filter_map(|c| c.get(1).map(|g| g.as_str())).collect();
    match found.as_slice() {
        [one] => vec![bash(one, None)],
        _ => Vec::new(), // none or several: a format error, nothing ran
    }
}

/// A model call with the usage of `response` (a litellm response dump).
fn model(text: Option<String>, calls: Vec<CallItem>, response: Option<&Value>) -> Item {
    let mut item = Item::model(text, calls);
    if let (Item::Model { tokens_in, tokens_out, .. }, Some(u)) = (&mut item, response.and_then(|r| r.get("usage"))) {
        *tokens_in = u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0);
        *tokens_out = u.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0);
    }
    item
}

/// The HTTP status a model exception's class stands for (litellm's classes, which follow the
/// OpenAI SDK's); 500 for any other exception.
fn exception_status(class: &str) -> u16 {
    match class.rsplit('.').next().unwrap_or(class) {
        "RateLimitError" => 429,
        "BadRequestError"
        | "ContextWindowExceededError"
        | "ContentPolicyViolationError"
        | "UnprocessableEntityError" => 400,
        "AuthenticationError" => 401,
        "PermissionDeniedError" => 403,
        "NotFoundError" => 404,
        "Timeout" | "APITimeoutError" => 504,
        "ServiceUnavailableError" | "APIConnectionError" => 503,
        _ => 500,
    }
}

/// How a run with `info.exit_status` `status` ended.
fn outcome(status: &str) -> FinalOutcome {
    match status {
        "Submitted" => FinalOutcome::Answer,
        "LimitsExceeded" | "TimeExceeded" => FinalOutcome::CutOff,
        "RepeatedFormatError" | "FormatError" => FinalOutcome::GaveUp,
        "UserInterruption" | "KeyboardInterrupt" => FinalOutcome::Interrupted,
        _ => FinalOutcome::Error,
    }
}

fn ending(status: &str, submission: Option<&str>) -> Ending {
    let outcome = outcome(status);
    let text = (outcome == FinalOutcome::Answer).then(|| submission.unwrap_or_default().to_owned());
    Ending { text, ..Ending::new(outcome, status) }
}

/// The conversation of one trajectory.
pub fn conversations(v: &Value, id: &str) -> Result<Vec<Conversation>, ImportError> {
    fits(v)?;
    let info = v.get("info");
    let messages = match v {
        Value::Array(m) => m.as_slice(),
        _ => v.get("messages").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default(),
    };
    let exit = messages.iter().rev().find(|m| m.get("role").and_then(Value::as_str) == Some("exit"));
    let status = info
        .and_then(|i| i.get("exit_status"))
        .or_else(|| exit.and_then(|m| m.pointer("/extra/exit_status")))
        .and_then(Value::as_str);
    let submission = info
        .and_then(|i| i.get("submission"))
        .or_else(|| exit.and_then(|m| m.pointer("/extra/submission")))
        .and_then(Value::as_str);
    let submitted = status == Some("Submitted");
    let mut conv = Conversation::new(id.to_owned(), "mini-swe-agent");
    conv.model = info.and_then(|i| i.pointer("/config/model/model_name")).and_then(Value::as_str).map(str::to_owned);
    for m in messages {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        let content = || text_of(m.get("content").unwrap_or(&Value::Null));
        let extra = m.get("extra");
        match role {
            "assistant" => conv.items.push(model(Some(content()), calls_of(m), extra.and_then(|e| e.get("response")))),
            "tool" => {
                let call = m.get("tool_call_id").and_then(Value::as_str).map(str::to_owned);
                conv.items.push(observation(m, call, submitted));
            }
            "user" if extra.and_then(|e| e.get("interrupt_type")).and_then(Value::as_str) == Some("FormatError") => {
                // The rejected reply's call (2.x keeps no assistant message for it), then the
                // feedback the model read. The reply's text is not kept: its blocks ran nothing.
                conv.items.push(model(None, Vec::new(), extra.and_then(|e| e.get("response"))));
                conv.items.push(Item::User(content()));
            }
            "user" if returncode(m).is_some() || extra.is_some_and(|e| e.get("returncode").is_some()) => {
                conv.items.push(observation(m, None, submitted));
            }
            "user" => conv.items.push(Item::User(content())),
            _ => {} // system, exit
        }
    }
    // A run that stopped on the model's exception (litellm's `Timeout`, `InternalServerError`, …)
    // counted the request that raised it in `api_calls` but wrote no message for it: a failed
    // model call, its status from the exception's class.
    let made = conv.items.iter().filter(|i| matches!(i, Item::Model { .. })).count() as u64;
    let api_calls = info.and_then(|i| i.pointer("/model_stats/api_calls")).and_then(Value::as_u64).unwrap_or(0);
    if let Some(s) = status.filter(|s| outcome(s) == FinalOutcome::Error) {
        let failed =
            Item::Model { text: None, calls: Vec::new(), tokens_in: 0, tokens_out: 0, status: exception_status(s) };
        conv.items.extend(std::iter::repeat_n(failed, api_calls.saturating_sub(made) as usize));
    }
    conv.ending = match status {
        Some(s) => Some(ending(s, submission)),
        // A bare 1.x list records no status: its last action submitting is its answer.
        None => last_command(&conv.items)
            .filter(|c| SUBMIT_MARKS.iter().any(|m| c.contains(m)))
            .map(|_| Ending::new(FinalOutcome::Answer, "submitted (the last action's submit command)")),
    };
    Ok(vec![conv])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn shape(c: &Conversation) -> Vec<String> {
        c.items
            .iter()
            .map(|i| match i {
                Item::User(_) => "user".to_owned(),
                Item::Model { calls, .. } => format!("model {}", calls.len()),
                Item::Result { flag, .. } => format!("result {:?}", flag.map(|f| f.0)),
                Item::Cancelled { .. } => "cancelled".to_owned(),
            })
            .collect()
    }

    #[test]
    fn text_actions_return_codes_and_format_errors() {
        let traj = json!({
            "trajectory_format": "mini-swe-agent-1.1",
            "info": {"exit_status": "Submitted", "submission": "diff", "model_stats": {"api_calls": 4}},
            "messages": [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "task"},
                {"role": "assistant", "content": "x\n```mswea_bash_command\nls missing\n```", "extra": {"response": {"usage": {"prompt_tokens": 7, "completion_tokens": 3}}}},
                {"role": "user", "content": "<returncode>2</returncode>\n<output>no</output>"},
                {"role": "user", "content": "Please always provide EXACTLY ONE action", "extra": {"interrupt_type": "FormatError", "response": {"choices": [{"message": {"content": "two blocks"}}]}}},
                {"role": "assistant", "content": "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
                {"role": "user", "content": "{\"returncode\": 0, \"output\": \"COMPLETE\"}"},
                {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}}
            ]
        });
        let c = conversations(&traj, "t").unwrap().remove(0);
        assert_eq!(
            shape(&c),
            ["user", "model 1", "result Some(true)", "model 0", "user", "model 1", "result Some(false)"]
        );
        assert!(matches!(c.items[1], Item::Model { tokens_in: 7, tokens_out: 3, .. }));
        let e = c.ending.unwrap();
        assert_eq!(
            (e.outcome, e.reason.as_deref(), e.text.as_deref()),
            (FinalOutcome::Answer, Some("Submitted"), Some("diff"))
        );
    }

    #[test]
    fn tool_calls_and_the_padded_submit() {
        let msg = |status: &str| {
            json!({
                "trajectory_format": "mini-swe-agent-1.1",
                "info": {"exit_status": status},
                "messages": [
                    {"role": "assistant", "content": "", "tool_calls": [
                        {"id": "a", "function": {"name": "bash", "arguments": "{\"command\": \"false\"}"}},
                        {"id": "b", "function": {"name": "bash", "arguments": "{\"command\": \"submit\"}"}}]},
                    {"role": "tool", "tool_call_id": "a", "content": "", "extra": {"returncode": 1}},
                    {"role": "tool", "tool_call_id": "b", "content": "", "extra": {"returncode": -1, "exception_info": "action was not executed"}}
                ]
            })
        };
        let c = conversations(&msg("Submitted"), "t").unwrap().remove(0);
        assert_eq!(shape(&c), ["model 2", "result Some(true)", "result Some(false)"]);
        let c = conversations(&msg("RuntimeError"), "t").unwrap().remove(0);
        assert_eq!(shape(&c), ["model 2", "result Some(true)", "cancelled"]);
        assert_eq!(c.ending.unwrap().outcome, FinalOutcome::Error);
        assert_eq!(ending("LimitsExceeded", None).outcome, FinalOutcome::CutOff);
        assert_eq!(ending("RepeatedFormatError", None).outcome, FinalOutcome::GaveUp);
    }

    #[test]
    fn detection() {
        assert!(fits(&json!({"trajectory_format": "mini-swe-agent-1", "info": {}, "messages": []})).is_ok());
        assert!(fits(&json!({"info": {"exit_status": "Submitted", "mini_version": "1.0"}, "messages": []})).is_ok());
        let chat = json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "```bash\nls\n```"}]);
        assert_eq!(fits(&chat).unwrap_err().at, "", "a chat that shows a block but no return code");
        let v1 = json!([{"role": "assistant", "content": "```bash\nls\n```"}, {"role": "user", "content": "<returncode>0</returncode>"}]);
        assert!(fits(&v1).is_ok());
        assert!(fits(&json!({"messages": [], "info": {}})).is_err(), "a plain body");
        assert!(fits(&json!([{"traj": []}])).is_err(), "tau-bench");
    }
}
