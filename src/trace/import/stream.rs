//! Reads a large file of wrapped conversations (a JSON array or JSONL of `{"traj": […]}` and the
//! like) one element at a time: a thread splits the file, every core parses elements, and the
//! traces are handed on in file order, so memory holds a few conversations however large the
//! file and the result is the same whatever the number of cores.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};

use serde_json::Value;

use super::conversation::{Conversation, TraceBuilder};
use super::elements::{Element, Elements, Layout, SplitError};
use super::{ImportError, ImportOptions, SourceFormat, conversation::to_trace, detect, openai_chat};
use super::{WRAPPER_KEYS, json_message, provider_conversations};
use crate::error::Error;
use crate::provider::Format;
use crate::trace::{Header, Trace};

/// Formats whose files are one unit (a trace, a cassette, a span export), never streamed.
const WHOLE_FILE_FORMATS: [SourceFormat; 3] = [SourceFormat::Native, SourceFormat::Cassette, SourceFormat::Otel];

/// Batches the splitter may be ahead of the one being handed on, per core: bounds memory.
const AHEAD_PER_CORE: usize = 4;

/// Elements larger than this are not kept by the splitter: the core that converts one reads
/// it again from the file, so no conversation's bytes are held whole.
const KEEP_BYTES: usize = 4 << 20;

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

    /// The traces of element `i`, which starts on `line` of the file and opens `objects`
    /// JSON objects.
    fn convert(&self, i: usize, line: usize, bytes: &[u8], objects: usize) -> Result<Converted, Error> {
        if self.format == SourceFormat::Provider(Format::OpenAiChat)
            && let Some(trace) = openai_chat::wrapped_trace(bytes, objects)
        {
            return Ok(self.lone(i, trace));
        }
        let v = serde_json::from_slice(bytes).map_err(|e| self.json_error(line, &e))?;
        self.wrapped(i, line, v)
    }

    /// [`Reading::convert`] for an element the splitter did not keep, read again from the
    /// file at `far`: a typed reading never holds the element's bytes.
    fn convert_far(&self, i: usize, line: usize, far: Range<u64>, objects: usize) -> Result<Converted, Error> {
        let len = usize::try_from(far.end - far.start).unwrap_or(usize::MAX);
        if self.format == SourceFormat::Provider(Format::OpenAiChat)
            && let Some(trace) = openai_chat::wrapped_trace_from(self.read_at(&far)?, objects, len)
        {
            return Ok(self.lone(i, trace));
        }
        let v = serde_json::from_reader(self.read_at(&far)?).map_err(|e| self.json_error(line, &e))?;
        self.wrapped(i, line, v)
    }

    fn read_at(&self, far: &Range<u64>) -> Result<impl Read, Error> {
        read_at(self.path, far)
    }

    fn json_error(&self, line: usize, e: &serde_json::Error) -> Error {
        Error::Parse {
            file: format!("{}:{}", self.name(), line + e.line().saturating_sub(1)),
            message: format!("JSON: {} (column {})", json_message(e), e.column()),
        }
    }

    /// The traces of element `i` read as a `Value`.
    fn wrapped(&self, i: usize, line: usize, v: Value) -> Result<Converted, Error> {
        let list = wrapped_list(v).ok_or_else(|| Error::Invalid {
            file: self.name(),
            line: Some(line),
            field: format!("/{i}"),
            expected: "a wrapped conversation (`traj`, `conversation` or `trajectory`), like the first element".into(),
        })?;
        self.traces(i, &list)
    }

    /// The trace of element `i`, read as one exchange alone: what [`super::chain`] and
    /// [`to_trace`] make of it.
    fn lone(&self, i: usize, trace: TraceBuilder) -> Converted {
        let header = Header::new(self.id(i), self.format.name(), self.format.provider().map(str::to_owned), None);
        let any_items = !trace.is_empty();
        (vec![trace.finish(header, &self.opts.rules)], any_items)
    }

    /// The id of element `i`'s conversation: numbered from 1, as everywhere.
    fn id(&self, i: usize) -> String {
        format!("{}#{}", self.stem, i + 1)
    }

    fn converted(&self, convs: Vec<Conversation>) -> Converted {
        let any_items = convs.iter().any(|c| !c.items.is_empty());
        (convs.into_iter().map(|c| to_trace(c, &self.opts.rules)).collect(), any_items)
    }

    fn traces(&self, i: usize, list: &Value) -> Result<Converted, Error> {
        let convs = provider_conversations(self.format, list, &self.id(i))
            .map_err(|e| ImportError::at(format!("/{i}{}", e.at), e.expected).into_error(self.path))?;
        Ok(self.converted(convs))
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

/// The shape of a JSON value read from `reader`, as much as [`detect`] looks at: keys, and the
/// values of `type` keys; every other scalar is `null`, and a list keeps the first of each
/// shape of element (detection asks what the first is and whether any is of a kind), so a
/// conversation of any length has a shape of a few messages.
fn shape_of(reader: impl Read) -> Option<Value> {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    /// Reads a value's shape; `typed` for the value of a `type` key.
    #[derive(Clone, Copy)]
    struct Shape {
        typed: bool,
    }
    impl<'de> DeserializeSeed<'de> for Shape {
        type Value = Value;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Shape {
        type Value = Value;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_bool<E>(self, _: bool) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_str<E>(self, s: &str) -> Result<Value, E> {
            Ok(if self.typed && s.len() <= 64 { s.into() } else { Value::Null })
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let (mut out, mut seen) = (Vec::new(), std::collections::HashSet::new());
            while let Some(v) = seq.next_element_seed(Shape { typed: false })? {
                if seen.insert(v.to_string()) {
                    out.push(v);
                }
            }
            Ok(Value::Array(out))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut out = serde_json::Map::new();
            while let Some(k) = map.next_key::<String>()? {
                let v = map.next_value_seed(Shape { typed: k == "type" })?;
                out.insert(k, v);
            }
            Ok(Value::Object(out))
        }
    }
    let mut de = serde_json::Deserializer::from_reader(reader);
    let v = Shape { typed: false }.deserialize(&mut de).ok()?;
    de.end().ok().map(|()| v)
}

/// Streams `path` if it is a file of wrapped conversations; `None` (having handed on nothing)
/// when it is not, for the whole-file reader.
pub(super) fn wrapped(
    path: &Path,
    opts: &ImportOptions,
    each: &mut dyn FnMut(Trace) -> Result<(), Error>,
) -> Result<Option<SourceFormat>, Error> {
    wrapped_keeping(path, opts, KEEP_BYTES, each)
}

/// The bytes of `path` at `far`, read through a 64 KiB buffer.
fn read_at(path: &Path, far: &Range<u64>) -> Result<impl Read + use<>, Error> {
    let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
    file.seek(SeekFrom::Start(far.start)).map_err(|e| Error::io(path, e))?;
    Ok(BufReader::with_capacity(1 << 16, file.take(far.end - far.start)))
}

/// [`wrapped`], keeping elements of at most `keep` bytes in memory.
fn wrapped_keeping(
    path: &Path,
    opts: &ImportOptions,
    keep: usize,
    each: &mut dyn FnMut(Trace) -> Result<(), Error>,
) -> Result<Option<SourceFormat>, Error> {
    if opts.select.is_some()
        || WHOLE_FILE_FORMATS.contains(&opts.format)
        || super::readers::reader(opts.format).is_some()
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
    let mut elements = Elements::new(file, layout, cap).keep_at_most(keep);
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("trace");

    // The first element decides: a wrapped conversation in a format it can detect, or the
    // whole-file reader's business. One too large to keep is read for its shape alone.
    let (first, far) = match elements.next() {
        None | Some(Err(_)) => return Ok(None),
        Some(Ok(Element { bytes, far: None, .. })) => {
            let value: Option<Value> = serde_json::from_slice(bytes).ok();
            // A file that a reader of its own fields recognises (a SWE-agent `.traj` has a
            // `trajectory` too) is that reader's, read whole.
            if value
                .as_ref()
                .is_some_and(|v| super::container_inner(v).is_some() && super::readers::detect(v).is_some())
            {
                return Ok(None);
            }
            (value.and_then(wrapped_list), None)
        }
        Some(Ok(Element { far: Some(far), line, objects, .. })) => {
            let shape = read_at(path, &far).ok().and_then(shape_of);
            (shape.and_then(wrapped_list), Some((line, far, objects)))
        }
    };
    let Some(first) = first else { return Ok(None) };
    let format = match opts.format {
        SourceFormat::Auto => match detect(&first) {
            Some(f) if !WHOLE_FILE_FORMATS.contains(&f) && super::readers::reader(f).is_none() => f,
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
        for t in traces {
            held.push(super::gaps::checked(t, path, opts.lenient)?);
        }
        if any_items && (layout == Layout::Array || i > 0) {
            held.drain(..).try_for_each(&mut *each)?;
        }
        Ok(())
    };
    let converted = match far {
        None => reading.traces(0, &first)?,
        Some((line, far, objects)) => {
            drop(first);
            reading.convert_far(0, line, far, objects)?
        }
    };
    hand_on(0, converted)?;
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
        let converted = match e.far {
            None => reading.convert(e.index, e.line, e.bytes, e.objects)?,
            Some(far) => reading.convert_far(e.index, e.line, far, e.objects)?,
        };
        hand_on(e.index, converted)?;
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
    /// Each element's line and its end in `bytes`, or its place in the file when the splitter
    /// did not keep it.
    ends: Vec<(usize, usize, Option<Range<u64>>)>,
    /// Each element's count of JSON objects ([`Element::objects`]).
    objects: Vec<usize>,
}

impl Batch {
    fn push(&mut self, e: &Element) {
        if self.ends.is_empty() {
            self.first = e.index;
        }
        self.bytes.extend_from_slice(e.bytes);
        self.ends.push((e.line, self.bytes.len(), e.far.clone()));
        self.objects.push(e.objects);
    }

    /// Whether to send it: a far element goes at once (it is work enough alone).
    fn full(&self) -> bool {
        self.bytes.len() >= BATCH_BYTES
            || self.ends.len() >= BATCH_ELEMENTS
            || self.ends.last().is_some_and(|(_, _, far)| far.is_some())
    }

    /// Converts the elements in order, stopping at the first that fails.
    fn convert(&self, reading: &Reading) -> Vec<Result<Converted, Error>> {
        let mut out = Vec::with_capacity(self.ends.len());
        let mut start = 0;
        for (k, ((line, end, far), objects)) in self.ends.iter().zip(&self.objects).enumerate() {
            let (i, line, end) = (self.first + k, *line, *end);
            let converted = match far {
                None => reading.convert(i, line, &self.bytes[start..end], *objects),
                Some(far) => reading.convert_far(i, line, far.clone(), *objects),
            };
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
                let reading =
                    Reading { format: SourceFormat::Provider(Format::OpenAiChat), opts: &opts, path, stem: "t" };
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

    /// Detection from a value's shape decides as detection from the whole value, on every
    /// format of the corpus and on wrapped lists of each kind of message.
    #[test]
    fn shape_detects_as_the_value_does() {
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus");
        let mut values: Vec<Value> = Vec::new();
        for entry in std::fs::read_dir(&corpus).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            match path.extension().and_then(|e| e.to_str()) {
                Some("json") => values.push(serde_json::from_str(&text).unwrap()),
                Some("yaml") => values.push(serde_norway::from_str(&text).unwrap()),
                _ => {}
            }
        }
        let wrapped = [
            r#"[{"role": "user", "content": "a"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]}]"#,
            r#"[{"type": "message", "role": "user"}, {"type": "function_call", "name": "f"}]"#,
            r#"[{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [{"type": "function"}]}]"#,
            r#"{"contents": [{"role": "user", "parts": [{"text": "a"}]}]}"#,
            r#"{"messages": [{"role": "user", "content": "a"}], "max_tokens": 5}"#,
            r#"{"request": {"input": "a"}, "response": {"output": []}}"#,
        ];
        for w in wrapped {
            let inner: Value = serde_json::from_str(w).unwrap();
            values.push(inner.clone());
            values.push(serde_json::json!({ "traj": inner.clone() }));
            values.push(serde_json::json!([{ "conversation": inner }]));
        }
        for v in &values {
            let shape = shape_of(v.to_string().as_bytes()).unwrap();
            assert_eq!(detect(&shape), detect(v), "{}", shape);
        }
        let long: Vec<Value> = (0..1000)
            .map(|i| {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                serde_json::json!({"role": role, "content": format!("message {i}")})
            })
            .collect();
        let shape = shape_of(Value::from(long).to_string().as_bytes()).unwrap();
        assert_eq!(shape, serde_json::json!([{"role": null, "content": null}]));
        assert_eq!(shape_of(&b"{\"a\": 1} x"[..]), None, "trailing bytes are an error");
    }

    /// Elements read again from the file (every one, the first included, when nothing is
    /// kept) give the same traces and the same first error as elements kept in memory.
    #[test]
    fn far_elements_read_as_kept_ones() {
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus");
        let text = std::fs::read_to_string(corpus.join("tau-bench_gpt-4o-airline.json")).unwrap();
        let elements: Vec<Value> = serde_json::from_str(&text).unwrap();
        let mut lines: Vec<String> = elements.iter().take(40).map(Value::to_string).collect();
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.jsonl");
        std::fs::write(&good, lines.join("\n")).unwrap();
        let array = dir.path().join("array.json");
        std::fs::write(&array, format!("[\n{}\n]", lines.join(",\n"))).unwrap();
        lines[20] = lines[20].replacen("\"role\":\"assistant\"", "\"role\":\"robot\"", 1);
        let robot = dir.path().join("robot.jsonl");
        std::fs::write(&robot, lines.join("\n")).unwrap();
        let cut = lines[10].len() - 2;
        lines[10].truncate(cut);
        let cut = dir.path().join("cut.jsonl");
        std::fs::write(&cut, lines.join("\n")).unwrap();
        for (path, traces) in [(&good, 40), (&array, 40), (&robot, 20), (&cut, 10)] {
            for format in [
                SourceFormat::Auto,
                SourceFormat::Provider(Format::OpenAiChat),
                SourceFormat::Provider(Format::Anthropic),
            ] {
                let opts = ImportOptions { format, ..ImportOptions::default() };
                let read = |keep: usize| {
                    let mut handed = Vec::new();
                    let result = wrapped_keeping(path, &opts, keep, &mut |t| {
                        handed.push(t);
                        Ok(())
                    });
                    (result.map_err(|e| e.to_string()), handed)
                };
                let kept = read(usize::MAX);
                assert_eq!(read(0), kept, "{} as {format:?}", path.display());
                if format == SourceFormat::Auto {
                    assert_eq!(kept.1.len(), traces, "{}: {:?}", path.display(), kept.0);
                }
            }
        }
    }
}
