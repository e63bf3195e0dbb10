//! `tracefault import` and `tracefault inspect`: read any supported trace format.

use std::path::PathBuf;

use clap::Args;

use crate::error::{Error, Result, exit};
use crate::output::FileWriter;
use crate::trace::Trace;
use crate::trace::import::conversation::FailureRules;
use crate::trace::import::{ImportOptions, Imported, SourceFormat, import_each, import_path};
use crate::trace::inspect::{stats, table};

/// Where to read a trace from and how: shared by import, inspect and replay.
#[derive(Debug, Args, Clone)]
pub struct SourceArgs {
    /// The trace file.
    pub trace: PathBuf,
    /// auto (detect it from the content), codex, claude-code, agents-sdk, inspect, tau2,
    /// swe-agent, mini-swe-agent, openhands, otel, openai-chat, openai-responses, anthropic,
    /// gemini, gemini-openai (Chat requests sent to Gemini's OpenAI-compatible endpoint),
    /// cassette, mcp, native.
    #[arg(long, default_value = "auto")]
    pub format: String,
    /// A JSON pointer to the conversation inside a wrapper file (e.g. /13/traj).
    #[arg(long, value_name = "JSON-POINTER")]
    pub select: Option<String>,
    /// A regular expression: results whose text matches are failures. Repeatable; replaces
    /// the built-in text rules (structural flags such as is_error still apply).
    #[arg(long = "failure-rule", value_name = "REGEX")]
    pub failure_rules: Vec<String>,
    /// Import a file that fits its format only in part, listing every gap in the output and in
    /// the trace header, instead of refusing it.
    #[arg(long)]
    pub lenient: bool,
}

impl SourceArgs {
    pub fn options(&self) -> Result<ImportOptions> {
        let format = SourceFormat::parse(&self.format).ok_or_else(|| {
            Error::Usage(format!("--format {}: expected one of {}", self.format, SourceFormat::NAMES.join(", ")))
        })?;
        let rules = if self.failure_rules.is_empty() {
            FailureRules::default()
        } else {
            FailureRules::from_patterns(&self.failure_rules)
                .map_err(|e| Error::Usage(format!("--failure-rule: {e}")))?
        };
        if let Some(p) = &self.select
            && !p.starts_with('/')
        {
            return Err(Error::Usage(format!("--select {p}: a JSON pointer starts with '/' (e.g. /13/traj)")));
        }
        Ok(ImportOptions { format, select: self.select.clone(), select_key: "--select", rules, lenient: self.lenient })
    }

    pub fn import(&self) -> Result<Imported> {
        let imported = import_path(&self.trace, &self.options()?)?;
        self.say_read(imported.format, imported.traces.len());
        Ok(imported)
    }

    /// Hands each conversation to `each` as it is read (a large file of conversations is
    /// streamed: see [`import_each`]); returns how many there were.
    pub fn import_each(&self, each: &mut dyn FnMut(Trace) -> Result<()>) -> Result<usize> {
        let mut n = 0;
        let format = import_each(&self.trace, &self.options()?, &mut |t| {
            n += 1;
            each(t)
        })?;
        self.say_read(format, n);
        Ok(n)
    }

    fn say_read(&self, format: SourceFormat, conversations: usize) {
        if self.format == "auto" {
            eprintln!("{}: read as {} ({conversations} conversation(s))", self.trace.display(), format.name());
        }
    }
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// The native JSONL to write. With several conversations: OUT-1.jsonl, OUT-2.jsonl, …
    #[arg(short = 'o', long = "out", value_name = "OUT.jsonl")]
    pub out: PathBuf,
    /// With several conversations, write them all into OUT (one header line each).
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// One JSON object per conversation instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Where `import` writes: one file for all (`--all`, or a single conversation), else one file
/// per conversation. The first conversation waits until a second shows which.
enum Sink {
    Waiting(Option<Trace>),
    All(FileWriter),
    Each(usize),
}

/// Writes one trace to its own file, whole or not at all.
fn write_trace(path: &std::path::Path, t: &Trace) -> Result<()> {
    let mut f = FileWriter::begin(path)?;
    f.write_with(|w| t.write_jsonl(w))?;
    f.commit()
}

pub fn import(args: ImportArgs) -> Result<i32> {
    let stem = args.out.with_extension("");
    let numbered = |i: usize| PathBuf::from(format!("{}-{}.jsonl", stem.display(), i));
    let mut sink = if args.all { Sink::All(FileWriter::begin(&args.out)?) } else { Sink::Waiting(None) };
    let read = args.source.import_each(&mut |t| {
        match &mut sink {
            Sink::All(f) => f.write_with(|w| t.write_jsonl(w))?,
            Sink::Waiting(first @ None) => *first = Some(t),
            Sink::Waiting(Some(first)) => {
                write_trace(&numbered(1), first)?;
                write_trace(&numbered(2), &t)?;
                sink = Sink::Each(2);
            }
            Sink::Each(k) => {
                *k += 1;
                write_trace(&numbered(*k), &t)?;
            }
        }
        Ok(())
    });
    let n = match read {
        Ok(n) => n,
        Err(e) => {
            // A failed import leaves no output: not the conversations written before the error.
            if let Sink::Each(k) = sink {
                (1..=k).for_each(|i| drop(std::fs::remove_file(numbered(i))));
            }
            return Err(e);
        }
    };
    match sink {
        Sink::All(f) => f.commit()?,
        Sink::Waiting(Some(t)) => write_trace(&args.out, &t)?,
        // An earlier import into the same OUT may have written more: its later files would
        // read as this import's.
        Sink::Each(k) => {
            let mut i = k + 1;
            while std::fs::remove_file(numbered(i)).is_ok() {
                i += 1;
            }
        }
        Sink::Waiting(None) => {}
    }
    if args.all || n == 1 {
        println!("wrote {} ({n} conversation(s))", args.out.display());
    } else {
        println!("wrote {}-1.jsonl … {}-{n}.jsonl", stem.display(), stem.display());
    }
    Ok(exit::OK)
}

pub fn inspect(args: InspectArgs) -> Result<i32> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    // A reader that stops reading (`inspect … | head`) ends the listing, not the process.
    let mut closed = false;
    let done = args.source.import_each(&mut |t| {
        let s = stats(&t);
        let written = if args.json {
            let mut v = serde_json::to_value(&s).expect("stats serialize");
            if let Some(o) = v.as_object_mut() {
                // Every call is in the table; the JSON keeps the ones that failed or never ran,
                // numbered as the table numbers them, with their class and evidence.
                let failures: Vec<serde_json::Value> = s
                    .rows
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.error.is_some())
                    .map(|(i, r)| {
                        serde_json::json!({
                            "call": i + 1,
                            "turn": r.turn,
                            "tool": r.tool,
                            "outcome": r.outcome,
                            "evidence": r.evidence,
                            "error": r.error,
                        })
                    })
                    .collect();
                o.remove("rows");
                o.insert("failures".into(), failures.into());
            }
            writeln!(out, "{}", serde_json::to_string(&v).expect("value serializes"))
        } else {
            writeln!(out, "{}", table(&s))
        };
        match written {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                closed = true;
                Err(Error::Usage("standard output closed".into()))
            }
            Err(e) => Err(Error::io(std::path::Path::new("<stdout>"), e)),
            Ok(()) => Ok(()),
        }
    });
    match done {
        Err(_) if closed => Ok(exit::OK),
        Err(e) => Err(e),
        Ok(_) => Ok(exit::OK),
    }
}
