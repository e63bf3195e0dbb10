//! The orchestrator's retry policy: which failures it retries, how often, and how long it waits.

use crate::fault::ErrorClass;

/// Backoff formulas (AWS "Exponential Backoff and Jitter"; `sdk` is the OpenAI/Anthropic rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backoff {
    None,
    Constant,
    Exponential,
    FullJitter,
    EqualJitter,
    Decorrelated,
    Sdk,
}

impl Backoff {
    pub const NAMES: [&'static str; 7] =
        ["none", "constant", "exponential", "full-jitter", "equal-jitter", "decorrelated", "sdk"];

    pub fn parse(s: &str) -> Option<Backoff> {
        Some(match s {
            "none" => Backoff::None,
            "constant" => Backoff::Constant,
            "exponential" => Backoff::Exponential,
            "full-jitter" => Backoff::FullJitter,
            "equal-jitter" => Backoff::EqualJitter,
            "decorrelated" => Backoff::Decorrelated,
            "sdk" => Backoff::Sdk,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Attempts per call, counting the first (1 = never retry).
    pub max_attempts: u32,
    pub backoff: Backoff,
    pub base_ms: u64,
    pub cap_ms: u64,
    pub honor_retry_after: bool,
    /// A server wait longer than this is not waited for: the failure goes on (SDK rule).
    pub retry_after_cap_s: u64,
    /// Retries allowed per first attempt across the run (a retry budget), if any.
    pub budget_ratio: Option<f64>,
    /// A fleet's budget counts the whole fleet's retries and first attempts over this window.
    pub budget_window_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::FullJitter,
            base_ms: 500,
            cap_ms: 8000,
            honor_retry_after: true,
            retry_after_cap_s: 60,
            budget_ratio: None,
            budget_window_ms: 10_000,
        }
    }
}

/// Upper bound on `max_attempts`, so jitter slots and loops stay bounded.
pub const MAX_ATTEMPTS_LIMIT: u32 = 1000;

impl RetryPolicy {
    /// Whether the orchestrator may retry after attempt `attempt` (1-based) of one call failed
    /// with `class`. Non-retryable classes are never retried, whatever else holds.
    pub fn may_retry(&self, class: ErrorClass, attempt: u32, retry_after_ms: Option<u64>) -> bool {
        if !class.retryable() || attempt >= self.max_attempts {
            return false;
        }
        match retry_after_ms {
            Some(ms) if self.honor_retry_after => ms <= self.retry_after_cap_s * 1000,
            _ => true,
        }
    }

    /// Whether the retry budget allows one more retry, given the run's counts so far.
    pub fn budget_allows(&self, retries_so_far: u32, first_attempts: u32) -> bool {
        match self.budget_ratio {
            None => true,
            Some(ratio) => f64::from(retries_so_far + 1) <= (ratio * f64::from(first_attempts)).max(1.0),
        }
    }

    /// Delay before retry number `retry` (0 = the first retry), given the previous delay and
    /// a uniform draw `u` in [0, 1). A known `retry-after` is a floor when honoured.
    pub fn delay_ms(&self, retry: u32, prev_ms: u64, u: f64, retry_after_ms: Option<u64>) -> u64 {
        let expo = self.base_ms.saturating_mul(1u64 << retry.min(40)).min(self.cap_ms);
        let d = match self.backoff {
            Backoff::None => 0,
            Backoff::Constant => self.base_ms,
            Backoff::Exponential => expo,
            Backoff::FullJitter => (u * expo as f64) as u64,
            Backoff::EqualJitter => expo / 2 + (u * (expo / 2) as f64) as u64,
            Backoff::Decorrelated => {
                let hi = prev_ms.max(self.base_ms).saturating_mul(3);
                let lo = self.base_ms;
                (lo + (u * hi.saturating_sub(lo) as f64) as u64).min(self.cap_ms)
            }
            Backoff::Sdk => {
                let secs = (0.5 * f64::from(1u32 << retry.min(20))).min(8.0);
                (secs * (1.0 - 0.25 * u) * 1000.0) as u64
            }
        };
        match retry_after_ms {
            Some(ra) if self.honor_retry_after => d.max(ra),
            _ => d,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(backoff: Backoff) -> RetryPolicy {
        RetryPolicy { backoff, ..RetryPolicy::default() }
    }

    #[test]
    fn never_retries_non_retryable() {
        let p = RetryPolicy { max_attempts: 10, ..RetryPolicy::default() };
        for c in [ErrorClass::BadArgs, ErrorClass::Terminal, ErrorClass::Partial] {
            assert!(!p.may_retry(c, 1, None));
        }
        assert!(p.may_retry(ErrorClass::Transient, 1, None));
        assert!(!p.may_retry(ErrorClass::Transient, 10, None));
    }

    #[test]
    fn long_retry_after_is_not_waited_for() {
        let p = RetryPolicy::default();
        assert!(p.may_retry(ErrorClass::RateLimited, 1, Some(60_000)));
        assert!(!p.may_retry(ErrorClass::RateLimited, 1, Some(61_000)));
    }

    #[test]
    fn formulas() {
        assert_eq!(policy(Backoff::None).delay_ms(3, 0, 0.5, None), 0);
        assert_eq!(policy(Backoff::Constant).delay_ms(3, 0, 0.5, None), 500);
        assert_eq!(policy(Backoff::Exponential).delay_ms(0, 0, 0.5, None), 500);
        assert_eq!(policy(Backoff::Exponential).delay_ms(2, 0, 0.5, None), 2000);
        assert_eq!(policy(Backoff::Exponential).delay_ms(9, 0, 0.5, None), 8000);
        assert_eq!(policy(Backoff::FullJitter).delay_ms(2, 0, 0.25, None), 500);
        assert_eq!(policy(Backoff::EqualJitter).delay_ms(2, 0, 0.5, None), 1500);
        assert_eq!(policy(Backoff::Decorrelated).delay_ms(0, 0, 0.0, None), 500);
        assert_eq!(policy(Backoff::Decorrelated).delay_ms(1, 1000, 1.0 - 1e-9, None), 3000 - 1);
        assert_eq!(policy(Backoff::Sdk).delay_ms(0, 0, 0.0, None), 500);
        assert_eq!(policy(Backoff::Sdk).delay_ms(5, 0, 0.0, None), 8000);
        assert_eq!(policy(Backoff::Sdk).delay_ms(1, 0, 1.0, None), 750);
        assert_eq!(policy(Backoff::None).delay_ms(0, 0, 0.0, Some(12_000)), 12_000);
        let ignore = RetryPolicy { honor_retry_after: false, ..policy(Backoff::None) };
        assert_eq!(ignore.delay_ms(0, 0, 0.0, Some(12_000)), 0);
    }

    #[test]
    fn budget() {
        let p = RetryPolicy { budget_ratio: Some(0.1), ..RetryPolicy::default() };
        assert!(p.budget_allows(0, 1));
        assert!(!p.budget_allows(1, 10));
        assert!(p.budget_allows(1, 20));
    }
}
