//! Envelopes: `tracefault envelopes`' snapshot of what every strategy renders in every format,
//! the portability checks, and the simulated model reading structure, not words.

use proptest::prelude::*;

use crate::tracefault;

fn stdout(args: &[&str]) -> String {
    let out = tracefault().arg("envelopes").args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn envelopes_503() {
    insta::assert_snapshot!(stdout(&[]));
}

#[test]
fn envelopes_400_with_param() {
    insta::assert_snapshot!(stdout(&["--fault", "400"]));
}

#[test]
fn envelopes_429_and_ambiguous() {
    insta::assert_snapshot!(stdout(&["--fault", "429"]));
    insta::assert_snapshot!(stdout(&["--fault", "ambiguous"]));
}

#[test]
fn bad_fault_is_a_usage_error() {
    tracefault().args(["envelopes", "--fault", "418"]).assert().code(2);
    tracefault().args(["envelopes", "--fault", "explode"]).assert().code(2);
}

/// Every rendering, field by field, against the wire reference (the sections named below are
/// those of the providers' documented request shapes), for a failure of every kind, a partial
/// result and a success, under every preset.
#[test]
fn every_rendering_has_the_fields_its_api_documents() {
    use serde_json::Value;
    use tracefault::cli::envelopes::render_all;
    use tracefault::fault::Fault;
    use tracefault::provider::Format;
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    let id_ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    let faults = [
        Fault::http(503),
        Fault::Http { status: 429, retry_after_ms: Some(3000), param: None, message: None },
        Fault::Http { status: 400, retry_after_ms: None, param: Some("q".into()), message: Some("bad".into()) },
        Fault::http(401),
        Fault::Timeout { after_ms: 100 },
        Fault::Reset,
        Fault::TruncatedJson,
        Fault::CodeFencedJson,
        Fault::Ambiguous { cursor: false },
    ];
    for fault in &faults {
        for r in render_all(fault) {
            let v: Value = serde_json::from_str(&r.message).unwrap_or_else(|e| panic!("{e}: {}", r.message));
            let what = format!("{} / {} / {}: {}", fault.label(), r.strategy.name, r.format.name(), r.message);
            match r.format {
                // §1.3: {"role": "tool", "tool_call_id": …, "content": string}; role and
                // tool_call_id are required. The Gemini OpenAI-compatible endpoint takes the same.
                Format::OpenAiChat | Format::GeminiOpenAi => {
                    assert_eq!(keys(&v), ["content", "role", "tool_call_id"], "{what}");
                    assert_eq!(v["role"], "tool", "{what}");
                    assert!(v["tool_call_id"].as_str().is_some_and(id_ok), "{what}");
                    assert!(v["content"].is_string(), "{what}");
                }
                // §2.1: a `function_call_output` input item: type, call_id and output (a string).
                Format::OpenAiResponses => {
                    assert_eq!(keys(&v), ["call_id", "output", "type"], "{what}");
                    assert_eq!(v["type"], "function_call_output", "{what}");
                    assert!(v["call_id"].as_str().is_some_and(id_ok), "{what}");
                    assert!(v["output"].is_string(), "{what}");
                }
                // §3.3: tool results come in a user message, first; a `tool_result` block has
                // type and tool_use_id (§3.2: ^[a-zA-Z0-9_-]+$), content a string, optional
                // is_error: bool.
                Format::Anthropic => {
                    assert_eq!(keys(&v), ["content", "role"], "{what}");
                    assert_eq!(v["role"], "user", "{what}");
                    let block = &v["content"][0];
                    assert_eq!(block["type"], "tool_result", "{what}");
                    assert!(block["tool_use_id"].as_str().is_some_and(id_ok), "{what}");
                    assert!(block["content"].is_string(), "{what}");
                    let flagged = block.get("is_error").is_some();
                    assert!(!flagged || block["is_error"] == true, "{what}");
                    let mut expected = vec!["content", "tool_use_id", "type"];
                    if flagged {
                        expected.insert(1, "is_error");
                    }
                    assert_eq!(keys(block), expected, "{what}");
                }
                // §4.1: function responses go in a user turn; `functionResponse` has name and
                // response (an object) and an optional id; `response` uses `output` and/or
                // `error` (without either, the whole object is the output).
                Format::Gemini => {
                    assert_eq!(keys(&v), ["parts", "role"], "{what}");
                    assert_eq!(v["role"], "user", "{what}");
                    let fr = &v["parts"][0]["functionResponse"];
                    assert_eq!(keys(fr), ["id", "name", "response"], "{what}");
                    assert_eq!(fr["name"], "search", "{what}");
                    let response = fr["response"].as_object().unwrap_or_else(|| panic!("{what}"));
                    let k: Vec<&str> = response.keys().map(String::as_str).collect();
                    // A failure the strategy shows as an object goes under `error`, where the
                    // model sees a failure; everything else is the function's output.
                    let json_failure = fault.class().is_failure() && r.strategy.encoding.is_json();
                    assert_eq!(k, if json_failure { ["error"] } else { ["output"] }, "{what}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The simulated model reads structure, not words: whatever a failure's message says
    /// (codes, "retryable", "error:", JSON-looking text, "complete"), every encoding in every
    /// format reads as the same signal; and a partial result's data never decides whether it
    /// says more may be available.
    #[test]
    fn words_inside_messages_and_data_never_change_the_reading(
        words in prop::collection::vec(prop::sample::select(vec![
            "code", "retryable", "\"code\":\"X\"", "\"retryable\":true", "error", "ERROR:", "Error -",
            "{\"error\":1}", "is_error", "true", "complete", "\"complete\":true", "more may be available",
            "note", "{", "}", "\"", "\\", "\n",
        ]), 0..10),
        status in prop::sample::select(vec![400u16, 422]),
    ) {
        use tracefault::envelope::read::{Signal, read_message};
        use tracefault::envelope::render::{Body, Renderer};
        use tracefault::envelope::{Encoding, ErrorKind, ToolError};
        use tracefault::provider::Format;
        use tracefault::fault::Fault;
        let message = words.join(" ");
        let fault = Fault::Http { status, retry_after_ms: None, param: Some("q".into()), message: Some(message.clone()) };
        let mut r = Renderer::default();
        for format in Format::ALL {
            for encoding in Encoding::ALL {
                let err = ToolError { kind: ErrorKind::Fault(&fault), class: fault.class(), tool: "s", attempts: 1, retry_after_ms: None, body: "{}", idempotency_key: None };
                let expected = match encoding {
                    Encoding::Envelope => Signal::Envelope,
                    Encoding::Flag if format == Format::Anthropic => Signal::Flag,
                    Encoding::Flag => Signal::Unmarked,
                    Encoding::Object => Signal::Object,
                    Encoding::Prefix => Signal::Prefix,
                    Encoding::Raw => Signal::Raw,
                    Encoding::JsonRpcError => Signal::Unmarked,
                };
                let bytes = r.render(format, 1, "s", Body::Error { err, encoding }).to_owned();
                prop_assert_eq!(read_message(format, &bytes).signal, expected, "{}", bytes);
            }
            let data = serde_json::to_string(&serde_json::json!({ "text": message })).unwrap();
            for (stated_complete, cursor) in [(false, false), (false, true), (true, false), (true, true)] {
                let bytes = r.render(format, 1, "s", Body::Partial { json: &data, stated_complete, cursor }).to_owned();
                prop_assert_eq!(read_message(format, &bytes).more_available, !stated_complete, "{}", bytes);
            }
        }
    }
}
