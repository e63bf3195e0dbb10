//! What a fitted profile predicts for a scenario, set beside what held-out live runs of it
//! showed (`tracefault predict`): per figure a point, a prediction interval for a sample of the
//! live runs' size, the observed value, and whether it lies inside.
//!
//! The interval carries both uncertainties a user meets: the profile's (each draw takes every
//! probability uniformly from its fitted range, by a seeded Latin hypercube, as `sweep` does; a
//! range is a confidence interval, so this is an approximation that widens the interval) and
//! the sampling noise of as few runs as were observed (each draw simulates exactly that many
//! runs). The four figures are checked together at 95%: each interval is the central 98.75%
//! (Bonferroni) of the draws' figures, nearest rank, so a model the simulator does describe
//! fails the check at most about one time in twenty.

use crate::engine::Scenario;
use crate::engine::events::TerminatedBy;
use crate::sweep::{latin_hypercube, profile_at};

/// The figures compared, in order: names as in `summary.csv`.
pub const FIGURES: [&str; 4] = ["success_rate", "loop_rate", "gave_up_rate", "calls_mean"];

/// What `summary.csv` says of each figure (the definitions are the same).
pub const MEANINGS: [&str; 4] = [
    "share of runs that ended with an answer",
    "share of runs that ended in a loop (`step_cap` or `loop_guard`)",
    "share of runs that ended `gave_up`",
    "mean calls per run (model calls and tool calls, retries included)",
];

/// One run as the figures need it: how it ended, and its calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunEnd {
    pub ended: TerminatedBy,
    pub calls: u64,
}

/// The four figures of a set of runs, by their definitions (all zero for no runs).
pub fn figures(runs: &[RunEnd]) -> [f64; 4] {
    if runs.is_empty() {
        return [0.0; 4];
    }
    let n = runs.len() as f64;
    let share = |f: &dyn Fn(TerminatedBy) -> bool| runs.iter().filter(|r| f(r.ended)).count() as f64 / n;
    [
        share(&|t| t == TerminatedBy::Answer),
        share(&TerminatedBy::is_loop),
        share(&|t| t == TerminatedBy::GaveUp),
        runs.iter().map(|r| r.calls as f64).sum::<f64>() / n,
    ]
}

/// Each figure's share of the draws its interval leaves out at each end: 5% over four figures
/// (Bonferroni), halved.
pub const TAIL: f64 = 0.05 / 4.0 / 2.0;

/// Each figure's prediction.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// The mean over every simulated run.
    pub point: [f64; 4],
    /// The prediction interval for `runs` runs (the central `1 − 2·TAIL` of the draws).
    pub interval: [[f64; 2]; 4],
    pub draws: usize,
    pub runs: u64,
}

/// Simulates `draws` samples of `runs` runs of strategy `strategy`, each under a profile drawn
/// from the scenario's profile's ranges (seeded by `seed`; the probabilities', and the
/// measures' that have one): the prediction for `runs` runs.
pub fn predict(sc: &Scenario, strategy: usize, runs: u64, draws: usize, seed: u64) -> Prediction {
    use crate::engine::profile::{MEASURES, PROBABILITIES};
    let points = latin_hypercube(draws, PROBABILITIES.len() + MEASURES.len(), seed);
    let mut samples: Vec<[f64; 4]> = Vec::with_capacity(draws);
    let (mut total, mut ends) = ([0.0; 4], Vec::with_capacity(runs as usize));
    let mut drawn = sc.clone();
    for (d, point) in points.iter().enumerate() {
        drawn.profile = profile_at(&sc.profile, point, &[]);
        ends.clear();
        for i in 0..runs {
            let m = crate::suite::run_one(&drawn, strategy, d as u64 * runs + i, &mut ());
            ends.push(RunEnd { ended: m.terminated_by(), calls: m.calls() });
        }
        let f = figures(&ends);
        for (t, v) in total.iter_mut().zip(f) {
            *t += v;
        }
        samples.push(f);
    }
    let point = total.map(|t| t / draws.max(1) as f64);
    let interval = std::array::from_fn(|k| {
        let mut v: Vec<f64> = samples.iter().map(|s| s[k]).collect();
        v.sort_by(f64::total_cmp);
        [nearest_rank(&v, TAIL), nearest_rank(&v, 1.0 - TAIL)]
    });
    Prediction { point, interval, draws, runs }
}

/// The `q` quantile of sorted `v` by nearest rank (0 for none).
fn nearest_rank(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// The figures whose observed value lies outside the prediction's interval.
pub fn outside(p: &Prediction, observed: &[f64; 4]) -> Vec<&'static str> {
    (0..FIGURES.len()).filter(|&k| !inside(observed[k], p.interval[k])).map(|k| FIGURES[k]).collect()
}

/// Whether `observed` lies inside `[lo, hi]` (a rounding's width of slack at each end).
pub fn inside(observed: f64, [lo, hi]: [f64; 2]) -> bool {
    observed >= lo - 1e-9 && observed <= hi + 1e-9
}

/// In words: how far the simulator, with this profile, can be trusted for the model behind
/// the live runs.
pub fn verdict(p: &Prediction, observed: &[f64; 4]) -> String {
    let outside = outside(p, observed);
    let mut s = if outside.is_empty() {
        format!(
            "All four figures of the {} live runs lie inside the fitted simulator's prediction intervals: no evidence \
             that the simulator, with this profile, misdescribes this model on this scenario. Its figures for it are as \
             good as the intervals are narrow.",
            p.runs
        )
    } else {
        format!(
            "{} of the four figures of the {} live runs lie outside the fitted simulator's prediction intervals ({}): \
             for this model, do not rely on the simulator's {}. Either the model does something the profile cannot \
             express (the profile's comments list the follow-ups observed), or the live runs differ from those it was \
             fitted on.",
            outside.len(),
            p.runs,
            outside.join(", "),
            if outside.len() == 1 { "figure" } else { "figures" }
        )
    };
    if p.runs < 10 {
        s.push_str(&format!(
            " With only {} live runs the intervals are wide: the check can catch large departures only.",
            p.runs
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(ended: TerminatedBy, calls: u64) -> RunEnd {
        RunEnd { ended, calls }
    }

    #[test]
    fn figures_follow_their_definitions() {
        // By hand: 2 answers, 1 step cap, 1 loop guard, 1 give-up of 5 runs; calls 4+6+20+20+3 = 53.
        let runs = [
            end(TerminatedBy::Answer, 4),
            end(TerminatedBy::Answer, 6),
            end(TerminatedBy::StepCap, 20),
            end(TerminatedBy::LoopGuard, 20),
            end(TerminatedBy::GaveUp, 3),
        ];
        assert_eq!(figures(&runs), [0.4, 0.4, 0.2, 10.6]);
        assert_eq!(figures(&[]), [0.0; 4]);
    }

    #[test]
    fn the_interval_is_the_nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        // 0.025 × 200 = 5 → the 5th; 0.975 × 200 = 195 → the 195th.
        assert_eq!((nearest_rank(&v, 0.025), nearest_rank(&v, 0.975)), (5.0, 195.0));
        // The check's tails: 0.00625 × 1000 = 6.25 → the 7th of 1000; 0.99375 × 1000 = 993.75 → the 994th.
        let w: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!((nearest_rank(&w, TAIL), nearest_rank(&w, 1.0 - TAIL)), (7.0, 994.0));
        assert_eq!(nearest_rank(&[7.0], 0.025), 7.0);
        assert!(inside(0.5, [0.5, 0.7]) && inside(0.7, [0.5, 0.7]) && !inside(0.71, [0.5, 0.7]));
    }

    #[test]
    fn a_prediction_is_the_same_each_time_and_holds_its_point() {
        let src = "name = \"p\"\nseed = 3\nstrategies = [\"error-string\"]\n[task]\n[[task.steps]]\ntool = \"search\"\n\
                   args = { q = 1 }\nresult = { r = 1 }\n[[faults]]\ntarget = \"search\"\nprobability = 0.5\nhttp = 503\n";
        let sc = crate::scenario::load::load_str(src, std::path::Path::new("p.toml")).unwrap();
        let a = predict(&sc, 0, 20, 50, 9);
        assert_eq!(a, predict(&sc, 0, 20, 50, 9));
        assert_ne!(a, predict(&sc, 0, 20, 50, 10), "the seed draws other profiles");
        for k in 0..4 {
            assert!(a.interval[k][0] <= a.point[k] && a.point[k] <= a.interval[k][1], "{a:?}");
        }
        // Every run ends one way: the shares of answers and give-ups (no loop here) add to 1.
        assert!((a.point[0] + a.point[2] - 1.0).abs() < 1e-9, "{a:?}");
    }

    /// A measure with a range is drawn from it: a model call of 100 ms always finishes three
    /// steps within a 3 000 ms budget (3 × (100 + 200 ms of tool) + 100 = 1 000 ms), one of
    /// 2 000 ms never does (the second call would end at 4 200 ms), so a range of 100 to 2 000
    /// ms predicts some runs cut short where the fixed value predicts none.
    #[test]
    fn a_measures_range_is_drawn_from() {
        let src = |latency: &str| {
            format!(
                "name = \"p\"\nseed = 3\n[strategies.b]\nencoding = \"prefix\"\nrouting = \"model\"\n\
                 partials = \"ambiguous\"\nbudgets = true\n[policy]\nmax_virtual_ms = 3000\n\
                 [profile]\nmodel_latency_ms = {latency}\n[task]\n[[task.steps]]\ntool = \"s\"\nargs = {{ q = 1 }}\n\
                 [[task.steps]]\ntool = \"s\"\nargs = {{ q = 2 }}\n[[task.steps]]\ntool = \"s\"\nargs = {{ q = 3 }}\n"
            )
        };
        let load =
            |latency: &str| crate::scenario::load::load_str(&src(latency), std::path::Path::new("p.toml")).unwrap();
        let fixed = predict(&load("100"), 0, 10, 40, 9);
        assert_eq!((fixed.point[0], fixed.interval[0]), (1.0, [1.0, 1.0]), "{fixed:?}");
        let ranged = predict(&load("{ value = 100, range = [100, 2000] }"), 0, 10, 40, 9);
        assert!(ranged.point[0] < 0.9 && ranged.point[0] > 0.1, "{ranged:?}");
        assert_eq!(ranged.interval[0], [0.0, 1.0], "{ranged:?}");
        assert!(ranged.point[3] < fixed.point[3], "fewer calls when cut short: {ranged:?}");
    }

    #[test]
    fn the_verdict_names_each_figure_outside_and_warns_of_few_runs() {
        let p = Prediction {
            point: [0.8, 0.0, 0.2, 5.0],
            interval: [[0.6, 1.0], [0.0, 0.1], [0.0, 0.4], [4.0, 6.0]],
            draws: 100,
            runs: 8,
        };
        let ok = verdict(&p, &[0.7, 0.0, 0.3, 5.5]);
        assert!(ok.starts_with("All four figures of the 8 live runs lie inside"), "{ok}");
        assert!(ok.contains("no evidence"), "{ok}");
        assert!(ok.contains("With only 8 live runs"), "{ok}");
        let bad = verdict(&p, &[0.5, 0.0, 0.5, 9.0]);
        assert!(bad.starts_with("3 of the four figures"), "{bad}");
        assert!(bad.contains("(success_rate, gave_up_rate, calls_mean)"), "{bad}");
    }
}
