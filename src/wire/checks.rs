//! The checklist `exec` holds a user's agent to, and what the mocks found against it.

/// One check of the list, in the order the reports show them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Check {
    RoundTrip,
    NoBlindRetry,
    IsError,
    JsonEnvelope,
    NoRawText,
    Terminates,
    ExitStatus,
    StaysLocal,
}

impl Check {
    pub const ALL: [Check; 8] = [
        Check::RoundTrip,
        Check::NoBlindRetry,
        Check::IsError,
        Check::JsonEnvelope,
        Check::NoRawText,
        Check::Terminates,
        Check::ExitStatus,
        Check::StaysLocal,
    ];

    /// The check as the reports name it (a contract: CI tools key test cases on it).
    pub fn title(self) -> &'static str {
        match self {
            Check::RoundTrip => "1. the conversation makes the round trip through every provider format the agent used",
            Check::NoBlindRetry => "2. retryable=false never retried without the model",
            Check::IsError => "3. is_error on every failed Anthropic result",
            Check::JsonEnvelope => {
                "4. every OpenAI tool message parses as JSON (when the agent claims a JSON envelope)"
            }
            Check::NoRawText => "5. no raw exception text reaches the model",
            Check::Terminates => "6. the agent terminates with an answer rather than gives up, loops or stops midway",
            Check::ExitStatus => "7. the agent exits with status 0",
            Check::StaysLocal => "8. every request goes to the mocks (none to another host)",
        }
    }
}

/// What the mocks saw: against a check, or a note that fails nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub check: Option<Check>,
    pub detail: String,
}
