//! The normalized conversation every importer produces, and the one builder that turns it into
//! a native trace: pairing results with calls, classifying failures by documented rules, and
//! deciding how the conversation ended.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

pub use crate::exchange::{CallItem, Item, parse_args, text_of, tool_defs, with_usage};
use crate::fault::{ErrorClass, http_class};
use crate::trace::{FinalOutcome, Header, Stop, ToolDef, Trace, TraceEvent};

/// How a conversation ended, from the source's own fields (exit status, reward, termination
/// reason, stop reason, interruption). Without one, the builder infers it from the last item.
#[derive(Clone, Debug, PartialEq)]
pub struct Ending {
    pub outcome: FinalOutcome,
    /// The source's own word for it (`submitted`, `max_steps`, …).
    pub reason: Option<String>,
    /// The source's verdict on the task, when it has one.
    pub success: Option<bool>,
    /// The final answer's text, when the source gives it apart from the last model turn.
    pub text: Option<String>,
}

impl Ending {
    pub fn new(outcome: FinalOutcome, reason: impl Into<String>) -> Ending {
        Ending { outcome, reason: Some(reason.into()), success: None, text: None }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Conversation {
    pub id: String,
    pub source_format: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub tools: Vec<ToolDef>,
    pub items: Vec<Item>,
    /// How it ended, when the source says so.
    pub ending: Option<Ending>,
    /// What could not be read and was left out (`--lenient`).
    pub gaps: Vec<String>,
}

impl Conversation {
    /// An empty conversation of `source_format`, with no provider, model or tools yet.
    pub fn new(id: String, source_format: &str) -> Conversation {
        Conversation { id, source_format: source_format.to_owned(), ..Conversation::default() }
    }
}

/// How a tool result is judged a failure, and of which class. Documented in the book's guide to
/// captured traces; `--failure-rule` replaces the text rules.
#[derive(Clone, Debug)]
pub struct FailureRules {
    /// Text rules: a result whose content matches any is a failure.
    pub text: Vec<Regex>,
}

impl Default for FailureRules {
    fn default() -> Self {
        let rules = [
            // "Error: …", "ERROR: …", "error - …" at the start (tau-bench, many agents).
            r"(?i)^\s*error\b\s*[:\-]",
            // pydantic-ai's retry prompt for a failed tool call.
            r"Fix the errors and try again\.\s*$",
            // A raw Python exception.
            r"Traceback \(most recent call last\)",
        ];
        FailureRules { text: rules.iter().map(|r| Regex::new(r).expect("valid built-in rule")).collect() }
    }
}

impl FailureRules {
    pub fn from_patterns(patterns: &[String]) -> Result<FailureRules, regex::Error> {
        Ok(FailureRules { text: patterns.iter().map(|p| Regex::new(p)).collect::<Result<_, _>>()? })
    }
}

/// The verdict on one result: failed or not, its class, and the evidence.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub ok: bool,
    pub class: Option<&'static str>,
    pub status: Option<u16>,
    pub evidence: String,
}

static STATUS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:\b(?:status(?:_code)?|HTTP|code)\W{0,3}|^)([45]\d\d)\b").expect("valid"));

fn status_in(text: &str) -> Option<u16> {
    STATUS.captures(text).and_then(|c| c[1].parse().ok()).filter(|s| http_class(*s).is_some())
}

/// A structured error inside a result's text, and the class its own fields give (if they do).
struct Structured {
    failed: bool,
    class: Option<&'static str>,
    status: Option<u16>,
    why: String,
}

/// Reads the structured errors a tool result's text can hold, by their fields:
/// - the five-field envelope (`code` a string, `retryable` a boolean): a failure, its class
///   from `details.status`, else the code, else `retryable` (true: transient, false: terminal);
/// - an MCP tool result (`content` parts and `isError`): a failure when `isError` is true, its
///   class from `structuredContent` (an envelope) or the text;
/// - a body with an `error` field: non-empty means failed, its class from a status or code
///   inside the error object, else its text; empty with a 4xx/5xx status in the rest of the
///   body is a failure hidden behind an empty error (ToolBench).
fn structured(content: &str) -> Option<Structured> {
    let trimmed = content.trim_start();
    if !trimmed.starts_with('{') {
        return None;
    }
    let TopKeys(top) = serde_json::from_str(trimmed).ok()?;
    let obj = &top;
    if let Some(env) = envelope(obj) {
        return Some(env);
    }
    if let Some(is_error) = obj.get("isError").and_then(Value::as_bool)
        && obj.get("content").is_some_and(Value::is_array)
    {
        let inner = obj.get("structuredContent").and_then(Value::as_object).and_then(envelope);
        let text = text_of(&obj["content"]);
        return Some(match inner {
            Some(env) if is_error => Structured { why: format!("MCP result with isError: true; {}", env.why), ..env },
            _ => Structured {
                failed: is_error,
                class: None,
                status: status_in(&text),
                why: format!("MCP result with isError: {is_error}"),
            },
        });
    }
    let err = obj.get("error")?;
    let text = match err {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if !text.trim().is_empty() {
        let (class, status, how) = match err.as_object() {
            Some(e) => error_object_class(e),
            None => (None, status_in(&text), String::new()),
        };
        return Some(Structured {
            failed: true,
            class,
            status: status.or_else(|| status_in(&text)),
            why: format!("non-empty `error` field{how}: {}", clip(&text, 60)),
        });
    }
    let rest = obj.get("response").map(|r| r.to_string()).unwrap_or_default();
    Some(match status_in(&rest).filter(|s| *s >= 400) {
        Some(s) => Structured {
            failed: true,
            class: None,
            status: Some(s),
            why: format!("empty `error` field but status {s} in the body"),
        },
        None => Structured { failed: false, class: None, status: None, why: String::new() },
    })
}

/// The top-level keys of a JSON object that [`structured`] reads, each parsed into a `Value`;
/// every other value is checked and skipped without being built (a tool's data can be large).
/// A repeated key keeps its last value, as a `Value` map does.
struct TopKeys(serde_json::Map<String, Value>);

impl<'de> serde::Deserialize<'de> for TopKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const READ: [&str; 8] =
            ["code", "retryable", "details", "isError", "content", "structuredContent", "error", "response"];
        /// Which key of `READ` a key is, if any: the others are never copied.
        struct Key(Option<&'static str>);
        impl<'de> serde::Deserialize<'de> for Key {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = Key;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str("a key")
                    }
                    fn visit_str<E: serde::de::Error>(self, k: &str) -> Result<Key, E> {
                        Ok(Key(READ.iter().find(|r| **r == k).copied()))
                    }
                }
                d.deserialize_str(V)
            }
        }
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = TopKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<TopKeys, A::Error> {
                let mut top = serde_json::Map::new();
                while let Some(Key(k)) = map.next_key()? {
                    match k {
                        Some(k) => {
                            top.insert(k.to_owned(), map.next_value()?);
                        }
                        None => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(TopKeys(top))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// The five-field envelope: `code` a string and `retryable` a boolean at the top of the object.
fn envelope(obj: &serde_json::Map<String, Value>) -> Option<Structured> {
    let code = obj.get("code")?.as_str()?;
    let retryable = obj.get("retryable")?.as_bool()?;
    let status = obj.get("details").and_then(|d| d.get("status")).and_then(Value::as_u64).map(|s| s as u16);
    let class = status
        .and_then(http_class)
        .map(ErrorClass::name)
        .or_else(|| code_class(code))
        .unwrap_or(if retryable { "transient" } else { "terminal" });
    let partial = class == "partial";
    Some(Structured {
        failed: !partial,
        class: Some(class),
        status,
        why: format!("five-field envelope (code {code}, retryable: {retryable})"),
    })
}

/// An `error` object's own class: an HTTP status (`code` or `status` a number), else a code or
/// status name (`RESOURCE_EXHAUSTED`, `rate_limit_error`, `INVALID_ARGUMENT`, …).
fn error_object_class(e: &serde_json::Map<String, Value>) -> (Option<&'static str>, Option<u16>, String) {
    for key in ["code", "status", "type"] {
        match e.get(key) {
            Some(Value::Number(n)) => {
                if let Some(s) = n.as_u64().map(|s| s as u16).filter(|s| http_class(*s).is_some()) {
                    return (http_class(s).map(ErrorClass::name), Some(s), format!(" with {key} {s}"));
                }
            }
            Some(Value::String(name)) => {
                if let Some(c) = code_class(name) {
                    return (Some(c), None, format!(" with {key} {name}"));
                }
            }
            _ => {}
        }
    }
    (None, None, String::new())
}

/// The class an error code names (the five-field codes, gRPC/Google status names, the
/// providers' error types).
fn code_class(code: &str) -> Option<&'static str> {
    let c = code.to_ascii_uppercase();
    Some(match c.as_str() {
        "RATE_LIMITED" | "RATE_LIMIT_ERROR" | "RESOURCE_EXHAUSTED" | "TOO_MANY_REQUESTS" | "QUOTA_EXCEEDED" => {
            "rate_limited"
        }
        "TIMEOUT" | "TRANSPORT" | "UNAVAILABLE" | "DEADLINE_EXCEEDED" | "OVERLOADED_ERROR" | "API_ERROR"
        | "INTERNAL" | "INTERNAL_ERROR" | "CIRCUIT_OPEN" | "BAD_RESPONSE" => "transient",
        "INVALID_ARGS"
        | "INVALID_ARGUMENT"
        | "INVALID_REQUEST_ERROR"
        | "BAD_REQUEST"
        | "VALIDATION_ERROR"
        | "FAILED_PRECONDITION"
        | "OUT_OF_RANGE"
        | "SCHEMA_CHANGED" => "bad_args",
        "UNAUTHORIZED"
        | "UNAUTHENTICATED"
        | "FORBIDDEN"
        | "PERMISSION_DENIED"
        | "NOT_FOUND"
        | "NOT_FOUND_ERROR"
        | "PAYMENT_REQUIRED"
        | "PAYLOAD_TOO_LARGE"
        | "AUTHENTICATION_ERROR"
        | "PERMISSION_ERROR" => "terminal",
        "PARTIAL" => "partial",
        _ => return None,
    })
}

fn clip(s: &str, n: usize) -> String {
    let t: String = s.chars().take(n).collect();
    if t.len() < s.len() { format!("{t}…") } else { t }
}

/// The class of a failed result, from a status if there is one, else from keywords.
fn classify_failure(content: &str, status: Option<u16>) -> (&'static str, String) {
    if let Some(s) = status.filter(|s| http_class(*s).is_some()) {
        let c = http_class(s).expect("checked");
        return (c.name(), format!("status {s}"));
    }
    for (re, class) in KEYWORDS.iter() {
        if let Some(m) = re.find(content) {
            return (class, format!("keyword {:?}", m.as_str()));
        }
    }
    ("bad_args", "default: a failure the model can act on".to_owned())
}

/// Whole-word keyword rules, in this order: a validation error that mentions "forbidden"
/// (pydantic's `extra_forbidden`) is still about the arguments.
static KEYWORDS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    let table: [(&str, &'static str); 5] = [
        (r"(?i)\b(rate limit(ed)?|too many requests|quota)\b", "rate_limited"),
        (
            r"(?i)\b(timeout|timed out|temporarily unavailable|connection reset|overloaded|try again later|unavailable|no new output after)\b",
            "transient",
        ),
        (r"(?i)\b(validation errors?|invalid|field required|missing|required|did you mean)\b", "bad_args"),
        (
            r"(?i)\b(not found|unauthorized|forbidden|permission denied|does not exist|not allowed|denied|rejected|requested permissions?|(?:haven't|has not|have not|not) (?:been )?granted)\b",
            "terminal",
        ),
        (r"(?i)\b(more (results )?may be available|partial results?)\b", "partial"),
    ];
    table.iter().map(|(p, c)| (Regex::new(p).expect("valid built-in pattern"), *c)).collect()
});

/// Judges one result by the rules: structural flag first, then a structured error in the text
/// (the five fields, an MCP result, an `error` field), then the text rules.
pub fn judge(content: &str, flag: Option<(bool, &'static str)>, rules: &FailureRules) -> Verdict {
    let found = structured(content);
    let (failed, why, status, class) = if let Some((f, source)) = flag {
        let inner = found.as_ref().filter(|s| s.failed);
        (f, source.to_owned(), inner.and_then(|s| s.status).or_else(|| status_in(content)), inner.and_then(|s| s.class))
    } else if let Some(s) = found {
        (s.failed, s.why, s.status, s.class)
    } else if let Some(r) = rules.text.iter().find(|r| r.is_match(content)) {
        (true, format!("text rule /{}/", r.as_str()), status_in(content), None)
    } else {
        (false, String::new(), None, None)
    };
    if !failed {
        let more = content.to_lowercase().contains("may be available");
        return Verdict {
            ok: true,
            class: more.then_some("partial"),
            status: None,
            evidence: if more { "text says more may be available".into() } else { String::new() },
        };
    }
    let (class, how) = match class {
        Some(c) => (c, "from its fields".to_owned()),
        None => classify_failure(content, status),
    };
    Verdict { ok: class == "partial", class: Some(class), status, evidence: format!("failed: {why}; class: {how}") }
}

/// Builds the native trace: one `model_call` per model item, its `tool_call`s, one
/// `tool_result` per result (paired by id, else by position among the open calls, preferring
/// the same tool name), and a `final` event.
pub fn to_trace(conv: Conversation, rules: &FailureRules) -> Trace {
    let Conversation { id, source_format, provider, model, tools, items, ending, gaps } = conv;
    let calls: usize = items.iter().map(|i| if let Item::Model { calls, .. } = i { calls.len() } else { 0 }).sum();
    let mut trace = TraceBuilder::new(tools, items.len() + calls + 1);
    for item in items {
        trace.push(item);
    }
    trace.ending = ending;
    let header = Header { gaps, ..Header::new(id, source_format, provider, model) };
    trace.finish(header, rules)
}

/// [`to_trace`] one item at a time, so that a reader can hand on each message as it reads it
/// and never hold a conversation's items beside its events. Results are judged at the end,
/// when the failure rules are at hand.
#[derive(Debug, Default)]
pub struct TraceBuilder {
    events: Vec<TraceEvent>,
    tools: Vec<ToolDef>,
    /// Open calls awaiting a result: (call_id, tool name).
    open: Vec<(String, String)>,
    /// The structural flags of results that carry one, by event index.
    flags: Vec<(usize, (bool, &'static str))>,
    turn: u32,
    /// The index of the last `model_call` event while that call is the last item other than
    /// a user's (a result since clears it).
    last_model: Option<usize>,
    items: usize,
    /// How the conversation ended, when the source says so (else inferred from the items).
    pub ending: Option<Ending>,
}

impl TraceBuilder {
    /// A builder whose trace declares `tools` (tools called but not declared are added), with
    /// room for `events` events (the `final` one included): sized once, a conversation's
    /// events leave no trail of outgrown copies.
    pub fn new(tools: Vec<ToolDef>, events: usize) -> TraceBuilder {
        TraceBuilder { tools, events: Vec::with_capacity(events), ..TraceBuilder::default() }
    }

    /// Whether no item has been pushed.
    pub fn is_empty(&self) -> bool {
        self.items == 0
    }

    /// Adds the next item of the conversation.
    pub fn push(&mut self, item: Item) {
        self.items += 1;
        match item {
            Item::User(_) => {}
            Item::Model { text, calls, tokens_in, tokens_out, status } => {
                self.turn += 1;
                let turn = self.turn;
                let stop = if status != 200 {
                    Stop::Error
                } else if calls.is_empty() {
                    Stop::End
                } else {
                    Stop::ToolCalls
                };
                self.last_model = Some(self.events.len());
                self.events.push(TraceEvent::ModelCall {
                    turn,
                    status,
                    tokens_in,
                    tokens_out,
                    latency_ms: None,
                    t_ms: None,
                    stop,
                    text,
                });
                for (i, c) in calls.into_iter().enumerate() {
                    let id = c.id.unwrap_or_else(|| format!("call_t{turn}_{i}"));
                    if !self.tools.iter().any(|t| t.name == c.name) {
                        self.tools.push(ToolDef { name: c.name.clone(), description: None, parameters: None });
                    }
                    self.open.push((id.clone(), c.name.clone()));
                    self.events.push(TraceEvent::ToolCall { turn, call_id: id, name: c.name, args: c.args });
                }
            }
            Item::Cancelled { id, content, why } => {
                self.last_model = None;
                let pos = id.as_ref().and_then(|id| self.open.iter().position(|(o, _)| o == id));
                let Some(pos) = pos.or(if self.open.is_empty() { None } else { Some(0) }) else { return };
                let (call_id, _) = self.open.remove(pos);
                self.events.push(TraceEvent::ToolResult {
                    call_id,
                    ok: false,
                    status: None,
                    content,
                    error_class: None,
                    latency_ms: None,
                    attempts: None,
                    evidence: Some(format!("cancelled: {why}")),
                    cancelled: true,
                    attempt_ms: Vec::new(),
                });
            }
            Item::Result { id, name, content, flag } => {
                self.last_model = None;
                let open = &self.open;
                let pos = match &id {
                    Some(id) => open.iter().position(|(o, _)| o == id),
                    None => None,
                }
                .or_else(|| name.as_ref().and_then(|n| open.iter().position(|(_, on)| on == n)))
                .or(if open.is_empty() { None } else { Some(0) });
                let Some(pos) = pos else { return };
                let (call_id, _) = self.open.remove(pos);
                if let Some(flag) = flag {
                    self.flags.push((self.events.len(), flag));
                }
                self.events.push(TraceEvent::ToolResult {
                    call_id,
                    ok: true,
                    status: None,
                    content,
                    error_class: None,
                    latency_ms: None,
                    attempts: None,
                    evidence: None,
                    cancelled: false,
                    attempt_ms: Vec::new(),
                });
            }
        }
    }

    /// The trace under `header` (its tools are the builder's): every result judged by
    /// `rules`, and a `final` event saying how the conversation ended.
    pub fn finish(mut self, mut header: Header, rules: &FailureRules) -> Trace {
        let mut flags = self.flags.iter().peekable();
        for (n, event) in self.events.iter_mut().enumerate() {
            if let TraceEvent::ToolResult { ok, status, content, error_class, evidence, cancelled: false, .. } = event {
                let flag = flags.next_if(|(at, _)| *at == n).map(|(_, f)| *f);
                let v = judge(content, flag, rules);
                (*ok, *status, *error_class) = (v.ok, v.status, v.class.map(str::to_owned));
                *evidence = (!v.evidence.is_empty()).then_some(v.evidence);
            }
        }
        let (inferred, outcome) = self.ending();
        let (text, outcome, reason, success) = match self.ending.take() {
            Some(e) => (e.text.unwrap_or(inferred), e.outcome, e.reason, e.success),
            None => (inferred, outcome, None, None),
        };
        self.events.push(TraceEvent::Final {
            text,
            outcome,
            reason,
            success,
            started_ms: None,
            t_ms: None,
            in_flight_attempts: None,
        });
        header.tools = self.tools;
        Trace { header, events: self.events }
    }

    /// How the conversation ended: its last item a model call that answered (or called
    /// ToolBench's `Finish`), else cut off.
    fn ending(&self) -> (String, FinalOutcome) {
        let cut_off = (String::new(), FinalOutcome::CutOff);
        let Some(m) = self.last_model else { return cut_off };
        let TraceEvent::ModelCall { status: 200, text, .. } = &self.events[m] else { return cut_off };
        // The last item is this model call, so the events after it are its calls.
        match &self.events[m + 1..] {
            [] => (text.clone().unwrap_or_default(), FinalOutcome::Answer),
            [TraceEvent::ToolCall { name, args, .. }] if name == "Finish" => {
                // ToolBench's control tool: its return_type says how the episode ended.
                let args = args.value();
                let rt = args.get("return_type").and_then(Value::as_str).unwrap_or_default();
                let answer = args.get("final_answer").and_then(Value::as_str).unwrap_or_default().to_owned();
                (answer, if rt == "give_answer" { FinalOutcome::Answer } else { FinalOutcome::GaveUp })
            }
            _ => cut_off,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(content: &str) -> Verdict {
        judge(content, None, &FailureRules::default())
    }

    #[test]
    fn text_rules() {
        let r = v("Error: flight HAT030 not available on date 2024-05-13");
        assert!(!r.ok);
        assert_eq!(r.class, Some("bad_args"));
        assert!(v("Did you mean Mexico City?\n\nFix the errors and try again.").class == Some("bad_args"));
        assert!(v(r#"{"temp": 3}"#).ok);
        assert_eq!(v("ERROR: rate limit exceeded").class, Some("rate_limited"));
        assert_eq!(v("error: HTTP 503 from upstream").class, Some("transient"));
        assert_eq!(v("Error: user not found").class, Some("terminal"));
        let pydantic =
            "2 validation errors:\n[{\"type\": \"missing\", \"loc\": [\"symbol\"]}, {\"type\": \"extra_forbidden\"}]";
        assert_eq!(judge(pydantic, Some((true, "is_error: true")), &FailureRules::default()).class, Some("bad_args"));
    }

    #[test]
    fn error_fields_including_hidden_400s() {
        let r = v(r#"{"error": "Timeout error...Read timed out.", "response": ""}"#);
        assert_eq!((r.ok, r.class), (false, Some("transient")));
        let r = v(r#"{"error": "", "response": "{'message': 'Bad Request', 'status_code': 400}"}"#);
        assert_eq!((r.ok, r.class, r.status), (false, Some("bad_args"), Some(400)));
        assert!(v(r#"{"error": "", "response": "{'ok': 1}"}"#).ok);
    }

    #[test]
    fn structured_errors_inside_text() {
        // The five fields for a 429, as an OpenAI Responses function_call_output carries them.
        let r = v(
            r#"{"code":"RATE_LIMITED","message":"slow down","retryable":true,"details":{"status":429},"source":"tool"}"#,
        );
        assert_eq!((r.ok, r.class, r.status), (false, Some("rate_limited"), Some(429)));
        assert!(r.evidence.contains("five-field envelope"), "{}", r.evidence);
        let r = v(r#"{"code":"INVALID_ARGS","message":"bad","retryable":false,"details":{},"source":"tool"}"#);
        assert_eq!(r.class, Some("bad_args"));
        let r = v(r#"{"code":"E42","message":"x","retryable":false,"details":{},"source":"tool"}"#);
        assert_eq!(r.class, Some("terminal"), "an unknown code that is not retryable");
        let r = v(r#"{"code":"E42","message":"x","retryable":true}"#);
        assert_eq!(r.class, Some("transient"));
        // {"error": …} with a code or a status.
        let r = v(r#"{"error":{"code":503,"message":"upstream down"}}"#);
        assert_eq!((r.ok, r.class, r.status), (false, Some("transient"), Some(503)));
        let r = v(r#"{"error":{"status":"RESOURCE_EXHAUSTED","message":"quota"}}"#);
        assert_eq!(r.class, Some("rate_limited"));
        assert!(r.evidence.contains("status RESOURCE_EXHAUSTED"), "{}", r.evidence);
        let r = v(r#"{"error":{"type":"invalid_request_error","message":"x"}}"#);
        assert_eq!(r.class, Some("bad_args"));
        // An MCP CallToolResult.
        let r = v(r#"{"content":[{"type":"text","text":"Unknown city: Londos"}],"isError":true}"#);
        assert_eq!((r.ok, r.class), (false, Some("bad_args")));
        assert!(r.evidence.contains("MCP result with isError: true"), "{}", r.evidence);
        let r = v(
            r#"{"content":[{"type":"text","text":"slow down"}],"isError":true,"structuredContent":{"code":"RATE_LIMITED","retryable":true}}"#,
        );
        assert_eq!((r.ok, r.class), (false, Some("rate_limited")), "the envelope inside gives the class");
        assert!(r.evidence.contains("MCP result with isError: true; five-field envelope"), "{}", r.evidence);
        assert!(v(r#"{"content":[{"type":"text","text":"Error: fine actually"}],"isError":false}"#).ok);
        // Data that merely holds the words is data.
        assert!(v(r#"{"data":{"code":"X","retryable":true},"ok":1}"#).ok);
        // Keys are read unescaped; a repeated key keeps its last value, as a JSON map does.
        let r = v(r#"{"data":[{"error":"inner"}],"err\u006fr":{"code":503}}"#);
        assert_eq!((r.ok, r.status), (false, Some(503)));
        assert!(v(r#"{"error":"boom","data":[1,{"x":null}],"error":""}"#).ok);
        assert!(!v(r#"{"error":"","error":"boom"}"#).ok);
    }

    #[test]
    fn structural_flags_win() {
        let r = judge("all good", Some((true, "is_error: true")), &FailureRules::default());
        assert!(!r.ok);
        assert!(r.evidence.contains("is_error"));
        let r = judge("Error: looks bad", Some((false, "is_error: false")), &FailureRules::default());
        assert!(r.ok, "an explicit false flag is trusted over text");
    }

    /// Results pair with calls by id, else by tool name, else the oldest open call; a flag is
    /// judged with its result, though judging waits for the end; the last model call decides
    /// how the conversation ended.
    #[test]
    fn the_builder_pairs_results_judges_them_and_reads_the_ending() {
        let call = |id: Option<&str>, name: &str| CallItem {
            id: id.map(str::to_owned),
            name: name.into(),
            args: parse_args("{}"),
        };
        let result = |id: Option<&str>, name: Option<&str>, content: &str, flag| Item::Result {
            id: id.map(str::to_owned),
            name: name.map(str::to_owned),
            content: content.into(),
            flag,
        };
        let mut b = TraceBuilder::new(Vec::new(), 0);
        assert!(b.is_empty());
        b.push(Item::User("hi".into()));
        b.push(Item::model(None, vec![call(Some("a"), "f"), call(None, "g"), call(None, "h")]));
        b.push(result(None, Some("h"), "Error: no", None));
        b.push(result(Some("a"), None, "all good", Some((true, "is_error: true"))));
        b.push(result(None, None, "fine", None));
        b.push(result(None, None, "nobody asked", None));
        b.push(Item::model(Some("done".into()), Vec::new()));
        b.push(Item::User("thanks".into()));
        assert!(!b.is_empty());
        let t = b.finish(Header::new("c".into(), "test", None, None), &FailureRules::default());
        let results: Vec<(&str, bool)> = t
            .events
            .iter()
            .filter_map(|e| match e {
                TraceEvent::ToolResult { call_id, ok, .. } => Some((call_id.as_str(), *ok)),
                _ => None,
            })
            .collect();
        assert_eq!(results, [("call_t1_2", false), ("a", false), ("call_t1_1", true)]);
        let evidence: Vec<Option<&str>> = t
            .events
            .iter()
            .filter_map(|e| match e {
                TraceEvent::ToolResult { evidence, .. } => Some(evidence.as_deref()),
                _ => None,
            })
            .collect();
        assert!(evidence[1].is_some_and(|e| e.contains("is_error: true")), "{evidence:?}");
        assert_eq!(evidence[2], None, "a success has no evidence");
        let stops: Vec<Stop> = t
            .events
            .iter()
            .filter_map(|e| match e {
                TraceEvent::ModelCall { stop, .. } => Some(*stop),
                _ => None,
            })
            .collect();
        assert_eq!(stops, [Stop::ToolCalls, Stop::End]);
        assert_eq!(t.header.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["f", "g", "h"]);
        assert!(
            matches!(t.events.last(), Some(TraceEvent::Final { text, outcome: FinalOutcome::Answer, .. }) if text == "done")
        );

        let ending = |items: Vec<Item>| {
            let mut b = TraceBuilder::default();
            items.into_iter().for_each(|i| b.push(i));
            match b.finish(Header::new("c".into(), "test", None, None), &FailureRules::default()).events.pop() {
                Some(TraceEvent::Final { text, outcome, .. }) => (text, outcome),
                other => panic!("{other:?}"),
            }
        };
        let finish = |rt: &str| CallItem {
            id: None,
            name: "Finish".into(),
            args: parse_args(&format!(r#"{{"return_type":"{rt}","final_answer":"42"}}"#)),
        };
        assert_eq!(ending(vec![Item::model(None, vec![finish("give_answer")])]), ("42".into(), FinalOutcome::Answer));
        assert_eq!(
            ending(vec![Item::model(None, vec![finish("give_up_and_restart")])]),
            ("42".into(), FinalOutcome::GaveUp)
        );
        let cut = (String::new(), FinalOutcome::CutOff);
        assert_eq!(ending(vec![Item::model(None, vec![call(None, "f")])]), cut, "a call left open");
        assert_eq!(ending(vec![Item::model(None, vec![call(None, "f")]), result(None, None, "x", None)]), cut);
        let failed =
            Item::Model { text: Some("x".into()), calls: Vec::new(), tokens_in: 0, tokens_out: 0, status: 429 };
        assert_eq!(ending(vec![failed.clone()]), cut, "a failed model call");
        let mut b = TraceBuilder::default();
        b.push(failed);
        let t = b.finish(Header::new("c".into(), "test", None, None), &FailureRules::default());
        assert!(matches!(t.events[0], TraceEvent::ModelCall { stop: Stop::Error, status: 429, .. }));
        assert_eq!(ending(vec![Item::User("hi".into())]), cut);
    }

    #[test]
    fn custom_rules_replace_text_rules() {
        let rules = FailureRules::from_patterns(&["^FAILED".into()]).unwrap();
        assert!(judge("Error: x", None, &rules).ok);
        assert!(!judge("FAILED to do it", None, &rules).ok);
    }
}
