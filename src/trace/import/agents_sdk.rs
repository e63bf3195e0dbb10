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

use std::borrow::Cow;

use rustc_hash::FxHashMap as HashMap;
use serde::Deserialize;
use serde_json::Value;

use super::ImportError;
use super::conversation::{CallItem, Conversation, Ending, Item, parse_args, text_of};
use super::lenient::{List, Loose, Obj};
use crate::trace::{Args, FinalOutcome, ToolDef};

const ITEM_EXPECTED: &str = "an Agents SDK export item: `\"object\": \"trace\"` or `\"object\": \"trace.span\"`";

/// Whether `v` is an Agents SDK export: items, batch bodies or wrapper lines (a list), or one
/// batch body or `{trace, spans}` document.
pub fn fits(v: &Value) -> Result<(), ImportError> {
    match v {
        Value::Array(lines) if !lines.is_empty() => {
            lines.iter().enumerate().try_for_each(|(i, l)| Entry::of(l).check(&format!("/{i}")))
        }
        Value::Array(_) => Err(ImportError::at("", "an Agents SDK export: at least one trace or span")),
        Value::Object(_) => Entry::of(v).check(""),
        _ => Err(ImportError::at("", "an Agents SDK export: JSONL of trace/span items or `{\"data\": […]}` bodies")),
    }
}

/// One line or document of an export as the reader reads it: an item (a trace or a span), or
/// a wrapper of items (`{"data": […]}`, `{trace, spans}`, `{event, item | span | trace}`).
/// Deserialized straight from a JSONL line (strings borrowed, a model call's `input` — the
/// whole conversation so far — skipped unbuilt) or from an item of a whole file's `Value`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct Entry<'a> {
    #[serde(borrow)]
    object: Loose<'a>,
    #[serde(borrow)]
    id: Loose<'a>,
    #[serde(borrow)]
    trace_id: Loose<'a>,
    #[serde(borrow)]
    parent_id: Loose<'a>,
    #[serde(borrow)]
    started_at: Loose<'a>,
    #[serde(borrow)]
    ended_at: Loose<'a>,
    #[serde(borrow)]
    error: Obj<SpanError<'a>>,
    #[serde(borrow)]
    span_data: Obj<Box<SpanData<'a>>>,
    #[serde(borrow)]
    trace: Obj<Box<Entry<'a>>>,
    #[serde(borrow)]
    item: Obj<Box<Entry<'a>>>,
    #[serde(borrow)]
    span: Obj<Box<Entry<'a>>>,
    #[serde(borrow)]
    data: List<Obj<Entry<'a>>>,
    #[serde(borrow)]
    spans: List<Obj<Entry<'a>>>,
}

/// A span's `error`: `{message, data}`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct SpanError<'a> {
    #[serde(borrow)]
    message: Loose<'a>,
    #[serde(borrow)]
    data: Obj<ErrorData<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ErrorData<'a> {
    #[serde(borrow)]
    error: Loose<'a>,
}

/// A span's `span_data`: what any span type carries that the reader reads.
#[derive(Deserialize, Default)]
#[serde(default)]
struct SpanData<'a> {
    #[serde(borrow, rename = "type")]
    ty: Loose<'a>,
    #[serde(borrow)]
    name: Loose<'a>,
    #[serde(borrow)]
    model: Loose<'a>,
    #[serde(borrow)]
    to_agent: Loose<'a>,
    #[serde(borrow)]
    tools: List<Loose<'a>>,
    /// A function's arguments (a string); of a model call, only whether it was recorded.
    #[serde(borrow)]
    input: Loose<'a>,
    /// A function's result (a string), or a model call's output messages or Responses objects.
    #[serde(borrow)]
    output: Output<'a>,
    #[serde(borrow)]
    usage: Obj<Usage<'a>>,
    #[serde(borrow)]
    triggered: Loose<'a>,
    /// A custom span's data: a task or turn span has `sdk_span_type`.
    #[serde(borrow)]
    data: Obj<CustomData<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Usage<'a> {
    #[serde(borrow)]
    input_tokens: Loose<'a>,
    #[serde(borrow)]
    output_tokens: Loose<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CustomData<'a> {
    #[serde(borrow)]
    sdk_span_type: Loose<'a>,
}

/// A span's `output`: a string (a function's result), a list of parts (a model call's), or
/// something else.
#[derive(Default)]
enum Output<'a> {
    #[default]
    Absent,
    Null,
    Str(Cow<'a, str>),
    Parts(Vec<Obj<Part<'a>>>),
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for Output<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Output<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Output<'a>, E> {
                Ok(Output::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Output<'a>, E> {
                Ok(Output::Str(Cow::Owned(s.to_owned())))
            }
            fn visit_unit<E>(self) -> Result<Output<'a>, E> {
                Ok(Output::Null)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Output<'a>, A::Error> {
                let mut parts = Vec::new();
                while let Some(p) = seq.next_element()? {
                    parts.push(p);
                }
                Ok(Output::Parts(parts))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Output<'a>, A::Error> {
                while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
                Ok(Output::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Output<'a>, E> {
                Ok(Output::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Output<'a>, E> {
                Ok(Output::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Output<'a>, E> {
                Ok(Output::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Output<'a>, E> {
                Ok(Output::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A part of a model call's output: a Chat message, a Responses item, or (streamed) a
/// Responses object with its own `output` items.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Part<'a> {
    #[serde(borrow, rename = "type")]
    ty: Loose<'a>,
    #[serde(borrow)]
    call_id: Loose<'a>,
    #[serde(borrow)]
    name: Loose<'a>,
    #[serde(borrow)]
    arguments: Loose<'a>,
    content: Value,
    refusal: Value,
    #[serde(borrow)]
    tool_calls: List<Obj<ChatToolCall<'a>>>,
    #[serde(borrow)]
    output: List<Obj<Part<'a>>>,
}

/// A Chat message's tool call: `{id, function: {name, arguments}}`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ChatToolCall<'a> {
    #[serde(borrow)]
    id: Loose<'a>,
    #[serde(borrow)]
    function: Obj<ChatFunction<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ChatFunction<'a> {
    #[serde(borrow)]
    name: Loose<'a>,
    #[serde(borrow)]
    arguments: Loose<'a>,
}

impl<'a> Entry<'a> {
    /// An entry from one JSONL line; `None` when the line is no JSON object, or repeats a key.
    pub fn parse(line: &'a str) -> Option<Entry<'a>> {
        serde_json::from_str(line).ok()
    }

    /// The entry of one line or document of a whole file's `Value` (empty when it is no object,
    /// which then does not fit).
    fn of(v: &'a Value) -> Entry<'a> {
        if v.is_object() { Entry::deserialize(v).unwrap_or_default() } else { Entry::default() }
    }

    /// Whether the entry fits (the fast reading of a line; why not is the whole reading's to say).
    pub fn fits(&self) -> bool {
        self.check("").is_ok()
    }

    /// Whether the entry fits: an item, a `{"data": […]}` body, `{trace, spans}`, or a wrapper;
    /// `at` is where it stands in the file, for the error's JSON pointer.
    fn check(&self, at: &str) -> Result<(), ImportError> {
        let problem = |path: std::fmt::Arguments, (key, expected): (&str, &str)| {
            ImportError::at(format!("{path}{key}"), expected)
        };
        if self.object.is_present() {
            return self.item_problem().map_or(Ok(()), |p| Err(problem(format_args!("{at}"), p)));
        }
        let mut found = false;
        for (key, list) in [("data", &self.data), ("spans", &self.spans)] {
            if let Some(list) = list.list() {
                if list.is_empty() {
                    return Err(ImportError::at(format!("{at}/{key}"), "a non-empty list of trace/span items"));
                }
                for (i, item) in list.iter().enumerate() {
                    let lacks = item.object().map_or(Some(("/object", ITEM_EXPECTED)), |e| e.item_problem());
                    if let Some(p) = lacks {
                        return Err(problem(format_args!("{at}/{key}/{i}"), p));
                    }
                }
                found = true;
            }
        }
        for (key, wrapped) in [("item", &self.item), ("span", &self.span), ("trace", &self.trace)] {
            if let Some(item) = wrapped.object() {
                if let Some(p) = item.item_problem() {
                    return Err(problem(format_args!("{at}/{key}"), p));
                }
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

    /// What an item lacks, if anything: the key (a pointer below the item) and what was expected.
    fn item_problem(&self) -> Option<(&'static str, &'static str)> {
        match self.object.as_str() {
            Some("trace") if self.id.as_str().is_some() => None,
            Some("trace") => Some(("/id", "a trace's `id` string")),
            Some("trace.span") if self.id.as_str().is_none() => Some(("/id", "a span's `id` string")),
            Some("trace.span") if self.trace_id.as_str().is_none() => Some(("/trace_id", "a span's `trace_id` string")),
            Some("trace.span") if self.span_data.object().is_none_or(|d| d.ty.as_str().is_none()) => {
                Some(("/span_data/type", "a span's `span_data` with a `type`"))
            }
            Some("trace.span") => None,
            _ => Some(("/object", ITEM_EXPECTED)),
        }
    }

    /// The items of the entry, in the order the whole reading meets them.
    pub fn items<'e>(&'e self, out: &mut Vec<&'e Entry<'a>>) {
        if self.object.is_present() {
            out.push(self);
            return;
        }
        for wrapped in [&self.trace, &self.item, &self.span] {
            if let Some(item) = wrapped.object() {
                item.items(out);
            }
        }
        for list in [&self.data, &self.spans] {
            for item in list.list().into_iter().flatten().filter_map(Obj::object) {
                item.items(out);
            }
        }
    }

    /// The trace an item belongs to: a span's `trace_id`, a trace's own `id`.
    pub fn trace_id(&self) -> Option<&str> {
        if self.object.as_str() == Some("trace.span") { self.trace_id.as_str() } else { self.id.as_str() }
    }

    fn is_span(&self) -> bool {
        self.object.as_str() == Some("trace.span")
    }
}

/// The ids of the traces one line of a JSONL export holds items of, in the order the whole
/// reading meets them (an item; a wrapper's `trace`, `item`, `span`; a batch body's `data`,
/// `spans`), read without building the line: the first reading of a large export, which only
/// sorts lines into traces. An item line stops being read once its `object` and ids are
/// known (the SDK writes them first; the rest is read when its trace is). `None` when the
/// line is not in that shape, or a string read has escapes (the whole reading then says why,
/// or reads what this does not).
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
    let mut head = ItemHead::default();
    let mut de = serde_json::Deserializer::from_str(line);
    let _ = serde::de::DeserializeSeed::deserialize(&mut head, &mut de);
    if let Some(tid) = head.found {
        out.push(tid);
        return Some(());
    }
    walk(serde_json::from_str(line).ok()?, out);
    Some(())
}

/// The head of an item line: its `object`, `id` and `trace_id`, read until its trace is known
/// (`found`); reading stops there, or at the first key of another kind.
#[derive(Default)]
struct ItemHead<'a> {
    object: Option<&'a str>,
    id: Option<&'a str>,
    trace_id: Option<&'a str>,
    found: Option<&'a str>,
}

impl<'a> ItemHead<'a> {
    fn trace(&self) -> Option<&'a str> {
        match self.object? {
            "trace.span" => self.id.and(self.trace_id),
            "trace" => self.id,
            _ => None,
        }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for &mut ItemHead<'de> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for &mut ItemHead<'de> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an Agents SDK export item")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        use serde::de::Error;
        while let Some(key) = map.next_key::<&str>()? {
            let slot = match key {
                "object" => &mut self.object,
                "id" => &mut self.id,
                "trace_id" => &mut self.trace_id,
                _ => break,
            };
            if slot.is_some() {
                break;
            }
            *slot = Some(map.next_value()?);
            if let Some(tid) = self.trace() {
                self.found = Some(tid);
                break;
            }
        }
        Err(A::Error::custom("the head is read"))
    }
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

/// Whether one line of a JSONL export fits; `at` names it.
pub fn line_fits(v: &Value, at: &str) -> Result<(), ImportError> {
    Entry::of(v).check(at)
}

/// The conversation of one trace from its items (spans and the trace record, any order).
pub fn trace_conversation(items: &[&Entry], id: String) -> Conversation {
    let spans: Vec<&Entry> = items.iter().copied().filter(|i| i.is_span()).collect();
    read_trace(&spans, id)
}

/// One trace per conversation, in the order the traces first appear.
pub fn conversations(v: &Value, id: &str) -> Result<Vec<Conversation>, ImportError> {
    fits(v)?;
    let entries: Vec<Entry> = match v {
        Value::Array(lines) => lines.iter().map(Entry::of).collect(),
        other => vec![Entry::of(other)],
    };
    let mut all = Vec::new();
    entries.iter().for_each(|e| e.items(&mut all));
    let mut traces: Vec<(&str, Vec<&Entry>)> = Vec::new();
    for item in all {
        let Some(tid) = item.trace_id() else { continue };
        let k = match traces.iter().position(|(t, _)| *t == tid) {
            Some(k) => k,
            None => {
                traces.push((tid, Vec::new()));
                traces.len() - 1
            }
        };
        if item.is_span()
            && let Some((_, spans)) = traces.get_mut(k)
        {
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
    data: &'a SpanData<'a>,
    error: Option<&'a Obj<SpanError<'a>>>,
    start: TimeKey<'a>,
    end: Option<TimeKey<'a>>,
}

static NO_DATA: SpanData<'static> = SpanData {
    ty: Loose::Absent,
    name: Loose::Absent,
    model: Loose::Absent,
    to_agent: Loose::Absent,
    tools: List::NotList,
    input: Loose::Absent,
    output: Output::Absent,
    usage: Obj::Absent,
    triggered: Loose::Absent,
    data: Obj::Absent,
};

impl<'a> Span<'a> {
    fn new(v: &'a Entry<'a>) -> Span<'a> {
        let data = v.span_data.object().map_or(&NO_DATA, |d| &**d);
        Span {
            id: v.id.as_str().unwrap_or_default(),
            parent: v.parent_id.as_str(),
            ty: data.ty.as_str().unwrap_or_default(),
            data,
            error: Some(&v.error).filter(|e| e.is_set()),
            start: time_key(v.started_at.as_str().unwrap_or_default()),
            end: v.ended_at.as_str().map(time_key),
        }
    }

    fn message(&self) -> Option<&'a str> {
        self.error.map(|e| e.object().and_then(|e| e.message.as_str()).unwrap_or("error"))
    }

    /// The error's `data.error`, the SDK's detail.
    fn detail(&self) -> Option<&'a str> {
        self.error.and_then(Obj::object).and_then(|e| e.data.object()).and_then(|d| d.error.as_str())
    }

    /// A task or turn span (`custom` with `data.sdk_span_type`), or an agent span.
    fn is_run(&self) -> bool {
        self.ty == "agent"
            || (self.ty == "custom" && self.data.data.object().is_some_and(|d| d.sdk_span_type.is_present()))
    }
}

/// An ISO-8601 time that sorts as the text `YYYY-MM-DDTHH:MM:SS.` and the fraction padded to
/// 9 digits would (Python's `isoformat` leaves the fraction out when it is 0; the SDK writes
/// UTC); a time shorter than that sorts as its own text. Built without allocating.
#[derive(Clone, Copy, Debug)]
struct TimeKey<'a> {
    main: &'a str,
    /// The fraction's digits, when `main` is a whole `YYYY-MM-DDTHH:MM:SS`.
    digits: Option<&'a str>,
}

fn time_key(s: &str) -> TimeKey<'_> {
    let Some(main) = s.get(..19) else { return TimeKey { main: s, digits: None } };
    let frac = s[19..].strip_prefix('.').unwrap_or("");
    let digits = &frac[..frac.bytes().take_while(u8::is_ascii_digit).count()];
    TimeKey { main, digits: Some(digits) }
}

impl TimeKey<'_> {
    /// The bytes of the text it sorts as.
    fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        let frac = self.digits.map(|d| {
            let pad = 9usize.saturating_sub(d.len());
            std::iter::once(b'.').chain(d.bytes()).chain(std::iter::repeat_n(b'0', pad))
        });
        self.main.bytes().chain(frac.into_iter().flatten())
    }
}

impl Ord for TimeKey<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        match (self.digits, other.digits) {
            // The common case: two whole times, equal lengths of fraction.
            (Some(a), Some(b)) if a.len() == b.len() => self.main.cmp(other.main).then_with(|| a.cmp(b)),
            _ => self.bytes().cmp(other.bytes()),
        }
    }
}

impl PartialOrd for TimeKey<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for TimeKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for TimeKey<'_> {}

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

fn read_trace(records: &[&Entry], id: String) -> Conversation {
    let mut conv = Conversation::new(id, "agents-sdk");
    // De-duplicate by id: the record with `ended_at` set wins, else the later one.
    let mut kept: Vec<&Entry> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::default();
    for r in records {
        let rid = r.id.as_str().unwrap_or_default();
        let ended = |x: &Entry| x.ended_at.is_set();
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

    conv.model = spans.iter().find(|s| s.ty == "generation").and_then(|s| s.data.model.as_str()).map(str::to_owned);
    conv.provider = if spans.iter().any(|s| s.ty == "generation") {
        Some("openai-chat".to_owned())
    } else if spans.iter().any(|s| s.ty == "response") {
        Some("openai-responses".to_owned())
    } else {
        None
    };
    for s in spans.iter().filter(|s| s.ty == "agent") {
        for name in s.data.tools.list().into_iter().flatten().filter_map(Loose::as_str) {
            if !conv.tools.iter().any(|t| t.name == name) {
                conv.tools.push(ToolDef { name: name.to_owned(), description: None, parameters: None });
            }
        }
    }

    // Model calls, and each tool span made a call of one; results at their spans' ends.
    let mut steps: Vec<Step> = Vec::new();
    let mut last_under: HashMap<Option<&str>, usize> = HashMap::default();
    let mut results: Vec<(TimeKey, Item)> = Vec::new();
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
    let mut events: Vec<(TimeKey, Item)> = Vec::with_capacity(steps.len() + results.len());
    for step in steps {
        let (tokens_in, tokens_out) = usage(step.span.data.usage.object());
        let text = step.text.filter(|t| !t.trim().is_empty());
        events.push((
            step.span.start,
            Item::Model { text, calls: step.calls, tokens_in, tokens_out, status: step.status },
        ));
    }
    events.extend(results);
    events.sort_by(|a, b| a.0.cmp(&b.0));
    conv.items = events.into_iter().map(|(_, item)| item).collect();
    conv.ending = ending;
    conv
}

fn usage(u: Option<&Usage>) -> (u64, u64) {
    let get = |n: &Loose| n.as_u64().unwrap_or(0);
    u.map_or((0, 0), |u| (get(&u.input_tokens), get(&u.output_tokens)))
}

/// A model span's text, the tool calls its output shows, and its status.
fn model_step<'a>(s: &'a Span<'a>) -> Step<'a> {
    let mut step = Step { span: s, text: None, offered: Vec::new(), calls: Vec::new(), status: 200 };
    let failed_silently = s.ty == "generation"
        && s.data.input.is_set()
        && matches!(s.data.output, Output::Null)
        && matches!(s.data.usage, Obj::Null)
        && s.end.is_some();
    if s.error.is_some() || failed_silently {
        step.status = error_code(s.detail().unwrap_or_default()).unwrap_or(500);
    }
    let outputs = match &s.data.output {
        Output::Parts(parts) => parts.as_slice(),
        _ => &[],
    };
    let owned = |l: &Loose| l.as_str().map(str::to_owned);
    let mut texts = Vec::new();
    for out in outputs.iter().filter_map(Obj::object) {
        // A Chat message, or (streamed) a Responses object with its own `output` items.
        let parts: Vec<&Part> = match out.output.list() {
            Some(list) => list.iter().filter_map(Obj::object).collect(),
            None => vec![out],
        };
        for p in parts {
            match p.ty.as_str() {
                Some("function_call") => step.offered.push(Offered {
                    id: owned(&p.call_id),
                    name: p.name.as_str().unwrap_or_default().to_owned(),
                    args: owned(&p.arguments),
                    used: false,
                }),
                Some("message") | None => {
                    let content = if p.content.is_null() { &p.refusal } else { &p.content };
                    let t = text_of(content);
                    if !t.trim().is_empty() {
                        texts.push(t);
                    }
                    for c in p.tool_calls.list().into_iter().flatten().filter_map(Obj::object) {
                        let function = c.function.object();
                        step.offered.push(Offered {
                            id: owned(&c.id),
                            name: function.and_then(|f| f.name.as_str()).unwrap_or_default().to_owned(),
                            args: function.and_then(|f| owned(&f.arguments)),
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
fn tool_call<'a>(s: &Span<'a>, step: &mut Step, gaps: &mut Vec<String>) -> Option<(TimeKey<'a>, Item)> {
    let (name, content, flag) = if s.ty == "handoff" {
        let to = s.data.to_agent.as_str().unwrap_or_default();
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
        let Some(name) = s.data.name.as_str().filter(|n| !n.is_empty()) else {
            gaps.push(format!("a function span ({}) has no tool name", s.id));
            return None;
        };
        let detail = s.detail();
        let output = match &s.data.output {
            Output::Str(out) => Some(out.as_ref()),
            _ => None,
        };
        let content = match (output, s.message()) {
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
    let args = match (s.ty, s.data.input.as_str().or(offered_args.as_deref())) {
        ("handoff", _) => parse_args(offered_args.as_deref().unwrap_or("{}")),
        (_, Some(a)) => parse_args(a),
        (_, None) => Args::new(&Value::Null),
    };
    step.calls.push(CallItem { id: Some(id.clone()), name: name.clone(), args });
    let end = s.end?;
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
    if outer.iter().any(|s| s.ty == "guardrail" && s.data.triggered == Loose::Bool(true))
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

    /// The first reading finds a line's traces from its head, in any key order, through
    /// wrappers and batch bodies; a line it cannot read cheaply is left to the whole reading.
    #[test]
    fn line_traces_from_heads_wrappers_and_bodies() {
        let traces = |line: &str| {
            let mut out = Vec::new();
            line_traces(line, &mut out).map(|()| out.join(","))
        };
        let span = r#"{"object": "trace.span", "id": "s", "trace_id": "t", "span_data": {"type": "agent"}}"#;
        assert_eq!(traces(span).as_deref(), Some("t"));
        assert_eq!(
            traces(r#"{"span_data": {"type": "agent"}, "trace_id": "t", "id": "s", "object": "trace.span"}"#)
                .as_deref(),
            Some("t")
        );
        assert_eq!(traces(r#"{"object": "trace", "id": "t0"}"#).as_deref(), Some("t0"));
        assert_eq!(traces(&format!(r#"{{"event": "span_end", "span": {span}}}"#)).as_deref(), Some("t"));
        assert_eq!(
            traces(&format!(r#"{{"data": [{span}, {{"object": "trace", "id": "u"}}]}}"#)).as_deref(),
            Some("t,u")
        );
        assert_eq!(traces(r#"{"object": "trace.span", "id": "s", "trace_id": "t\u0031"}"#), None);
        assert_eq!(traces("not json"), None);
    }

    #[test]
    fn times_sort_with_and_without_a_fraction() {
        assert!(time_key("2025-01-01T00:00:01+00:00") < time_key("2025-01-01T00:00:01.000001+00:00"));
        assert!(time_key("2025-01-01T00:00:01.9+00:00") > time_key("2025-01-01T00:00:01.000001+00:00"));
        assert!(time_key("2025-01-01T00:00:01.5+00:00") == time_key("2025-01-01T00:00:01.500000+00:00"));
        assert!(time_key("2025-01-01T00:00:01.25+00:00") < time_key("2025-01-01T00:00:01.3+00:00"));
        assert!(time_key("2025-01-01T00:00:02") > time_key("2025-01-01T00:00:01.999999999"));
        // A short time sorts as its text against the padded text of whole ones.
        assert!(time_key("short") > time_key("2025-01-01T00:00:01.1"));
        assert!(time_key("2025") < time_key("2025-01-01T00:00:01.1"));
        assert!(time_key("2025-01-01T00:00:01.") == time_key("2025-01-01T00:00:01"));
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
