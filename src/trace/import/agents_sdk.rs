//! OpenAI Agents SDK (Python `openai-agents`) trace exports: `Trace.export()` records
//! (`"object": "trace"`) and `Span.export()` records (`"object": "trace.span"`, flat, linked by
//! `parent_id`). The SDK writes no file itself; this reads what users save: one item a JSONL
//! line (a custom `TracingProcessor`), JSONL of the `{"data": […]}` bodies `BackendSpanExporter`
//! posts (or one such body), a JSON array of items, `{"trace", "spans"}`, and wrapper lines
//! `{"event", "item" | "span" | "trace"}` (where a span comes twice: the start copy, with
//! `ended_at: null` and its data not yet filled, and the end copy).
//!
//! - **Conversations.** One per `trace_id`, in the order the traces first appear (items are
//!   written in end order and traces interleave, so position says nothing). Spans are
//!   de-duplicated by `id` (the record with `ended_at` set wins) and ordered by `started_at`.
//!   An agent-as-tool run (a `task`/`agent` subtree under a `function` span) is part of its
//!   trace's conversation.
//! - **Model calls.** One per `generation` span (Chat Completions, LiteLLM) or `response` span
//!   (Responses API). A generation's `output` gives the text and the tool calls' ids and
//!   arguments (a Chat message, or a Responses object when streamed); `usage` the tokens. A
//!   span `error` (`Error getting response`) is a failed call, its status from `Error code: N`
//!   in `error.data.error` (else 500); so is a generation whose input was recorded but whose
//!   `output` and `usage` are both null (0.2.x marked a failed Chat call no other way).
//!   Response spans carry no text or calls, and with sensitive data off neither do generations:
//!   the calls then come from the tool spans alone.
//! - **Tool calls.** One per `function` span (name, `input` the JSON arguments, `output` the
//!   result), made a call of the last model call before it under the same parent (else the
//!   last one before it), and paired with that call's own tool call of the same name for its id
//!   (else the span's id stands for both call and result). The result comes at the span's
//!   `ended_at`. Its `error` is the structural flag (`Error running tool (non-fatal)` — the
//!   model saw the failure —, `Error running tool` — fatal —, a rejection, `Invalid JSON
//!   provided`); `Tool execution cancelled` is a cancelled call. No error: the text rules
//!   decide (tools often return their failures as text).
//! - **Handoffs.** The model asks for one with a tool call `transfer_to_<agent>` and the SDK
//!   answers it with `{"assistant": "<agent>"}`, so a `handoff` span is a tool call of that name
//!   (the model's own call's name when the output shows it, else the SDK's default name) whose
//!   result succeeded, unless the span has an error other than `Multiple handoffs requested`.
//!   Tool calls the model made that no span ran (an unknown tool, a pending approval) are not
//!   counted.
//! - **Endings.** From span errors outside agent-as-tool subtrees: a tripped guardrail
//!   (`guardrail` span `triggered: true`, `Guardrail tripwire triggered`) is gave_up;
//!   `Max turns exceeded` cut_off; any other error on an agent or task/turn span (`Error in agent
//!   run`, `Tool not found`, …) an error; then a failed model call or a fatal `Error running
//!   tool` (0.2.x sets no agent error) an error; a span never ended, or no root span, cut_off
//!   (the process stopped before the run ended); the last model call's tool calls left unrun,
//!   cut_off. Else the last model call decides (an answer when it called no tool).

use std::collections::HashMap;

use serde_json::Value;

use super::ImportError;
use super::conversation::{CallItem, Conversation, Ending, Item, parse_args, text_of};
use super::kept::Keep;
use crate::trace::{Args, FinalOutcome, ToolDef};

const ITEM_EXPECTED: &str = "an Agents SDK export item: `\"object\": \"trace\"` or `\"object\": \"trace.span\"`";

/// Whether `v` is an Agents SDK export: items, batch bodies or wrapper lines (a list), or one
/// batch body or `{trace, spans}` document.
pub fn fits(v: &Value) -> Result<(), ImportError> {
    match v {
        Value::Array(lines) if !lines.is_empty() => {
            lines.iter().enumerate().try_for_each(|(i, l)| check_entry(l, &format!("/{i}")))
        }
        Value::Array(_) => Err(ImportError::at("", "an Agents SDK export: at least one trace or span")),
        Value::Object(_) => check_entry(v, ""),
        _ => Err(ImportError::at("", "an Agents SDK export: JSONL of trace/span items or `{\"data\": […]}` bodies")),
    }
}

/// One line or document: an item, a `{"data": […]}` body, `{trace, spans}`, or a wrapper.
fn check_entry(v: &Value, at: &str) -> Result<(), ImportError> {
    if v.get("object").is_some() {
        return check_item(v, at);
    }
    let mut found = false;
    for key in ["data", "spans"] {
        if let Some(list) = v.get(key).and_then(Value::as_array) {
            if list.is_empty() {
                return Err(ImportError::at(format!("{at}/{key}"), "a non-empty list of trace/span items"));
            }
            for (i, item) in list.iter().enumerate() {
                check_item(item, &format!("{at}/{key}/{i}"))?;
            }
            found = true;
        }
    }
    for key in ["item", "span", "trace"] {
        if let Some(item) = v.get(key).filter(|i| i.is_object()) {
            check_item(item, &format!("{at}/{key}"))?;
            found = true;
        }
    }
    if found {
        Ok(())
    } else {
        Err(ImportError::at(
            format!("{at}/object"),
            "an Agents SDK trace or span (`object`: `trace` | `trace.span`), a `{\"data\": […]}` body, or an `{event, item}` line",
        ))
    }
}

fn check_item(v: &Value, at: &str) -> Result<(), ImportError> {
    let has_str = |k: &str| v.get(k).is_some_and(Value::is_string);
    match v.get("object").and_then(Value::as_str) {
        Some("trace") if has_str("id") => Ok(()),
        Some("trace") => Err(ImportError::at(format!("{at}/id"), "a trace's `id` string")),
        Some("trace.span") => {
            for key in ["id", "trace_id"] {
                if !has_str(key) {
                    return Err(ImportError::at(format!("{at}/{key}"), format!("a span's `{key}` string")));
                }
            }
            if v.pointer("/span_data/type").is_some_and(Value::is_string) {
                Ok(())
            } else {
                Err(ImportError::at(format!("{at}/span_data/type"), "a span's `span_data` with a `type`"))
            }
        }
        _ => Err(ImportError::at(format!("{at}/object"), ITEM_EXPECTED)),
    }
}

/// The items of a file that fits, in file order.
fn items<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Array(list) => list.iter().for_each(|x| items(x, out)),
        Value::Object(o) if o.contains_key("object") => out.push(v),
        Value::Object(o) => {
            for key in ["trace", "item", "span", "data", "spans"] {
                if let Some(x) = o.get(key) {
                    items(x, out);
                }
            }
        }
        _ => {}
    }
}

/// The ids of the traces one line of a JSONL export holds items of, in the order the whole
/// reading meets them (an item; a wrapper's `trace`, `item`, `span`; a batch body's `data`,
/// `spans`), read without building the line: the first reading of a large export, which only
/// sorts lines into traces. `None` when the line is not in that shape, or a string read has
/// escapes (the whole reading then says why, or reads what this does not).
pub fn line_traces<'a>(line: &'a str, out: &mut Vec<&'a str>) -> Option<()> {
    fn walk<'a>(e: IdEntry<'a>, out: &mut Vec<&'a str>) {
        if e.object.is_some() {
            out.extend(if e.object == Some("trace.span") { e.trace_id } else { e.id });
            return;
        }
        let wrapped = [e.trace, e.item, e.span].into_iter().flatten().map(|b| *b);
        for i in wrapped.chain([e.data, e.spans].into_iter().flatten().flatten()) {
            walk(i, out);
        }
    }
    walk(serde_json::from_str(line).ok()?, out);
    Some(())
}

/// One line of an export as its first reading sees it: an item's ids, or a wrapper's items.
#[derive(serde::Deserialize)]
struct IdEntry<'a> {
    object: Option<&'a str>,
    id: Option<&'a str>,
    trace_id: Option<&'a str>,
    #[serde(borrow)]
    trace: Option<Box<IdEntry<'a>>>,
    #[serde(borrow)]
    item: Option<Box<IdEntry<'a>>>,
    #[serde(borrow)]
    span: Option<Box<IdEntry<'a>>>,
    #[serde(borrow)]
    data: Option<Vec<IdEntry<'a>>>,
    #[serde(borrow)]
    spans: Option<Vec<IdEntry<'a>>>,
}

/// What the reading of a trace keeps of each line: every key `read_trace` reads, but of a
/// model call's `input` (the whole conversation so far, in every generation span) only
/// whether it was recorded.
pub static READ: Keep = Keep::Keys(&[
    ITEM_READ,
    &[
        ("item", Keep::Keys(&[ITEM_READ])),
        ("span", Keep::Keys(&[ITEM_READ])),
        ("trace", Keep::Keys(&[ITEM_READ])),
        ("data", Keep::Each(&Keep::Keys(&[ITEM_READ]))),
        ("spans", Keep::Each(&Keep::Keys(&[ITEM_READ]))),
    ],
]);

const ITEM_READ: &[(&str, Keep)] = &[
    ("object", Keep::All),
    ("id", Keep::All),
    ("trace_id", Keep::All),
    ("parent_id", Keep::All),
    ("started_at", Keep::All),
    ("ended_at", Keep::All),
    ("error", Keep::All),
    (
        "span_data",
        Keep::Keys(&[&[
            ("type", Keep::All),
            ("name", Keep::All),
            ("model", Keep::All),
            ("tools", Keep::All),
            ("input", Keep::Shallow),
            ("output", Keep::Each(&Keep::Keys(&[OUTPUT_PART, &[("output", Keep::Each(&Keep::Keys(&[OUTPUT_PART])))]]))),
            ("usage", Keep::All),
            ("to_agent", Keep::All),
            ("triggered", Keep::All),
            ("data", Keep::All),
        ]]),
    ),
];

/// What a model call's `output` keeps of each of its parts (a Chat message, a Responses item;
/// a streamed Responses object's own `output` list, one level down).
const OUTPUT_PART: &[(&str, Keep)] = &[
    ("type", Keep::All),
    ("call_id", Keep::All),
    ("name", Keep::All),
    ("arguments", Keep::All),
    ("content", Keep::All),
    ("refusal", Keep::All),
    ("tool_calls", Keep::All),
];

/// Whether one line of a JSONL export fits; `at` names it.
pub fn line_fits(v: &Value, at: &str) -> Result<(), ImportError> {
    check_entry(v, at)
}

/// The trace an item belongs to: a span's `trace_id`, a trace's own `id`.
pub fn trace_of(item: &Value) -> Option<&str> {
    let is_span = item.get("object").and_then(Value::as_str) == Some("trace.span");
    item.get(if is_span { "trace_id" } else { "id" }).and_then(Value::as_str)
}

/// The items of one line (or document), in order.
pub fn line_items(v: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    items(v, &mut out);
    out
}

/// The conversation of one trace from its items (spans and the trace record, any order).
pub fn trace_conversation(items: &[&Value], id: String) -> Conversation {
    let spans: Vec<&Value> =
        items.iter().copied().filter(|i| i.get("object").and_then(Value::as_str) == Some("trace.span")).collect();
    read_trace(&spans, id)
}

/// One trace per conversation, in the order the traces first appear.
pub fn conversations(v: &Value, id: &str) -> Result<Vec<Conversation>, ImportError> {
    fits(v)?;
    let mut all = Vec::new();
    items(v, &mut all);
    let mut traces: Vec<(&str, Vec<&Value>)> = Vec::new();
    for item in all {
        let is_span = item.get("object").and_then(Value::as_str) == Some("trace.span");
        let Some(tid) = trace_of(item) else { continue };
        let k = match traces.iter().position(|(t, _)| *t == tid) {
            Some(k) => k,
            None => {
                traces.push((tid, Vec::new()));
                traces.len() - 1
            }
        };
        if is_span && let Some((_, spans)) = traces.get_mut(k) {
            spans.push(item);
        }
    }
    let n = traces.len();
    Ok(traces
        .into_iter()
        .enumerate()
        .map(|(k, (_, spans))| read_trace(&spans, if n == 1 { id.to_owned() } else { format!("{id}#{}", k + 1) }))
        .collect())
}

/// One span, as read.
struct Span<'a> {
    id: &'a str,
    parent: Option<&'a str>,
    ty: &'a str,
    data: &'a Value,
    error: Option<&'a Value>,
    start: String,
    end: Option<String>,
}

impl<'a> Span<'a> {
    fn new(v: &'a Value) -> Span<'a> {
        let data = v.get("span_data").unwrap_or(&Value::Null);
        Span {
            id: v.get("id").and_then(Value::as_str).unwrap_or_default(),
            parent: v.get("parent_id").and_then(Value::as_str),
            ty: data.get("type").and_then(Value::as_str).unwrap_or_default(),
            data,
            error: v.get("error").filter(|e| !e.is_null()),
            start: time_key(v.get("started_at").and_then(Value::as_str).unwrap_or_default()),
            end: v.get("ended_at").and_then(Value::as_str).map(time_key),
        }
    }

    fn message(&self) -> Option<&'a str> {
        self.error.map(|e| e.get("message").and_then(Value::as_str).unwrap_or("error"))
    }

    fn str(&self, key: &str) -> Option<&'a str> {
        self.data.get(key).and_then(Value::as_str)
    }

    /// A task or turn span (`custom` with `data.sdk_span_type`), or an agent span.
    fn is_run(&self) -> bool {
        self.ty == "agent" || (self.ty == "custom" && self.data.pointer("/data/sdk_span_type").is_some())
    }
}

/// An ISO-8601 time that sorts as text: `YYYY-MM-DDTHH:MM:SS` and the fraction padded to 9
/// digits (Python's `isoformat` leaves the fraction out when it is 0). The SDK writes UTC.
fn time_key(s: &str) -> String {
    let Some(main) = s.get(..19) else { return s.to_owned() };
    let frac = s[19..].strip_prefix('.').unwrap_or("");
    let digits = &frac[..frac.bytes().take_while(u8::is_ascii_digit).count()];
    let mut key = String::with_capacity(29 + digits.len().saturating_sub(9));
    key.push_str(main);
    key.push('.');
    key.push_str(digits);
    key.extend(std::iter::repeat_n('0', 9usize.saturating_sub(digits.len())));
    key
}

/// A tool call the model's output shows: (id, name, arguments), and whether a span used it.
struct Offered {
    id: Option<String>,
    name: String,
    args: Option<String>,
    used: bool,
}

/// One model call being built.
struct Step<'a> {
    span: &'a Span<'a>,
    text: Option<String>,
    offered: Vec<Offered>,
    calls: Vec<CallItem>,
    status: u16,
}

fn read_trace(records: &[&Value], id: String) -> Conversation {
    let mut conv = Conversation::new(id, "agents-sdk");
    // De-duplicate by id: the record with `ended_at` set wins, else the later one.
    let mut kept: Vec<&Value> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for r in records {
        let rid = r.get("id").and_then(Value::as_str).unwrap_or_default();
        let ended = |x: &Value| x.get("ended_at").is_some_and(|e| !e.is_null());
        match at.get(rid) {
            Some(&i) => {
                if let Some(k) = kept.get_mut(i)
                    && (ended(r) || !ended(k))
                {
                    *k = r;
                }
            }
            None => {
                at.insert(rid, kept.len());
                kept.push(r);
            }
        }
    }
    let mut spans: Vec<Span> = kept.into_iter().map(Span::new).collect();
    spans.sort_by(|a, b| a.start.cmp(&b.start));

    conv.model = spans.iter().find(|s| s.ty == "generation").and_then(|s| s.str("model")).map(str::to_owned);
    conv.provider = if spans.iter().any(|s| s.ty == "generation") {
        Some("openai-chat".to_owned())
    } else if spans.iter().any(|s| s.ty == "response") {
        Some("openai-responses".to_owned())
    } else {
        None
    };
    for s in spans.iter().filter(|s| s.ty == "agent") {
        for name in s.data.get("tools").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !conv.tools.iter().any(|t| t.name == name) {
                conv.tools.push(ToolDef { name: name.to_owned(), description: None, parameters: None });
            }
        }
    }

    // Model calls, and each tool span made a call of one; results at their spans' ends.
    let mut steps: Vec<Step> = Vec::new();
    let mut last_under: HashMap<Option<&str>, usize> = HashMap::new();
    let mut results: Vec<(String, Item)> = Vec::new();
    for s in &spans {
        match s.ty {
            "generation" | "response" => {
                last_under.insert(s.parent, steps.len());
                steps.push(model_step(s));
            }
            "function" | "handoff" => {
                let Some(k) = last_under.get(&s.parent).copied().or(steps.len().checked_sub(1)) else {
                    conv.gaps.push(format!("a {} span ({}) comes before any model call", s.ty, s.id));
                    continue;
                };
                let Some(step) = steps.get_mut(k) else { continue };
                if let Some((end, item)) = tool_call(s, step, &mut conv.gaps) {
                    results.push((end, item));
                }
            }
            _ => {}
        }
    }

    let ending = ending(&spans, &steps);
    let mut events: Vec<(String, Item)> = Vec::with_capacity(steps.len() + results.len());
    for step in steps {
        let (tokens_in, tokens_out) = usage(step.span.data.get("usage"));
        let text = step.text.filter(|t| !t.trim().is_empty());
        events.push((
            step.span.start.clone(),
            Item::Model { text, calls: step.calls, tokens_in, tokens_out, status: step.status },
        ));
    }
    events.extend(results);
    events.sort_by(|a, b| a.0.cmp(&b.0));
    conv.items = events.into_iter().map(|(_, item)| item).collect();
    conv.ending = ending;
    conv
}

fn usage(u: Option<&Value>) -> (u64, u64) {
    let get = |k: &str| u.and_then(|u| u.get(k)).and_then(Value::as_u64).unwrap_or(0);
    (get("input_tokens"), get("output_tokens"))
}

/// A model span's text, the tool calls its output shows, and its status.
fn model_step<'a>(s: &'a Span<'a>) -> Step<'a> {
    let mut step = Step { span: s, text: None, offered: Vec::new(), calls: Vec::new(), status: 200 };
    let failed_silently = s.ty == "generation"
        && s.data.get("input").is_some_and(|i| !i.is_null())
        && s.data.get("output").is_some_and(Value::is_null)
        && s.data.get("usage").is_some_and(Value::is_null)
        && s.end.is_some();
    if s.error.is_some() || failed_silently {
        let detail = s.error.and_then(|e| e.pointer("/data/error")).and_then(Value::as_str).unwrap_or_default();
        step.status = error_code(detail).unwrap_or(500);
    }
    let outputs = s.data.get("output").and_then(Value::as_array).into_iter().flatten();
    let mut texts = Vec::new();
    for out in outputs {
        // A Chat message, or (streamed) a Responses object with its own `output` items.
        let parts: Vec<&Value> = match out.get("output").and_then(Value::as_array) {
            Some(list) => list.iter().collect(),
            None => vec![out],
        };
        for p in parts {
            match p.get("type").and_then(Value::as_str) {
                Some("function_call") => step.offered.push(Offered {
                    id: p.get("call_id").and_then(Value::as_str).map(str::to_owned),
                    name: p.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    args: p.get("arguments").and_then(Value::as_str).map(str::to_owned),
                    used: false,
                }),
                Some("message") | None => {
                    let content = p.get("content").filter(|c| !c.is_null()).or(p.get("refusal"));
                    let t = text_of(content.unwrap_or(&Value::Null));
                    if !t.trim().is_empty() {
                        texts.push(t);
                    }
                    for c in p.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                        step.offered.push(Offered {
                            id: c.get("id").and_then(Value::as_str).map(str::to_owned),
                            name: c.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                            args: c.pointer("/function/arguments").and_then(Value::as_str).map(str::to_owned),
                            used: false,
                        });
                    }
                }
                _ => {}
            }
        }
    }
    step.text = (!texts.is_empty()).then(|| texts.join("\n"));
    step
}

/// The HTTP status in the openai client's `Error code: 400 - …`.
fn error_code(text: &str) -> Option<u16> {
    let rest = &text[text.find("Error code: ")? + "Error code: ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|c| (400..600).contains(c))
}

/// The name the SDK gives a handoff's tool by default: `transfer_to_<agent>`, every character
/// other than a letter, digit or `_` made `_`, lower case.
fn handoff_tool_name(agent: &str) -> String {
    format!("transfer_to_{agent}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c.to_ascii_lowercase() } else { '_' })
        .collect()
}

/// Adds a function or handoff span's call to its model call; its result and when it came.
fn tool_call(s: &Span, step: &mut Step, gaps: &mut Vec<String>) -> Option<(String, Item)> {
    let (name, content, flag) = if s.ty == "handoff" {
        let to = s.str("to_agent").unwrap_or_default();
        let default = handoff_tool_name(to);
        let pick = step
            .offered
            .iter()
            .position(|o| !o.used && o.name == default)
            .or_else(|| step.offered.iter().position(|o| !o.used && o.name.starts_with("transfer_to_")));
        let name = pick.and_then(|k| step.offered.get(k)).map_or(default, |o| o.name.clone());
        let flag = match s.message() {
            None => None,
            Some("Multiple handoffs requested") => Some((false, "handoff span error: Multiple handoffs requested")),
            Some(_) => Some((true, "handoff span `error` set")),
        };
        (name, serde_json::json!({ "assistant": to }).to_string(), flag.or(Some((false, "handoff span"))))
    } else {
        let Some(name) = s.str("name").filter(|n| !n.is_empty()) else {
            gaps.push(format!("a function span ({}) has no tool name", s.id));
            return None;
        };
        let detail = s.error.and_then(|e| e.pointer("/data/error")).and_then(Value::as_str);
        let content = match (s.str("output"), s.message()) {
            (Some(out), _) => out.to_owned(),
            (None, Some(m)) => detail.map_or_else(|| m.to_owned(), |d| format!("{m}: {d}")),
            (None, None) => String::new(),
        };
        let rejected = detail.is_some_and(|d| d.contains("was manually rejected by user"));
        let flag = match s.message() {
            None => None,
            Some(_) if rejected => Some((true, "function span error: rejected by the user")),
            Some("Error running tool (non-fatal)") => {
                Some((true, "function span error: Error running tool (non-fatal)"))
            }
            Some("Error running tool") => Some((true, "function span error: Error running tool")),
            Some("Invalid JSON provided") => Some((true, "function span error: Invalid JSON provided")),
            Some("Tool execution rejected") => Some((true, "function span error: rejected by the user")),
            Some(_) => Some((true, "function span `error` set")),
        };
        (name.to_owned(), content, flag)
    };
    let offered = step.offered.iter_mut().find(|o| !o.used && o.name == name);
    let (call_id, offered_args) = match offered {
        Some(o) => {
            o.used = true;
            (o.id.clone(), o.args.clone())
        }
        None => (None, None),
    };
    let id = call_id.unwrap_or_else(|| s.id.to_owned());
    let args = match (s.ty, s.str("input").or(offered_args.as_deref())) {
        ("handoff", _) => parse_args(offered_args.as_deref().unwrap_or("{}")),
        (_, Some(a)) => parse_args(a),
        (_, None) => Args::new(&Value::Null),
    };
    step.calls.push(CallItem { id: Some(id.clone()), name: name.clone(), args });
    let end = s.end.clone()?;
    let item = if s.message() == Some("Tool execution cancelled") {
        Item::Cancelled { id: Some(id), content, why: "function span error: Tool execution cancelled" }
    } else {
        Item::Result { id: Some(id), name: Some(name), content, flag }
    };
    Some((end, item))
}

/// How the run ended, from span errors outside agent-as-tool subtrees.
fn ending(spans: &[Span], steps: &[Step]) -> Option<Ending> {
    let index: HashMap<&str, usize> = spans.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
    let in_tool = |s: &Span| {
        let mut parent = s.parent;
        for _ in 0..spans.len() {
            let Some(p) = parent.and_then(|p| index.get(p)).and_then(|&i| spans.get(i)) else { return false };
            if p.ty == "function" {
                return true;
            }
            parent = p.parent;
        }
        false
    };
    let outer: Vec<&Span> = spans.iter().filter(|s| !in_tool(s)).collect();
    let run_error = |m: &str| outer.iter().any(|s| s.is_run() && s.message() == Some(m));
    if outer.iter().any(|s| s.ty == "guardrail" && s.data.get("triggered") == Some(&Value::Bool(true)))
        || run_error("Guardrail tripwire triggered")
    {
        return Some(Ending::new(FinalOutcome::GaveUp, "Guardrail tripwire triggered"));
    }
    if run_error("Max turns exceeded") {
        return Some(Ending::new(FinalOutcome::CutOff, "Max turns exceeded"));
    }
    if let Some(m) = outer.iter().filter(|s| s.is_run()).find_map(|s| s.message()) {
        return Some(Ending::new(FinalOutcome::Error, m));
    }
    let last_outer = steps.iter().rev().find(|st| !in_tool(st.span));
    if let Some(st) = last_outer.filter(|st| st.status != 200) {
        return Some(Ending::new(
            FinalOutcome::Error,
            st.span.message().unwrap_or("generation span without output or usage"),
        ));
    }
    if outer.iter().any(|s| s.ty == "function" && s.message() == Some("Error running tool")) {
        return Some(Ending::new(FinalOutcome::Error, "Error running tool"));
    }
    if spans.iter().any(|s| s.end.is_none()) {
        return Some(Ending::new(FinalOutcome::CutOff, "a span never ended"));
    }
    if !spans.iter().any(|s| s.parent.is_none()) {
        return Some(Ending::new(FinalOutcome::CutOff, "no root span"));
    }
    if last_outer.is_some_and(|st| st.offered.iter().any(|o| !o.used)) {
        return Some(Ending::new(FinalOutcome::CutOff, "tool calls without a function span"));
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn span(id: &str, parent: Option<&str>, t: u32, data: Value, error: Value) -> Value {
        json!({"object": "trace.span", "id": id, "trace_id": "trace_a", "parent_id": parent,
            "started_at": format!("2025-01-01T00:00:{t:02}.000001+00:00"),
            "ended_at": format!("2025-01-01T00:00:{:02}+00:00", t + 1), "span_data": data, "error": error})
    }

    fn gen_calls(calls: &[(&str, &str)], text: Option<&str>) -> Value {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, name)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}}))
            .collect();
        json!({"type": "generation", "input": [], "model": "m", "usage": {"input_tokens": 3, "output_tokens": 2},
            "output": [{"role": "assistant", "content": text, "tool_calls": if calls.is_empty() { Value::Null } else { json!(calls) }}]})
    }

    fn calls_of(item: &Item) -> Vec<(Option<String>, String)> {
        match item {
            Item::Model { calls, .. } => calls.iter().map(|c| (c.id.clone(), c.name.clone())).collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn fits_every_layout_and_nothing_else() {
        let s = span("span_1", None, 1, json!({"type": "agent", "name": "A"}), Value::Null);
        let t = json!({"object": "trace", "id": "trace_a", "workflow_name": "w"});
        assert!(fits(&json!([t, s])).is_ok());
        assert!(fits(&json!({"data": [t, s]})).is_ok());
        assert!(fits(&json!([{"data": [t]}, {"data": [s]}])).is_ok());
        assert!(fits(&json!([{"event": "trace_start", "item": t}, {"event": "span_end", "span": s}])).is_ok());
        assert!(fits(&json!({"trace": t, "spans": [s]})).is_ok());
        let e = fits(&json!({"object": "list", "data": [{"id": "x"}]})).unwrap_err();
        assert_eq!(e.at, "/object");
        let e = fits(&json!({"data": [{"object": "chat.completion", "id": "x"}]})).unwrap_err();
        assert_eq!(e.at, "/data/0/object");
        let e = fits(&json!([t, {"role": "user", "content": "hi"}])).unwrap_err();
        assert_eq!(e.at, "/1/object");
        let e = fits(&json!([{"object": "trace.span", "id": "s", "span_data": {"type": "agent"}}])).unwrap_err();
        assert_eq!(e.at, "/0/trace_id");
    }

    #[test]
    fn times_sort_with_and_without_a_fraction() {
        assert!(time_key("2025-01-01T00:00:01+00:00") < time_key("2025-01-01T00:00:01.000001+00:00"));
        assert!(time_key("2025-01-01T00:00:01.9+00:00") > time_key("2025-01-01T00:00:01.000001+00:00"));
        assert_eq!(time_key("short"), "short");
    }

    /// A handoff is a `transfer_to_…` call that succeeded; function spans take the model's call
    /// ids by name; an error gives the flag; spans are ordered by start, not by line.
    #[test]
    fn handoffs_functions_and_their_flags() {
        let v = json!([
            span(
                "span_f2",
                Some("span_t2"),
                6,
                json!({"type": "function", "name": "b", "input": "{\"x\":1}", "output": "oops"}),
                json!({"message": "Error running tool (non-fatal)", "data": {"tool_name": "b", "error": "boom"}})
            ),
            span(
                "span_f1",
                Some("span_t2"),
                5,
                json!({"type": "function", "name": "a", "input": "{}", "output": "ok"}),
                Value::Null
            ),
            span(
                "span_g1",
                Some("span_t1"),
                1,
                gen_calls(&[("call_h", "transfer_to_weather_agent")], None),
                Value::Null
            ),
            span(
                "span_h",
                Some("span_t1"),
                2,
                json!({"type": "handoff", "from_agent": "T", "to_agent": "Weather agent"}),
                Value::Null
            ),
            span("span_g2", Some("span_t2"), 4, gen_calls(&[("call_a", "a"), ("call_b", "b")], None), Value::Null),
            span("span_g3", Some("span_t3"), 8, gen_calls(&[], Some("done")), Value::Null),
            span(
                "span_root",
                None,
                0,
                json!({"type": "custom", "name": "task", "data": {"sdk_span_type": "task"}}),
                Value::Null
            ),
        ]);
        let c = conversations(&v, "f").unwrap().remove(0);
        assert_eq!(c.id, "f");
        assert_eq!(c.items.len(), 6, "{:?}", c.items);
        assert_eq!(calls_of(&c.items[0]), [(Some("call_h".into()), "transfer_to_weather_agent".into())]);
        assert!(
            matches!(&c.items[1], Item::Result { content, flag: Some((false, _)), .. } if content == r#"{"assistant":"Weather agent"}"#)
        );
        assert_eq!(calls_of(&c.items[2]), [(Some("call_a".into()), "a".into()), (Some("call_b".into()), "b".into())]);
        assert!(matches!(&c.items[3], Item::Result { id: Some(id), flag: None, .. } if id == "call_a"));
        assert!(
            matches!(&c.items[4], Item::Result { id: Some(id), flag: Some((true, f)), .. } if id == "call_b" && f.contains("non-fatal"))
        );
        assert!(matches!(&c.items[5], Item::Model { text: Some(t), tokens_in: 3, .. } if t == "done"));
        assert!(c.ending.is_none(), "no error: the builder reads the answer");
        assert!(c.gaps.is_empty());
    }

    /// With sensitive data off there are no messages: calls come from the spans, ids from the
    /// spans, arguments unknown (null).
    #[test]
    fn redacted_spans_still_count() {
        let redacted = json!({"type": "generation", "input": null, "output": null, "usage": {"input_tokens": 1, "output_tokens": 1}});
        let v = json!([
            span("span_g", Some("span_a"), 1, redacted.clone(), Value::Null),
            span(
                "span_f",
                Some("span_a"),
                2,
                json!({"type": "function", "name": "a", "input": null, "output": null}),
                Value::Null
            ),
            span(
                "span_h",
                Some("span_a"),
                3,
                json!({"type": "handoff", "from_agent": "A", "to_agent": "B b"}),
                Value::Null
            ),
            span("span_g2", Some("span_b"), 5, redacted, Value::Null),
            span("span_a", None, 0, json!({"type": "agent", "name": "A"}), Value::Null),
        ]);
        let c = conversations(&v, "r").unwrap().remove(0);
        assert_eq!(
            calls_of(&c.items[0]),
            [(Some("span_f".into()), "a".into()), (Some("span_h".into()), "transfer_to_b_b".into())]
        );
        assert!(matches!(&c.items[0], Item::Model { status: 200, .. }), "redacted is not failed");
        assert!(c.ending.is_none());
    }

    #[test]
    fn endings_from_span_errors() {
        let agent = |err: Value| span("span_a", None, 0, json!({"type": "agent", "name": "A"}), err);
        let read = |v: Value| conversations(&v, "e").unwrap().remove(0);
        let g = span("span_g", Some("span_a"), 1, gen_calls(&[], Some("hi")), Value::Null);
        let c = read(json!([g, agent(json!({"message": "Max turns exceeded", "data": {"max_turns": 3}}))]));
        assert_eq!(c.ending, Some(Ending::new(FinalOutcome::CutOff, "Max turns exceeded")));
        let c = read(json!([g, agent(json!({"message": "Guardrail tripwire triggered", "data": {"guardrail": "x"}}))]));
        assert_eq!(c.ending.map(|e| e.outcome), Some(FinalOutcome::GaveUp));
        // A failed model call, with the status from the client's error text.
        let failed = span(
            "span_g",
            Some("span_a"),
            1,
            json!({"type": "response", "response_id": null}),
            json!({"message": "Error getting response", "data": {"error": "Error code: 429 - slow down"}}),
        );
        let c = read(json!([failed, agent(Value::Null)]));
        assert!(matches!(c.items[0], Item::Model { status: 429, .. }));
        assert_eq!(c.ending, Some(Ending::new(FinalOutcome::Error, "Error getting response")));
        // 0.2.x: no error anywhere, the input recorded but no output and no usage.
        let silent = span(
            "span_g",
            Some("span_a"),
            1,
            json!({"type": "generation", "input": [{"role": "user", "content": "x"}], "output": null, "usage": null}),
            Value::Null,
        );
        let c = read(json!([silent, agent(Value::Null)]));
        assert!(matches!(c.items[0], Item::Model { status: 500, .. }));
        assert_eq!(c.ending.map(|e| e.outcome), Some(FinalOutcome::Error));
        // 0.2.x: a fatal tool error and no agent error.
        let f = span(
            "span_f",
            Some("span_a"),
            2,
            json!({"type": "function", "name": "x", "input": "{}", "output": null}),
            json!({"message": "Error running tool", "data": {"error": "bad"}}),
        );
        let g = span("span_g", Some("span_a"), 1, gen_calls(&[("c1", "x")], None), Value::Null);
        let c = read(json!([g, f, agent(Value::Null)]));
        assert_eq!(c.ending, Some(Ending::new(FinalOutcome::Error, "Error running tool")));
        assert!(matches!(&c.items[1], Item::Result { content, .. } if content == "Error running tool: bad"));
        // A tool call no span ran, at the end: not an answer.
        let g = span("span_g", Some("span_a"), 1, gen_calls(&[("c1", "x")], None), Value::Null);
        let c = read(json!([g, agent(Value::Null)]));
        assert_eq!(calls_of(&c.items[0]), []);
        assert_eq!(c.ending.map(|e| e.outcome), Some(FinalOutcome::CutOff));
        // No root: cut off.
        let g = span("span_g", Some("span_a"), 1, gen_calls(&[], Some("hi")), Value::Null);
        assert_eq!(read(json!([g])).ending, Some(Ending::new(FinalOutcome::CutOff, "no root span")));
    }

    /// Wrapper lines give each span twice: the ended copy wins; traces become `{id}#k` in the
    /// order they first appear; an inner run's error under a function span ends nothing.
    #[test]
    fn duplicates_several_traces_and_nested_runs() {
        let g = span("span_g", Some("span_a"), 1, gen_calls(&[], Some("hi")), Value::Null);
        let mut start = g.clone();
        start["ended_at"] = Value::Null;
        start["span_data"]["output"] = Value::Null;
        let mut other = span("span_x", None, 0, json!({"type": "agent", "name": "B"}), Value::Null);
        other["trace_id"] = json!("trace_b");
        let inner_agent = span(
            "span_i",
            Some("span_f"),
            3,
            json!({"type": "agent", "name": "I"}),
            json!({"message": "Max turns exceeded"}),
        );
        let f = span(
            "span_f",
            Some("span_a"),
            2,
            json!({"type": "function", "name": "ask", "input": "{}", "output": "r"}),
            Value::Null,
        );
        let v = json!([
            {"event": "trace_start", "item": {"object": "trace", "id": "trace_b"}},
            {"event": "span_start", "item": start}, {"event": "span_end", "item": g},
            {"event": "span_end", "item": inner_agent}, {"event": "span_end", "item": f},
            {"event": "span_end", "item": other},
            {"event": "span_end", "item": span("span_a", None, 0, json!({"type": "agent", "name": "A"}), Value::Null)},
        ]);
        let cs = conversations(&v, "w").unwrap();
        assert_eq!(cs.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["w#1", "w#2"]);
        let c = &cs[1];
        assert!(matches!(&c.items[0], Item::Model { text: Some(t), .. } if t == "hi"));
        assert_eq!(calls_of(&c.items[0]), [(Some("span_f".into()), "ask".into())]);
        assert!(c.ending.is_none(), "{:?}", c.ending);
    }
}
