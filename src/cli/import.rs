//! `tracefault import` and `tracefault inspect`: read any supported trace format.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::error::{Error, Result, exit};
use crate::trace::import::conversation::FailureRules;
use crate::trace::import::{ImportOptions, Imported, SourceFormat, import_path};
use crate::trace::inspect::{stats, table};

/// Where to read a trace from and how: shared by import, inspect and replay.
#[derive(Debug, Args, Clone)]
pub struct SourceArgs {
    /// The trace file.
    pub trace: PathBuf,
    /// auto, native, openai-chat, openai-responses, anthropic, gemini, otel, cassette.
    #[arg(long, default_value = "auto")]
    pub format: String,
    /// A JSON pointer to the conversation inside a wrapper file (e.g. /13/traj).
    #[arg(long, value_name = "JSON-POINTER")]
    pub select: Option<String>,
    /// A regular expression: results whose text matches are failures. Repeatable; replaces
    /// the built-in text rules (structural flags such as is_error still apply).
    #[arg(long = "failure-rule", value_name = "REGEX")]
    pub failure_rules: Vec<String>,
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
        Ok(ImportOptions { format, select: self.select.clone(), select_key: "--select", rules })
    }

    pub fn import(&self) -> Result<Imported> {
        let imported = import_path(&self.trace, &self.options()?)?;
        if self.format == "auto" {
            eprintln!(
                "{}: read as {} ({} conversation(s))",
                self.trace.display(),
                imported.format.name(),
                imported.traces.len()
            );
        }
        Ok(imported)
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

fn write(path: &Path, text: &str) -> Result<()> {
    crate::output::write_file(path, text.as_bytes())
}

pub fn import(args: ImportArgs) -> Result<i32> {
    let imported = args.source.import()?;
    let traces = &imported.traces;
    if traces.len() == 1 || args.all {
        let text: String = traces.iter().map(|t| t.to_jsonl()).collect();
        write(&args.out, &text)?;
        println!("wrote {} ({} conversation(s))", args.out.display(), traces.len());
    } else {
        let stem = args.out.with_extension("");
        for (i, t) in traces.iter().enumerate() {
            let path = PathBuf::from(format!("{}-{}.jsonl", stem.display(), i + 1));
            write(&path, &t.to_jsonl())?;
        }
        println!("wrote {}-1.jsonl … {}-{}.jsonl", stem.display(), stem.display(), traces.len());
    }
    Ok(exit::OK)
}

pub fn inspect(args: InspectArgs) -> Result<i32> {
    let imported = args.source.import()?;
    for t in &imported.traces {
        let s = stats(t);
        if args.json {
            let mut v = serde_json::to_value(&s).expect("stats serialize");
            if let Some(o) = v.as_object_mut() {
                o.remove("rows");
            }
            println!("{}", serde_json::to_string(&v).expect("value serializes"));
        } else {
            println!("{}", table(&s));
        }
    }
    Ok(exit::OK)
}
