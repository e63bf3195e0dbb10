//! What an import could not read, checked the same way for every format and every path (whole
//! file, streamed, ZIP): the reader's own gaps, a tool call without a name, or model text that
//! shows tool actions none of which became a call (in a source whose calls could be text). Such a source is refused — or, with
//! `--lenient`, imported with each gap listed in its trace header.

use std::path::Path;

use crate::error::Error;
use crate::trace::{Trace, TraceEvent};

/// Texts that mean the model acted although no call was read: a fenced shell action.
const ACTION_MARKS: [&str; 3] = ["```bash", "```sh\n", "```mswea_bash_command"];

/// Sources whose tool calls are structure alone and which are known by their own structure:
/// a fenced shell block in their model's text is text (a command shown to the user, a
/// compaction summary quoting one), never an action misread, so it is no gap.
const STRUCTURED: [&str; 8] = ["claude-code", "codex", "agents-sdk", "otel", "inspect", "tau2", "openhands", "mcp"];

/// The gaps of one trace, its reader's own first.
fn gaps_of(t: &Trace) -> Vec<String> {
    let mut gaps = t.header.gaps.clone();
    let (mut model_calls, mut calls, mut marked) = (0u32, 0usize, false);
    let mut in_call = 0;
    for e in &t.events {
        match e {
            TraceEvent::ModelCall { text, .. } => {
                model_calls += 1;
                in_call = 0;
                marked |= text.as_deref().is_some_and(|t| ACTION_MARKS.iter().any(|m| t.contains(m)));
            }
            TraceEvent::ToolCall { name, .. } => {
                calls += 1;
                in_call += 1;
                if name.trim().is_empty() {
                    gaps.push(format!("model call {model_calls}: tool call {in_call} has no name"));
                }
            }
            _ => {}
        }
    }
    if calls == 0 && marked && !STRUCTURED.contains(&t.header.source_format.as_str()) {
        gaps.push(
            "the model's text shows tool actions (a fenced shell block) but no tool call was read: \
             the file is likely another format (mini-swe-agent, SWE-agent: pass --format)"
                .to_owned(),
        );
    }
    gaps
}

/// `trace` with its gaps recorded in its header, or its gaps as an error when not `lenient`.
pub fn checked(mut trace: Trace, path: &Path, lenient: bool) -> Result<Trace, Error> {
    let gaps = gaps_of(&trace);
    if !gaps.is_empty() && !lenient {
        return Err(Error::Invalid {
            file: path.display().to_string(),
            line: None,
            field: format!("conversation {}", trace.header.id),
            expected: format!(
                "a source read whole, but: {} (pass --lenient to import it with these gaps listed)",
                gaps.join("; ")
            ),
        });
    }
    trace.header.gaps = gaps;
    Ok(trace)
}
