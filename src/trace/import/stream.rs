//! Reads a large file of wrapped conversations (a JSON array or JSONL of `{"traj": […]}` and the
//! like) one element at a time: a thread splits the file, every core parses elements, and the
//! traces are handed on in file order, so memory holds a few conversations however large the
//! file and the result is the same whatever the number of cores.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};

use serde_json::Value;

use super::conversation::Conversation;
use super::elements::{Element, Elements, Layout, SplitError};
use super::{Exchange, WRAPPER_KEYS, chain, json_message, provider_conversations};
use super::{ImportError, ImportOptions, SourceFormat, conversation::to_trace, detect, openai_chat};
use crate::error::Error;
use crate::trace::Trace;

/// Formats whose files are one unit (a trace, a cassette, a span export), never streamed.
const WHOLE_FILE_FORMATS: [SourceFormat; 3] = [SourceFormat::Native, SourceFormat::Cassette, SourceFormat::Otel];

/// Batches the splitter may be ahead of the one being handed on, per core: bounds memory.
const AHEAD_PER_CORE: usize = 4;

/// One element's conversations as traces, and whether any of them holds an item.
type Converted = (Vec<Trace>, bool);

/// What every element is read with once the first has set the format.
struct Reading<'a> {
    format: SourceFormat,
    opts: &'a ImportOptions,
    path: &'a Path,
    stem: &'a str,
}

impl Reading<'_> {
    fn name(&self) -> String {
        self.path.display().to_string()
    }

    /// The traces of element `i`, which starts on `line` of the file.
    fn convert(&self, i: usize, line: usize, bytes: &[u8]) -> Result<Converted, Error> {
        if self.format == SourceFormat::OpenAiChat
            && let Some(items) = openai_chat::wrapped_items(bytes)
        {
            let exchange = Exchange { items, response: None, tools: Vec::new(), model: None };
            let convs = chain(vec![exchange], self.format, &self.id(i), self.format.provider());
            return Ok(self.converted(&convs));
        }
        let v: Value = serde_json::from_slice(bytes).map_err(|e| Error::Parse {
            file: format!("{}:{}", self.name(), line + e.line().saturating_sub(1)),
            message: format!("JSON: {} (column {})", json_message(&e), e.column()),
        })?;
        let list = wrapped_list(v).ok_or_else(|| Error::Invalid {
            file: self.name(),
            line: Some(line),
            field: format!("/{i}"),
            expected: "a wrapped conversation (`traj`, `conversation` or `trajectory`), like the first element".into(),
        })?;
        self.traces(i, &list)
    }

    /// The id of element `i`'s conversation.
    fn id(&self, i: usize) -> String {
        format!("{}#{i}", self.stem)
    }

    fn converted(&self, convs: &[Conversation]) -> Converted {
        let any_items = convs.iter().any(|c| !c.items.is_empty());
        (convs.iter().map(|c| to_trace(c, &self.opts.rules)).collect(), any_items)
    }

    fn traces(&self, i: usize, list: &Value) -> Result<Converted, Error> {
        let convs = provider_conversations(self.format, list, &self.id(i))
            .map_err(|e| ImportError::at(format!("/{i}{}", e.at), e.expected).into_error(self.path))?;
        Ok(self.converted(&convs))
    }

    fn split_error(&self, e: SplitError) -> Error {
        Error::Parse { file: format!("{}:{}", self.name(), e.line), message: format!("JSON: {}", e.message) }
    }
}

/// The message list of a wrapped conversation, taken out of it.
fn wrapped_list(mut v: Value) -> Option<Value> {
    let key = WRAPPER_KEYS.into_iter().find(|k| v.get(k).is_some())?;
    v.get_mut(key).map(Value::take)
}

/// Streams `path` if it is a file of wrapped conversations; `None` (having handed on nothing)
/// when it is not, for the whole-file reader.
pub(super) fn wrapped(
    path: &Path,
    opts: &ImportOptions,
    each: &mut dyn FnMut(Trace) -> Result<(), Error>,
) -> Result<Option<SourceFormat>, Error> {
    if opts.select.is_some()
        || WHOLE_FILE_FORMATS.contains(&opts.format)
        || path.extension().is_some_and(|e| e == "yaml" || e == "yml")
    {
        return Ok(None);
    }
    let open = || {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        if file.metadata().is_ok_and(|m| !m.is_file()) {
            return Ok(None); // folders get their error, devices their cap, on the whole-file path
        }
        Ok(Some(file))
    };
    let Some(mut file) = open()? else { return Ok(None) };
    let mut head = [0u8; 4096];
    let n = file.read(&mut head).map_err(|e| Error::io(path, e))?;
    let layout = match head[..n].iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => Layout::Array,
        Some(b'{') => Layout::Lines,
        _ => return Ok(None),
    };
    let Some(file) = open()? else { return Ok(None) };
    let cap = usize::try_from(crate::input::Input::Trace.cap_bytes()).unwrap_or(usize::MAX);
    let mut elements = Elements::new(file, layout, cap);
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("trace");

    // The first element decides: a wrapped conversation in a format it can detect, or the
    // whole-file reader's business.
    let first = match elements.next() {
        None | Some(Err(_)) => return Ok(None),
        Some(Ok(Element { bytes, .. })) => serde_json::from_slice(bytes).ok().and_then(wrapped_list),
    };
    let Some(first) = first else { return Ok(None) };
    let format = match opts.format {
        SourceFormat::Auto => match detect(&first) {
            Some(f) if !WHOLE_FILE_FORMATS.contains(&f) => f,
            _ => return Ok(None),
        },
        f => f,
    };
    let reading = Reading { format, opts, path, stem };

    // Conversations wait while every one so far is empty: a file where all are empty is read in
    // the wrong format and says so before anything is handed on; a lone JSONL object waits too,
    // and alone goes to the whole-file reader.
    let mut held: Vec<Trace> = Vec::new();
    let mut any_items = false;
    let mut hand_on = |i: usize, (traces, items): Converted| -> Result<(), Error> {
        any_items |= items;
        held.extend(traces);
        if any_items && (layout == Layout::Array || i > 0) {
            held.drain(..).try_for_each(&mut *each)?;
        }
        Ok(())
    };
    hand_on(0, reading.traces(0, &first)?)?;
    drop(first);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let count = 1 + if cores > 1 {
        in_parallel(elements, &reading, cores, &mut hand_on)?
    } else {
        in_turn(elements, &reading, &mut hand_on)?
    };
    if layout == Layout::Lines && count == 1 {
        return Ok(None);
    }
    if !any_items {
        return Err(Error::Invalid {
            file: reading.name(),
            line: None,
            field: "format".into(),
            expected: format!(
                "{} content: nothing in the file reads as a message, model call or tool result in that format (try --format auto)",
                format.name()
            ),
        });
    }
    Ok(Some(format))
}

/// Converts the elements after the first on this thread; returns how many there were.
fn in_turn(
    mut elements: Elements<File>,
    reading: &Reading,
    hand_on: &mut dyn FnMut(usize, Converted) -> Result<(), Error>,
) -> Result<usize, Error> {
    let mut count = 0;
    while let Some(element) = elements.next() {
        let e = element.map_err(|e| reading.split_error(e))?;
        hand_on(e.index, reading.convert(e.index, e.line, e.bytes)?)?;
        count += 1;
    }
    Ok(count)
}

/// Elements sent to a core together, up to this many bytes (or [`BATCH_ELEMENTS`]): one hand-off
/// per batch instead of per element keeps the threads from waking each other for every
/// conversation.
const BATCH_BYTES: usize = 128 << 10;
const BATCH_ELEMENTS: usize = 32;

/// Consecutive elements, copied out of the splitter's buffer into one allocation.
#[derive(Default)]
struct Batch {
    /// Index of the first element.
    first: usize,
    bytes: Vec<u8>,
    /// Each element's line and its end in `bytes`.
    ends: Vec<(usize, usize)>,
}

impl Batch {
    fn push(&mut self, e: &Element) {
        if self.ends.is_empty() {
            self.first = e.index;
        }
        self.bytes.extend_from_slice(e.bytes);
        self.ends.push((e.line, self.bytes.len()));
    }

    fn full(&self) -> bool {
        self.bytes.len() >= BATCH_BYTES || self.ends.len() >= BATCH_ELEMENTS
    }

    /// Converts the elements in order, stopping at the first that fails.
    fn convert(&self, reading: &Reading) -> Vec<Result<Converted, Error>> {
        let mut out = Vec::with_capacity(self.ends.len());
        let mut start = 0;
        for (k, &(line, end)) in self.ends.iter().enumerate() {
            let converted = reading.convert(self.first + k, line, &self.bytes[start..end]);
            let failed = converted.is_err();
            out.push(converted);
            if failed {
                break;
            }
            start = end;
        }
        out
    }
}

/// Converts the elements after the first on `cores` threads while another splits the file
/// into batches, handing each element on in file order; the first error in file order ends it,
/// as reading in turn would. Returns how many elements there were.
fn in_parallel(
    mut elements: Elements<File>,
    reading: &Reading,
    cores: usize,
    hand_on: &mut dyn FnMut(usize, Converted) -> Result<(), Error>,
) -> Result<usize, Error> {
    /// A batch's first index and its elements converted (or the splitter's error).
    type Done = (usize, Vec<Result<Converted, Error>>);
    std::thread::scope(|s| {
        let (work_tx, work_rx) = mpsc::channel::<Batch>();
        let work_rx = Arc::new(Mutex::new(work_rx));
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        // Tickets bound how far the splitter runs ahead of the batch being handed on.
        let ahead = AHEAD_PER_CORE * cores;
        let (ticket_tx, ticket_rx) = mpsc::sync_channel::<()>(ahead);
        (0..ahead).for_each(|_| ticket_tx.send(()).expect("room for every ticket"));

        let split_done = done_tx.clone();
        s.spawn(move || {
            let mut batch = Batch::default();
            let mut next = 1;
            loop {
                let element = elements.next();
                let last = !matches!(element, Some(Ok(_)));
                if let Some(Ok(e)) = &element {
                    batch.push(e);
                    next = e.index + 1;
                }
                if (last && !batch.ends.is_empty()) || batch.full() {
                    let ready = ticket_rx.recv().is_ok() && work_tx.send(std::mem::take(&mut batch)).is_ok();
                    if !ready {
                        return; // the reader stopped
                    }
                }
                match element {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        let _ = split_done.send((next, vec![Err(reading.split_error(e))]));
                        return;
                    }
                    None => return,
                }
            }
        });
        for _ in 0..cores {
            let (work_rx, done_tx) = (Arc::clone(&work_rx), done_tx.clone());
            s.spawn(move || {
                loop {
                    let job = work_rx.lock().map(|rx| rx.recv());
                    let Ok(Ok(batch)) = job else { return };
                    if done_tx.send((batch.first, batch.convert(reading))).is_err() {
                        return;
                    }
                }
            });
        }
        drop((done_tx, work_rx));

        let mut waiting: BTreeMap<usize, Vec<Result<Converted, Error>>> = BTreeMap::new();
        let mut next = 1;
        for (first, converted) in done_rx {
            waiting.insert(first, converted);
            while let Some(converted) = waiting.remove(&next) {
                for result in converted {
                    hand_on(next, result?)?;
                    next += 1;
                }
                let _ = ticket_tx.send(());
            }
        }
        Ok(next - 1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reading on several cores hands on the same traces, in the same order, and stops at the
    /// same first error as reading in turn.
    #[test]
    fn in_parallel_equals_in_turn() {
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus");
        let text = std::fs::read_to_string(corpus.join("tau-bench_gpt-4o-airline.json")).unwrap();
        let elements: Vec<Value> = serde_json::from_str(&text).unwrap();
        let mut lines: Vec<String> = elements.iter().cycle().take(300).map(Value::to_string).collect();
        let dir = tempfile::tempdir().unwrap();
        let opts = ImportOptions::default();
        let good = dir.path().join("good.jsonl");
        std::fs::write(&good, lines.join("\n")).unwrap();
        lines[150] = lines[150].replacen("\"role\":\"assistant\"", "\"role\":\"robot\"", 1);
        let cut = lines[170].len() - 2;
        lines[170].truncate(cut);
        let bad = dir.path().join("bad.jsonl");
        std::fs::write(&bad, lines.join("\n")).unwrap();
        for path in [&good, &bad] {
            let read = |cores: usize| {
                let reading = Reading { format: SourceFormat::OpenAiChat, opts: &opts, path, stem: "t" };
                let mut elements = Elements::new(File::open(path).unwrap(), Layout::Lines, 1 << 30);
                let _first = elements.next();
                let mut handed = Vec::new();
                let mut hand_on = |i: usize, (traces, _): Converted| {
                    handed.push((i, traces));
                    Ok(())
                };
                let result = match cores {
                    1 => in_turn(elements, &reading, &mut hand_on),
                    n => in_parallel(elements, &reading, n, &mut hand_on),
                };
                (result.map_err(|e| e.to_string()), handed)
            };
            let one = read(1);
            assert_eq!(one.1.len(), if path == &good { 299 } else { 149 });
            assert_eq!(read(2), one);
            assert_eq!(read(5), one);
        }
    }
}
