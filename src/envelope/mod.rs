//! Error envelopes: one internal [`ToolError`] (the five fields), the encodings a strategy
//! can choose, and one small serializer per provider format ([`render`]). [`read`] is the
//! simulated model's side: it looks only at the serialized bytes.

pub mod read;
pub mod render;

use crate::fault::{ErrorClass, Fault};

/// How a failed call is shown to the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Encoding {
    /// The tool client's exception text, stack line included.
    Raw,
    /// `ERROR: <one sentence>`.
    Prefix,
    /// Anthropic `is_error: true` plus one sentence (dropped where the format has no flag).
    Flag,
    /// `{"error": "<one sentence>"}`.
    Object,
    /// The five fields as JSON, plus `is_error` on Anthropic.
    Envelope,
    /// An MCP server's JSON-RPC error, as a host that catches it shows the model: one fixed
    /// sentence, whatever failed ([`render::HOST_ERROR_TEXT`]).
    JsonRpcError,
}

impl Encoding {
    pub const ALL: [Encoding; 6] =
        [Encoding::Raw, Encoding::Prefix, Encoding::Flag, Encoding::Object, Encoding::Envelope, Encoding::JsonRpcError];

    pub fn name(self) -> &'static str {
        match self {
            Encoding::Raw => "raw",
            Encoding::Prefix => "prefix",
            Encoding::Flag => "flag",
            Encoding::Object => "object",
            Encoding::Envelope => "envelope",
            Encoding::JsonRpcError => "jsonrpc-error",
        }
    }

    pub fn parse(s: &str) -> Option<Encoding> {
        Encoding::ALL.into_iter().find(|e| e.name() == s)
    }

    /// Whether the strategy promises JSON tool content for failures.
    pub fn is_json(self) -> bool {
        matches!(self, Encoding::Object | Encoding::Envelope)
    }
}

/// Where a failure came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Tool,
    Orchestrator,
}

/// What went wrong, in the terms the envelope needs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ErrorKind<'a> {
    Fault(&'a Fault),
    CircuitOpen,
}

/// A wait as every rendering states it: whole seconds, rounded up. Renderings depend on a
/// wait only through this, so results whose waits state the same seconds read the same.
pub fn stated_seconds(wait_ms: u64) -> u64 {
    wait_ms.div_ceil(1000)
}

/// The one internal error type: every encoding and format is rendered from it.
#[derive(Clone, Copy, Debug)]
pub struct ToolError<'a> {
    pub kind: ErrorKind<'a>,
    pub class: ErrorClass,
    pub tool: &'a str,
    /// Attempts the orchestrator made before handing this to the model.
    pub attempts: u32,
    /// A server-announced or breaker wait, when known.
    pub retry_after_ms: Option<u64>,
    /// The body the tool sent (its successful result as JSON): what a damaged-body fault
    /// shows a strategy that passes the body on unparsed.
    pub body: &'a str,
    /// The idempotency key the call carried, to a write tool: the envelope's `details` hand
    /// it back, so the model's re-issue can carry it again.
    pub idempotency_key: Option<&'a str>,
}

impl ToolError<'_> {
    pub fn retryable(&self) -> bool {
        self.class.retryable()
    }

    pub fn source(&self) -> Source {
        match self.kind {
            ErrorKind::Fault(_) => Source::Tool,
            ErrorKind::CircuitOpen => Source::Orchestrator,
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self.kind {
            ErrorKind::Fault(f) => f.status(),
            ErrorKind::CircuitOpen => None,
        }
    }

    /// The short stable token code branches on.
    pub fn code(&self) -> &'static str {
        match self.kind {
            ErrorKind::CircuitOpen => "CIRCUIT_OPEN",
            ErrorKind::Fault(f) => match f {
                Fault::Http { status, .. } => match status {
                    429 => "RATE_LIMITED",
                    400 | 422 => "INVALID_ARGS",
                    401 => "UNAUTHORIZED",
                    402 => "PAYMENT_REQUIRED",
                    403 => "FORBIDDEN",
                    404 => "NOT_FOUND",
                    413 => "PAYLOAD_TOO_LARGE",
                    _ => "TRANSPORT",
                },
                Fault::Timeout { .. } => "TIMEOUT",
                Fault::Reset | Fault::StreamDropped | Fault::SessionExpired | Fault::Stream { .. } => "TRANSPORT",
                Fault::SchemaDrift => "SCHEMA_CHANGED",
                Fault::TruncatedJson | Fault::CodeFencedJson => "BAD_RESPONSE",
                Fault::Ambiguous { .. } => "PARTIAL",
                // A tainted result is a success: no envelope carries it (kept for totality).
                Fault::WrongContent | Fault::LargeResponse { .. } | Fault::InjectedInstruction { .. } => "OK",
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_has_its_stable_code() {
        let code = |f: &Fault| {
            ToolError {
                kind: ErrorKind::Fault(f),
                class: f.class(),
                tool: "t",
                attempts: 1,
                retry_after_ms: None,
                body: "",
                idempotency_key: None,
            }
            .code()
        };
        let table = [
            (429, "RATE_LIMITED"),
            (400, "INVALID_ARGS"),
            (422, "INVALID_ARGS"),
            (401, "UNAUTHORIZED"),
            (402, "PAYMENT_REQUIRED"),
            (403, "FORBIDDEN"),
            (404, "NOT_FOUND"),
            (413, "PAYLOAD_TOO_LARGE"),
            (408, "TRANSPORT"),
            (503, "TRANSPORT"),
            (529, "TRANSPORT"),
        ];
        for (status, want) in table {
            assert_eq!(code(&Fault::http(status)), want, "{status}");
        }
        assert_eq!(code(&Fault::Timeout { after_ms: 5 }), "TIMEOUT");
        assert_eq!(code(&Fault::Reset), "TRANSPORT");
        assert_eq!(code(&Fault::TruncatedJson), "BAD_RESPONSE");
        assert_eq!(code(&Fault::CodeFencedJson), "BAD_RESPONSE");
        assert_eq!(code(&Fault::Ambiguous { cursor: true }), "PARTIAL");
        let open = ToolError {
            kind: ErrorKind::CircuitOpen,
            class: ErrorClass::Transient,
            tool: "t",
            attempts: 0,
            retry_after_ms: Some(5),
            body: "",
            idempotency_key: None,
        };
        assert_eq!(open.code(), "CIRCUIT_OPEN");
    }
}
