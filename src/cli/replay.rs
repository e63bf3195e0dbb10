//! `tracefault replay`: reproduce a captured trace (as-recorded), then replay its task and fault
//! schedule under other strategies and report where each departs from the recording.

use std::path::PathBuf;

use clap::Args;

use super::import::SourceArgs;
use crate::engine::Scenario;
use crate::engine::strategy::Strategy;
use crate::error::{Error, Result, exit};
use crate::escape::printable;
use crate::output::FolderWriter;
use crate::replay::{AS_RECORDED, Counts, divergence, replay_as_recorded, whatif_scenario};
use crate::report::{self, Report};
use crate::suite::{self, RunOptions};

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Strategies to replay under (repeatable): `as-recorded` and presets. Default: all.
    #[arg(long = "strategy", value_name = "NAME")]
    pub strategies: Vec<String>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs per what-if strategy, 1 to 10^8.
    #[arg(long, default_value_t = 200, value_parser = super::runs_parser())]
    pub runs: u64,
    /// Where the what-if reports go.
    #[arg(long, default_value = "replay-reports")]
    pub out: PathBuf,
    /// Only reproduce the recording; no what-if runs or reports.
    #[arg(long)]
    pub as_recorded_only: bool,
}

fn side_by_side(rec: &Counts, rep: &Counts) -> String {
    let rows = [
        ("model calls", rec.model_calls.to_string(), rep.model_calls.to_string()),
        ("tool calls", rec.tool_calls.to_string(), rep.tool_calls.to_string()),
        ("tool failures", rec.tool_failures.to_string(), rep.tool_failures.to_string()),
        ("identical repeats of failing calls", rec.failing_repeats.to_string(), rep.failing_repeats.to_string()),
        ("ended", rec.ended.clone(), rep.ended.clone()),
    ];
    let mut out = format!("  {:<36} {:>10} {:>10}\n", "", "recorded", "replayed");
    for (name, a, b) in rows {
        let mark = if a == b { "" } else { "  ← differs" };
        out.push_str(&format!("  {name:<36} {a:>10} {b:>10}{mark}\n"));
    }
    out
}

/// With more conversations than this, only those that do not reproduce are shown.
const QUIET_AFTER: usize = 20;

/// The as-recorded check of each conversation, printed in reading order: all of them for a
/// few conversations, only those that differ for many (which is known only after the
/// 21st, so the first ones wait).
#[derive(Default)]
struct AsRecorded {
    /// Each checked conversation's text and whether it reproduced, until there are too many.
    waiting: Vec<(bool, String)>,
    quiet: bool,
    reproduced: usize,
    total: usize,
}

impl AsRecorded {
    /// Checks one conversation, taking it apart (its results' texts go as the replay is built).
    fn add(&mut self, t: crate::trace::Trace) {
        let id = printable(&t.header.id).to_string();
        let (rec, rep) = replay_as_recorded(t);
        let same = rec == rep;
        self.total += 1;
        self.reproduced += usize::from(same);
        if self.quiet && same {
            return;
        }
        let verdict = if same { "reproduces the recording" } else { "DIFFERS from the recording" };
        let text = format!("{id} — as-recorded {verdict}\n{}", side_by_side(&rec, &rep));
        if self.quiet {
            print!("{text}");
            return;
        }
        self.waiting.push((same, text));
        if self.waiting.len() > QUIET_AFTER {
            self.quiet = true;
            self.waiting.drain(..).filter(|(same, _)| !same).for_each(|(_, text)| print!("{text}"));
        }
    }

    fn finish(&mut self) {
        self.waiting.drain(..).for_each(|(_, text)| print!("{text}"));
        println!("as-recorded: {} of {} conversation(s) reproduced exactly", self.reproduced, self.total);
    }

    fn code(&self) -> i32 {
        if self.reproduced == self.total { exit::OK } else { exit::FAILED }
    }
}

pub fn execute(args: ReplayArgs) -> Result<i32> {
    let names = if args.strategies.is_empty() {
        std::iter::once(AS_RECORDED.to_owned()).chain(Strategy::presets().into_iter().map(|s| s.name)).collect()
    } else {
        args.strategies.clone()
    };
    let mut whatif = Vec::new();
    for n in names.iter().filter(|n| *n != AS_RECORDED) {
        whatif.push(Strategy::preset_named(n).ok_or_else(|| {
            Error::Usage(format!(
                "--strategy {n}: expected as-recorded or a preset ({})",
                Strategy::presets().into_iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
            ))
        })?);
    }
    let as_recorded = names.iter().any(|n| n == AS_RECORDED);
    let mut check = AsRecorded::default();
    if args.as_recorded_only || whatif.is_empty() {
        // Nothing needs every conversation at once: each is checked as it is read.
        args.source.import_each(&mut |t| {
            if as_recorded {
                check.add(t);
            }
            Ok(())
        })?;
        if as_recorded {
            check.finish();
        }
        return Ok(check.code());
    }
    let imported = args.source.import()?;
    if as_recorded {
        imported.traces.iter().for_each(|t| check.add(t.clone()));
        check.finish();
    }
    let code = check.code();
    let quiet = imported.traces.len() > QUIET_AFTER;
    // Each conversation's what-if is also written as a scenario file: what its repro lines run.
    let suite: Vec<_> = imported
        .traces
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut sc = whatif_scenario(t, whatif.clone(), args.seed, args.runs);
            sc.path = args.out.join(scenario_file(i));
            sc
        })
        .collect();
    for (t, sc) in imported.traces.iter().zip(&suite) {
        if quiet {
            break;
        }
        println!(
            "\n{} — what-if ({} runs per strategy, seed {}); first departure from the recording in run 0:",
            printable(&t.header.id),
            args.runs,
            args.seed
        );
        for (i, s) in sc.strategies.iter().enumerate() {
            match divergence(t, sc, i, 0) {
                None => println!("  {}: follows the recording exactly", s.name),
                Some(d) => println!("  {}: {}", s.name, printable(&d)),
            }
        }
    }
    let set = FolderWriter::begin(&args.out)?;
    let opts =
        RunOptions { jobs: std::thread::available_parallelism().map_or(1, |n| n.get()), ..RunOptions::default() };
    let mut rows = report::csv::runs_header();
    let results = suite::run_suite(&suite, &opts, &mut rows, true, &|_| {}).map_err(|e| Error::io(&args.out, e))?;
    for (name, bytes) in report::render_all(&Report::new(&results)).map_err(|e| Error::io(&args.out, e))? {
        set.write(name, &bytes)?;
    }
    set.write("runs.csv", &rows)?;
    let count = suite.len();
    for (i, sc) in suite.iter().enumerate() {
        set.write(&scenario_file(i), whatif_toml(&args.source, sc, i, count)?.as_bytes())?;
    }
    set.commit()?;
    println!(
        "\nwhat-if reports written to {}/, each conversation's what-if as a scenario in {}/",
        printable(&args.out.to_string_lossy()),
        printable(&args.out.join("scenarios").to_string_lossy())
    );
    Ok(code)
}

/// Where the what-if scenario of conversation `i` goes in the reports folder.
fn scenario_file(i: usize) -> String {
    format!("scenarios/{}.toml", i + 1)
}

/// The scenario file of conversation `i` (of `count` read from `source`) whose runs are the
/// what-if's `sc`: the same name (the runs' random streams are keyed by it), trace, format,
/// strategies, seed and runs, so `tracefault run FILE --strategy S --run N` repeats any run.
fn whatif_toml(source: &SourceArgs, sc: &Scenario, i: usize, count: usize) -> Result<String> {
    use toml::Value;
    let trace = std::path::absolute(&source.trace).map_err(|e| Error::io(&source.trace, e))?;
    let mut doc = toml::Table::new();
    let mut put = |k: &str, v: Value| doc.insert(k.to_owned(), v);
    put("name", sc.name.clone().into());
    put("description", "A recorded trace's what-if, as `tracefault replay` ran it.".into());
    // A seed past TOML's integers is given by the repro line's --seed.
    if let Ok(seed) = i64::try_from(sc.seed) {
        put("seed", seed.into());
    }
    put("runs", i64::try_from(sc.runs).unwrap_or(i64::MAX).into());
    put("provider", sc.format.name().into());
    put("strategies", sc.strategies.iter().map(|s| Value::from(s.name.clone())).collect::<Vec<_>>().into());
    put("trace", trace.to_string_lossy().into_owned().into());
    if source.format != "auto" {
        put("trace_format", source.format.clone().into());
    }
    if let Some(ptr) = &source.select {
        put("trace_select", ptr.clone().into());
    }
    if count > 1 {
        put("trace_conversation", i64::try_from(i + 1).unwrap_or(i64::MAX).into());
    }
    if !source.failure_rules.is_empty() {
        put("trace_failure_rules", source.failure_rules.iter().cloned().map(Value::from).collect::<Vec<_>>().into());
    }
    let body = toml::to_string(&doc).map_err(|e| Error::Usage(format!("internal: the what-if scenario: {e}")))?;
    let lenient = if source.lenient {
        "# The trace was read with --lenient, which a scenario cannot ask for: it may not load.\n"
    } else {
        ""
    };
    Ok(format!("# Written by `tracefault replay`: run it with `tracefault run FILE`.\n{lenient}{body}"))
}
