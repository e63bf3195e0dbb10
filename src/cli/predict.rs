//! `tracefault predict`: simulate a scenario with a fitted profile and set the predictions
//! beside the figures of held-out live runs (see [`crate::predict`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::engine::events::TerminatedBy;
use crate::error::{Error, Result, exit};
use crate::escape::{md_code, md_text, printable};
use crate::predict::{FIGURES, MEANINGS, Prediction, RunEnd, figures, inside, outside, predict, verdict};

#[derive(Debug, Args)]
pub struct PredictArgs {
    /// The scenario the live runs ran.
    pub scenario: PathBuf,
    /// The fitted profile (`tracefault calibrate --out`): the scenario is simulated with it.
    #[arg(long, value_name = "PROFILE.toml")]
    pub profile: PathBuf,
    /// A folder `exec --live --out` wrote, of runs the profile was not fitted on (its runs.csv
    /// and exec.json are read); repeat for several.
    #[arg(long = "live", value_name = "DIR", required = true)]
    pub live: Vec<PathBuf>,
    /// The scenario's strategy that stands for the agent's own handling of failures (default:
    /// the one the live runs were rewritten under, `exec --live --rewrite`, else the scenario's
    /// baseline).
    #[arg(long)]
    pub strategy: Option<String>,
    /// Profiles drawn from the fitted ranges, each simulating as many runs as were observed.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(160..=100_000))]
    pub draws: u64,
    /// Seed of the draws (default: the scenario's seed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write predict.csv and predict.md to this folder, as one set.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Most agents a live run may have (`exec --agents`).
const MAX_AGENTS: usize = 1000;

/// Simulated agents' runs at most (draws × live runs × agents): past it the command would seem
/// to hang.
const MAX_SIMULATED_RUNS: u64 = 50_000_000;

pub fn execute(args: PredictArgs) -> Result<i32> {
    let mut sc = crate::scenario::load::load_file(&args.scenario)?;
    sc.profile = crate::scenario::files::load_profile(&args.profile)?;
    let (mut runs, mut rewrite, mut left_out) = (Vec::new(), None::<Option<String>>, 0);
    let mut agents = None;
    for dir in &args.live {
        let live = live_runs(dir, &sc.name)?;
        if rewrite.as_ref().is_some_and(|r| *r != live.rewrite) {
            return Err(Error::Usage(format!(
                "--live {}: its runs were rewritten under {:?}, the other folders' under {:?}: predict one setup at a time",
                dir.display(),
                live.rewrite,
                rewrite.flatten()
            )));
        }
        if let (Some(before), Some(here)) = (agents, live.agents)
            && before != here
        {
            return Err(Error::Usage(format!(
                "--live {}: its runs are of {}, the other folders' of {}: predict one fleet size at a time",
                dir.display(),
                agents_text(here),
                agents_text(before)
            )));
        }
        agents = agents.or(live.agents);
        rewrite = Some(live.rewrite);
        left_out += live.left_out;
        runs.extend(live.runs);
    }
    let folders: Vec<String> = args.live.iter().map(|d| d.display().to_string()).collect();
    if runs.is_empty() {
        return Err(Error::Usage(format!(
            "--live: {} hold no run the model ended ({left_out} ended cut off, timed out or never called)",
            folders.join(", ")
        )));
    }
    if left_out > 0 {
        eprintln!(
            "predict: {left_out} live runs left out: they ended cut off, timed out or never called (the spending \
             limit, an unreachable provider, the agent's own end), not by the model"
        );
    }
    let named = args.strategy.clone().or(rewrite.flatten());
    // A preset the scenario does not list (as `--rewrite` takes) is simulated as well.
    if let Some(name) = &named
        && !sc.strategies.iter().any(|s| s.name == *name)
        && let Some(preset) = sc.strategy_or_preset(name)
    {
        sc.strategies.push(preset);
    }
    let strategy = match &named {
        None => sc.baseline,
        Some(name) => sc.strategies.iter().position(|s| s.name == *name).ok_or_else(|| {
            let names: Vec<String> = sc.strategies.iter().map(|s| format!("{:?}", s.name)).collect();
            let whence = if args.strategy.is_some() { "--strategy" } else { "the live runs' --rewrite strategy" };
            Error::Usage(format!(
                "{whence} {:?}: not a strategy of {}; it has {} (name the agent's with --strategy)",
                printable(name),
                args.scenario.display(),
                names.join(", ")
            ))
        })?,
    };
    let agents = agents.unwrap_or(1);
    if args.draws.saturating_mul(runs.len() as u64).saturating_mul(u64::from(agents)) > MAX_SIMULATED_RUNS {
        return Err(Error::Usage(format!(
            "--draws {} × {} live runs × {} is past {MAX_SIMULATED_RUNS} simulated agents' runs: give fewer --draws",
            args.draws,
            runs.len(),
            agents_text(agents)
        )));
    }
    if agents > 1 {
        fleet_as_exec_ran_it(&sc, strategy, &args.scenario)?;
    }
    // The simulated runs are the live ones': `exec --agents N` starts N copies at once (the
    // scenario's own `[fleet]` is `run`'s, not exec's).
    let live_fleet = crate::engine::fleet::Fleet { agents, start: crate::engine::fleet::Start::Together };
    if sc.fleet != live_fleet {
        use crate::engine::fleet::Start;
        let start = match sc.fleet.start {
            Start::Together => "at once".to_owned(),
            Start::Every { ms } => format!("every {ms} ms"),
            Start::Poisson { per_s } => format!("at {per_s} a second (Poisson)"),
        };
        eprintln!(
            "predict: simulating {} a run started at once, as the live runs had, not the scenario's [fleet] ({} \
             started {start})",
            agents_text(agents),
            agents_text(sc.fleet.agents),
        );
    }
    sc.fleet = live_fleet;
    let observed = figures(&runs);
    let seed = args.seed.unwrap_or(sc.seed);
    let p = predict(&sc, strategy, runs.len() as u64, args.draws as usize, seed);
    let strategy_name = &sc.strategies[strategy].name;
    let md = markdown(&sc.name, strategy_name, &args.profile, agents, &p, &observed);
    print!("{md}");
    if let Some(out) = &args.out {
        let set = crate::output::FolderWriter::begin(out)?;
        set.write("predict.csv", csv(&sc.name, strategy_name, agents, &p, &observed).as_bytes())?;
        set.write("predict.md", md.as_bytes())?;
        set.commit()?;
        println!("wrote predict.csv and predict.md to {}", out.display());
    }
    Ok(if outside(&p, &observed).is_empty() { exit::OK } else { exit::FAILED })
}

/// Refuses a fleet whose simulated runs would share what exec's live agents do not: a breaker
/// or a retry budget the strategy shares across the fleet (the live agents are separate
/// processes, each with its own). Fault rules with `scope = "fleet"` count the fleet's attempts
/// in exec's mocks as in the simulator.
fn fleet_as_exec_ran_it(sc: &crate::engine::Scenario, strategy: usize, file: &Path) -> Result<()> {
    let strat = &sc.strategies[strategy];
    let retry = strat.retry.as_ref().unwrap_or(&sc.policy.retry);
    let shared = if strat.breaker && (strat.fleet_breaker || sc.policy.breaker.fleet) {
        Some(format!("strategy {:?} shares one breaker across the fleet", printable(&strat.name)))
    } else if retry.budget_ratio.is_some() {
        Some(format!("strategy {:?} shares one retry budget across the fleet (budget_ratio)", printable(&strat.name)))
    } else {
        None
    };
    match shared {
        Some(what) => Err(Error::Usage(format!(
            "{}: {what}, which the live agents, each its own process, did not share: predict cannot set this \
             fleet's live runs beside the simulator (name a strategy with --strategy that shares nothing, or a \
             scenario whose [policy] shares nothing)",
            file.display()
        ))),
        None => Ok(()),
    }
}

/// What an `exec --live` folder holds for predict.
struct LiveRuns {
    /// The runs the model ended, from its runs.csv.
    runs: Vec<RunEnd>,
    /// Runs left out: cut off, timed out or never called (the model did not end them).
    left_out: usize,
    /// The strategy its tool results were rewritten under (`--rewrite`), if any.
    rewrite: Option<String>,
    /// The agents of each run (`exec --agents`), when it holds a run.
    agents: Option<u32>,
}

/// The runs an `exec --live` folder holds: its runs.csv's rows of scenario `name`, less those
/// exec.json says the model did not end (in a fleet's run, any of its agents'). Every run holds
/// as many agents.
fn live_runs(dir: &Path, name: &str) -> Result<LiveRuns> {
    let bad = |file: &Path, message: String| Error::Parse { file: file.display().to_string(), message };
    let exec_json = dir.join("exec.json");
    if !exec_json.is_file() {
        return Err(Error::Usage(format!(
            "--live {}: no exec.json there; predict reads the folders `exec --live --out DIR` writes",
            dir.display()
        )));
    }
    let text = crate::input::read_text(&exec_json, crate::input::Input::Config)?;
    let report: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(&exec_json, e.to_string()))?;
    let answered_by = report["model"]["answered_by"].as_str().unwrap_or("nobody said");
    if answered_by != "the providers (live)" {
        return Err(bad(
            &exec_json,
            format!(
                "/model/answered_by: expected \"the providers (live)\" (runs of `exec --live`), got {:?}: predict \
                 compares a real model's runs with the simulator",
                printable(answered_by)
            ),
        ));
    }
    let described = report["runs"].as_array().cloned().unwrap_or_default();
    // `proxy` scores the traffic of however many agents passed as one run, and knows neither
    // when each started nor the order they ended in.
    let proxied = report["agent"].as_array().is_some_and(|a| a.len() == 1 && a[0] == "tracefault proxy");
    // Each run's agents as exec.json describes them: a fleet's run lists them under `agents`.
    let mut each = Vec::with_capacity(described.len());
    for (i, r) in described.iter().enumerate() {
        let agents: Vec<&serde_json::Value> = match r.get("agents") {
            None => vec![r],
            Some(serde_json::Value::Array(a)) if (1..=MAX_AGENTS).contains(&a.len()) => a.iter().collect(),
            Some(_) => {
                return Err(bad(
                    &exec_json,
                    format!("/runs/{i}/agents: expected the run's agents, a list of 1 to {MAX_AGENTS} (exec --agents)"),
                ));
            }
        };
        if proxied && agents.len() > 1 {
            return Err(bad(
                &exec_json,
                format!(
                    "/runs/{i}/agents: the traffic of {} through `proxy`, which knows neither when each started nor \
                     the order they ended in: predict sets a fleet's runs of `exec --live --agents N` beside the \
                     simulator",
                    agents_text(agents.len() as u32)
                ),
            ));
        }
        if let Some(first) = each.first().map(Vec::len)
            && first != agents.len()
        {
            return Err(bad(
                &exec_json,
                format!(
                    "/runs/{i}: {}, where run 0 has {first}: predict simulates one fleet size",
                    agents_text(agents.len() as u32)
                ),
            ));
        }
        each.push(agents);
    }
    let agents = each.first().map(|a| a.len() as u32);
    let rewrite = report["model"]["rewrite"].as_str().map(str::to_owned);
    let path = dir.join("runs.csv");
    let text = crate::input::read_text(&path, crate::input::Input::Trace)?;
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| bad(&path, e.to_string()))?.clone();
    let column = |key: &str| {
        headers.iter().position(|h| h == key).ok_or_else(|| bad(&path, format!("line 1: no `{key}` column")))
    };
    let (scenario, ended, calls) = (column("scenario")?, column("terminated_by")?, column("calls")?);
    let (mut runs, mut left_out) = (Vec::new(), 0);
    for (i, row) in reader.records().enumerate() {
        let line = i + 2;
        let row = row.map_err(|e| bad(&path, format!("line {line}: {e}")))?;
        let cell = |k: usize| row.get(k).unwrap_or_default();
        if cell(scenario) != crate::escape::csv_text(name) {
            return Err(bad(
                &path,
                format!("line {line}: a run of scenario {:?}, not of {:?}", printable(cell(scenario)), printable(name)),
            ));
        }
        let not_the_models =
            |a: &&serde_json::Value| matches!(a["ended"].as_str(), Some("cut_off" | "timeout" | "never_called"));
        if each.get(i).is_some_and(|agents| agents.iter().any(not_the_models)) {
            left_out += 1;
            continue;
        }
        let ended = TerminatedBy::ALL.into_iter().find(|t| t.name() == cell(ended)).ok_or_else(|| {
            bad(
                &path,
                format!("line {line}: terminated_by: expected one of the endings, got {:?}", printable(cell(ended))),
            )
        })?;
        let calls = cell(calls).parse().map_err(|_| {
            bad(&path, format!("line {line}: calls: expected a whole number, got {:?}", printable(cell(calls))))
        })?;
        runs.push(RunEnd { ended, calls });
    }
    let rows = runs.len() + left_out;
    if rows != described.len() {
        return Err(bad(
            &path,
            format!(
                "{rows} runs, where {} describes {}: the two files are not of one exec",
                exec_json.display(),
                described.len()
            ),
        ));
    }
    Ok(LiveRuns { runs, left_out, rewrite, agents })
}

/// "1 agent", "2 agents".
fn agents_text(n: u32) -> String {
    format!("{n} agent{}", if n == 1 { "" } else { "s" })
}

fn fixed(v: f64) -> String {
    crate::metrics::summary::fixed(v, 4)
}

/// predict.md: the table and the verdict.
fn markdown(
    scenario: &str,
    strategy: &str,
    profile: &Path,
    agents: u32,
    p: &Prediction,
    observed: &[f64; 4],
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Prediction against live runs: {}\n", md_text(scenario));
    let _ = writeln!(
        s,
        "Simulated as strategy {} with the profile {}: {} profiles drawn from its ranges, {} runs each (as many as \
         were observed live). Each interval is the central 98.75% of such samples' figures, so that the four are \
         checked together at 95%.\n",
        md_code(strategy),
        md_code(&profile.display().to_string()),
        p.draws,
        p.runs
    );
    if agents > 1 {
        let _ = writeln!(
            s,
            "Each run is a fleet of {agents} agents started at once, as `exec --agents {agents}` ran them live; a run's \
             ending is that of the first of its agents to end without an answer (an answer when every agent \
             answered), its calls all its agents' calls.\n"
        );
    }
    let _ = writeln!(s, "| figure | observed | predicted | interval | inside |");
    let _ = writeln!(s, "|---|---|---|---|---|");
    for k in 0..FIGURES.len() {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | [{}, {}] | {} |",
            FIGURES[k],
            fixed(observed[k]),
            fixed(p.point[k]),
            fixed(p.interval[k][0]),
            fixed(p.interval[k][1]),
            if inside(observed[k], p.interval[k]) { "yes" } else { "**no**" }
        );
    }
    let _ = writeln!(s, "\n{}\n", verdict(p, observed));
    let _ = writeln!(s, "Definitions (as in summary.csv):");
    for (f, m) in FIGURES.iter().zip(MEANINGS) {
        let _ = writeln!(s, "- `{f}`: {m}");
    }
    s
}

/// predict.csv: one row per figure.
fn csv(scenario: &str, strategy: &str, agents: u32, p: &Prediction, observed: &[f64; 4]) -> String {
    let mut s = String::from("scenario,strategy,figure,live_runs,observed,predicted,lo,hi,inside,agents\n");
    let names = String::from_utf8_lossy(&crate::escape::csv_names(&[scenario, strategy])).into_owned();
    for k in 0..FIGURES.len() {
        let _ = writeln!(
            s,
            "{names}{},{},{},{},{},{},{},{agents}",
            FIGURES[k],
            p.runs,
            fixed(observed[k]),
            fixed(p.point[k]),
            fixed(p.interval[k][0]),
            fixed(p.interval[k][1]),
            inside(observed[k], p.interval[k])
        );
    }
    s
}
