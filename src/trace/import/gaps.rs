//! What an import could not read, checked the same way for every format: a tool call without a
//! name, or a conversation whose text shows tool actions none of which became a call. Such a
//! source is refused — or, with `--lenient`, imported with each gap listed in its trace header.

use std::path::Path;

use super::conversation::{Conversation, Item};
use crate::error::Error;

/// Texts that mean a tool ran although no call was read: a fenced shell action, a return code.
const ACTION_MARKS: [&str; 3] = ["```bash", "<returncode>", "```sh\n"];

/// The gaps of one conversation, its reader's own first.
fn gaps_of(c: &Conversation) -> Vec<String> {
    let mut gaps = c.gaps.clone();
    let (mut turn, mut calls, mut marked) = (0u32, 0usize, false);
    for item in &c.items {
        match item {
            Item::Model { calls: cs, text, .. } => {
                turn += 1;
                calls += cs.len();
                for (k, call) in cs.iter().enumerate() {
                    if call.name.trim().is_empty() {
                        gaps.push(format!("model call {turn}: tool call {} has no name", k + 1));
                    }
                }
                marked |= text.as_deref().is_some_and(|t| ACTION_MARKS.iter().any(|m| t.contains(m)));
            }
            Item::User(t) => marked |= ACTION_MARKS.iter().any(|m| t.contains(m)),
            Item::Result { .. } | Item::Cancelled { .. } => {}
        }
    }
    if calls == 0 && marked {
        gaps.push(
            "the text shows tool actions (a fenced bash block or a <returncode>) but no tool call was read: \
             the file is likely another format (mini-swe-agent, SWE-agent: pass --format)"
                .to_owned(),
        );
    }
    gaps
}

/// The conversations with their gaps recorded, or the first conversation's gaps as an error
/// when not `lenient`.
pub fn checked(mut convs: Vec<Conversation>, path: &Path, lenient: bool) -> Result<Vec<Conversation>, Error> {
    for c in &mut convs {
        let gaps = gaps_of(c);
        if !gaps.is_empty() && !lenient {
            return Err(Error::Invalid {
                file: path.display().to_string(),
                line: None,
                field: format!("conversation {}", c.id),
                expected: format!(
                    "a source read whole, but: {} (pass --lenient to import it with these gaps listed)",
                    gaps.join("; ")
                ),
            });
        }
        c.gaps = gaps;
    }
    Ok(convs)
}
