//! Inspect AI eval logs (`inspect eval … --log-format json|eval`). A `.json` log is one EvalLog
//! object (`version`, `status`, `eval {task, model, …}`, `plan`, `results`, `stats`,
//! `samples[]`, …); a `.eval` log is a ZIP of `header.json` (written at the end; a log still
//! running or crashed has only `_journal/start.json`) and one `samples/<id>_epoch_<n>.json` member
//! per sample, Zstandard (method 93, inspect-ai ≥ ~0.3.2xx) or DEFLATE (older). [`eval_zip`] reads
//! the header and the samples, every member bounded by the trace cap, into the `.json` layout.
//!
//! - **Conversations.** One per sample and epoch. Ids are `{stem}#{k}`, k from 1 in the order of
//!   the file's `samples` list; in a `.eval` log the samples are first put in the order Inspect
//!   itself reads them in (by epoch, then id, integer ids zero-padded: the `.json` writer's
//!   order). A log with one sample gives the stem alone.
//! - **Model calls.** One per `ModelEvent` (`"event": "model"`) in `sample.events` (legacy
//!   `sample.transcript.events`; events nested in a tool or subtask event's own `events` are read
//!   in place), with text and `tool_calls` from `output.choices[0].message` and usage from
//!   `output.usage` (`input_tokens` plus the cache reads and writes Inspect counts apart, and
//!   `output_tokens`). Calls inside a scorer span (a `span_begin` or `step` of type `scorer` or
//!   `scorers`) are the grader's, not the agent's, and are left out with their tools. A
//!   ModelEvent with `error` is a failed request (the `Error code: N` in it, else 500), except
//!   Inspect's `Cancelled by …` sentinels (a cancelled call, no request answered), which are not
//!   counted; one still `pending` is not counted either. A sample with no ModelEvent (logs
//!   written by hand or very old ones) is read from `sample.messages`: each assistant message
//!   is a model call, without usage.
//! - **Tool calls.** `tool_calls` entries `{id, function, arguments}` (`function` is the name,
//!   `arguments` an object).
//! - **Results and failures.** Each `ToolEvent` (`"event": "tool"`) is the result of the call
//!   with its `id`: the text of the `role: "tool"` message with that `tool_call_id` when
//!   `sample.messages` has one, else the event's own `result`. The structural flag is the
//!   message's (or event's) `error {type, message}` (legacy: the message's `tool_error` string);
//!   `error.type: "cancelled"` is a call cancelled before it ran. A ToolEvent with
//!   `failed: true` (the tool raised an unexpected exception, so there is no tool message) is a
//!   failed result. A tool message whose call has no ToolEvent is read from the message. A
//!   result whose call no model call made is a gap.
//! - **Endings.** `sample.error` → error (its message's first line as the reason);
//!   `sample.limit` → cut off, the limit's `type` as the reason (`operator`: interrupted);
//!   else an answer with `output.choices[0].stop_reason` as the reason. `success` is the
//!   scores' verdict when every score's `value` is one: `"C"`/`"I"` (Inspect's CORRECT /
//!   INCORRECT), `true`/`false`, or exactly 1/0 (as Inspect's `accuracy` metric reads them),
//!   all the same; any other value (partial, no answer, a dict, another number, scorers that
//!   disagree) or no score leaves it unknown.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;

use serde_json::{Map, Value};

use super::ImportError;
use super::conversation::{CallItem, Conversation, Ending, Item, tool_defs};
use crate::input::{CAP_ENV, Input};
use crate::trace::{Args, FinalOutcome};

/// Whether `v` is an Inspect AI eval log: `version` a positive integer, `eval` with `task` and
/// `model`, and `samples` or `status`.
pub fn fits(v: &Value) -> Result<(), ImportError> {
    let Some(o) = v.as_object() else {
        return Err(ImportError::at("", "an Inspect AI eval log: an object with `version`, `eval` and `samples`"));
    };
    if o.get("version").and_then(Value::as_u64).is_none_or(|n| n < 1) {
        return Err(ImportError::at("/version", "an Inspect AI eval log's `version`, an integer (2)"));
    }
    let Some(eval) = o.get("eval").and_then(Value::as_object) else {
        return Err(ImportError::at("/eval", "an Inspect AI eval log's `eval` object (the EvalSpec)"));
    };
    for key in ["task", "model"] {
        if !eval.get(key).is_some_and(Value::is_string) {
            return Err(ImportError::at(format!("/eval/{key}"), format!("the EvalSpec's `{key}`, a string")));
        }
    }
    match o.get("samples") {
        None if o.contains_key("status") => Ok(()),
        Some(Value::Array(_) | Value::Null) => Ok(()),
        _ => Err(ImportError::at("/samples", "an Inspect AI eval log's `samples` list")),
    }
}

/// One conversation per sample and epoch.
pub fn conversations(v: &Value, id: &str) -> Result<Vec<Conversation>, ImportError> {
    fits(v)?;
    let samples = v.get("samples").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let model = v.pointer("/eval/model").and_then(Value::as_str);
    let many = samples.len() > 1;
    samples
        .iter()
        .enumerate()
        .map(|(k, s)| {
            if !s.is_object() {
                return Err(ImportError::at(format!("/samples/{k}"), "a sample object"));
            }
            let id = if many { format!("{id}#{}", k + 1) } else { id.to_owned() };
            Ok(sample(s, id, model))
        })
        .collect()
}

/// The conversations of a `.eval` log (a ZIP): its header (`header.json`, else
/// `_journal/start.json`) and its `samples/*.json` members, read as one `.json` log. The members
/// read may hold at most the trace cap in all, checked against their declared sizes and again
/// while reading.
pub fn eval_zip(path: &Path, id: &str) -> Result<Vec<Conversation>, ImportError> {
    let zip_error =
        |e: &dyn std::fmt::Display| ImportError::at("", format!("an Inspect `.eval` log, a ZIP archive ({e})"));
    let mut budget = Input::Trace.cap_bytes();
    let file = std::fs::File::open(path).map_err(|e| zip_error(&e))?;
    if file.metadata().map_err(|e| zip_error(&e))?.len() > budget {
        return Err(ImportError::at("", too_large(budget)));
    }
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| zip_error(&e))?;
    // Each name's last member (a sample logged again replaces the first copy, as in Inspect).
    let mut last: HashMap<String, usize> = HashMap::new();
    for i in 0..zip.len() {
        let name = zip.by_index_raw(i).map_err(|e| zip_error(&e))?.name().map_err(|e| zip_error(&e))?.into_owned();
        last.insert(name, i);
    }
    let header_at = ["header.json", "_journal/start.json"].into_iter().find_map(|n| last.get(n).map(|i| (n, *i)));
    let Some((header_name, header_index)) = header_at else {
        return Err(ImportError::at("header.json", "an Inspect `.eval` log's `header.json` or `_journal/start.json`"));
    };
    let mut log = member(&mut zip, header_name, header_index, &mut budget)?;
    let mut names: Vec<(&String, usize)> =
        last.iter().filter(|(n, _)| n.starts_with("samples/") && n.ends_with(".json")).map(|(n, i)| (n, *i)).collect();
    names.sort_by_key(|(_, i)| *i);
    let mut samples = Vec::with_capacity(names.len());
    for (name, i) in names {
        samples.push((member(&mut zip, name, i, &mut budget)?, name.clone()));
    }
    if samples.is_empty() {
        return Err(ImportError::at("samples/", "at least one sample (`samples/<id>_epoch_<n>.json`)"));
    }
    samples.sort_by_cached_key(|(s, _)| order_key(s));
    let Some(obj) = log.as_object_mut() else {
        return Err(ImportError::at(header_name, "an EvalLog header object"));
    };
    let names: Vec<String> = samples.iter().map(|(_, n)| n.clone()).collect();
    obj.insert("samples".to_owned(), Value::Array(samples.into_iter().map(|(s, _)| s).collect()));
    let convs = conversations(&log, id).map_err(|e| {
        // Point into the member a sample came from, not into the joined log.
        let member = e.at.strip_prefix("/samples/").and_then(|rest| {
            let (k, inner) = rest.split_once('/').unwrap_or((rest, ""));
            k.parse::<usize>().ok().and_then(|k| names.get(k)).map(|n| format!("{n}:/{inner}"))
        });
        match member {
            Some(at) => ImportError { at, ..e },
            None => ImportError { at: format!("{header_name}:{}", e.at), ..e },
        }
    })?;
    if convs.iter().all(|c| c.items.is_empty()) {
        return Err(ImportError::at("samples/", "samples with `messages` or `events` (none reads as a model call)"));
    }
    Ok(convs)
}

fn too_large(cap: u64) -> String {
    format!("a `.eval` log of at most {} MiB unpacked, the cap for traces (set {CAP_ENV}=N to allow N MiB)", cap >> 20)
}

/// Member `index` (named `name`) parsed as JSON, its bytes taken from `budget`.
fn member<R: Read + std::io::Seek>(
    zip: &mut zip::ZipArchive<R>,
    name: &str,
    index: usize,
    budget: &mut u64,
) -> Result<Value, ImportError> {
    let fail = |e: &dyn std::fmt::Display| ImportError::at(name, format!("a readable ZIP member ({e})"));
    let f = zip.by_index(index).map_err(|e| fail(&e))?;
    if f.size() > *budget {
        return Err(ImportError::at(name, too_large(Input::Trace.cap_bytes())));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(f.size().min(1 << 24)).unwrap_or(0));
    f.take(*budget + 1).read_to_end(&mut bytes).map_err(|e| fail(&e))?;
    let n = bytes.len() as u64;
    if n > *budget {
        return Err(ImportError::at(name, too_large(Input::Trace.cap_bytes())));
    }
    *budget -= n;
    serde_json::from_slice(&bytes).map_err(|e| ImportError::at(name, format!("JSON ({e})")))
}

/// Inspect's own sample order: epoch, then the id (an integer zero-padded to 20 digits).
fn order_key(s: &Value) -> (u64, String) {
    let id = match s.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => format!("{:0>20}", n.to_string()),
        _ => String::new(),
    };
    (s.get("epoch").and_then(Value::as_u64).unwrap_or(0), id)
}

/// The attachments a sample's strings may point to (`attachment://<hash>`).
struct Attachments<'a>(Vec<&'a Map<String, Value>>);

impl Attachments<'_> {
    fn resolve<'s>(&'s self, s: &'s str) -> &'s str {
        let found = s.strip_prefix("attachment://").and_then(|h| self.0.iter().find_map(|m| m.get(h)?.as_str()));
        found.unwrap_or(s)
    }

    /// The text of a content value: a string, a content part (`{type: "text", text}`), or a
    /// list of them (reasoning, images and other parts are not text).
    fn text(&self, v: &Value) -> String {
        match v {
            Value::String(s) => self.resolve(s).to_owned(),
            Value::Array(parts) => {
                let texts: Vec<String> = parts
                    .iter()
                    .filter(|p| p.is_string() || p.get("text").is_some_and(Value::is_string))
                    .map(|p| self.text(p))
                    .collect();
                texts.join("\n")
            }
            Value::Object(o) => {
                o.get("text").and_then(Value::as_str).map(|t| self.resolve(t).to_owned()).unwrap_or_default()
            }
            Value::Null => String::new(),
            other => other.to_string(),
        }
    }
}

/// The conversation of one sample.
fn sample(s: &Value, id: String, model: Option<&str>) -> Conversation {
    let mut conv = Conversation::new(id, "inspect");
    conv.model = model.map(str::to_owned);
    let att = Attachments(
        [s.get("attachments"), s.pointer("/transcript/content")]
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
            .collect(),
    );
    let events = s.get("events").or_else(|| s.pointer("/transcript/events")).and_then(Value::as_array);
    let mut flat = Vec::new();
    flatten(events.map(Vec::as_slice).unwrap_or_default(), &mut flat);
    let agent = agent_events(&flat);
    let messages = s.get("messages").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut reading = Reading {
        att: &att,
        sample: s,
        items: Vec::new(),
        gaps: Vec::new(),
        calls: HashSet::new(),
        orphaned: HashSet::new(),
    };
    if agent.iter().any(|e| kind(e) == "model") {
        reading.events(&agent, messages, &mut conv.tools);
    } else {
        reading.messages(messages);
    }
    conv.items = reading.items;
    conv.gaps = reading.gaps;
    conv.ending = ending(s, &att);
    conv
}

fn kind(e: &Value) -> &str {
    e.get("event").and_then(Value::as_str).unwrap_or_default()
}

/// The events in order, each tool or subtask event's nested `events` (logs before ~0.3.6x)
/// before the event itself: they ran while it did.
fn flatten<'a>(events: &'a [Value], out: &mut Vec<&'a Value>) {
    for e in events {
        if let Some(inner) = e.get("events").and_then(Value::as_array) {
            flatten(inner, out);
        }
        out.push(e);
    }
}

/// The events outside scorer spans (`span_begin` of type `scorer`/`scorers` and their
/// descendants; `step` begin/end of type `scorer` in logs before spans).
fn agent_events<'a>(events: &[&'a Value]) -> Vec<&'a Value> {
    let mut scoring: HashSet<&str> = HashSet::new();
    let mut in_step = false;
    let mut out = Vec::with_capacity(events.len());
    for e in events {
        let ty = e.get("type").and_then(Value::as_str);
        let scorer_type = matches!(ty, Some("scorer" | "scorers"));
        match kind(e) {
            "span_begin" => {
                let parent = e.get("parent_id").and_then(Value::as_str).is_some_and(|p| scoring.contains(p));
                if let Some(id) = e.get("id").and_then(Value::as_str)
                    && (scorer_type || parent)
                {
                    scoring.insert(id);
                }
            }
            "step" if scorer_type => in_step = e.get("action").and_then(Value::as_str) == Some("begin"),
            _ => {}
        }
        let in_span = e.get("span_id").and_then(Value::as_str).is_some_and(|s| scoring.contains(s));
        if !in_span && !in_step {
            out.push(*e);
        }
    }
    out
}

struct Reading<'a> {
    att: &'a Attachments<'a>,
    sample: &'a Value,
    items: Vec<Item>,
    gaps: Vec<String>,
    /// The ids of the tool calls read so far.
    calls: HashSet<String>,
    /// The ids of results already listed as answering no call.
    orphaned: HashSet<String>,
}

impl Reading<'_> {
    /// The tool calls of an assistant message.
    fn calls(&mut self, message: &Value) -> Vec<CallItem> {
        let list = message.get("tool_calls").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        list.iter()
            .map(|c| {
                let id = c.get("id").and_then(Value::as_str).map(str::to_owned);
                if let Some(id) = &id {
                    self.calls.insert(id.clone());
                }
                CallItem {
                    id,
                    name: c.get("function").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    args: Args::new(c.get("arguments").unwrap_or(&Value::Null)),
                }
            })
            .collect()
    }

    /// Model calls from ModelEvents, results from ToolEvents and the tool messages.
    fn events(&mut self, events: &[&Value], messages: &[Value], tools: &mut Vec<crate::trace::ToolDef>) {
        let by_call: HashMap<&str, &Value> = messages
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
            .filter_map(|m| Some((m.get("tool_call_id")?.as_str()?, m)))
            .collect();
        let with_event: HashSet<&str> =
            events.iter().filter(|e| kind(e) == "tool").filter_map(|e| e.get("id")?.as_str()).collect();
        let mut answered: HashSet<String> = HashSet::new();
        // Calls made and not yet answered, in order.
        let mut waiting: Vec<String> = Vec::new();
        for e in events {
            match kind(e) {
                "model" => {
                    self.flush(&mut waiting, &with_event, &by_call, &mut answered);
                    if tools.is_empty() {
                        *tools = tool_defs(e.get("tools"), "parameters");
                    }
                    if let Some(item) = self.model_event(e) {
                        if let Item::Model { calls, .. } = &item {
                            waiting.extend(calls.iter().filter_map(|c| c.id.clone()));
                        }
                        self.items.push(item);
                    }
                }
                "tool" => {
                    let Some(id) = e.get("id").and_then(Value::as_str) else {
                        self.gaps.push("a ToolEvent without an `id`: its result could not be paired".to_owned());
                        continue;
                    };
                    let running = e.get("pending").and_then(Value::as_bool) == Some(true) && e.get("result").is_none();
                    if running || answered.contains(id) {
                        continue;
                    }
                    self.result(id, by_call.get(id).copied(), Some(e));
                    answered.insert(id.to_owned());
                    waiting.retain(|w| w != id);
                }
                _ => {}
            }
        }
        self.flush(&mut waiting, &with_event, &by_call, &mut answered);
        let orphans: Vec<&str> = by_call.keys().filter(|k| !self.calls.contains(**k)).copied().collect();
        self.orphans(orphans);
    }

    /// Results from the tool messages of waiting calls that have no ToolEvent.
    fn flush(
        &mut self,
        waiting: &mut Vec<String>,
        with_event: &HashSet<&str>,
        by_call: &HashMap<&str, &Value>,
        answered: &mut HashSet<String>,
    ) {
        for id in std::mem::take(waiting) {
            match by_call.get(id.as_str()) {
                Some(m) if !with_event.contains(id.as_str()) => {
                    self.result(&id, Some(m), None);
                    answered.insert(id);
                }
                _ => waiting.push(id),
            }
        }
    }

    fn orphans(&mut self, mut ids: Vec<&str>) {
        ids.retain(|id| self.orphaned.insert((*id).to_owned()));
        if ids.is_empty() {
            return;
        }
        ids.sort_unstable();
        let shown: Vec<&str> = ids.iter().take(5).copied().collect();
        let more = if ids.len() > 5 { ", …" } else { "" };
        self.gaps.push(format!(
            "{} tool result(s) answer no tool call in the log (tool_call_id {}{more}): left out",
            ids.len(),
            shown.join(", ")
        ));
    }

    /// One ModelEvent's model call; `None` for a call cancelled or still pending.
    fn model_event(&mut self, e: &Value) -> Option<Item> {
        let output = e.get("output").filter(|o| o.is_object());
        let message = output.and_then(|o| o.pointer("/choices/0/message"));
        let error = e
            .get("error")
            .and_then(Value::as_str)
            .or_else(|| output.filter(|_| message.is_none()).and_then(|o| o.get("error")).and_then(Value::as_str));
        if let Some(err) = error {
            if err.starts_with("Cancelled by") {
                return None;
            }
            return Some(Item::Model {
                text: None,
                calls: Vec::new(),
                tokens_in: 0,
                tokens_out: 0,
                status: status_of(err),
            });
        }
        if output.is_none() && e.get("pending").and_then(Value::as_bool) == Some(true) {
            return None;
        }
        let (text, calls) = match message {
            Some(m) => (self.att.text(m.get("content").unwrap_or(&Value::Null)), self.calls(m)),
            None => {
                (output.and_then(|o| o.get("completion")).map(|c| self.att.text(c)).unwrap_or_default(), Vec::new())
            }
        };
        let mut item = Item::model(Some(text), calls);
        if let (Item::Model { tokens_in, tokens_out, .. }, Some(u)) = (&mut item, output.and_then(|o| o.get("usage"))) {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            *tokens_in = n("input_tokens") + n("input_tokens_cache_read") + n("input_tokens_cache_write");
            *tokens_out = n("output_tokens");
        }
        Some(item)
    }

    /// The result of call `id`: from its tool message when there is one, else from its
    /// ToolEvent.
    fn result(&mut self, id: &str, message: Option<&Value>, event: Option<&Value>) {
        if !self.calls.contains(id) {
            self.orphans(vec![id]);
            return;
        }
        let source = message.or(event).unwrap_or(&Value::Null);
        let content = match message {
            Some(m) => m.get("content"),
            None => event.and_then(|e| e.get("result")),
        };
        let mut content = self.att.text(content.unwrap_or(&Value::Null));
        let error =
            source.get("error").filter(|e| e.is_object()).or_else(|| event?.get("error").filter(|e| e.is_object()));
        let failed = event.and_then(|e| e.get("failed")).and_then(Value::as_bool) == Some(true);
        let flag = if let Some(err) = error {
            let ty = err.get("type").and_then(Value::as_str).unwrap_or_default();
            let text = err.get("message").map(|m| self.att.text(m)).unwrap_or_default();
            if !text.is_empty() && !content.contains(&text) {
                content = if content.trim().is_empty() { text } else { format!("{text}\n{content}") };
            }
            if ty == "cancelled" {
                self.items.push(Item::Cancelled { id: Some(id.to_owned()), content, why: "error.type: cancelled" });
                return;
            }
            Some((true, error_field(ty)))
        } else if let Some(legacy) = source.get("tool_error").and_then(Value::as_str) {
            if !content.contains(legacy) {
                content = if content.trim().is_empty() { legacy.to_owned() } else { format!("{legacy}\n{content}") };
            }
            Some((true, "tool_error set"))
        } else if failed {
            if content.trim().is_empty() {
                // The exception the tool raised ended the sample: its message is the result.
                content = self.sample.pointer("/error/message").and_then(Value::as_str).unwrap_or_default().to_owned();
            }
            Some((true, "ToolEvent failed: true"))
        } else {
            None
        };
        let name = source.get("function").and_then(Value::as_str).map(str::to_owned);
        self.items.push(Item::Result { id: Some(id.to_owned()), name, content, flag });
    }

    /// A sample without ModelEvents, from its messages.
    fn messages(&mut self, messages: &[Value]) {
        let mut orphans = Vec::new();
        for m in messages {
            match m.get("role").and_then(Value::as_str) {
                Some("user") => self.items.push(Item::User(self.att.text(m.get("content").unwrap_or(&Value::Null)))),
                Some("assistant") => {
                    let text = self.att.text(m.get("content").unwrap_or(&Value::Null));
                    let calls = self.calls(m);
                    self.items.push(Item::model(Some(text), calls));
                }
                Some("tool") => match m.get("tool_call_id").and_then(Value::as_str) {
                    Some(id) if self.calls.contains(id) => self.result(id, Some(m), None),
                    Some(id) => orphans.push(id),
                    None => orphans.push("(none)"),
                },
                _ => {}
            }
        }
        self.orphans(orphans);
    }
}

/// The evidence for a tool error of each ToolCallError type.
fn error_field(ty: &str) -> &'static str {
    match ty {
        "parsing" => "error.type: parsing",
        "timeout" => "error.type: timeout",
        "unicode_decode" => "error.type: unicode_decode",
        "permission" => "error.type: permission",
        "file_not_found" => "error.type: file_not_found",
        "is_a_directory" => "error.type: is_a_directory",
        "limit" => "error.type: limit",
        "output_limit" => "error.type: output_limit",
        "approval" => "error.type: approval",
        "sandbox_unavailable" => "error.type: sandbox_unavailable",
        "unknown" => "error.type: unknown (the tool raised ToolError)",
        _ => "`error` set",
    }
}

/// The HTTP status in a failed request's error (`Error code: 429 - …`, as the providers' SDKs
/// write it), else 500.
fn status_of(error: &str) -> u16 {
    let code = error.split_once("Error code: ").and_then(|(_, rest)| rest.get(..3)).and_then(|d| d.parse::<u16>().ok());
    code.filter(|c| (400..600).contains(c)).unwrap_or(500)
}

/// How a sample ended, from `error`, `limit` and `output`, with the scores' verdict.
fn ending(s: &Value, att: &Attachments) -> Option<Ending> {
    let mut ending = if let Some(err) = s.get("error").filter(|e| !e.is_null()) {
        let message = err.get("message").and_then(Value::as_str).or(err.as_str()).unwrap_or("error");
        let first = message.lines().find(|l| !l.trim().is_empty()).unwrap_or("error").trim();
        let reason: String = first.chars().take(200).collect();
        Ending::new(FinalOutcome::Error, reason)
    } else if let Some(limit) = s.get("limit").filter(|l| !l.is_null()) {
        let ty = limit.get("type").and_then(Value::as_str).or(limit.as_str()).unwrap_or("limit");
        let outcome = if ty == "operator" { FinalOutcome::Interrupted } else { FinalOutcome::CutOff };
        Ending::new(outcome, ty)
    } else if let Some(choice) = s.pointer("/output/choices/0") {
        let reason = choice.get("stop_reason").and_then(Value::as_str).unwrap_or("stop");
        let text = s.pointer("/output/completion").map(|c| att.text(c)).filter(|t| !t.is_empty());
        Ending { text, ..Ending::new(FinalOutcome::Answer, reason) }
    } else {
        return None;
    };
    ending.success = success(s);
    Some(ending)
}

/// The scores' verdict: every score's `value` a verdict, all the same.
fn success(s: &Value) -> Option<bool> {
    let values: Vec<&Value> = match (s.get("scores").and_then(Value::as_object), s.get("score")) {
        (Some(scores), _) => scores.values().filter_map(|sc| sc.get("value")).collect(),
        (None, Some(score)) => score.get("value").into_iter().collect(),
        (None, None) => Vec::new(),
    };
    let verdicts: Option<Vec<bool>> = values
        .iter()
        .map(|v| match v {
            Value::String(s) if s == "C" => Some(true),
            Value::String(s) if s == "I" => Some(false),
            Value::Bool(b) => Some(*b),
            Value::Number(n) if n.as_f64() == Some(1.0) => Some(true),
            Value::Number(n) if n.as_f64() == Some(0.0) => Some(false),
            _ => None,
        })
        .collect();
    let verdicts = verdicts?;
    let first = *verdicts.first()?;
    verdicts.iter().all(|v| *v == first).then_some(first)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn log(samples: Value) -> Value {
        json!({"version": 2, "status": "success", "eval": {"task": "t", "model": "m/x"}, "samples": samples})
    }

    fn model_event(calls: Value, usage: Value) -> Value {
        json!({"event": "model", "output": {"choices": [{"message": {"role": "assistant", "content": "c", "tool_calls": calls}, "stop_reason": "tool_calls"}], "usage": usage}})
    }

    /// (model calls, tool calls, results with their flags)
    fn shape(c: &Conversation) -> (usize, usize, Vec<Option<(bool, &'static str)>>) {
        let models = c.items.iter().filter(|i| matches!(i, Item::Model { .. })).count();
        let calls = c.items.iter().map(|i| if let Item::Model { calls, .. } = i { calls.len() } else { 0 }).sum();
        let flags =
            c.items.iter().filter_map(|i| if let Item::Result { flag, .. } = i { Some(*flag) } else { None }).collect();
        (models, calls, flags)
    }

    #[test]
    fn fits_eval_logs_and_nothing_else() {
        assert!(fits(&log(json!([]))).is_ok());
        let cancelled = json!({"version": 2, "status": "cancelled", "eval": {"task": "t", "model": "m"}});
        assert!(fits(&cancelled).is_ok());
        assert_eq!(fits(&json!([{"role": "user"}])).unwrap_err().at, "");
        assert_eq!(fits(&json!({"timestamp": "x", "info": {}, "simulations": []})).unwrap_err().at, "/version");
        assert_eq!(fits(&json!({"version": 2, "eval": {"task": "t"}, "samples": []})).unwrap_err().at, "/eval/model");
        assert_eq!(fits(&json!({"version": 2, "eval": {"task": "t", "model": "m"}})).unwrap_err().at, "/samples");
    }

    #[test]
    fn events_give_calls_usage_results_and_flags() {
        // Two ModelEvents (the first with a ToolEvent whose tool message carries an error, the
        // second answering), a scorer's ModelEvent in a scorer span, and a failed ToolEvent.
        let s = json!({
            "id": 1, "epoch": 1,
            "messages": [
                {"role": "tool", "tool_call_id": "a", "function": "f", "content": "", "error": {"type": "parsing", "message": "bad args"}}
            ],
            "events": [
                {"event": "span_begin", "id": "s1", "type": "solver"},
                model_event(json!([{"id": "a", "function": "f", "arguments": {"x": 1}}, {"id": "b", "function": "g", "arguments": {}}]),
                    json!({"input_tokens": 10, "output_tokens": 2, "input_tokens_cache_read": 5})),
                {"event": "tool", "id": "a", "function": "f", "result": "", "error": {"type": "parsing", "message": "bad args"}},
                {"event": "tool", "id": "b", "function": "g", "result": "", "failed": true},
                {"event": "span_begin", "id": "sc", "type": "scorers"},
                {"event": "span_begin", "id": "sc1", "parent_id": "sc", "type": "scorer"},
                {"event": "model", "span_id": "sc1", "output": {"choices": [{"message": {"content": "GRADE: C"}}]}}
            ],
            "error": {"message": "RuntimeError('boom')\ntraceback"}
        });
        let convs = conversations(&log(json!([s])), "f").unwrap();
        assert_eq!(convs.len(), 1);
        let c = &convs[0];
        assert_eq!(c.id, "f");
        assert_eq!(shape(c), (1, 2, vec![Some((true, "error.type: parsing")), Some((true, "ToolEvent failed: true"))]));
        assert!(matches!(c.items[0], Item::Model { tokens_in: 15, tokens_out: 2, .. }));
        assert!(matches!(&c.items[1], Item::Result { content, .. } if content == "bad args"));
        assert!(matches!(&c.items[2], Item::Result { content, .. } if content == "RuntimeError('boom')\ntraceback"));
        let e = c.ending.as_ref().unwrap();
        assert_eq!(
            (e.outcome, e.reason.as_deref(), e.success),
            (FinalOutcome::Error, Some("RuntimeError('boom')"), None)
        );
        assert!(c.gaps.is_empty());
    }

    #[test]
    fn a_result_from_its_event_when_the_message_is_missing_and_legacy_steps() {
        // Message limit: the last call's result is only in its ToolEvent. Steps of type scorer
        // (logs before spans) hide the grader's call; a nested event inside a tool event is read.
        let s = json!({
            "messages": [],
            "events": [
                model_event(json!([{"id": "a", "function": "f", "arguments": {}}]), json!(null)),
                {"event": "tool", "id": "a", "function": "f", "result": "Error: no such key", "events": [
                    {"event": "model", "output": {"choices": [{"message": {"content": "inner"}}]}}
                ]},
                {"event": "step", "action": "begin", "type": "scorer", "name": "g"},
                {"event": "model", "output": {"choices": [{"message": {"content": "GRADE: I"}}]}},
                {"event": "step", "action": "end", "type": "scorer", "name": "g"}
            ],
            "limit": {"type": "message", "limit": 10, "reason": "Message limit exceeded"},
            "scores": {"s": {"value": "I"}}
        });
        let c = &conversations(&log(json!([s])), "f").unwrap()[0];
        assert_eq!(shape(c), (2, 1, vec![None]), "the text rules judge a result without `error`");
        let e = c.ending.as_ref().unwrap();
        assert_eq!((e.outcome, e.reason.as_deref(), e.success), (FinalOutcome::CutOff, Some("message"), Some(false)));
    }

    #[test]
    fn messages_without_events_cancelled_calls_and_orphans() {
        let s = json!({
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "function": "f", "arguments": {}}, {"id": "b", "function": "f", "arguments": {}}]},
                {"role": "tool", "tool_call_id": "a", "content": "x", "tool_error": "old error"},
                {"role": "tool", "tool_call_id": "b", "content": "", "error": {"type": "cancelled", "message": "sibling failed"}},
                {"role": "tool", "tool_call_id": "zz", "content": "?"},
                {"role": "assistant", "content": "attachment://h1"}
            ],
            "attachments": {"h1": "done"},
            "output": {"choices": [{"message": {"content": "done"}, "stop_reason": "stop"}], "completion": "done"},
            "scores": {"a": {"value": 1.0}, "b": {"value": "C"}}
        });
        let convs = conversations(&log(json!([s.clone(), s])), "f").unwrap();
        assert_eq!(convs.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["f#1", "f#2"]);
        let c = &convs[0];
        assert_eq!(shape(c), (2, 2, vec![Some((true, "tool_error set"))]));
        assert!(matches!(&c.items[3], Item::Cancelled { id: Some(id), .. } if id == "b"));
        assert!(matches!(&c.items[4], Item::Model { text: Some(t), .. } if t == "done"));
        assert_eq!(c.gaps.len(), 1);
        assert!(c.gaps[0].contains("tool_call_id zz"), "{:?}", c.gaps);
        let e = c.ending.as_ref().unwrap();
        assert_eq!((e.outcome, e.reason.as_deref(), e.success), (FinalOutcome::Answer, Some("stop"), Some(true)));
    }

    #[test]
    fn failed_and_cancelled_model_requests() {
        let s = json!({"events": [
            {"event": "model", "error": "Error code: 429 - rate limited", "output": {"choices": []}},
            {"event": "model", "error": "Cancelled by limit", "output": {"choices": []}},
            {"event": "model", "error": "connection reset", "output": {"choices": []}}
        ]});
        let c = &conversations(&log(json!([s])), "f").unwrap()[0];
        let statuses: Vec<u16> = c
            .items
            .iter()
            .filter_map(|i| if let Item::Model { status, .. } = i { Some(*status) } else { None })
            .collect();
        assert_eq!(statuses, [429, 500]);
        assert_eq!(c.ending, None, "no error, limit or output: the builder infers it");
    }

    #[test]
    fn verdicts_only_when_unambiguous() {
        let v = |scores: Value| success(&json!({ "scores": scores }));
        assert_eq!(v(json!({"a": {"value": "C"}})), Some(true));
        assert_eq!(v(json!({"a": {"value": 0}})), Some(false));
        assert_eq!(v(json!({"a": {"value": "P"}})), None);
        assert_eq!(v(json!({"a": {"value": 0.5}})), None);
        assert_eq!(v(json!({"a": {"value": "C"}, "b": {"value": "I"}})), None);
        assert_eq!(v(json!({"a": {"value": {"x": 1}}})), None);
        assert_eq!(v(json!({})), None);
        assert_eq!(success(&json!({"score": {"value": "I"}})), Some(false));
    }

    #[test]
    fn samples_in_inspects_order() {
        let mut keys = [
            order_key(&json!({"id": 10, "epoch": 1})),
            order_key(&json!({"id": 9, "epoch": 1})),
            order_key(&json!({"id": 1, "epoch": 2})),
        ];
        keys.sort();
        assert_eq!(keys[0].1, format!("{:0>20}", 9));
        assert_eq!(keys[2], (2, format!("{:0>20}", 1)));
        assert_eq!(status_of("Error code: 503 - x"), 503);
        assert_eq!(status_of("Error code: 12"), 500);
    }
}
