//! `tracefault run`: load the suite, run it, write reports, print the summary, check gates.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::RunArgs;
use std::collections::BTreeMap;

use crate::baseline;
use crate::engine::rng::fnv1a64;
use crate::error::{Error, Result, exit};
use crate::escape::printable;
use crate::escape::{md_code_in_table, md_text, shell_line};
use crate::metrics::summary::SUMMARY_COLUMNS;
use crate::output::{self, FolderWriter};
use crate::report::{self, Report};
use crate::scenario::load::load_suite;
use crate::scenario::{Loaded, Scenario};
use crate::shard::{self, ShardSource};
use crate::suite::{self, RunOptions, RunsSink, ScenarioResult};
use crate::trace::Trace;
use crate::trace::record::Recorder;

pub fn execute(args: RunArgs) -> Result<i32> {
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if jobs == 0 {
        return Err(Error::Usage("--jobs must be at least 1".into()));
    }
    let opts = RunOptions { jobs, seed: args.seed, runs: args.runs, strategies: args.strategies.clone() };
    let mut suite = load_suite(&args.paths)?;
    suite::apply_overrides(&mut suite, &opts)?;
    suite.retain(|sc| !sc.strategies.is_empty());

    if let Some(run) = args.run {
        return single_run(&suite, run, args.trace_out.as_deref(), args.explain);
    }

    let out = args.out.clone().unwrap_or_else(|| PathBuf::from("reports"));
    let total: u64 = suite.iter().map(|sc| sc.runs * sc.strategies.len() as u64).sum();
    let bar = super::progress::progress_bar(total, "runs");
    let progress = |n: u64| bar.inc(n);
    let with_rows = !args.no_runs_csv;

    if let Some(shard) = args.shard {
        if args.check_determinism {
            return Err(Error::Usage("--check-determinism runs the whole suite; it does not go with --shard".into()));
        }
        let source = ShardSource {
            paths: args.paths.clone(),
            seed: args.seed,
            runs: args.runs,
            strategies: args.strategies.clone(),
        };
        let n = shard::run_shard(&suite, jobs, shard, with_rows, &source, &out, &progress)?;
        bar.finish_and_clear();
        println!(
            "shard {}/{}: {n} of {} work units written to {}/ ({}, {}); combine the shards with `tracefault merge DIR... --out DIR`",
            shard.k,
            shard.n,
            suite::units(&suite).len(),
            out.display(),
            shard::MANIFEST,
            shard::ROWS
        );
        return Ok(exit::OK);
    }

    let set = FolderWriter::begin(&out)?;
    let mut sink = RunsFile::create(&set, with_rows, args.check_determinism)?;
    let results = suite::run_suite(&suite, &opts, &mut sink, with_rows, &progress).map_err(|e| Error::io(&out, e))?;
    bar.finish_and_clear();
    let runs_hash = sink.finish(&set)?;
    let runs_csv = Some(set.path("runs.csv")).filter(|p| p.exists());
    let cmp = against_baseline(&suite, &results, runs_csv, args.baseline.as_deref(), args.require_baseline)?;
    let rep = Report {
        results: &results,
        comparison: cmp.as_ref(),
        fail_on_regression: args.fail_on_regression,
        checks: None,
    };
    let files = publish(&rep, set)?;

    let mut code = if rep.passed() { exit::OK } else { exit::FAILED };
    if args.check_determinism {
        let other_jobs = if jobs == 1 { 2 } else { 1 };
        let mut again = HashRuns::default();
        let opts2 = RunOptions { jobs: other_jobs, ..opts };
        let results2 =
            suite::run_suite(&suite, &opts2, &mut again, with_rows, &|_| {}).map_err(|e| Error::io(&out, e))?;
        let files2 = report::render_all(&Report::new(&results2)).map_err(|e| Error::io(&out, e))?;
        let same_runs = Some(again.total) == runs_hash;
        let diff: Vec<&str> = files.iter().zip(&files2).filter(|(a, b)| a.1 != b.1).map(|(a, _)| a.0).collect();
        if diff.is_empty() && same_runs {
            println!("determinism check: identical bytes with --jobs {jobs} and --jobs {other_jobs}");
        } else {
            let mut bad = diff.join(", ");
            if !same_runs {
                bad.push_str(" runs.csv");
            }
            println!("determinism check FAILED: {bad} differ between --jobs {jobs} and --jobs {other_jobs}");
            code = exit::FAILED;
        }
    }
    if let Some(cmp) = &cmp {
        print!("{}", baseline::markdown(cmp, args.fail_on_regression));
    }
    report_outcome(&rep);
    step_summary(&rep);
    Ok(code)
}

/// The comparison with `--baseline` (the new side read from the results and the runs.csv
/// about to be published), or, without one, the change gates the suite has, each not checked
/// for want of a baseline (failed with `require`). A `--baseline` folder that holds no report
/// yet — a first run in CI — is no baseline, said as a warning; a folder whose report is not
/// one is bad input.
pub(super) fn against_baseline(
    suite: &[Loaded],
    results: &[ScenarioResult],
    runs_csv: Option<PathBuf>,
    dir: Option<&Path>,
    require: bool,
) -> Result<Option<baseline::Comparison>> {
    let gates: BTreeMap<String, Vec<crate::scenario::Gate>> =
        suite.iter().map(|sc| (sc.name.clone(), sc.gates.clone())).collect();
    let missing = dir.filter(|d| !d.join("report.json").exists());
    if let Some(d) = missing {
        eprintln!(
            "warning: the baseline {} holds no report.json yet (a first run?): no comparison; change gates are {}",
            d.display(),
            if require { "failed (--require-baseline)" } else { "not checked" }
        );
    }
    let Some(dir) = dir.filter(|_| missing.is_none()) else {
        let strategies =
            suite.iter().map(|sc| (sc.name.clone(), sc.strategies.iter().map(|s| s.name.clone()).collect())).collect();
        let why = match missing {
            Some(d) => format!("no baseline: {} holds no report yet", d.display()),
            None => "no baseline: no --baseline given".to_owned(),
        };
        let gates = baseline::gates_without_baseline(&gates, &strategies, &why, require);
        if gates.is_empty() && missing.is_none() {
            return Ok(None);
        }
        let baseline = missing.map_or_else(|| "(none)".into(), Path::to_path_buf);
        return Ok(Some(baseline::Comparison { baseline, gates, ..Default::default() }));
    };
    let new = baseline::folder_of(results, runs_csv);
    Ok(Some(baseline::compare(&baseline::read_folder(dir)?, &new, &gates)?))
}

/// `tracefault diff OLD NEW`: the comparison `run --baseline` makes, for two folders.
pub fn diff(args: super::DiffArgs) -> Result<i32> {
    let cmp =
        baseline::compare(&baseline::read_folder(&args.old)?, &baseline::read_folder(&args.new)?, &BTreeMap::new())?;
    print!("{}", baseline::markdown(&cmp, args.fail_on_regression));
    Ok(if cmp.passed(args.fail_on_regression) { exit::OK } else { exit::FAILED })
}

/// With `GITHUB_STEP_SUMMARY` set (GitHub Actions), appends a short Markdown summary to that
/// file: the verdict, failed gates with their worst runs' repro lines, and the comparison.
pub(super) fn step_summary(rep: &Report<'_>) {
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") else { return };
    let passed = rep.passed();
    let gates: usize = rep.results.iter().map(|r| r.gates.len()).sum();
    let mut md = format!("## tracefault: {}\n\n", if passed { "PASS" } else { "FAIL" });
    md.push_str(&format!("{} scenario(s), {gates} gate(s).\n", rep.results.len()));
    let failed: Vec<_> =
        rep.results.iter().flat_map(|r| r.gates.iter().map(move |g| (r, g))).filter(|(_, g)| !g.passed).collect();
    if !failed.is_empty() {
        md.push_str("\n| scenario | strategy | metric | value | bound | worst run |\n|---|---|---|---|---|---|\n");
        for (r, g) in failed {
            let repro = r
                .scenario
                .strategies
                .iter()
                .position(|s| s.name == g.strategy)
                .and_then(|i| r.repro_line(i))
                .map(|l| md_code_in_table(&l))
                .unwrap_or_default();
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} | {repro} |\n",
                md_text(&g.scenario),
                md_text(&g.strategy),
                g.metric,
                g.value,
                report::gate_bounds(g.min, g.max)
            ));
        }
    }
    for s in rep.silent_scenarios() {
        md.push_str(&format!("\n- {}: no fault fired in any run\n", md_text(s)));
    }
    if let Some(c) = rep.checks {
        md.push('\n');
        report::markdown::checklist(&mut md, c);
    }
    if let Some(c) = rep.comparison {
        md.push('\n');
        md.push_str(
            &baseline::markdown(c, rep.fail_on_regression).replacen("# ", "### ", 1).replace("\n## ", "\n#### "),
        );
    }
    let appended =
        std::fs::OpenOptions::new().create(true).append(true).open(&path).and_then(|mut f| f.write_all(md.as_bytes()));
    if let Err(e) = appended {
        eprintln!("warning: cannot append to GITHUB_STEP_SUMMARY ({}): {e}", Path::new(&path).display());
    }
}

/// `tracefault shrink`: print the smallest fault schedule under which the run still loops.
pub fn shrink(args: super::ShrinkArgs) -> Result<i32> {
    let mut sc = crate::scenario::load::load_file(&args.scenario)?;
    if let Some(seed) = args.seed {
        sc.seed = seed;
    }
    let s = sc.strategies.iter().position(|s| s.name == args.strategy).ok_or_else(|| {
        let names: Vec<&str> = sc.strategies.iter().map(|s| s.name.as_str()).collect();
        Error::Usage(format!("--strategy {}: the scenario's strategies are {}", args.strategy, names.join(", ")))
    })?;
    if args.run >= sc.runs {
        return Err(Error::Usage(format!("--run {}: {} has runs 0 to {}", args.run, sc.name, sc.runs - 1)));
    }
    if sc.fleet.agents > 1 || sc.loaded {
        // A fault schedule is one agent's attempts; a fleet's faults also come from the others.
        return Err(Error::Usage(format!(
            "{}: shrink replays one agent's fault schedule; a scenario with [fleet] or [tools.NAME] limits is not supported yet",
            args.scenario.display()
        )));
    }
    let (ended, met, min) = crate::shrink::shrink(&sc, s, args.run);
    if !ended.is_loop() {
        println!(
            "run {} of {} under {} ended {}: it does not loop, so there is nothing to shrink",
            args.run,
            printable(&sc.name),
            printable(&args.strategy),
            ended.name()
        );
        return Ok(exit::FAILED);
    }
    if min == met {
        let which = if met.len() == 1 {
            "the one fault it met".to_owned()
        } else {
            format!("all {} faults it met; none can be removed", met.len())
        };
        println!("# run {} under {} ends {} with {which}:", args.run, printable(&args.strategy), ended.name());
    } else {
        println!(
            "# run {} under {} ends {}: {} of the {} faults it met still make it loop:",
            args.run,
            printable(&args.strategy),
            ended.name(),
            min.len(),
            met.len()
        );
    }
    print!("{}", crate::shrink::to_toml(&sc, &min));
    let (run, seed) = (args.run.to_string(), sc.seed.to_string());
    let line = shell_line(["tracefault", "run", "FILE", "--strategy", &args.strategy, "--run", &run, "--seed", &seed]);
    println!("# Replace the scenario's [[faults]] with these, then: {}", printable(&line));
    Ok(exit::OK)
}

/// `tracefault merge`: the shards' results, published as one run.
pub fn merge(args: super::MergeArgs) -> Result<i32> {
    if args.dirs.iter().any(|d| crate::sweep::is_shard(d)) {
        let swept = crate::sweep::merge(&args.dirs)?;
        return super::sweep::publish(&swept, args.out.as_deref().unwrap_or(Path::new("sweep")));
    }
    let out = args.out.unwrap_or_else(|| PathBuf::from("reports"));
    let (suite, manifests) = shard::load_suite_of(&args.dirs)?;
    let set = FolderWriter::begin(&out)?;
    let with_rows = shard::with_rows(&manifests);
    let mut sink = RunsFile::create(&set, with_rows, false)?;
    let results = shard::merge(&suite, manifests, &mut sink)?;
    sink.finish(&set)?;
    publish(&Report::new(&results), set)?;
    let rep = Report::new(&results);
    report_outcome(&rep);
    Ok(if rep.passed() { exit::OK } else { exit::FAILED })
}

/// Writes the reports into the set (which may hold runs.csv already), puts the set in place,
/// and prints the summary and warnings; returns the rendered reports.
pub fn publish(rep: &Report<'_>, set: FolderWriter) -> Result<Vec<(&'static str, Vec<u8>)>> {
    let out = set.out().to_owned();
    let results = rep.results;
    let files = report::render_all(rep).map_err(|e| Error::io(&out, e))?;
    for (name, bytes) in &files {
        set.write(name, bytes)?;
    }
    let mut names: Vec<&str> = files.iter().map(|f| f.0).collect();
    if set.path("runs.csv").exists() {
        names.insert(1, "runs.csv");
    }
    set.commit()?;
    print_summary(results);
    for r in results {
        for w in &r.warnings {
            eprintln!("warning: {}: {}", printable(&r.scenario.name), printable(w));
        }
    }
    println!("reports written to {}/ ({})", printable(&out.to_string_lossy()), names.join(", "));
    Ok(files)
}

pub fn report_outcome(rep: &Report<'_>) {
    let failed: Vec<String> = rep
        .results
        .iter()
        .flat_map(|r| &r.gates)
        .filter(|g| !g.passed)
        .map(|g| {
            format!(
                "{} / {}: {} = {} is not {}",
                printable(&g.scenario),
                printable(&g.strategy),
                g.metric,
                g.value,
                report::gate_bounds(g.min, g.max)
            )
        })
        .collect();
    for f in &failed {
        println!("GATE FAILED {f}");
    }
    for r in rep.results {
        let mut shown = Vec::new();
        for g in r.gates.iter().filter(|g| !g.passed) {
            let Some(i) = r.scenario.strategies.iter().position(|s| s.name == g.strategy) else { continue };
            if !shown.contains(&i)
                && let Some(line) = r.repro_line(i)
            {
                println!("  worst run of {}: {}", printable(&g.strategy), printable(&line));
                shown.push(i);
            }
        }
    }
    for s in rep.silent_scenarios() {
        println!("CHECK FAILED {}: no fault fired in any run", printable(s));
    }
    let gates: usize = rep.results.iter().map(|r| r.gates.len()).sum();
    let checks = rep.checks.map(|c| {
        let failed = c.checks.iter().filter(|r| matches!(r.status, report::checks::CheckStatus::Fail(_))).count();
        format!(", {failed} of {} checks failed", c.checks.len())
    });
    if rep.passed() {
        println!("PASS: {gates} gates passed{}", checks.map(|_| ", every check passed").unwrap_or_default());
    } else {
        let silent = rep.silent_scenarios().len();
        println!(
            "FAIL: {} of {gates} gates failed{}{}{}",
            failed.len(),
            if rep.checks.is_none() || silent > 0 {
                format!(", {silent} scenario(s) where no fault fired")
            } else {
                String::new()
            },
            checks.unwrap_or_default(),
            match rep.comparison {
                Some(c) if !c.passed(rep.fail_on_regression) => ", the comparison with the baseline failed",
                _ => "",
            }
        );
    }
}

/// Each scenario's strategies as a table; names shown safe for a terminal and padded by hand
/// (a formatter's width is at most 65 535).
fn print_summary(results: &[ScenarioResult]) {
    let col = |m: &str| SUMMARY_COLUMNS[2..].iter().position(|c| *c == m).unwrap_or(0);
    let pad = |s: &str, width: usize| format!("{s}{}", " ".repeat(width.saturating_sub(s.chars().count())));
    for r in results {
        let sc = &r.scenario;
        println!("\n{} (seed {}, {} runs)", printable(&sc.name), r.seed, r.runs);
        let names: Vec<_> =
            r.rows.iter().chain(r.recorded.as_ref().map(|x| &x.0)).map(|row| (printable(&row.strategy), row)).collect();
        let width = names[..r.rows.len()].iter().map(|n| n.0.chars().count()).max().unwrap_or(8).max(8);
        println!(
            "  {}  {:>7}  {:>7}  {:>8}  {:>9}  {:>7}",
            pad("strategy", width),
            "success",
            "loops",
            "calls",
            "wasted",
            "trips"
        );
        for (name, row) in &names {
            println!(
                "  {}  {:>7}  {:>7}  {:>8}  {:>9}  {:>7}",
                pad(name, width),
                row.formatted(col("success_rate")),
                row.formatted(col("loop_rate")),
                row.formatted(col("calls_mean")),
                row.formatted(col("wasted_retries")),
                row.formatted(col("breaker_trips")),
            );
        }
        let failed = r.gates.iter().filter(|g| !g.passed).count();
        if !r.gates.is_empty() {
            println!("  gates: {} passed, {failed} failed", r.gates.len() - failed);
        }
    }
    println!();
}

/// `--run N`: one run per selected (scenario, strategy), printed; `--trace-out` writes its log.
fn single_run(suite: &[Loaded], run: u64, trace_out: Option<&Path>, explain: bool) -> Result<i32> {
    let pairs: Vec<(&Scenario, usize)> =
        suite.iter().flat_map(|sc| (0..sc.strategies.len()).map(move |s| (&sc.scenario, s))).collect();
    if trace_out.is_some() && pairs.len() != 1 {
        return Err(Error::Usage(format!(
            "--trace-out needs exactly one scenario and one strategy (got {}): add --strategy NAME",
            pairs.len()
        )));
    }
    for (sc, s) in pairs {
        if run >= sc.runs {
            return Err(Error::Usage(format!("--run {run}: {} has runs 0 to {}", sc.name, sc.runs - 1)));
        }
        let mut rec = Recorder::new(sc, &sc.strategies[s].name, run);
        rec.explain = explain;
        let m = if explain {
            suite::run_one_with(sc, s, run, &mut rec, &mut crate::engine::probabilities::Explaining::new(&sc.profile))
        } else {
            suite::run_one(sc, s, run, &mut rec)
        };
        println!(
            "{} / {} run {} (seed {}): {} after {} calls ({} model, {} tool), {} wasted retries, {} orchestrator retries, {} breaker trips, {} tokens, {} virtual ms",
            printable(&sc.name),
            printable(&sc.strategies[s].name),
            run,
            sc.seed,
            m.terminated_by().name(),
            m.calls(),
            m.model_calls,
            m.tool_calls,
            m.wasted_retries,
            m.orchestrator_retries,
            m.breaker_trips,
            m.tokens,
            m.virtual_ms
        );
        if explain {
            for t in &rec.traces {
                print!("{}", crate::trace::inspect::table(&crate::trace::inspect::stats(t)));
            }
        }
        if let Some(path) = trace_out {
            let jsonl: String = rec.traces.iter().map(Trace::to_jsonl).collect();
            output::write_file(path, jsonl.as_bytes())?;
            println!("trace written to {}", path.display());
        }
    }
    Ok(exit::OK)
}

/// Hashes runs rows (FNV-1a over the bytes, in order): what `--check-determinism` compares.
pub struct HashRuns {
    pub total: u64,
}

impl Default for HashRuns {
    fn default() -> Self {
        HashRuns { total: fnv1a64(b"") }
    }
}

impl RunsSink for HashRuns {
    fn rows(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        for &b in bytes {
            self.total ^= u64::from(b);
            self.total = self.total.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Ok(())
    }
}

/// `runs.csv` of a report set, streamed as the suite runs; hashed only for
/// `--check-determinism` (hashing every row costs more than writing it).
struct RunsFile {
    file: Option<std::io::BufWriter<std::fs::File>>,
    hash: Option<HashRuns>,
}

impl RunsFile {
    fn create(set: &FolderWriter, with_rows: bool, hash: bool) -> Result<RunsFile> {
        let file = if with_rows {
            let path = set.path("runs.csv");
            let f = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
            let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
            w.write_all(&report::csv::runs_header()).map_err(|e| Error::io(&path, e))?;
            Some(w)
        } else {
            None
        };
        Ok(RunsFile { file, hash: hash.then(HashRuns::default) })
    }

    /// Flushes the file; returns the hash when one was kept.
    fn finish(self, set: &FolderWriter) -> Result<Option<u64>> {
        if let Some(mut f) = self.file {
            f.flush().map_err(|e| Error::io(&set.path("runs.csv"), e))?;
        }
        Ok(self.hash.map(|h| h.total))
    }
}

impl RunsSink for RunsFile {
    fn rows(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if let Some(h) = &mut self.hash {
            h.rows(bytes)?;
        }
        match &mut self.file {
            Some(f) => f.write_all(bytes),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_prints_a_name_of_any_length() {
        let src = "name = \"s\"\nruns = 3\n[task]\n[[task.steps]]\ntool = \"a\"\n";
        let mut sc = crate::scenario::load::load_str(src, Path::new("s.toml")).unwrap();
        // Longer than any limit a file may set, and than a formatter's width (65 535).
        sc.strategies[0].name = "x".repeat(70_000);
        let opts = RunOptions { jobs: 1, ..RunOptions::default() };
        let results = suite::run_suite(&[sc], &opts, &mut std::io::sink(), false, &|_| {}).unwrap();
        print_summary(&results);
    }
}
