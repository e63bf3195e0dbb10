//! What a sweep's numbers say: rank-first shares and pairwise frequencies over the N profiles
//! of hypercube A, each parameter's influence (standardised regression coefficients, or Sobol
//! indices from Saltelli's design), and where a pairwise ranking flips.

use super::{Sensitivity, SweptScenario};
use crate::engine::profile::PROBABILITIES;
use crate::scenario::RANKED;

/// Whether `a` is better than `b` on ranked metric `m`.
fn better(a: f64, b: f64, m: usize) -> bool {
    if RANKED[m].1 { a > b } else { a < b }
}

/// Pearson's correlation of two columns; 0 when either does not vary.
pub fn correlation(x: &[f64], y: &[f64]) -> f64 {
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

/// Sobol indices of one parameter from Saltelli's design: with f_A, f_B and f_ABi the outputs
/// over A, B and A_B^(i), and V the variance over A and B together,
/// first order S_i = mean(f_B · (f_ABi − f_A)) / V (Saltelli et al. 2010) and
/// total S_Ti = mean((f_A − f_ABi)²) / (2V) (Jansen 1999). Both are exactly 0 when no run reads
/// the parameter: under common random numbers f_ABi is then f_A bit for bit.
pub fn sobol(f_a: &[f64], f_b: &[f64], f_ab: &[f64]) -> (f64, f64) {
    let n = f_a.len() as f64;
    let all = f_a.iter().chain(f_b);
    let mean = all.clone().sum::<f64>() / (2.0 * n);
    let var = all.map(|y| (y - mean) * (y - mean)).sum::<f64>() / (2.0 * n);
    if var <= 1e-18 {
        return (0.0, 0.0);
    }
    let (mut first, mut total) = (0.0, 0.0);
    for ((a, b), ab) in f_a.iter().zip(f_b).zip(f_ab) {
        first += b * (ab - a);
        total += (a - ab) * (a - ab);
    }
    (first / n / var, total / (2.0 * n) / var)
}

/// Where "A beats B" flips: the parameter and threshold that best split the profiles where it
/// holds from those where it does not (a one-split decision rule).
#[derive(Clone, Debug, PartialEq)]
pub struct Flip {
    pub a: usize,
    pub b: usize,
    /// How many profiles `a` beats `b` in, and that as a share of them all.
    pub wins: usize,
    pub share: f64,
    pub param: usize,
    /// `a` beats `b` when the parameter is above (`true`) or below the threshold.
    pub above: bool,
    pub threshold: f64,
    /// The rule's balanced agreement (see [`best_split`]).
    pub agreement: f64,
}

impl SweptScenario {
    /// The profiles ranked: hypercube A's (the first `samples` evaluations).
    fn ranked(&self, samples: usize) -> &[Vec<[f64; 4]>] {
        &self.metrics[..samples]
    }

    /// For ranked metric `m`: per strategy, the share of profiles where it ranks first (ties all
    /// count).
    pub fn rank_first(&self, samples: usize, m: usize) -> Vec<f64> {
        let mut firsts = vec![0u64; self.strategies.len()];
        for sample in self.ranked(samples) {
            let best = sample.iter().map(|v| v[m]).fold(None, |a: Option<f64>, v| match a {
                Some(a) if !better(v, a, m) => Some(a),
                _ => Some(v),
            });
            for (s, v) in sample.iter().enumerate() {
                firsts[s] += u64::from(Some(v[m]) == best);
            }
        }
        firsts.iter().map(|&f| f as f64 / samples as f64).collect()
    }

    /// For ranked metric `m`: in how many profiles strategy `a` beats `b`.
    pub fn beats(&self, samples: usize, m: usize, a: usize, b: usize) -> u64 {
        self.ranked(samples).iter().filter(|s| better(s[a][m], s[b][m], m)).count() as u64
    }

    /// For ranked metric `m` and strategy `s`: each parameter's correlation with the metric over
    /// A (for a Latin hypercube, whose columns are nearly uncorrelated, the standardised
    /// regression coefficient).
    pub fn correlations(&self, samples: usize, m: usize, s: usize) -> Vec<f64> {
        let y: Vec<f64> = self.ranked(samples).iter().map(|v| v[s][m]).collect();
        (0..PROBABILITIES.len())
            .map(|j| {
                let x: Vec<f64> = self.params[..samples].iter().map(|p| p[j]).collect();
                correlation(&x, &y)
            })
            .collect()
    }

    /// For ranked metric `m` and strategy `s`: each parameter's Sobol (first-order, total)
    /// indices; `None` unless the sweep ran Saltelli's design.
    pub fn sobol(&self, sensitivity: Sensitivity, samples: usize, m: usize, s: usize) -> Option<Vec<(f64, f64)>> {
        if sensitivity != Sensitivity::Sobol {
            return None;
        }
        let f = |range: std::ops::Range<usize>| -> Vec<f64> { self.metrics[range].iter().map(|v| v[s][m]).collect() };
        let n = samples;
        let (f_a, f_b) = (f(0..n), f(n..2 * n));
        Some(
            (0..PROBABILITIES.len())
                .map(|i| {
                    let start = (2 + i) * n;
                    sobol(&f_a, &f_b, &f(start..start + n))
                })
                .collect(),
        )
    }

    /// For ranked metric `m`: every pair whose order is not the same in all profiles, with the
    /// one-split rule that best tells when `a` beats `b` (`a` the one that wins less often).
    pub fn flips(&self, samples: usize, m: usize) -> Vec<Flip> {
        let ranked = self.ranked(samples);
        let mut out = Vec::new();
        for a in 0..self.strategies.len() {
            for b in 0..self.strategies.len() {
                let wins: Vec<bool> = ranked.iter().map(|s| better(s[a][m], s[b][m], m)).collect();
                let k = wins.iter().filter(|w| **w).count();
                let loses = ranked.iter().filter(|s| better(s[b][m], s[a][m], m)).count();
                // Each flipping pair once: from the side that wins in fewer profiles.
                if k == 0 || k > loses || (k == loses && a > b) {
                    continue;
                }
                if let Some(flip) = best_split(&self.params[..samples], &wins, a, b) {
                    out.push(flip);
                }
            }
        }
        out
    }
}

/// The threshold on one parameter that best separates `wins` from the rest, by balanced
/// agreement: the mean of the share of wins and the share of the rest the rule places right
/// (so a rule cannot score well by calling everything the majority).
fn best_split(params: &[Vec<f64>], wins: &[bool], a: usize, b: usize) -> Option<Flip> {
    let n = wins.len();
    let mut best: Option<Flip> = None;
    let total_wins = wins.iter().filter(|w| **w).count();
    let rest = n - total_wins;
    if total_wins == 0 || rest == 0 {
        return None;
    }
    for j in 0..PROBABILITIES.len() {
        let column: Vec<f64> = params.iter().map(|p| p[j]).collect();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&x, &y| column[x].total_cmp(&column[y]));
        // The cut between sorted positions c-1 and c: `wins_below` wins and c - wins_below of
        // the rest lie below it.
        let mut wins_below = 0;
        for c in 1..n {
            wins_below += usize::from(wins[order[c - 1]]);
            let (lo, hi) = (column[order[c - 1]], column[order[c]]);
            if lo == hi {
                continue;
            }
            let rest_below = c - wins_below;
            let balanced = |wins_right: usize, rest_right: usize| {
                (wins_right as f64 / total_wins as f64 + rest_right as f64 / rest as f64) / 2.0
            };
            let above = balanced(total_wins - wins_below, rest_below);
            let below = balanced(wins_below, rest - rest_below);
            for (above, agreement) in [(true, above), (false, below)] {
                if best.as_ref().is_none_or(|f| agreement > f.agreement) {
                    best = Some(Flip {
                        a,
                        b,
                        wins: total_wins,
                        share: total_wins as f64 / n as f64,
                        param: j,
                        above,
                        threshold: (lo + hi) / 2.0,
                        agreement,
                    });
                }
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn correlation_is_zero_for_a_constant() {
        assert_eq!(correlation(&[1.0, 2.0, 3.0], &[5.0, 5.0, 5.0]), 0.0);
        assert!((correlation(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]) - 1.0).abs() < 1e-12);
        assert!((correlation(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
    }

    #[test]
    fn sobol_indices_by_hand() {
        // y = x_1 alone, A = (0, 1), B = (1, 0) in x_1: V over {0, 1, 1, 0} is 0.25.
        // A_B^(1) takes x_1 from B, so f_AB1 = (1, 0): S_1 = mean(f_B (f_AB1 − f_A)) / V
        // = ((1)(1) + (0)(−1)) / 2 / 0.25 = 2; S_T1 = mean((f_A − f_AB1)²) / 2V = 1 / 0.5 = 2
        // (two samples are a poor estimate; the formula is what is checked).
        let (s, t) = sobol(&[0.0, 1.0], &[1.0, 0.0], &[1.0, 0.0]);
        assert!((s - 2.0).abs() < 1e-12 && (t - 2.0).abs() < 1e-12, "{s} {t}");
        // Three samples, y = x_1: f_A = (0, 1, 2), f_B = f_AB1 = (2, 0, 1). Over A and B the mean
        // is 6/6 = 1 and V = (1 + 0 + 1 + 1 + 1 + 0) / 6 = 2/3. S_1 = (2·2 + 0·(−1) + 1·(−1)) / 3
        // / V = 1 / (2/3) = 1.5; S_T1 = (4 + 1 + 1) / 6 / V = 1.5.
        let (s, t) = sobol(&[0.0, 1.0, 2.0], &[2.0, 0.0, 1.0], &[2.0, 0.0, 1.0]);
        assert!((s - 1.5).abs() < 1e-12 && (t - 1.5).abs() < 1e-12, "{s} {t}");
        // A parameter y does not read: A_B^(i) gives A's outputs, both indices exactly 0.
        assert_eq!(sobol(&[0.3, 0.7, 0.1], &[0.5, 0.2, 0.9], &[0.3, 0.7, 0.1]), (0.0, 0.0));
        // An output that never varies moves with nothing.
        assert_eq!(sobol(&[1.0, 1.0], &[1.0, 1.0], &[1.0, 1.0]), (0.0, 0.0));
    }

    #[test]
    fn a_flip_is_found_where_it_happens() {
        // Strategy 0 beats 1 on success exactly when parameter 3 is above 0.5.
        let params: Vec<Vec<f64>> = (0..10)
            .map(|i| (0..PROBABILITIES.len()).map(|j| if j == 3 { i as f64 / 10.0 } else { 0.5 }).collect())
            .collect();
        let metrics: Vec<Vec<[f64; 4]>> =
            (0..10).map(|i| vec![[if i >= 6 { 0.9 } else { 0.5 }, 0.0, 1.0, 0.0], [0.7, 0.0, 1.0, 0.0]]).collect();
        let sc = swept(params, metrics);
        assert_eq!(sc.rank_first(10, 0), vec![0.4, 0.6]);
        assert_eq!(sc.beats(10, 0, 0, 1), 4);
        let flips = sc.flips(10, 0);
        assert_eq!(flips.len(), 1, "{flips:?}");
        let f = &flips[0];
        assert_eq!((f.a, f.b, f.param, f.above, f.agreement), (0, 1, 3, true, 1.0));
        assert!((f.threshold - 0.55).abs() < 1e-12, "{}", f.threshold);
        // Calls tie in every profile: nothing flips.
        assert!(sc.flips(10, 2).is_empty());
    }

    /// A scenario of strategies x, y (and z) over `params` with the given metrics.
    fn swept(params: Vec<Vec<f64>>, metrics: Vec<Vec<[f64; 4]>>) -> SweptScenario {
        let strategies = ["x", "y", "z"][..metrics[0].len()].iter().map(|s| s.to_string()).collect();
        SweptScenario { name: "s".into(), strategies, ranges: Vec::new(), gates: Vec::new(), params, metrics }
    }

    #[test]
    fn ties_share_first_place_and_are_no_win() {
        // Success (higher is better) and calls (lower is better) of x, y, z in three profiles.
        let m = |success: [f64; 3], calls: [f64; 3]| -> Vec<[f64; 4]> {
            (0..3).map(|s| [success[s], 0.0, calls[s], 0.0]).collect()
        };
        let sc = swept(
            vec![vec![0.5; PROBABILITIES.len()]; 3],
            vec![
                m([0.5, 0.5, 0.4], [3.0, 3.0, 4.0]),
                m([0.3, 0.6, 0.6], [5.0, 2.0, 2.0]),
                m([0.9, 0.1, 0.2], [1.0, 9.0, 8.0]),
            ],
        );
        // First on success: x in profiles 0 (tied with y) and 2, y in 0 and 1, z in 1 (tied).
        assert_eq!(sc.rank_first(3, 0), vec![2.0 / 3.0, 2.0 / 3.0, 1.0 / 3.0]);
        assert_eq!(sc.rank_first(3, 2), vec![2.0 / 3.0, 2.0 / 3.0, 1.0 / 3.0]);
        // x beats y on success only in profile 2 (profile 0 is a tie); y beats x in profile 1.
        assert_eq!((sc.beats(3, 0, 0, 1), sc.beats(3, 0, 1, 0)), (1, 1));
        // Fewer calls win: y beats x only in profile 1 (2 < 5), x beats y only in profile 2.
        assert_eq!((sc.beats(3, 2, 1, 0), sc.beats(3, 2, 0, 1)), (1, 1));
    }

    #[test]
    fn an_imperfect_flip_below_a_threshold_by_hand() {
        // Parameter 0 runs 0.0, 0.1 … 0.5 (the others fixed); x beats y where it is 0.0, 0.1 and
        // 0.3, and y beats x elsewhere: three wins each way, so the pair is told once, as x vs y.
        let params: Vec<Vec<f64>> = (0..6)
            .map(|i| (0..PROBABILITIES.len()).map(|j| if j == 0 { i as f64 / 10.0 } else { 0.5 }).collect())
            .collect();
        let wins = [true, true, false, true, false, false];
        let metrics = wins.iter().map(|&w| vec![[if w { 0.9 } else { 0.5 }, 0.0, 1.0, 0.0], [0.7, 0.0, 1.0, 0.0]]);
        // A pair that goes one way in every profile has no split.
        assert_eq!(best_split(&params, &[true; 6], 0, 1), None);
        assert_eq!(best_split(&params, &[false; 6], 0, 1), None);
        let sc = swept(params, metrics.collect());
        let flips = sc.flips(6, 0);
        assert_eq!(flips.len(), 1, "{flips:?}");
        let f = &flips[0];
        // Cutting at 0.15 with "below": all 3 rest profiles right (none below), 2 of 3 wins right,
        // (2/3 + 3/3) / 2 = 5/6. Cutting at 0.35 "below" scores the same (3/3 + 2/3) / 2 and
        // comes later: the first best cut is kept. No cut does better.
        assert_eq!((f.a, f.b, f.wins, f.param, f.above), (0, 1, 3, 0, false));
        assert!((f.share - 0.5).abs() < 1e-12 && (f.agreement - 5.0 / 6.0).abs() < 1e-12, "{f:?}");
        assert!((f.threshold - 0.15).abs() < 1e-12, "{}", f.threshold);
    }
}
