//! What a wire run's trace keeps of the traffic: every event, but of a tool call's arguments,
//! a result's text and an MCP message at most [`MAX_ITEM_BYTES`] each and [`MAX_RUN_BYTES`] in
//! all per run (per agent). Past either, the rest is cut and the cut is marked where it
//! happened, so a run's memory stays bounded whatever the bodies and a reader of the trace sees
//! what was left out.

use serde_json::{Value, json};

use crate::trace::{Args, TraceEvent};

/// The most of one argument list, result or MCP message a trace keeps.
pub const MAX_ITEM_BYTES: usize = 64 << 10;

/// The most of all arguments, results and MCP messages one run's trace keeps.
pub const MAX_RUN_BYTES: usize = 8 << 20;

/// The size a JSON value takes written out.
pub fn size_of(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// The bytes kept so far in one run.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    kept: usize,
}

impl Recorded {
    /// How much of `len` bytes may be kept now (all, part, or none), counted as kept.
    fn allow(&mut self, len: usize) -> usize {
        let room = MAX_RUN_BYTES.saturating_sub(self.kept).min(MAX_ITEM_BYTES);
        let n = len.min(room);
        self.kept += n;
        n
    }

    /// The event as the trace keeps it: arguments and result texts within the caps.
    pub fn keep(&mut self, mut ev: TraceEvent) -> TraceEvent {
        match &mut ev {
            TraceEvent::ToolCall { args, .. } => {
                let len = args.as_json().len();
                let n = self.allow(len);
                if n < len {
                    *args = Args::new(&cut_value(len, n));
                }
            }
            TraceEvent::ToolResult { content, .. } => {
                let n = self.allow(content.len());
                if n < content.len() {
                    *content = cut_text(content, n);
                }
            }
            _ => {}
        }
        ev
    }

    /// An MCP message as the trace and the MCP log keep it.
    pub fn keep_message(&mut self, message: Value) -> Value {
        let len = size_of(&message);
        let n = self.allow(len);
        if n == len {
            return message;
        }
        // The envelope stays (method, id, error code); the payload is marked as cut.
        let mut kept = serde_json::Map::new();
        for k in ["jsonrpc", "id", "method", "http_status"] {
            if let Some(v) = message.get(k) {
                kept.insert(k.to_owned(), v.clone());
            }
        }
        kept.insert("tracefault_cut".into(), json!({"bytes": len, "note": note(len)}));
        Value::Object(kept)
    }
}

fn note(len: usize) -> String {
    format!(
        "{len} bytes, past what a trace keeps ({} KiB an item, {} MiB a run): cut by tracefault",
        MAX_ITEM_BYTES >> 10,
        MAX_RUN_BYTES >> 20
    )
}

/// Arguments past the caps: their size, the note, and the part that was kept, as text.
fn cut_value(len: usize, keep: usize) -> Value {
    json!({"tracefault_cut": {"bytes": len, "note": note(len), "kept": keep}})
}

/// A result's text past the caps: its first `keep` bytes (on a character boundary) and the mark.
fn cut_text(text: &str, keep: usize) -> String {
    let mut end = keep.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[tracefault: {}]", &text[..end], note(text.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(content: String) -> TraceEvent {
        TraceEvent::ToolResult {
            call_id: "c".into(),
            ok: true,
            status: None,
            content,
            error_class: None,
            latency_ms: None,
            attempts: None,
            evidence: None,
            cancelled: false,
            attempt_ms: Vec::new(),
        }
    }

    fn content(ev: &TraceEvent) -> &str {
        match ev {
            TraceEvent::ToolResult { content, .. } => content,
            _ => panic!("a result"),
        }
    }

    #[test]
    fn items_and_runs_are_capped_and_the_cut_is_marked() {
        let mut r = Recorded::default();
        let small = r.keep(result("ok".into()));
        assert_eq!(content(&small), "ok");
        let big = r.keep(result("é".repeat(MAX_ITEM_BYTES)));
        assert!(content(&big).len() < MAX_ITEM_BYTES + 200 && content(&big).contains("cut by tracefault"));
        // The run's budget: after it is spent, nothing of a result is kept but the mark.
        for _ in 0..(MAX_RUN_BYTES / MAX_ITEM_BYTES) {
            r.keep(result("x".repeat(MAX_ITEM_BYTES)));
        }
        let late = r.keep(result("y".repeat(100)));
        assert!(content(&late).starts_with("\n[tracefault: 100 bytes"), "{}", content(&late));
        let call = r.keep(TraceEvent::ToolCall {
            turn: 1,
            call_id: "c".into(),
            name: "t".into(),
            args: Args::new(&json!({"q": "z".repeat(10)})),
        });
        let TraceEvent::ToolCall { args, .. } = call else { panic!() };
        assert_eq!(args.value()["tracefault_cut"]["bytes"], 18);
        let m = r.keep_message(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"a": 1}}));
        assert_eq!((m["id"].clone(), m["method"].clone()), (json!(3), json!("tools/call")));
        assert!(m.get("params").is_none() && m["tracefault_cut"]["bytes"].as_u64().is_some());
    }
}
