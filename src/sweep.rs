//! `tracefault sweep`: how far a comparison of strategies holds when the simulated model's
//! probabilities move over their plausible ranges. A seeded Latin hypercube draws N profiles;
//! each scenario runs under every strategy for each profile with its own seed (the same faults
//! and model draws for every profile: common random numbers); then, per scenario and gate
//! metric, how often each strategy ranks first, how often each beats each other, and how much
//! each parameter moves each metric (Pearson correlation over the design, which for a Latin
//! hypercube's nearly uncorrelated columns is the standardised regression coefficient).

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::calibrate::wilson;
use crate::engine::profile::{Figure, PROBABILITIES, Profile, plausible};
use crate::engine::rng::{Stream, fnv1a64, key};
use crate::error::{Error, Result};
use crate::scenario::Scenario;
use crate::suite::{RunOptions, run_suite};

/// The gate metrics a sweep ranks strategies on, and whether higher is better.
pub const METRICS: [(&str, bool); 4] =
    [("success_rate", true), ("loop_rate", false), ("calls_mean", false), ("wasted_retries_per_run", false)];

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

/// One profile of the design, for one scenario: each probability at its point in its range.
fn profile_at(base: &Profile, point: &[f64], given: &[ParamRange]) -> Profile {
    let mut p = base.clone();
    for (key, u) in PROBABILITIES.iter().zip(point) {
        let [lo, hi] = range_of(base, key, given);
        p.set(key, Figure::Value(lo + u * (hi - lo)));
    }
    p
}

/// The metrics of every (sample, scenario, strategy), and the parameters drawn.
pub struct Sweep {
    pub samples: usize,
    /// Per scenario: its name, strategies, and per sample its parameter values and per strategy
    /// the metrics of [`METRICS`].
    pub scenarios: Vec<SweptScenario>,
}

pub struct SweptScenario {
    pub name: String,
    pub strategies: Vec<String>,
    pub ranges: Vec<[f64; 2]>,
    pub params: Vec<Vec<f64>>,
    pub metrics: Vec<Vec<[f64; 4]>>,
}

/// Runs the sweep: `samples` profiles drawn with `seed`, each scenario under every strategy.
pub fn sweep(
    suite: &[Scenario],
    samples: usize,
    seed: u64,
    given: &[ParamRange],
    opts: &RunOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Sweep> {
    if samples == 0 {
        return Err(Error::Usage("--samples: at least 1".into()));
    }
    let design = latin_hypercube(samples, PROBABILITIES.len(), seed);
    let mut scenarios: Vec<SweptScenario> = suite
        .iter()
        .map(|sc| SweptScenario {
            name: sc.name.clone(),
            strategies: sc.strategies.iter().map(|s| s.name.clone()).collect(),
            ranges: PROBABILITIES.iter().map(|k| range_of(&sc.profile, k, given)).collect(),
            params: Vec::new(),
            metrics: Vec::new(),
        })
        .collect();
    for point in &design {
        let drawn: Vec<Scenario> =
            suite.iter().map(|sc| Scenario { profile: profile_at(&sc.profile, point, given), ..sc.clone() }).collect();
        let results = run_suite(&drawn, opts, &mut std::io::sink(), false, progress)
            .map_err(|e| Error::Usage(format!("sweep: {e}")))?;
        for ((out, sc), r) in scenarios.iter_mut().zip(&drawn).zip(results) {
            out.params.push(PROBABILITIES.iter().map(|k| sc.profile.probability(k).unwrap_or(0.0)).collect());
            out.metrics.push(r.rows.iter().map(|row| METRICS.map(|(m, _)| row.get(m).unwrap_or(f64::NAN))).collect());
        }
    }
    Ok(Sweep { samples, scenarios })
}

/// Whether `a` is better than `b` on metric `m`.
fn better(a: f64, b: f64, higher: bool) -> bool {
    if higher { a > b } else { a < b }
}

/// Pearson's correlation of two columns; 0 when either does not vary.
fn correlation(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    if sxx <= 1e-18 || syy <= 1e-18 { 0.0 } else { sxy / (sxx * syy).sqrt() }
}

fn round(v: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (v * f).round() / f
}

impl SweptScenario {
    /// For metric `m`: per strategy, the share of samples where it ranks first (ties all count).
    pub fn rank_first(&self, m: usize) -> Vec<f64> {
        let higher = METRICS[m].1;
        let mut firsts = vec![0u64; self.strategies.len()];
        for sample in &self.metrics {
            let best = sample
                .iter()
                .map(|v| v[m])
                .fold(if higher { f64::MIN } else { f64::MAX }, |a, v| if better(v, a, higher) { v } else { a });
            for (s, v) in sample.iter().enumerate() {
                firsts[s] += u64::from(v[m] == best);
            }
        }
        firsts.iter().map(|&f| f as f64 / self.metrics.len() as f64).collect()
    }

    /// For metric `m`: how many samples strategy `a` beats `b` in.
    pub fn beats(&self, m: usize, a: usize, b: usize) -> u64 {
        let higher = METRICS[m].1;
        self.metrics.iter().filter(|s| better(s[a][m], s[b][m], higher)).count() as u64
    }

    /// For metric `m` and strategy `s`: each parameter's correlation with the metric.
    pub fn sensitivity(&self, m: usize, s: usize) -> Vec<f64> {
        let y: Vec<f64> = self.metrics.iter().map(|v| v[s][m]).collect();
        (0..PROBABILITIES.len())
            .map(|j| {
                let x: Vec<f64> = self.params.iter().map(|p| p[j]).collect();
                correlation(&x, &y)
            })
            .collect()
    }
}

impl Sweep {
    /// `sweep.csv`: one row per sample, scenario and strategy: the drawn parameters, then the
    /// metrics.
    pub fn csv(&self) -> String {
        let mut out = String::from("scenario,strategy,sample");
        for k in PROBABILITIES {
            let _ = write!(out, ",{k}");
        }
        for (m, _) in METRICS {
            let _ = write!(out, ",{m}");
        }
        out.push('\n');
        for sc in &self.scenarios {
            for (i, (params, metrics)) in sc.params.iter().zip(&sc.metrics).enumerate() {
                for (s, name) in sc.strategies.iter().enumerate() {
                    let _ = write!(out, "{},{},{i}", csv_field(&sc.name), csv_field(name));
                    for p in params {
                        let _ = write!(out, ",{:.4}", p);
                    }
                    for v in metrics[s] {
                        let _ = write!(out, ",{:.4}", v);
                    }
                    out.push('\n');
                }
            }
        }
        out
    }

    /// `sweep.json`: the design and, per scenario and metric, rank-first shares, pairwise
    /// frequencies with their 95% Wilson intervals, and each parameter's sensitivity.
    pub fn json(&self, seed: u64) -> Value {
        let scenarios: Vec<Value> = self
            .scenarios
            .iter()
            .map(|sc| {
                let n = self.samples as u64;
                let metrics: Vec<Value> = METRICS
                    .iter()
                    .enumerate()
                    .map(|(m, (name, higher))| {
                        let first = sc.rank_first(m);
                        let mut pairs = Vec::new();
                        for a in 0..sc.strategies.len() {
                            for b in 0..sc.strategies.len() {
                                if a != b {
                                    let k = sc.beats(m, a, b);
                                    pairs.push(json!({"a": sc.strategies[a], "b": sc.strategies[b],
                                        "a_beats_b": round(k as f64 / n as f64, 4), "interval": wilson(k, n)}));
                                }
                            }
                        }
                        let sensitivity: Vec<Value> = sc
                            .strategies
                            .iter()
                            .enumerate()
                            .map(|(s, strategy)| {
                                let r = sc.sensitivity(m, s);
                                let by: serde_json::Map<String, Value> =
                                    PROBABILITIES.iter().zip(r).map(|(k, v)| ((*k).to_owned(), json!(round(v, 4)))).collect();
                                json!({"strategy": strategy, "correlation": by})
                            })
                            .collect();
                        json!({"metric": name, "higher_is_better": higher,
                            "rank_first_share": sc.strategies.iter().zip(first).map(|(s, f)| json!({"strategy": s, "share": round(f, 4)})).collect::<Vec<_>>(),
                            "pairwise": pairs, "sensitivity": sensitivity})
                    })
                    .collect();
                let ranges: serde_json::Map<String, Value> =
                    PROBABILITIES.iter().zip(&sc.ranges).map(|(k, r)| ((*k).to_owned(), json!(r))).collect();
                json!({"scenario": sc.name, "ranges": ranges, "metrics": metrics})
            })
            .collect();
        json!({"tracefault_version": env!("CARGO_PKG_VERSION"), "design": "latin hypercube", "seed": seed,
            "samples": self.samples,
            "sensitivity": "Pearson correlation of each parameter with the metric over the design (for a Latin hypercube, whose columns are nearly uncorrelated, the standardised regression coefficient)",
            "scenarios": scenarios})
    }

    /// The `report.md` section: per scenario, the rank-first shares on each metric and the
    /// parameter that moves the leader's success most.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "## Sweep: {} profiles (Latin hypercube over each probability's range)\n\nShare of profiles in which each strategy ranks first (ties count for each).\n\n",
            self.samples
        );
        for sc in &self.scenarios {
            let _ = writeln!(out, "### {}\n", sc.name);
            out.push_str("| strategy |");
            for (m, _) in METRICS {
                let _ = write!(out, " {m} |");
            }
            out.push_str(" success moved most by |\n|---|");
            out.push_str(&"---|".repeat(METRICS.len() + 1));
            out.push('\n');
            let firsts: Vec<Vec<f64>> = (0..METRICS.len()).map(|m| sc.rank_first(m)).collect();
            for (s, name) in sc.strategies.iter().enumerate() {
                let _ = write!(out, "| {name} |");
                for f in &firsts {
                    let _ = write!(out, " {:.3} |", f[s]);
                }
                let r = sc.sensitivity(0, s);
                let (j, v) =
                    r.iter().enumerate().fold((0, 0.0_f64), |b, (j, v)| if v.abs() > b.1.abs() { (j, *v) } else { b });
                if v == 0.0 {
                    out.push_str(" — |\n");
                } else {
                    let _ = writeln!(out, " {} ({v:+.2}) |", PROBABILITIES[j]);
                }
            }
            out.push('\n');
        }
        out
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_owned() }
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

    #[test]
    fn correlation_is_zero_for_a_constant() {
        assert_eq!(correlation(&[1.0, 2.0, 3.0], &[5.0, 5.0, 5.0]), 0.0);
        assert!((correlation(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]) - 1.0).abs() < 1e-12);
        assert!((correlation(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
    }
}
