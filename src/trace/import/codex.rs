//! OpenAI Codex CLI rollouts (`~/.codex/sessions/…/rollout-*.jsonl`): one session a file, a
//! line `{timestamp, type, payload}` each (`session_meta`, `response_item`, `event_msg`,
//! `turn_context`, …); rollouts written before that wrapper hold the bare items after a first
//! line `{id, timestamp, instructions}`.
//!
//! - **Model calls.** A response's output items (reasoning, assistant messages, `function_call`,
//!   `custom_tool_call`, `local_shell_call`, `web_search_call`) are one model call. Where the
//!   rollout marks requests, a new call starts at the first output item after a mark: a
//!   `token_usage_record` with a new `response_id` (0.13x on), a `token_count` event whose total
//!   changed, or a `turn_context` line (one per request in 0.4x–0.8x, whose outputs follow each
//!   call at once); and a reasoning or message item after an input item (a response's calls come
//!   after its text, so text after a tool output is the next response's). Rollouts with no marks (before the wrapper) split at input items (a tool
//!   output, a user message), which counts one call per call there. Usage comes from
//!   `token_usage_record` (the response just read) or else `token_count`'s `last_token_usage`
//!   (the response about to be read).
//! - **Tool calls.** `function_call` (JSON `arguments`), `custom_tool_call` (freeform `input`,
//!   e.g. `apply_patch`, kept as a string) and `local_shell_call` (its `action`), paired with
//!   `function_call_output` / `custom_tool_call_output` on `call_id`. `web_search_call` runs at
//!   the provider and has no result: it is not a tool call here.
//! - **Failures.** The shell's exit code (`Exit code: N`, `Process exited with code N`, or
//!   `metadata.exit_code` in a JSON output), an output's `success: false`, and Codex's own error
//!   texts (`apply_patch verification failed`, `failed to parse function arguments`,
//!   `unsupported call`, `unable to locate …`, `Unknown process id`, `patch rejected: …`, a
//!   handler's `TOOL failed: …` such as `write_stdin failed: stdin is closed…`, a tool that
//!   `rejected this action`); then the text rules. A call the user declined (`exec command
//!   rejected by user`, `patch rejected by user`) never ran: it is cancelled.
//! - **Endings.** The last `task_complete` (an answer, or an error when it carries `error`),
//!   `turn_aborted` (interrupted), an `error` event (the model request failed).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::ImportError;
use super::conversation::{CallItem, Conversation, Ending, Item, parse_args, text_of};
use super::kept::Keep;
use crate::trace::{Args, FinalOutcome};

/// The line types of a wrapped rollout.
const LINE_TYPES: [&str; 7] =
    ["session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state", "token_usage_record"];

/// The keys of an item that a line's reading looks at, in a wrapped line's `payload` and in a
/// bare item of an older rollout.
const ITEM_KEYS: &[(&str, Keep)] = &[
    ("type", Keep::All),
    ("role", Keep::All),
    ("call_id", Keep::All),
    ("name", Keep::All),
    ("arguments", Keep::All),
    ("input", Keep::All),
    ("id", Keep::All),
    ("action", Keep::All),
    ("content", Keep::All),
    ("output", Keep::All),
];

/// Every key a line's reading looks at (the tests hold the line-by-line reading, which skips
/// the others, to the whole-file reading): a key read below must be listed here.
pub static KEEP: Keep = Keep::Keys(&[
    ITEM_KEYS,
    &[(
        "payload",
        Keep::Keys(&[
            ITEM_KEYS,
            &[
                ("model", Keep::All),
                ("response_id", Keep::All),
                ("usage", Keep::All),
                ("info", Keep::Keys(&[&[("total_token_usage", Keep::All), ("last_token_usage", Keep::All)]])),
                ("error", Keep::All),
                ("last_agent_message", Keep::All),
                ("reason", Keep::All),
                ("message", Keep::All),
                ("codex_error_info", Keep::All),
            ],
        ]),
    )],
]);

/// Whether `v` (a JSONL file as a list of its lines) is a Codex rollout.
pub fn fits(v: &Value) -> Result<(), ImportError> {
    let Some(lines) = v.as_array() else {
        return Err(ImportError::at("", "a Codex rollout: JSONL, one `{timestamp, type, payload}` per line"));
    };
    let Some(first) = lines.first() else { return Err(ImportError::at("/0", "a Codex rollout's first line")) };
    let ty = first.get("type").and_then(Value::as_str);
    if ty == Some("session_meta") && first.get("payload").is_some_and(Value::is_object) {
        return Ok(());
    }
    // Before the wrapper: `{id, timestamp, instructions}`, then bare items and state records.
    let legacy = first.get("id").is_some_and(Value::is_string)
        && first.get("timestamp").is_some()
        && first.get("type").is_none()
        && lines.iter().skip(1).any(|l| l.get("record_type").is_some());
    if legacy {
        return Ok(());
    }
    Err(ImportError::at("/0/type", "a Codex rollout's first line `{\"type\": \"session_meta\", \"payload\": {…}}`"))
}

/// A model request's failure status, from Codex's error kind.
fn error_status(info: Option<&str>, message: &str) -> u16 {
    let m = message.to_ascii_lowercase();
    match info.unwrap_or_default() {
        "usage_limit_exceeded" | "too_many_requests" | "rate_limit_exceeded" => 429,
        "server_overloaded" => 503,
        "bad_request" | "context_window_exceeded" => 400,
        "unauthorized" => 401,
        _ if m.contains("rate limit") || m.contains("too many requests") => 429,
        _ => 500,
    }
}

static EXIT_CODE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)\A(?:Exit code: (-?\d+)|(?:[^\n]*\n){0,3}Process exited with code (-?\d+))").expect("valid")
});

/// Codex's own texts for a tool output that failed before or instead of running.
const ERROR_PREFIXES: [&str; 7] = [
    "apply_patch verification failed",
    "failed to parse function arguments",
    "unsupported call",
    "execution error",
    "unable to locate",
    "unknown process id",
    "patch rejected:",
];

/// Codex's handlers answer the model `TOOL failed: …` when a tool could not do its work
/// (`write_stdin failed: stdin is closed for this session`); a tool that refused an action
/// says it `rejected this action` (Codex Desktop's browser tool).
static TOOL_FAILED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\A[a-z][a-z0-9_.-]* failed: |\brejected this action\b").expect("valid"));

/// Codex's texts for a call the user declined: it never ran.
const REJECTED_BY_USER: [&str; 3] =
    ["exec command rejected by user", "patch rejected by user", "unified exec command rejected by user"];

/// The structural verdict on an output's text: an exit code, else one of Codex's error texts.
fn output_flag(text: &str) -> Option<(bool, &'static str)> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{')
        && let Ok(v) = serde_json::from_str::<Value>(trimmed)
        && let Some(code) = v.pointer("/metadata/exit_code").and_then(Value::as_i64)
    {
        return Some(if code == 0 { (false, "metadata.exit_code 0") } else { (true, "metadata.exit_code not 0") });
    }
    if let Some(c) = EXIT_CODE.captures(text) {
        let code: i64 = c.get(1).or(c.get(2)).and_then(|m| m.as_str().parse().ok()).unwrap_or(0);
        return Some(if code == 0 { (false, "shell exit code 0") } else { (true, "shell exit code not 0") });
    }
    let starts = |p: &str| trimmed.as_bytes().get(..p.len()).is_some_and(|b| b.eq_ignore_ascii_case(p.as_bytes()));
    (ERROR_PREFIXES.iter().any(|p| starts(p)) || TOOL_FAILED.is_match(trimmed))
        .then_some((true, "a Codex tool error text"))
}

/// An output payload's text and structural flag: a string, a list of content items, or
/// `{content, success}`.
fn output(v: &Value) -> (String, Option<(bool, &'static str)>) {
    match v {
        Value::Object(o) => {
            let text = text_of(o.get("content").unwrap_or(&Value::Null));
            let flag = match o.get("success").and_then(Value::as_bool) {
                Some(false) => Some((true, "output success: false")),
                _ => output_flag(&text),
            };
            (text, flag)
        }
        other => {
            let text = text_of(other);
            let flag = output_flag(&text);
            (text, flag)
        }
    }
}

/// Whether a line is a `token_usage_record` (0.13x on), and whether it is a `token_count` event
/// with its `info` (the other mark of a request).
pub fn marks(line: &Value) -> (bool, bool) {
    let record = line.get("type").and_then(Value::as_str) == Some("token_usage_record");
    let count = line.pointer("/payload/type").and_then(Value::as_str) == Some("token_count")
        && line.pointer("/payload/info").is_some_and(|i| !i.is_null());
    (record, count)
}

/// The conversation of one rollout.
pub fn conversations(v: &Value, id: &str) -> Result<Vec<Conversation>, ImportError> {
    fits(v)?;
    let lines = v.as_array().expect("checked by fits");
    let records = lines.iter().any(|l| marks(l).0);
    let marked = records || lines.iter().any(|l| marks(l).1);
    let mut rollout = Rollout::new(id, records, marked);
    for line in lines {
        rollout.line(line);
    }
    Ok(vec![rollout.finish()])
}

/// A rollout being read a line at a time.
pub struct Rollout {
    conv: Conversation,
    items: Vec<Item>,
    /// Whether the rollout has `token_usage_record` lines, and whether it marks requests at all.
    records: bool,
    marked: bool,
    /// The model call now being read (its index in `items`), while no input item has come.
    open: Option<usize>,
    /// The last model call, for the usage that follows it.
    last_model: Option<usize>,
    ending: Option<Ending>,
    /// Since the last output item: a mark seen.
    mark: bool,
    /// An input item came since the last output item.
    after_input: bool,
    /// The last total and response id.
    total: Option<u64>,
    response_id: Option<String>,
    /// Usage waiting for the next call (from `token_count`).
    pending: Option<Value>,
}

impl Rollout {
    /// A rollout whose lines include `token_usage_record`s (`records`), and marks of requests
    /// of either kind (`marked`): see [`marks`].
    pub fn new(id: &str, records: bool, marked: bool) -> Rollout {
        let mut conv = Conversation::new(id.to_owned(), "codex");
        conv.provider = Some("openai-responses".to_owned());
        Rollout {
            conv,
            items: Vec::new(),
            records,
            marked,
            open: None,
            last_model: None,
            ending: None,
            mark: false,
            after_input: false,
            total: None,
            response_id: None,
            pending: None,
        }
    }

    /// Whether `line` agrees with what was said of the lines to come: no record or mark of a
    /// kind `new` was told there is none of.
    pub fn expected(&self, line: &Value) -> bool {
        let (record, count) = marks(line);
        (!record || self.records) && (!count || self.marked)
    }

    /// The next line.
    pub fn line(&mut self, line: &Value) {
        let (kind, p) = match (line.get("type").and_then(Value::as_str), line.get("payload")) {
            (Some(t), Some(p)) if LINE_TYPES.contains(&t) => (t, p),
            (Some(_), _) => ("response_item", line), // a bare item of an older rollout
            (None, _) => return,                     // the first line or a state record
        };
        let ty = p.get("type").and_then(Value::as_str).unwrap_or_default();
        let items = &mut self.items;
        match kind {
            "session_meta" => {
                let conv = &mut self.conv;
                conv.model = conv.model.take().or_else(|| p.get("model").and_then(Value::as_str).map(str::to_owned));
            }
            "turn_context" => {
                self.mark = true;
                if let Some(m) = p.get("model").and_then(Value::as_str) {
                    self.conv.model.get_or_insert_with(|| m.to_owned());
                }
            }
            "response_item" => {
                let role = p.get("role").and_then(Value::as_str);
                let call = match ty {
                    "function_call" => Some(CallItem {
                        id: p.get("call_id").and_then(Value::as_str).map(str::to_owned),
                        name: p.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                        args: parse_args(p.get("arguments").and_then(Value::as_str).unwrap_or("{}")),
                    }),
                    "custom_tool_call" => Some(CallItem {
                        id: p.get("call_id").and_then(Value::as_str).map(str::to_owned),
                        name: p.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                        args: Args::new(p.get("input").unwrap_or(&Value::Null)),
                    }),
                    "local_shell_call" => Some(CallItem {
                        id: p.get("call_id").or(p.get("id")).and_then(Value::as_str).map(str::to_owned),
                        name: "local_shell".to_owned(),
                        args: Args::new(p.get("action").unwrap_or(&Value::Null)),
                    }),
                    _ => None,
                };
                let model_output = call.is_some()
                    || matches!(ty, "reasoning" | "web_search_call")
                    || (ty == "message" && role == Some("assistant"));
                if model_output {
                    let text_after_input =
                        std::mem::take(&mut self.after_input) && call.is_none() && ty != "web_search_call";
                    if self.marked && (std::mem::take(&mut self.mark) || text_after_input) {
                        self.open = None;
                    }
                    let k = *self.open.get_or_insert_with(|| {
                        items.push(Item::model(None, Vec::new()));
                        items.len() - 1
                    });
                    if self.last_model != Some(k) && !self.records {
                        set_usage(items, Some(k), self.pending.take().as_ref(), true);
                    }
                    self.last_model = Some(k);
                    if let Item::Model { calls, text, .. } = &mut items[k] {
                        calls.extend(call);
                        if ty == "message" {
                            let t = text_of(p.get("content").unwrap_or(&Value::Null));
                            if !t.trim().is_empty() {
                                *text = Some(match text.take() {
                                    Some(before) => format!("{before}\n{t}"),
                                    None => t,
                                });
                            }
                        }
                    }
                    return;
                }
                match (ty, role) {
                    ("function_call_output" | "custom_tool_call_output", _) => {
                        let (content, flag) = output(p.get("output").unwrap_or(&Value::Null));
                        let id = p.get("call_id").and_then(Value::as_str).map(str::to_owned);
                        if REJECTED_BY_USER.iter().any(|r| content.trim_start().starts_with(r)) {
                            let why = "the user declined it (Codex's `… rejected by user`)";
                            items.push(Item::Cancelled { id, content, why });
                        } else {
                            items.push(Item::Result { id, name: None, content, flag });
                        }
                        if !self.marked {
                            self.open = None;
                        }
                        self.after_input = true;
                    }
                    ("message", Some("user")) => {
                        items.push(Item::User(text_of(p.get("content").unwrap_or(&Value::Null))));
                        self.open = None;
                        self.mark = false;
                        self.after_input = true;
                    }
                    _ => {}
                }
            }
            "token_usage_record" => {
                let id = p.get("response_id").and_then(Value::as_str);
                if id != self.response_id.as_deref() {
                    self.response_id = id.map(str::to_owned);
                    self.mark = true;
                    set_usage(items, self.last_model, p.get("usage"), true);
                }
            }
            "event_msg" => match ty {
                "token_count" => {
                    let t = p.pointer("/info/total_token_usage/total_tokens").and_then(Value::as_u64);
                    if t.is_some() && t != self.total {
                        self.total = t;
                        self.mark = true;
                        self.pending = p.pointer("/info/last_token_usage").cloned();
                    }
                }
                "task_complete" => {
                    self.ending = Some(match p.get("error").filter(|e| !e.is_null()) {
                        Some(e) => {
                            let message = e.get("message").and_then(Value::as_str).unwrap_or_default();
                            let info = e.get("codex_error_info").and_then(Value::as_str);
                            items.push(failed_call(error_status(info, message)));
                            self.open = None;
                            Ending::new(FinalOutcome::Error, info.unwrap_or("error").to_owned())
                        }
                        None => Ending {
                            text: p.get("last_agent_message").and_then(Value::as_str).map(str::to_owned),
                            ..Ending::new(FinalOutcome::Answer, "task_complete")
                        },
                    });
                }
                "turn_aborted" => {
                    let reason = p.get("reason").and_then(Value::as_str).unwrap_or("aborted");
                    self.ending = Some(Ending::new(FinalOutcome::Interrupted, format!("turn_aborted: {reason}")));
                }
                "error" => {
                    let message = p.get("message").and_then(Value::as_str).unwrap_or_default();
                    let info = p.get("codex_error_info").and_then(Value::as_str);
                    items.push(failed_call(error_status(info, message)));
                    self.open = None;
                    self.ending = Some(Ending::new(FinalOutcome::Error, "error"));
                }
                _ => {}
            },
            _ => {}
        }
    }

    /// The rollout's conversation.
    pub fn finish(mut self) -> Conversation {
        self.conv.items = self.items;
        self.conv.ending = self.ending;
        self.conv
    }
}

fn failed_call(status: u16) -> Item {
    Item::Model { text: None, calls: Vec::new(), tokens_in: 0, tokens_out: 0, status }
}

/// Sets the last model call's usage (`input_tokens`, `output_tokens`); a `token_count` event
/// (`replace` false) only fills a call that has none yet.
fn set_usage(items: &mut [Item], last: Option<usize>, usage: Option<&Value>, replace: bool) {
    let (Some(k), Some(u)) = (last, usage) else { return };
    if let Item::Model { tokens_in, tokens_out, .. } = &mut items[k]
        && (replace || (*tokens_in == 0 && *tokens_out == 0))
    {
        *tokens_in = u.get("input_tokens").and_then(Value::as_u64).unwrap_or(0);
        *tokens_out = u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text after a tool output is the next response's, even where the usage event of the
    /// first came before its items; calls after an output stay in their response (0.4x writes
    /// each output right after its call).
    #[test]
    fn text_after_an_output_is_a_new_call() {
        let line = |t: &str, p: serde_json::Value| serde_json::json!({"timestamp": "t", "type": t, "payload": p});
        let item = |p: serde_json::Value| line("response_item", p);
        let count = |total: u64| {
            line(
                "event_msg",
                serde_json::json!({"type": "token_count", "info": {"total_token_usage": {"total_tokens": total}, "last_token_usage": {"input_tokens": 1, "output_tokens": 1}}}),
            )
        };
        let rollout = serde_json::json!([
            line("session_meta", serde_json::json!({"id": "s"})),
            item(
                serde_json::json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]})
            ),
            count(10),
            item(serde_json::json!({"type": "reasoning", "summary": []})),
            item(
                serde_json::json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "looking"}]})
            ),
            item(serde_json::json!({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "a"})),
            item(
                serde_json::json!({"type": "function_call_output", "call_id": "a", "output": "Exit code: 0\nOutput:\n"})
            ),
            item(
                serde_json::json!({"type": "function_call", "name": "shell", "arguments": "{\"x\":1}", "call_id": "b"})
            ),
            item(
                serde_json::json!({"type": "function_call_output", "call_id": "b", "output": "Exit code: 2\nOutput:\n"})
            ),
            item(
                serde_json::json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "fixed"}]})
            ),
            item(
                serde_json::json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks"}]})
            ),
        ]);
        let conv = conversations(&rollout, "r").unwrap().remove(0);
        let models: Vec<(usize, Option<&str>)> = conv
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Model { calls, text, .. } => Some((calls.len(), text.as_deref())),
                _ => None,
            })
            .collect();
        assert_eq!(models, [(2, Some("looking")), (0, Some("fixed"))]);
    }

    /// A call the user declined never ran: cancelled, not a failure of the tool.
    #[test]
    fn a_declined_call_is_cancelled() {
        let line = |t: &str, p: serde_json::Value| serde_json::json!({"timestamp": "t", "type": t, "payload": p});
        let item = |p: serde_json::Value| line("response_item", p);
        let rollout = serde_json::json!([
            line("session_meta", serde_json::json!({"id": "s"})),
            item(serde_json::json!({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "a"})),
            item(
                serde_json::json!({"type": "function_call_output", "call_id": "a", "output": "exec command rejected by user"})
            ),
        ]);
        let conv = conversations(&rollout, "r").unwrap().remove(0);
        assert!(matches!(&conv.items[1], Item::Cancelled { id: Some(a), .. } if a == "a"), "{:?}", conv.items);
    }

    #[test]
    fn exit_codes_and_error_texts() {
        assert_eq!(output_flag("Exit code: 1\nWall time: 0 seconds\nOutput:\n"), Some((true, "shell exit code not 0")));
        assert_eq!(output_flag("Exit code: 0\nOutput:\nok"), Some((false, "shell exit code 0")));
        let unified = "Chunk ID: 3df069\nWall time: 0.0000 seconds\nProcess exited with code 2\nOutput:\nx";
        assert_eq!(output_flag(unified), Some((true, "shell exit code not 0")));
        assert_eq!(
            output_flag(r#"{"output":"hi\n","metadata":{"exit_code":0}}"#),
            Some((false, "metadata.exit_code 0"))
        );
        assert_eq!(output_flag(r#"{"output":"","metadata":{"exit_code":127}}"#).map(|f| f.0), Some(true));
        assert_eq!(output_flag("apply_patch verification failed: no such file").map(|f| f.0), Some(true));
        assert_eq!(output_flag("plain output, mentions Exit code: 3 later"), None);
        // A handler's `TOOL failed: …`, Codex's other texts, a tool's refusal of an action.
        let closed = "write_stdin failed: stdin is closed for this session; rerun exec_command with tty=true";
        assert_eq!(output_flag(closed), Some((true, "a Codex tool error text")));
        assert_eq!(output_flag("Unknown process id 20936").map(|f| f.0), Some(true));
        let browser = "Wall time: 2.4 seconds\nOutput:\n[{\"type\":\"text\",\"text\":\"Browser Use rejected this action due to browser security policy.\"}]";
        assert_eq!(output_flag(browser).map(|f| f.0), Some(true));
        assert_eq!(output_flag("the build failed: see above"), None, "a sentence, not a handler's `TOOL failed:`");
        let (text, flag) = output(&serde_json::json!({"content": "boom", "success": false}));
        assert_eq!((text.as_str(), flag), ("boom", Some((true, "output success: false"))));
    }
}
