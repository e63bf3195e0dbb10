//! `tracefault envelopes`: one failure rendered by every strategy in every provider format,
//! side by side, then the seeds' portability checks on what was rendered.

use std::path::Path;

use super::EnvelopesArgs;
use crate::engine::events::{By, Event, Observer};
use crate::engine::faults::{Fault, http_class};
use crate::engine::strategy::{Routing, Strategy};
use crate::envelope::read::Reader;
use crate::envelope::render::{Body, Renderer};
use crate::envelope::{ErrorKind, Format, ToolError};
use crate::error::{Error, Result, exit};
use crate::scenario::load::load_str;

fn parse_fault(s: &str) -> Result<Fault> {
    if let Ok(status) = s.parse::<u16>() {
        if http_class(status).is_none() {
            return Err(Error::Usage(format!(
                "--fault {s}: not a status tracefault injects (400, 401, 402, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 504, 529)"
            )));
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
        "truncated_json" => Fault::TruncatedJson,
        "code_fenced_json" => Fault::CodeFencedJson,
        "ambiguous" => Fault::Ambiguous,
        "no_progress" => Fault::NoProgress,
        _ => {
            return Err(Error::Usage(format!(
                "--fault {s}: expected an HTTP status or timeout, reset, truncated_json, code_fenced_json, ambiguous, no_progress"
            )));
        }
    })
}

/// The text a model reads inside one rendered result (content, output or response).
fn model_text(format: Format, rendered: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(rendered).ok()?;
    let field = match format {
        Format::OpenAiChat | Format::GeminiOpenAi | Format::Anthropic => &v["content"],
        Format::OpenAiResponses => &v["output"],
        Format::Gemini => return Some(v["functionResponse"]["response"].to_string()),
    };
    field.as_str().map(str::to_owned)
}

pub fn execute(args: EnvelopesArgs) -> Result<i32> {
    let fault = parse_fault(&args.fault)?;
    let class = fault.class();
    let mut renderer = Renderer::default();
    let reader = Reader::default();
    let strategies = Strategy::presets();
    let mut failures: Vec<String> = Vec::new();
    println!("fault: {} (true class: {})\n", fault.label(), class.name());
    for s in &strategies {
        println!("== {} (encoding {}, routing {:?}, partials {:?})", s.name, s.encoding.name(), s.routing, s.partials);
        for format in Format::ALL {
            let err = ToolError {
                kind: ErrorKind::Fault(&fault),
                class,
                tool: "search",
                attempts: 1,
                retry_after_ms: fault_retry_after(&fault),
            };
            let body = if class.is_failure() {
                Body::Error { err, encoding: s.encoding }
            } else {
                Body::Partial {
                    json: r#"{"hits":3}"#,
                    stated_complete: s.partials == crate::engine::strategy::Partials::Terminal,
                }
            };
            let rendered = renderer.render(format, 1, "search", body).to_owned();
            println!("  {:<16} {}", format.name(), rendered);
            if !class.is_failure() {
                continue;
            }
            let openai_like = matches!(format, Format::OpenAiChat | Format::OpenAiResponses | Format::GeminiOpenAi);
            if openai_like && s.encoding.is_json() {
                let ok = model_text(format, &rendered)
                    .is_some_and(|t| serde_json::from_str::<serde_json::Value>(&t).is_ok_and(|v| v.is_object()));
                if !ok {
                    failures.push(format!("{} / {}: tool message content is not JSON", s.name, format.name()));
                }
            }
            if format == Format::Anthropic
                && matches!(s.encoding, crate::envelope::Encoding::Flag | crate::envelope::Encoding::Envelope)
                && !rendered.contains(r#""is_error":true"#)
            {
                failures.push(format!("{} / anthropic: failed result without is_error", s.name));
            }
            if s.name != "raw-exception" && reader.has_stack_trace(&rendered) {
                failures.push(format!("{} / {}: raw exception text reaches the model", s.name, format.name()));
            }
        }
        println!();
    }
    let retried = non_retryable_retries()?;
    failures.extend(retried);

    println!("portability checks (seed 000's checklist):");
    let checks = [
        ("1. one fixture through every adapter", None),
        ("2. retryable=false never retried by the orchestrator", Some("never retried")),
        ("3. is_error on every failed Anthropic result (flag, envelope)", Some("is_error")),
        ("4. every OpenAI tool message parses as JSON (object, envelope)", Some("not JSON")),
        ("5. no raw exception text outside raw-exception", Some("raw exception")),
    ];
    for (name, needle) in checks {
        let bad: Vec<&String> = needle.map_or(Vec::new(), |n| failures.iter().filter(|f| f.contains(n)).collect());
        println!("  {} {}", if bad.is_empty() { "PASS" } else { "FAIL" }, name);
        for b in bad {
            println!("       {b}");
        }
    }
    println!("  (6. terminates rather than loops on a replayed failure trace: see `tracefault run`'s loop_rate)");
    Ok(if failures.is_empty() { exit::OK } else { exit::FAILED })
}

fn fault_retry_after(f: &Fault) -> Option<u64> {
    match f {
        Fault::Http { retry_after_ms, .. } => *retry_after_ms,
        _ => None,
    }
}

/// Runs each orchestrator-routed preset against every non-retryable status and reports any
/// orchestrator retry that followed one: the check drives the real engine, not a restatement.
fn non_retryable_retries() -> Result<Vec<String>> {
    struct Watch {
        last_class: Option<crate::engine::faults::ErrorClass>,
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
    for status in [400, 401, 402, 403, 404, 413, 422] {
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
