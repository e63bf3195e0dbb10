//! `tracefault sweep`: rank the strategies over many plausible profiles (see [`crate::sweep`]).

use std::path::PathBuf;

use clap::Args;

use crate::error::{Error, Result, exit};
use crate::scenario::load::load_suite;
use crate::suite::{self, RunOptions};
use crate::sweep::{ParamRange, sweep};

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Scenario files or folders.
    #[arg(default_value = "scenarios/")]
    pub paths: Vec<PathBuf>,
    /// Profiles drawn (a Latin hypercube over each probability's range).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub samples: u64,
    /// A probability's range (repeatable), e.g. `perception.prefix=0.8..0.99`; others take the
    /// profile's range, else the plausible one (README).
    #[arg(long = "param", value_name = "KEY=LO..HI")]
    pub params: Vec<ParamRange>,
    /// Seed of the design (the scenarios keep their own seeds: every profile meets the same
    /// faults and model draws).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs per scenario, strategy and profile (default: each scenario's `runs`).
    #[arg(long, value_parser = super::runs_parser())]
    pub runs: Option<u64>,
    /// Worker threads (default: the number of cores). Never changes the output.
    #[arg(long)]
    pub jobs: Option<usize>,
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
    let swept = sweep(&suite, args.samples as usize, args.seed, &args.params, &opts, &|_| {})?;
    std::fs::create_dir_all(&args.out).map_err(|e| Error::io(&args.out, e))?;
    let json = serde_json::to_string_pretty(&swept.json(args.seed)).expect("JSON values serialize") + "\n";
    crate::output::write_file(&args.out.join("sweep.csv"), swept.csv().as_bytes())?;
    crate::output::write_file(&args.out.join("sweep.json"), json.as_bytes())?;
    let md = swept.markdown();
    crate::output::write_file(&args.out.join("report.md"), md.as_bytes())?;
    print!("{md}");
    println!("sweep written to {}/ (sweep.csv, sweep.json, report.md)", args.out.display());
    Ok(exit::OK)
}
