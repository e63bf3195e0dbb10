//! `tracefault sweep`: how far a comparison of strategies holds when the simulated model's
//! probabilities move over their plausible ranges. A seeded Latin hypercube draws N profiles;
//! each scenario runs under every strategy for each profile with its own seed (the same faults
//! and model draws for every profile: common random numbers). With `--sensitivity sobol` the
//! design grows to Saltelli's N·(d + 2) profiles, from which [`analysis`] takes Sobol indices.
//! A sweep shards like `run`: shard K of N evaluates every N-th profile, and [`merge`] puts
//! the shards together into the same sweep.

pub mod analysis;
mod evaluate;
pub mod report;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::profile::{Figure, MEASURES, PROBABILITIES, Profile, plausible};
use crate::engine::rng::{Stream, fnv1a64, key};
use crate::error::{Error, Result};
use crate::scenario::{Loaded, RANKED};
use crate::shard::{Shard, fingerprint};
use crate::suite::RunOptions;

/// A shard's results, in its `--out` folder.
pub const SHARD_FILE: &str = "sweep-shard.json";

/// A `--param KEY=LO..HI` of the command line.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamRange {
    pub key: String,
    pub range: [f64; 2],
}

impl std::str::FromStr for ParamRange {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<ParamRange, String> {
        let (key, range) = s.split_once('=').ok_or_else(|| format!("KEY=LO..HI, got {s:?}"))?;
        if !PROBABILITIES.contains(&key) {
            return Err(format!("{key}: one of {}", PROBABILITIES.join(", ")));
        }
        let (lo, hi) = range.split_once("..").ok_or_else(|| format!("{key}: a range LO..HI, got {range:?}"))?;
        let num = |v: &str| v.trim().parse::<f64>().map_err(|_| format!("{key}: a number, got {v:?}"));
        let (lo, hi) = (num(lo)?, num(hi)?);
        if !(0.0..=1.0).contains(&lo) || !(0.0..=1.0).contains(&hi) {
            return Err(format!("{key}: a probability range within [0, 1], got {lo}..{hi}"));
        }
        if lo > hi {
            return Err(format!("{key}: LO <= HI, got {lo}..{hi}"));
        }
        Ok(ParamRange { key: key.to_owned(), range: [lo, hi] })
    }
}

/// How parameters' influence is estimated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Sensitivity {
    /// Standardised regression coefficients over the N profiles (no extra runs).
    Src,
    /// Sobol first-order and total indices over Saltelli's N·(d + 2) profiles.
    Sobol,
}

/// The profiles a sweep evaluates: `samples` rows of hypercube A and, for Sobol indices,
/// as many of an independent hypercube B and of each A_B^(i) (A with column i from B).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub samples: usize,
    pub seed: u64,
    pub sensitivity: Sensitivity,
}

impl Plan {
    /// How many profiles the plan evaluates.
    pub fn evaluations(&self) -> usize {
        match self.sensitivity {
            Sensitivity::Src => self.samples,
            Sensitivity::Sobol => self.samples * (PROBABILITIES.len() + 2),
        }
    }

    /// Every evaluation's point in [0, 1)^d, in evaluation order: A, then B, then each A_B^(i).
    pub fn points(&self) -> Vec<Vec<f64>> {
        let (n, d) = (self.samples, PROBABILITIES.len());
        // Columns 0..d are A, d..2d are B: A is the same whether or not B is drawn.
        let columns = if self.sensitivity == Sensitivity::Sobol { 2 * d } else { d };
        let cube = latin_hypercube(n, columns, self.seed);
        let mut points: Vec<Vec<f64>> = cube.iter().map(|p| p[..d].to_vec()).collect();
        if self.sensitivity == Sensitivity::Sobol {
            points.extend(cube.iter().map(|p| p[d..].to_vec()));
            for i in 0..d {
                points.extend(cube.iter().map(|p| {
                    let mut a = p[..d].to_vec();
                    a[i] = p[d + i];
                    a
                }));
            }
        }
        points
    }
}

/// The range a scenario's parameter is swept over: the command line's, else its profile's,
/// else the plausible range.
pub fn range_of(profile: &Profile, key: &str, given: &[ParamRange]) -> [f64; 2] {
    given
        .iter()
        .find(|p| p.key == key)
        .map(|p| p.range)
        .or_else(|| profile.ranges.get(key).copied())
        .or_else(|| plausible(key))
        .unwrap_or([0.0, 1.0])
}

/// A seeded Latin hypercube of `n` points in [0, 1)^`d`: each column holds one point in each
/// of the `n` equal slices, in an order shuffled by its own draws.
pub fn latin_hypercube(n: usize, d: usize, seed: u64) -> Vec<Vec<f64>> {
    let column = |j: usize| {
        let mut s = Stream::new(key(&[seed, fnv1a64(b"sweep"), j as u64]));
        let mut order: Vec<usize> = (0..n).collect();
        // Fisher–Yates from the column's own stream.
        for i in (1..n).rev() {
            let k = (s.unit(i as u64) * (i + 1) as f64) as usize;
            order.swap(i, k.min(i));
        }
        order
            .iter()
            .enumerate()
            .map(|(i, &slice)| (slice as f64 + s.unit((n + i) as u64)) / n as f64)
            .collect::<Vec<_>>()
    };
    let columns: Vec<Vec<f64>> = (0..d).map(column).collect();
    (0..n).map(|i| columns.iter().map(|c| c[i]).collect()).collect()
}

/// One profile of the design, for one scenario: each probability at its point in its range;
/// then, where the point goes on (`predict`'s does), each measure ([`MEASURES`]) the base
/// gives a range at its point among the range's whole numbers, each as likely (a measure
/// without a range stays as it is).
pub fn profile_at(base: &Profile, point: &[f64], given: &[ParamRange]) -> Profile {
    let mut p = base.clone();
    for (key, u) in PROBABILITIES.iter().zip(point) {
        let [lo, hi] = range_of(base, key, given);
        p.set(key, Figure::Value(lo + u * (hi - lo)));
    }
    for (key, u) in MEASURES.iter().zip(point.iter().skip(PROBABILITIES.len())) {
        if let Some(&[lo, hi]) = base.ranges.get(*key) {
            p.set(key, Figure::Value((lo + (u * (hi - lo + 1.0)).floor()).min(hi)));
        }
    }
    p
}

/// A `rank_first_share` gate of a scenario, checked across the sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RobustGate {
    pub strategy: String,
    /// Index into [`RANKED`] of the metric ranked on.
    pub on: usize,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// One scenario of a sweep: what it is, and per evaluation its parameters and per strategy the
/// metrics of [`RANKED`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweptScenario {
    pub name: String,
    pub strategies: Vec<String>,
    pub ranges: Vec<[f64; 2]>,
    pub gates: Vec<RobustGate>,
    #[serde(skip)]
    pub params: Vec<Vec<f64>>,
    #[serde(skip)]
    pub metrics: Vec<Vec<[f64; 4]>>,
}

/// A whole sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    pub plan: Plan,
    /// The suite's [`fingerprint`], with the runs each scenario ran.
    pub fingerprint: String,
    pub scenarios: Vec<SweptScenario>,
}

/// One evaluation's results, per scenario: parameters and metrics as exact bits (a shard's
/// file must give the merge the very numbers an unsharded sweep had).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Evaluated {
    index: usize,
    params: Vec<Vec<u64>>,
    metrics: Vec<Vec<[u64; 4]>>,
}

/// What shard K of N wrote.
#[derive(Debug, Serialize, Deserialize)]
struct ShardFile {
    tracefault_version: String,
    shard: Shard,
    sweep: Sweep,
    evaluated: Vec<Evaluated>,
}

/// The sweep's frame for this suite: scenarios, strategies, ranges and gates, no results yet.
fn frame(suite: &[Loaded], plan: Plan, given: &[ParamRange]) -> Sweep {
    let ranked: Vec<&str> = RANKED.iter().map(|r| r.0).collect();
    let scenarios = suite
        .iter()
        .map(|sc| SweptScenario {
            name: sc.name.clone(),
            strategies: sc.strategies.iter().map(|s| s.name.clone()).collect(),
            ranges: PROBABILITIES.iter().map(|k| range_of(&sc.profile, k, given)).collect(),
            gates: sc
                .gates
                .iter()
                .filter(|g| g.is_robustness())
                .map(|g| RobustGate {
                    strategy: g.strategy.clone(),
                    on: g.on.as_deref().and_then(|on| ranked.iter().position(|m| *m == on)).unwrap_or(0),
                    min: g.min,
                    max: g.max,
                })
                .collect(),
            params: Vec::new(),
            metrics: Vec::new(),
        })
        .collect();
    Sweep { plan, fingerprint: fingerprint(suite), scenarios }
}

/// Profiles evaluated together: each run's trajectories are shared within a batch, and a
/// batch's aggregates (per profile and strategy) bound the memory.
const BATCH: usize = 256;

/// Runs the evaluations `indices` of the plan; `progress` is told of the runs each finished
/// unit simulated for its profiles (runs × strategies × profiles).
fn evaluate(
    suite: &[Loaded],
    points: &[Vec<f64>],
    indices: &[usize],
    given: &[ParamRange],
    opts: &RunOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<Evaluated> {
    let mut out = Vec::with_capacity(indices.len());
    for batch in indices.chunks(BATCH) {
        let profiles: Vec<Vec<Profile>> = suite
            .iter()
            .map(|sc| batch.iter().map(|&i| profile_at(&sc.profile, &points[i], given)).collect())
            .collect();
        let metrics = evaluate::ranked_metrics(suite, &profiles, opts.jobs, &|n| progress(n * batch.len() as u64));
        out.extend(batch.iter().enumerate().map(|(e, &index)| {
            Evaluated {
                index,
                params: profiles
                    .iter()
                    .map(|p| PROBABILITIES.iter().map(|k| p[e].probability(k).unwrap_or(0.0).to_bits()).collect())
                    .collect(),
                metrics: metrics.iter().map(|sc| sc[e].iter().map(|m| m.map(f64::to_bits)).collect()).collect(),
            }
        }));
    }
    out
}

/// Puts evaluations into the frame, checking that each of the plan's is there exactly once.
fn assemble(mut sweep: Sweep, mut evaluated: Vec<Evaluated>) -> Result<Sweep> {
    evaluated.sort_by_key(|e| e.index);
    let want = sweep.plan.evaluations();
    for (i, e) in evaluated.iter().enumerate() {
        if e.index != i {
            let what = if e.index < i { "twice" } else { "missing" };
            return Err(Error::Usage(format!("sweep merge: profile {} of {want} is {what}", e.index.min(i))));
        }
    }
    if evaluated.len() != want {
        return Err(Error::Usage(format!("sweep merge: {} of {want} profiles evaluated", evaluated.len())));
    }
    for e in evaluated {
        for ((sc, params), metrics) in sweep.scenarios.iter_mut().zip(e.params).zip(e.metrics) {
            sc.params.push(params.into_iter().map(f64::from_bits).collect());
            sc.metrics.push(metrics.into_iter().map(|m| m.map(f64::from_bits)).collect());
        }
    }
    Ok(sweep)
}

/// Runs the whole sweep; `progress` is told of the runs simulated (runs × strategies ×
/// profiles).
pub fn sweep(
    suite: &[Loaded],
    plan: Plan,
    given: &[ParamRange],
    opts: &RunOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Sweep> {
    check(plan)?;
    let all: Vec<usize> = (0..plan.evaluations()).collect();
    let evaluated = evaluate(suite, &plan.points(), &all, given, opts, progress);
    assemble(frame(suite, plan, given), evaluated)
}

fn check(plan: Plan) -> Result<()> {
    if plan.samples == 0 {
        return Err(Error::Usage("--samples: at least 1".into()));
    }
    Ok(())
}

/// Runs shard `shard` of the sweep and writes its file into `out`; returns how many profiles
/// it evaluated. `progress` is told of the runs simulated (runs × strategies × profiles).
pub fn run_shard(
    suite: &[Loaded],
    plan: Plan,
    given: &[ParamRange],
    opts: &RunOptions,
    shard: Shard,
    out: &Path,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<usize> {
    check(plan)?;
    let indices = crate::shard::selected(plan.evaluations(), shard);
    let evaluated = evaluate(suite, &plan.points(), &indices, given, opts, progress);
    let file = ShardFile {
        tracefault_version: crate::report::VERSION.into(),
        shard,
        sweep: frame(suite, plan, given),
        evaluated,
    };
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let text = serde_json::to_string(&file).expect("a sweep shard serializes");
    crate::output::write_file(&out.join(SHARD_FILE), text.as_bytes())?;
    Ok(indices.len())
}

/// Whether `dir` holds a sweep shard (rather than a `run` shard).
pub fn is_shard(dir: &Path) -> bool {
    dir.join(SHARD_FILE).is_file()
}

/// Merges the shard folders 1..N of one sweep.
pub fn merge(dirs: &[PathBuf]) -> Result<Sweep> {
    let mut files = Vec::new();
    for d in dirs {
        if !is_shard(d) {
            return Err(Error::Usage(format!(
                "{}: not a sweep shard (no {SHARD_FILE}); merge the shards of a sweep and those of a run apart",
                d.display()
            )));
        }
        let path = d.join(SHARD_FILE);
        let text = crate::input::read_text(&path, crate::input::Input::Config)?;
        let f: ShardFile = serde_json::from_str(&text)
            .map_err(|e| Error::Parse { file: path.display().to_string(), message: e.to_string() })?;
        files.push((d, f));
    }
    let Some((first_dir, first)) = files.first() else {
        return Err(Error::Usage("merge needs at least one shard folder".into()));
    };
    let n = first.shard.n;
    let mut seen = vec![false; n];
    for (d, f) in &files {
        if f.sweep != first.sweep {
            return Err(Error::Usage(format!(
                "{} and {} are shards of different sweeps (suite, samples, seed, ranges or sensitivity differ)",
                first_dir.display(),
                d.display()
            )));
        }
        if f.shard.n != n || std::mem::replace(&mut seen[f.shard.k - 1], true) {
            return Err(Error::Usage(format!(
                "{}: shard {}/{} does not fit shards of {n} given once each",
                d.display(),
                f.shard.k,
                f.shard.n
            )));
        }
    }
    if let Some(k) = seen.iter().position(|s| !s) {
        return Err(Error::Usage(format!("sweep merge: shard {}/{n} is missing", k + 1)));
    }
    let sweep = first.sweep.clone();
    let evaluated = files.into_iter().flat_map(|(_, f)| f.evaluated).collect();
    assemble(sweep, evaluated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latin_hypercube_puts_one_point_in_each_slice_of_each_column() {
        let d = latin_hypercube(16, 3, 7);
        for j in 0..3 {
            let mut slices: Vec<usize> = d.iter().map(|p| (p[j] * 16.0) as usize).collect();
            slices.sort_unstable();
            assert_eq!(slices, (0..16).collect::<Vec<_>>(), "column {j}");
        }
        assert_eq!(d, latin_hypercube(16, 3, 7), "seeded");
        assert_ne!(d, latin_hypercube(16, 3, 8));
    }

    #[test]
    fn a_saltelli_plan_is_a_then_b_then_a_with_each_column_of_b() {
        let src = Plan { samples: 4, seed: 3, sensitivity: Sensitivity::Src };
        let sobol = Plan { sensitivity: Sensitivity::Sobol, ..src };
        let (a, all) = (src.points(), sobol.points());
        let d = PROBABILITIES.len();
        assert_eq!(all.len(), sobol.evaluations());
        assert_eq!(all.len(), 4 * (d + 2));
        assert_eq!(all[..4], a[..], "A does not move when B is drawn");
        for i in 0..d {
            for r in 0..4 {
                let ab = &all[8 + i * 4 + r];
                for j in 0..d {
                    let from = if j == i { &all[4 + r] } else { &all[r] };
                    assert_eq!(ab[j], from[j], "A_B^({i}) row {r} column {j}");
                }
            }
        }
    }

    /// Each profile of `indices` alone: its own copy of the suite, run by `run_suite`.
    fn alone(suite: &[Loaded], plan: Plan, indices: &[usize], opts: &RunOptions) -> Vec<Vec<Vec<[u64; 4]>>> {
        let points = plan.points();
        indices
            .iter()
            .map(|&i| {
                let drawn: Vec<Loaded> = suite
                    .iter()
                    .map(|sc| {
                        let mut sc = sc.clone();
                        sc.profile = profile_at(&sc.profile, &points[i], &[]);
                        sc
                    })
                    .collect();
                crate::suite::run_suite(&drawn, opts, &mut std::io::sink(), false, &|_| {})
                    .unwrap()
                    .iter()
                    .map(|r| {
                        r.rows.iter().map(|row| RANKED.map(|(m, _)| row.get(m).unwrap_or(f64::NAN).to_bits())).collect()
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn profiles_that_share_trajectories_get_the_bits_each_gets_alone() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        // Failures the model judges (01, 08), partials it may follow (02), a fleet whose
        // orchestrator retries every conflict (16) and one whose agents judge 503s (20).
        let paths = [
            "01-worked-example.toml",
            "02-ambiguous-loop.toml",
            "08-realistic-mix.toml",
            "16-aws-backoff-10.toml",
            "20-seeds-fleet-outage.toml",
        ]
        .map(|f| dir.join(f));
        let opts = RunOptions { jobs: 2, seed: None, runs: Some(40), strategies: Vec::new() };
        let mut suite = crate::scenario::load::load_suite(&paths).unwrap();
        crate::suite::apply_overrides(&mut suite, &opts).unwrap();
        for plan in [
            Plan { samples: 6, seed: 5, sensitivity: Sensitivity::Src },
            Plan { samples: 2, seed: 9, sensitivity: Sensitivity::Sobol },
        ] {
            // Every other profile, as a shard takes them.
            let indices: Vec<usize> = (0..plan.evaluations()).step_by(2).collect();
            let told = std::sync::atomic::AtomicU64::new(0);
            let shared = evaluate(&suite, &plan.points(), &indices, &[], &opts, &|n| {
                told.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            });
            // Progress counts every run of every strategy once per profile.
            let runs: u64 = suite.iter().map(|sc| sc.runs * sc.strategies.len() as u64).sum();
            assert_eq!(told.into_inner(), runs * indices.len() as u64);
            assert_eq!(shared.iter().map(|e| e.index).collect::<Vec<_>>(), indices);
            let shared: Vec<_> = shared.into_iter().map(|e| e.metrics).collect();
            assert_eq!(shared, alone(&suite, plan, &indices, &opts), "{plan:?}");
        }
    }

    #[test]
    fn params_are_checked_and_named() {
        assert_eq!("p_fix_args=0.5..0.9".parse(), Ok(ParamRange { key: "p_fix_args".into(), range: [0.5, 0.9] }));
        assert!("p_fix_args=0.9..0.5".parse::<ParamRange>().unwrap_err().contains("p_fix_args: LO <= HI"));
        assert!(
            "perception.raw=0.5..1.5"
                .parse::<ParamRange>()
                .unwrap_err()
                .contains("perception.raw: a probability range")
        );
        assert!("p_fix=0.5..0.9".parse::<ParamRange>().unwrap_err().starts_with("p_fix: one of"));
        assert!("p_fix_args".parse::<ParamRange>().is_err());
    }
}
