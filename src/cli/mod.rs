//! The command line (clap derive): one file per subcommand, no logic beyond wiring.

pub mod calibrate;
pub mod envelopes;
pub mod import;
pub mod predict;
pub mod progress;
pub mod redact;
pub mod reference;
pub mod replay;
pub mod run;
pub mod sweep;
pub mod validate;
pub mod wire;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::error::Result;

#[derive(Debug, Parser)]
#[command(
    name = "tracefault",
    version,
    about = "Deterministic trace replay and chaos testing for LLM agents' error envelopes"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run scenario files or folders: every scenario × strategy × run; write reports; check gates.
    Run(RunArgs),
    /// Render one failure under every strategy in every provider format, and run the portability checks.
    Envelopes(EnvelopesArgs),
    /// Convert a captured trace (any supported format) to native JSONL.
    Import(import::ImportArgs),
    /// Show calls, errors, repeats and loops of a trace, as a table or JSON.
    Inspect(import::InspectArgs),
    /// Reproduce a captured trace exactly (as-recorded), then replay it under other strategies.
    Replay(replay::ReplayArgs),
    /// Fit the simulated model's profile from traces.
    Calibrate(calibrate::CalibrateArgs),
    /// Simulate a scenario with a fitted profile and set its predictions beside held-out live runs.
    Predict(predict::PredictArgs),
    /// Rank the strategies over many profiles drawn from the probabilities' plausible ranges.
    Sweep(sweep::SweepArgs),
    /// Combine shard outputs into the reports one unsharded run would write.
    Merge(MergeArgs),
    /// The smallest fault schedule under which a looping run still loops.
    Shrink(ShrinkArgs),
    /// Serve the scenario's mock providers and tools over HTTP (loopback by default).
    Serve(wire::ServeArgs),
    /// Run an agent against the mocks, record its traffic, report metrics and the checklist.
    Exec(wire::ExecArgs),
    /// Sit in front of the real providers: the agent's model requests are forwarded (with its
    /// own keys), the scenario's provider faults injected on the way, the traffic recorded.
    Proxy(wire::ProxyArgs),
    /// Serve the scenario's tools as an MCP server on stdio (streamable HTTP: `serve`, at /mcp).
    Mcp(wire::McpArgs),
    /// Sit in front of your real MCP server (started as `-- CMD ARGS`, over stdio): its tools
    /// listed as they are, the scenario's tool faults injected, every other call forwarded.
    McpProxy(wire::McpProxyArgs),
    /// Check scenario files without running them: every problem listed; exit 0 or 2.
    Validate(validate::ValidateArgs),
    /// Print the JSON Schema of a scenario file (for editors: schema/scenario.schema.json).
    Schema,
    /// Compare two reports folders as `run --baseline` does.
    Diff(DiffArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario files or folders (searched for *.toml and *.json).
    #[arg(default_value = "scenarios/")]
    pub paths: Vec<PathBuf>,
    /// Where reports go (default: reports/). Not used with --run, which prints its one run.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Root seed for every scenario (default: each scenario's `seed`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Runs per scenario and strategy, 1 to 10^8 (default: each scenario's `runs`).
    #[arg(long, value_parser = runs_parser())]
    pub runs: Option<u64>,
    /// Only these strategies (repeatable).
    #[arg(long = "strategy", value_name = "NAME")]
    pub strategies: Vec<String>,
    /// Worker threads (default: the number of cores). Never changes the output.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Run only run number N (0-based) and print it; with --trace-out, write its event log.
    #[arg(long = "run", value_name = "N")]
    pub run: Option<u64>,
    /// With --run: write the run's events as a native trace (JSONL) to FILE.
    #[arg(long, value_name = "FILE", requires = "run")]
    pub trace_out: Option<PathBuf>,
    /// With --run: explain the run — each tool call, its result, how the simulated model read
    /// each result that was not plainly a success (the signal, what it perceived) and every
    /// seeded draw behind what it did, with the profile's probability — and record these
    /// decisions in --trace-out.
    #[arg(long, requires = "run")]
    pub explain: bool,
    /// Run the suite twice (with different --jobs) and fail unless every report is byte-identical.
    #[arg(long)]
    pub check_determinism: bool,
    /// Do not write runs.csv.
    #[arg(long)]
    pub no_runs_csv: bool,
    /// Run only slice K of N (1-based) of the suite's work units; `merge` combines the slices.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<crate::shard::Shard>,
    /// Compare with a previous reports folder (its report.json and runs.csv): writes
    /// comparison.md and comparison.json; a mismatched baseline or a failed change gate fails.
    #[arg(long, value_name = "DIR")]
    pub baseline: Option<PathBuf>,
    /// Fail on any significant regression against --baseline (success, loop rate, wasted
    /// retries per run, calls, breaker trips per run).
    #[arg(long, requires = "baseline")]
    pub fail_on_regression: bool,
    /// Fail the change gates when there is no baseline to compare with (no --baseline, or a
    /// --baseline folder with no report yet); without it they say "no baseline", are not
    /// checked, and the other gates decide the exit code.
    #[arg(long)]
    pub require_baseline: bool,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The baseline reports folder.
    pub old: PathBuf,
    /// The reports folder to compare with it.
    pub new: PathBuf,
    /// Exit 1 on any significant regression (a mismatched baseline always does).
    #[arg(long)]
    pub fail_on_regression: bool,
}

#[derive(Debug, Args)]
pub struct ShrinkArgs {
    pub scenario: PathBuf,
    #[arg(long = "strategy", value_name = "NAME")]
    pub strategy: String,
    #[arg(long = "run", value_name = "N")]
    pub run: u64,
    /// The root seed (default: the scenario's).
    #[arg(long)]
    pub seed: Option<u64>,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The `--out` folders of shards 1..N.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Where the merged reports go (default: `reports`, or `sweep` for sweep shards).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct EnvelopesArgs {
    /// The failure to render: an HTTP status (400, 401, 429, 503, …) or timeout, reset,
    /// truncated_json, code_fenced_json, ambiguous, no_progress.
    #[arg(long, default_value = "503")]
    pub fault: String,
}

/// Runs a parsed command; returns the exit code.
pub fn execute(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Run(args) => run::execute(args),
        Command::Envelopes(args) => envelopes::execute(args),
        Command::Import(args) => import::import(args),
        Command::Inspect(args) => import::inspect(args),
        Command::Replay(args) => replay::execute(args),
        Command::Calibrate(args) => calibrate::execute(args),
        Command::Predict(args) => predict::execute(args),
        Command::Sweep(args) => sweep::execute(args),
        Command::Merge(args) => run::merge(args),
        Command::Shrink(args) => run::shrink(args),
        Command::Serve(args) => wire::serve(args),
        Command::Exec(args) => wire::exec(args),
        Command::Proxy(args) => wire::proxy(args),
        Command::Mcp(args) => wire::mcp_stdio(args),
        Command::McpProxy(args) => wire::mcp_proxy(args),
        Command::Validate(args) => validate::validate(args),
        Command::Schema => validate::schema(),
        Command::Diff(args) => run::diff(args),
    }
}

/// `--runs`: the same 1 to 10^8 bound as the scenario key.
pub fn runs_parser() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..=crate::scenario::validate::MAX_RUNS)
}
