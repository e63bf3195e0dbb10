//! The simulated model's reading of a rendered tool result: which error signal the bytes carry.
//! It sees only what a real model would see, so a flag the format dropped is not there.

use memchr::memmem::Finder;

/// How clearly a failed result says what happened, strongest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    /// The five fields (`code`, `retryable`, …).
    Envelope,
    /// A structural `is_error: true`.
    Flag,
    /// An `{"error": …}` object.
    Object,
    /// An `ERROR:` prefix.
    Prefix,
    /// A raw exception with a stack trace.
    Raw,
    /// A plain sentence with no marker.
    Unmarked,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Envelope => "envelope",
            Signal::Flag => "flag",
            Signal::Object => "object",
            Signal::Prefix => "prefix",
            Signal::Raw => "raw",
            Signal::Unmarked => "unmarked",
        }
    }
}

/// Precompiled substring searchers.
pub struct Reader {
    retryable: Finder<'static>,
    code: Finder<'static>,
    is_error: Finder<'static>,
    error_obj_escaped: Finder<'static>,
    error_obj: Finder<'static>,
    prefix: Finder<'static>,
    prefix_title: Finder<'static>,
    traceback: Finder<'static>,
    more: Finder<'static>,
    complete: Finder<'static>,
    complete_escaped: Finder<'static>,
}

impl Default for Reader {
    fn default() -> Self {
        Reader {
            retryable: Finder::new("retryable"),
            code: Finder::new("code"),
            is_error: Finder::new(r#""is_error":true"#),
            error_obj_escaped: Finder::new(r#"{\"error\":"#),
            error_obj: Finder::new(r#"{"error":"#),
            prefix: Finder::new(r#"":"ERROR:"#),
            prefix_title: Finder::new(r#"":"Error:"#),
            traceback: Finder::new("Traceback (most recent call last)"),
            more: Finder::new("may be available"),
            complete: Finder::new(r#""complete":true"#),
            complete_escaped: Finder::new(r#"\"complete\":true"#),
        }
    }
}

impl Reader {
    /// The error signal of a failed result.
    pub fn signal(&self, bytes: &str) -> Signal {
        let b = bytes.as_bytes();
        if self.retryable.find(b).is_some() && self.code.find(b).is_some() {
            Signal::Envelope
        } else if self.is_error.find(b).is_some() {
            Signal::Flag
        } else if self.error_obj_escaped.find(b).is_some() || self.error_obj.find(b).is_some() {
            Signal::Object
        } else if self.prefix.find(b).is_some() || self.prefix_title.find(b).is_some() {
            Signal::Prefix
        } else if self.traceback.find(b).is_some() {
            Signal::Raw
        } else {
            Signal::Unmarked
        }
    }

    /// Whether the result leaks a raw exception or stack trace to the model.
    pub fn has_stack_trace(&self, bytes: &str) -> bool {
        self.traceback.find(bytes.as_bytes()).is_some()
    }

    /// Whether the result says more may be available and states no terminal state: a result
    /// that says it is complete reads as complete, whatever its data mentions.
    pub fn says_more_available(&self, bytes: &str) -> bool {
        let b = bytes.as_bytes();
        self.more.find(b).is_some() && self.complete.find(b).is_none() && self.complete_escaped.find(b).is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::faults::Fault;
    use crate::envelope::render::{Body, Renderer};
    use crate::envelope::{Encoding, ErrorKind, Format, ToolError};

    #[test]
    fn reads_back_each_encoding() {
        let f = Fault::Http { status: 503, retry_after_ms: None, param: None, message: None };
        let err = ToolError {
            kind: ErrorKind::Fault(&f),
            class: f.class(),
            tool: "search",
            attempts: 1,
            retry_after_ms: None,
        };
        let reader = Reader::default();
        let mut r = Renderer::default();
        let expect = |format: Format, encoding: Encoding| match encoding {
            Encoding::Envelope => Signal::Envelope,
            Encoding::Flag if format.has_error_flag() => Signal::Flag,
            Encoding::Flag => Signal::Unmarked,
            Encoding::Object => Signal::Object,
            Encoding::Prefix => Signal::Prefix,
            Encoding::Raw => Signal::Raw,
        };
        for format in Format::ALL {
            for encoding in Encoding::ALL {
                let s = r.render(format, 1, "search", Body::Error { err, encoding });
                assert_eq!(reader.signal(s), expect(format, encoding), "{format:?} {encoding:?}: {s}");
                assert_eq!(reader.has_stack_trace(s), encoding == Encoding::Raw);
            }
        }
    }
}
