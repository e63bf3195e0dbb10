//! `tracefault sweep`: rank the strategies over many plausible profiles (see [`crate::sweep`]).

use std::path::{Path, PathBuf};

use clap::Args;

use crate::error::{Error, Result, exit};
use crate::escape::printable;
use crate::scenario::load::load_suite;
use crate::shard::Shard;
use crate::suite::{self, RunOptions};
use crate::sweep::{self, ParamRange, Plan, Sensitivity, Sweep};

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Scenario files or folders.
    #[arg(default_value = "scenarios/")]
    pub paths: Vec<PathBuf>,
    /// Profiles drawn (a Latin hypercube over each probability's range).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub samples: u64,
    /// A probability's range (repeatable), e.g. `perception.prefix=0.8..0.99`; others take the
    /// profile's range, else the plausible one (the book: the simulated model).
    #[arg(long = "param", value_name = "KEY=LO..HI")]
    pub params: Vec<ParamRange>,
    /// Seed of the design (the scenarios keep their own seeds: every profile meets the same
    /// faults and model draws).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How parameters' influence is measured: `src` (correlations over the samples, no extra
    /// runs) or `sobol` (first-order and total indices; runs samples × 12 profiles).
    #[arg(long, value_enum, default_value = "src")]
    pub sensitivity: Sensitivity,
    /// Runs per scenario, strategy and profile (default: each scenario's `runs`).
    #[arg(long, value_parser = super::runs_parser())]
    pub runs: Option<u64>,
    /// Worker threads (default: the number of cores). Never changes the output.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Evaluate only every N-th profile, starting at the K-th, into `--out`; combine the shards
    /// with `tracefault merge`.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<Shard>,
    /// Where sweep.csv, sweep.json and report.md go.
    #[arg(long, default_value = "sweep")]
    pub out: PathBuf,
}

pub fn execute(args: SweepArgs) -> Result<i32> {
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if jobs == 0 {
        return Err(Error::Usage("--jobs must be at least 1".into()));
    }
    let opts = RunOptions { jobs, seed: None, runs: args.runs, strategies: Vec::new() };
    let mut suite = load_suite(&args.paths)?;
    suite::apply_overrides(&mut suite, &opts)?;
    suite.retain(|sc| !sc.strategies.is_empty());
    let plan = Plan { samples: args.samples as usize, seed: args.seed, sensitivity: args.sensitivity };
    let profiles = args.shard.map_or(plan.evaluations(), |s| crate::shard::selected(plan.evaluations(), s).len());
    let total: u64 = suite.iter().map(|sc| sc.runs * sc.strategies.len() as u64).sum::<u64>() * profiles as u64;
    let bar = super::progress::progress_bar(total, "runs");
    let progress = |n: u64| bar.inc(n);
    if let Some(shard) = args.shard {
        let n = sweep::run_shard(&suite, plan, &args.params, &opts, shard, &args.out, &progress)?;
        bar.finish_and_clear();
        println!(
            "sweep shard {}/{}: {n} of {} profiles written to {}/{}; combine the shards with `tracefault merge DIR... --out DIR`",
            shard.k,
            shard.n,
            plan.evaluations(),
            args.out.display(),
            sweep::SHARD_FILE
        );
        return Ok(exit::OK);
    }
    let swept = sweep::sweep(&suite, plan, &args.params, &opts, &progress)?;
    bar.finish_and_clear();
    publish(&swept, &args.out)
}

/// Writes a sweep's files into `out`, prints its summary and gates; returns the exit code.
pub fn publish(swept: &Sweep, out: &Path) -> Result<i32> {
    let flips = swept.flips();
    let json = serde_json::to_string_pretty(&swept.json(&flips)).expect("JSON values serialize") + "\n";
    let md = swept.markdown(&flips);
    // The four files as one set: a reader sees the old sweep or the new one, never a mix.
    let set = crate::output::FolderWriter::begin(out)?;
    set.write("sweep.csv", swept.csv().as_bytes())?;
    set.write("sweep.json", json.as_bytes())?;
    set.write("report.md", md.as_bytes())?;
    set.write("report.html", swept.html(&flips).as_bytes())?;
    set.commit()?;
    print!("{md}");
    println!("sweep written to {}/ (sweep.csv, sweep.json, report.md, report.html)", out.display());
    let gates = swept.gates();
    let failed: Vec<_> = gates.iter().filter(|g| !g.passed).collect();
    for g in &failed {
        let bound = crate::report::gate_bounds(g.min, g.max);
        let (scenario, strategy) = (printable(&g.scenario), printable(&g.strategy));
        eprintln!("FAIL: {scenario} / {strategy}: {} = {:.3} is not {bound}", g.metric, g.value);
    }
    if gates.is_empty() {
        return Ok(exit::OK);
    }
    if failed.is_empty() {
        println!("PASS: {} gates passed", gates.len());
        Ok(exit::OK)
    } else {
        println!("FAIL: {} of {} gates failed", failed.len(), gates.len());
        Ok(exit::FAILED)
    }
}
