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

/// Sample standard deviation from exact sums over `n` (0 below two values).
pub fn sample_sd(sum: u128, sum_sq: u128, n: u64) -> f64 {
    if n < 2 {
        return 0.0;
    }
    let (s, q, n) = (sum as f64, sum_sq as f64, n as f64);
    ((n * q - s * s) / (n * (n - 1.0))).max(0.0).sqrt()
}

/// Difference of two independent rates, `k2/n2 − k1/n1`, with Newcombe's hybrid score
/// interval (his method 10: the two Wilson intervals combined).
pub fn newcombe(k1: u64, n1: u64, k2: u64, n2: u64) -> (f64, f64, f64) {
    if n1 == 0 || n2 == 0 {
        return (0.0, 0.0, 0.0);
    }
    let (p1, p2) = (k1 as f64 / n1 as f64, k2 as f64 / n2 as f64);
    let ((l1, u1), (l2, u2)) = (wilson(k1, n1), wilson(k2, n2));
    let d = p2 - p1;
    (d, d - ((p2 - l2).powi(2) + (u1 - p1).powi(2)).sqrt(), d + ((u2 - p2).powi(2) + (p1 - l1).powi(2)).sqrt())
}

/// Difference of two independent means, `m2 − m1`, with a 95% Welch interval (normal
/// approximation: the runs are many).
pub fn welch(m1: f64, sd1: f64, n1: u64, m2: f64, sd2: f64, n2: u64) -> (f64, f64, f64) {
    let d = m2 - m1;
    if n1 == 0 || n2 == 0 {
        return (d, d, d);
    }
    let half = Z95 * (sd1 * sd1 / n1 as f64 + sd2 * sd2 / n2 as f64).sqrt();
    (d, d - half, d + half)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newcombe_reproduces_the_papers_example() {
        // Newcombe (1998), Statistics in Medicine 17:873, example (a): 56/70 − 48/80 = 0.2,
        // method 10 (hybrid score, no continuity correction): 0.0524 to 0.3339.
        let (d, lo, hi) = newcombe(48, 80, 56, 70);
        assert!((d - 0.2).abs() < 1e-12);
        assert_eq!((format!("{lo:.4}"), format!("{hi:.4}")), ("0.0524".to_owned(), "0.3339".to_owned()));
        assert_eq!(newcombe(0, 0, 3, 4), (0.0, 0.0, 0.0));
    }

    #[test]
    fn welch_and_sample_sd_by_hand() {
        // se = sqrt(4/100 + 9/50) = sqrt(0.22); half = 1.96 × 0.4690 = 0.9193.
        let (d, lo, hi) = welch(10.0, 2.0, 100, 11.0, 3.0, 50);
        assert_eq!((d, format!("{lo:.4}"), format!("{hi:.4}")), (1.0, "0.0807".to_owned(), "1.9193".to_owned()));
        // 1, 2, 3, 4: variance 20/12.
        assert!((sample_sd(10, 30, 4) - (20.0f64 / 12.0).sqrt()).abs() < 1e-12);
        assert_eq!(sample_sd(5, 25, 1), 0.0);
    }

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
