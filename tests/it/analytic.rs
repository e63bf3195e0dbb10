//! The simulator against expectations computed by hand.

use std::path::Path;

use tracefault::metrics::aggregate::Aggregate;
use tracefault::scenario::load::load_str;
use tracefault::suite::run_one;

const RUNS: u64 = 20_000;

/// Mean and standard error of a per-run quantity.
fn mean_se(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

/// An ambiguous result that sticks, under a strategy that passes "more may be available"
/// through: the model asks again with p = p_continue until it stops or the step cap (25 model
/// turns) ends the run. Tool calls are min(G, 25) with G ~ Geometric(1 − p), so
/// E[tool calls] = (1 − p²⁵)/(1 − p), and the run loops iff G ≥ 25: P = p²⁴.
#[test]
fn geometric_loop_of_p_continue() {
    let p: f64 = 0.93;
    let src = format!(
        "name = \"geo\"\nstrategies = [\"error-string\"]\n[profile]\np_continue = {p}\n[task]\n[[task.steps]]\ntool = \"find\"\n\
         [[faults]]\ntarget = \"find\"\nat = [1]\nfault = \"ambiguous\"\n"
    );
    let sc = load_str(&src, Path::new("geo.toml")).unwrap();
    let mut tool_calls = Vec::new();
    let mut loops = Vec::new();
    let mut agg = Aggregate::default();
    for run in 0..RUNS {
        let m = run_one(&sc, 0, run, &mut ());
        tool_calls.push(m.tool_calls as f64);
        loops.push(f64::from(u8::from(m.terminated_by().is_loop())));
        agg.add(&m, run);
    }
    let (mean, se) = mean_se(&tool_calls);
    let expect = (1.0 - p.powi(25)) / (1.0 - p);
    assert!((mean - expect).abs() < 3.0 * se, "tool calls {mean} ± {se}, expected {expect}");
    let (rate, se) = mean_se(&loops);
    let expect = p.powi(24);
    assert!((rate - expect).abs() < 3.0 * se, "loop rate {rate} ± {se}, expected {expect}");
    // The same fault under a strategy that states the result is complete: one call, no loop.
    let sc = load_str(&src.replace("error-string", "five-field"), Path::new("geo.toml")).unwrap();
    for run in 0..200 {
        let m = run_one(&sc, 0, run, &mut ());
        assert_eq!((m.tool_calls, m.model_calls), (1, 2));
    }
}

/// A transient fault with probability q on every attempt, retried by the orchestrator up to 3
/// attempts; the model gives up on whatever reaches it. Then E[orchestrator retries] = q + q²
/// and P(gave up) = q³.
#[test]
fn orchestrator_retries_of_independent_faults() {
    let q: f64 = 0.4;
    let src = format!(
        "name = \"retry\"\nstrategies = [\"five-field\"]\n[profile]\np_retry_transient = 0.0\n[task]\n[[task.steps]]\ntool = \"t\"\n\
         [[faults]]\ntarget = \"t\"\nprobability = {q}\nhttp = 503\n"
    );
    let sc = load_str(&src, Path::new("retry.toml")).unwrap();
    let (mut retries, mut gave_up) = (Vec::new(), Vec::new());
    for run in 0..RUNS {
        let m = run_one(&sc, 0, run, &mut ());
        retries.push(m.orchestrator_retries as f64);
        gave_up.push(f64::from(u8::from(m.terminated_by().name() == "gave_up")));
    }
    let (mean, se) = mean_se(&retries);
    assert!((mean - (q + q * q)).abs() < 3.0 * se, "retries {mean} ± {se}");
    let (rate, se) = mean_se(&gave_up);
    assert!((rate - q.powi(3)).abs() < 3.0 * se, "gave up {rate} ± {se}");
}
