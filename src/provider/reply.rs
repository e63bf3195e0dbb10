//! What a mock answers over HTTP, apart from the server that sends it: a status, headers, a
//! body (JSON, server-sent events, raw bytes, or sent in steps with pauses), an optional delay,
//! or a dropped connection.

use std::time::Duration;

use serde_json::Value;

/// One step of a body sent in steps.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Send these bytes on.
    Pass(Vec<u8>),
    /// Send nothing for this long.
    Stall(Duration),
    /// Drop the connection: the client's read fails.
    Cut,
    /// End the body here.
    End,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    Bytes {
        bytes: Vec<u8>,
        content_type: &'static str,
    },
    /// The connection is dropped after the status line: the client sees a reset.
    Reset,
    /// The body starts (these bytes are sent), then the connection is dropped: a stream cut
    /// part-way.
    Cut {
        bytes: Vec<u8>,
        content_type: &'static str,
    },
    /// The body sent in steps: bytes, pauses, a dropped connection.
    Steps {
        steps: Vec<Step>,
        content_type: &'static str,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Body,
    /// Real time to wait before answering (a slow tool).
    pub delay: Option<Duration>,
}

impl Reply {
    pub fn raw(status: u16, bytes: Vec<u8>, content_type: &'static str) -> Reply {
        Reply { status, headers: Vec::new(), body: Body::Bytes { bytes, content_type }, delay: None }
    }

    pub fn json(status: u16, v: &Value) -> Reply {
        Reply::raw(status, v.to_string().into_bytes(), "application/json")
    }

    pub fn text(status: u16, s: impl Into<String>) -> Reply {
        Reply::raw(status, s.into().into_bytes(), "text/plain; charset=utf-8")
    }

    pub fn sse(events: String) -> Reply {
        Reply::raw(200, events.into_bytes(), "text/event-stream")
    }

    pub fn reset() -> Reply {
        Reply { status: 200, headers: Vec::new(), body: Body::Reset, delay: None }
    }

    /// A server-sent event stream that opens (a comment line is sent) and is dropped before
    /// any event.
    pub fn sse_cut() -> Reply {
        let bytes = b": tracefault: the stream is dropped before the answer\n\n".to_vec();
        Reply {
            status: 200,
            headers: Vec::new(),
            body: Body::Cut { bytes, content_type: "text/event-stream" },
            delay: None,
        }
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        self.headers.push((name, value.into()));
        self
    }

    /// `retry-after` (whole seconds, rounded up) and `retry-after-ms` for a real wait.
    pub fn retry_after(self, real_ms: u64) -> Reply {
        self.header("retry-after", real_ms.div_ceil(1000).to_string()).header("retry-after-ms", real_ms.to_string())
    }

    pub fn delayed(mut self, d: Duration) -> Reply {
        self.delay = Some(d);
        self
    }

    /// The body as text (for tests and logs); empty for a reset.
    pub fn body_text(&self) -> String {
        match &self.body {
            Body::Bytes { bytes, .. } => String::from_utf8_lossy(bytes).into_owned(),
            Body::Reset => String::new(),
            Body::Cut { bytes, .. } => String::from_utf8_lossy(bytes).into_owned(),
            Body::Steps { steps, .. } => steps
                .iter()
                .filter_map(|s| match s {
                    Step::Pass(b) => Some(String::from_utf8_lossy(b).into_owned()),
                    _ => None,
                })
                .collect(),
        }
    }
}
