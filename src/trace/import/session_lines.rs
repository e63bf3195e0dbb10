//! Agent tools' JSONL session logs (Codex CLI rollouts, Claude Code transcripts and stream-json
//! output, OpenHands eval output, OpenAI Agents SDK JSONL exports) read a line at a time: each line is parsed, handed to its reader and dropped, so
//! memory holds the file's text and the conversations read from it, never the parsed file.
//! OpenTelemetry span files — JSONL of OTLP/JSON requests or of flat spans, and JSON arrays of
//! flat spans (split into elements by place, `elements.rs`) — are read a trace at a time the
//! same way (`otel::jsonl_conversations`).
//!
//! This is the whole-file reading made cheaper, not a second reading: the readers are the same
//! (their whole-file entry points feed the same line readers), and a file that does not fit as
//! its first lines said — a line that is no JSON, a line without its `type`, a line that breaks
//! what the first lines told — is given back (`None`) to be read whole, which says why.

use std::path::Path;

use serde_json::Value;

use super::claude_code::{self, Session};
use super::codex::{self, Rollout};
use super::conversation::{Conversation, to_trace};
use super::elements::{Elements, Layout};
use super::{ImportOptions, Imported, SourceFormat, cores, gaps, kept};
use super::{agents_sdk, openhands, otel, readers};
use crate::error::Error;

/// The non-empty lines of `text`, as the whole-file reading numbers them (0-based).
fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|l| !l.trim().is_empty())
}

/// The file read line by line when it is a Codex rollout or a Claude Code log (by `--format`,
/// or `auto` and its first lines); `None` when it is not, or when a line does not fit.
pub fn import(text: &str, path: &Path, opts: &ImportOptions) -> Option<Result<Imported, Error>> {
    if opts.select.is_some()
        || !matches!(
            opts.format,
            SourceFormat::Auto
                | SourceFormat::Codex
                | SourceFormat::ClaudeCode
                | SourceFormat::OpenHands
                | SourceFormat::AgentsSdk
                | SourceFormat::Otel
        )
    {
        return None;
    }
    if text.trim_start().starts_with('[') {
        return otel_array(text, path, opts);
    }
    let mut all = lines(text);
    let first: Value = serde_json::from_str(all.next()?).ok()?;
    // A file of one line is a JSON document, read whole.
    all.next()?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("trace");
    if opts.format == SourceFormat::Otel || (opts.format == SourceFormat::Auto && otel_first(&first)) {
        let convs = otel::jsonl_conversations(&lines(text).collect::<Vec<_>>(), stem)?;
        return finish(SourceFormat::Otel, convs, path, opts);
    }
    let eval_output = first.get("history").is_some() && openhands::line_fits(&first, "/0").is_ok();
    let sdk_export = agents_sdk::line_fits(&first, "/0").is_ok();
    let (format, convs) = if sdk_export {
        if !matches!(opts.format, SourceFormat::Auto | SourceFormat::AgentsSdk) {
            return None;
        }
        (SourceFormat::AgentsSdk, export_lines(text, stem)?)
    } else if eval_output {
        if !matches!(opts.format, SourceFormat::Auto | SourceFormat::OpenHands) {
            return None;
        }
        (SourceFormat::OpenHands, eval_output_lines(text, stem)?)
    } else {
        let ty = first.get("type").and_then(Value::as_str)?;
        let rollout = ty == "session_meta" && first.get("payload").is_some_and(Value::is_object);
        match (opts.format, rollout) {
            (SourceFormat::Auto | SourceFormat::Codex, true) => (SourceFormat::Codex, vec![rollout_lines(text, stem)?]),
            (SourceFormat::Auto | SourceFormat::ClaudeCode, false) => {
                (SourceFormat::ClaudeCode, session_lines(text, stem)?)
            }
            _ => return None,
        }
    };
    finish(format, convs, path, opts)
}

/// A JSON array of flat OTel spans, split into its elements by their places in the text
/// (nothing parsed) and read as the same spans a line would be, a trace at a time; `None` when
/// it is another format's array, or does not fit.
fn otel_array(text: &str, path: &Path, opts: &ImportOptions) -> Option<Result<Imported, Error>> {
    if !matches!(opts.format, SourceFormat::Auto | SourceFormat::Otel) {
        return None;
    }
    let mut split = Elements::new(text.as_bytes(), Layout::Array, usize::MAX).keep_at_most(0);
    let mut spans: Vec<&str> = Vec::new();
    while let Some(e) = split.next() {
        let at = e.ok()?.far?;
        let span = text.get(usize::try_from(at.start).ok()?..usize::try_from(at.end).ok()?)?;
        if spans.is_empty() && opts.format == SourceFormat::Auto && !otel_first(&serde_json::from_str(span).ok()?) {
            return None;
        }
        spans.push(span);
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("trace");
    finish(SourceFormat::Otel, otel::jsonl_conversations(&spans, stem)?, path, opts)
}

/// The conversations read as traces, as the whole-file reading makes them.
fn finish(
    format: SourceFormat,
    convs: Vec<Conversation>,
    path: &Path,
    opts: &ImportOptions,
) -> Option<Result<Imported, Error>> {
    // The whole-file reading's refusals (no conversation, nothing read) are its own to word.
    if convs.iter().all(|c| c.items.is_empty()) {
        return None;
    }
    // Each conversation is judged on its own: shared over the cores, kept in order.
    let traces = cores::map_in_order(convs, cores::available(), |_, c| {
        gaps::checked(to_trace(c, &opts.rules), path, opts.lenient)
    });
    let traces: Result<Vec<_>, Error> = traces.into_iter().collect();
    Some(traces.map(|traces| Imported { format, traces }))
}

/// Whether `--format auto` reads a JSONL file whose first line is `first` as OTel spans: what
/// the whole reading's detection makes of the list of lines depends on its first line alone
/// (every reader of a list looks at its first element, or at every element: a first line that
/// fails one fails the list), save a legacy Codex rollout, whose first line is recognised by
/// later ones and is no span.
fn otel_first(first: &Value) -> bool {
    let legacy_codex = first.get("id").is_some_and(Value::is_string)
        && first.get("timestamp").is_some()
        && first.get("type").is_none();
    let one = Value::Array(vec![first.clone()]);
    !legacy_codex && readers::detect(&one).is_none() && super::detect(&one) == Some(SourceFormat::Otel)
}

/// An OpenAI Agents SDK JSONL export, read in two passes: the first reads each line's items'
/// trace ids alone, to know which lines hold which traces (items of several traces may
/// interleave, and a batch body holds several); the second reads one trace at a time from its
/// lines, deserialized into what the reader reads (strings borrowed from the text, a model
/// call's `input` — the whole conversation so far, in every generation span — skipped
/// unbuilt), so memory follows the largest traces being read. Both passes are shared over the
/// cores (the first in windows of lines, the second a trace at a time), their results kept in
/// order. A line that does not fit sends the file to the whole reading, which says why.
fn export_lines(text: &str, id: &str) -> Option<Vec<Conversation>> {
    export_lines_on(text, id, cores::available(), EXPORT_WINDOW)
}

/// The bytes of lines whose trace ids one core reads at a time in the first pass.
const EXPORT_WINDOW: usize = 64 << 10;

fn export_lines_on(text: &str, id: &str, cores: usize, window: usize) -> Option<Vec<Conversation>> {
    let all: Vec<&str> = lines(text).collect();
    let ids_of_windows = cores::map_in_order(cores::windows(&all, window), cores, |_, range| {
        let mut found: Vec<(usize, &str)> = Vec::new();
        let mut ids = Vec::new();
        for n in range {
            ids.clear();
            agents_sdk::line_traces(all[n], &mut ids)?;
            // Every item of a line that fits has its trace's id (each line is checked whole
            // when its trace is read): a line with none does not fit.
            if ids.is_empty() {
                return None;
            }
            found.extend(ids.iter().map(|&tid| (n, tid)));
        }
        Some(found)
    });
    let mut order: Vec<&str> = Vec::new();
    let mut lines_of: rustc_hash::FxHashMap<&str, Vec<usize>> = rustc_hash::FxHashMap::default();
    for found in ids_of_windows {
        for (n, tid) in found? {
            match lines_of.get_mut(tid) {
                Some(at) if at.last() == Some(&n) => {}
                Some(at) => at.push(n),
                None => {
                    order.push(tid);
                    lines_of.insert(tid, vec![n]);
                }
            }
        }
    }
    let total = order.len();
    let traces: Vec<(&str, Vec<usize>)> =
        order.into_iter().map(|tid| (tid, lines_of.remove(tid).unwrap_or_default())).collect();
    cores::map_in_order(traces, cores, |k, (tid, at)| {
        let entries: Vec<agents_sdk::Entry> = at
            .iter()
            .map(|&n| agents_sdk::Entry::parse(all[n]).filter(agents_sdk::Entry::fits))
            .collect::<Option<_>>()?;
        let mut items = Vec::new();
        entries.iter().for_each(|e| e.items(&mut items));
        items.retain(|i| i.trace_id() == Some(tid));
        let cid = if total == 1 { id.to_owned() } else { format!("{id}#{}", k + 1) };
        Some(agents_sdk::trace_conversation(&items, cid))
    })
    .into_iter()
    .collect()
}

/// OpenHands eval output (`output.jsonl`): one instance a line, each line parsed, read and
/// dropped; a line that is not an instance sends the file to the whole reading.
fn eval_output_lines(text: &str, id: &str) -> Option<Vec<Conversation>> {
    let n = lines(text).count();
    lines(text)
        .enumerate()
        .map(|(k, line)| {
            let v: Value = serde_json::from_str(line).ok()?;
            openhands::line_fits(&v, &format!("/{k}")).ok()?;
            Some(openhands::instance(&v, openhands::instance_id(id, k, n)))
        })
        .collect()
}

/// A Codex rollout whose first line is its `session_meta`. Whether it has request marks of
/// either kind is found first from the lines that name them, and every line is held to it.
fn rollout_lines(text: &str, id: &str) -> Option<Conversation> {
    let named =
        |word: &'static str| lines(text).filter(move |l| l.contains(word)).filter_map(|l| kept::parse(l, &codex::KEEP));
    let records = named("token_usage_record").any(|l| codex::marks(&l).0);
    let marked = records || named("token_count").any(|l| codex::marks(&l).1);
    let mut rollout = Rollout::new(id, records, marked);
    for line in lines(text) {
        let line = kept::parse(line, &codex::KEEP)?;
        if !rollout.expected(&line) {
            return None;
        }
        rollout.line(&line);
    }
    Some(rollout.finish())
}

/// A Claude Code transcript or stream-json output: lines are held until one says which it is
/// (the `init` line, or the first `user` or `assistant` line), and the reader's test of a file
/// is run on those lines; every line after them needs its string `type` as well.
fn session_lines(text: &str, id: &str) -> Option<Vec<Conversation>> {
    let mut held = Vec::new();
    let mut session: Option<Session> = None;
    for (n, line) in lines(text).enumerate() {
        let line = kept::parse(line, &claude_code::KEEP)?;
        line.get("type").and_then(Value::as_str)?;
        match &mut session {
            Some(s) => s.line(n, &line),
            None => {
                let stream = claude_code::stream_json(n, &line);
                held.push(line);
                let Some(stream) = stream else { continue };
                let prefix = Value::Array(std::mem::take(&mut held));
                claude_code::fits(&prefix).ok()?;
                let mut s = Session::new(stream);
                let Value::Array(prefix) = prefix else { unreachable!("built as an array") };
                for (k, l) in prefix.iter().enumerate() {
                    s.line(k, l);
                }
                session = Some(s);
            }
        }
    }
    Some(session?.finish(id))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::trace::import::import_parsed;

    /// Every `.jsonl` file under `dir`, subfolders included.
    fn jsonl_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                jsonl_files(&p, out);
            } else if p.extension().is_some_and(|e| e == "jsonl") {
                out.push(p);
            }
        }
    }

    fn fixtures(dir: &str) -> Vec<PathBuf> {
        let mut out = Vec::new();
        jsonl_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(dir), &mut out);
        assert!(out.len() >= 3, "{dir}");
        out
    }

    /// What a reading gives, comparable: the format and traces, or the error's words.
    fn outcome(r: Result<Imported, Error>) -> Result<(SourceFormat, Vec<crate::trace::Trace>), String> {
        r.map(|i| (i.format, i.traces)).map_err(|e| e.to_string())
    }

    fn same_as_whole(path: &Path, text: &str, opts: &ImportOptions) -> Option<()> {
        let lines = import(text, path, opts)?;
        assert_eq!(outcome(lines), outcome(import_parsed(text, path, opts)), "{}", path.display());
        Some(())
    }

    /// Every real Claude Code and Codex log (Codex 0.21's first line has no wrapper: read whole)
    /// reads line by line exactly as it reads whole, under auto and its own --format.
    #[test]
    fn session_logs_read_by_line_as_whole() {
        for (dir, format) in [
            ("claude-code", SourceFormat::ClaudeCode),
            ("codex", SourceFormat::Codex),
            ("agents-sdk", SourceFormat::AgentsSdk),
        ] {
            let mut by_line = 0;
            for path in fixtures(dir) {
                let text = std::fs::read_to_string(&path).unwrap();
                for opts in [ImportOptions::default(), ImportOptions { format, ..Default::default() }] {
                    by_line += usize::from(same_as_whole(&path, &text, &opts).is_some());
                }
            }
            assert!(by_line >= 8, "{dir}: {by_line} readings by line");
        }
    }

    /// A span's trace id field, wherever the layout keeps it, with `suffix` appended.
    fn suffix_trace(span: &mut Value, suffix: &str) {
        let o = span.as_object_mut().unwrap();
        for k in ["traceId", "trace_id", "context.trace_id"] {
            if let Some(Value::String(t)) = o.get_mut(k) {
                t.push_str(suffix);
            }
        }
        for (k, inner) in [("context", "trace_id"), ("spanContext", "traceId")] {
            if let Some(Value::String(t)) = o.get_mut(k).and_then(|c| c.get_mut(inner)) {
                t.push_str(suffix);
            }
        }
    }

    fn trace_key(span: &Value) -> String {
        ["/traceId", "/trace_id", "/context.trace_id", "/context/trace_id", "/spanContext/traceId"]
            .iter()
            .find_map(|p| span.pointer(p))
            .map(Value::to_string)
            .unwrap_or_default()
    }

    /// Spans taken a trace at a time in turn (the first span of each, then the second…).
    fn round_robin(spans: &[Value]) -> Vec<Value> {
        let mut by_trace: Vec<(String, Vec<&Value>)> = Vec::new();
        for s in spans {
            let k = trace_key(s);
            match by_trace.iter_mut().find(|(t, _)| *t == k) {
                Some((_, l)) => l.push(s),
                None => by_trace.push((k, vec![s])),
            }
        }
        let longest = by_trace.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
        (0..longest).flat_map(|i| by_trace.iter().filter_map(move |(_, l)| l.get(i).map(|s| (*s).clone()))).collect()
    }

    fn jsonl(lines: impl IntoIterator<Item = Value>) -> String {
        lines.into_iter().map(|l| l.to_string() + "\n").collect()
    }

    fn request(spans: &[Value]) -> Value {
        serde_json::json!({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "s"}, "spans": spans}]}]})
    }

    /// An OTel fixture's spans (OTLP's across resources and scopes, a list's, Phoenix's `data`)
    /// and the JSONL forms of it: OTLP requests a resource and scope a line, flat spans a line
    /// (in order, reversed, traces interleaved), OTLP requests of one span and of three spans a
    /// line (traces interleaved), and two copies of the file with the second's trace ids
    /// suffixed, their lines alternating.
    fn otel_forms(v: &Value) -> Vec<(&'static str, String)> {
        let mut forms = Vec::new();
        let mut spans: Vec<Value> = Vec::new();
        // Tempo's trace answer names them `batches` and `instrumentationLibrarySpans`.
        if let Some(rs) = v.get("resourceSpans").or_else(|| v.get("batches")).and_then(Value::as_array) {
            let mut requests = Vec::new();
            for r in rs {
                let scopes = r.get("scopeSpans").or_else(|| r.get("instrumentationLibrarySpans"));
                for scope in scopes.and_then(Value::as_array).unwrap() {
                    spans.extend(scope["spans"].as_array().unwrap().iter().cloned());
                    requests.push(
                        serde_json::json!({"resourceSpans": [{"resource": r["resource"], "scopeSpans": [scope]}]}),
                    );
                }
            }
            // A file of one line is a JSON document, read whole.
            if requests.len() >= 2 {
                forms.push(("otlp requests", jsonl(requests)));
            }
        } else if let Some(list) = v.get("data").unwrap_or(v).as_array() {
            spans = list.clone();
        }
        assert!(spans.len() >= 3, "{v:.200}");
        forms.push(("flat", jsonl(spans.iter().cloned())));
        forms.push(("flat reversed", jsonl(spans.iter().rev().cloned())));
        forms.push(("flat interleaved", jsonl(round_robin(&spans))));
        let mut copies = Vec::new();
        for s in &spans {
            let mut b = s.clone();
            suffix_trace(&mut b, "b");
            copies.extend([s.clone(), b]);
        }
        forms.push(("otlp span a line", jsonl(round_robin(&copies).iter().map(|s| request(std::slice::from_ref(s))))));
        let mixed: Vec<Value> = round_robin(&copies).into_iter().rev().collect();
        forms.push(("otlp three a line", jsonl(mixed.chunks(3).map(request))));
        forms.push(("two copies alternating", jsonl(copies)));
        forms
    }

    /// Every OTel fixture, as OTLP/JSON JSONL and as flat-span JSONL in several orders, reads a
    /// trace at a time exactly as it reads whole (the same traces, ids, gaps and endings),
    /// under auto and --format otel; the Phoenix DataFrame JSONL as it is too, and the flat
    /// forms and the span-list fixtures as JSON arrays.
    #[test]
    fn otel_jsonl_reads_by_trace_as_whole() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otel");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
        files.push(root.join("vercel-ai/ai-sdk-6-openai-chat.spans.json"));
        files.retain(|p| p.extension().is_some_and(|e| e == "json" || e == "jsonl"));
        files.sort();
        let mut read = 0;
        for path in &files {
            let text = std::fs::read_to_string(path).unwrap();
            let v: Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(_) => Value::Array(text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()),
            };
            // A Jaeger trace answer is one document of Jaeger's own spans, never lines of them.
            if v.pointer("/data/0/traceID").is_some() {
                continue;
            }
            let mut forms = otel_forms(&v);
            if path.extension().is_some_and(|e| e == "jsonl") {
                forms.push(("as it is", text.clone()));
            }
            let jsonl_path = path.with_extension("jsonl");
            let arrays: Vec<(&str, String)> = forms
                .iter()
                .filter(|(f, _)| f.starts_with("flat"))
                .map(|(_, t)| ("flat as a JSON array", format!("[\n{}]", t.trim_end().replace('\n', ",\n  "))))
                .collect();
            if v.is_array() {
                forms.push(("the JSON array as it is", text.clone()));
            }
            forms.extend(arrays);
            for (form, text) in &forms {
                for format in [SourceFormat::Auto, SourceFormat::Otel] {
                    let opts = ImportOptions { format, ..Default::default() };
                    let by_trace = import(text, &jsonl_path, &opts)
                        .unwrap_or_else(|| panic!("{}: {form} ({format:?}) read whole", path.display()));
                    let whole = import_parsed(text, &jsonl_path, &opts);
                    assert!(whole.is_ok(), "{}: {form}: {:?}", path.display(), whole.err());
                    assert_eq!(outcome(by_trace), outcome(whole), "{}: {form} ({format:?})", path.display());
                    read += 1;
                }
            }
        }
        assert!(read >= 200, "{read} readings");
    }

    /// OTLP/JSON JSONL, a request a line, reads as the one request it was split from; a line
    /// that does not fit (not JSON, a flat span among requests, a span no object) sends the
    /// file to the whole reading, which says why or reads it.
    #[test]
    fn otlp_jsonl_reads_as_its_document() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otel/openinference-openai.otlp.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let forms = otel_forms(&serde_json::from_str(&text).unwrap());
        let (_, requests) = forms.iter().find(|(f, _)| *f == "otlp requests").unwrap();
        assert!(requests.lines().count() >= 2);
        let opts = ImportOptions::default();
        let by_trace = outcome(import(requests, &path, &opts).unwrap()).unwrap();
        let whole = outcome(import_parsed(&text, &path, &opts)).unwrap();
        assert_eq!(by_trace, whole);
        assert!(whole.1.len() >= 2, "several conversations");

        let flat_span = r#"{"name": "x", "traceId": "t", "spanId": "s", "attributes": {}}"#;
        let no_object = r#"{"resourceSpans": [{"scopeSpans": [{"spans": [3]}]}]}"#;
        for bad in ["{\"resourceSpans\": [", flat_span, no_object] {
            let text = format!("{requests}{bad}\n");
            assert!(import(&text, &path, &opts).is_none(), "{bad}");
        }
        // A span that is not an object is a gap of the whole reading, not a refusal.
        let text = format!("{requests}{no_object}\n");
        let lenient = ImportOptions { lenient: true, ..Default::default() };
        assert!(import_parsed(&text, &path, &lenient).is_ok());
    }

    /// OpenHands eval output reads a line at a time exactly as it reads whole, and a line that
    /// is not an instance sends the file to the whole reading, which says why.
    #[test]
    fn openhands_eval_output_reads_by_line_as_whole() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openhands");
        let path = root.join("openhands-eval-output.jsonl");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.lines().count() >= 2, "several instances");
        for format in [SourceFormat::Auto, SourceFormat::OpenHands] {
            let opts = ImportOptions { format, ..Default::default() };
            assert!(same_as_whole(&path, &text, &opts).is_some(), "{format:?}");
        }
        let broken = format!("{text}{{\"history\": 3}}\n");
        assert!(import(&broken, &path, &ImportOptions::default()).is_none());
        assert!(import_parsed(&broken, &path, &ImportOptions::default()).is_err());
    }

    /// An Agents SDK export reads the same on one core or several, in one window or a line a
    /// window, with its traces' lines interleaved (each fixture's items under three trace ids,
    /// taken in turn), and as the whole reading does; a line that does not fit, in any window,
    /// sends the file to the whole reading.
    #[test]
    fn export_reading_is_the_same_on_any_cores_and_windows() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents-sdk");
        let mut items = Vec::new();
        for name in ["agents-sdk-spans.jsonl", "agents-sdk-v0.2.11-spans-redacted.jsonl"] {
            for k in 0..3 {
                for line in std::fs::read_to_string(root.join(name)).unwrap().lines() {
                    let mut v: Value = serde_json::from_str(line).unwrap();
                    for key in ["trace_id", "id"] {
                        if let Some(Value::String(t)) = v.get_mut(key)
                            && (key == "trace_id" || t.starts_with("trace_"))
                        {
                            t.push_str(&format!("-{k}"));
                        }
                    }
                    items.push(v);
                }
            }
        }
        let text = jsonl(round_robin(&items));
        let read = |cores, window| format!("{:?}", export_lines_on(&text, "t", cores, window).unwrap());
        let one = read(1, usize::MAX);
        assert!(one.matches("Conversation {").count() >= 6, "{one:.300}");
        for (cores, window) in [(2, usize::MAX), (2, 1), (3, 1), (2, 2000), (1, 1)] {
            assert_eq!(read(cores, window), one, "{cores} cores, windows of {window} bytes");
        }
        let path = Path::new("export.jsonl");
        same_as_whole(path, &text, &ImportOptions::default()).unwrap();
        let idless = "{\"object\":\"trace.span\",\"span_data\":{\"type\":\"function\"}}\n";
        let broken = format!("{text}{idless}");
        for (cores, window) in [(1, usize::MAX), (2, 1), (2, 2000)] {
            assert!(export_lines_on(&broken, "t", cores, window).is_none(), "{cores} cores, windows of {window}");
        }
    }

    /// A file that breaks what its first lines said is read whole, with the whole reading's
    /// words: a later line without its `type`, a later line that is no JSON, a record of
    /// request marks the search by name could not see (its type escaped).
    #[test]
    fn a_misfit_later_line_is_read_whole() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let cc = std::fs::read_to_string(root.join("claude-code/transcript-max-turns.jsonl")).unwrap();
        let path = Path::new("t.jsonl");
        let opts = ImportOptions::default();
        let untyped = format!("{cc}{{\"uuid\":\"x\"}}\n");
        let not_json = format!("{cc}{{\"type\":\n");
        for text in [untyped, not_json] {
            assert!(import(&text, path, &opts).is_none());
            assert!(import_parsed(&text, path, &opts).is_err());
        }
        let sdk = std::fs::read_to_string(root.join("agents-sdk/agents-sdk-spans.jsonl")).unwrap();
        let idless = format!("{sdk}{{\"object\":\"trace.span\",\"span_data\":{{\"type\":\"function\"}}}}\n");
        assert!(import(&idless, path, &opts).is_none());
        assert!(import_parsed(&idless, path, &opts).is_err());
        let codex = std::fs::read_to_string(root.join("codex/codex-tools.jsonl")).unwrap();
        let escaped = r#"{"timestamp":"t","type":"\u0074oken_usage_record","payload":{"response_id":"r9","usage":{"input_tokens":1,"output_tokens":1}}}"#;
        let text = format!("{codex}{escaped}\n");
        if !codex.contains("token_usage_record") {
            assert!(import(&text, path, &opts).is_none());
        }
        assert!(import_parsed(&text, path, &opts).is_ok());
    }

    /// Only Codex and Claude Code logs of two lines or more are read by line: a native trace,
    /// a one-line file, another format's JSONL and `--select` are not.
    #[test]
    fn what_is_read_by_line() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let cc = std::fs::read_to_string(root.join("claude-code/transcript-max-turns.jsonl")).unwrap();
        let path = Path::new("t.jsonl");
        assert!(import(&cc, path, &ImportOptions::default()).is_some());
        let first = cc.lines().find(|l| l.contains("\"assistant\"")).unwrap();
        assert!(import(first, path, &ImportOptions::default()).is_none());
        let select = ImportOptions { select: Some("/0".into()), ..Default::default() };
        assert!(import(&cc, path, &select).is_none());
        let chat =
            ImportOptions { format: SourceFormat::Provider(crate::provider::Format::OpenAiChat), ..Default::default() };
        assert!(import(&cc, path, &chat).is_none());
        let codex_format = ImportOptions { format: SourceFormat::Codex, ..Default::default() };
        assert!(import(&cc, path, &codex_format).is_none());
        let chat_lines = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}\n{\"messages\":[]}\n";
        assert!(import(chat_lines, path, &ImportOptions::default()).is_none());
    }
}
