//! Comparing results with a baseline: two report folders (`report.json`, and `runs.csv` where
//! written), scenario × strategy × metric. Runs are keyed by seed and run number, so the same
//! run met the same faults on both sides: where both folders hold `runs.csv` the change is the
//! mean of per-run differences with a 95% interval; elsewhere rates are compared with Newcombe's
//! interval and means with Welch's. A baseline that does not match (another contract version,
//! another seed, a scenario or strategy it lacks) is said so, and never counts as a pass.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::engine::events::TerminatedBy;
use crate::error::{Error, Result};
use crate::escape::{csv_text_read, md_text};
use crate::metrics::stats::{newcombe, paired_mean_ci, welch};
use crate::metrics::summary::SUMMARY_COLUMNS;
use crate::scenario::Gate;
use crate::suite::ScenarioResult;

/// Which way is better for a compared metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Better {
    Higher,
    Lower,
}

/// The version of `report.json`'s layout (written by the report, read back here): a baseline
/// with another version is not compared.
pub const SCHEMA_VERSION: u64 = 1;

/// The metrics compared (summary column names), and which way is better.
const COMPARED: [(&str, Better); 5] = [
    ("success_rate", Better::Higher),
    ("loop_rate", Better::Lower),
    ("wasted_retries_per_run", Better::Lower),
    ("calls_mean", Better::Lower),
    ("breaker_trips_per_run", Better::Lower),
];

/// One strategy of one scenario, as a report folder holds it.
#[derive(Clone, Debug, Default)]
struct Side {
    runs: u64,
    summary: BTreeMap<String, f64>,
    /// Runs that answered, and that looped (exact counts).
    answered: u64,
    looped: u64,
    /// Per-run standard deviations of calls, wasted retries and breaker trips (absent in
    /// reports older than `schema_version` 1).
    sd: Option<[f64; 3]>,
}

/// A report folder: its contract version, each scenario's seed and strategies, and where its
/// `runs.csv` is.
#[derive(Debug, Default)]
pub struct Folder {
    dir: PathBuf,
    version: Option<u64>,
    scenarios: BTreeMap<String, (u64, BTreeMap<String, Side>)>,
    runs_csv: Option<PathBuf>,
}

/// Reads a report folder: bad input (exit 2) when it is not a tracefault reports folder or its
/// `report.json` is of another layout version than this tracefault writes.
pub fn read_folder(dir: &Path) -> Result<Folder> {
    let path = dir.join("report.json");
    let not_report = |why: String| Error::Parse {
        file: path.display().to_string(),
        message: format!("not a tracefault reports folder: {why}"),
    };
    if !path.exists() {
        return Err(not_report("it has no report.json".into()));
    }
    let text = crate::input::read_text(&path, crate::input::Input::Config)?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| not_report(format!("report.json is not JSON ({e})")))?;
    if doc.get("tracefault_version").is_none() || !doc["scenarios"].is_array() {
        return Err(not_report("report.json has no tracefault_version and scenarios".into()));
    }
    match doc["schema_version"].as_u64() {
        Some(SCHEMA_VERSION) => {}
        v => {
            let v = v.map_or("none (an older tracefault)".to_owned(), |v| v.to_string());
            return Err(Error::Parse {
                file: path.display().to_string(),
                message: format!(
                    "report schema_version {v}, but this tracefault reads {SCHEMA_VERSION}: an incompatible baseline; \
                     regenerate it with this version"
                ),
            });
        }
    }
    let mut scenarios = BTreeMap::new();
    for sc in doc["scenarios"].as_array().into_iter().flatten() {
        let name = sc["name"].as_str().unwrap_or_default().to_owned();
        let mut strategies = BTreeMap::new();
        for st in sc["strategies"].as_array().into_iter().flatten() {
            let summary: BTreeMap<String, f64> = st["summary"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_f64()?)))
                .collect();
            let count = |k: &str| st["terminated_by"][k].as_u64().unwrap_or(0);
            let sd = st
                .get("sd_per_run")
                .map(|s| ["calls", "wasted_retries", "breaker_trips"].map(|k| s[k].as_f64().unwrap_or(0.0)));
            let side = Side {
                runs: summary.get("runs").copied().unwrap_or(0.0) as u64,
                answered: count("answer"),
                looped: count("step_cap") + count("loop_guard"),
                summary,
                sd,
            };
            strategies.insert(st["strategy"].as_str().unwrap_or_default().to_owned(), side);
        }
        scenarios.insert(name, (sc["seed"].as_u64().unwrap_or(0), strategies));
    }
    let runs_csv = Some(dir.join("runs.csv")).filter(|p| p.exists());
    Ok(Folder { dir: dir.to_owned(), version: doc["schema_version"].as_u64(), scenarios, runs_csv })
}

/// The new side of a comparison, from results in memory: the values as `report.json` writes
/// them (fixed precision), and the `runs.csv` about to be published.
pub fn folder_of(results: &[ScenarioResult], runs_csv: Option<PathBuf>) -> Folder {
    let mut scenarios = BTreeMap::new();
    for r in results {
        let mut strategies = BTreeMap::new();
        for (row, agg) in r.rows.iter().zip(&r.aggregates) {
            let summary = SUMMARY_COLUMNS[2..]
                .iter()
                .enumerate()
                .filter_map(|(c, name)| Some(((*name).to_owned(), row.formatted(c).parse::<f64>().ok()?)))
                .collect();
            let spreads = agg.spreads().map(|v| crate::metrics::summary::fixed(v, 4).parse().unwrap_or(0.0));
            let side = Side {
                runs: agg.runs,
                summary,
                answered: agg.count(TerminatedBy::Answer),
                looped: agg.loops(),
                sd: Some(spreads),
            };
            strategies.insert(row.strategy.clone(), side);
        }
        scenarios.insert(r.scenario.name.clone(), (r.seed, strategies));
    }
    Folder { dir: PathBuf::from("(this run)"), version: Some(SCHEMA_VERSION), scenarios, runs_csv }
}

/// How a change was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Mean of per-run differences (the same runs on both sides).
    Paired,
    /// Newcombe (rates) or Welch (means): the runs could not be matched.
    Unpaired,
    /// No spread recorded on one side: the change is shown without an interval.
    NoInterval,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Paired => "paired",
            Method::Unpaired => "unpaired",
            Method::NoInterval => "no interval",
        }
    }
}

/// One metric's change for one strategy of one scenario: new − old, with its 95% interval.
#[derive(Clone, Debug)]
pub struct Change {
    pub scenario: String,
    pub strategy: String,
    pub metric: &'static str,
    pub old: f64,
    pub new: f64,
    pub delta: f64,
    pub lo: f64,
    pub hi: f64,
    pub method: Method,
    /// Worse, and the whole interval says so.
    pub regression: bool,
}

/// A gate on the change against the baseline.
#[derive(Clone, Debug)]
pub struct ChangeGate {
    pub scenario: String,
    pub strategy: String,
    pub metric: String,
    /// The change (new − old), or why there is none.
    pub delta: std::result::Result<f64, String>,
    pub max_increase: Option<f64>,
    pub max_increase_pct: Option<f64>,
    pub passed: bool,
}

/// Everything a comparison found.
#[derive(Debug, Default)]
pub struct Comparison {
    pub baseline: PathBuf,
    pub changes: Vec<Change>,
    /// Why some or all of it could not be compared (each one fails the comparison).
    pub mismatches: Vec<String>,
    pub gates: Vec<ChangeGate>,
}

impl Comparison {
    pub fn regressions(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| c.regression)
    }

    /// Whether it passes: the baseline matched and every change gate held; with
    /// `fail_on_regression`, no significant regression either.
    pub fn passed(&self, fail_on_regression: bool) -> bool {
        self.mismatches.is_empty()
            && self.gates.iter().all(|g| g.passed)
            && !(fail_on_regression && self.regressions().next().is_some())
    }
}

/// Per-run values of the compared metrics in a `runs.csv`, by (scenario, strategy, run):
/// answered, looped, wasted retries, calls, breaker trips.
type PerRun = HashMap<(String, String, u64), [i64; 5]>;

fn read_runs(path: &Path) -> Result<PerRun> {
    // Read as a stream, so its size is bounded only by the file's; a device or a pipe (a
    // runs.csv that is a link to /dev/zero) never ends and is refused.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Err(Error::Parse { file: path.display().to_string(), message: "not a regular file".into() });
    }
    let mut r = csv::Reader::from_path(path)
        .map_err(|e| Error::Parse { file: path.display().to_string(), message: e.to_string() })?;
    let head =
        r.headers().map_err(|e| Error::Parse { file: path.display().to_string(), message: e.to_string() })?.clone();
    let col = |name: &str| head.iter().position(|h| h == name);
    let (Some(sc), Some(st), Some(run), Some(end), Some(wasted), Some(calls), Some(trips)) = (
        col("scenario"),
        col("strategy"),
        col("run"),
        col("terminated_by"),
        col("wasted_retries"),
        col("calls"),
        col("breaker_trips"),
    ) else {
        return Err(Error::Parse { file: path.display().to_string(), message: "not a tracefault runs.csv".into() });
    };
    let mut out = PerRun::new();
    for rec in r.records() {
        let rec = rec.map_err(|e| Error::Parse { file: path.display().to_string(), message: e.to_string() })?;
        let num = |i: usize| rec.get(i).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
        let ended = rec.get(end).unwrap_or_default();
        let values = [
            i64::from(ended == "answer"),
            i64::from(ended == "step_cap" || ended == "loop_guard"),
            num(wasted),
            num(calls),
            num(trips),
        ];
        let name = |i: usize| csv_text_read(rec.get(i).unwrap_or_default()).to_owned();
        let key = (name(sc), name(st), num(run) as u64);
        out.insert(key, values);
    }
    Ok(out)
}

/// Sums of paired differences (Σd, Σd², n) per (scenario, strategy) and metric.
type Paired = BTreeMap<(String, String), [(i128, i128, u64); 5]>;

fn pair(old: &PerRun, new: &PerRun) -> Paired {
    let mut out = Paired::new();
    for (key, n) in new {
        let Some(o) = old.get(key) else { continue };
        let sums = out.entry((key.0.clone(), key.1.clone())).or_insert([(0, 0, 0); 5]);
        for (s, (a, b)) in sums.iter_mut().zip(o.iter().zip(n)) {
            let d = i128::from(*b - *a);
            *s = (s.0 + d, s.1 + d * d, s.2 + 1);
        }
    }
    out
}

/// Compares `new` with the baseline `old`; `gates` are each scenario's gates (those with a
/// bound on the change are checked here).
pub fn compare(old: &Folder, new: &Folder, gates: &BTreeMap<String, Vec<Gate>>) -> Result<Comparison> {
    let mut cmp = Comparison { baseline: old.dir.clone(), ..Comparison::default() };
    if old.version != new.version {
        let v = |v: Option<u64>| v.map_or("none (an older tracefault)".to_owned(), |v| v.to_string());
        cmp.mismatches.push(format!(
            "the baseline {} has report schema_version {}, this run {}: not compared",
            old.dir.display(),
            v(old.version),
            v(new.version.or(Some(SCHEMA_VERSION)))
        ));
    }
    let paired = match (&old.runs_csv, &new.runs_csv, cmp.mismatches.is_empty()) {
        (Some(a), Some(b), true) => pair(&read_runs(a)?, &read_runs(b)?),
        _ => Paired::new(),
    };
    for (name, (seed, strategies)) in &new.scenarios {
        let check_gates = |cmp: &mut Comparison, base: Option<&BTreeMap<String, Side>>, why: &str| {
            for g in gates.get(name).into_iter().flatten() {
                if g.max_increase.is_none() && g.max_increase_pct.is_none() {
                    continue;
                }
                for (strategy, side) in strategies.iter().filter(|(s, _)| g.strategy == "*" || g.strategy == **s) {
                    let new_v = side.summary.get(&g.metric).copied().unwrap_or(f64::NAN);
                    let old_v = base.and_then(|b| b.get(strategy)).and_then(|s| s.summary.get(&g.metric)).copied();
                    cmp.gates.push(change_gate(
                        name,
                        strategy,
                        g,
                        old_v.map(|o| (o, new_v)).ok_or_else(|| why.to_owned()),
                    ));
                }
            }
        };
        if !cmp.mismatches.is_empty() && old.version != new.version {
            check_gates(&mut cmp, None, "the baseline was not compared");
            continue;
        }
        let Some((old_seed, old_strategies)) = old.scenarios.get(name) else {
            cmp.mismatches.push(format!("{name}: not in the baseline {}", old.dir.display()));
            check_gates(&mut cmp, None, "not in the baseline");
            continue;
        };
        if old_seed != seed {
            cmp.mismatches
                .push(format!("{name}: the baseline ran seed {old_seed}, this run seed {seed}: not compared"));
            check_gates(&mut cmp, None, "the baseline ran another seed");
            continue;
        }
        for (strategy, side) in strategies {
            let Some(base) = old_strategies.get(strategy) else {
                cmp.mismatches.push(format!("{name}: strategy {strategy} is not in the baseline"));
                continue;
            };
            let sums = paired.get(&(name.clone(), strategy.clone()));
            for (i, (metric, better)) in COMPARED.iter().enumerate() {
                let (old_v, new_v) = (base.summary.get(*metric).copied(), side.summary.get(*metric).copied());
                let (Some(old_v), Some(new_v)) = (old_v, new_v) else { continue };
                let all_paired = sums.is_some_and(|s| s[i].2 == side.runs && s[i].2 == base.runs);
                let (delta, lo, hi, method) = match (all_paired, i) {
                    (true, _) => {
                        let (sum, sq, n) = sums.map(|s| s[i]).unwrap_or_default();
                        let (d, lo, hi) = paired_mean_ci(sum, sq, n);
                        (d, lo, hi, Method::Paired)
                    }
                    (false, 0 | 1) => {
                        let count = |s: &Side| if i == 0 { s.answered } else { s.looped };
                        let (d, lo, hi) = newcombe(count(base), base.runs, count(side), side.runs);
                        (d, lo, hi, Method::Unpaired)
                    }
                    (false, _) => {
                        // Spreads: wasted retries, calls, breaker trips (sd_per_run order).
                        let k = [0, 0, 1, 0, 2][i];
                        match (base.sd, side.sd) {
                            (Some(a), Some(b)) => {
                                let (d, lo, hi) = welch(old_v, a[k], base.runs, new_v, b[k], side.runs);
                                (d, lo, hi, Method::Unpaired)
                            }
                            _ => (new_v - old_v, new_v - old_v, new_v - old_v, Method::NoInterval),
                        }
                    }
                };
                let regression = method != Method::NoInterval
                    && match better {
                        Better::Higher => hi < 0.0,
                        Better::Lower => lo > 0.0,
                    };
                cmp.changes.push(Change {
                    scenario: name.clone(),
                    strategy: strategy.clone(),
                    metric,
                    old: old_v,
                    new: new_v,
                    delta,
                    lo,
                    hi,
                    method,
                    regression,
                });
            }
        }
        check_gates(&mut cmp, Some(old_strategies), "the baseline lacks this strategy");
    }
    if old.version == new.version {
        for name in old.scenarios.keys().filter(|n| !new.scenarios.contains_key(*n)) {
            cmp.mismatches.push(format!("{name}: in the baseline {} but not in this run", old.dir.display()));
        }
    }
    Ok(cmp)
}

fn change_gate(
    scenario: &str,
    strategy: &str,
    g: &Gate,
    values: std::result::Result<(f64, f64), String>,
) -> ChangeGate {
    let delta = values.map(|(old, new)| (new - old, old));
    let passed = match &delta {
        Err(_) => false,
        Ok((d, old)) => {
            g.max_increase.is_none_or(|m| *d <= m)
                && g.max_increase_pct.is_none_or(|p| if *old == 0.0 { *d <= 0.0 } else { d / old.abs() * 100.0 <= p })
        }
    };
    ChangeGate {
        scenario: scenario.to_owned(),
        strategy: strategy.to_owned(),
        metric: g.metric.clone(),
        delta: delta.map(|(d, _)| d),
        max_increase: g.max_increase,
        max_increase_pct: g.max_increase_pct,
        passed,
    }
}

/// Change gates when there is no baseline (none given, or a first run whose baseline folder
/// holds no report yet): each says `why` and is not checked — it holds, unless `required`
/// (`--require-baseline`), when it fails.
pub fn gates_without_baseline(
    gates: &BTreeMap<String, Vec<Gate>>,
    strategies: &BTreeMap<String, Vec<String>>,
    why: &str,
    required: bool,
) -> Vec<ChangeGate> {
    let mut out = Vec::new();
    for (name, gs) in gates {
        for g in gs.iter().filter(|g| g.max_increase.is_some() || g.max_increase_pct.is_some()) {
            for s in strategies.get(name).into_iter().flatten().filter(|s| g.strategy == "*" || g.strategy == **s) {
                out.push(ChangeGate { passed: !required, ..change_gate(name, s, g, Err(why.to_owned())) });
            }
        }
    }
    out
}

/// The comparison as Markdown: verdict, mismatches, regressions, change gates, and a count of
/// what held.
pub fn markdown(cmp: &Comparison, fail_on_regression: bool) -> String {
    let mut md = format!(
        "# Against the baseline {}\n\n**{}**: {} change(s) compared, {} significant regression(s), {} mismatch(es), {} of {} change gate(s) held.\n",
        md_text(&cmp.baseline.display().to_string()),
        if cmp.passed(fail_on_regression) { "PASS" } else { "FAIL" },
        cmp.changes.len(),
        cmp.regressions().count(),
        cmp.mismatches.len(),
        cmp.gates.iter().filter(|g| g.passed).count(),
        cmp.gates.len()
    );
    if !cmp.mismatches.is_empty() {
        md.push_str("\n## Not compared\n\n");
        for m in &cmp.mismatches {
            md.push_str(&format!("- {}\n", md_text(m)));
        }
    }
    let regressions: Vec<&Change> = cmp.regressions().collect();
    if !regressions.is_empty() {
        md.push_str("\n## Regressions\n\n| scenario | strategy | metric | old | new | change | 95% interval | method |\n|---|---|---|---|---|---|---|---|\n");
        for c in regressions {
            md.push_str(&format!(
                "| {} | {} | {} | {:.4} | {:.4} | {:+.4} | [{:+.4}, {:+.4}] | {} |\n",
                md_text(&c.scenario),
                md_text(&c.strategy),
                c.metric,
                c.old,
                c.new,
                c.delta,
                c.lo,
                c.hi,
                c.method.name()
            ));
        }
    }
    if !cmp.gates.is_empty() {
        md.push_str("\n## Change gates\n\n| scenario | strategy | metric | change | bound | result |\n|---|---|---|---|---|---|\n");
        for g in &cmp.gates {
            let bound = [g.max_increase.map(|m| format!("≤ {m:+}")), g.max_increase_pct.map(|p| format!("≤ {p:+}%"))]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(", ");
            let change = match &g.delta {
                Ok(d) => format!("{d:+.4}"),
                Err(why) => why.clone(),
            };
            md.push_str(&format!(
                "| {} | {} | {} | {change} | {bound} | {} |\n",
                md_text(&g.scenario),
                md_text(&g.strategy),
                g.metric,
                match (g.passed, &g.delta) {
                    (true, Err(_)) => "not checked",
                    (true, Ok(_)) => "pass",
                    (false, _) => "**FAIL**",
                }
            ));
        }
    }
    md
}

/// The comparison as JSON (every change, with its interval and method).
pub fn json(cmp: &Comparison, fail_on_regression: bool) -> Value {
    let changes: Vec<Value> = cmp
        .changes
        .iter()
        .map(|c| {
            serde_json::json!({"scenario": c.scenario, "strategy": c.strategy, "metric": c.metric, "old": c.old,
                "new": c.new, "change": c.delta, "lo": c.lo, "hi": c.hi, "method": c.method.name(),
                "regression": c.regression})
        })
        .collect();
    let gates: Vec<Value> = cmp
        .gates
        .iter()
        .map(|g| {
            serde_json::json!({"scenario": g.scenario, "strategy": g.strategy, "metric": g.metric,
                "change": g.delta.as_ref().ok(), "why_none": g.delta.as_ref().err(),
                "max_increase": g.max_increase, "max_increase_pct": g.max_increase_pct, "passed": g.passed})
        })
        .collect();
    serde_json::json!({"schema_version": SCHEMA_VERSION, "baseline": cmp.baseline.display().to_string(),
        "passed": cmp.passed(fail_on_regression), "mismatches": cmp.mismatches, "changes": changes,
        "change_gates": gates})
}
