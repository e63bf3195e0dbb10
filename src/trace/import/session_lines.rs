//! Agent tools' JSONL session logs (Codex CLI rollouts, Claude Code transcripts and stream-json
//! output, OpenHands eval output, OpenAI Agents SDK JSONL exports) read a line at a time: each line is parsed, handed to its reader and dropped, so
//! memory holds the file's text and the conversations read from it, never the parsed file.
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
use super::{ImportOptions, Imported, SourceFormat, gaps, kept};
use super::{agents_sdk, openhands};
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
        )
    {
        return None;
    }
    let mut all = lines(text);
    let first: Value = serde_json::from_str(all.next()?).ok()?;
    // A file of one line is a JSON document, read whole.
    all.next()?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("trace");
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
    // The whole-file reading's refusals (no conversation, nothing read) are its own to word.
    if convs.iter().all(|c| c.items.is_empty()) {
        return None;
    }
    let traces: Result<Vec<_>, Error> =
        convs.into_iter().map(|c| gaps::checked(to_trace(c, &opts.rules), path, opts.lenient)).collect();
    Some(traces.map(|traces| Imported { format, traces }))
}

/// An OpenAI Agents SDK JSONL export, read in two passes: the first reads each line's items'
/// trace ids alone, to know which lines hold which traces (items of several traces may
/// interleave, and a batch body holds several); the second reads one trace at a time from its
/// lines, deserialized into what the reader reads (strings borrowed from the text, a model
/// call's `input` — the whole conversation so far, in every generation span — skipped
/// unbuilt), so memory follows the largest trace. A line that does not fit sends the file to
/// the whole reading, which says why.
fn export_lines(text: &str, id: &str) -> Option<Vec<Conversation>> {
    let all: Vec<&str> = lines(text).collect();
    let mut order: Vec<&str> = Vec::new();
    let mut lines_of: rustc_hash::FxHashMap<&str, Vec<usize>> = rustc_hash::FxHashMap::default();
    let mut ids = Vec::new();
    for (n, line) in all.iter().enumerate() {
        ids.clear();
        agents_sdk::line_traces(line, &mut ids)?;
        // Every item of a line that fits has its trace's id (each line is checked whole when
        // its trace is read): a line with none does not fit.
        if ids.is_empty() {
            return None;
        }
        for tid in ids.drain(..) {
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
    let mut entries = Vec::new();
    order
        .iter()
        .enumerate()
        .map(|(k, &tid)| {
            entries.clear();
            for &n in &lines_of[tid] {
                entries.push(agents_sdk::Entry::parse(all.get(n)?).filter(agents_sdk::Entry::fits)?);
            }
            let mut items = Vec::new();
            entries.iter().for_each(|e| e.items(&mut items));
            items.retain(|i| i.trace_id() == Some(tid));
            let cid = if total == 1 { id.to_owned() } else { format!("{id}#{}", k + 1) };
            Some(agents_sdk::trace_conversation(&items, cid))
        })
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
        let chat = ImportOptions { format: SourceFormat::OpenAiChat, ..Default::default() };
        assert!(import(&cc, path, &chat).is_none());
        let codex_format = ImportOptions { format: SourceFormat::Codex, ..Default::default() };
        assert!(import(&cc, path, &codex_format).is_none());
        let chat_lines = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}\n{\"messages\":[]}\n";
        assert!(import(chat_lines, path, &ImportOptions::default()).is_none());
    }
}
