//! Claude Code session transcripts (`~/.claude/projects/<project>/<sessionId>.jsonl`, and the
//! subagents' `…/<sessionId>/subagents/agent-<id>.jsonl` or older `agent-<id>.jsonl`) and the
//! output of `claude -p --output-format stream-json --verbose`. Both are JSONL, every line an
//! object with a string `type`: a transcript's conversation lines carry `sessionId`, `uuid` and
//! `parentUuid`; stream-json starts with `{"type": "system", "subtype": "init", "session_id", …}`
//! and its lines carry `session_id` and `parent_tool_use_id`. Versions 1.0 to 2.1 are read.
//!
//! - **Conversations.** A transcript holds one session. Its main conversation is the lines with
//!   `isSidechain` false; subagent lines written inline (`isSidechain: true`, 1.0.x) are each
//!   subagent run's own conversation, a run being the lines with one `agentId`, else one chain of
//!   `parentUuid` from a root. The main conversation is `{id}#1` and the runs `{id}#2`, `{id}#3`…
//!   in order of their first line; a file of one conversation (a subagent's own file, say) is
//!   `{id}`. In stream-json the lines with a `parent_tool_use_id` are that subagent's run.
//!   Lines are read once each by `uuid` (a resumed or rewound session repeats none in one file,
//!   but a copy may).
//! - **Model calls.** Claude Code writes one line per content block of a response: the
//!   `assistant` lines with one `message.id` (else `requestId`) are one call, wherever they fall.
//!   Its usage (`input_tokens`, `output_tokens`) is taken once, from the line with the largest
//!   `output_tokens` (the lines repeat it, not part of it); its `stop_reason` is the last one set.
//!   Lines with model `<synthetic>` are Claude Code's own: an API error (`isApiErrorMessage`,
//!   an `error` field, or `API Error: …` text) is a failed request (its status from the text,
//!   `apiErrorStatus` or the error kind); `max_output_tokens` follows a call that answered and is
//!   no new call; the rest ("No response requested.", notes) are not calls. In stream-json a
//!   subagent's final answer is not written (it is the Agent call's result in the parent).
//! - **Tool calls.** `tool_use` blocks (`id`, `name`, `input`), one per id; results are
//!   `tool_result` blocks in `user` lines, paired on `tool_use_id`, flagged by `is_error`. The
//!   sibling cancellation `<tool_use_error>Cancelled: parallel tool call … errored</tool_use_error>`
//!   (`<tool_use_error>Sibling tool call errored</tool_use_error>` before 2.1.100; and the other `Cancelled:` / `[Tool call skipped: …]` texts, `toolDenialKind: cancelled`) is
//!   a call that never ran, and so is a call the user rejected ("The user doesn't want to
//!   proceed…", `toolDenialKind` user-rejected): cancelled, neither a failure nor an attempt, as
//!   OpenHands' rejections are. A permission Claude Code was not granted ("Claude requested
//!   permissions to use …") is a failure (`is_error`) the model can act on. Server-side tools (`server_tool_use`) run at the provider: not calls.
//! - **Left out.** Local commands that reach no model (`<command-name>`, `<local-command-stdout>`,
//!   `<bash-input>`…), `isMeta` and compaction summary lines, `system`, `attachment`, `progress`
//!   (copies of subagent lines, which have their own file) and metadata lines (`summary`,
//!   `file-history-snapshot`, `queue-operation`, `last-prompt`, …). A line of another type that
//!   holds a tool call or result is a gap.
//! - **Endings.** stream-json: the last `result` line (`success` an answer unless `is_error`,
//!   `error_max_turns` / `error_max_budget_usd` cut off, other errors an error), its
//!   `terminal_reason` (else `subtype`) the reason, whatever the lines before it said; a subagent
//!   run's from its `task_notification` `status` (completed, failed, stopped). A transcript has
//!   no end record: an API error, a `[Request interrupted by user…]` text or a rejected tool use
//!   ("The user doesn't want to proceed…", `toolDenialKind`) with no model call after it ends it
//!   (error; interrupted); else the last call's `stop_reason` (`end_turn` an answer, `max_tokens`
//!   cut off), else what the builder infers. A one-line file arrives as its line, and is read so.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::ImportError;
use super::conversation::{CallItem, Conversation, Ending, Item, parse_args, text_of};
use super::kept::Keep;
use crate::trace::{Args, FinalOutcome, ToolDef};

const FORMAT: &str = "claude-code";

const EXPECTED: &str = "a Claude Code transcript (a `user` or `assistant` line with `sessionId`, `uuid` and `message`) \
     or stream-json output (a first line `{\"type\": \"system\", \"subtype\": \"init\", \"session_id\": …}`)";

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn is_init(line: &Value) -> bool {
    str_at(line, "type") == Some("system")
        && str_at(line, "subtype") == Some("init")
        && line.get("session_id").is_some_and(Value::is_string)
}

/// Whether `v` (a JSONL file as a list of its lines) is a Claude Code transcript or stream-json
/// output.
pub fn fits(v: &Value) -> Result<(), ImportError> {
    if v.is_object() {
        // A one-line file arrives as that line.
        return fits(&Value::Array(vec![v.clone()])).map_err(|e| {
            let at = e.at.strip_prefix("/0").unwrap_or(&e.at).to_owned();
            ImportError { at, ..e }
        });
    }
    let Some(lines) = v.as_array() else { return Err(ImportError::at("", EXPECTED)) };
    if lines.is_empty() {
        return Err(ImportError::at("/0", EXPECTED));
    }
    if let Some(i) = lines.iter().position(|l| str_at(l, "type").is_none()) {
        return Err(ImportError::at(format!("/{i}/type"), "a string `type` on every line (Claude Code JSONL)"));
    }
    if lines.first().is_some_and(is_init) {
        return Ok(());
    }
    let conversational = lines.iter().position(|l| matches!(str_at(l, "type"), Some("user" | "assistant")));
    let Some(i) = conversational else { return Err(ImportError::at("/0/type", EXPECTED)) };
    let line = &lines[i];
    if !line.get("message").is_some_and(|m| m.get("role").is_some_and(Value::is_string)) {
        return Err(ImportError::at(format!("/{i}/message/role"), "a Claude Code message `{role, content}`"));
    }
    if line.get("sessionId").is_some_and(Value::is_string) {
        if line.get("uuid").is_some_and(Value::is_string) {
            return Ok(());
        }
        return Err(ImportError::at(format!("/{i}/uuid"), "a Claude Code transcript line's `uuid`"));
    }
    if line.get("session_id").is_some_and(Value::is_string) {
        if line.get("parent_tool_use_id").is_some() {
            return Ok(());
        }
        return Err(ImportError::at(
            format!("/{i}/parent_tool_use_id"),
            "a stream-json line's `parent_tool_use_id` (null or a tool_use id)",
        ));
    }
    Err(ImportError::at(format!("/{i}/sessionId"), EXPECTED))
}

/// Every key a line's reading looks at (the tests hold the line-by-line reading, which skips
/// the others, to the whole-file reading): a key read below must be listed here.
pub static KEEP: Keep = Keep::Keys(&[&[
    ("type", Keep::All),
    ("uuid", Keep::All),
    ("parentUuid", Keep::All),
    ("isSidechain", Keep::All),
    ("agentId", Keep::All),
    ("sessionId", Keep::All),
    ("session_id", Keep::All),
    ("parent_tool_use_id", Keep::All),
    ("isMeta", Keep::All),
    ("isCompactSummary", Keep::All),
    ("toolDenialKind", Keep::All),
    ("subtype", Keep::All),
    ("model", Keep::All),
    ("tools", Keep::All),
    ("tool_use_id", Keep::All),
    ("status", Keep::All),
    ("result", Keep::All),
    ("terminal_reason", Keep::All),
    ("is_error", Keep::All),
    ("error", Keep::All),
    ("isApiErrorMessage", Keep::All),
    ("apiErrorStatus", Keep::All),
    ("requestId", Keep::All),
    (
        "message",
        Keep::Keys(&[&[
            ("id", Keep::All),
            ("role", Keep::All),
            ("model", Keep::All),
            ("content", Keep::All),
            ("stop_reason", Keep::All),
            ("usage", Keep::Keys(&[&[("input_tokens", Keep::All), ("output_tokens", Keep::All)]])),
        ]]),
    ),
]]);

/// One model call being read: its item, the largest `output_tokens` seen, its stop reason.
struct Call {
    item: usize,
    out: Option<u64>,
    stop: Option<String>,
}

/// One conversation being read.
struct Conv {
    conv: Conversation,
    /// Model calls by `message.id` (else `requestId`).
    calls: HashMap<String, Call>,
    /// The key of the last model call begun.
    last_call: Option<String>,
    tool_ids: HashSet<String>,
    result_ids: HashSet<String>,
    /// An ending met in the lines (interruption, API error), undone by a later model call.
    end: Option<Ending>,
}

impl Conv {
    fn new() -> Conv {
        Conv {
            conv: Conversation::new(String::new(), FORMAT),
            calls: HashMap::new(),
            last_call: None,
            tool_ids: HashSet::new(),
            result_ids: HashSet::new(),
            end: None,
        }
    }
}

const INTERRUPTED: &str = "[Request interrupted by user";
const REJECTED: [&str; 2] =
    ["The user doesn't want to proceed with this tool use", "The user doesn't want to take this action right now"];

/// Texts of local commands and shell-mode input, which no model sees as a prompt.
fn local_command(text: &str) -> bool {
    let t = text.trim_start();
    text.contains("<command-name>")
        || [
            "<local-command-",
            "<bash-input>",
            "<bash-stdout>",
            "<bash-stderr>",
            "Caveat: The messages below were generated",
        ]
        .iter()
        .any(|p| t.starts_with(p))
}

/// The interruption a text is, as its own words (`Request interrupted by user for tool use`).
fn interruption(text: &str) -> Option<String> {
    let t = text.trim_start();
    if !t.starts_with(INTERRUPTED) {
        return None;
    }
    let inner = t.trim_start_matches('[');
    Some(inner.split(']').next().unwrap_or(inner).to_owned())
}

/// Why a result is a call that never ran, if it is one.
fn cancelled(content: &str, denial: Option<&str>) -> Option<&'static str> {
    let t = content.trim_start();
    if t.starts_with("<tool_use_error>Cancelled: parallel tool call") {
        Some("Claude Code's `Cancelled: parallel tool call … errored` (a parallel sibling failed)")
    } else if t.starts_with("<tool_use_error>Sibling tool call errored") {
        Some("Claude Code's `Sibling tool call errored` (a parallel sibling failed; before 2.1.100)")
    } else if t.starts_with("<tool_use_error>Cancelled:") {
        Some("Claude Code's `<tool_use_error>Cancelled: …` text")
    } else if t.starts_with("[Tool call skipped:") {
        Some("Claude Code's `[Tool call skipped: …]` text")
    } else if denial == Some("cancelled") {
        Some("toolDenialKind: cancelled")
    } else {
        None
    }
}

static API_STATUS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\s*API Error: (\d{3})\b").expect("valid"));

/// A failed request's HTTP status: from its text, `apiErrorStatus`, or the error kind.
fn api_status(text: &str, line: &Value) -> u16 {
    let from_text = API_STATUS.captures(text).and_then(|c| c[1].parse::<u16>().ok());
    let field = line.get("apiErrorStatus").and_then(Value::as_u64).and_then(|s| u16::try_from(s).ok());
    let kind = match str_at(line, "error").unwrap_or_default() {
        "rate_limit" => Some(429),
        "authentication_failed" => Some(401),
        "billing_error" => Some(402),
        "invalid_request" => Some(400),
        _ => None,
    };
    from_text.or(field).or(kind).filter(|s| (400..600).contains(s)).unwrap_or(500)
}

/// Whether the file is stream-json output rather than a transcript, from its first line or, if
/// that is no `init`, its first `user` or `assistant` line; `None` when `line` does not decide.
pub fn stream_json(n: usize, line: &Value) -> Option<bool> {
    if n == 0 && is_init(line) {
        return Some(true);
    }
    matches!(str_at(line, "type"), Some("user" | "assistant")).then(|| line.get("sessionId").is_none())
}

/// The conversations of one transcript or stream-json file.
pub fn conversations(v: &Value, id: &str) -> Result<Vec<Conversation>, ImportError> {
    fits(v)?;
    let one;
    let lines: &[Value] = match v {
        Value::Array(lines) => lines,
        line => {
            one = [line.clone()];
            &one
        }
    };
    let stream = lines.iter().enumerate().find_map(|(n, l)| stream_json(n, l)).unwrap_or(false);
    let mut session = Session::new(stream);
    for (n, line) in lines.iter().enumerate() {
        session.line(n, line);
    }
    Ok(session.finish(id))
}

/// A session being read a line at a time: its main conversation and subagent runs, and what
/// later lines need of earlier ones.
pub struct Session {
    stream: bool,
    /// convs[0] is the main conversation; the others are subagent runs by key.
    convs: Vec<Conv>,
    runs: HashMap<String, usize>,
    /// A transcript's sidechain lines, by uuid: their run.
    run_of: HashMap<String, usize>,
    seen: HashSet<String>,
    result: Option<Ending>,
    /// stream-json: the endings `task_notification` gives subagent runs, by tool_use id.
    notified: HashMap<String, Ending>,
    /// Parents' Agent results, by tool_use id: a stream-json subagent's final answer.
    agent_answers: HashMap<String, String>,
    main_tools: Vec<ToolDef>,
    main_model: Option<String>,
}

impl Session {
    /// A session of stream-json output (`stream`) or of a transcript.
    pub fn new(stream: bool) -> Session {
        Session {
            stream,
            convs: vec![Conv::new()],
            runs: HashMap::new(),
            run_of: HashMap::new(),
            seen: HashSet::new(),
            result: None,
            notified: HashMap::new(),
            agent_answers: HashMap::new(),
            main_tools: Vec::new(),
            main_model: None,
        }
    }

    /// The run keyed `key`, begun if new.
    fn run(&mut self, key: String) -> usize {
        let next = self.convs.len();
        let k = *self.runs.entry(key).or_insert(next);
        if k == next {
            self.convs.push(Conv::new());
        }
        k
    }

    /// Line `n` (counting the file's non-empty lines from 0).
    pub fn line(&mut self, n: usize, line: &Value) {
        let uuid = str_at(line, "uuid");
        if let Some(u) = uuid
            && !self.seen.insert(u.to_owned())
        {
            return;
        }
        let ty = str_at(line, "type").unwrap_or_default();
        // The conversation this line belongs to.
        let k = if self.stream {
            match str_at(line, "parent_tool_use_id") {
                Some(parent) => self.run(parent.to_owned()),
                None => 0,
            }
        } else if line.get("isSidechain").and_then(Value::as_bool) == Some(true) {
            let known = str_at(line, "parentUuid").and_then(|p| self.run_of.get(p)).copied();
            let key = match str_at(line, "agentId") {
                Some(a) => Some(format!("agent {a}")),
                None if known.is_some() => None,
                None => uuid.map(|u| format!("root {u}")),
            };
            let k = match key {
                Some(key) => self.run(key),
                None => known.unwrap_or(0),
            };
            if let Some(u) = uuid {
                self.run_of.insert(u.to_owned(), k);
            }
            k
        } else {
            0
        };
        let Some(c) = self.convs.get_mut(k) else { return };
        match ty {
            "assistant" => assistant(c, line, n),
            "user" => {
                if line.get("isMeta").and_then(Value::as_bool) == Some(true)
                    || line.get("isCompactSummary").and_then(Value::as_bool) == Some(true)
                {
                    return;
                }
                let denial = str_at(line, "toolDenialKind");
                match line.pointer("/message/content") {
                    Some(Value::String(s)) => user_text(c, s),
                    Some(Value::Array(blocks)) => {
                        for b in blocks {
                            match str_at(b, "type") {
                                Some("tool_result") => {
                                    if let Some((tid, text)) = tool_result(c, b, denial)
                                        && k == 0
                                        && self.runs.contains_key(tid)
                                    {
                                        self.agent_answers.insert(tid.to_owned(), text);
                                    }
                                }
                                Some("text") => user_text(c, str_at(b, "text").unwrap_or_default()),
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
            "result" => {
                self.result = Some(result_ending(line));
            }
            "system" => {
                if is_init(line) {
                    self.main_model = str_at(line, "model").map(str::to_owned);
                    self.main_tools = line
                        .get("tools")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(|name| ToolDef { name: name.to_owned(), description: None, parameters: None })
                        .collect();
                } else if str_at(line, "subtype") == Some("task_notification")
                    && let Some(tid) = str_at(line, "tool_use_id")
                {
                    let status = str_at(line, "status").unwrap_or("unknown");
                    let outcome = match status {
                        "completed" => FinalOutcome::Answer,
                        "stopped" => FinalOutcome::Interrupted,
                        _ => FinalOutcome::Error,
                    };
                    self.notified.insert(tid.to_owned(), Ending::new(outcome, format!("task_notification: {status}")));
                }
            }
            _ => {
                let holds_tools = line
                    .pointer("/message/content")
                    .and_then(Value::as_array)
                    .is_some_and(|bs| bs.iter().any(|b| matches!(str_at(b, "type"), Some("tool_use" | "tool_result"))));
                if holds_tools {
                    c.conv.gaps.push(format!("line {}: a `{ty}` line holding tool activity was not read", n + 1));
                }
            }
        }
    }

    /// The session's conversations, their ids made from `id`.
    pub fn finish(mut self, id: &str) -> Vec<Conversation> {
        // Endings, ids, and which conversations to give.
        let stream = self.stream;
        let mut keys: Vec<(String, usize)> = self.runs.into_iter().collect();
        keys.sort_by_key(|(_, k)| *k);
        for (key, k) in &keys {
            if let Some(c) = self.convs.get_mut(*k)
                && stream
                && c.end.is_none()
                && let Some(mut e) = self.notified.remove(key)
            {
                e.text = self.agent_answers.remove(key);
                c.end = Some(e);
            }
        }
        if let Some(main) = self.convs.first_mut() {
            if stream && let Some(r) = self.result {
                main.end = Some(r);
            }
            main.conv.tools = self.main_tools;
            if self.main_model.is_some() {
                main.conv.model = self.main_model;
            }
        }
        let kept: Vec<Conv> = self
            .convs
            .into_iter()
            .enumerate()
            .filter(|(k, c)| !c.conv.items.is_empty() || c.end.is_some() || (*k == 0 && stream))
            .map(|(_, c)| c)
            .collect();
        let several = kept.len() > 1;
        let mut out = Vec::with_capacity(kept.len().max(1));
        for (i, mut c) in kept.into_iter().enumerate() {
            c.conv.id = if several { format!("{id}#{}", i + 1) } else { id.to_owned() };
            c.conv.provider = Some("anthropic".to_owned());
            c.conv.ending = c.end.take().or_else(|| stop_ending(&c));
            out.push(c.conv);
        }
        if out.is_empty() {
            let mut conv = Conversation::new(id.to_owned(), FORMAT);
            conv.provider = Some("anthropic".to_owned());
            out.push(conv);
        }
        out
    }
}

/// One `assistant` line: a block of a model call, or Claude Code's own synthetic message.
fn assistant(c: &mut Conv, line: &Value, n: usize) {
    let Some(m) = line.get("message") else { return };
    let content = m.get("content").unwrap_or(&Value::Null);
    let model = str_at(m, "model");
    if model == Some("<synthetic>") || line.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true) {
        synthetic(c, line, &text_of(content));
        return;
    }
    let key = str_at(m, "id")
        .or_else(|| str_at(line, "requestId"))
        .or_else(|| str_at(line, "uuid"))
        .map_or_else(|| format!("line {n}"), str::to_owned);
    if c.conv.model.is_none() {
        c.conv.model = model.map(str::to_owned);
    }
    let item = match c.calls.get(&key) {
        Some(call) => call.item,
        None => {
            c.conv.items.push(Item::model(None, Vec::new()));
            let item = c.conv.items.len() - 1;
            c.calls.insert(key.clone(), Call { item, out: None, stop: None });
            c.end = None;
            item
        }
    };
    c.last_call = Some(key.clone());
    let mut texts: Vec<String> = Vec::new();
    let mut new_calls: Vec<CallItem> = Vec::new();
    let blocks: &[Value] = match content {
        Value::Array(bs) => bs,
        Value::String(s) => {
            texts.push(s.clone());
            &[]
        }
        _ => {
            c.conv.gaps.push(format!("line {}: an assistant message without a content list", n + 1));
            &[]
        }
    };
    for b in blocks {
        match str_at(b, "type") {
            Some("text") => texts.extend(str_at(b, "text").filter(|t| !t.trim().is_empty()).map(str::to_owned)),
            Some("tool_use") => {
                let tid = str_at(b, "id");
                if let Some(t) = tid
                    && !c.tool_ids.insert(t.to_owned())
                {
                    continue;
                }
                let Some(name) = str_at(b, "name").filter(|s| !s.is_empty()) else {
                    c.conv.gaps.push(format!("line {}: a `tool_use` block without a `name`", n + 1));
                    continue;
                };
                let args = match b.get("input") {
                    Some(Value::String(s)) => parse_args(s),
                    Some(input) => Args::new(input),
                    None => Args::new(&Value::Object(Default::default())),
                };
                new_calls.push(CallItem { id: tid.map(str::to_owned), name: name.to_owned(), args });
            }
            _ => {}
        }
    }
    let usage = m.get("usage");
    let out = usage.and_then(|u| u.get("output_tokens")).and_then(Value::as_u64);
    let Some(call) = c.calls.get_mut(&key) else { return };
    if let Some(s) = str_at(m, "stop_reason") {
        call.stop = Some(s.to_owned());
    }
    let take_usage = out.is_some() && out >= call.out;
    if take_usage {
        call.out = out;
    }
    if let Some(Item::Model { text, calls, tokens_in, tokens_out, .. }) = c.conv.items.get_mut(item) {
        calls.extend(new_calls);
        if !texts.is_empty() {
            let joined = texts.join("\n");
            *text = Some(match text.take() {
                Some(before) => format!("{before}\n{joined}"),
                None => joined,
            });
        }
        if take_usage && let Some(u) = usage {
            *tokens_in = u.get("input_tokens").and_then(Value::as_u64).unwrap_or(0);
            *tokens_out = out.unwrap_or(0);
        }
    }
}

/// A `<synthetic>` assistant line: an API error is a failed request, the others no call.
fn synthetic(c: &mut Conv, line: &Value, text: &str) {
    if let Some(why) = interruption(text) {
        c.end = Some(Ending::new(FinalOutcome::Interrupted, why));
        return;
    }
    let kind = str_at(line, "error");
    let api = line.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true)
        || kind.is_some()
        || text.trim_start().starts_with("API Error");
    if !api {
        return;
    }
    if kind == Some("max_output_tokens") || text.contains("output token maximum") {
        // The call that ran out answered (it is its own line); this is Claude Code's note.
        c.end = Some(Ending::new(FinalOutcome::CutOff, "max_output_tokens"));
        return;
    }
    if text.contains("Request was aborted") {
        c.end = Some(Ending::new(FinalOutcome::Interrupted, "Request was aborted"));
        return;
    }
    let status = api_status(text, line);
    c.conv.items.push(Item::Model {
        text: Some(text.to_owned()),
        calls: Vec::new(),
        tokens_in: 0,
        tokens_out: 0,
        status,
    });
    c.last_call = None;
    let reason = kind.map_or_else(|| "api_error".to_owned(), |k| format!("api_error: {k}"));
    c.end = Some(Ending { text: Some(text.to_owned()), ..Ending::new(FinalOutcome::Error, reason) });
}

/// A user's text: a prompt, an interruption, or a local command left out.
fn user_text(c: &mut Conv, text: &str) {
    if let Some(why) = interruption(text) {
        c.end = Some(Ending::new(FinalOutcome::Interrupted, why));
    } else if !local_command(text) && !text.trim().is_empty() {
        c.conv.items.push(Item::User(text.to_owned()));
    }
}

/// A `tool_result` block: a result, or a call that never ran. Gives its id and text.
fn tool_result<'a>(c: &mut Conv, b: &'a Value, denial: Option<&str>) -> Option<(&'a str, String)> {
    let tid = str_at(b, "tool_use_id");
    if let Some(t) = tid
        && !c.result_ids.insert(t.to_owned())
    {
        return None;
    }
    let content = text_of(b.get("content").unwrap_or(&Value::Null));
    let id = tid.map(str::to_owned);
    let t = content.trim_start();
    // A call the user rejected never ran: cancelled, and the conversation's ending unless a
    // later model call undoes it.
    if REJECTED.iter().any(|r| t.starts_with(r)) || matches!(denial, Some("user-rejected" | "interrupted")) {
        let why = denial.map_or_else(|| "user rejected tool use".to_owned(), |d| format!("toolDenialKind: {d}"));
        c.end = Some(Ending::new(FinalOutcome::Interrupted, why));
        let why =
            if denial.is_some() { "toolDenialKind: the user rejected it" } else { "the user rejected the tool use" };
        c.conv.items.push(Item::Cancelled { id, content, why });
        return None;
    }
    if let Some(why) = cancelled(&content, denial) {
        c.conv.items.push(Item::Cancelled { id, content, why });
        return None;
    }
    let flag = match b.get("is_error").and_then(Value::as_bool) {
        Some(true) => (true, "is_error: true"),
        Some(false) => (false, "is_error: false"),
        None => (false, "no is_error flag"),
    };
    if let Some(why) = interruption(content.trim_start()) {
        c.end = Some(Ending::new(FinalOutcome::Interrupted, why));
    }
    // The first text part: a subagent's answer without Claude Code's `agentId: …` note.
    let first = match b.get("content") {
        Some(Value::Array(parts)) => parts.iter().find_map(|p| str_at(p, "text")).unwrap_or_default().to_owned(),
        _ => content.clone(),
    };
    c.conv.items.push(Item::Result { id, name: None, content, flag: Some(flag) });
    tid.map(|t| (t, first))
}

/// The ending a stream-json `result` line gives.
fn result_ending(line: &Value) -> Ending {
    let subtype = str_at(line, "subtype").unwrap_or("result");
    let is_error = line.get("is_error").and_then(Value::as_bool) == Some(true);
    let reason = str_at(line, "terminal_reason").unwrap_or(subtype).to_owned();
    let text = str_at(line, "result").map(str::to_owned);
    let (outcome, reason) = match subtype {
        "success" if is_error => (FinalOutcome::Error, format!("{reason}, is_error: true")),
        "success" => (FinalOutcome::Answer, reason),
        "error_max_turns" | "error_max_budget_usd" => (FinalOutcome::CutOff, reason),
        _ => (FinalOutcome::Error, reason),
    };
    Ending { text, ..Ending::new(outcome, reason) }
}

/// A transcript's ending from its last model call's `stop_reason`, when that call is the last item.
fn stop_ending(c: &Conv) -> Option<Ending> {
    let call = c.calls.get(c.last_call.as_ref()?)?;
    if call.item + 1 != c.conv.items.len() {
        return None;
    }
    let Some(Item::Model { calls, status: 200, .. }) = c.conv.items.get(call.item) else { return None };
    match call.stop.as_deref()? {
        "end_turn" | "stop_sequence" if calls.is_empty() => Some(Ending::new(FinalOutcome::Answer, call.stop.clone()?)),
        "max_tokens" => Some(Ending::new(FinalOutcome::CutOff, "max_tokens")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::trace::import::conversation::{FailureRules, to_trace};
    use crate::trace::inspect::stats;

    fn lines(text: &str) -> Value {
        Value::Array(text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect())
    }

    /// (model calls, tool calls, failures, cancelled, ended, reason) of a conversation.
    type Counts = (u64, u64, u64, u64, &'static str, Option<String>);

    fn counts(v: &Value) -> Vec<Counts> {
        conversations(v, "t")
            .unwrap()
            .into_iter()
            .map(|c| {
                let t = to_trace(c, &FailureRules::default());
                let s = stats(&t);
                (s.model_calls, s.tool_calls, s.tool_failures, s.cancelled, s.ended, s.ended_reason.map(str::to_owned))
            })
            .collect()
    }

    const HEAD: &str = r#""sessionId":"s","isSidechain":false"#;

    fn asst(uuid: &str, id: &str, block: &str, out: u64, stop: &str) -> String {
        format!(
            r#"{{"type":"assistant",{HEAD},"uuid":"{uuid}","requestId":"r-{id}","message":{{"id":"{id}","role":"assistant","model":"claude-x","content":[{block}],"stop_reason":{stop},"usage":{{"input_tokens":10,"output_tokens":{out}}}}}}}"#
        )
    }

    fn user(uuid: &str, content: &str) -> String {
        format!(r#"{{"type":"user",{HEAD},"uuid":"{uuid}","message":{{"role":"user","content":{content}}}}}"#)
    }

    #[test]
    fn one_call_per_message_id_usage_taken_once() {
        // Three block lines of msg_1 (text + two tool_use), usage repeated: one call, 2 tool calls,
        // tokens from the line with the largest output_tokens (30), not summed (10+30+30).
        let text = [
            user("u0", r#""go""#),
            asst("a1", "msg_1", r#"{"type":"text","text":"two at once"}"#, 10, "null"),
            asst("a2", "msg_1", r#"{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}"#, 30, "null"),
            user("u1", r#"[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]"#),
            asst(
                "a3",
                "msg_1",
                r#"{"type":"tool_use","id":"t2","name":"Read","input":{"file_path":"x"}}"#,
                30,
                r#""tool_use""#,
            ),
            user("u2", r#"[{"type":"tool_result","tool_use_id":"t2","content":"Exit code 1","is_error":true}]"#),
            asst("a3", "msg_1", r#"{"type":"tool_use","id":"t9","name":"Read","input":{}}"#, 99, "null"),
            asst("a4", "msg_2", r#"{"type":"text","text":"done"}"#, 5, r#""end_turn""#),
        ]
        .join("\n");
        let v = lines(&text);
        let convs = conversations(&v, "t").unwrap();
        assert_eq!(convs.len(), 1);
        match &convs[0].items[1] {
            Item::Model { text, calls, tokens_in, tokens_out, status } => {
                assert_eq!(
                    (text.as_deref(), calls.len(), *tokens_in, *tokens_out, *status),
                    (Some("two at once"), 2, 10, 30, 200)
                );
            }
            other => panic!("{other:?}"),
        }
        // The repeated uuid a3 is read once.
        assert_eq!(counts(&v), [(2, 2, 1, 0, "answer", Some("end_turn".into()))]);
    }

    #[test]
    fn synthetic_api_error_is_a_failed_request_and_the_ending() {
        let api = format!(
            r#"{{"type":"assistant",{HEAD},"uuid":"a9","isApiErrorMessage":true,"error":"rate_limit","message":{{"id":"f8a1-uuid","role":"assistant","model":"<synthetic>","content":[{{"type":"text","text":"API Error: 429 slow down"}}],"usage":{{"input_tokens":0,"output_tokens":0}}}}}}"#
        );
        let note = format!(
            r#"{{"type":"assistant",{HEAD},"uuid":"a8","message":{{"id":"x","role":"assistant","model":"<synthetic>","content":[{{"type":"text","text":"No response requested."}}]}}}}"#
        );
        let v = lines(&[user("u0", r#""hi""#), note.clone(), api.clone()].join("\n"));
        let convs = conversations(&v, "t").unwrap();
        assert!(matches!(convs[0].items[1], Item::Model { status: 429, .. }), "{:?}", convs[0].items);
        assert_eq!(counts(&v), [(1, 0, 0, 0, "error", Some("api_error: rate_limit".into()))]);
        // A call after the error: the conversation went on.
        let v = lines(
            &[user("u0", r#""hi""#), api, asst("a1", "msg_1", r#"{"type":"text","text":"ok"}"#, 3, "null")].join("\n"),
        );
        assert_eq!(counts(&v), [(2, 0, 0, 0, "answer", None)]);
        // Status from the text, else the kind, else 500.
        assert_eq!(api_status("API Error: 400 {}", &json!({})), 400);
        assert_eq!(api_status("API Error: Credit balance is too low", &json!({"error": "billing_error"})), 402);
        assert_eq!(api_status("API Error: x", &json!({"apiErrorStatus": 529})), 529);
        assert_eq!(api_status("Prompt is too long", &json!({})), 500);
    }

    #[test]
    fn sibling_cancellation_rejection_and_interruption() {
        let call = |u: &str, t: &str| {
            asst(u, "msg_1", &format!(r#"{{"type":"tool_use","id":"{t}","name":"Bash","input":{{}}}}"#), 5, "null")
        };
        let cancel = r#"[{"type":"tool_result","tool_use_id":"t2","is_error":true,"content":"<tool_use_error>Cancelled: parallel tool call Bash(ls /nope) errored</tool_use_error>"}]"#;
        let reject = r#"[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":"The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed."}]"#;
        let stop = r#"[{"type":"text","text":"[Request interrupted by user for tool use]"}]"#;
        let v = lines(
            &[
                user("u0", r#""go""#),
                call("a1", "t1"),
                call("a2", "t2"),
                user("u1", reject),
                user("u2", cancel),
                user("u3", stop),
            ]
            .join("\n"),
        );
        let convs = conversations(&v, "t").unwrap();
        assert!(matches!(&convs[0].items[3], Item::Cancelled { id: Some(i), .. } if i == "t2"), "{:?}", convs[0].items);
        // The rejected call never ran: cancelled like its sibling, not a failure; the ending is
        // interrupted.
        assert!(matches!(&convs[0].items[2], Item::Cancelled { id: Some(i), .. } if i == "t1"), "{:?}", convs[0].items);
        assert_eq!(counts(&v), [(1, 2, 0, 2, "interrupted", Some("Request interrupted by user for tool use".into()))]);
        // A rejection alone ends it too; toolDenialKind names it when present.
        let v = lines(&[user("u0", r#""go""#), call("a1", "t1"), user("u1", reject)].join("\n"));
        assert_eq!(counts(&v)[0].5.as_deref(), Some("user rejected tool use"));
        // A later model call undoes it.
        let v = lines(
            &[
                user("u0", r#""go""#),
                call("a1", "t1"),
                user("u1", reject),
                asst("a9", "msg_9", r#"{"type":"text","text":"ok"}"#, 1, r#""end_turn""#),
            ]
            .join("\n"),
        );
        assert_eq!(counts(&v)[0].4, "answer");
    }

    #[test]
    fn local_commands_meta_lines_and_metadata_are_left_out() {
        let meta = format!(
            r#"{{"type":"user",{HEAD},"uuid":"m","isMeta":true,"message":{{"role":"user","content":"Caveat: …"}}}}"#
        );
        let text = [
            r#"{"type":"summary","summary":"x","leafUuid":"a1"}"#.to_owned(),
            r#"{"type":"file-history-snapshot","messageId":"m","snapshot":{}}"#.to_owned(),
            meta,
            user("c1", r#""<command-name>/model</command-name>\n<command-message>model</command-message>""#),
            user("c2", r#""<local-command-stdout>Set model</local-command-stdout>""#),
            user("u0", r#""real prompt""#),
            format!(r#"{{"type":"system","subtype":"stop_hook_summary",{HEAD},"uuid":"s1"}}"#),
        ]
        .join("\n");
        let convs = conversations(&lines(&text), "t").unwrap();
        assert_eq!(convs[0].items, [Item::User("real prompt".into())]);
        assert!(convs[0].gaps.is_empty());
        // A line of an unknown type holding a tool call is a gap.
        let odd = r#"{"type":"mystery","message":{"content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]}}"#;
        let convs = conversations(&lines(&[user("u0", r#""x""#), odd.to_owned()].join("\n")), "t").unwrap();
        assert_eq!(convs[0].gaps.len(), 1, "{:?}", convs[0].gaps);
    }

    #[test]
    fn inline_sidechains_are_one_conversation_per_run() {
        let side = |u: &str, p: &str, body: &str| {
            format!(
                r#"{{"type":"user","sessionId":"s","isSidechain":true,"uuid":"{u}","parentUuid":{p},"message":{{"role":"user","content":{body}}}}}"#
            )
        };
        let side_asst = |u: &str, p: &str, id: &str| {
            format!(
                r#"{{"type":"assistant","sessionId":"s","isSidechain":true,"uuid":"{u}","parentUuid":"{p}","message":{{"id":"{id}","role":"assistant","content":[{{"type":"text","text":"sub"}}],"usage":{{"output_tokens":1}}}}}}"#
            )
        };
        let text = [
            user("u0", r#""main""#),
            asst("a1", "msg_1", r#"{"type":"tool_use","id":"t1","name":"Task","input":{}}"#, 1, "null"),
            side("s1", "null", r#""task one""#),
            side_asst("s2", "s1", "msg_s1"),
            side("r1", "null", r#""task two""#),
            side_asst("r2", "r1", "msg_r1"),
            side_asst("r3", "r2", "msg_r2"),
            user("u1", r#"[{"type":"tool_result","tool_use_id":"t1","content":"done"}]"#),
            asst("a2", "msg_2", r#"{"type":"text","text":"ok"}"#, 1, "null"),
        ]
        .join("\n");
        let v = lines(&text);
        let ids: Vec<String> = conversations(&v, "t").unwrap().into_iter().map(|c| c.id).collect();
        assert_eq!(ids, ["t#1", "t#2", "t#3"]);
        let calls: Vec<u64> = counts(&v).into_iter().map(|c| c.0).collect();
        assert_eq!(calls, [2, 1, 2]);
    }

    #[test]
    fn stream_json_result_lines_are_the_ending() {
        let init = r#"{"type":"system","subtype":"init","session_id":"s","model":"claude-x","tools":["Bash"]}"#;
        let a = r#"{"type":"assistant","session_id":"s","parent_tool_use_id":null,"uuid":"a1","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"hi"}],"usage":{"output_tokens":1}}}"#;
        let result = |sub: &str, err: bool, tr: &str| {
            format!(
                r#"{{"type":"result","subtype":"{sub}","is_error":{err},"terminal_reason":"{tr}","result":"r","session_id":"s"}}"#
            )
        };
        let ended = |r: String| counts(&lines(&[init, a, &r].join("\n"))).remove(0);
        assert_eq!(ended(result("success", false, "completed")).4, "answer");
        assert_eq!(ended(result("success", true, "completed")).5.as_deref(), Some("completed, is_error: true"));
        assert_eq!(ended(result("error_max_turns", true, "max_turns")).4, "cut_off");
        let e = ended(result("error_during_execution", true, "aborted_tools"));
        assert_eq!((e.4, e.5.as_deref()), ("error", Some("aborted_tools")));
        let no_reason = r#"{"type":"result","subtype":"error_max_turns","is_error":true}"#;
        assert_eq!(ended(no_reason.to_owned()).5.as_deref(), Some("error_max_turns"));
        let convs = conversations(&lines(&[init, a].join("\n")), "t").unwrap();
        assert_eq!((convs[0].model.as_deref(), convs[0].tools.len()), (Some("claude-x"), 1));
    }

    #[test]
    fn detection() {
        let transcript = lines(
            &[r#"{"type":"queue-operation","operation":"enqueue","sessionId":"s"}"#.to_owned(), user("u0", r#""x""#)]
                .join("\n"),
        );
        assert!(fits(&transcript).is_ok());
        assert!(fits(&lines(r#"{"type":"system","subtype":"init","session_id":"s"}"#)).is_ok());
        let codex = lines(r#"{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}"#);
        assert_eq!(fits(&codex).unwrap_err().at, "/0/type");
        let plain = json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]);
        assert_eq!(fits(&plain).unwrap_err().at, "/0/type");
        let no_session = json!([{"type": "user", "message": {"role": "user", "content": "hi"}}]);
        assert_eq!(fits(&no_session).unwrap_err().at, "/0/sessionId");
        assert!(fits(&json!({})).is_err() && fits(&json!([])).is_err());
        // A one-line file arrives as its line; a pointer into it has no line index.
        let line: Value = serde_json::from_str(&user("u0", r#""x""#)).unwrap();
        assert!(fits(&line).is_ok());
        assert_eq!(conversations(&line, "t").unwrap()[0].items, [Item::User("x".into())]);
        assert_eq!(fits(&json!({"type": "user", "message": {"role": "user"}})).unwrap_err().at, "/sessionId");
    }

    #[test]
    fn odd_input_does_not_panic() {
        for v in [
            json!([{"type": "user", "sessionId": "s", "uuid": "u", "message": {"role": "user", "content": 3}}]),
            json!([{"type": "user", "sessionId": "s", "uuid": "u", "message": {"role": "user", "content": [1, {"type": "tool_result"}]}},
                   {"type": "assistant", "sessionId": 1, "uuid": 2, "message": {"role": "assistant", "content": [{"type": "tool_use"}], "usage": {"output_tokens": "x"}}},
                   {"type": "assistant", "isSidechain": true, "message": null},
                   {"type": "result"}]),
            json!([{"type": "system", "subtype": "init", "session_id": "s", "tools": [1, null]},
                   {"type": "user", "parent_tool_use_id": "p", "message": {"content": [{"type": "text"}]}},
                   {"type": "system", "subtype": "task_notification", "tool_use_id": "p"}]),
        ] {
            let _ = conversations(&v, "t");
        }
        let v = json!([{"type": "user", "sessionId": "s", "uuid": "u", "message": {"role": "user", "content": [{"type": "tool_result"}]}},
                       {"type": "assistant", "sessionId": "s", "uuid": "v", "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]}}]);
        assert_eq!(conversations(&v, "t").unwrap()[0].gaps.len(), 1, "a tool_use without a name");
    }
}
