//! What a fleet's agents contend for at one tool or provider, over virtual time: a shared rate
//! limit (a token bucket that answers with the exact wait it implies), a concurrency limit
//! (reject or queue), and an optimistic-concurrency row (a write fails when another committed
//! since it read). Integer arithmetic only, so every run is reproducible.

use std::collections::VecDeque;

/// Micro-tokens in one token: rates are kept to 0.001 requests per second.
const MICRO: u64 = 1_000_000;

/// A token bucket shared by the fleet: `burst` tokens when full, refilled at `per_s` tokens a
/// second; a request takes one token or is refused with the wait until one is there (what a
/// real API puts in `retry-after`).
#[derive(Clone, Debug, PartialEq)]
pub struct TokenBucket {
    /// Micro-tokens added per millisecond (`per_s` × 1000, rounded down).
    refill_per_ms: u64,
    capacity: u64,
    tokens: u64,
    last_ms: u64,
}

/// A refusal by a rate limit: retry after this long (`None`: never, a bucket that does not refill).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryAfter(pub Option<u64>);

impl TokenBucket {
    /// A full bucket at t = 0. `per_s` is rounded down to 0.001; the bucket holds at least one
    /// token (a burst of 0 is read as 1).
    pub fn new(per_s: f64, burst: u32) -> TokenBucket {
        TokenBucket::holding(per_s, u64::from(burst))
    }

    /// A full bucket of `capacity` tokens (at least one) refilled at `per_s` a second.
    pub fn holding(per_s: f64, capacity: u64) -> TokenBucket {
        // The epsilon keeps 0.57 × 1000 = 569.999… at 570.
        let refill_per_ms = (per_s.max(0.0) * 1000.0 + 1e-6).floor() as u64;
        let capacity = capacity.max(1).saturating_mul(MICRO);
        TokenBucket { refill_per_ms, capacity, tokens: capacity, last_ms: 0 }
    }

    /// Takes a token at `now_ms` (times never go back), or says how long until one is there.
    pub fn take(&mut self, now_ms: u64) -> Result<(), RetryAfter> {
        self.refill(now_ms);
        match self.wait(1) {
            None => {
                self.spend(1);
                Ok(())
            }
            Some(w) => Err(w),
        }
    }

    /// Adds what has dripped in since the last look (times never go back).
    pub fn refill(&mut self, now_ms: u64) {
        let elapsed = now_ms.saturating_sub(self.last_ms);
        self.tokens = self.capacity.min(self.tokens.saturating_add(elapsed.saturating_mul(self.refill_per_ms)));
        self.last_ms = self.last_ms.max(now_ms);
    }

    /// `None` when `n` tokens are there now, else how long until they are (never, when `n` is
    /// more than the bucket holds or it does not refill).
    pub fn wait(&self, n: u64) -> Option<RetryAfter> {
        let need = n.saturating_mul(MICRO);
        if self.tokens >= need {
            return None;
        }
        if self.refill_per_ms == 0 || need > self.capacity {
            return Some(RetryAfter(None));
        }
        Some(RetryAfter(Some((need - self.tokens).div_ceil(self.refill_per_ms))))
    }

    /// Spends `n` tokens, or all there are when fewer (a cost known only after admission).
    pub fn spend(&mut self, n: u64) {
        self.tokens = self.tokens.saturating_sub(n.saturating_mul(MICRO));
    }
}

/// What a concurrency limit does with a call beyond it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// In flight now.
    Admitted,
    /// Waiting its turn (`queue = true`); [`Gate::leave`] hands it the freed place.
    Queued,
    /// Refused (a 503).
    Rejected,
}

/// At most `limit` calls in flight at a tool; the rest are refused or wait in arrival order.
/// `W` names a waiting call (an agent and its call).
#[derive(Clone, Debug)]
pub struct Gate<W> {
    limit: u32,
    queue: bool,
    in_flight: u32,
    peak: u32,
    waiting: VecDeque<W>,
}

impl<W> Gate<W> {
    pub fn new(limit: u32, queue: bool) -> Gate<W> {
        Gate { limit, queue, in_flight: 0, peak: 0, waiting: VecDeque::new() }
    }

    pub fn enter(&mut self, who: W) -> Entry {
        if self.in_flight < self.limit {
            self.in_flight += 1;
            self.peak = self.peak.max(self.in_flight);
            Entry::Admitted
        } else if self.queue {
            self.waiting.push_back(who);
            Entry::Queued
        } else {
            Entry::Rejected
        }
    }

    /// A call in flight ends; returns the waiting call that now takes its place, if any.
    pub fn leave(&mut self) -> Option<W> {
        match self.waiting.pop_front() {
            Some(next) => Some(next),
            None => {
                self.in_flight = self.in_flight.saturating_sub(1);
                None
            }
        }
    }

    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Calls waiting for a place.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// The most calls ever in flight at once.
    pub fn peak(&self) -> u32 {
        self.peak
    }
}

/// One row written under optimistic concurrency: a call reads the version when it starts and
/// writes when it ends; the write commits only if no other write committed in between (else a
/// 409 the caller may retry).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OccRow {
    version: u64,
}

impl OccRow {
    /// The version a call starting now reads.
    pub fn read(&self) -> u64 {
        self.version
    }

    /// Commits a write that read `read`; `false` is a conflict.
    pub fn commit(&mut self, read: u64) -> bool {
        let ok = read == self.version;
        self.version += u64::from(ok);
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_bucket_answers_with_the_wait_it_implies() {
        // 2 per second, burst 3: three at once, then one every 500 ms.
        let mut b = TokenBucket::new(2.0, 3);
        assert_eq!((0..3).map(|_| b.take(0)).collect::<Vec<_>>(), vec![Ok(()); 3]);
        assert_eq!(b.take(0), Err(RetryAfter(Some(500))));
        assert_eq!(b.take(499), Err(RetryAfter(Some(1))));
        assert_eq!(b.take(500), Ok(()));
        assert_eq!(b.take(700), Err(RetryAfter(Some(300))));
        // A bucket with no refill refuses for good once empty.
        let mut once = TokenBucket::new(0.0, 1);
        assert_eq!(once.take(0), Ok(()));
        assert_eq!(once.take(1_000_000), Err(RetryAfter(None)));
        // Fractional rates: 0.5 per second is one every 2 s.
        let mut slow = TokenBucket::new(0.5, 1);
        assert_eq!(slow.take(10), Ok(()));
        assert_eq!(slow.take(10), Err(RetryAfter(Some(2000))));
    }

    #[test]
    fn a_bucket_of_many_tokens_waits_for_all_a_request_needs() {
        // 600 a minute (10 a second), holding 600: a request of 500 passes, the next of 500
        // waits for the 400 missing, 40 s; one larger than the bucket never passes.
        let mut b = TokenBucket::holding(10.0, 600);
        assert_eq!(b.wait(500), None);
        b.spend(500);
        assert_eq!(b.wait(500), Some(RetryAfter(Some(40_000))));
        b.refill(40_000);
        assert_eq!(b.wait(500), None);
        assert_eq!(b.wait(601), Some(RetryAfter(None)));
        // Spending more than there is empties the bucket, never below zero.
        b.spend(10_000);
        assert_eq!(b.wait(1), Some(RetryAfter(Some(100))));
    }

    #[test]
    fn a_gate_rejects_or_queues_beyond_its_limit() {
        let mut g = Gate::new(2, false);
        assert_eq!([g.enter(1), g.enter(2), g.enter(3)], [Entry::Admitted, Entry::Admitted, Entry::Rejected]);
        assert_eq!(g.leave(), None);
        assert_eq!(g.enter(4), Entry::Admitted);
        assert_eq!((g.in_flight(), g.peak()), (2, 2));

        let mut q = Gate::new(1, true);
        assert_eq!([q.enter(1), q.enter(2), q.enter(3)], [Entry::Admitted, Entry::Queued, Entry::Queued]);
        assert_eq!(q.leave(), Some(2), "the freed place goes to the first waiting");
        assert_eq!(q.leave(), Some(3));
        assert_eq!(q.leave(), None);
        assert_eq!((q.in_flight(), q.peak()), (0, 1));
    }

    #[test]
    fn an_occ_write_fails_when_another_committed_since_it_read() {
        let mut row = OccRow::default();
        let (a, b) = (row.read(), row.read());
        assert!(row.commit(a));
        assert!(!row.commit(b), "b read before a committed");
        let b2 = row.read();
        assert!(row.commit(b2));
        assert_eq!(row.read(), 2);
    }

    proptest! {
        /// The bucket never admits more than `burst + per_s × t` by time t (a burst of at
        /// least one), and a request made
        /// at the wait it was told is admitted when nothing else took the token.
        #[test]
        fn the_bucket_never_admits_beyond_its_rate(
            per_milli in 0u64..50_000,
            burst in 0u32..20,
            gaps in prop::collection::vec(0u64..400, 1..300),
        ) {
            let per_s = per_milli as f64 / 1000.0;
            let mut b = TokenBucket::new(per_s, burst);
            let (mut now, mut admitted) = (0u64, 0u64);
            for gap in gaps {
                now += gap;
                match b.take(now) {
                    Ok(()) => admitted += 1,
                    Err(RetryAfter(Some(wait))) => {
                        prop_assert!(wait > 0);
                        let mut probe = b.clone();
                        prop_assert_eq!(probe.take(now + wait), Ok(()));
                        let mut early = b.clone();
                        prop_assert!(early.take(now + wait - 1).is_err());
                    }
                    Err(RetryAfter(None)) => prop_assert_eq!(per_milli, 0),
                }
                // admitted ≤ burst + per_s × now / 1000, in thousandths of a token.
                prop_assert!(admitted * 1_000_000 <= u64::from(burst.max(1)) * 1_000_000 + per_milli * now);
            }
        }

        /// No call is ever in flight beyond the limit, queued or not, and queued calls are
        /// admitted in arrival order.
        #[test]
        fn a_gate_never_exceeds_its_limit(
            limit in 1u32..6,
            queue in any::<bool>(),
            ops in prop::collection::vec(any::<bool>(), 1..200),
        ) {
            let mut g = Gate::new(limit, queue);
            let (mut next, mut inside, mut admitted_order) = (0u32, 0u32, Vec::new());
            for enter in ops {
                if enter {
                    next += 1;
                    match g.enter(next) {
                        Entry::Admitted => { inside += 1; admitted_order.push(next); }
                        Entry::Queued => prop_assert!(queue),
                        Entry::Rejected => prop_assert!(!queue),
                    }
                } else if inside > 0 {
                    match g.leave() {
                        Some(w) => admitted_order.push(w),
                        None => inside -= 1,
                    }
                }
                prop_assert!(g.in_flight() <= limit);
                prop_assert_eq!(g.in_flight(), inside);
            }
            prop_assert!(admitted_order.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
