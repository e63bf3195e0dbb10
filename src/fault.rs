//! The fault vocabulary every layer shares: the true class of an outcome, the faults a rule can
//! inject, and which HTTP statuses tracefault knows (the book: faults). It imports nothing of the
//! crate, so envelopes, the engine, importers and wire mode all stand on it.

/// The true class of an outcome (the book: faults).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorClass {
    Transient,
    RateLimited,
    BadArgs,
    Terminal,
    Partial,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 5] = [
        ErrorClass::Transient,
        ErrorClass::RateLimited,
        ErrorClass::BadArgs,
        ErrorClass::Terminal,
        ErrorClass::Partial,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Transient => "transient",
            ErrorClass::RateLimited => "rate_limited",
            ErrorClass::BadArgs => "bad_args",
            ErrorClass::Terminal => "terminal",
            ErrorClass::Partial => "partial",
        }
    }

    pub fn parse(s: &str) -> Option<ErrorClass> {
        ErrorClass::ALL.into_iter().find(|c| c.name() == s)
    }

    /// Whether the orchestrator may retry it (the seeds' retryable set).
    pub fn retryable(self) -> bool {
        matches!(self, ErrorClass::Transient | ErrorClass::RateLimited)
    }

    /// Whether the call failed (a partial result is a 200 that only looks incomplete).
    pub fn is_failure(self) -> bool {
        !matches!(self, ErrorClass::Partial)
    }
}

/// The statuses a fault may carry, as the error text lists them.
pub const HTTP_STATUSES: [u16; 15] = [400, 401, 402, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 504, 529];

/// HTTP statuses a fault may carry, with their class.
pub fn http_class(status: u16) -> Option<ErrorClass> {
    match status {
        429 => Some(ErrorClass::RateLimited),
        408 | 409 | 500 | 502 | 503 | 504 | 529 => Some(ErrorClass::Transient),
        400 | 422 => Some(ErrorClass::BadArgs),
        401 | 402 | 403 | 404 | 413 => Some(ErrorClass::Terminal),
        _ => None,
    }
}

/// What a rule does to the attempt it fires on.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    Http {
        status: u16,
        retry_after_ms: Option<u64>,
        param: Option<String>,
        message: Option<String>,
    },
    Timeout {
        after_ms: u64,
    },
    Reset,
    /// MCP over streamable HTTP: the server forgets the client's session (404 on its session
    /// id); the call succeeds after the client initialises again. A transient failure.
    SessionExpired,
    /// MCP over streamable HTTP: the event stream the answer was to come on opens and is
    /// dropped before the answer. Elsewhere the same as `Reset`. A transient failure.
    StreamDropped,
    /// The tool's input schema changed under the caller (MCP: `notifications/tools/list_changed`
    /// and a new revision in `tools/list`): a call fails as bad arguments until the caller reads
    /// the tool list again (in the engine: until the model changes the call).
    SchemaDrift,
    /// A 200 that says more may be available and states no terminal state; complete in truth.
    /// With `cursor`, it also gives a `next_cursor` (following it returns the same).
    Ambiguous {
        cursor: bool,
    },
    /// The body reaches the tool client cut in half: parsing it fails.
    TruncatedJson,
    /// The body reaches the tool client wrapped in a Markdown code fence: parsing it fails.
    CodeFencedJson,
    /// The provider's answer breaks after its first `after_events` server-sent events (the
    /// provider only). A stall is a slow answer, not a failure; the others fail the attempt
    /// after its input was read (a transient failure).
    Stream {
        after_events: u32,
        how: StreamBreak,
    },
    /// A result that arrives whole and says it succeeded, with a plausible wrong value (the
    /// first value in it changed). No failure to its client; the task's goal is not reached on it.
    WrongContent,
    /// A result that arrives whole and succeeded, `kb` KiB long: a strategy's `max_result_kb`
    /// may cut it. No failure.
    LargeResponse {
        kb: u32,
    },
    /// A result that succeeded and carries `text`, an instruction to call tool `tool` (prompt
    /// injection through a tool result). No failure.
    InjectedInstruction {
        text: String,
        tool: String,
    },
}

/// The status a model call whose stream broke is recorded with, in `run` and over the wire:
/// the answer came from upstream bad.
pub const BROKEN_STREAM_STATUS: u16 = 502;

/// How a provider's event stream breaks (the book: faults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamBreak {
    /// The connection is dropped: the stream ends without its last events.
    Cut,
    /// An event whose data is not JSON is sent, then the rest of the stream.
    Malformed,
    /// Nothing is sent for `ms` (virtual ms), then the rest of the stream.
    Stall { ms: u64 },
    /// The provider's own error event (Anthropic's `overloaded_error`), and the stream ends.
    Error,
}

impl StreamBreak {
    pub fn name(self) -> &'static str {
        match self {
            StreamBreak::Cut => "stream_cut",
            StreamBreak::Malformed => "stream_malformed",
            StreamBreak::Stall { .. } => "stream_stall",
            StreamBreak::Error => "stream_error",
        }
    }
}

/// Names of the faults that are not an HTTP status (`fault = "…"` in a scenario).
pub const NON_HTTP_FAULTS: [&str; 13] = [
    "timeout",
    "reset",
    "stream_dropped",
    "session_expired",
    "schema_drift",
    "ambiguous",
    "truncated_json",
    "code_fenced_json",
    "wrong_content",
    "stream_cut",
    "stream_malformed",
    "stream_stall",
    "stream_error",
];

impl Fault {
    pub fn http(status: u16) -> Fault {
        Fault::Http { status, retry_after_ms: None, param: None, message: None }
    }

    pub fn class(&self) -> ErrorClass {
        match self {
            Fault::Http { status, .. } => http_class(*status).unwrap_or(ErrorClass::Terminal),
            Fault::Timeout { .. }
            | Fault::Reset
            | Fault::StreamDropped
            | Fault::SessionExpired
            | Fault::TruncatedJson
            | Fault::CodeFencedJson
            | Fault::Stream { .. } => ErrorClass::Transient,
            Fault::SchemaDrift => ErrorClass::BadArgs,
            Fault::Ambiguous { .. } => ErrorClass::Partial,
            // Never a failure; callers that see a success ask `taints` first (a tainted result
            // sticks to nothing, unlike a partial one).
            Fault::WrongContent | Fault::LargeResponse { .. } | Fault::InjectedInstruction { .. } => {
                ErrorClass::Partial
            }
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            Fault::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The wait the fault announces itself (`retry_after_s` on an HTTP fault).
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            Fault::Http { retry_after_ms, .. } => *retry_after_ms,
            _ => None,
        }
    }

    /// Whether the call succeeds with a result that is not what it should be (wrong, large or
    /// carrying an instruction): the client sees a success, the engine and the mocks serve the
    /// changed result ([`crate::taint`]).
    pub fn taints(&self) -> bool {
        matches!(self, Fault::WrongContent | Fault::LargeResponse { .. } | Fault::InjectedInstruction { .. })
    }

    /// Whether the tool's body reaches the client damaged (it fails to parse it).
    pub fn damages_body(&self) -> bool {
        matches!(self, Fault::TruncatedJson | Fault::CodeFencedJson)
    }

    /// A short label for reports: `http 503`, `timeout 30000ms`, `ambiguous`, …
    pub fn label(&self) -> String {
        match self {
            Fault::Http { status, .. } => format!("http {status}"),
            Fault::Timeout { after_ms } => format!("timeout {after_ms}ms"),
            Fault::Reset => "reset".into(),
            Fault::SessionExpired => "session_expired".into(),
            Fault::StreamDropped => "stream_dropped".into(),
            Fault::SchemaDrift => "schema_drift".into(),
            Fault::Ambiguous { cursor: false } => "ambiguous".into(),
            Fault::Ambiguous { cursor: true } => "ambiguous with a cursor".into(),
            Fault::TruncatedJson => "truncated_json".into(),
            Fault::CodeFencedJson => "code_fenced_json".into(),
            Fault::Stream { after_events, how: StreamBreak::Stall { ms } } => {
                format!("stream_stall {ms}ms after {after_events} events")
            }
            Fault::Stream { after_events, how } => format!("{} after {after_events} events", how.name()),
            Fault::WrongContent => "wrong_content".into(),
            Fault::LargeResponse { kb } => format!("large_response {kb} KiB"),
            Fault::InjectedInstruction { tool, .. } => format!("injected_instruction to call {tool}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_the_seeds_sets() {
        for s in [408, 409, 500, 502, 503, 504, 529] {
            assert_eq!(http_class(s), Some(ErrorClass::Transient));
        }
        assert_eq!(http_class(429), Some(ErrorClass::RateLimited));
        for s in [400, 422] {
            assert_eq!(http_class(s), Some(ErrorClass::BadArgs));
        }
        for s in [401, 402, 403, 404, 413] {
            assert_eq!(http_class(s), Some(ErrorClass::Terminal));
        }
        assert_eq!(http_class(200), None);
        assert!(HTTP_STATUSES.iter().all(|&s| http_class(s).is_some()));
        let retryable: Vec<u16> = HTTP_STATUSES.into_iter().filter(|&s| Fault::http(s).class().retryable()).collect();
        assert_eq!(retryable, [408, 409, 429, 500, 502, 503, 504, 529], "the seeds' retryable set");
    }

    #[test]
    fn only_truncated_and_fenced_bodies_are_damaged() {
        for f in [Fault::TruncatedJson, Fault::CodeFencedJson] {
            assert!(f.damages_body(), "{f:?}");
        }
        for f in [
            Fault::http(503),
            Fault::Timeout { after_ms: 1 },
            Fault::Reset,
            Fault::SessionExpired,
            Fault::Ambiguous { cursor: true },
        ] {
            assert!(!f.damages_body(), "{f:?}");
        }
    }

    #[test]
    fn class_names_round_trip() {
        for c in ErrorClass::ALL {
            assert_eq!(ErrorClass::parse(c.name()), Some(c));
        }
        assert!(!ErrorClass::Partial.is_failure());
        assert!(ErrorClass::BadArgs.is_failure() && !ErrorClass::BadArgs.retryable());
        assert_eq!(
            Fault::SchemaDrift.class(),
            ErrorClass::BadArgs,
            "drift is fixed by reading the list, not by waiting"
        );
    }
}
