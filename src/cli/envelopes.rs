//! `tracefault envelopes`: one failure rendered by every strategy in every provider format,
//! side by side as the whole message each API receives, then the portability checks on
//! what was rendered.

use std::path::Path;

use serde_json::{Value, json};

use super::EnvelopesArgs;
use crate::engine::events::{By, Event, Observer};
use crate::engine::strategy::{Partials, Routing, Strategy};
use crate::envelope::read::read_message;
use crate::envelope::render::{Body, Renderer, wrap_message};
use crate::envelope::{Encoding, ErrorKind, ToolError};
use crate::error::{Error, Result, exit};
use crate::fault::{ErrorClass, Fault, HTTP_STATUSES, NON_HTTP_FAULTS, http_class};
use crate::provider::{Format, ResultPart, ResultShape};
use crate::scenario::load::load_str;

/// The successful result the example tool would have returned (damaged-body faults show it).
const EXAMPLE_RESULT: &str = r#"{"city":"Paris","temp_c":18}"#;

fn parse_fault(s: &str) -> Result<Fault> {
    let expected = || {
        format!(
            "--fault {s}: expected an HTTP status tracefault injects ({}) or one of {}, ambiguous_cursor",
            HTTP_STATUSES.map(|s| s.to_string()).join(", "),
            // (A result with a wrong value is a success: no envelope shows it.)
            NON_HTTP_FAULTS.iter().filter(|f| **f != "wrong_content").copied().collect::<Vec<_>>().join(", ")
        )
    };
    if let Ok(status) = s.parse::<u16>() {
        if http_class(status).is_none() {
            return Err(Error::Usage(expected()));
        }
        let (retry_after_ms, param, message) = match status {
            429 => (Some(12_000), None, None),
            400 | 422 => (None, Some("query".to_owned()), Some("query must name a city".to_owned())),
            _ => (None, None, None),
        };
        return Ok(Fault::Http { status, retry_after_ms, param, message });
    }
    Ok(match s {
        "timeout" => Fault::Timeout { after_ms: 30_000 },
        "reset" => Fault::Reset,
        "stream_dropped" => Fault::StreamDropped,
        "session_expired" => Fault::SessionExpired,
        "schema_drift" => Fault::SchemaDrift,
        "truncated_json" => Fault::TruncatedJson,
        "code_fenced_json" => Fault::CodeFencedJson,
        "ambiguous" => Fault::Ambiguous { cursor: false },
        "ambiguous_cursor" => Fault::Ambiguous { cursor: true },
        _ => return Err(Error::Usage(expected())),
    })
}

/// One rendering: a strategy's result in one format, as the whole message the API receives.
pub struct Rendering {
    pub strategy: Strategy,
    pub format: Format,
    pub message: String,
    /// Whether the call failed (a partial result did not).
    pub failed: bool,
}

/// What the mock MCP server sends for `fault` under an MCP strategy's encoding: the
/// `tools/call` result, or the JSON-RPC error.
fn mcp_message(fault: &Fault, encoding: crate::envelope::Encoding) -> String {
    let called = crate::wire::tools::Called {
        tool: "search".into(),
        result: serde_json::from_str(EXAMPLE_RESULT).unwrap_or(Value::Null),
        fault: Some(fault.clone()),
        retry_after_ms: fault.retry_after_ms(),
        ..Default::default()
    };
    let v = match crate::wire::mcp::answer(&called, encoding) {
        Ok(result) => json!({"result": result}),
        Err(error) => json!({"error": error}),
    };
    v.to_string()
}

/// `fault` rendered by every strategy with a name in every format.
pub fn render_all(fault: &Fault) -> Vec<Rendering> {
    let class = fault.class();
    let mut renderer = Renderer::default();
    let mut out = Vec::new();
    for strategy in Strategy::named() {
        for format in Format::ALL {
            let err = ToolError {
                kind: ErrorKind::Fault(fault),
                class,
                tool: "search",
                attempts: 1,
                retry_after_ms: fault.retry_after_ms(),
                body: EXAMPLE_RESULT,
                idempotency_key: None,
            };
            let body = if class.is_failure() {
                Body::Error { err, encoding: strategy.encoding }
            } else {
                Body::Partial {
                    json: EXAMPLE_RESULT,
                    stated_complete: strategy.partials == Partials::Terminal,
                    cursor: *fault == Fault::Ambiguous { cursor: true },
                }
            };
            let message = wrap_message(format, renderer.render(format, 1, "search", body));
            out.push(Rendering { strategy: strategy.clone(), format, message, failed: class.is_failure() });
        }
    }
    out
}

/// Where a format puts what the model reads: a content field, or Gemini's error or output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    Content,
    /// Gemini `response.error`: the model sees a failure.
    Error,
    /// Gemini `response.output` (or a bare response): the model sees the function's output.
    Output,
}

/// What the model reads of a result, whatever the format wraps it in: the content text (as
/// JSON when it is a JSON object), or Gemini's error object / output. A structural flag is not
/// part of it (check 3 looks at that).
pub fn model_view(format: Format, message: &str) -> Value {
    view_and_channel(format, message).0
}

fn view_and_channel(format: Format, message: &str) -> (Value, Channel) {
    let v: Value = serde_json::from_str(message).unwrap_or(Value::Null);
    let text_or_json = |c: &Value| match c {
        Value::String(s) => serde_json::from_str::<Value>(s).ok().filter(Value::is_object).unwrap_or(c.clone()),
        other => other.clone(),
    };
    match format.provider().result_part(&v) {
        Some(ResultPart::Content { content, .. }) => (text_or_json(content), Channel::Content),
        Some(ResultPart::Response(response)) => match (response.get("error"), response.get("output")) {
            (Some(e @ Value::Object(_)), _) => (e.clone(), Channel::Error),
            (Some(e), _) => (serde_json::json!({ "error": e }), Channel::Error),
            (None, Some(o)) => (o.clone(), Channel::Output),
            (None, None) => (response.clone(), Channel::Output),
        },
        None => (Value::Null, Channel::Content),
    }
}

/// Check 1, "one fixture through every adapter": every format must show the model the same
/// object for a strategy (only a flag the format does not have may differ, and it is not in
/// the view). Returns one line per strategy whose formats disagree.
pub fn adapter_differences(renderings: &[Rendering]) -> Vec<String> {
    let mut out = Vec::new();
    for strategy in Strategy::named() {
        let mine: Vec<&Rendering> = renderings.iter().filter(|r| r.strategy.name == strategy.name).collect();
        let views: Vec<(Format, Value, Channel)> = mine
            .iter()
            .map(|r| {
                let (v, c) = view_and_channel(r.format, &r.message);
                (r.format, v, c)
            })
            .collect();
        let Some((first_format, first, _)) = views.first() else { continue };
        for (r, (format, view, channel)) in mine.iter().zip(&views) {
            if view != first {
                out.push(format!(
                    "{}: {} shows {view}, {} shows {first} (one fixture through every adapter)",
                    strategy.name,
                    format.name(),
                    first_format.name()
                ));
            } else if r.failed && view.is_object() && *channel == Channel::Output {
                // Gemini reads an object under `output` (or a bare response) as the function's
                // result: the failure the other adapters show would reach the model as a success.
                out.push(format!(
                    "{}: {} shows the failure object as the function's output, a success (one fixture through every adapter)",
                    strategy.name,
                    format.name()
                ));
            }
        }
    }
    out
}

/// Checks 3, 4 and 5 on each rendering of a failure.
pub fn rendering_problems(renderings: &[Rendering]) -> Vec<String> {
    let mut out = Vec::new();
    for r in renderings {
        let (name, format) = (&r.strategy.name, r.format);
        let content = matches!(format.provider().result_shape(), ResultShape::Content { error_flag: false, .. });
        if content && r.strategy.encoding.is_json() && !model_view(format, &r.message).is_object() {
            out.push(format!("{name} / {}: tool message content is not JSON", format.name()));
        }
        let flagged = matches!(r.strategy.encoding, Encoding::Flag | Encoding::Envelope);
        let v: Value = serde_json::from_str(&r.message).unwrap_or(Value::Null);
        if format.has_error_flag() && flagged && v["content"][0]["is_error"] != true {
            out.push(format!("{name} / {}: failed result without is_error", format.name()));
        }
        if r.strategy.encoding != Encoding::Raw && read_message(format, &r.message).stack_trace {
            out.push(format!("{name} / {}: raw exception text reaches the model", format.name()));
        }
    }
    out
}

pub fn execute(args: EnvelopesArgs) -> Result<i32> {
    let fault = parse_fault(&args.fault)?;
    let class = fault.class();
    println!("fault: {} (true class: {})\n", fault.label(), class.name());
    let renderings = render_all(&fault);
    for strategy in Strategy::named() {
        let s = &strategy;
        println!("== {} (encoding {}, routing {:?}, partials {:?})", s.name, s.encoding.name(), s.routing, s.partials);
        for r in renderings.iter().filter(|r| r.strategy.name == s.name) {
            println!("  {:<16} {}", r.format.name(), r.message);
        }
        if Strategy::mcp_presets().iter().any(|m| m.name == s.name) {
            println!("  {:<16} {}", "mcp (server)", mcp_message(&fault, s.encoding));
        }
        println!();
    }
    let mut failures = adapter_differences(&renderings);
    if class.is_failure() {
        failures.extend(rendering_problems(&renderings));
    }
    failures.extend(non_retryable_retries()?);

    println!("portability checks:");
    let checks = [
        ("1. one fixture through every adapter (the object the model sees is the same in every format)", "adapter"),
        ("2. retryable=false never retried by the orchestrator", "never retried"),
        ("3. is_error on every failed Anthropic result (flag, envelope)", "is_error"),
        ("4. every OpenAI tool message parses as JSON (object, envelope)", "not JSON"),
        ("5. no raw exception text outside raw-exception", "raw exception"),
    ];
    for (name, needle) in checks {
        let bad: Vec<&String> = failures.iter().filter(|f| f.contains(needle)).collect();
        println!("  {} {}", if bad.is_empty() { "PASS" } else { "FAIL" }, name);
        for b in bad {
            println!("       {b}");
        }
    }
    println!("  (6. terminates rather than loops on a replayed failure trace: see `tracefault run`'s loop_rate)");
    Ok(if failures.is_empty() { exit::OK } else { exit::FAILED })
}

/// Runs each orchestrator-routed preset against every non-retryable status and reports any
/// orchestrator retry that followed one: the check drives the real engine, not a restatement.
fn non_retryable_retries() -> Result<Vec<String>> {
    struct Watch {
        last_class: Option<ErrorClass>,
        bad: u32,
    }
    impl Observer for Watch {
        fn event(&mut self, e: &Event<'_>) {
            if let Event::Attempt { by, class, .. } = *e {
                if by == By::Orchestrator && self.last_class.is_some_and(|c| !c.retryable()) {
                    self.bad += 1;
                }
                self.last_class = class;
            }
        }
    }
    let mut out = Vec::new();
    for status in HTTP_STATUSES.into_iter().filter(|&s| !Fault::http(s).class().retryable()) {
        let src = format!(
            "name = \"check\"\nruns = 1\n[task]\n[[task.steps]]\ntool = \"search\"\n[[faults]]\ntarget = \"search\"\nat = [1, 2, 3]\nhttp = {status}\n"
        );
        let sc = load_str(&src, Path::new("<envelopes check>"))?;
        for (i, s) in sc.strategies.iter().enumerate() {
            if s.routing != Routing::Orchestrator {
                continue;
            }
            for run in 0..20 {
                let mut w = Watch { last_class: None, bad: 0 };
                crate::suite::run_one(&sc, i, run, &mut w);
                if w.bad > 0 {
                    out.push(format!("{}: HTTP {status} retried by the orchestrator (never retried check)", s.name));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_adapter_shows_the_same_object() {
        for f in [
            Fault::http(503),
            Fault::http(429),
            Fault::http(400),
            Fault::Timeout { after_ms: 1 },
            Fault::Ambiguous { cursor: false },
        ] {
            assert_eq!(adapter_differences(&render_all(&f)), Vec::<String>::new(), "{f:?}");
        }
    }

    #[test]
    fn check_one_fails_when_an_adapter_drifts() {
        let mut r = render_all(&Fault::http(503));
        // A Gemini serializer that put the envelope bare under `response` (read as the output).
        let g = r.iter_mut().find(|r| r.strategy.name == "five-field" && r.format == Format::Gemini).expect("rendered");
        g.message = g.message.replace(r#""response":{"error":"#, r#""response":{"output":"#);
        let diffs = adapter_differences(&r);
        assert_eq!(diffs.len(), 1, "{diffs:?}");
        assert!(
            diffs[0].starts_with("five-field: gemini shows the failure object as the function's output"),
            "{}",
            diffs[0]
        );
    }

    #[test]
    fn checks_three_to_five_fail_on_bad_renderings() {
        let mut r = render_all(&Fault::http(503));
        assert_eq!(rendering_problems(&r), Vec::<String>::new());
        for x in r.iter_mut() {
            match (x.strategy.name.as_str(), x.format) {
                ("five-field", Format::Anthropic) => x.message = x.message.replace(r#","is_error":true"#, ""),
                ("response-object", Format::OpenAiChat) => {
                    x.message = r#"{"role":"tool","tool_call_id":"call_1","content":"not json"}"#.into()
                }
                ("error-string", Format::OpenAiResponses) => {
                    x.message = r#"{"type":"function_call_output","call_id":"call_1","output":"Traceback (most recent call last): x"}"#.into()
                }
                _ => {}
            }
        }
        let p = rendering_problems(&r);
        assert_eq!(p.len(), 3, "{p:?}");
    }

    #[test]
    fn damaged_bodies_reach_raw_strategies_unparsed() {
        let r = render_all(&Fault::TruncatedJson);
        let raw = r.iter().find(|r| r.strategy.name == "raw-exception" && r.format == Format::OpenAiChat).unwrap();
        assert_eq!(model_view(raw.format, &raw.message), Value::String(r#"{"city":"Paris"#.into()));
        let r = render_all(&Fault::CodeFencedJson);
        let raw = r.iter().find(|r| r.strategy.name == "raw-exception" && r.format == Format::Gemini).unwrap();
        assert_eq!(model_view(raw.format, &raw.message), Value::String(format!("```json\n{EXAMPLE_RESULT}\n```")));
    }
}
