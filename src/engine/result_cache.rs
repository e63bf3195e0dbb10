//! What the model reads in a tool result, cached by everything the rendering depends on except
//! the call id: a failed or partial result is rendered and read once per scenario, not once per
//! attempt.

use std::hash::{Hash, Hasher};

use rustc_hash::FxHashMap;

use super::limits::LoadFault;
use crate::envelope::Encoding;
use crate::envelope::read::Reading;
#[cfg(doc)]
use crate::envelope::stated_seconds;
use crate::fault::ErrorClass;

/// Everything a rendered result depends on but its call id, within one scenario (whose format
/// and task are fixed). Fields that do not shape a body are zero for it (a success's attempts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResultKey {
    pub call: u32,
    pub class: Option<ErrorClass>,
    /// The fault rule behind an error; `None` for the breaker's `CIRCUIT_OPEN`.
    pub rule: Option<u16>,
    /// The load fault behind an error that came from contention.
    pub load: Option<LoadFault>,
    pub attempts: u32,
    /// The wait in the seconds the result states ([`stated_seconds`]): waits the rate limits
    /// compute vary by the millisecond, and keyed by those every 429 would be rendered anew.
    pub retry_after_s: Option<u64>,
    pub encoding: Option<Encoding>,
    pub stated_complete: bool,
    /// The rule that tainted a successful result.
    pub taint: Option<u16>,
    /// The strategy's `max_result_kb` where it may cut the result, else 0.
    pub cut_kb: u32,
    /// An error in the envelope that shows the idempotency key a write tool's call carried.
    pub keyed: bool,
}

/// Hashes the key as three words (the derived hash would feed every field and discriminant
/// separately); equal keys give equal words.
impl Hash for ResultKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let class = self.class.map_or(0, |c| c as u64 + 1);
        let rule = self.rule.map_or(0, |r| u64::from(r) + 1);
        let encoding = self.encoding.map_or(0, |e| e as u64 + 1);
        let load = self.load.map_or(0, |l| l as u64 + 1);
        h.write_u64(u64::from(self.call) << 32 | u64::from(self.attempts));
        h.write_u64(
            class
                | rule << 8
                | encoding << 32
                | u64::from(self.stated_complete) << 40
                | u64::from(self.keyed) << 41
                | load << 48,
        );
        let taint = self.taint.map_or(0, |r| u64::from(r) + 1);
        h.write_u64(self.retry_after_s.map_or(u64::MAX, |s| s) ^ (taint << 32 | u64::from(self.cut_kb)));
    }
}

/// One rendered result as the metrics need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The rendering's length in bytes (in the cache: without the call id's digits).
    pub len: usize,
    /// What the model reads (`None` for a success, which it does not read for signals).
    pub reading: Option<Reading>,
}

/// The cache of one scenario. It lives for one run unless pinned to a scenario (the address
/// of a scenario borrowed for the whole pinned span, so no other can take it), and is cleared
/// when it holds [`ResultCache::CAP`] entries (waits that vary per attempt can make keys
/// unbounded), so memory stays flat.
#[derive(Default)]
pub struct ResultCache {
    pinned: Option<usize>,
    map: FxHashMap<ResultKey, Seen>,
    /// Successes as the tool gave them (not tainted, not cut), the most common result, by call
    /// index: their rendering's length + 1 (0 when not yet rendered). Such a success's key is
    /// its call alone, so no hashing is needed.
    ok_len: Vec<usize>,
}

impl ResultCache {
    const CAP: usize = 1 << 14;

    /// Keeps entries across runs of the scenario at `owner` until [`ResultCache::unpin`].
    pub fn pin(&mut self, owner: usize) {
        self.clear();
        self.pinned = Some(owner);
    }

    pub fn unpin(&mut self) {
        self.clear();
        self.pinned = None;
    }

    fn clear(&mut self) {
        self.map.clear();
        self.ok_len.clear();
    }

    /// Starts a run of the scenario at `owner`: entries survive only for the pinned scenario.
    pub fn serve(&mut self, owner: usize) {
        if self.pinned != Some(owner) {
            self.clear();
            self.pinned = None;
        }
    }

    /// The cached result for `key`, or the one `make` computes (then cached).
    #[inline(always)]
    pub fn get_or_make(&mut self, key: ResultKey, make: impl FnOnce() -> Seen) -> Seen {
        if key.class.is_none() && key.taint.is_none() && key.cut_kb == 0 {
            let call = key.call as usize;
            if call >= self.ok_len.len() {
                self.ok_len.resize(call + 1, 0);
            }
            if self.ok_len[call] == 0 {
                self.ok_len[call] = make().len + 1;
            }
            return Seen { len: self.ok_len[call] - 1, reading: None };
        }
        if let Some(s) = self.map.get(&key) {
            return *s;
        }
        if self.map.len() >= Self::CAP {
            self.map.clear();
        }
        let s = make();
        self.map.insert(key, s);
        s
    }
}

/// The number of decimal digits of `n`.
pub fn digits(n: u32) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(call: u32) -> ResultKey {
        ResultKey {
            call,
            class: None,
            rule: None,
            load: None,
            attempts: 0,
            retry_after_s: None,
            encoding: None,
            stated_complete: false,
            taint: None,
            cut_kb: 0,
            keyed: false,
        }
    }

    #[test]
    fn digits_count_decimal_places() {
        assert_eq!([0, 9, 10, 99, 100, u32::MAX].map(digits), [1, 1, 2, 2, 3, 10]);
    }

    /// Runs of scenario `owner` that read one result three times; how many renderings they made.
    fn run(c: &mut ResultCache, owner: usize) -> u32 {
        c.serve(owner);
        let mut made = 0;
        for _ in 0..3 {
            c.get_or_make(key(7), || {
                made += 1;
                Seen { len: 5, reading: None }
            });
        }
        made
    }

    #[test]
    fn entries_live_for_a_run_unless_pinned_to_the_scenario() {
        let mut c = ResultCache::default();
        assert_eq!([run(&mut c, 1), run(&mut c, 1)], [1, 1], "unpinned, every run starts empty");
        c.pin(1);
        assert_eq!([run(&mut c, 1), run(&mut c, 1)], [1, 0], "pinned, the scenario's runs share entries");
        assert_eq!(run(&mut c, 2), 1, "another scenario starts empty");
        assert_eq!(run(&mut c, 1), 1, "and ends the pin");
    }

    #[test]
    fn entries_stay_while_others_are_added() {
        let mut c = ResultCache::default();
        let mut made = 0;
        let mut get = |c: &mut ResultCache, call| {
            c.get_or_make(key(call), || {
                made += 1;
                Seen { len: 1, reading: None }
            });
        };
        for call in [1, 2, 3, 1, 2, 3] {
            get(&mut c, call);
        }
        assert_eq!(made, 3);
    }

    #[test]
    fn the_cache_stays_bounded() {
        let mut c = ResultCache::default();
        for call in 0..(ResultCache::CAP as u32 * 3) {
            c.get_or_make(ResultKey { class: Some(ErrorClass::Transient), ..key(call) }, || Seen {
                len: 1,
                reading: None,
            });
        }
        assert!(c.map.len() <= ResultCache::CAP && c.map.len() > 1);
    }

    #[test]
    fn successes_keep_their_own_lengths_and_failures_stay_apart() {
        let mut c = ResultCache::default();
        c.pin(1);
        let ok = |c: &mut ResultCache, call, len| c.get_or_make(key(call), || Seen { len, reading: None }).len;
        assert_eq!([ok(&mut c, 4, 10), ok(&mut c, 0, 20), ok(&mut c, 4, 99), ok(&mut c, 0, 99)], [10, 20, 10, 20]);
        let failed = ResultKey { class: Some(ErrorClass::Transient), ..key(4) };
        assert_eq!(
            c.get_or_make(failed, || Seen { len: 30, reading: None }).len,
            30,
            "a failure of call 4 is not its success"
        );
        let tainted = ResultKey { taint: Some(0), ..key(4) };
        assert_eq!(c.get_or_make(tainted, || Seen { len: 40, reading: None }).len, 40, "tainted is not plain");
        let cut = ResultKey { cut_kb: 16, ..key(4) };
        assert_eq!(c.get_or_make(cut, || Seen { len: 50, reading: None }).len, 50, "cut is not whole");
        assert_eq!(ok(&mut c, 4, 99), 10, "the plain success kept its own");
        c.pin(2);
        assert_eq!(ok(&mut c, 4, 11), 11, "a new pin starts empty");
    }
}
