//! A fleet's retry budget, as gRPC, Envoy and Finagle keep one: a retry is allowed while the
//! retries in the last `window_ms` stay within `ratio` × the first attempts in it (or within
//! `min` retries, so a quiet fleet can still retry at all). Counted in ten slices of the
//! window, so old attempts drop out in steps of a tenth of it.

const SLICES: usize = 10;

#[derive(Clone, Debug, PartialEq)]
pub struct RetryBudget {
    /// Retries allowed per 1000 first attempts.
    per_mille: u64,
    min: u64,
    slice_ms: u64,
    /// Index of the slice `firsts[current % SLICES]` counts.
    current: u64,
    firsts: [u64; SLICES],
    retries: [u64; SLICES],
}

impl RetryBudget {
    /// `ratio` is kept to 0.001; a window under ten milliseconds counts as ten.
    pub fn new(ratio: f64, min: u32, window_ms: u64) -> RetryBudget {
        RetryBudget {
            per_mille: (ratio.max(0.0) * 1000.0 + 1e-6).floor() as u64,
            min: u64::from(min),
            slice_ms: (window_ms / SLICES as u64).max(1),
            current: 0,
            firsts: [0; SLICES],
            retries: [0; SLICES],
        }
    }

    /// Moves the window to `now_ms`, forgetting the slices that left it.
    fn advance(&mut self, now_ms: u64) {
        let slice = now_ms / self.slice_ms;
        if slice <= self.current {
            return;
        }
        let gone = (slice - self.current).min(SLICES as u64);
        for k in 1..=gone {
            let i = ((self.current + k) % SLICES as u64) as usize;
            self.firsts[i] = 0;
            self.retries[i] = 0;
        }
        self.current = slice;
    }

    fn at(&self) -> usize {
        (self.current % SLICES as u64) as usize
    }

    /// A first attempt at `now_ms` adds to what retries may spend.
    pub fn first(&mut self, now_ms: u64) {
        self.advance(now_ms);
        self.firsts[self.at()] += 1;
    }

    /// Whether a retry at `now_ms` is within the budget; an allowed retry is counted.
    pub fn try_retry(&mut self, now_ms: u64) -> bool {
        self.advance(now_ms);
        let firsts: u64 = self.firsts.iter().sum();
        let retries: u64 = self.retries.iter().sum();
        let allowed = (retries + 1) * 1000 <= (self.per_mille * firsts).max(self.min * 1000);
        if allowed {
            let i = self.at();
            self.retries[i] += 1;
        }
        allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn retries_stay_within_the_ratio_of_first_attempts() {
        // 20% over 10 s: ten first attempts pay for two retries.
        let mut b = RetryBudget::new(0.2, 0, 10_000);
        (0..10).for_each(|_| b.first(0));
        assert_eq!((0..3).map(|_| b.try_retry(5)).collect::<Vec<_>>(), [true, true, false]);
        // A new first attempt does not reach the next retry on its own (11 × 0.2 = 2.2).
        b.first(6);
        assert!(!b.try_retry(6));
        // Once the window has passed, the old attempts are gone and so is the budget.
        assert!(!b.try_retry(20_000));
        // `min` lets a quiet fleet retry.
        let mut quiet = RetryBudget::new(0.1, 2, 1_000);
        assert_eq!((0..3).map(|_| quiet.try_retry(0)).collect::<Vec<_>>(), [true, true, false]);
        assert!(quiet.try_retry(1_000), "the first retries left the window");
    }

    proptest! {
        /// A retry is allowed only when, with it, the retries of the window's slices are
        /// within the budget the window's first attempts give.
        #[test]
        fn a_budget_never_overspends(
            ratio_milli in 0u64..2000,
            min in 0u32..3,
            ops in prop::collection::vec((any::<bool>(), 0u64..300), 1..400),
        ) {
            let mut b = RetryBudget::new(ratio_milli as f64 / 1000.0, min, 1_000);
            let mut now = 0;
            let mut log: Vec<(u64, bool)> = Vec::new(); // (100 ms slice, is a retry)
            for (retry, gap) in ops {
                now += gap;
                let slice = now / 100;
                let live = |log: &[(u64, bool)], retries: bool| {
                    log.iter().filter(|(s, r)| s + 10 > slice && *r == retries).count() as u64
                };
                if !retry {
                    b.first(now);
                    log.push((slice, false));
                    continue;
                }
                let within = (live(&log, true) + 1) * 1000 <= (ratio_milli * live(&log, false)).max(u64::from(min) * 1000);
                prop_assert_eq!(b.try_retry(now), within);
                if within {
                    log.push((slice, true));
                }
            }
        }
    }
}
