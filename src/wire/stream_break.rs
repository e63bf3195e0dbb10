//! A provider's server-sent event stream broken as a `stream_*` fault says, on its way to the
//! agent: the mock's own answers and, in live mode, the real provider's. The stream is read as
//! it passes, in whatever chunks it comes; an event ends at a blank line.

use std::time::Duration;

use crate::fault::StreamBreak;
pub use crate::provider::reply::Step;

/// The fault's progress through the stream.
#[derive(Debug)]
enum State {
    /// Counting events until the fault's.
    Before,
    /// The fault's event has passed: the fault fires when more of the stream comes.
    Armed,
    /// Holding the event to send malformed until it ends.
    Holding(Vec<u8>),
    /// The fault fired; the rest passes.
    After,
    /// The stream ended here.
    Over,
}

/// The most of an event held to be sent malformed: a longer one is cut there.
const MAX_HELD: usize = 1 << 20;

/// One stream on its way, broken after its first `after_events` events.
#[derive(Debug)]
pub struct Breaking {
    after_events: u32,
    how: StreamBreak,
    /// The provider's own error event, sent by [`StreamBreak::Error`].
    error_event: String,
    /// The real time a [`StreamBreak::Stall`] lasts.
    stall: Duration,
    events: u32,
    /// The next byte starts a line.
    line_start: bool,
    /// The last byte was a carriage return (a line feed after it ends no further line).
    after_cr: bool,
    /// The event being read has a line that is no comment.
    content: bool,
    state: State,
}

impl Breaking {
    pub fn new(after_events: u32, how: StreamBreak, error_event: String, stall: Duration) -> Breaking {
        Breaking {
            after_events,
            how,
            error_event,
            stall,
            events: 0,
            line_start: true,
            after_cr: false,
            content: false,
            state: State::Before,
        }
    }

    /// Whether the fault fired: the stream went on past its event.
    pub fn fired(&self) -> bool {
        matches!(self.state, State::After | State::Over)
    }

    /// Whether the stream ended here (the caller stops reading it).
    pub fn over(&self) -> bool {
        matches!(self.state, State::Over)
    }

    /// The steps that pass `chunk` on.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Step>) {
        if matches!(self.state, State::Before) && self.events >= self.after_events {
            self.state = State::Armed;
        }
        let mut from = 0;
        for (i, &b) in chunk.iter().enumerate() {
            // (The line feed of the CRLF that ended the fault's event is still that event's.)
            if matches!(self.state, State::Armed) && !(b == b'\n' && self.after_cr) {
                // More of the stream follows the fault's event: the fault fires here.
                pass(out, &chunk[from..i]);
                from = i;
                self.fire(out);
            }
            if matches!(self.state, State::After | State::Over) {
                break;
            }
            if !self.ends_event(b) {
                continue;
            }
            match &mut self.state {
                State::Before => {
                    self.events += 1;
                    if self.events >= self.after_events {
                        pass(out, &chunk[from..=i]);
                        from = i + 1;
                        self.state = State::Armed;
                    }
                }
                State::Holding(held) => {
                    held.extend_from_slice(&chunk[from..=i]);
                    from = i + 1;
                    let event = std::mem::take(held);
                    pass(out, &malformed(&event));
                    self.state = State::After;
                }
                State::Armed | State::After | State::Over => {}
            }
        }
        let rest = &chunk[from..];
        match &mut self.state {
            State::Holding(held) => {
                held.extend_from_slice(rest);
                if held.len() > MAX_HELD {
                    let event = std::mem::take(held);
                    pass(out, &malformed(&event));
                    self.state = State::After;
                }
            }
            State::Over => {}
            State::Before | State::Armed | State::After => pass(out, rest),
        }
    }

    /// The steps that end the stream when the provider ended it: an event still held is sent
    /// as it came. A fault whose event was the stream's last did not fire.
    pub fn finish(&mut self, out: &mut Vec<Step>) {
        if let State::Holding(held) = &mut self.state {
            let held = std::mem::take(held);
            pass(out, &held);
            self.state = State::Before;
        }
    }

    /// Whether byte `b` ends an event: a blank line after a line that is no comment. Lines end
    /// at CRLF, LF or CR (the SSE rule).
    fn ends_event(&mut self, b: u8) -> bool {
        let after_cr = std::mem::replace(&mut self.after_cr, b == b'\r');
        match b {
            b'\n' if after_cr => false,
            b'\r' | b'\n' => {
                let blank = std::mem::replace(&mut self.line_start, true);
                blank && std::mem::take(&mut self.content)
            }
            _ => {
                self.content |= self.line_start && b != b':';
                self.line_start = false;
                false
            }
        }
    }

    fn fire(&mut self, out: &mut Vec<Step>) {
        self.state = match self.how {
            StreamBreak::Cut => {
                out.push(Step::Cut);
                State::Over
            }
            StreamBreak::Error => {
                pass(out, self.error_event.as_bytes());
                out.push(Step::End);
                State::Over
            }
            StreamBreak::Stall { .. } => {
                out.push(Step::Stall(self.stall));
                State::After
            }
            StreamBreak::Malformed => State::Holding(Vec::new()),
        };
    }
}

fn pass(out: &mut Vec<Step>, bytes: &[u8]) {
    if !bytes.is_empty() {
        out.push(Step::Pass(bytes.to_vec()));
    }
}

/// An event whose data is cut in half: its lines up to the first `data:` kept, the data's
/// JSON cut, the event's end kept (it still parses as an event, not as JSON).
fn malformed(event: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(event);
    let mut out = String::with_capacity(text.len());
    let mut cut = false;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\r', '\n']);
        match body.strip_prefix("data:") {
            Some(data) if !cut => {
                cut = true;
                let data = data.trim_start();
                let mut half = (data.len() / 2).max(1).min(data.len());
                while !data.is_char_boundary(half) {
                    half -= 1;
                }
                out.push_str("data: ");
                out.push_str(&data[..half]);
                out.push('\n');
            }
            Some(_) => {}
            None => out.push_str(line),
        }
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str = "event: a\ndata: {\"n\":1}\n\nevent: b\ndata: {\"n\":2}\n\ndata: {\"n\":3}\n\n";

    /// The stream fed in chunks of `size` bytes, then finished.
    fn run(b: &mut Breaking, size: usize) -> Vec<Step> {
        let mut out = Vec::new();
        for chunk in STREAM.as_bytes().chunks(size) {
            if b.over() {
                break;
            }
            b.feed(chunk, &mut out);
        }
        b.finish(&mut out);
        out
    }

    /// What reached the agent, and the first step that was no bytes.
    fn sent(steps: &[Step]) -> (String, Option<Step>) {
        let mut text = String::new();
        let mut other = None;
        for s in steps {
            match s {
                Step::Pass(b) => text.push_str(std::str::from_utf8(b).unwrap()),
                s => {
                    other.get_or_insert_with(|| s.clone());
                }
            }
        }
        (text, other)
    }

    fn breaking(after: u32, how: StreamBreak) -> Breaking {
        Breaking::new(after, how, "event: error\ndata: {}\n\n".into(), Duration::from_millis(5))
    }

    #[test]
    fn a_cut_sends_the_first_events_whole_in_any_chunks() {
        for size in [1, 2, 7, 100] {
            let mut b = breaking(2, StreamBreak::Cut);
            let steps = run(&mut b, size);
            assert_eq!(
                sent(&steps),
                ("event: a\ndata: {\"n\":1}\n\nevent: b\ndata: {\"n\":2}\n\n".into(), Some(Step::Cut))
            );
            assert!(b.fired() && b.over(), "size {size}");
        }
        // After 0 events: nothing is sent.
        assert_eq!(sent(&run(&mut breaking(0, StreamBreak::Cut), 3)), (String::new(), Some(Step::Cut)));
    }

    #[test]
    fn an_error_event_ends_the_stream_and_a_stall_lets_the_rest_pass() {
        let (text, step) = sent(&run(&mut breaking(1, StreamBreak::Error), 4));
        assert_eq!(text, "event: a\ndata: {\"n\":1}\n\nevent: error\ndata: {}\n\n");
        assert_eq!(step, Some(Step::End));
        let steps = run(&mut breaking(1, StreamBreak::Stall { ms: 9 }), 5);
        assert_eq!(sent(&steps), (STREAM.into(), Some(Step::Stall(Duration::from_millis(5)))));
        // The stall comes right after the first event.
        let at = steps.iter().position(|s| matches!(s, Step::Stall(_))).unwrap();
        assert_eq!(sent(&steps[..at]).0, "event: a\ndata: {\"n\":1}\n\n");
    }

    #[test]
    fn a_malformed_event_is_the_next_one_cut_and_the_rest_passes() {
        for size in [1, 3, 100] {
            let mut b = breaking(1, StreamBreak::Malformed);
            let (text, step) = sent(&run(&mut b, size));
            assert_eq!(text, "event: a\ndata: {\"n\":1}\n\nevent: b\ndata: {\"n\n\ndata: {\"n\":3}\n\n", "size {size}");
            assert_eq!(step, None);
            assert!(b.fired());
        }
    }

    #[test]
    fn a_stream_shorter_than_the_fault_passes_whole_and_the_fault_does_not_fire() {
        // A fault after the stream's last event does not fire either: nothing was to follow.
        for after in [3, 4] {
            for how in [StreamBreak::Cut, StreamBreak::Malformed, StreamBreak::Error, StreamBreak::Stall { ms: 1 }] {
                let mut b = breaking(after, how);
                assert_eq!(sent(&run(&mut b, 6)), (STREAM.into(), None), "{how:?}");
                assert!(!b.fired());
            }
        }
        // CR-only line ends end events too.
        let mut b = breaking(1, StreamBreak::Cut);
        let mut out = Vec::new();
        b.feed(b"data: 1\r\rdata: 2\r\r", &mut out);
        assert_eq!(sent(&out), ("data: 1\r\r".into(), Some(Step::Cut)));
        // CRLF line ends count the same; comments and extra blank lines are no events.
        let mut b = breaking(1, StreamBreak::Cut);
        let mut out = Vec::new();
        b.feed(b"\n: keep-alive\n\ndata: 1\n\n\ndata: 2\n\n", &mut out);
        assert_eq!(sent(&out), ("\n: keep-alive\n\ndata: 1\n\n".into(), Some(Step::Cut)));
        let mut b = breaking(1, StreamBreak::Cut);
        let mut out = Vec::new();
        b.feed(b"data: 1\r\n\r\ndata: 2\r\n\r\n", &mut out);
        assert_eq!(sent(&out), ("data: 1\r\n\r\n".into(), Some(Step::Cut)));
    }
}
