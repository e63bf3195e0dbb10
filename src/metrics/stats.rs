//! Intervals: Wilson score for rates, normal approximation for paired mean differences.

/// z for a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// Wilson score interval for `k` successes in `n` trials.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 0.0);
    }
    let n_f = n as f64;
    let p = k as f64 / n_f;
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n_f;
    let center = (p + z2 / (2.0 * n_f)) / denom;
    let half = Z95 * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt() / denom;
    // At k = 0 and k = n the bound is exactly 0 or 1; rounding must not move it.
    let lo = if k == 0 { 0.0 } else { (center - half).max(0.0) };
    let hi = if k == n { 1.0 } else { (center + half).min(1.0) };
    (lo, hi)
}

/// Mean and 95% interval of paired differences from exact sums (`sum`, `sum_sq`) over `n`.
pub fn paired_mean_ci(sum: i128, sum_sq: i128, n: u64) -> (f64, f64, f64) {
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let n_i = i128::from(n);
    let mean = sum as f64 / n as f64;
    if n < 2 {
        return (mean, mean, mean);
    }
    // Sample variance from exact integers: (n·Σx² − (Σx)²) / (n(n−1)).
    let num = n_i * sum_sq - sum * sum;
    let var = num as f64 / (n as f64 * (n as f64 - 1.0));
    let half = Z95 * (var.max(0.0) / n as f64).sqrt();
    (mean, mean - half, mean + half)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_reference_values() {
        // Reference: statsmodels proportion_confint(10, 100, method="wilson").
        let (lo, hi) = wilson(10, 100);
        assert!((lo - 0.055_229_1).abs() < 1e-6, "{lo}");
        assert!((hi - 0.174_365_7).abs() < 1e-6, "{hi}");
        let (lo, hi) = wilson(0, 50);
        assert_eq!(lo, 0.0);
        assert!(hi > 0.0 && hi < 0.1);
        assert_eq!(wilson(0, 0), (0.0, 0.0));
    }

    #[test]
    fn paired_ci() {
        // differences 1, 2, 3: mean 2, sd 1, half-width 1.96/sqrt(3)
        let (m, lo, hi) = paired_mean_ci(6, 14, 3);
        assert_eq!(m, 2.0);
        assert!((hi - m - Z95 / 3f64.sqrt()).abs() < 1e-12);
        assert!((m - lo - Z95 / 3f64.sqrt()).abs() < 1e-12);
        assert_eq!(paired_mean_ci(0, 0, 10), (0.0, 0.0, 0.0));
    }
}
