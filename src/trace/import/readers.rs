//! The readers of sources recognised by their own fields — agent tools' session logs, trace
//! exports and eval results, as opposed to provider request and response bodies. Each says
//! whether a parsed file is its format (and if not, the first thing that did not fit), and
//! reads it into conversations.

use serde_json::Value;

use super::conversation::Conversation;
use super::{
    ImportError, SourceFormat, agents_sdk, claude_code, codex, inspect_ai, mini_swe_agent, openhands, swe_agent, tau2,
};

/// One source format read from its own fields.
pub struct Reader {
    pub format: SourceFormat,
    /// `Ok` when the parsed file is this format's normal file; else the first thing that did
    /// not fit, by JSON pointer.
    pub fits: fn(&Value) -> Result<(), ImportError>,
    /// Its conversations, ids made from the given stem.
    pub read: fn(&Value, &str) -> Result<Vec<Conversation>, ImportError>,
}

/// Tried in this order by `--format auto`, before the provider formats (whose files are
/// plainer: a session log can hold a `messages` list too).
pub const READERS: &[Reader] = &[
    Reader { format: SourceFormat::Codex, fits: codex::fits, read: codex::conversations },
    Reader { format: SourceFormat::ClaudeCode, fits: claude_code::fits, read: claude_code::conversations },
    Reader { format: SourceFormat::AgentsSdk, fits: agents_sdk::fits, read: agents_sdk::conversations },
    Reader { format: SourceFormat::Inspect, fits: inspect_ai::fits, read: inspect_ai::conversations },
    Reader { format: SourceFormat::Tau2, fits: tau2::fits, read: tau2::conversations },
    Reader { format: SourceFormat::SweAgent, fits: swe_agent::fits, read: swe_agent::conversations },
    Reader { format: SourceFormat::MiniSweAgent, fits: mini_swe_agent::fits, read: mini_swe_agent::conversations },
    Reader { format: SourceFormat::OpenHands, fits: openhands::fits, read: openhands::conversations },
];

/// The reader of `format`, when it is one of these.
pub fn reader(format: SourceFormat) -> Option<&'static Reader> {
    READERS.iter().find(|r| r.format == format)
}

/// The first reader whose format `v` is.
pub fn detect(v: &Value) -> Option<&'static Reader> {
    READERS.iter().find(|r| (r.fits)(v).is_ok())
}
