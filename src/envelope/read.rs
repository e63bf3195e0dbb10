//! The simulated model's reading of a tool result: which error signal it carries, whether it
//! says more may be available, whether it leaks a stack trace. It reads structure, the way a
//! model reads the request: it parses the message, finds the place each format puts the
//! result (and its error channel), and parses the content where it is JSON. Words inside a
//! message or inside data never make a signal; a flag the format does not have is not there.

use std::sync::LazyLock;

use memchr::memmem::Finder;
use serde_json::{Map, Value};

use crate::provider::{Format, ResultPart, ResultShape};

/// How clearly a failed result says what happened, strongest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    /// The five fields: a JSON object with a string `code` and a boolean `retryable`.
    Envelope,
    /// A structural error mark: Anthropic `is_error: true`.
    Flag,
    /// An error object: `{"error": …}` as the content, or Gemini's `response.error`.
    Object,
    /// Text that starts with `ERROR:` (or `Error -`, any case).
    Prefix,
    /// A raw exception with a stack trace.
    Raw,
    /// Nothing marks it: a plain sentence, or data.
    Unmarked,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Envelope => "envelope",
            Signal::Flag => "flag",
            Signal::Object => "object",
            Signal::Prefix => "prefix",
            Signal::Raw => "raw",
            Signal::Unmarked => "unmarked",
        }
    }
}

/// What the model reads in one tool result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    /// The strongest error signal the result carries (meaningful for a failed call).
    pub signal: Signal,
    /// The result says more may be available and states no terminal state.
    pub more_available: bool,
    /// The text the model reads contains a Python stack trace (a raw leak).
    pub stack_trace: bool,
}

impl Reading {
    const NOTHING: Reading = Reading { signal: Signal::Unmarked, more_available: false, stack_trace: false };
}

const TRACEBACK: &str = "Traceback (most recent call last)";
const MORE: &str = "may be available";

/// The traceback's searcher, built once: `str::contains` builds one for every search, and with
/// `says_more`'s those were 4% of the lone agent's instructions in the simulator's bench.
static TRACEBACK_FINDER: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(TRACEBACK));

/// The text holds a Python stack trace.
fn has_traceback(text: &str) -> bool {
    TRACEBACK_FINDER.find(text.as_bytes()).is_some()
}

/// Reads one tool result as rendered for `format`: an OpenAI `tool` message, a Responses
/// `function_call_output` item, an Anthropic `tool_result` block (or the user message holding
/// it), a Gemini `functionResponse` part (or the user content holding it).
pub fn read_message(format: Format, message: &str) -> Reading {
    let Ok(v) = serde_json::from_str::<Value>(message) else { return read_text(message, false) };
    match format.provider().result_part(&v) {
        Some(ResultPart::Content { content, flag }) => read_content(content, flag),
        Some(ResultPart::Response(r)) => read_gemini_response(r),
        None => Reading::NOTHING,
    }
}

/// The content text of a rendered tool-result message, as a native trace stores it (the
/// message's `content`/`output`, the `tool_result` block's content, Gemini's `response.error` or
/// output); the message itself when it is not one.
pub fn message_content(format: Format, message: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(message) else { return message.to_owned() };
    let text = |c: &Value| match c {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(parts.iter().filter_map(|p| p["text"].as_str().or(p.as_str())).collect()),
        _ => None,
    };
    let content = match format.provider().result_part(&v) {
        Some(ResultPart::Content { content, .. }) => text(content),
        Some(ResultPart::Response(r)) => {
            let inner = r.get("error").or_else(|| r.get("output")).unwrap_or(r);
            Some(inner.as_str().map_or_else(|| inner.to_string(), str::to_owned))
        }
        None => None,
    };
    content.unwrap_or_else(|| message.to_owned())
}

/// Gemini: `response.error` is the error channel; anything else (`response.output`, or a
/// response with neither key, which the API treats as the output) is the function's output,
/// read as text, never as an error object.
pub fn read_gemini_response(response: &Value) -> Reading {
    if let Some(err) = response.get("error") {
        let text = match err {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let signal = match err.as_object() {
            Some(o) if is_envelope(o) => Signal::Envelope,
            _ => Signal::Object,
        };
        return Reading { signal, more_available: false, stack_trace: has_traceback(&text) };
    }
    let output = response.get("output").unwrap_or(response);
    match output {
        Value::String(s) => {
            let r = text_rules(s);
            Reading { more_available: says_more(s), ..r }
        }
        Value::Object(o) => Reading { more_available: object_says_more(o), ..Reading::NOTHING },
        _ => Reading::NOTHING,
    }
}

/// Reads a tool result as an importer or the wire mock sees it: its content text, and whether
/// the format's structural error mark was set (Anthropic `is_error`, Gemini `response.error`,
/// whose content is then the error itself).
pub fn read_result(format: Format, content: &str, error_mark: bool) -> Reading {
    match format.provider().result_shape() {
        ResultShape::FunctionResponse { .. } if error_mark => {
            let err = serde_json::from_str::<Value>(content).unwrap_or_else(|_| Value::String(content.to_owned()));
            read_gemini_response(&serde_json::json!({ "error": err }))
        }
        ResultShape::Content { error_flag, .. } => read_text(content, error_mark && error_flag),
        ResultShape::FunctionResponse { .. } => read_text(content, false),
    }
}

/// Reads a content field: a string, or a list of text parts (joined). `flag` is a structural
/// `is_error: true` beside it.
pub fn read_content(content: &Value, flag: bool) -> Reading {
    match content {
        Value::String(s) => read_text(s, flag),
        Value::Array(parts) => {
            let text: String = parts.iter().filter_map(|p| p["text"].as_str().or(p.as_str())).collect();
            read_text(&text, flag)
        }
        _ => with_flag(Reading::NOTHING, flag),
    }
}

/// Reads the text a model is given as a tool result: JSON where it parses as an object (the
/// five fields or an `error` key at its top level), else the text rules.
pub fn read_text(text: &str, flag: bool) -> Reading {
    let trimmed = text.trim_start();
    let json = if trimmed.starts_with('{') { serde_json::from_str::<Value>(trimmed).ok() } else { None };
    let reading = match json.as_ref().and_then(Value::as_object) {
        Some(o) => Reading {
            signal: if is_envelope(o) {
                Signal::Envelope
            } else if o.contains_key("error") {
                Signal::Object
            } else {
                Signal::Unmarked
            },
            more_available: object_says_more(o),
            stack_trace: has_traceback(text),
        },
        None => Reading { more_available: says_more(text), ..text_rules(text) },
    };
    with_flag(reading, flag)
}

fn with_flag(r: Reading, flag: bool) -> Reading {
    if flag && r.signal > Signal::Flag { Reading { signal: Signal::Flag, ..r } } else { r }
}

/// The five-field envelope: a string `code` and a boolean `retryable` at the top level.
fn is_envelope(o: &Map<String, Value>) -> bool {
    o.get("code").is_some_and(Value::is_string) && o.get("retryable").is_some_and(Value::is_boolean)
}

/// Plain text: an `ERROR:` prefix (the importers' rule `^\s*error\b\s*[:-]`), or a traceback.
fn text_rules(text: &str) -> Reading {
    let stack_trace = has_traceback(text);
    let signal = if has_error_prefix(text) {
        Signal::Prefix
    } else if stack_trace {
        Signal::Raw
    } else {
        Signal::Unmarked
    };
    Reading { signal, more_available: false, stack_trace }
}

/// `error`, any case, as the first word, then `:` or `-`.
pub fn has_error_prefix(text: &str) -> bool {
    let t = text.trim_start().as_bytes();
    t.len() > 5
        && t[..5].eq_ignore_ascii_case(b"error")
        && !t[5].is_ascii_alphanumeric()
        && t[5..].iter().find(|b| !b.is_ascii_whitespace()).is_some_and(|b| matches!(b, b':' | b'-'))
}

/// Free text says more may be available (in any case), read in place: no lowered copy.
fn says_more(text: &str) -> bool {
    let (hay, needle) = (text.as_bytes(), MORE.as_bytes());
    memchr::memchr2_iter(b'm', b'M', hay)
        .any(|i| hay.get(i..i + needle.len()).is_some_and(|w| w.eq_ignore_ascii_case(needle)))
}

/// Top-level keys whose non-empty string is a cursor to more results.
const CURSOR_KEYS: [&str; 4] = ["next_cursor", "nextCursor", "next_page_token", "nextPageToken"];

/// A result object says more may be available in one of its own top-level strings (a note, a
/// message) or gives a cursor to more, not inside its data, and does not state `complete: true`.
fn object_says_more(o: &Map<String, Value>) -> bool {
    o.get("complete") != Some(&Value::Bool(true))
        && (o.iter().any(|(k, v)| k != "data" && v.as_str().is_some_and(says_more))
            || CURSOR_KEYS.iter().any(|k| o.get(*k).and_then(Value::as_str).is_some_and(|c| !c.is_empty())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_content_is_the_text_the_model_reads() {
        let chat = r#"{"role":"tool","tool_call_id":"c","content":"ERROR: down"}"#;
        assert_eq!(message_content(Format::OpenAiChat, chat), "ERROR: down");
        let resp = r#"{"type":"function_call_output","call_id":"c","output":"{\"a\":1}"}"#;
        assert_eq!(message_content(Format::OpenAiResponses, resp), r#"{"a":1}"#);
        let anth = r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":true,"content":[{"type":"text","text":"down"}]}]}"#;
        assert_eq!(message_content(Format::Anthropic, anth), "down");
        let gem = r#"{"role":"user","parts":[{"functionResponse":{"name":"s","response":{"error":{"code":503}}}}]}"#;
        assert_eq!(message_content(Format::Gemini, gem), r#"{"code":503}"#);
        let out = r#"{"functionResponse":{"name":"s","response":{"output":"ok"}}}"#;
        assert_eq!(message_content(Format::Gemini, out), "ok");
        assert_eq!(message_content(Format::OpenAiChat, "not json"), "not json");
    }
    use crate::envelope::render::{Body, Renderer};
    use crate::envelope::{Encoding, ErrorKind, ToolError};
    use crate::fault::Fault;

    fn err(f: &Fault) -> ToolError<'_> {
        ToolError {
            kind: ErrorKind::Fault(f),
            class: f.class(),
            tool: "search",
            attempts: 1,
            retry_after_ms: None,
            body: r#"{"hits":3}"#,
            idempotency_key: None,
        }
    }

    #[test]
    fn reads_back_each_encoding_in_each_format() {
        let f = Fault::http(503);
        let mut r = Renderer::default();
        let expect = |format: Format, encoding: Encoding| match encoding {
            Encoding::Envelope => Signal::Envelope,
            Encoding::Flag if format.has_error_flag() => Signal::Flag,
            Encoding::Flag => Signal::Unmarked,
            Encoding::Object => Signal::Object,
            Encoding::Prefix => Signal::Prefix,
            Encoding::Raw => Signal::Raw,
            Encoding::JsonRpcError => Signal::Unmarked,
        };
        for format in Format::ALL {
            for encoding in Encoding::ALL {
                let s = r.render(format, 1, "search", Body::Error { err: err(&f), encoding });
                let reading = read_message(format, s);
                assert_eq!(reading.signal, expect(format, encoding), "{format:?} {encoding:?}: {s}");
                assert_eq!(reading.stack_trace, encoding == Encoding::Raw, "{s}");
            }
        }
    }

    #[test]
    fn words_inside_messages_are_not_structure() {
        // A 400 whose message talks about codes and retrying, as an ERROR: string.
        let r = read_text("ERROR: the code is not retryable; error: bad value", false);
        assert_eq!(r.signal, Signal::Prefix);
        // Data that happens to hold the five field names, one level down, is data.
        let r = read_text(r#"{"data":{"code":"X","retryable":true},"note":"fine"}"#, false);
        assert_eq!(r.signal, Signal::Unmarked);
        assert!(!read_text(r#"{"data":"more may be available","complete":false}"#, false).more_available);
        assert!(
            !read_text(r#"{"data":[1],"note":"More results may be available.","complete":true}"#, false).more_available
        );
        assert!(read_text(r#"{"data":[1],"note":"More results may be available."}"#, false).more_available);
        assert!(read_text(r#"{"data":[1],"next_cursor":"p2"}"#, false).more_available, "a cursor says more");
        assert!(!read_text(r#"{"data":[1],"next_cursor":""}"#, false).more_available, "an empty cursor does not");
        assert!(!read_text(r#"{"data":[1],"next_cursor":"p2","complete":true}"#, false).more_available);
        assert_eq!(read_text("An error: occurred", false).signal, Signal::Unmarked);
        assert_eq!(read_text("  Error - timed out", false).signal, Signal::Prefix);
        assert_eq!(read_text("Errors: none", false).signal, Signal::Unmarked);
    }

    #[test]
    fn gemini_reads_the_error_channel_and_the_output_apart() {
        let bare = r#"{"functionResponse":{"name":"s","response":{"code":"RATE_LIMITED","retryable":true}}}"#;
        assert_eq!(read_message(Format::Gemini, bare).signal, Signal::Unmarked, "a bare object is the output");
        let under_error =
            r#"{"functionResponse":{"name":"s","response":{"error":{"code":"RATE_LIMITED","retryable":true}}}}"#;
        assert_eq!(read_message(Format::Gemini, under_error).signal, Signal::Envelope);
        let msg = r#"{"role":"user","parts":[{"functionResponse":{"name":"s","response":{"error":"down"}}}]}"#;
        assert_eq!(read_message(Format::Gemini, msg).signal, Signal::Object);
        let out = r#"{"functionResponse":{"name":"s","response":{"output":"ERROR: down"}}}"#;
        assert_eq!(read_message(Format::Gemini, out).signal, Signal::Prefix);
    }

    #[test]
    fn anthropic_flag_in_block_or_message() {
        let block = r#"{"type":"tool_result","tool_use_id":"toolu_1","content":"down","is_error":true}"#;
        assert_eq!(read_message(Format::Anthropic, block).signal, Signal::Flag);
        let msg = format!(r#"{{"role":"user","content":[{block}]}}"#);
        assert_eq!(read_message(Format::Anthropic, &msg).signal, Signal::Flag);
        let no_flag = r#"{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"ERROR: x"}]}"#;
        assert_eq!(read_message(Format::Anthropic, no_flag).signal, Signal::Prefix);
    }

    #[test]
    fn phrases_are_found_anywhere_and_more_in_any_case() {
        assert!(says_more("Results 1-10; MORE May Be AVAILABLE."));
        assert!(says_more("may be available"));
        assert!(!says_more("may be availabl"));
        assert!(!says_more("maybe available"));
        assert!(has_traceback("x\nTraceback (most recent call last)\n  File"));
        assert!(!has_traceback("traceback (most recent call last)"));
    }

    #[test]
    fn more_may_be_available_is_read_in_text_in_objects_and_in_gemini_output() {
        let text = "Showing 10 of 240 flights; more may be available.";
        assert!(read_text(text, false).more_available);
        assert!(!read_text("Showing 10 of 10 flights.", false).more_available);
        assert!(read_text(r#"{"note": "More may be available", "data": []}"#, false).more_available);
        assert!(read_gemini_response(&serde_json::json!({ "output": text })).more_available);
        assert!(read_gemini_response(&serde_json::json!({ "output": { "note": text } })).more_available);
        assert!(!read_gemini_response(&serde_json::json!({ "output": "done" })).more_available);
    }

    #[test]
    fn a_gemini_error_is_an_envelope_only_with_the_five_fields_keys() {
        let envelope = serde_json::json!({ "error": { "code": "RATE_LIMITED", "retryable": true } });
        assert_eq!(read_gemini_response(&envelope).signal, Signal::Envelope);
        let object = serde_json::json!({ "error": { "message": "quota exceeded" } });
        assert_eq!(read_gemini_response(&object).signal, Signal::Object);
    }

    proptest::proptest! {
        /// The in-place searches read what a lowered copy and `str::contains` read.
        #[test]
        fn searches_agree_with_the_plain_definitions(
            pre in "[a-zA-Z ()é]{0,12}",
            mid in proptest::sample::select(vec!["", "may be available", "MAY BE available", "May be availablE", "may be", "Traceback (most recent call last)", "traceback (most recent call last)"]),
            post in "[a-zA-Z ()é]{0,12}",
        ) {
            let text = format!("{pre}{mid}{post}");
            proptest::prop_assert_eq!(says_more(&text), text.to_ascii_lowercase().contains(MORE));
            proptest::prop_assert_eq!(has_traceback(&text), text.contains(TRACEBACK));
        }
    }
}
