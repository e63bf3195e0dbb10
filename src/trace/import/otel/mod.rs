//! LLM-agent spans as OpenTelemetry exports: OpenInference / Arize Phoenix, OpenLLMetry
//! (Traceloop), Logfire and pydantic-ai, and the OTel GenAI semantic conventions.
//!
//! - **Containers.** OTLP/JSON (`resourceSpans` → `scopeSpans` → `spans`, attributes as
//!   `{key, value: {stringValue|intValue|…}}`, status codes as numbers or enum names, also
//!   Phoenix's snake_case `/spans/otlpv1` export under `data`, and Grafana Tempo's trace answer,
//!   `batches` of `instrumentationLibrarySpans`); Jaeger's trace answer and UI download (`data`
//!   of `{traceID, spans}`: `operationName`, `references`, `tags`, `logs`, times in µs), read as
//!   flat spans; flat span lists: the OTel SDK's
//!   `ReadableSpan.to_json()` objects (`context.span_id`, `parent_id`, `status.status_code`), the
//!   JS SDK's `ReadableSpan` as JSON (`spanContext.{traceId,spanId}`, `parentSpanId` or
//!   `parentSpanContext`, `startTime` as `[seconds, nanoseconds]`, `status.code`),
//!   Phoenix `get_spans` (`span_kind`, `status_code`, flat attributes; also under `data`, or as
//!   an object of named lists), Phoenix DataFrame JSONL rows (`context.span_id`,
//!   `attributes.<key>` columns), and OTLP/JSON JSONL (a request a line, as the Collector's
//!   file exporter writes; read whole, a list of requests is their spans in turn). Every
//!   container becomes a list of spans whose attributes are flattened to dotted keys, so flat
//!   (`llm.input_messages.0.message.role`), half-nested and nested attributes read alike.
//!   Spans are ordered by start time.
//! - **Large files.** JSONL (OTLP requests or flat spans a line) and JSON arrays of flat spans
//!   are read a trace at a time ([`jsonl_conversations`], from `session_lines.rs`): each line
//!   parsed once; past the first 64 MiB, a survey of the rest (each span's trace id alone)
//!   tells each trace's last line, and each trace is read as soon as that line is passed, so
//!   memory holds the spans of 64 MiB of lines and of the traces open at a line, not the
//!   file's; the result is the whole reading's, and a line that does not fit sends the file to
//!   the whole reading.
//! - **Conversations.** One per trace id; a trace whose first model call's request extends the
//!   previous trace's last request and response continues that conversation (bare
//!   instrumentation makes one trace per call).
//! - **Model calls.** One per model span: OpenInference `openinference.span.kind` (or
//!   Phoenix's `span_kind`) `LLM`, `gen_ai.operation.name` chat / text_completion /
//!   generate_content (OTel GenAI, OpenLLMetry ≥ 0.55, Logfire, pydantic-ai), or OpenLLMetry's
//!   `llm.request.type` chat / completion. A span carrying several dialects is one call, and so
//!   is a model span with another below it (one instrumentation wrapping another's span of the
//!   same call, as Google ADK's `generate_content` wraps OpenLLMetry's `openai.chat`): the
//!   spans nearest the wire are the calls. The
//!   request is read from `gen_ai.input.messages` (parts), `llm.input_messages`,
//!   `gen_ai.prompt.N`, Logfire's `request_data`, pre-1.37 `gen_ai.*.message` events, or
//!   `input.value`'s `messages`; the response from `gen_ai.output.messages`,
//!   `llm.output_messages`, `gen_ai.completion.N`, `response_data`, the `gen_ai.choice` event
//!   or `output.value` (a provider response body, else its text). Tokens from
//!   `gen_ai.usage.*` or `llm.token_count.*`. Each request carries the history: only the
//!   messages after its last assistant message are new (results and user turns); tool calls
//!   are counted from responses, never from requests. A model span with status ERROR and no
//!   response is a failed call, its HTTP status from `Error code: NNN` in the message, else 429
//!   for a message that says rate limit, else 500.
//! - **Vercel AI SDK** (`experimental_telemetry`, 4.x to 6.x): an `ai.*.doGenerate` /
//!   `ai.*.doStream` span is a model call (request `ai.prompt.messages`, response
//!   `ai.response.text` and `ai.response.toolCalls`, usage `ai.usage.*`, finish
//!   `ai.response.finishReason`); an `ai.toolCall` span is a tool run (`ai.toolCall.name`, `.id`,
//!   `.args`, `.result`, status ERROR its failure); in a request, a `tool-result` part's output
//!   type `error-text` / `error-json` (4.x: `isError`) is a failed result's flag and
//!   `execution-denied` a call that never ran.
//! - **Tool spans.** OpenInference `TOOL` (`tool.name`, `tool.id`, `input.value`,
//!   `output.value`), `execute_tool` (`gen_ai.tool.name`, `gen_ai.tool.call.id`,
//!   `gen_ai.tool.call.arguments`/`result`, pydantic-ai v2 `tool_arguments`/`tool_response`),
//!   Traceloop `traceloop.span.kind` = tool (`traceloop.entity.input`/`output`). Each pairs with
//!   an earlier, unpaired tool call by id, else by name (same arguments first, then the oldest).
//!   Status ERROR (or an `exception` event with no output) is the structural failure flag of
//!   that call's result; a tool that failed with no result message gets a failed result from
//!   the span (its exception text), a tool that ran with none gets its output. A tool span
//!   that pairs with no call is a call of the model call before it (redacted outputs); one
//!   before any model call is a gap.
//! - **Endings.** The root span of the conversation's last trace with status ERROR: error
//!   (reason its exception type); else the last model call failed: error; else that call's
//!   finish reason (`llm.finish_reason`, `gen_ai.response.finish_reasons`, the output
//!   message's or completion's `finish_reason`): stop → answer (text from the root's
//!   `output.value`, `traceloop.entity.output` or `final_result`), length → cut off, a tool
//!   call → cut off, content_filter → error; without one the builder infers.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::marker::PhantomData;
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value, json};

mod attrs;
mod line;

use attrs::Attrs;

use super::conversation::{CallItem, Conversation, Ending, Item, parse_args, text_of};
use super::lenient::{List, Obj};
use super::{ImportError, SourceFormat, cores, signature};
use crate::provider::Format;
use crate::trace::{Args, FinalOutcome, ToolDef};

#[derive(Debug, PartialEq)]
struct Event {
    name: String,
    attrs: Attrs,
}

/// One span, whatever the container.
#[derive(Debug, PartialEq)]
struct Span {
    trace: String,
    id: String,
    parent: Option<String>,
    name: String,
    /// Start time in nanoseconds since the epoch (0 when unreadable).
    start: i128,
    /// The status message when the status is ERROR.
    error: Option<String>,
    /// The OpenInference span kind, upper case ("" when none).
    kind: String,
    attrs: Attrs,
    events: Vec<Event>,
}

impl Span {
    /// The span as the `n`th of its file: one without an id of its own is named `#n` (an id
    /// read is never empty).
    fn numbered(mut self, n: usize) -> Span {
        if self.id.is_empty() {
            self.id = format!("#{n}");
        }
        self
    }

    fn str(&self, k: &str) -> Option<&str> {
        self.attrs.get(k).and_then(Value::as_str)
    }

    fn num(&self, k: &str) -> Option<u64> {
        self.attrs.get(k).and_then(number)
    }

    /// An attribute holding JSON: a string of JSON, a value, or keys nested under `k.`.
    fn json(&self, k: &str) -> Option<Value> {
        match self.attrs.get(k) {
            Some(Value::String(s)) => serde_json::from_str(s).ok(),
            Some(v) => Some(v.clone()),
            None => unflatten(&self.attrs, k),
        }
    }

    fn has(&self, k: &str) -> bool {
        self.attrs.contains_key(k) || nested(&self.attrs, k).next().is_some()
    }

    fn exception(&self) -> Option<&Attrs> {
        self.events.iter().find(|e| e.name == "exception").map(|e| &e.attrs)
    }

    fn exception_field(&self, k: &str) -> Option<&str> {
        self.exception().and_then(|e| e.get(k)).and_then(Value::as_str)
    }
}

fn number(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => {
            n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0).map(|f| f as u64))
        }
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Containers

/// Whether `v` is a span export this reader takes: OTLP/JSON, or a span list in one of the
/// layouts above (or one span of such a list, as detection sees a list's first element).
pub fn looks_like(v: &Value) -> bool {
    raw_spans(v).is_some_and(|s| !s.is_empty()) || jaeger_traces(v).is_some()
}

/// The traces of a Jaeger trace answer or UI download (`{"data": [{traceID, spans,
/// processes}]}`, or one such trace), each with a `traceID` string and a list of `spans`, at
/// least one span in all; `None` when `v` is none.
fn jaeger_traces(v: &Value) -> Option<Vec<&Value>> {
    let traces: Vec<&Value> = match v.get("data") {
        Some(Value::Array(d)) => d.iter().collect(),
        Some(_) => return None,
        None => vec![v],
    };
    let trace =
        |t: &&Value| t.get("traceID").is_some_and(Value::is_string) && t.get("spans").is_some_and(Value::is_array);
    let spans = traces.iter().filter_map(|t| t.get("spans")?.as_array()).map(Vec::len).sum::<usize>();
    (!traces.is_empty() && traces.iter().all(trace) && spans > 0).then_some(traces)
}

/// Jaeger's spans as the flat spans the OTel Python SDK writes: `operationName` the name,
/// `traceID` / `spanID` the ids, the `CHILD_OF` reference the parent, `startTime` (µs) in ns,
/// `tags` (`{key, type, value}`) the attributes, `otel.status_code` (or a true `error` tag) the
/// status with `otel.status_description` its message, and `logs` the events, each named by its
/// `event` field.
fn jaeger_spans(traces: &[&Value]) -> Value {
    let map = |list: Option<&Value>| -> Map<String, Value> {
        let entry = |t: &Value| Some((t.get("key")?.as_str()?.to_owned(), t.get("value")?.clone()));
        list.and_then(Value::as_array).into_iter().flatten().filter_map(entry).collect()
    };
    let mut out = Vec::new();
    for t in traces {
        for s in t["spans"].as_array().into_iter().flatten() {
            let attrs = map(s.get("tags"));
            let code = attrs.get("otel.status_code").and_then(Value::as_str).unwrap_or("UNSET");
            let flagged =
                matches!(attrs.get("error"), Some(Value::Bool(true))) || attrs.get("error") == Some(&json!("true"));
            let status = if flagged { "ERROR" } else { code };
            let references = s.get("references").and_then(Value::as_array).into_iter().flatten();
            let parent = references
                .filter(|r| r.get("refType").and_then(Value::as_str) == Some("CHILD_OF"))
                .find_map(|r| r.get("spanID").cloned());
            let events: Vec<Value> = (s.get("logs").and_then(Value::as_array).into_iter().flatten())
                .map(|l| {
                    let mut fields = map(l.get("fields"));
                    let name = fields.remove("event").unwrap_or(Value::String(String::new()));
                    json!({"name": name, "attributes": fields})
                })
                .collect();
            out.push(json!({
                "name": s.get("operationName").cloned().unwrap_or(Value::String(String::new())),
                "context": {"trace_id": s.get("traceID").unwrap_or(&t["traceID"]), "span_id": s.get("spanID")},
                "parent_id": parent,
                "start_time": s.get("startTime").and_then(Value::as_u64).map(|us| us.saturating_mul(1000)),
                "status": {"status_code": status, "description": attrs.get("otel.status_description")},
                "attributes": attrs,
                "events": events,
            }));
        }
    }
    Value::Array(out)
}

/// Where a flat span keeps its ids: OTLP and Phoenix, the Python SDK's `context`, the JS SDK's
/// `spanContext` (a `ReadableSpan` as `JSON.stringify` writes it).
const SPAN_ID: &[&str] = &["spanId", "span_id", "context.span_id", "spanContext.spanId"];
const TRACE_ID: &[&str] = &["traceId", "trace_id", "context.trace_id", "spanContext.traceId"];
const PARENT_ID: &[&str] = &["parentSpanId", "parent_span_id", "parent_id", "parentSpanContext.spanId"];
const STATUS_CODE: &[&str] = &["status.code", "status.status_code", "status_code"];
const STATUS_MESSAGE: &[&str] = &["status.message", "status.description", "status_message"];

/// Whether `v` is one span of a flat list: a `name`, a span and a trace id, attributes.
fn is_span(v: &Value) -> bool {
    let Some(o) = v.as_object() else { return false };
    o.get("name").is_some_and(Value::is_string)
        && field(v, SPAN_ID).is_some()
        && field(v, TRACE_ID).is_some()
        && (o.contains_key("attributes") || o.keys().any(|k| k.starts_with("attributes.")))
}

/// The spans of a file, unparsed: `None` when it is no span container.
fn raw_spans(v: &Value) -> Option<Vec<&Value>> {
    match v {
        Value::Object(o) => {
            if let Some(rs) = resource_spans(o) {
                let mut out = Vec::new();
                otlp_spans(rs, &mut out);
                return Some(out);
            }
            if let Some(data) = o.get("data") {
                return list(data);
            }
            if is_span(v) {
                return Some(vec![v]);
            }
            // An object of named span lists (Phoenix test cases).
            let mut out = Vec::new();
            for l in o.values() {
                out.extend(list(l)?);
            }
            (!out.is_empty()).then_some(out)
        }
        // OTLP/JSON JSONL (the Collector's file exporter: one request a line), or a JSON list of
        // requests: their spans in turn.
        Value::Array(a) if !a.is_empty() && a.iter().all(|r| r.as_object().and_then(resource_spans).is_some()) => {
            let mut out = Vec::new();
            a.iter().filter_map(|r| r.as_object().and_then(resource_spans)).for_each(|rs| otlp_spans(rs, &mut out));
            Some(out)
        }
        Value::Array(_) => list(v),
        _ => None,
    }
}

/// An OTLP/JSON request's `resourceSpans` (or `resource_spans`), or Grafana Tempo's trace
/// answer's `batches` (its name for the same list).
fn resource_spans(o: &Map<String, Value>) -> Option<&Value> {
    o.get("resourceSpans").or_else(|| o.get("resource_spans")).or_else(|| o.get("batches"))
}

/// The spans of every resource's scopes, in order (scope lists under each name in turn).
fn otlp_spans<'a>(resource_spans: &'a Value, out: &mut Vec<&'a Value>) {
    for r in resource_spans.as_array().into_iter().flatten() {
        for ss in SCOPE_SPANS.iter().filter_map(|k| r.get(*k)).filter_map(Value::as_array).flatten() {
            out.extend(ss.get("spans").and_then(Value::as_array).into_iter().flatten());
        }
    }
}

/// Where a resource keeps its scopes' spans (the last the name before OTLP 1.0).
const SCOPE_SPANS: [&str; 3] = ["scopeSpans", "scope_spans", "instrumentationLibrarySpans"];

/// A non-empty list of spans.
fn list(l: &Value) -> Option<Vec<&Value>> {
    let a = l.as_array()?;
    (!a.is_empty() && a.iter().all(is_span)).then(|| a.iter().collect())
}

/// The first non-null of `keys`, each a key or `outer.inner` (tried as a key first).
fn field<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().find_map(|k| {
        v.get(*k)
            .filter(|x| !x.is_null())
            .or_else(|| k.split_once('.').and_then(|(a, b)| v.get(a)?.get(b)).filter(|x| !x.is_null()))
    })
}

fn id_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => id_text(s),
        Value::Number(n) => id_text(&n.to_string()),
        _ => None,
    }
}

/// An id as spans are matched by it: trimmed, without `0x`, lower case; `None` when empty.
fn id_text(s: &str) -> Option<String> {
    let s = s.trim();
    let s = s.strip_prefix("0x").unwrap_or(s).to_ascii_lowercase();
    (!s.is_empty()).then_some(s)
}

/// A start time given as a string: nanoseconds, or an RFC 3339 time (0 when neither).
fn start_text(s: &str) -> i128 {
    s.parse::<i128>().ok().or_else(|| parse_time(s)).unwrap_or(0)
}

/// An OTLP `AnyValue` (camelCase or snake_case) as plain JSON.
fn any_value(v: &Value) -> Value {
    let Some(o) = v.as_object() else { return v.clone() };
    for (k, x) in o.iter().filter(|(_, x)| !x.is_null()) {
        match k.as_str() {
            "stringValue" | "string_value" | "doubleValue" | "double_value" | "boolValue" | "bool_value"
            | "bytesValue" | "bytes_value" => return x.clone(),
            "intValue" | "int_value" => {
                return x.as_str().and_then(|s| s.parse::<i64>().ok()).map(Value::from).unwrap_or_else(|| x.clone());
            }
            "arrayValue" | "array_value" => {
                let values = x.get("values").and_then(Value::as_array).into_iter().flatten();
                return Value::Array(values.map(any_value).collect());
            }
            "kvlistValue" | "kvlist_value" => return Value::Object(key_values(x.get("values"))),
            _ => {}
        }
    }
    Value::Null
}

/// An OTLP attribute list `[{key, value}]` as an object.
fn key_values(list: Option<&Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for kv in list.and_then(Value::as_array).into_iter().flatten() {
        if let Some(k) = kv.get("key").and_then(Value::as_str) {
            out.insert(k.to_owned(), any_value(kv.get("value").unwrap_or(&Value::Null)));
        }
    }
    out
}

/// Attributes in either form (an OTLP list or an object), flattened.
fn attributes(v: Option<&Value>) -> Attrs {
    let mut out = Attrs::new();
    match v {
        Some(Value::Array(_)) => flatten("", Value::Object(key_values(v)), &mut out),
        Some(o @ Value::Object(_)) => flatten("", o.clone(), &mut out),
        _ => {}
    }
    out
}

/// Objects and lists of objects become dotted keys (list elements by index); lists of scalars
/// stay values; nulls are dropped.
fn flatten(prefix: &str, v: Value, out: &mut Attrs) {
    let key = |k: &str| if prefix.is_empty() { k.to_owned() } else { format!("{prefix}.{k}") };
    match v {
        Value::Null => {}
        Value::Object(o) => o.into_iter().for_each(|(k, x)| flatten(&key(&k), x, out)),
        Value::Array(a) if a.iter().any(|x| x.is_object() || x.is_array()) => {
            a.into_iter().enumerate().for_each(|(i, x)| flatten(&key(&i.to_string()), x, out))
        }
        other => {
            out.insert(prefix.to_owned(), other);
        }
    }
}

/// The attributes whose keys start with `prefix.`, in key order (found without building the
/// prefix: keys that start with `prefix` sort right after it).
fn nested<'a>(attrs: &'a Attrs, prefix: &'a str) -> impl Iterator<Item = (&'a String, &'a Value)> {
    attrs
        .after(prefix)
        .take_while(move |(k, _)| k.starts_with(prefix))
        .filter(move |(k, _)| k.as_bytes().get(prefix.len()) == Some(&b'.'))
}

/// The keys under `prefix.` rebuilt as nested JSON: objects whose keys are all numbers become
/// lists, in numeric order; where two keys meet, the first in key order wins (a value in the
/// way of a deeper key keeps it out); a key of more than 32 segments is left out.
fn unflatten(attrs: &Attrs, prefix: &str) -> Option<Value> {
    let mut root: Vec<(&str, Node)> = Vec::new();
    let mut any = false;
    for (k, v) in nested(attrs, prefix) {
        let mut path = [""; 32];
        let mut depth = 0;
        for segment in k[prefix.len() + 1..].split('.') {
            if depth == path.len() {
                depth += 1;
                break;
            }
            path[depth] = segment;
            depth += 1;
        }
        if depth <= path.len() {
            any |= put(&mut root, &path[..depth], v);
        }
    }
    any.then(|| node_value(Node::Branch(root)))
}

/// A tree of keys as [`unflatten`] builds it: segments borrowed, values not copied yet.
enum Node<'a> {
    Leaf(&'a Value),
    Branch(Vec<(&'a str, Node<'a>)>),
}

/// Puts `v` at `path` under `children`, unless a value is in the way (false) or one is there
/// already (kept).
fn put<'a>(children: &mut Vec<(&'a str, Node<'a>)>, path: &[&'a str], v: &'a Value) -> bool {
    let Some((first, rest)) = path.split_first() else { return false };
    // Siblings are kept in order (keys mostly come in order: a new one goes at the end).
    let i = match children.binary_search_by(|(k, _)| (*k).cmp(first)) {
        Ok(_) if rest.is_empty() => return true,
        Ok(i) => i,
        Err(i) if rest.is_empty() => {
            children.insert(i, (first, Node::Leaf(v)));
            return true;
        }
        Err(i) => {
            children.insert(i, (first, Node::Branch(Vec::new())));
            i
        }
    };
    match &mut children[i].1 {
        Node::Branch(c) => put(c, rest, v),
        Node::Leaf(_) => false,
    }
}

/// The tree as JSON: a branch whose keys are all numbers is a list (by number, then as an
/// object orders its keys), any other an object.
fn node_value(n: Node) -> Value {
    let children = match n {
        Node::Leaf(v) => return v.clone(),
        Node::Branch(c) => c,
    };
    let numbers: Option<Vec<usize>> = children.iter().map(|(k, _)| k.parse::<usize>().ok()).collect();
    match numbers {
        Some(numbers) if !children.is_empty() => {
            let mut items: Vec<(usize, &str, Node)> =
                numbers.into_iter().zip(children).map(|(i, (k, n))| (i, k, n)).collect();
            items.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
            Value::Array(items.into_iter().map(|(_, _, n)| node_value(n)).collect())
        }
        _ => Value::Object(children.into_iter().map(|(k, n)| (k.to_owned(), node_value(n))).collect()),
    }
}

/// Nanoseconds since the epoch of an RFC 3339 time (`2026-12-04T04:30:50.289787Z`, `+00:00`).
fn parse_time(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse().ok() };
    if b.len() < 19 || b.get(4) != Some(&b'-') || !matches!(b.get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let (y, mo, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (h, mi, sec) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    let mut rest = &s[19..];
    let mut nanos: i128 = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        let f: String = frac[..n].chars().chain(std::iter::repeat('0')).take(9).collect();
        nanos = f.parse().ok()?;
        rest = &frac[n..];
    }
    let offset: i64 = match rest.as_bytes().first() {
        None | Some(b'Z' | b'z') => 0,
        Some(sign @ (b'+' | b'-')) => {
            let hh: i64 = rest.get(1..3)?.parse().ok()?;
            let mm: i64 = rest.get(4..6).and_then(|m| m.parse().ok()).unwrap_or(0);
            let o = hh * 3600 + mm * 60;
            if *sign == b'+' { o } else { -o }
        }
        _ => return None,
    };
    // Days from the civil date (proleptic Gregorian).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((mo + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset;
    Some(i128::from(secs) * 1_000_000_000 + nanos)
}

/// The `n`th span of the file (hand-made OTLP may lack ids: one trace, ids by position).
fn span_of(v: &Value, n: usize) -> Option<Span> {
    Some(span_unnumbered(v)?.numbered(n))
}

/// A span from its JSON, not numbered yet ([`Span::numbered`]).
fn span_unnumbered(v: &Value) -> Option<Span> {
    let o = v.as_object()?;
    let mut attrs = attributes(o.get("attributes"));
    for (k, x) in o.iter().filter_map(|(k, x)| Some((k.strip_prefix("attributes.")?, x))) {
        flatten(k, x.clone(), &mut attrs);
    }
    let events = o
        .get("events")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| Event {
            name: e.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
            attrs: attributes(e.get("attributes")),
        })
        .collect();
    Some(span_with(v, attrs, events))
}

/// A span from its own fields in `v` (ids, name, start, status, `span_kind`; its attributes
/// and events are not read here) and its flattened `attrs` and `events`; not numbered yet
/// (an empty id when it has none).
fn span_with(v: &Value, attrs: Attrs, events: Vec<Event>) -> Span {
    let name = v.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let trace = id_of(field(v, TRACE_ID)).unwrap_or_default();
    let id = id_of(field(v, SPAN_ID)).unwrap_or_default();
    let parent = id_of(field(v, PARENT_ID));
    let start = match field(v, &START) {
        Some(Value::Number(n)) => n.as_u64().map(i128::from).unwrap_or(0),
        Some(Value::String(s)) => start_text(s),
        // The JS SDK's HrTime: [seconds, nanoseconds].
        Some(Value::Array(hr)) => match (hr.first().and_then(Value::as_u64), hr.get(1).and_then(Value::as_u64)) {
            (Some(secs), Some(nanos)) => i128::from(secs) * 1_000_000_000 + i128::from(nanos),
            _ => 0,
        },
        _ => 0,
    };
    let is_error = match field(v, STATUS_CODE) {
        Some(Value::Number(n)) => n.as_u64() == Some(2),
        Some(Value::String(s)) => s.to_ascii_uppercase().ends_with("ERROR"),
        _ => false,
    };
    let message = field(v, STATUS_MESSAGE).and_then(Value::as_str);
    let kind = attrs
        .get("openinference.span.kind")
        .or_else(|| v.get("span_kind"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_ascii_uppercase();
    Span {
        trace,
        id,
        parent,
        name,
        start,
        error: is_error.then(|| message.unwrap_or_default().to_owned()),
        kind,
        attrs,
        events,
    }
}

// ---------------------------------------------------------------------------------------------
// Messages

fn arguments(v: Option<&Value>) -> Args {
    match v {
        Some(Value::String(s)) => parse_args(s),
        Some(other) => Args::new(other),
        None => Args::new(&Value::Object(Default::default())),
    }
}

/// Items from messages in the current conventions (`parts` of type text, tool_call,
/// tool_call_response — its content under `response`, or `result` in pydantic-ai).
fn items(messages: &[Value]) -> Vec<Item> {
    let mut out = Vec::new();
    for m in messages {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        let parts = m.get("parts").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let mut text = Vec::new();
        let mut calls = Vec::new();
        for p in parts {
            match p.get("type").and_then(Value::as_str) {
                Some("tool_call") => calls.push(CallItem {
                    id: p.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: p.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    args: arguments(p.get("arguments")),
                }),
                Some("tool_call_response") => out.push(Item::Result {
                    id: p.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: None,
                    content: text_of(p.get("response").or_else(|| p.get("result")).unwrap_or(&Value::Null)),
                    flag: None,
                }),
                _ => text.extend(p.get("content").and_then(Value::as_str).map(str::to_owned)),
            }
        }
        match role {
            "assistant" => out.push(Item::model(Some(text.join("\n")), calls)),
            "user" if !text.is_empty() => out.push(Item::User(text.join("\n"))),
            _ => {}
        }
    }
    out
}

/// Items from OpenAI-Chat-shaped messages (`role`, `content`, `tool_calls[].function`,
/// `tool_call_id`); unknown roles are skipped.
fn chat_items(messages: &[Value]) -> Vec<Item> {
    let mut out = Vec::new();
    for m in messages {
        let content = || text_of(m.get("content").unwrap_or(&Value::Null));
        match m.get("role").and_then(Value::as_str).unwrap_or_default() {
            "user" | "human" => out.push(Item::User(content())),
            "assistant" | "ai" | "model" => {
                let mut calls = Vec::new();
                for c in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                    let f = c.get("function").unwrap_or(c);
                    calls.push(CallItem {
                        id: c.get("id").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned),
                        name: f.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                        args: arguments(f.get("arguments")),
                    });
                }
                if let Some(f) = m.get("function_call").filter(|f| f.is_object()) {
                    calls.push(CallItem {
                        id: None,
                        name: f.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                        args: arguments(f.get("arguments")),
                    });
                }
                out.push(Item::model(m.get("content").map(text_of), calls));
            }
            "tool" | "function" => out.push(Item::Result {
                id: m.get("tool_call_id").and_then(Value::as_str).map(str::to_owned),
                name: m.get("name").and_then(Value::as_str).map(str::to_owned),
                content: content(),
                flag: None,
            }),
            _ => {}
        }
    }
    out
}

/// An OpenInference message (`message.role`, `message.content` or `message.contents`,
/// `message.tool_calls[].tool_call.{id, function}`) in the OpenAI Chat shape, its fields moved
/// (a request's messages are the conversation so far: copying them again would cost).
fn oi_message(m: Value) -> Value {
    let mut m = match m {
        Value::Object(mut o) => o.remove("message").unwrap_or(Value::Object(o)),
        other => other,
    };
    let mut take = |k: &str| m.as_object_mut().and_then(|o| o.remove(k));
    let content = match take("content") {
        Some(c) => c,
        None => {
            let parts = match take("contents") {
                Some(Value::Array(parts)) => parts,
                _ => Vec::new(),
            };
            let texts: Vec<&str> =
                parts.iter().filter_map(|p| p.get("message_content").unwrap_or(p).get("text")?.as_str()).collect();
            Value::String(texts.join("\n"))
        }
    };
    let calls = match take("tool_calls") {
        Some(Value::Array(calls)) => calls
            .into_iter()
            .map(|c| match c {
                Value::Object(mut o) => o.remove("tool_call").unwrap_or(Value::Object(o)),
                other => other,
            })
            .collect(),
        _ => Vec::new(),
    };
    let mut out = Map::new();
    out.insert("role".into(), take("role").unwrap_or(Value::Null));
    out.insert("content".into(), content);
    out.insert("tool_calls".into(), Value::Array(calls));
    out.insert("tool_call_id".into(), take("tool_call_id").unwrap_or(Value::Null));
    out.insert("name".into(), take("name").unwrap_or(Value::Null));
    Value::Object(out)
}

/// Items from pre-1.37 span events: gen_ai.{user,assistant,tool}.message and gen_ai.choice,
/// each with its fields in the event's attributes (or a JSON `body`).
fn legacy_items(events: &[Event]) -> (Vec<Item>, Option<Item>) {
    let mut out = Vec::new();
    let mut choice = None;
    for e in events {
        let body = match e.attrs.get("body") {
            Some(Value::String(b)) => serde_json::from_str(b).unwrap_or(Value::Null),
            Some(v) => v.clone(),
            None => unflatten(&e.attrs, "body").unwrap_or(Value::Null),
        };
        let field = |k: &str| e.attrs.get(k).or_else(|| body.get(k)).and_then(Value::as_str).map(str::to_owned);
        let calls_of = |v: &Value| -> Vec<CallItem> {
            v.get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| CallItem {
                    id: c.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: c.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    args: arguments(c.pointer("/function/arguments")),
                })
                .collect()
        };
        match e.name.as_str() {
            "gen_ai.user.message" => out.push(Item::User(field("content").unwrap_or_default())),
            "gen_ai.assistant.message" => out.push(Item::model(field("content"), calls_of(&body))),
            "gen_ai.tool.message" => out.push(Item::Result {
                id: field("id"),
                name: None,
                content: field("content").unwrap_or_default(),
                flag: None,
            }),
            "gen_ai.choice" => {
                let msg = body.get("message").cloned().unwrap_or(Value::Null);
                choice =
                    Some(Item::model(msg.get("content").and_then(Value::as_str).map(str::to_owned), calls_of(&msg)));
            }
            _ => {}
        }
    }
    (out, choice)
}

// ---------------------------------------------------------------------------------------------
// Spans read

#[derive(Clone, Copy, PartialEq)]
enum Role {
    Model,
    Tool,
    Other,
}

fn role(s: &Span) -> Role {
    let op = s.str("gen_ai.operation.name").unwrap_or_default();
    // The Vercel AI SDK's `ai.operationId` (the span's name where it is missing).
    let ai_op = s.str("ai.operationId").unwrap_or(&s.name);
    if s.kind == "TOOL"
        || op == "execute_tool"
        || s.str("traceloop.span.kind") == Some("tool")
        || ai_op == "ai.toolCall"
    {
        Role::Tool
    } else if s.kind == "LLM"
        || matches!(op, "chat" | "text_completion" | "generate_content")
        || (s.kind.is_empty() && matches!(s.str("llm.request.type"), Some("chat" | "completion")))
        || (ai_op.starts_with("ai.") && (ai_op.ends_with(".doGenerate") || ai_op.ends_with(".doStream")))
    {
        Role::Model
    } else {
        Role::Other
    }
}

/// Each span's role in a trace, where a model span with another model span below it is no call
/// of its own (`Other`): one instrumentation's span wrapping another's of the same call, as
/// Google ADK's `generate_content` wraps OpenLLMetry's `openai.chat`, or LangChain's LLM span
/// the OpenAI instrumentor's; the spans nearest the wire are the calls (a wrapper holding two,
/// a retry within it, holds two calls).
fn roles(spans: &[&Span]) -> Vec<Role> {
    let mut roles: Vec<Role> = spans.iter().map(|s| role(s)).collect();
    if roles.iter().filter(|r| **r == Role::Model).count() < 2 {
        return roles;
    }
    let at: rustc_hash::FxHashMap<&str, usize> = spans.iter().enumerate().map(|(i, s)| (s.id.as_str(), i)).collect();
    let mut wrappers = Vec::new();
    for (i, s) in spans.iter().enumerate() {
        if roles[i] != Role::Model {
            continue;
        }
        // Up the parents (at most as many steps as spans: a cycle of parents ends too).
        let mut parent = s.parent.as_deref();
        for _ in 0..spans.len() {
            let Some(&p) = parent.and_then(|p| at.get(p)) else { break };
            if roles[p] == Role::Model {
                wrappers.push(p);
            }
            parent = spans[p].parent.as_deref();
        }
    }
    for p in wrappers {
        roles[p] = Role::Other;
    }
    roles
}

/// A model span's request items, its response, and its finish reason.
struct ModelCall {
    input: Vec<Item>,
    response: Item,
    finish: Option<String>,
}

/// A message list of one of the dialects, or `None` (a gap when the attribute is there but is
/// no list of messages).
fn message_list(s: &Span, key: &str, gaps: &mut Vec<String>) -> Option<Vec<Value>> {
    if !s.has(key) {
        return None;
    }
    match s.json(key) {
        Some(Value::Array(list)) => Some(list),
        _ => {
            gaps.push(format!("span `{}`: `{key}` is not a list of messages; its messages were not read", s.name));
            None
        }
    }
}

fn request(s: &Span, gaps: &mut Vec<String>) -> Vec<Item> {
    if let Some(l) = message_list(s, "gen_ai.input.messages", gaps) {
        return items(&l);
    }
    if let Some(l) = message_list(s, "llm.input_messages", gaps) {
        return chat_items(&l.into_iter().map(oi_message).collect::<Vec<_>>());
    }
    if let Some(l) = message_list(s, "gen_ai.prompt", gaps) {
        return chat_items(&l);
    }
    for key in ["request_data", "input.value"] {
        if let Some(Value::Array(l)) = s.json(key).as_ref().and_then(|r| r.get("messages")) {
            return chat_items(l);
        }
    }
    if let Some(l) = message_list(s, "ai.prompt.messages", gaps) {
        return ai_sdk_items(&l);
    }
    legacy_items(&s.events).0
}

/// A Vercel AI SDK tool call (`ai.response.toolCalls`, an assistant message's `tool-call` part):
/// `{toolCallId, toolName, input}` (5.x on, `input` a JSON string or a value) or `args` (4.x).
fn ai_sdk_call(c: &Value) -> CallItem {
    CallItem {
        id: c.get("toolCallId").and_then(Value::as_str).map(str::to_owned),
        name: c.get("toolName").and_then(Value::as_str).unwrap_or_default().to_owned(),
        args: arguments(c.get("input").or_else(|| c.get("args"))),
    }
}

/// Items from the Vercel AI SDK's prompt (`ai.prompt.messages`: its language-model messages,
/// `content` a string or parts). A `tool` message's `tool-result` parts are results: 5.x on an
/// `output` `{type, value}` whose type `error-text` / `error-json` is the structural failure
/// flag and `execution-denied` a call that never ran; 4.x a `result` with `isError`.
fn ai_sdk_items(messages: &[Value]) -> Vec<Item> {
    let mut out = Vec::new();
    for m in messages {
        let parts: Vec<&Value> = match m.get("content") {
            Some(Value::Array(a)) => a.iter().collect(),
            _ => Vec::new(),
        };
        let texts = || -> String {
            match m.get("content") {
                Some(Value::String(t)) => t.clone(),
                _ => parts
                    .iter()
                    .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
            }
        };
        match m.get("role").and_then(Value::as_str).unwrap_or_default() {
            "user" => out.push(Item::User(texts())),
            "assistant" => {
                let calls = parts
                    .iter()
                    .filter(|p| p.get("type").and_then(Value::as_str) == Some("tool-call"))
                    .map(|p| ai_sdk_call(p))
                    .collect();
                let text = texts();
                out.push(Item::model((!text.is_empty()).then_some(text), calls));
            }
            "tool" => {
                for p in parts.iter().filter(|p| p.get("type").and_then(Value::as_str) == Some("tool-result")) {
                    let id = p.get("toolCallId").and_then(Value::as_str).map(str::to_owned);
                    let name = p.get("toolName").and_then(Value::as_str).map(str::to_owned);
                    let (content, flag) = match (p.get("output"), p.get("result")) {
                        (Some(o), _) => {
                            let kind = o.get("type").and_then(Value::as_str).unwrap_or_default();
                            let content = text_of(o.get("value").or_else(|| o.get("reason")).unwrap_or(o));
                            if kind == "execution-denied" {
                                out.push(Item::Cancelled { id, content, why: "AI SDK output type execution-denied" });
                                continue;
                            }
                            let flag = match kind {
                                "error-text" | "error-json" => (true, "AI SDK tool-result output type error-*"),
                                _ => (false, "AI SDK tool-result output type"),
                            };
                            (content, Some(flag))
                        }
                        (None, r) => {
                            let flag = match p.get("isError").and_then(Value::as_bool) {
                                Some(true) => Some((true, "AI SDK tool-result isError: true")),
                                Some(false) => Some((false, "AI SDK tool-result isError: false")),
                                None => None,
                            };
                            (text_of(r.unwrap_or(&Value::Null)), flag)
                        }
                    };
                    out.push(Item::Result { id, name, content, flag });
                }
            }
            _ => {}
        }
    }
    out
}

fn response(s: &Span, gaps: &mut Vec<String>) -> Option<Item> {
    let first_model = |items: Vec<Item>| items.into_iter().find(|i| matches!(i, Item::Model { .. }));
    if let Some(l) = message_list(s, "gen_ai.output.messages", gaps) {
        return first_model(items(&l));
    }
    if let Some(l) = message_list(s, "llm.output_messages", gaps) {
        return first_model(chat_items(&l.into_iter().map(oi_message).collect::<Vec<_>>()));
    }
    if let Some(l) = message_list(s, "gen_ai.completion", gaps) {
        let l: Vec<Value> = l.into_iter().map(assistant_role).collect();
        return first_model(chat_items(&l));
    }
    if let Some(m) = s.json("response_data").as_ref().and_then(|r| r.get("message")) {
        return first_model(chat_items(&[assistant_role(m.clone())]));
    }
    if let (_, Some(choice)) = legacy_items(&s.events) {
        return Some(choice);
    }
    if s.has("ai.response.text") || s.has("ai.response.toolCalls") {
        let calls = match s.json("ai.response.toolCalls") {
            Some(Value::Array(l)) => l.iter().map(ai_sdk_call).collect(),
            _ => Vec::new(),
        };
        return Some(Item::model(s.str("ai.response.text").map(str::to_owned), calls));
    }
    let out = s.attrs.get("output.value")?;
    let body = out.as_str().and_then(|t| serde_json::from_str::<Value>(t).ok()).unwrap_or_else(|| out.clone());
    if body.get("choices").is_some() {
        return Format::OpenAiChat.provider().response(&body);
    }
    if body.get("content").is_some_and(Value::is_array) {
        return Format::Anthropic.provider().response(&body);
    }
    if body.get("candidates").is_some() {
        return Format::Gemini.provider().response(&body);
    }
    Some(Item::model(Some(text_of(out)), Vec::new()))
}

/// A completion message with its `role` set to assistant (OpenLLMetry omits none, but a
/// response message is the assistant's whatever it says).
fn assistant_role(mut m: Value) -> Value {
    if let Some(o) = m.as_object_mut() {
        o.insert("role".into(), Value::String("assistant".into()));
    }
    m
}

static HTTP_STATUS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\b(?:error code|status(?:[ _]code)?|http)\W{0,3}([1-5]\d\d)\b").expect("valid"));

/// A failed model call's HTTP status: a status in its error's text, else 429 for a text that
/// says rate limit (the AI SDK's `APICallError` carries the provider's message, not its
/// status), else 500.
fn http_status(s: &Span) -> u16 {
    let texts = [s.error.as_deref(), s.exception_field("exception.message")];
    let flat = texts.into_iter().flatten();
    flat.clone()
        .find_map(|t| HTTP_STATUS.captures(t).and_then(|c| c[1].parse().ok()))
        .filter(|c| *c >= 400)
        .or_else(|| flat.clone().any(|t| RATE_LIMIT.is_match(t)).then_some(429))
        .unwrap_or(500)
}

static RATE_LIMIT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\b(rate limit|too many requests)").expect("valid"));

fn finish_reason(s: &Span) -> Option<String> {
    if let Some(r) = s.str("llm.finish_reason") {
        return Some(r.to_owned());
    }
    let first = |v: &Value| match v {
        Value::Array(a) => a.first().and_then(Value::as_str).map(str::to_owned),
        Value::String(t) => match serde_json::from_str::<Value>(t) {
            Ok(Value::Array(a)) => a.first().and_then(Value::as_str).map(str::to_owned),
            _ => Some(t.clone()),
        },
        _ => None,
    };
    if let Some(r) = s.attrs.get("gen_ai.response.finish_reasons").and_then(first) {
        return Some(r);
    }
    if let Some(r) = s.str("gen_ai.completion.0.finish_reason").or_else(|| s.str("ai.response.finishReason")) {
        return Some(r.to_owned());
    }
    let at = |v: &Value, ptr: &str| v.pointer(ptr).and_then(Value::as_str).map(str::to_owned);
    if let Some(r) = s.json("gen_ai.output.messages").and_then(|v| at(&v, "/0/finish_reason")) {
        return Some(r);
    }
    let out = s.json("output.value")?;
    at(&out, "/choices/0/finish_reason").or_else(|| at(&out, "/stop_reason"))
}

fn model_call(s: &Span, gaps: &mut Vec<String>) -> ModelCall {
    let input = request(s, gaps);
    let response = match (response(s, gaps), &s.error) {
        (Some(mut r), _) => {
            if let Item::Model { tokens_in, tokens_out, .. } = &mut r {
                let read = |keys: &[&str]| keys.iter().find_map(|k| s.num(k));
                let input = [
                    "gen_ai.usage.input_tokens",
                    "llm.token_count.prompt",
                    "gen_ai.usage.prompt_tokens",
                    "ai.usage.inputTokens",
                    "ai.usage.promptTokens",
                ];
                if let Some(n) = read(&input) {
                    *tokens_in = n;
                }
                let out = [
                    "gen_ai.usage.output_tokens",
                    "llm.token_count.completion",
                    "gen_ai.usage.completion_tokens",
                    "ai.usage.outputTokens",
                    "ai.usage.completionTokens",
                ];
                if let Some(n) = read(&out) {
                    *tokens_out = n;
                }
            }
            r
        }
        (None, Some(_)) => {
            Item::Model { text: None, calls: Vec::new(), tokens_in: 0, tokens_out: 0, status: http_status(s) }
        }
        (None, None) => Item::model(None, Vec::new()),
    };
    ModelCall { input, response, finish: finish_reason(s) }
}

fn tools_of(s: &Span) -> Vec<ToolDef> {
    let mut list: Vec<Value> = match s.json("gen_ai.tool.definitions") {
        Some(Value::Array(l)) => l,
        _ => Vec::new(),
    };
    if let Some(Value::Array(oi)) = s.json("llm.tools") {
        list.extend(oi.iter().filter_map(|t| {
            let schema = t.pointer("/tool/json_schema")?;
            match schema {
                Value::String(j) => serde_json::from_str(j).ok(),
                other => Some(other.clone()),
            }
        }));
    }
    let mut out = Format::OpenAiChat.provider().tools(&serde_json::json!({ "tools": list }));
    if let Some(Value::Array(f)) = s.json("llm.request.functions") {
        for t in Format::OpenAiChat.provider().tools(&serde_json::json!({ "functions": f })) {
            let parameters = match t.parameters {
                Some(Value::String(p)) => serde_json::from_str(&p).ok(),
                other => other,
            };
            out.push(ToolDef { parameters, ..t });
        }
    }
    out
}

/// One tool execution span.
struct ToolRun {
    name: String,
    id: Option<String>,
    args: Option<Value>,
    output: Option<String>,
    /// The failure's text and the evidence naming the field.
    failed: Option<(String, &'static str)>,
}

fn tool_run(s: &Span) -> ToolRun {
    let traceloop = s.str("traceloop.span.kind") == Some("tool");
    let op = s.str("gen_ai.operation.name") == Some("execute_tool");
    let span_name = s.name.strip_prefix("execute_tool ").or_else(|| s.name.strip_suffix(".tool")).unwrap_or(&s.name);
    let name = ["tool.name", "gen_ai.tool.name", "traceloop.entity.name", "ai.toolCall.name"]
        .iter()
        .find_map(|k| s.str(k))
        .unwrap_or(span_name)
        .to_owned();
    let id = ["gen_ai.tool.call.id", "tool.id", "tool_call.id", "ai.toolCall.id"]
        .iter()
        .find_map(|k| s.str(k))
        .map(str::to_owned);
    let json_or_text = |v: &Value| match v {
        Value::String(t) => serde_json::from_str(t).unwrap_or_else(|_| v.clone()),
        other => other.clone(),
    };
    let args_keys: &[&str] = if s.kind == "TOOL" {
        &["input.value"]
    } else {
        &["gen_ai.tool.call.arguments", "tool_arguments", "input.value", "ai.toolCall.args"]
    };
    let mut args = args_keys.iter().find_map(|k| s.attrs.get(k)).map(json_or_text);
    if traceloop && let Some(input) = s.attrs.get("traceloop.entity.input").map(json_or_text) {
        let positional = input.get("args").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
        args = if positional { input.get("args").cloned() } else { input.get("kwargs").cloned() };
    }
    let output =
        ["gen_ai.tool.call.result", "tool_response", "output.value", "traceloop.entity.output", "ai.toolCall.result"]
            .iter()
            .find_map(|k| s.attrs.get(k))
            .map(|v| match json_or_text(v) {
                // A JSON-encoded string return value (Traceloop) is the string.
                Value::String(t) if v.as_str().is_some_and(|raw| raw.starts_with('"')) => t,
                _ => text_of(v),
            });
    let evidence = if s.kind == "TOOL" {
        "OpenInference TOOL span status ERROR"
    } else if traceloop {
        "traceloop tool span status ERROR"
    } else if op {
        "execute_tool span status ERROR"
    } else if s.has("ai.toolCall.name") {
        "AI SDK ai.toolCall span status ERROR"
    } else {
        "tool span status ERROR"
    };
    let deferred = s.attrs.contains_key("pydantic_ai.tool.deferral.name");
    let text = || {
        s.exception_field("exception.message")
            .map(str::to_owned)
            .or_else(|| s.error.clone().filter(|e| !e.is_empty()))
            .unwrap_or_else(|| "the tool span ended with status ERROR".to_owned())
    };
    let failed = match (&s.error, s.exception(), &output) {
        _ if deferred => None,
        (Some(_), _, _) => Some((text(), evidence)),
        (None, Some(_), None) => Some((text(), "tool span exception event")),
        _ => None,
    };
    ToolRun { name, id, args, output, failed }
}

// ---------------------------------------------------------------------------------------------
// Conversations

/// A conversation's steps in time order, before tool spans are paired.
enum Slot {
    Item(Item),
    Tool(ToolRun),
}

/// One trace read: its steps, the signatures of its first request and of its last request and
/// response (to chain traces), and how it ended.
/// Owned, so a trace's spans can be dropped once it is read: how it ends is worked out here,
/// both ways its conversation's last model call can have gone (`endings[failed_last]`).
struct TraceRead {
    slots: Vec<Slot>,
    first_request: Vec<String>,
    last_exchange: Vec<String>,
    endings: [Option<Ending>; 2],
    provider: Option<String>,
    model: Option<String>,
    tools: Vec<ToolDef>,
}

fn read_trace(spans: &[&Span], gaps: &mut Vec<String>) -> TraceRead {
    let ids: rustc_hash::FxHashSet<&str> = spans.iter().map(|s| s.id.as_str()).collect();
    let root = spans.iter().find(|s| s.parent.as_deref().is_none_or(|p| !ids.contains(p))).copied();
    let mut last_call: Option<(&Span, Option<String>)> = None;
    let mut t = TraceRead {
        slots: Vec::new(),
        first_request: Vec::new(),
        last_exchange: Vec::new(),
        endings: [None, None],
        provider: None,
        model: None,
        tools: Vec::new(),
    };
    for (s, role) in spans.iter().zip(roles(spans)) {
        match role {
            Role::Tool => t.slots.push(Slot::Tool(tool_run(s))),
            Role::Model => {
                let call = model_call(s, gaps);
                let sigs: Vec<String> = call.input.iter().map(signature).collect();
                if last_call.is_none() {
                    t.first_request = sigs.clone();
                }
                t.last_exchange = sigs;
                t.last_exchange.push(signature(&call.response));
                // The request holds the history: only what follows its last assistant message is new.
                let new = call.input.iter().rposition(|i| matches!(i, Item::Model { .. })).map_or(0, |p| p + 1);
                t.slots.extend(call.input.into_iter().skip(new).map(Slot::Item));
                if let Item::Model { calls, .. } = &call.response
                    && calls.iter().any(|c| c.name.is_empty())
                {
                    gaps.push(format!("span `{}`: a tool call without a name", s.name));
                }
                t.slots.push(Slot::Item(call.response));
                last_call = Some((s, call.finish));
                let provider = ["gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"]
                    .iter()
                    .find_map(|k| s.str(k));
                t.provider = t.provider.take().or(provider.map(str::to_owned));
                let model = ["gen_ai.request.model", "llm.model_name", "gen_ai.response.model"]
                    .iter()
                    .find_map(|k| s.str(k).map(str::to_owned))
                    .or_else(|| {
                        ["request_data", "llm.invocation_parameters"].iter().find_map(|k| {
                            s.json(k).and_then(|r| r.get("model").and_then(Value::as_str).map(str::to_owned))
                        })
                    });
                t.model = t.model.take().or(model);
                for d in tools_of(s) {
                    if !t.tools.iter().any(|x| x.name == d.name) {
                        t.tools.push(d);
                    }
                }
            }
            Role::Other => {}
        }
    }
    t.endings = [false, true].map(|failed_last| ending(root, last_call.clone(), failed_last));
    t
}

/// Pairs each tool span with a call and turns the slots into items: a span's failure flags
/// the call's result, or becomes the result when no message holds one.
fn resolve(slots: Vec<Slot>, gaps: &mut Vec<String>) -> Vec<Item> {
    let mut items: Vec<Option<Item>> = Vec::with_capacity(slots.len());
    let mut runs: Vec<(usize, ToolRun)> = Vec::new();
    for slot in slots {
        match slot {
            Slot::Item(i) => items.push(Some(i)),
            Slot::Tool(r) => {
                runs.push((items.len(), r));
                items.push(None);
            }
        }
    }
    // Every call the responses made: (item, call, id, name, arguments).
    let mut all_calls = Vec::new();
    for (m, item) in items.iter().enumerate() {
        if let Some(Item::Model { calls, .. }) = item {
            for (c, call) in calls.iter().enumerate() {
                all_calls.push((m, c, call.id.clone(), call.name.clone(), call.args.value()));
            }
        }
    }
    let mut paired: HashSet<(usize, usize)> = HashSet::new();
    let mut claimed: HashSet<usize> = HashSet::new();
    for (at, run) in runs {
        let open: Vec<_> = all_calls.iter().filter(|(m, c, ..)| *m < at && !paired.contains(&(*m, *c))).collect();
        let by_id = run.id.as_ref().and_then(|id| open.iter().find(|o| o.2.as_ref() == Some(id)));
        let same_name = || open.iter().filter(|o| o.3 == run.name);
        let pick = by_id
            .or_else(|| same_name().find(|o| run.args.as_ref() == Some(&o.4)))
            .or_else(|| same_name().next())
            .map(|o| (o.0, o.1));
        let (m, c) = match pick {
            Some(p) => p,
            None => {
                // No call asked for it (outputs redacted or unread): a call of the model call before it.
                let Some(m) = items[..at].iter().rposition(|i| matches!(i, Some(Item::Model { status: 200, .. })))
                else {
                    gaps.push(format!("tool span `{}` ran before any model call: not counted", run.name));
                    continue;
                };
                let Some(Item::Model { calls, .. }) = &mut items[m] else { continue };
                calls.push(CallItem {
                    id: run.id.clone(),
                    name: run.name.clone(),
                    args: Args::new(run.args.as_ref().unwrap_or(&Value::Object(Map::new()))),
                });
                (m, calls.len() - 1)
            }
        };
        paired.insert((m, c));
        let Some(Item::Model { calls, .. }) = &items[m] else { continue };
        let Some(call) = calls.get(c) else { continue };
        let (call_id, call_name) = (call.id.clone(), call.name.clone());
        // The call's result among the messages after it: by id, else the next unclaimed one
        // without an id before the next model call.
        let found = match &call_id {
            Some(id) => (m + 1..items.len())
                .find(|&i| matches!(&items[i], Some(Item::Result { id: Some(r), .. }) if r == id) && !claimed.contains(&i)),
            None => (m + 1..items.len())
                .take_while(|&i| !matches!(items[i], Some(Item::Model { .. })))
                .find(|&i| {
                    matches!(&items[i], Some(Item::Result { id: None, name, .. }) if name.as_ref().is_none_or(|n| *n == call_name))
                        && !claimed.contains(&i)
                }),
        };
        match found {
            Some(i) => {
                claimed.insert(i);
                if let (Some(Item::Result { flag, .. }), Some((_, evidence))) = (&mut items[i], &run.failed) {
                    *flag = Some((true, *evidence));
                }
            }
            None => {
                let (content, flag) = match run.failed {
                    Some((text, evidence)) => (text, Some((true, evidence))),
                    None => (run.output.unwrap_or_default(), None),
                };
                items[at] = Some(Item::Result { id: call_id, name: Some(call_name), content, flag });
            }
        }
    }
    items.into_iter().flatten().collect()
}

/// How the conversation ended, from its last trace's root span and last model call.
fn ending(root: Option<&Span>, last_call: Option<(&Span, Option<String>)>, failed_last: bool) -> Option<Ending> {
    let error_reason = |s: &Span| {
        s.exception_field("exception.type")
            .or_else(|| s.str("error.type"))
            .map(str::to_owned)
            .unwrap_or_else(|| "status ERROR".to_owned())
    };
    if let Some(r) = root.filter(|r| r.error.is_some()) {
        return Some(Ending::new(FinalOutcome::Error, error_reason(r)));
    }
    let (call, finish) = last_call?;
    if failed_last {
        return Some(Ending::new(FinalOutcome::Error, error_reason(call)));
    }
    let finish = finish?;
    let outcome = match finish.to_ascii_lowercase().as_str() {
        "stop" | "end_turn" | "stop_sequence" | "completed" | "end" => FinalOutcome::Answer,
        "length" | "max_tokens" => FinalOutcome::CutOff,
        "tool_calls" | "tool_call" | "tool_use" | "function_call" | "tool-calls" => FinalOutcome::CutOff,
        "content_filter" | "safety" | "error" | "content-filter" => FinalOutcome::Error,
        _ => return None,
    };
    let mut e = Ending::new(outcome, finish);
    if outcome == FinalOutcome::Answer {
        let answer = root.and_then(|r| {
            let v = ["output.value", "final_result", "traceloop.entity.output", "ai.response.text"]
                .iter()
                .find_map(|k| r.attrs.get(k))?;
            let text = match v.as_str().map(|t| (t, serde_json::from_str::<Value>(t))) {
                Some((_, Ok(Value::String(inner)))) => inner,
                Some((t, _)) => t.to_owned(),
                None => text_of(v),
            };
            (!text.trim().is_empty() && r.kind != "LLM").then_some(text)
        });
        e.text = answer;
    }
    Some(e)
}

pub fn conversations(v: &Value, id: &str) -> Result<Vec<Conversation>, ImportError> {
    let jaeger = jaeger_traces(v).map(|t| jaeger_spans(&t));
    let v = jaeger.as_ref().unwrap_or(v);
    let raw = raw_spans(v).ok_or_else(|| {
        ImportError::at(
            "",
            "OTLP/JSON `resourceSpans`, a list of spans (`name`, span and trace ids, `attributes`), or a Jaeger \
             trace answer (`data` of traces with `traceID` and `spans`)",
        )
    })?;
    let mut gaps = Vec::new();
    let mut spans = Vec::with_capacity(raw.len());
    for (i, r) in raw.iter().enumerate() {
        match span_of(r, i) {
            Some(s) => spans.push((s, i)),
            None => gaps.push(format!("span {} is not a JSON object: not read", i + 1)),
        }
    }
    // Traces in order of their first span; spans by start time, ties in file order.
    spans.sort_by_key(|(s, i)| (s.start, *i));
    let mut traces: Vec<Vec<&Span>> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (s, _) in &spans {
        match index.get(s.trace.as_str()) {
            Some(&t) => traces[t].push(s),
            None => {
                index.insert(&s.trace, traces.len());
                traces.push(vec![s]);
            }
        }
    }
    let mut chain = Chain::default();
    for list in &traces {
        let mut trace_gaps = Vec::new();
        let t = read_trace(list, &mut trace_gaps);
        chain.push(t, trace_gaps);
    }
    Ok(chain.finish(id, gaps, cores::available()))
}

/// Traces read in order, each chained onto the previous conversation when its first request
/// extends that conversation's last request and response.
#[derive(Default)]
struct Chain {
    groups: Vec<(TraceRead, Vec<String>)>,
}

impl Chain {
    /// The next trace read, and its gaps.
    fn push(&mut self, t: TraceRead, trace_gaps: Vec<String>) {
        if t.slots.is_empty() && trace_gaps.is_empty() {
            return; // no model or tool span: not an LLM trace
        }
        let extends = self.groups.last().is_some_and(|(g, _)| {
            let prev = &g.last_exchange;
            !prev.is_empty() && t.first_request.len() > prev.len() && t.first_request[..prev.len()] == prev[..]
        });
        match self.groups.last_mut() {
            Some((g, g_gaps)) if extends => {
                g.slots.extend(t.slots);
                (g.last_exchange, g.endings) = (t.last_exchange, t.endings);
                g.provider = g.provider.take().or(t.provider);
                g.model = g.model.take().or(t.model);
                for d in t.tools {
                    if !g.tools.iter().any(|x| x.name == d.name) {
                        g.tools.push(d);
                    }
                }
                g_gaps.extend(trace_gaps);
            }
            _ => self.groups.push((t, trace_gaps)),
        }
    }

    /// The conversations, ids made from `id`; the file's own gaps go to the first.
    fn finish(self, id: &str, gaps: Vec<String>, cores: usize) -> Vec<Conversation> {
        let many = self.groups.len() > 1;
        let mut file_gaps = Some(gaps);
        let groups: Vec<_> = self.groups.into_iter().map(|(g, g_gaps)| (g, g_gaps, file_gaps.take())).collect();
        // Each conversation is resolved on its own: shared over the cores, kept in order.
        cores::map_in_order(groups, cores, |n, (g, mut g_gaps, file_gaps)| {
            let conv_id = if many { format!("{id}#{}", n + 1) } else { id.to_owned() };
            let mut c = Conversation::new(conv_id, SourceFormat::Otel.name());
            c.items = resolve(g.slots, &mut g_gaps);
            let failed_last = c.items.iter().rev().find_map(|i| match i {
                Item::Model { status, .. } => Some(*status != 200),
                _ => None,
            });
            let [ok, failed] = g.endings;
            c.ending = if failed_last.unwrap_or(false) { failed } else { ok };
            c.provider = g.provider.map(|p| if p == "openai" { "openai-chat".to_owned() } else { p });
            c.model = g.model;
            c.tools = g.tools;
            g_gaps.extend(file_gaps.into_iter().flatten());
            c.gaps = g_gaps;
            c
        })
    }
}

// ---------------------------------------------------------------------------------------------
// JSONL, a trace at a time

/// An OTel JSONL file — OTLP/JSON requests (what the Collector's file exporter writes) or flat
/// spans (SDK `to_json()` objects, JS `ReadableSpan`s, Phoenix DataFrame rows), one a line —
/// read as [`conversations`] reads the list of its lines, without holding the parsed file.
///
/// Each line is parsed once, a window of lines at a time shared over the machine's cores, and
/// its spans kept with their trace. A file longer than [`HOLD`] bytes is surveyed past them
/// ([`Survey`]: each span's trace id alone, nothing else built), which tells which line is
/// each trace's last; from there each trace is read as soon as its last line is passed, and its
/// spans dropped. So memory holds the spans of at most `HOLD` bytes of lines, then those of a
/// window and of the traces still open (a Collector batch's, or one trace's), never the whole
/// file's; and a file under `HOLD` is parsed once. Traces are ordered by their earliest span
/// (start, then place in the file) and chained in that order at the end, as in the whole
/// reading; the cores, windows and `HOLD` change the speed and memory, never the result.
///
/// `None` when a line does not fit — no JSON, requests and flat spans mixed, a line that is no
/// span, a span of a trace the survey said was over — for the whole reading, which says why.
pub fn jsonl_conversations(lines: &[&str], id: &str) -> Option<Vec<Conversation>> {
    let how = Reading { cores: cores::available(), window: WINDOW, hold: HOLD };
    jsonl_conversations_on(lines, id, how)
}

/// The bytes of a window of lines (a line longer than this is a window of its own).
const WINDOW: usize = 1 << 20;

/// The bytes of lines whose spans are held before the rest of the file is surveyed. Holding
/// spans trades memory for the survey's parse: `inspect` of a 32 MiB OTLP JSONL file, held
/// whole, takes 4% less time than the build that surveyed every line first, at 114 MiB against
/// 82 MiB; past this many bytes, memory counts more.
const HOLD: usize = 64 << 20;

/// How a JSONL file is read: over how many cores, in windows of how many bytes, holding the
/// spans of how many bytes before the rest is surveyed.
#[derive(Clone, Copy, Debug)]
struct Reading {
    cores: usize,
    window: usize,
    hold: usize,
}

fn jsonl_conversations_on(lines: &[&str], id: &str, how: Reading) -> Option<Vec<Conversation>> {
    let otlp = match lines.first() {
        Some(l) => serde_json::from_str::<SpanHead>(l).ok()?.resource_spans.is_some(),
        None => false,
    };
    let mut traces = JsonlTraces::default();
    // Each line's traces that end there, once the rest of the file is surveyed.
    let mut closing: Option<Vec<Vec<usize>>> = None;
    let (mut held, mut at) = (0, 0);
    for range in cores::windows(lines, how.window) {
        let parsed = cores::map_in_order(lines[range.clone()].to_vec(), how.cores, |_, text| line_spans(text, otlp));
        let mut ended = Vec::new();
        for (n, spans) in range.clone().zip(parsed) {
            for s in spans? {
                traces.add(s.numbered(at), at)?;
                at += 1;
            }
            if let Some(closing) = &closing {
                ended.extend_from_slice(&closing[n]);
            }
            held += lines[n].len();
        }
        if closing.is_none() && held >= how.hold && range.end < lines.len() {
            let rest = range.end;
            let survey = Survey::of(&lines[rest..], how.cores, how.window)?;
            if survey.otlp != otlp {
                return None;
            }
            let seen = traces.count();
            let mut later = vec![false; seen];
            let mut by_line = vec![Vec::new(); lines.len()];
            for (name, last) in survey.names.iter().zip(survey.last_line) {
                let t = traces.named(name);
                if t < seen {
                    later[t] = true;
                }
                by_line[rest + last].push(t);
            }
            ended.extend((0..seen).filter(|&t| !later[t]));
            closing = Some(by_line);
        }
        traces.read(ended, how.cores);
    }
    traces.finish(id, how.cores)
}

/// A line's spans, not numbered yet: an OTLP request's, or a flat span; `None` when it is not
/// the kind of line the file's first is.
fn line_spans(text: &str, otlp: bool) -> Option<Vec<Span>> {
    if otlp {
        return line::spans(text);
    }
    let v: Value = serde_json::from_str(text).ok()?;
    if v.as_object().and_then(resource_spans).is_some() || !is_span(&v) {
        return None;
    }
    Some(vec![span_unnumbered(&v)?])
}

/// The traces of a JSONL file as its lines are read: each one's spans while it is open, then
/// what reading it gave.
#[derive(Default)]
struct JsonlTraces {
    /// Each trace's index, by its id as the whole reading groups by it.
    index: rustc_hash::FxHashMap<String, usize>,
    /// Each trace's earliest span (start, index in the file); `None` until one is read.
    earliest: Vec<Option<(i128, usize)>>,
    /// Each open trace's spans, with their index in the file.
    spans: Vec<Vec<(Span, usize)>>,
    read: Vec<Option<(TraceRead, Vec<String>)>>,
}

impl JsonlTraces {
    fn count(&self) -> usize {
        self.earliest.len()
    }

    /// The index of the trace `name`, a new one when it is not known.
    fn named(&mut self, name: &str) -> usize {
        if let Some(&t) = self.index.get(name) {
            return t;
        }
        let t = self.count();
        self.index.insert(name.to_owned(), t);
        self.earliest.push(None);
        self.spans.push(Vec::new());
        self.read.push(None);
        t
    }

    /// The file's `at`th span, kept with its trace; `None` when that trace was read already.
    fn add(&mut self, s: Span, at: usize) -> Option<()> {
        let t = self.named(&s.trace);
        if self.read[t].is_some() {
            return None;
        }
        let first = (s.start, at);
        self.earliest[t] = Some(self.earliest[t].map_or(first, |e| e.min(first)));
        self.spans[t].push((s, at));
        Some(())
    }

    /// Reads the traces `ended` over `cores` (spans by start, ties in file order) and drops
    /// their spans.
    fn read(&mut self, ended: Vec<usize>, cores: usize) {
        let lists: Vec<(usize, Vec<(Span, usize)>)> =
            ended.into_iter().map(|t| (t, std::mem::take(&mut self.spans[t]))).collect();
        let which: Vec<usize> = lists.iter().map(|(t, _)| *t).collect();
        let done = cores::map_in_order(lists, cores, |_, (_, mut spans)| {
            spans.sort_by_key(|(s, i)| (s.start, *i));
            let list: Vec<&Span> = spans.iter().map(|(s, _)| s).collect();
            let mut gaps = Vec::new();
            (read_trace(&list, &mut gaps), gaps)
        });
        for (t, r) in which.into_iter().zip(done) {
            self.read[t] = Some(r);
        }
    }

    /// The conversations, once every line is read: the traces still open read, all chained
    /// in order of their earliest span. `None` when the survey named a trace no line had.
    fn finish(mut self, id: &str, cores: usize) -> Option<Vec<Conversation>> {
        let open = (0..self.count()).filter(|&t| self.read[t].is_none()).collect();
        self.read(open, cores);
        let earliest: Vec<(i128, usize)> = self.earliest.into_iter().collect::<Option<_>>()?;
        let mut order: Vec<usize> = (0..earliest.len()).collect();
        order.sort_by_key(|&t| earliest[t]);
        let mut chain = Chain::default();
        for t in order {
            let (trace, gaps) = self.read[t].take()?;
            chain.push(trace, gaps);
        }
        Some(chain.finish(id, Vec::new(), cores))
    }
}

/// A survey of JSONL lines: each span's trace id alone (strings borrowed from the text,
/// nothing else built), which tells each trace's last line.
#[derive(Debug)]
struct Survey<'a> {
    /// The lines are OTLP/JSON requests (else flat spans).
    otlp: bool,
    /// Each trace's id as the whole reading groups by it, in order of first appearance.
    names: Vec<Cow<'a, str>>,
    /// Each trace's last line.
    last_line: Vec<usize>,
}

impl<'a> Survey<'a> {
    /// `lines` read in windows of about `window` bytes, one after another, each shared over
    /// `cores`; `None` when a line is no JSON or no span, or lines mix requests and spans.
    fn of(lines: &[&'a str], cores: usize, window: usize) -> Option<Survey<'a>> {
        let mut r = Survey { otlp: false, names: Vec::new(), last_line: Vec::new() };
        let mut index: rustc_hash::FxHashMap<Cow<'a, str>, usize> = Default::default();
        for range in cores::windows(lines, window) {
            let heads = cores::map_in_order(lines[range.clone()].to_vec(), cores, |_, line| {
                serde_json::from_str::<SpanHead<'a>>(line).ok()
            });
            for (n, head) in range.zip(heads) {
                let mut head = head?;
                let otlp = head.resource_spans.is_some();
                if n == 0 {
                    r.otlp = otlp;
                } else if otlp != r.otlp {
                    return None;
                }
                match head.resource_spans.take() {
                    Some(rs) => {
                        let spans =
                            rs.into_vec().into_iter().filter_map(Obj::into_object).flat_map(Resource::into_spans);
                        for s in spans {
                            r.note(&s, n, &mut index)?;
                        }
                    }
                    None => r.note(&head, n, &mut index)?,
                }
            }
        }
        Some(r)
    }

    fn note(
        &mut self,
        s: &SpanHead<'a>,
        line: usize,
        index: &mut rustc_hash::FxHashMap<Cow<'a, str>, usize>,
    ) -> Option<()> {
        let name = s.trace()?;
        match index.get(name.as_ref()) {
            Some(&t) => self.last_line[t] = line,
            None => {
                index.insert(name.clone(), self.names.len());
                self.names.push(name);
                self.last_line.push(line);
            }
        }
        Some(())
    }
}

/// A JSON value as the survey sees it: what [`field`] and [`id_of`] look at; nothing else is
/// built.
#[derive(Debug, Default, Clone, PartialEq)]
enum Head<'a> {
    #[default]
    Absent,
    Null,
    Str(Cow<'a, str>),
    U64(u64),
    /// Another number.
    Num,
    Bool,
    Seq,
    Map,
}

impl Head<'_> {
    fn is_set(&self) -> bool {
        !matches!(self, Head::Absent | Head::Null)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Head<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Head<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Head<'a>, E> {
                Ok(Head::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Head<'a>, E> {
                Ok(Head::Str(Cow::Owned(s.to_owned())))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Head<'a>, E> {
                Ok(Head::U64(n))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Head<'a>, E> {
                Ok(u64::try_from(n).map_or(Head::Num, Head::U64))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Head<'a>, E> {
                Ok(Head::Num)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Head<'a>, E> {
                Ok(Head::Bool)
            }
            fn visit_unit<E>(self) -> Result<Head<'a>, E> {
                Ok(Head::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Head<'a>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Head::Seq)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Head<'a>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Head::Map)
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// The keys the survey looks at, told apart without building them.
#[derive(Clone, Copy)]
enum Key {
    /// [`TRACE_ID`]'s keys, in order (dotted ones as the key itself).
    Trace(usize),
    Span,
    /// `context` and `spanContext`, which hold the ids under the dotted keys' second halves.
    Context(usize),
    ResourceSpans(usize),
    Other,
}

/// Where a span keeps its start time, in the order [`span_of`] tries them.
const START: [&str; 4] = ["startTimeUnixNano", "start_time_unix_nano", "start_time", "startTime"];

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, k: &str) -> Result<Key, E> {
                let at = |keys: &[&str]| keys.iter().position(|x| *x == k);
                Ok(if let Some(i) = at(TRACE_ID) {
                    Key::Trace(i)
                } else if at(SPAN_ID).is_some() {
                    Key::Span
                } else if let Some(i) = at(&["context", "spanContext"]) {
                    Key::Context(i)
                } else if let Some(i) = at(&["resourceSpans", "resource_spans"]) {
                    Key::ResourceSpans(i)
                } else {
                    Key::Other
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// A span's trace id (a flat line's or an OTLP request's span), or a line's
/// `resourceSpans`. A key given twice counts as the last, as in a parsed `Value`.
#[derive(Debug, Default)]
struct SpanHead<'a> {
    trace: [Head<'a>; 4],
    /// `context.trace_id` and `spanContext.traceId`, nested.
    nested_trace: [Head<'a>; 2],
    /// `resourceSpans`, else `resource_spans`, when there (whatever its value).
    resource_spans: Option<List<Obj<Resource<SpanHead<'a>>>>>,
}

impl<'a> SpanHead<'a> {
    /// The span's trace id as [`span_of`] makes it (empty when none); `None` when it is a
    /// number other than a non-negative integer (not worth reading here).
    fn trace(&self) -> Option<Cow<'a, str>> {
        let found = (0..4usize).find_map(|k| {
            let nested = k.checked_sub(2).map(|n| &self.nested_trace[n]);
            std::iter::once(&self.trace[k]).chain(nested).find(|h| h.is_set())
        });
        Some(match found {
            // Most ids are already as they are matched: borrowed, not rebuilt.
            Some(Head::Str(Cow::Borrowed(b)))
                if !b.is_empty()
                    && b.trim() == *b
                    && !b.starts_with("0x")
                    && !b.bytes().any(|c| c.is_ascii_uppercase()) =>
            {
                Cow::Borrowed(b)
            }
            Some(Head::Str(s)) => Cow::Owned(id_text(s).unwrap_or_default()),
            Some(Head::U64(n)) => Cow::Owned(n.to_string()),
            Some(Head::Num) => return None,
            _ => Cow::Borrowed(""),
        })
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for SpanHead<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = SpanHead<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a span or an OTLP/JSON request")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SpanHead<'a>, A::Error> {
                let mut h = SpanHead::default();
                let mut rs: [Option<List<Obj<Resource<SpanHead<'a>>>>>; 2] = [None, None];
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Trace(i) => h.trace[i] = map.next_value()?,
                        Key::Context(i) => {
                            let ids: ContextHead = map.next_value()?;
                            h.nested_trace[i] = ids.0[i].clone();
                        }
                        Key::ResourceSpans(i) => rs[i] = Some(map.next_value()?),
                        Key::Span | Key::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                let [camel, snake] = rs;
                h.resource_spans = camel.or(snake);
                Ok(h)
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// A `context` / `spanContext` value's `trace_id` and `traceId` (unset when it is no object).
#[derive(Default)]
struct ContextHead<'a>([Head<'a>; 2]);

impl<'de: 'a, 'a> Deserialize<'de> for ContextHead<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = ContextHead<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ContextHead<'a>, A::Error> {
                let mut c = ContextHead::default();
                while let Some(key) = map.next_key::<Cow<str>>()? {
                    match key.as_ref() {
                        "trace_id" => c.0[0] = map.next_value()?,
                        "traceId" => c.0[1] = map.next_value()?,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(c)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ContextHead<'a>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(ContextHead::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<ContextHead<'a>, E> {
                Ok(ContextHead::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<ContextHead<'a>, E> {
                Ok(ContextHead::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<ContextHead<'a>, E> {
                Ok(ContextHead::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<ContextHead<'a>, E> {
                Ok(ContextHead::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<ContextHead<'a>, E> {
                Ok(ContextHead::default())
            }
            fn visit_unit<E>(self) -> Result<ContextHead<'a>, E> {
                Ok(ContextHead::default())
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A resource of an OTLP/JSON request, for its scopes' spans ([`SCOPE_SPANS`]), each read as
/// `S`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, bound(deserialize = "S: Deserialize<'de> + Default"))]
struct Resource<S> {
    #[serde(rename = "scopeSpans")]
    scope_spans: List<Obj<Scope<S>>>,
    #[serde(rename = "scope_spans")]
    scope_spans_snake: List<Obj<Scope<S>>>,
    #[serde(rename = "instrumentationLibrarySpans")]
    library_spans: List<Obj<Scope<S>>>,
}

impl<S> Resource<S> {
    /// The scopes' spans, in the order the whole reading lists them (scopes that are no
    /// object have none).
    fn into_spans(self) -> impl Iterator<Item = S> {
        [self.scope_spans, self.scope_spans_snake, self.library_spans]
            .into_iter()
            .flat_map(List::into_vec)
            .filter_map(Obj::into_object)
            .flat_map(|scope| scope.spans.into_vec())
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, bound(deserialize = "S: Deserialize<'de> + Default"))]
struct Scope<S> {
    spans: List<S>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(k: &str, v: &str) -> Value {
        json!({"key": k, "value": {"stringValue": v}})
    }

    /// The AI SDK's prompt messages, 5.x on and 4.x: calls with `input` or `args`, results whose
    /// output type or `isError` is the flag, a denied execution as a call that never ran.
    #[test]
    fn ai_sdk_prompt_messages() {
        let v6 = json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [
                {"type": "tool-call", "toolCallId": "a", "toolName": "f", "input": {"x": 1}},
                {"type": "tool-call", "toolCallId": "b", "toolName": "f", "input": "{\"x\":2}"},
                {"type": "tool-call", "toolCallId": "c", "toolName": "g", "input": {}}]},
            {"role": "tool", "content": [
                {"type": "tool-result", "toolCallId": "a", "toolName": "f", "output": {"type": "json", "value": {"ok": 1}}},
                {"type": "tool-result", "toolCallId": "b", "toolName": "f", "output": {"type": "error-text", "value": "boom"}},
                {"type": "tool-result", "toolCallId": "c", "toolName": "g", "output": {"type": "execution-denied", "reason": "no"}}]}
        ]);
        let items = ai_sdk_items(v6.as_array().unwrap());
        assert!(matches!(&items[0], Item::User(t) if t == "go"));
        let Item::Model { calls, .. } = &items[1] else { panic!("{items:?}") };
        let args: Vec<String> = calls.iter().map(|c| c.args.to_string()).collect();
        assert_eq!(args, [r#"{"x":1}"#, r#"{"x":2}"#, "{}"]);
        assert!(matches!(&items[2], Item::Result { flag: Some((false, _)), content, .. } if content == r#"{"ok":1}"#));
        assert!(matches!(&items[3], Item::Result { flag: Some((true, _)), content, .. } if content == "boom"));
        assert!(matches!(&items[4], Item::Cancelled { id: Some(c), .. } if c == "c"));
        let v4 = json!([
            {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "a", "toolName": "f", "args": {"q": "x"}}]},
            {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "a", "toolName": "f", "result": "nope", "isError": true}]}
        ]);
        let items = ai_sdk_items(v4.as_array().unwrap());
        assert!(matches!(&items[0], Item::Model { calls, .. } if calls[0].args.to_string() == r#"{"q":"x"}"#));
        assert!(matches!(&items[1], Item::Result { flag: Some((true, _)), content, .. } if content == "nope"));
    }

    /// A JS SDK span as JSON: ids under `spanContext`, the parent under `parentSpanContext`, the
    /// start as `[seconds, nanoseconds]`.
    #[test]
    fn js_sdk_readable_spans() {
        let span = json!({"name": "ai.generateText.doGenerate", "spanContext": {"traceId": "T", "spanId": "S"},
            "parentSpanContext": {"traceId": "T", "spanId": "P"}, "startTime": [2, 5], "status": {"code": 2, "message": "x"},
            "attributes": {"ai.operationId": "ai.generateText.doGenerate"}});
        assert!(looks_like(&json!([span.clone()])));
        let s = span_of(&span, 0).unwrap();
        assert_eq!(
            (s.trace.as_str(), s.id.as_str(), s.parent.as_deref(), s.start),
            ("t", "s", Some("p"), 2_000_000_005)
        );
        assert!(s.error.is_some() && role(&s) == Role::Model);
    }

    use crate::trace::inspect::stats;

    fn survey<'a>(lines: &[&'a str]) -> Option<Survey<'a>> {
        Survey::of(lines, 2, WINDOW)
    }

    /// The JSONL reading gives the same conversations on one core or several, in one window
    /// or a line a window, holding every line's spans or surveying the file after none, one
    /// or a few windows; they are the whole reading's.
    #[test]
    fn jsonl_reading_is_the_same_on_any_cores_and_windows() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/otel/openinference-openai.otlp.json");
        let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        // Each resource a request, each a line, the spans' traces in several lines.
        let mut text = String::new();
        for (k, r) in v["resourceSpans"].as_array().unwrap().iter().enumerate().cycle().take(40) {
            let line = json!({"resourceSpans": [r]}).to_string();
            text += &line.replace("\"traceId\":\"", &format!("\"traceId\":\"{:02x}", k / 7));
            text.push('\n');
        }
        let lines: Vec<&str> = text.lines().collect();
        let read = |cores, window, hold| {
            let how = Reading { cores, window, hold };
            format!("{:?}", jsonl_conversations_on(&lines, "t", how).unwrap())
        };
        let one = read(1, usize::MAX, usize::MAX);
        assert!(one.len() > 1000 && one.matches("Conversation {").count() > 1, "{one:.200}");
        let held = [(2, usize::MAX, usize::MAX), (3, 1, usize::MAX), (2, 3000, usize::MAX), (1, 1, usize::MAX)];
        let surveyed = [(2, 1, 0), (1, 3000, 0), (2, 3000, 6000), (3, 1, 20_000), (2, 1, text.len() - 100)];
        for (cores, window, hold) in held.into_iter().chain(surveyed) {
            assert_eq!(read(cores, window, hold), one, "{cores} cores, windows of {window} bytes, holding {hold}");
        }
        let whole: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(format!("{:?}", conversations(&Value::Array(whole), "t").unwrap()), one);
    }

    fn traces(v: &Value) -> Vec<crate::trace::Trace> {
        let convs = conversations(v, "t").unwrap();
        convs.into_iter().map(|c| crate::trace::import::conversation::to_trace(c, &Default::default())).collect()
    }

    /// The pre-1.37 form: per-message span events and `gen_ai.system`; the second request
    /// repeats the first call, which is counted once, from the first response.
    #[test]
    fn legacy_span_events() {
        let body = |v: Value| kv("body", &v.to_string());
        let call = json!({"tool_calls": [{"id": "c1", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]});
        let span = |start: &str, events: Vec<Value>| {
            json!({
                "traceId": "t1", "spanId": start, "name": "chat", "startTimeUnixNano": start,
                "attributes": [kv("gen_ai.operation.name", "chat"), kv("gen_ai.system", "openai")],
                "events": events,
            })
        };
        let user = json!({"name": "gen_ai.user.message", "attributes": [body(json!({"content": "weather?"}))]});
        let first = span(
            "1",
            vec![user.clone(), json!({"name": "gen_ai.choice", "attributes": [body(json!({"message": call}))]})],
        );
        let second = span(
            "2",
            vec![
                user,
                json!({"name": "gen_ai.assistant.message", "attributes": [body(call.clone())]}),
                json!({"name": "gen_ai.tool.message", "attributes": [body(json!({"id": "c1", "content": "Error: city not found"}))]}),
                json!({"name": "gen_ai.choice", "attributes": [body(json!({"message": {"content": "Sorry, no data."}}))]}),
            ],
        );
        let doc = json!({"resourceSpans": [{"scopeSpans": [{"spans": [first, second]}]}]});
        let t = traces(&doc);
        let s = stats(&t[0]);
        assert_eq!((s.model_calls, s.tool_calls, s.tool_failures, s.ended), (2, 1, 1, "answer"));
        assert_eq!(s.rows[0].outcome, "terminal");
    }

    /// The reading of nested keys the tree replaced (one JSON object per step, then lists):
    /// the reference the tree must agree with.
    fn unflatten_by_objects(attrs: &Attrs, prefix: &str) -> Option<Value> {
        fn insert(node: &mut Value, path: &[&str], v: &Value) -> bool {
            let (Some(o), Some((first, rest))) = (node.as_object_mut(), path.split_first()) else { return false };
            if rest.is_empty() {
                if !o.contains_key(*first) {
                    o.insert(first.to_string(), v.clone());
                }
                return true;
            }
            if !o.contains_key(*first) {
                o.insert(first.to_string(), Value::Object(Map::new()));
            }
            insert(o.get_mut(*first).unwrap(), rest, v)
        }
        fn lists(v: Value) -> Value {
            match v {
                Value::Object(o) if !o.is_empty() && o.keys().all(|k| k.parse::<usize>().is_ok()) => {
                    let mut items: Vec<(usize, Value)> =
                        o.into_iter().map(|(k, x)| (k.parse().unwrap(), lists(x))).collect();
                    items.sort_by_key(|(i, _)| *i);
                    Value::Array(items.into_iter().map(|(_, x)| x).collect())
                }
                Value::Object(o) => Value::Object(o.into_iter().map(|(k, x)| (k, lists(x))).collect()),
                other => other,
            }
        }
        let mut root = Value::Object(Map::new());
        let mut any = false;
        for (k, v) in nested(attrs, prefix) {
            let path: Vec<&str> = k[prefix.len() + 1..].split('.').collect();
            if path.len() <= 32 {
                any |= insert(&mut root, &path, v);
            }
        }
        any.then(|| lists(root))
    }

    proptest::proptest! {
        /// Any keys (numbers with and without leading zeros, names, empty segments, values in
        /// the way of deeper keys, keys too deep) rebuild as the object-by-object reading did.
        #[test]
        fn unflatten_agrees_with_the_object_reading(
            keys in proptest::collection::vec(
                (proptest::collection::vec("(0|1|01|2|10|a|b|)", 1..5), 0u8..3), 0..24),
            deep in proptest::bool::ANY,
        ) {
            let mut attrs = Attrs::new();
            for (path, v) in &keys {
                attrs.insert(format!("p.{}", path.join(".")), json!(v));
            }
            if deep {
                attrs.insert(format!("p.{}", vec!["0"; 33].join(".")), json!(1));
            }
            attrs.insert("p".into(), json!("exact"));
            attrs.insert("pq.0".into(), json!("other prefix"));
            proptest::prop_assert_eq!(unflatten(&attrs, "p"), unflatten_by_objects(&attrs, "p"));
        }
    }

    /// Flat, half-nested and nested OpenInference attributes read alike; message indices are
    /// numbers (10 after 9), not text.
    #[test]
    fn openinference_attribute_shapes_agree() {
        let mut flat = Map::new();
        for i in 0..11 {
            flat.insert(format!("llm.input_messages.{i}.message.role"), json!("user"));
            flat.insert(format!("llm.input_messages.{i}.message.content"), json!(format!("m{i}")));
        }
        flat.insert("llm.output_messages.0.message.role".into(), json!("assistant"));
        flat.insert("llm.output_messages.0.message.content".into(), json!("done"));
        flat.insert("openinference.span.kind".into(), json!("LLM"));
        let mut attrs = Attrs::new();
        flatten("", Value::Object(flat), &mut attrs);
        let list = unflatten(&attrs, "llm.input_messages").unwrap();
        assert_eq!(list.pointer("/10/message/content"), Some(&json!("m10")));
        assert_eq!(list.pointer("/2/message/content"), Some(&json!("m2")));

        let half = json!({"llm.input_messages": [{"message.role": "user", "message.content": "hi"}],
            "llm.output_messages": [{"message.role": "assistant", "message.content": "done"}],
            "openinference.span.kind": "LLM"});
        let nested = json!({"llm": {"input_messages": [{"message": {"role": "user", "content": "hi"}}],
            "output_messages": [{"message": {"role": "assistant", "content": "done"}}]},
            "openinference": {"span": {"kind": "LLM"}}});
        for attributes in [half, nested] {
            let span = json!({"name": "llm", "context": {"trace_id": "a", "span_id": "b"}, "attributes": attributes});
            let t = traces(&json!([span]));
            let s = stats(&t[0]);
            assert_eq!((s.model_calls, s.ended), (1, "answer"), "{span}");
        }
    }

    /// A model span with model spans below it is no call of its own: a LangChain LLM span over
    /// the OpenAI instrumentor's one span is one call; a wrapper over two (a retry within it)
    /// is two, the first failed; a model span beside another, in no parent chain, stays a call.
    #[test]
    fn a_model_span_wrapping_others_is_not_a_call() {
        let span = |id: &str, parent: Option<&str>, start: u32, attributes: Value, status: &str| {
            json!({"name": format!("s{id}"), "context": {"trace_id": "t", "span_id": id}, "parent_id": parent,
                "start_time": format!("2026-01-01T00:00:0{start}Z"), "status": {"status_code": status},
                "attributes": attributes})
        };
        let llm = json!({"openinference.span.kind": "LLM"});
        let chat = json!({"gen_ai.operation.name": "chat"});
        let agent = json!({"openinference.span.kind": "AGENT"});
        let calls = |spans: Value| stats(&traces(&spans)[0]).model_calls;
        let one = json!([
            span("a", None, 1, agent.clone(), "OK"),
            span("w", Some("a"), 2, llm.clone(), "OK"),
            span("c", Some("w"), 3, chat.clone(), "OK")
        ]);
        assert_eq!(calls(one), 1);
        let retried = json!([
            span("w", None, 1, llm.clone(), "OK"),
            span("c1", Some("w"), 2, chat.clone(), "ERROR"),
            span("c2", Some("w"), 3, chat.clone(), "OK")
        ]);
        let t = &traces(&retried)[0];
        assert_eq!((stats(t).model_calls, stats(t).failed_model_calls), (2, 1));
        let beside = json!([
            span("a", None, 1, agent, "OK"),
            span("m1", Some("a"), 2, llm.clone(), "OK"),
            span("m2", Some("a"), 3, chat, "OK")
        ]);
        assert_eq!(calls(beside), 2);
    }

    /// A span carrying OpenInference and GenAI attributes is one call; a TOOL span without a
    /// call id pairs by name and arguments, and its ERROR flags the result message.
    #[test]
    fn dual_dialect_counts_once_and_tool_error_flags_the_result() {
        let llm = |start: &str, input: Value, output: Value| {
            json!({"name": "ChatCompletion", "context": {"trace_id": "0xa", "span_id": format!("0x{start}")},
                "parent_id": null, "start_time": format!("2026-01-01T00:00:0{start}Z"), "status": {"status_code": "OK"},
                "attributes": {"openinference.span.kind": "LLM", "gen_ai.operation.name": "chat",
                    "llm.input_messages": input, "llm.output_messages": [output],
                    "gen_ai.usage.input_tokens": 5, "llm.token_count.prompt": 5}})
        };
        let call = |id: &str, city: &str| {
            json!({"tool_call.id": id, "tool_call.function.name": "w",
            "tool_call.function.arguments": format!("{{\"city\": \"{city}\"}}")})
        };
        let user = json!({"message.role": "user", "message.content": "weather?"});
        let asked =
            json!({"message.role": "assistant", "message.tool_calls": [call("p", "Paris"), call("a", "Atlantis")]});
        let tool = |start: &str, city: &str, error: bool| {
            json!({"name": "w", "context": {"trace_id": "0xa", "span_id": format!("0x{start}")},
                "start_time": format!("2026-01-01T00:00:0{start}Z"),
                "status": if error { json!({"status_code": "ERROR", "description": "ValueError: nope"}) } else { json!({"status_code": "OK"}) },
                "attributes": {"openinference.span.kind": "TOOL", "gen_ai.operation.name": "execute_tool",
                    "tool.name": "w", "input.value": format!("{{\"city\": \"{city}\"}}")}})
        };
        let results = [
            json!({"message.role": "tool", "message.tool_call_id": "p", "message.content": "sunny"}),
            json!({"message.role": "tool", "message.tool_call_id": "a", "message.content": "no data"}),
        ];
        // The Atlantis span runs first: pairing goes by arguments, not position.
        let spans = json!([
            llm("1", json!([user]), asked.clone()),
            tool("2", "Atlantis", true),
            tool("3", "Paris", false),
            llm(
                "4",
                json!([user, asked, results[0], results[1]]),
                json!({"message.role": "assistant", "message.content": "ok"})
            ),
        ]);
        let t = traces(&spans);
        let s = stats(&t[0]);
        assert_eq!((s.model_calls, s.tool_calls, s.tool_failures, s.ended), (2, 2, 1, "answer"));
        let failed: Vec<&str> = s.rows.iter().filter(|r| r.outcome != "ok").map(|r| r.args).collect();
        assert_eq!(failed.len(), 1);
        assert!(failed[0].contains("Atlantis"), "{failed:?}");
        let failed_ids: Vec<&str> = t[0]
            .events
            .iter()
            .filter_map(|e| match e {
                crate::trace::TraceEvent::ToolResult { call_id, ok: false, .. } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(failed_ids, ["a"], "the calls are the response's, the failure the result message's");
        let tokens: u64 = t[0]
            .events
            .iter()
            .map(|e| match e {
                crate::trace::TraceEvent::ModelCall { tokens_in, .. } => *tokens_in,
                _ => 0,
            })
            .sum();
        assert_eq!(tokens, 10, "tokens counted once per call");
    }

    /// A tool that crashed with no result message is a failed result from its span; the root
    /// span's ERROR ends the conversation in an error, whatever the last call's finish reason.
    #[test]
    fn crashed_tool_and_failed_root() {
        let attrs = |v: Value| {
            let o = v.as_object().unwrap();
            Value::Array(o.iter().map(|(k, x)| json!({"key": k, "value": {"stringValue": x}})).collect())
        };
        let span = |id: &str, parent: Option<&str>, start: u64, status: Value, a: Value| {
            json!({"traceId": "T", "spanId": id, "parentSpanId": parent.unwrap_or(""), "name": id,
                "startTimeUnixNano": start.to_string(), "status": status, "attributes": attrs(a)})
        };
        let error = json!({"code": "STATUS_CODE_ERROR", "message": "RuntimeError: crashed"});
        let doc = json!({"resourceSpans": [{"scopeSpans": [{"spans": [
            span("root", None, 1, error.clone(), json!({"gen_ai.operation.name": "invoke_agent"})),
            span("chat", Some("root"), 2, json!({}), json!({"gen_ai.operation.name": "chat",
                "gen_ai.input.messages": "[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"go\"}]}]",
                "gen_ai.output.messages": "[{\"role\":\"assistant\",\"parts\":[{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":\"f\",\"arguments\":\"{}\"},{\"type\":\"tool_call\",\"id\":\"c2\",\"name\":\"f\",\"arguments\":\"{}\"}],\"finish_reason\":\"tool_call\"}]"})),
            span("ok", Some("root"), 3, json!({}), json!({"gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "f", "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.result": "fine"})),
            span("bad", Some("root"), 4, error, json!({"gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "f", "gen_ai.tool.call.id": "c2"})),
        ]}]}]});
        let t = traces(&doc);
        let s = stats(&t[0]);
        assert_eq!((s.model_calls, s.tool_calls, s.tool_failures, s.ended), (1, 2, 1, "error"));
    }

    /// Bare instrumentation: one trace per call, chained when a request extends the last.
    #[test]
    fn traces_chain_by_request_prefix() {
        let span = |trace: &str, start: u64, attrs: Value| {
            json!({"name": "openai.chat", "context": {"trace_id": trace, "span_id": trace}, "parent_id": null,
                "start_time": format!("2026-01-01T00:00:{start:02}.5+00:00"), "attributes": attrs})
        };
        let spans = json!([
            span(
                "b",
                2,
                json!({"llm.request.type": "chat", "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "hi",
                "gen_ai.prompt.1.role": "assistant", "gen_ai.prompt.1.tool_calls.0.id": "c", "gen_ai.prompt.1.tool_calls.0.name": "f",
                "gen_ai.prompt.1.tool_calls.0.arguments": "{}", "gen_ai.prompt.2.role": "tool", "gen_ai.prompt.2.tool_call_id": "c",
                "gen_ai.prompt.2.content": "Error: no", "gen_ai.completion.0.content": "sorry", "gen_ai.completion.0.finish_reason": "stop"})
            ),
            span(
                "a",
                1,
                json!({"llm.request.type": "chat", "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "hi",
                "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.tool_calls.0.id": "c",
                "gen_ai.completion.0.tool_calls.0.name": "f", "gen_ai.completion.0.tool_calls.0.arguments": "{}",
                "gen_ai.completion.0.finish_reason": "tool_calls"})
            ),
            span(
                "c",
                3,
                json!({"llm.request.type": "chat", "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "again"})
            ),
        ]);
        let t = traces(&spans);
        assert_eq!(t.len(), 2);
        let s: Vec<_> = t.iter().map(stats).collect();
        assert_eq!((s[0].model_calls, s[0].tool_calls, s[0].tool_failures, s[0].ended), (2, 1, 1, "answer"));
        assert_eq!(s[1].model_calls, 1);
    }

    /// The survey of a JSONL line finds each span's trace as `span_of` does: in any key order,
    /// nested or dotted, nulls passed over for the next key, ids trimmed and lower-cased
    /// (escaped ones too).
    #[test]
    fn survey_agrees_with_span_of() {
        let spans = [
            r#"{"attributes": {}, "startTimeUnixNano": "17", "traceId": "ab", "spanId": "1", "name": "x"}"#,
            r#"{"name": "x", "traceId": null, "trace_id": " 0xAB ", "start_time_unix_nano": 5, "attributes": []}"#,
            r#"{"name": "x", "context": {"span_id": "s", "trace_id": "cAfe"}, "start_time": "2026-01-01T00:00:01.5+00:00"}"#,
            r#"{"name": "x", "context.trace_id": null, "context": {"trace_id": "n"}, "start_time": null, "startTime": [2, 5]}"#,
            r#"{"name": "x", "context.trace_id": "flat", "context": {"trace_id": "nested"}, "startTime": [2, -5]}"#,
            r#"{"name": "x", "spanContext": {"traceId": "JS", "spanId": "s"}, "startTime": 1.5}"#,
            r#"{"name": "x", "spanContext.traceId": "d", "spanContext": "odd", "context": [1], "startTime": "soon"}"#,
            r#"{"name": "x", "traceId": 42, "startTimeUnixNano": {"a": 1}}"#,
            r#"{"name": "x", "traceId": "", "trace_id": "skipped: an empty id is set"}"#,
            r#"{"name": "x", "traceId": "first", "traceId": "last wins"}"#,
            r#"{"name": "x"}"#,
        ];
        for (n, text) in spans.iter().enumerate() {
            let head: SpanHead = serde_json::from_str(text).unwrap();
            let v: Value = serde_json::from_str(text).unwrap();
            let s = span_of(&v, n).unwrap();
            assert_eq!(head.trace().as_deref(), Some(s.trace.as_str()), "{text}");
        }
        // A trace id that is a number other than an integer is left to the whole reading.
        let head: SpanHead = serde_json::from_str(r#"{"traceId": -1.5}"#).unwrap();
        assert_eq!(head.trace(), None);
    }

    /// Flat spans whose ids are empty, a line each, are numbered by their place in the file, as
    /// the whole reading numbers them (`#0`, `#1`, …).
    #[test]
    fn flat_spans_without_ids_are_numbered_by_place() {
        let lines = [
            r#"{"traceId": "t", "spanId": "", "name": "chat", "startTimeUnixNano": "1", "attributes": {"gen_ai.operation.name": "chat"}}"#,
            r#"{"traceId": "t", "spanId": "", "name": "chat", "startTimeUnixNano": "2", "attributes": {"gen_ai.operation.name": "chat"}}"#,
        ];
        let mut traces = JsonlTraces::default();
        for (at, l) in lines.iter().enumerate() {
            for s in line_spans(l, false).unwrap() {
                traces.add(s.numbered(at), at).unwrap();
            }
        }
        let ids: Vec<&str> = traces.spans[0].iter().map(|(s, _)| s.id.as_str()).collect();
        assert_eq!(ids, ["#0", "#1"]);
        let whole: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        let how = Reading { cores: 2, window: 1, hold: 0 };
        assert_eq!(
            format!("{:?}", jsonl_conversations_on(&lines, "t", how)),
            format!("{:?}", conversations(&Value::Array(whole), "t").ok())
        );
    }

    /// The survey of lines: spans of every resource and scope list (the three names, in that
    /// order whatever the text's), each trace's last line; lines that mix requests and spans,
    /// or are no JSON, or hold a span that is no object, are not read.
    #[test]
    fn survey_of_lines() {
        let span =
            |t: &str, start: u64| format!(r#"{{"traceId": "{t}", "startTimeUnixNano": "{start}", "name": "n"}}"#);
        let line1 = format!(
            r#"{{"resourceSpans": [{{"instrumentationLibrarySpans": [{{"spans": [{}]}}], "scopeSpans": [{{"spans": [{}, {}]}}]}}]}}"#,
            span("a", 9),
            span("a", 3),
            span("b", 5)
        );
        let line2 = format!(r#"{{"resource_spans": [{{"scope_spans": [{{"spans": [{}]}}]}}]}}"#, span("b", 1));
        let line3 = r#"{"resourceSpans": null, "resource_spans": [{"scope_spans": [{"spans": [{"traceId": "c"}]}]}]}"#;
        let lines = [line1.as_str(), line2.as_str(), line3];
        let r = survey(&lines).unwrap();
        assert!(r.otlp);
        assert_eq!(r.names, ["a", "b"]);
        assert_eq!(r.last_line, [0, 1]);
        let flat = span("a", 1);
        assert!(survey(&[line1.as_str(), flat.as_str()]).is_none());
        assert!(survey(&[flat.as_str(), line1.as_str()]).is_none());
        assert!(survey(&[flat.as_str(), "{\"name\":"]).is_none());
        assert!(survey(&[r#"{"resourceSpans": [{"scopeSpans": [{"spans": [null]}]}]}"#]).is_none());
        let upper = span("B", 0);
        let r = survey(&[flat.as_str(), upper.as_str()]).unwrap();
        assert!(!r.otlp);
        assert_eq!(r.names, ["a", "b"]);
    }

    /// A JSON list of OTLP/JSON requests (JSONL read whole) holds their spans in turn.
    #[test]
    fn a_list_of_requests_is_their_spans() {
        let req = |t: &str| {
            json!({"resourceSpans": [{"scopeSpans": [{"spans": [
            {"traceId": t, "spanId": "1", "name": "chat", "attributes": [kv("gen_ai.operation.name", "chat")]}]}]}]})
        };
        let list = json!([req("a"), {"resource_spans": []}, req("b")]);
        let spans = raw_spans(&list).unwrap();
        assert_eq!(spans.iter().map(|s| s["traceId"].as_str().unwrap()).collect::<Vec<_>>(), ["a", "b"]);
        assert!(raw_spans(&json!([req("a"), {"name": "x"}])).is_none());
    }

    #[test]
    fn times_and_detection() {
        assert_eq!(parse_time("1970-01-01T00:00:01Z"), Some(1_000_000_000));
        assert_eq!(parse_time("1970-01-01T01:00:01.5+01:00"), Some(1_500_000_000));
        assert!(parse_time("2026-07-09T00:00:00+00:00") < parse_time("2026-07-09T00:00:00.000001Z"));
        assert_eq!(parse_time("yesterday"), None);
        assert!(looks_like(
            &json!({"data": [{"name": "x", "context": {"trace_id": "a", "span_id": "b"}, "attributes": {}}]})
        ));
        assert!(!looks_like(&json!([{"role": "user", "content": "hi"}])));
        assert!(!looks_like(&json!({"object": "trace.span", "id": "s", "trace_id": "t", "span_data": {}})));
        assert!(!looks_like(&json!({"messages": []})));
        assert!(!looks_like(&json!("x")));
    }
}
