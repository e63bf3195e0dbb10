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

/// A flip is told in the reports when its rule agrees with this share of profiles or more (see
/// [`best_split`]), and the pair's order holds each way in at least [`FLIP_MIN_PROFILES`]
/// profiles (a handful of profiles can always be split off by some threshold).
pub const FLIP_AGREEMENT: f64 = 0.9;
pub const FLIP_MIN_PROFILES: usize = 5;

/// One side of a threshold on one parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cut {
    pub param: usize,
    /// The side above (`true`) or below the threshold.
    pub above: bool,
    pub threshold: f64,
}

/// Where "A beats B" flips: the region of the profiles, one threshold or two, that best tells
/// those where it holds from the rest (see [`best_split`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Flip {
    pub a: usize,
    pub b: usize,
    /// How many profiles `a` beats `b` in, and that as a share of them all.
    pub wins: usize,
    pub share: f64,
    /// `a` beats `b` on this side of `cut`, and of `and` too when one threshold is not enough.
    pub cut: Cut,
    pub and: Option<Cut>,
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
    /// rule (one threshold, or a region of two) that best tells when `a` beats `b` (`a` the one
    /// that wins less often; see [`best_split`]).
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

/// The rule that best separates `wins` from the rest, scored by balanced agreement: the mean
/// of the share of wins and the share of the rest the rule places right (so a rule cannot score
/// well by calling everything the majority). First one threshold on one parameter; when that
/// falls short of [`FLIP_AGREEMENT`] on a flip big enough to tell, the region on one side of two
/// thresholds (two parameters, or a band of one) — kept only if it reaches it.
fn best_split(params: &[Vec<f64>], wins: &[bool], a: usize, b: usize) -> Option<Flip> {
    let n = wins.len();
    let total_wins = wins.iter().filter(|w| **w).count();
    if total_wins == 0 || total_wins == n {
        return None;
    }
    let split = Split::new(params, wins);
    let (cut, score) = split.best_cut(&vec![true; n], 0)?;
    let agreement = split.agreement(score);
    let mut flip = Flip { a, b, wins: total_wins, share: total_wins as f64 / n as f64, cut, and: None, agreement };
    if agreement >= FLIP_AGREEMENT || total_wins < FLIP_MIN_PROFILES {
        return Some(flip);
    }
    let mut inside = vec![false; n];
    let mut best: Option<(Cut, Cut, usize)> = None;
    for first in split.cuts() {
        // No second cut can do better than to keep every win inside the first and drop all
        // the rest: a first cut whose bound is no better than the best found is passed over.
        let wins_below = split.wins_below[first.cut.param][first.rank];
        let inside_wins = if first.cut.above { total_wins - wins_below } else { wins_below };
        let bound = split.score(inside_wins, split.rest);
        if best.map_or(split.agreement(bound) < FLIP_AGREEMENT, |b| bound <= b.2) {
            continue;
        }
        for (rank, &p) in split.order[first.cut.param].iter().enumerate() {
            inside[p] = (rank >= first.rank) == first.cut.above;
        }
        // A region is the same whichever cut is named first: the second is searched on this
        // parameter and the later ones only.
        if let Some((second, score)) = split.best_cut(&inside, first.cut.param)
            && best.is_none_or(|b| score > b.2)
        {
            best = Some((first.cut, second, score));
        }
    }
    if let Some((cut, second, score)) = best.filter(|b| split.agreement(b.2) >= FLIP_AGREEMENT) {
        (flip.cut, flip.and, flip.agreement) = (cut, Some(second), split.agreement(score));
    }
    Some(flip)
}

/// The profiles of a flip, each parameter's column sorted once.
struct Split<'a> {
    columns: Vec<Vec<f64>>,
    /// Per parameter, the profiles in ascending order of it, and how many wins lie among the
    /// first `k` of them for every `k`.
    order: Vec<Vec<usize>>,
    wins_below: Vec<Vec<usize>>,
    wins: &'a [bool],
    total_wins: usize,
    rest: usize,
}

/// A cut between sorted positions `rank - 1` and `rank` of its parameter.
struct RankedCut {
    cut: Cut,
    rank: usize,
}

impl<'a> Split<'a> {
    fn new(params: &[Vec<f64>], wins: &'a [bool]) -> Split<'a> {
        let columns: Vec<Vec<f64>> = (0..PROBABILITIES.len()).map(|j| params.iter().map(|p| p[j]).collect()).collect();
        let order: Vec<Vec<usize>> = columns
            .iter()
            .map(|column| {
                let mut order: Vec<usize> = (0..wins.len()).collect();
                order.sort_by(|&x, &y| column[x].total_cmp(&column[y]));
                order
            })
            .collect();
        let wins_below = order
            .iter()
            .map(|order| {
                std::iter::once(0)
                    .chain(order.iter().scan(0, |k, &p| {
                        *k += usize::from(wins[p]);
                        Some(*k)
                    }))
                    .collect()
            })
            .collect();
        let total_wins = wins.iter().filter(|w| **w).count();
        Split { columns, order, wins_below, wins, total_wins, rest: wins.len() - total_wins }
    }

    /// Every cut between two different values of a parameter where wins and the rest meet
    /// (the profiles on its two sides are not all wins, or all rest), each way. A best region's
    /// first cut can always be moved to one: between profiles of one kind, moving the cut
    /// changes the count of that kind alone, so the region's score, whatever its second cut,
    /// moves one way along the run and peaks at one of its ends.
    fn cuts(&self) -> Vec<RankedCut> {
        let mut cuts = Vec::new();
        for (j, order) in self.order.iter().enumerate() {
            let column = &self.columns[j];
            // Runs of equal values: where each starts, and its kind (all wins, all rest, or
            // mixed: `None`).
            let mut runs: Vec<(usize, Option<bool>)> = Vec::new();
            for (c, &p) in order.iter().enumerate() {
                match runs.last_mut() {
                    Some(run) if column[order[run.0]] == column[p] => {
                        run.1 = run.1.filter(|&w| w == self.wins[p]);
                    }
                    _ => runs.push((c, Some(self.wins[p]))),
                }
            }
            for pair in runs.windows(2) {
                let ((_, lo), (c, hi)) = (pair[0], pair[1]);
                if lo.is_none() || lo != hi {
                    let threshold = (column[order[c - 1]] + column[order[c]]) / 2.0;
                    cuts.extend(
                        [true, false].map(|above| RankedCut { cut: Cut { param: j, above, threshold }, rank: c }),
                    );
                }
            }
        }
        cuts
    }

    /// The cut on parameter `from` or a later one that best separates the wins among the
    /// profiles `inside` from the rest, the profiles outside all counted as "no win"; with its
    /// score over all profiles.
    /// Ties keep the first in (parameter, position, above before below) order; scores are
    /// compared exactly, as `wins_right · rest + rest_right · wins` (the agreement times
    /// `2 · wins · rest`), so rounding cannot break a tie.
    fn best_cut(&self, inside: &[bool], from: usize) -> Option<(Cut, usize)> {
        let rest = self.rest;
        let score = |wins_right, rest_right| self.score(wins_right, rest_right);
        let inside_wins = (0..inside.len()).filter(|&p| inside[p] && self.wins[p]).count();
        let inside_rest = inside.iter().filter(|i| **i).count() - inside_wins;
        // Rest profiles outside are placed right by every rule.
        let rest_outside = rest - inside_rest;
        let mut best: Option<(Cut, usize)> = None;
        for (j, order) in self.order.iter().enumerate().skip(from) {
            let column = &self.columns[j];
            // The cut between consecutive profiles inside: `wins_below` wins and `rest_below`
            // of the rest inside lie below it.
            let (mut wins_below, mut rest_below, mut prev) = (0, 0, None);
            for &p in order.iter().filter(|&&p| inside[p]) {
                if let Some(lo) = prev
                    && lo != column[p]
                {
                    let threshold = (lo + column[p]) / 2.0;
                    let above = score(inside_wins - wins_below, rest_outside + rest_below);
                    let below = score(wins_below, rest - rest_below);
                    for (above, score) in [(true, above), (false, below)] {
                        if best.is_none_or(|b| score > b.1) {
                            best = Some((Cut { param: j, above, threshold }, score));
                        }
                    }
                }
                if self.wins[p] {
                    wins_below += 1;
                } else {
                    rest_below += 1;
                }
                prev = Some(column[p]);
            }
        }
        best
    }

    /// The score of a rule that places `wins_right` wins and `rest_right` of the rest right.
    fn score(&self, wins_right: usize, rest_right: usize) -> usize {
        wins_right * self.rest + rest_right * self.total_wins
    }

    /// The balanced agreement of a rule scoring `score` (see [`Split::best_cut`]).
    fn agreement(&self, score: usize) -> f64 {
        score as f64 / (2 * self.total_wins * self.rest) as f64
    }
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
        assert_eq!((f.a, f.b, f.cut.param, f.cut.above, f.and, f.agreement), (0, 1, 3, true, None, 1.0));
        assert!((f.cut.threshold - 0.55).abs() < 1e-12, "{}", f.cut.threshold);
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
        assert_eq!((f.a, f.b, f.wins, f.cut.param, f.cut.above, f.and), (0, 1, 3, 0, false, None));
        assert!((f.share - 0.5).abs() < 1e-12 && (f.agreement - 5.0 / 6.0).abs() < 1e-12, "{f:?}");
        assert!((f.cut.threshold - 0.15).abs() < 1e-12, "{}", f.cut.threshold);
    }

    /// Profiles whose parameters are 0.5 but for `p0` and `p1`.
    fn grid(points: &[(f64, f64)]) -> Vec<Vec<f64>> {
        points
            .iter()
            .map(|&(p0, p1)| {
                let mut p = vec![0.5; PROBABILITIES.len()];
                (p[0], p[1]) = (p0, p1);
                p
            })
            .collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn a_region_of_two_parameters_by_hand() {
        // A 5 × 5 grid of parameters 0 and 1 (0.1, 0.3 … 0.9); x beats y where p0 > 0.4 and
        // p1 < 0.6: 9 wins, 16 rest. The best single cut, p0 > 0.4, places all 9 wins and the 10
        // rest with p0 < 0.4 right: (9/9 + 10/16) / 2 = 0.8125 (p1 < 0.6 ties it, later), short
        // of 0.9. Both cuts together place everything right: 1.0.
        let v = [0.1, 0.3, 0.5, 0.7, 0.9];
        let points: Vec<(f64, f64)> = v.iter().flat_map(|&a| v.iter().map(move |&b| (a, b))).collect();
        let wins: Vec<bool> = points.iter().map(|&(a, b)| a > 0.4 && b < 0.6).collect();
        let f = best_split(&grid(&points), &wins, 0, 1).unwrap();
        let and = f.and.expect("two cuts");
        assert_eq!((f.wins, f.cut.param, f.cut.above, and.param, and.above, f.agreement), (9, 0, true, 1, false, 1.0));
        assert!(close(f.cut.threshold, 0.4) && close(and.threshold, 0.6), "{f:?}");
        // Without the second parameter's wins pattern the one cut scores (9/9 + 10/16) / 2 and
        // is enough for nothing more: the wins where p0 > 0.4, whatever p1.
        let wins: Vec<bool> = points.iter().map(|&(a, _)| a > 0.4).collect();
        let f = best_split(&grid(&points), &wins, 0, 1).unwrap();
        assert_eq!((f.cut.param, f.cut.above, f.and, f.agreement), (0, true, None, 1.0));
    }

    #[test]
    fn a_band_of_one_parameter_and_no_second_cut_that_does_not_reach_the_bar() {
        // p0 runs 0.0 … 0.9; x beats y where 0.25 < p0 < 0.75 (five wins, five rest). One cut:
        // p0 > 0.25 places the 5 wins and the 3 rest below it right, (5/5 + 3/5) / 2 = 0.8. The
        // band places all right.
        let points: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i) / 10.0, 0.5)).collect();
        let wins: Vec<bool> = (0..10).map(|i| (3..=7).contains(&i)).collect();
        let f = best_split(&grid(&points), &wins, 0, 1).unwrap();
        let and = f.and.expect("a band");
        assert_eq!((f.cut.param, f.cut.above, and.param, and.above, f.agreement), (0, true, 0, false, 1.0));
        assert!(close(f.cut.threshold, 0.25) && close(and.threshold, 0.75), "{f:?}");
        // Every other profile wins: no region of two cuts does better than a one-cut rule by
        // enough to reach 0.9, so the best single cut stays, alone. p0 < 0.05 places the first
        // win and the 5 rest right, (1/5 + 5/5) / 2 = 0.6; nothing scores more.
        let wins: Vec<bool> = (0..10).map(|i| i % 2 == 0).collect();
        let f = best_split(&grid(&points), &wins, 0, 1).unwrap();
        assert_eq!((f.cut.param, f.cut.above, f.and), (0, false, None), "{f:?}");
        assert!(close(f.cut.threshold, 0.05) && close(f.agreement, 0.6), "{f:?}");
    }

    /// The best balanced agreement of every rule, one threshold or a region of two, found by
    /// trying them all (the cuts between the distinct values of each parameter, each way).
    fn best_by_brute_force(params: &[Vec<f64>], wins: &[bool]) -> (f64, f64) {
        let (w, r) = (wins.iter().filter(|x| **x).count(), wins.iter().filter(|x| !**x).count());
        type Rule = Box<dyn Fn(&[f64]) -> bool>;
        let mut cuts: Vec<Rule> = Vec::new();
        for j in 0..PROBABILITIES.len() {
            let mut values: Vec<f64> = params.iter().map(|p| p[j]).collect();
            values.sort_by(f64::total_cmp);
            values.dedup();
            for t in values.windows(2).map(|v| (v[0] + v[1]) / 2.0) {
                cuts.push(Box::new(move |p: &[f64]| p[j] > t));
                cuts.push(Box::new(move |p: &[f64]| p[j] < t));
            }
        }
        let agreement = |rule: &dyn Fn(&[f64]) -> bool| {
            let right = |win: bool| params.iter().zip(wins).filter(|(p, x)| **x == win && rule(p) == win).count();
            (right(true) * r + right(false) * w) as f64 / (2 * w * r) as f64
        };
        let one = cuts.iter().map(|c| agreement(c)).fold(0.0, f64::max);
        let two = cuts
            .iter()
            .flat_map(|c1| cuts.iter().map(move |c2| (c1, c2)))
            .map(|(c1, c2)| agreement(&|p: &[f64]| c1(p) && c2(p)))
            .fold(0.0, f64::max);
        (one, two)
    }

    #[test]
    fn the_pruned_search_finds_the_best_rule_of_the_brute_force() {
        // Three parameters on a coarse grid (so values tie), wins in a region of two of them
        // with some profiles flipped: the search must reach the best agreement of all rules.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |k: u64| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % k
        };
        let mut regions = 0;
        for case in 0..150 {
            let n = 20 + next(20) as usize;
            let params: Vec<Vec<f64>> = (0..n)
                .map(|_| {
                    let mut p = vec![0.5; PROBABILITIES.len()];
                    for v in p.iter_mut().take(3) {
                        *v = (1 + next(6)) as f64 / 10.0;
                    }
                    p
                })
                .collect();
            let (a, b) = ((1 + next(5)) as f64 / 10.0, (2 + next(5)) as f64 / 10.0);
            let wins: Vec<bool> = params.iter().map(|p| (p[0] > a && p[1] < b) != (next(12) == 0)).collect();
            let total = wins.iter().filter(|x| **x).count();
            let Some(f) = best_split(&params, &wins, 0, 1) else {
                assert!(total == 0 || total == n, "case {case}");
                continue;
            };
            let (one, two) = best_by_brute_force(&params, &wins);
            let expected =
                if one >= FLIP_AGREEMENT || total < FLIP_MIN_PROFILES || two < FLIP_AGREEMENT { one } else { two };
            assert_eq!(f.agreement, expected, "case {case}: {f:?}");
            assert_eq!(f.and.is_some(), expected > one, "case {case}: {f:?}");
            // The rule as told places the profiles as its agreement says.
            let side = |c: &Cut, p: &[f64]| if c.above { p[c.param] > c.threshold } else { p[c.param] < c.threshold };
            let told = |p: &[f64]| side(&f.cut, p) && f.and.as_ref().is_none_or(|c| side(c, p));
            let right = |win: bool| params.iter().zip(&wins).filter(|(p, x)| **x == win && told(p) == win).count();
            let (w, r) = (total, n - total);
            assert_eq!(f.agreement, (right(true) * r + right(false) * w) as f64 / (2 * w * r) as f64, "case {case}");
            regions += usize::from(f.and.is_some());
        }
        // The cases exercise both answers.
        assert!(regions > 10, "{regions}");
    }
}
