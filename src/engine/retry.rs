//! The orchestrator's retry policy: which failures it retries, how often, and how long it waits.

use crate::fault::ErrorClass;

/// Backoff formulas (AWS "Exponential Backoff and Jitter"; `sdk` is the OpenAI/Anthropic rule,
/// `exponential-plus-jitter` google-genai's, tenacity's `wait_exponential_jitter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backoff {
    None,
    Constant,
    Exponential,
    FullJitter,
    EqualJitter,
    Decorrelated,
    Sdk,
    /// `min(base·2ⁿ + U·base, cap)`: the exponential delay plus a uniform draw of up to one
    /// base delay.
    ExponentialPlusJitter,
}

impl Backoff {
    pub const NAMES: [&'static str; 8] = [
        "none",
        "constant",
        "exponential",
        "full-jitter",
        "equal-jitter",
        "decorrelated",
        "sdk",
        "exponential-plus-jitter",
    ];

    pub fn parse(s: &str) -> Option<Backoff> {
        Some(match s {
            "none" => Backoff::None,
            "constant" => Backoff::Constant,
            "exponential" => Backoff::Exponential,
            "full-jitter" => Backoff::FullJitter,
            "equal-jitter" => Backoff::EqualJitter,
            "decorrelated" => Backoff::Decorrelated,
            "sdk" => Backoff::Sdk,
            "exponential-plus-jitter" => Backoff::ExponentialPlusJitter,
            _ => return None,
        })
    }
}

/// How an announced `retry-after` (with `honor_retry_after`) shapes the wait before a retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAfter {
    /// A floor on the backoff delay; a wait longer than `retry_after_cap_s` is not waited for:
    /// the failure goes on, unretried.
    Floor,
    /// The wait replaces the backoff delay when it is above 0 and at most `retry_after_cap_s`;
    /// a longer one is not waited for; 0 leaves the backoff delay (the OpenAI and Anthropic
    /// SDKs).
    Replace,
    /// The wait replaces the backoff delay when it is under `retry_after_cap_s` or shorter than
    /// the backoff delay; otherwise the backoff delay is waited: a wait never stops the retries
    /// (the Vercel AI SDK).
    ReplaceOrBackoff,
}

impl RetryAfter {
    pub const NAMES: [&'static str; 3] = ["floor", "replace", "replace-or-backoff"];

    pub fn parse(s: &str) -> Option<RetryAfter> {
        Some(match s {
            "floor" => RetryAfter::Floor,
            "replace" => RetryAfter::Replace,
            "replace-or-backoff" => RetryAfter::ReplaceOrBackoff,
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
    /// How an announced wait shapes the delay (with `honor_retry_after`).
    pub retry_after: RetryAfter,
    /// The longest announced wait honoured as [`RetryAfter`] says, in seconds.
    pub retry_after_cap_s: u64,
    /// Retries allowed per first attempt across the run (a retry budget), if any.
    pub budget_ratio: Option<f64>,
    /// A fleet's budget counts the whole fleet's retries and first attempts over this window.
    pub budget_window_ms: u64,
    /// Whether a model answer whose stream broke is retried: the SDKs' own retries end when
    /// the answer's headers arrive, so they raise a broken stream to the agent.
    pub broken_streams: bool,
    /// Every attempt of a call carries one idempotency key (the orchestrator's retries; the
    /// model's re-issues where the envelope hands the key back).
    pub idempotency_key: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::FullJitter,
            base_ms: 500,
            cap_ms: 8000,
            honor_retry_after: true,
            retry_after: RetryAfter::Floor,
            retry_after_cap_s: 60,
            budget_ratio: None,
            budget_window_ms: 10_000,
            broken_streams: true,
            idempotency_key: false,
        }
    }
}

/// The retry rules of the SDKs agents are built on, as `[policy.retry] preset` names them,
/// read from the SDKs' sources at the versions `examples/` pins (the attempt counts are checked
/// against the SDKs over the wire by the integration tests).
pub const PRESETS: [&str; 4] = ["openai", "anthropic", "google-genai", "vercel-ai"];

/// The most a wait may be in a preset where the SDK sets no limit (the longest sleep Python
/// allows everywhere, the Anthropic SDK's own bound).
const UNBOUNDED_WAIT_S: u64 = 4_294_967;

impl RetryPolicy {
    /// A preset of [`PRESETS`]:
    /// - `openai` (openai-python 3.57): 2 retries of 408, 409, 429 and 5xx and of timeouts,
    ///   `min(0.5·2ⁿ, 8)·(1 − 0.25·U)` s; a `retry-after(-ms)` above 0 and at most 120 s is
    ///   waited instead, a longer one is not retried;
    /// - `anthropic` (anthropic-python 2.14): the same, with any `retry-after` above 0 waited;
    /// - `google-genai`: no retry (the SDK retries only when `retry_options` are given; with
    ///   `max_attempts` set, its defaults for them: `min(1·2ⁿ + U, 60)` s, `Retry-After`
    ///   ignored; the SDK's default is 5 attempts);
    /// - `vercel-ai` (ai 6.0): 2 retries, `2·2ⁿ` s; a `retry-after(-ms)` under 60 s, or shorter
    ///   than that delay, is waited instead.
    pub fn preset(name: &str) -> Option<RetryPolicy> {
        let stainless = RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::Sdk,
            base_ms: 500,
            cap_ms: 8000,
            honor_retry_after: true,
            retry_after: RetryAfter::Replace,
            retry_after_cap_s: 120,
            broken_streams: false,
            ..RetryPolicy::default()
        };
        Some(match name {
            "openai" => stainless,
            "anthropic" => RetryPolicy { retry_after_cap_s: UNBOUNDED_WAIT_S, ..stainless },
            "google-genai" => RetryPolicy {
                max_attempts: 1,
                backoff: Backoff::ExponentialPlusJitter,
                base_ms: 1000,
                cap_ms: 60_000,
                honor_retry_after: false,
                broken_streams: false,
                ..RetryPolicy::default()
            },
            "vercel-ai" => RetryPolicy {
                max_attempts: 3,
                backoff: Backoff::Exponential,
                base_ms: 2000,
                cap_ms: 86_400_000,
                honor_retry_after: true,
                retry_after: RetryAfter::ReplaceOrBackoff,
                retry_after_cap_s: 60,
                broken_streams: false,
                ..RetryPolicy::default()
            },
            _ => return None,
        })
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
            Some(ms) if self.honor_retry_after && self.retry_after != RetryAfter::ReplaceOrBackoff => {
                ms <= self.retry_after_cap_s.saturating_mul(1000)
            }
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
            Backoff::ExponentialPlusJitter => {
                let base = self.base_ms.saturating_mul(1u64 << retry.min(40));
                base.saturating_add((u * self.base_ms as f64) as u64).min(self.cap_ms)
            }
        };
        let cap_ms = self.retry_after_cap_s.saturating_mul(1000);
        match (retry_after_ms, self.retry_after) {
            (Some(_), _) if !self.honor_retry_after => d,
            (Some(ra), RetryAfter::Floor) => d.max(ra),
            (Some(ra), RetryAfter::Replace) if ra > 0 && ra <= cap_ms => ra,
            (Some(ra), RetryAfter::ReplaceOrBackoff) if ra < cap_ms || ra < d => ra,
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
    fn presets_follow_the_sdks_sources() {
        let p = |n: &str| RetryPolicy::preset(n).unwrap();
        for n in PRESETS {
            assert!(RetryPolicy::preset(n).is_some(), "{n}");
        }
        assert!(RetryPolicy::preset("langchain").is_none());
        // openai: 3 attempts; min(0.5·2ⁿ, 8)·(1 − 0.25·U) s: 0.5 s, 1 s, … 8 s, less up to a quarter.
        let o = p("openai");
        assert_eq!(o.max_attempts, 3);
        assert_eq!(o.delay_ms(0, 0, 0.0, None), 500);
        assert_eq!(o.delay_ms(1, 0, 0.5, None), 875);
        assert_eq!(o.delay_ms(6, 0, 0.0, None), 8000);
        // A retry-after above 0 and at most 120 s is waited instead (even a shorter one); 0
        // leaves the backoff; a longer one is not retried.
        assert_eq!(o.delay_ms(1, 0, 0.0, Some(300)), 300);
        assert_eq!(o.delay_ms(1, 0, 0.0, Some(120_000)), 120_000);
        assert_eq!(o.delay_ms(0, 0, 0.0, Some(0)), 500);
        assert!(o.may_retry(ErrorClass::RateLimited, 1, Some(120_000)));
        assert!(!o.may_retry(ErrorClass::RateLimited, 1, Some(120_001)));
        assert!(!o.may_retry(ErrorClass::RateLimited, 3, None), "2 retries");
        // anthropic: the same, any wait above 0 waited.
        let a = p("anthropic");
        assert_eq!(a.delay_ms(0, 0, 0.0, Some(600_000)), 600_000);
        assert!(a.may_retry(ErrorClass::RateLimited, 1, Some(600_000)));
        // google-genai: no retry by default; configured, min(1·2ⁿ + U, 60) s, retry-after ignored.
        let g = p("google-genai");
        assert!(!g.may_retry(ErrorClass::Transient, 1, None));
        let g5 = RetryPolicy { max_attempts: 5, ..g };
        assert!(g5.may_retry(ErrorClass::RateLimited, 4, Some(3_600_000)));
        assert_eq!(g5.delay_ms(0, 0, 0.0, Some(30_000)), 1000);
        assert_eq!(g5.delay_ms(2, 0, 0.5, None), 4500);
        assert_eq!(g5.delay_ms(9, 0, 0.5, None), 60_000);
        // vercel-ai: 2 retries, 2 s then 4 s; a wait under 60 s, or shorter than the delay, is
        // waited instead; a longer one gives the delay and never stops the retries.
        let v = p("vercel-ai");
        assert_eq!((v.delay_ms(0, 0, 0.9, None), v.delay_ms(1, 0, 0.9, None)), (2000, 4000));
        assert_eq!(v.delay_ms(0, 0, 0.0, Some(0)), 0);
        assert_eq!(v.delay_ms(0, 0, 0.0, Some(59_999)), 59_999);
        assert_eq!(v.delay_ms(0, 0, 0.0, Some(90_000)), 2000);
        assert!(v.may_retry(ErrorClass::RateLimited, 2, Some(90_000)));
        assert!(!v.may_retry(ErrorClass::RateLimited, 3, None));
    }

    #[test]
    fn retry_after_rules() {
        let floor = RetryPolicy::default();
        assert_eq!(floor.delay_ms(0, 0, 0.0, Some(100)), 100.max(floor.delay_ms(0, 0, 0.0, None)));
        let with = |retry_after| RetryPolicy { retry_after, backoff: Backoff::Constant, ..RetryPolicy::default() };
        assert_eq!(with(RetryAfter::Floor).delay_ms(0, 0, 0.0, Some(100)), 500);
        assert_eq!(with(RetryAfter::Replace).delay_ms(0, 0, 0.0, Some(100)), 100);
        assert_eq!(with(RetryAfter::ReplaceOrBackoff).delay_ms(0, 0, 0.0, Some(100)), 100);
        for r in RetryAfter::NAMES {
            assert!(RetryAfter::parse(r).is_some());
        }
        assert_eq!(Backoff::parse("exponential-plus-jitter"), Some(Backoff::ExponentialPlusJitter));
    }

    #[test]
    fn budget() {
        let p = RetryPolicy { budget_ratio: Some(0.1), ..RetryPolicy::default() };
        assert!(p.budget_allows(0, 1));
        assert!(!p.budget_allows(1, 10));
        assert!(p.budget_allows(1, 20));
    }
}
