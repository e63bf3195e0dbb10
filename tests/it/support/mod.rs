//! What the feature files share, none of it a test: CSV reports read by column name, the
//! single-run oracle cases, random scenarios and the invariants observer for properties, and
//! the mean and standard error of Monte Carlo checks.

pub mod arbitrary;
pub mod csv;
pub mod invariants;
pub mod oracle;

/// Runs of a Monte Carlo check against an expectation computed by hand.
pub const RUNS: u64 = 20_000;

/// Mean and standard error of a per-run quantity.
pub fn mean_se(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}
