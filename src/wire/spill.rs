//! A long run's trace in flat memory: once a world holds twice [`KEEP_EVENTS`] events, the
//! oldest [`KEEP_EVENTS`] go to an unnamed temporary file in `$TMPDIR` (no path another process
//! could open; gone when the process ends), and come back once, in order, when the run is
//! scored.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};

use crate::trace::TraceEvent;

/// How many events a batch moves to disk, and at least how many stay in memory.
pub const KEEP_EVENTS: usize = 1 << 14;

/// The events moved out so far, one JSON line each.
pub struct Spill {
    file: BufWriter<File>,
    /// Events written whole (flushed); a batch whose write failed is not counted.
    events: usize,
}

impl Spill {
    pub fn new() -> std::io::Result<Spill> {
        Ok(Spill { file: BufWriter::with_capacity(1 << 16, tempfile::tempfile()?), events: 0 })
    }

    /// The events on disk.
    pub fn events(&self) -> usize {
        self.events
    }

    /// Writes `batch` after the events already out; counted only once all of it is flushed.
    pub fn write(&mut self, batch: &[TraceEvent]) -> std::io::Result<()> {
        for ev in batch {
            serde_json::to_writer(&mut self.file, ev)?;
            self.file.write_all(b"\n")?;
        }
        self.file.flush()?;
        self.events += batch.len();
        Ok(())
    }

    /// The events written whole, in the order they went out.
    pub fn read_back(self) -> std::io::Result<Vec<TraceEvent>> {
        let n = self.events;
        // What the buffer still holds belongs to a batch whose write failed, never counted:
        // dropped, not written again (it could fail again and take the counted events with it).
        let (mut file, _) = self.file.into_parts();
        file.seek(SeekFrom::Start(0))?;
        let mut out = Vec::with_capacity(n);
        for line in BufReader::new(file).lines().take(n) {
            out.push(serde_json::from_str(&line?)?);
        }
        if out.len() < n {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, format!("{} of {n} events", out.len())));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_back_as_they_went_out() {
        let ev = |i: u64| TraceEvent::ToolCall {
            turn: i as u32,
            call_id: format!("c{i}"),
            name: "search \"x\"\n".to_owned(),
            args: crate::exchange::Args::new(&serde_json::json!({ "q": i, "s": "é\u{2028}" })),
        };
        let mut s = Spill::new().unwrap();
        s.write(&[ev(1), ev(2)]).unwrap();
        s.write(&[ev(3)]).unwrap();
        assert_eq!(s.events(), 3);
        let back = s.read_back().unwrap();
        assert_eq!(back, [ev(1), ev(2), ev(3)]);
    }
}
