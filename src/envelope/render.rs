//! Serializers: one [`ToolError`] or result, rendered as the exact object a model would see in
//! each provider format. Writes into reusable buffers; no allocation once they have grown.

use super::{Encoding, ErrorKind, ToolError};
use crate::fault::Fault;
use crate::provider::{Format, ResultShape};

/// What one tool call returned, as the orchestrator hands it to the model.
#[derive(Clone, Copy, Debug)]
pub enum Body<'a> {
    /// A success: `json` is the result as JSON text; `text_literal` is the content string of
    /// string-content formats, already a JSON string literal (a JSON string result unquoted,
    /// then escaped once when the task was compiled).
    Ok {
        json: &'a str,
        text_literal: &'a str,
    },
    /// A result that is complete in truth; `stated_complete` is the `partials = "terminal"`
    /// strategy, otherwise it says more may be available (and gives a `next_cursor` when the
    /// fault has one).
    Partial {
        json: &'a str,
        stated_complete: bool,
        cursor: bool,
    },
    Error {
        err: ToolError<'a>,
        encoding: Encoding,
    },
}

/// What a host shows the model for an MCP tool call that ended in a JSON-RPC error: the OpenAI
/// Agents SDK's `default_tool_error_function` (openai-agents 0.24.0, `agents/tool.py`), which
/// its MCP tools use unless told otherwise. The error's own message never reaches the model.
pub const HOST_ERROR_TEXT: &str = "An error occurred while running the tool. Please try again.";

/// Note attached to ambiguous partial results (the phrase the seeds warn about).
pub const MORE_AVAILABLE: &str = "More results may be available.";

#[derive(Default)]
pub struct Renderer {
    payload: String,
    out: String,
    /// Holds the one-sentence message while it is embedded in a JSON object.
    scratch: String,
    num: itoa::Buffer,
}

impl Renderer {
    /// Renders the result of call `call_id` of `tool` in `format`; returns the bytes.
    pub fn render(&mut self, format: Format, call_id: u32, tool: &str, body: Body<'_>) -> &str {
        self.payload.clear();
        self.out.clear();
        let (prefix, content_key, error_flag) = match format.provider().result_shape() {
            ResultShape::Content { prefix, content_key, error_flag } => (prefix, content_key, error_flag),
            ResultShape::FunctionResponse { prefix } => {
                self.render_function_response(prefix, call_id, tool, body);
                return &self.out;
            }
        };
        let flagged = match body {
            Body::Ok { text_literal, .. } => {
                self.out.push_str(prefix);
                self.out.push_str(self.num.format(call_id));
                self.out.push_str(r#"","#);
                self.out.push_str(content_key);
                self.out.push_str(text_literal);
                self.out.push('}');
                return &self.out;
            }
            Body::Partial { json, stated_complete, cursor } => {
                partial_payload(&mut self.payload, json, stated_complete, cursor);
                false
            }
            Body::Error { err, encoding } => {
                error_payload(&mut self.payload, &mut self.scratch, &mut self.num, &err, encoding);
                error_flag && matches!(encoding, Encoding::Flag | Encoding::Envelope)
            }
        };
        let out = &mut self.out;
        out.push_str(prefix);
        out.push_str(self.num.format(call_id));
        out.push_str(r#"","#);
        out.push_str(content_key);
        push_json_str(out, &self.payload);
        if flagged {
            out.push_str(r#","is_error":true"#);
        }
        out.push('}');
        &self.out
    }

    /// Gemini's `functionResponse` part.
    fn render_function_response(&mut self, prefix: &str, call_id: u32, tool: &str, body: Body<'_>) {
        let out = &mut self.out;
        out.push_str(prefix);
        out.push_str(self.num.format(call_id));
        out.push_str(r#"","name":"#);
        push_json_str(out, tool);
        out.push_str(r#","response":"#);
        match body {
            Body::Ok { json, .. } => {
                out.push_str(r#"{"output":"#);
                out.push_str(json);
                out.push('}');
            }
            Body::Partial { json, stated_complete, cursor } => {
                out.push_str(r#"{"output":"#);
                partial_payload(out, json, stated_complete, cursor);
                out.push('}');
            }
            // Gemini reads a response without `output` or `error` as the output (its function
            // calling guide): the JSON encodings go under `error`, where the model sees a failure.
            Body::Error { err, encoding: Encoding::Envelope } => {
                out.push_str(r#"{"error":"#);
                five_fields(out, &mut self.scratch, &mut self.num, &err);
                out.push('}');
            }
            Body::Error { err, encoding: Encoding::Object } => {
                error_payload(out, &mut self.scratch, &mut self.num, &err, Encoding::Object)
            }
            // Text encodings are the tool's output, as an agent that returns the string sends it.
            Body::Error { err, encoding } => {
                error_payload(&mut self.payload, &mut self.scratch, &mut self.num, &err, encoding);
                out.push_str(r#"{"output":"#);
                push_json_str(out, &self.payload);
                out.push('}');
            }
        }
        out.push_str("}}");
    }
}

/// The whole message an API receives for one tool result: OpenAI's `tool` message and the
/// Responses item stand alone; Anthropic's block and Gemini's part sit in a `user` turn.
pub fn wrap_message(format: Format, item: &str) -> String {
    format.provider().wrap_message(item)
}

/// The cursor an ambiguous result gives (following it returns the same page).
pub const NEXT_CURSOR: &str = "page-2";

fn partial_payload(out: &mut String, json: &str, stated_complete: bool, cursor: bool) {
    out.push_str(r#"{"data":"#);
    out.push_str(json);
    if stated_complete {
        out.push_str(r#","complete":true}"#);
    } else {
        out.push_str(r#","note":""#);
        out.push_str(MORE_AVAILABLE);
        if cursor {
            out.push_str(r#"","next_cursor":""#);
            out.push_str(NEXT_CURSOR);
        }
        out.push_str(r#""}"#);
    }
}

/// An ambiguous result as a tool server sends it: the data, and unless it is stated complete,
/// the note that more may be available (and the cursor, when the fault gives one).
pub fn partial_text(json: &str, stated_complete: bool, cursor: bool) -> String {
    let mut out = String::with_capacity(json.len() + 64);
    partial_payload(&mut out, json, stated_complete, cursor);
    out
}

/// The text of a failed result (for JSON encodings, the JSON object itself).
fn error_payload(
    out: &mut String,
    scratch: &mut String,
    num: &mut itoa::Buffer,
    err: &ToolError<'_>,
    encoding: Encoding,
) {
    match encoding {
        Encoding::Raw => raw_exception(out, num, err),
        Encoding::Prefix => {
            out.push_str("ERROR: ");
            sentence(out, num, err);
        }
        Encoding::Flag => sentence(out, num, err),
        Encoding::Object => {
            scratch.clear();
            sentence(scratch, num, err);
            out.push_str(r#"{"error":"#);
            push_json_str(out, scratch);
            out.push('}');
        }
        Encoding::Envelope => five_fields(out, scratch, num, err),
        Encoding::JsonRpcError => out.push_str(HOST_ERROR_TEXT),
    }
}

/// The text of a failed result under `encoding`, as a tool server would send it (the five
/// fields' JSON for the envelope).
pub fn error_text(err: &ToolError<'_>, encoding: Encoding) -> String {
    let mut out = String::new();
    error_payload(&mut out, &mut String::new(), &mut itoa::Buffer::new(), err, encoding);
    out
}

/// `{"code","message","retryable","details","source"}`; `scratch` holds the sentence.
fn five_fields(out: &mut String, scratch: &mut String, num: &mut itoa::Buffer, err: &ToolError<'_>) {
    scratch.clear();
    sentence(scratch, num, err);
    out.push_str(r#"{"code":""#);
    out.push_str(err.code());
    out.push_str(r#"","message":"#);
    push_json_str(out, scratch);
    out.push_str(if err.retryable() {
        r#","retryable":true,"details":{"#
    } else {
        r#","retryable":false,"details":{"#
    });
    let mut sep = "";
    if let Some(status) = err.status() {
        out.push_str(r#""status":"#);
        out.push_str(num.format(status));
        sep = ",";
    }
    out.push_str(sep);
    out.push_str(r#""tool":"#);
    push_json_str(out, err.tool);
    out.push_str(r#","attempts":"#);
    out.push_str(num.format(err.attempts));
    if let Some(ms) = err.retry_after_ms {
        out.push_str(r#","retry_after_seconds":"#);
        out.push_str(num.format(super::stated_seconds(ms)));
    }
    if let Some(key) = err.idempotency_key {
        out.push_str(r#","idempotency_key":"#);
        push_json_str(out, key);
    }
    if let ErrorKind::Fault(Fault::Http { param: Some(p), .. }) = err.kind {
        out.push_str(r#","param":"#);
        push_json_str(out, p);
    }
    out.push_str(r#"},"source":""#);
    out.push_str(match err.source() {
        super::Source::Tool => "tool",
        super::Source::Orchestrator => "orchestrator",
    });
    out.push_str(r#""}"#);
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Error",
    }
}

/// One sentence for the model: what went wrong and what to do next.
pub fn sentence(out: &mut String, num: &mut itoa::Buffer, err: &ToolError<'_>) {
    let tool = err.tool;
    match err.kind {
        ErrorKind::CircuitOpen => {
            out.push_str("The ");
            out.push_str(tool);
            out.push_str(" tool is switched off after repeated failures (circuit open); do not call it for ");
            out.push_str(num.format(super::stated_seconds(err.retry_after_ms.unwrap_or(0))));
            out.push_str(" seconds.");
        }
        ErrorKind::Fault(fault) => match fault {
            Fault::Http { status: 429, .. } => {
                out.push_str("The ");
                out.push_str(tool);
                out.push_str(" tool is rate limited (HTTP 429 Too Many Requests); retry after ");
                match err.retry_after_ms {
                    Some(ms) => {
                        out.push_str(num.format(super::stated_seconds(ms)));
                        out.push_str(" seconds.");
                    }
                    None => out.push_str("a short wait."),
                }
            }
            Fault::Http { status: s @ (400 | 422), param, message, .. } => {
                out.push_str("The ");
                out.push_str(tool);
                match param {
                    Some(p) => {
                        out.push_str(" tool rejected argument '");
                        out.push_str(p);
                        out.push('\'');
                    }
                    None => out.push_str(" tool rejected the arguments"),
                }
                out.push_str(" (HTTP ");
                out.push_str(num.format(*s));
                out.push_str("): ");
                out.push_str(message.as_deref().unwrap_or("fix the arguments and call it again"));
                out.push('.');
            }
            Fault::Http { status, .. } if fault.class().retryable() => {
                out.push_str("The ");
                out.push_str(tool);
                out.push_str(" tool is temporarily unavailable (HTTP ");
                out.push_str(num.format(*status));
                out.push(' ');
                out.push_str(reason(*status));
                out.push_str("); the same call may succeed later.");
            }
            Fault::Http { status, .. } => {
                out.push_str("The ");
                out.push_str(tool);
                out.push_str(" tool refused the call (HTTP ");
                out.push_str(num.format(*status));
                out.push(' ');
                out.push_str(reason(*status));
                out.push_str("); retrying will not help.");
            }
            Fault::Timeout { after_ms } => {
                out.push_str("The ");
                out.push_str(tool);
                out.push_str(" tool timed out after ");
                out.push_str(num.format(*after_ms));
                out.push_str(" ms; the same call may succeed later.");
            }
            Fault::Reset | Fault::StreamDropped | Fault::Stream { .. } => {
                out.push_str("The connection to the ");
                out.push_str(tool);
                out.push_str(" tool was reset; the same call may succeed later.");
            }
            Fault::SessionExpired => {
                out.push_str("The session with the ");
                out.push_str(tool);
                out.push_str(" tool's server expired; the same call may succeed after reconnecting.");
            }
            Fault::SchemaDrift => {
                out.push_str("The ");
                out.push_str(tool);
                out.push_str(
                    " tool's input schema changed since the tools were listed; list the tools again and call it \
                     with arguments that match the new schema.",
                );
            }
            Fault::TruncatedJson | Fault::CodeFencedJson => {
                out.push_str("The ");
                out.push_str(tool);
                out.push_str(" tool returned a damaged response; the same call may succeed later.");
            }
            Fault::Ambiguous { .. } => {
                out.push_str("The ");
                out.push_str(tool);
                out.push_str(" tool returned partial data.");
            }
            // A tainted result is a success, never told as a failure (kept for totality).
            Fault::WrongContent | Fault::LargeResponse { .. } | Fault::InjectedInstruction { .. } => {
                out.push_str("The ");
                out.push_str(tool);
                out.push_str(" tool returned a result.");
            }
        },
    }
}

/// What a strategy that passes on what the tool client got shows: the Python exception text
/// (`str(traceback)`), or for a damaged body, the body itself, unparsed.
fn raw_exception(out: &mut String, num: &mut itoa::Buffer, err: &ToolError<'_>) {
    match err.kind {
        ErrorKind::Fault(Fault::TruncatedJson) => return out.push_str(truncated(err.body)),
        ErrorKind::Fault(Fault::CodeFencedJson) => {
            out.push_str("```json\n");
            out.push_str(err.body);
            out.push_str("\n```");
            return;
        }
        _ => {}
    }
    out.push_str("Traceback (most recent call last):\n  File \"agent/tools.py\", line 88, in call_tool\n");
    match err.kind {
        ErrorKind::CircuitOpen => {
            out.push_str("    return breaker.call(fn, **args)\npybreaker.CircuitBreakerError: Timeout not elapsed yet, circuit breaker still open");
        }
        ErrorKind::Fault(fault) => match fault {
            Fault::Http { status, .. } => {
                out.push_str("    response.raise_for_status()\nrequests.exceptions.HTTPError: ");
                out.push_str(num.format(*status));
                out.push_str(if *status < 500 { " Client Error: " } else { " Server Error: " });
                out.push_str(reason(*status));
                out.push_str(" for url: http://tools.internal/");
                out.push_str(err.tool);
            }
            Fault::Timeout { .. } => out.push_str(
                "    response = session.post(url, json=args, timeout=timeout)\nrequests.exceptions.ReadTimeout: HTTPConnectionPool(host='tools.internal', port=80): Read timed out. (read timeout=30.0)",
            ),
            Fault::Reset | Fault::StreamDropped | Fault::Stream { .. } => out.push_str(
                "    response = session.post(url, json=args, timeout=timeout)\nrequests.exceptions.ConnectionError: ('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))",
            ),
            Fault::SessionExpired => out.push_str(
                "    result = await session.call_tool(name, args)\nmcp.shared.exceptions.MCPError: Session terminated",
            ),
            Fault::SchemaDrift => out.push_str(
                "    result = await session.call_tool(name, args)\nmcp.shared.exceptions.MCPError: Invalid params: the tool's input schema changed",
            ),
            Fault::TruncatedJson
            | Fault::CodeFencedJson
            | Fault::Ambiguous { .. }
            | Fault::WrongContent
            | Fault::LargeResponse { .. }
            | Fault::InjectedInstruction { .. } => out.push_str("    return response.json()\nValueError: partial data"),
        },
    }
}

/// The first half of a body, cut at a character boundary: what a dropped connection leaves.
pub fn truncated(body: &str) -> &str {
    let mut cut = body.len() / 2;
    while !body.is_char_boundary(cut) {
        cut -= 1;
    }
    &body[..cut]
}

/// A mask with the high bit set in bytes of `w` that need escaping in a JSON string (`"`,
/// `\\`, < 0x20). Borrows only run upward, so the lowest set bit is always a true hit.
#[inline]
fn escape_mask(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    below_space | zero_byte(w ^ (ONES * u64::from(b'"'))) | zero_byte(w ^ (ONES * u64::from(b'\\')))
}

/// Appends `s` as a JSON string literal. Scans 8 bytes at a time: results are mostly plain text.
pub fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if i + 8 <= bytes.len() {
            let w = u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
            let mask = escape_mask(w);
            if mask == 0 {
                i += 8;
                continue;
            }
            i += (mask.trailing_zeros() / 8) as usize;
        }
        let b = bytes[i];
        let esc = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => {
                i += 1;
                continue;
            }
        };
        out.push_str(&s[start..i]);
        if esc.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 0xf)] as char);
        } else {
            out.push_str(esc);
        }
        i += 1;
        start = i;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_escape_mask_flags_exactly_the_bytes_that_need_escaping() {
        for b in 0..=255u8 {
            let needs = b == b'"' || b == b'\\' || b < 0x20;
            let w = u64::from_le_bytes([b'a', b'a', b'a', b, b'a', b'a', b'a', b'a']);
            let mask = escape_mask(w);
            assert_eq!(mask != 0, needs, "byte {b:#04x}");
            if needs {
                assert_eq!(mask.trailing_zeros() / 8, 3, "byte {b:#04x} found at its place");
            }
        }
    }
    use crate::fault::ErrorClass;

    fn err(fault: &Fault) -> ToolError<'_> {
        ToolError {
            kind: ErrorKind::Fault(fault),
            class: fault.class(),
            tool: "search",
            attempts: 1,
            retry_after_ms: None,
            body: r#"{"hits":3}"#,
            idempotency_key: None,
        }
    }

    #[test]
    fn every_rendering_is_valid_json() {
        let faults = [
            Fault::Http { status: 503, retry_after_ms: None, param: None, message: None },
            Fault::Http {
                status: 400,
                retry_after_ms: None,
                param: Some("q\"x".into()),
                message: Some("bad\nvalue".into()),
            },
            Fault::Timeout { after_ms: 30_000 },
            Fault::Reset,
            Fault::SessionExpired,
            Fault::TruncatedJson,
        ];
        let mut r = Renderer::default();
        for f in &faults {
            for format in Format::ALL {
                for encoding in Encoding::ALL {
                    let s = r.render(format, 7, "search", Body::Error { err: err(f), encoding });
                    let v: serde_json::Value = serde_json::from_str(s).unwrap_or_else(|e| panic!("{s}: {e}"));
                    assert!(v.is_object());
                }
            }
        }
    }

    /// The engine caches a result by the seconds its wait states (`stated_seconds`), so a
    /// rendering must not tell waits of the same stated seconds apart, and must tell others.
    #[test]
    fn a_wait_shows_only_as_its_stated_seconds() {
        let mut r = Renderer::default();
        for status in [429, 503] {
            let f = Fault::Http { status, retry_after_ms: None, param: None, message: None };
            for kind in [ErrorKind::Fault(&f), ErrorKind::CircuitOpen] {
                for format in Format::ALL {
                    for encoding in Encoding::ALL {
                        let mut render = |ms| {
                            let err = ToolError { kind, retry_after_ms: Some(ms), ..err(&f) };
                            r.render(format, 7, "search", Body::Error { err, encoding }).to_owned()
                        };
                        let (a, b, c) = (render(11_001), render(12_000), render(12_001));
                        assert_eq!(a, b, "{format:?} {encoding:?}");
                        if encoding == Encoding::Envelope {
                            assert_ne!(b, c, "{format:?}: the wait is not shown");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn flag_only_on_anthropic() {
        let f = Fault::Http { status: 503, retry_after_ms: None, param: None, message: None };
        let mut r = Renderer::default();
        let a =
            r.render(Format::Anthropic, 1, "search", Body::Error { err: err(&f), encoding: Encoding::Flag }).to_owned();
        assert!(a.ends_with(r#","is_error":true}"#), "{a}");
        let o = r.render(Format::OpenAiChat, 1, "search", Body::Error { err: err(&f), encoding: Encoding::Flag });
        assert!(!o.contains("is_error"), "OpenAI has no flag: {o}");
    }

    #[test]
    fn five_fields_match_the_seed() {
        let f = Fault::Http { status: 429, retry_after_ms: Some(12_000), param: None, message: None };
        let e = ToolError { attempts: 3, retry_after_ms: Some(12_000), ..err(&f) };
        assert_eq!(e.class, ErrorClass::RateLimited);
        let mut r = Renderer::default();
        let s = r.render(
            Format::Gemini,
            1,
            "get_weather",
            Body::Error { err: ToolError { tool: "get_weather", ..e }, encoding: Encoding::Envelope },
        );
        let v: serde_json::Value = serde_json::from_str(s).unwrap();
        let resp = &v["functionResponse"]["response"]["error"];
        assert_eq!(resp["code"], "RATE_LIMITED");
        assert_eq!(resp["retryable"], true);
        assert_eq!(resp["source"], "tool");
        assert_eq!(resp["details"]["status"], 429);
        assert_eq!(resp["details"]["retry_after_seconds"], 12);
        assert_eq!(resp["details"]["tool"], "get_weather");
    }

    #[test]
    fn escapes_control_characters() {
        let mut s = String::new();
        push_json_str(&mut s, "a\"b\\c\u{1}\n");
        assert_eq!(s, r#""a\"b\\c\u0001\n""#);
    }
}
