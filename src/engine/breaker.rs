//! Circuit breaker per tool: `consecutive` (open after N failures in a row) or `rate`
//! (failure ratio over a sliding window), then open for `open_ms`, then half-open probes.

use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BreakerMode {
    Consecutive { failures: u32 },
    Rate { window_ms: u64, min_calls: u32, failure_ratio: f64 },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BreakerConfig {
    pub mode: BreakerMode,
    pub open_ms: u64,
    /// Calls let through at once while half-open.
    pub probes: u32,
    /// Successful probes that close it again.
    pub close_after: u32,
    /// One breaker per tool for the whole fleet (`scope = "fleet"`), instead of one per agent.
    pub fleet: bool,
    /// How long after a fleet breaker opens the other agents still see it closed.
    pub sync_ms: u64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            mode: BreakerMode::Consecutive { failures: 3 },
            open_ms: 30_000,
            probes: 1,
            close_after: 2,
            fleet: false,
            sync_ms: 0,
        }
    }
}

/// A breaker the whole fleet reads and feeds (the seeds' breaker shared through Redis): who
/// opened it last and when, so the others can see the opening `sync_ms` late.
#[derive(Clone, Debug, Default)]
pub struct FleetBreaker {
    pub breaker: Breaker,
    pub opened_at: u64,
    pub opened_by: u32,
}

impl FleetBreaker {
    pub fn reset(&mut self) {
        self.breaker.reset();
        self.opened_at = 0;
        self.opened_by = 0;
    }

    /// Agent `agent` asks at `now_ms`: until `sync_ms` after an opening, agents other than the
    /// one that opened it have not heard of it and are let through.
    pub fn admit(&mut self, cfg: &BreakerConfig, now_ms: u64, agent: u32) -> Admit {
        let unheard = matches!(self.breaker.state, State::Open { .. })
            && agent != self.opened_by
            && now_ms < self.opened_at.saturating_add(cfg.sync_ms);
        if unheard { Admit::Yes } else { self.breaker.admit(cfg, now_ms) }
    }

    /// Records an outcome from `agent`; true when it opened the breaker.
    pub fn record(&mut self, cfg: &BreakerConfig, now_ms: u64, failed: bool, probe: bool, agent: u32) -> bool {
        let was_open = matches!(self.breaker.state, State::Open { .. });
        let tripped = self.breaker.record(cfg, now_ms, failed, probe);
        if !was_open && matches!(self.breaker.state, State::Open { .. }) {
            self.opened_at = now_ms;
            self.opened_by = agent;
        }
        tripped
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Closed,
    Open { until_ms: u64 },
    HalfOpen { in_flight: u32, successes: u32 },
}

/// Whether a call may go through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    Yes,
    Probe,
    /// Rejected; the breaker stays open this much longer.
    Reject {
        remaining_ms: u64,
    },
}

#[derive(Clone, Debug)]
pub struct Breaker {
    pub state: State,
    consecutive: u32,
    window: VecDeque<(u64, bool)>,
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker { state: State::Closed, consecutive: 0, window: VecDeque::new() }
    }
}

impl Breaker {
    pub fn reset(&mut self) {
        self.state = State::Closed;
        self.consecutive = 0;
        self.window.clear();
    }

    pub fn admit(&mut self, cfg: &BreakerConfig, now_ms: u64) -> Admit {
        if let State::Open { until_ms } = self.state {
            if now_ms < until_ms {
                return Admit::Reject { remaining_ms: until_ms - now_ms };
            }
            self.state = State::HalfOpen { in_flight: 0, successes: 0 };
        }
        match &mut self.state {
            State::Closed => Admit::Yes,
            State::HalfOpen { in_flight, .. } if *in_flight < cfg.probes => {
                *in_flight += 1;
                Admit::Probe
            }
            // Half-open with every probe slot taken: reject until a probe returns.
            _ => Admit::Reject { remaining_ms: 0 },
        }
    }

    /// Records the outcome of an admitted call; returns true on a closed→open transition.
    pub fn record(&mut self, cfg: &BreakerConfig, now_ms: u64, failed: bool, probe: bool) -> bool {
        match self.state {
            State::HalfOpen { in_flight, successes } if probe => {
                if failed {
                    self.state = State::Open { until_ms: now_ms + cfg.open_ms };
                } else if successes + 1 >= cfg.close_after {
                    self.state = State::Closed;
                    self.consecutive = 0;
                    self.window.clear();
                } else {
                    self.state = State::HalfOpen { in_flight: in_flight.saturating_sub(1), successes: successes + 1 };
                }
                false
            }
            State::Closed => {
                let trip = match cfg.mode {
                    BreakerMode::Consecutive { failures } => {
                        self.consecutive = if failed { self.consecutive + 1 } else { 0 };
                        self.consecutive >= failures
                    }
                    BreakerMode::Rate { window_ms, min_calls, failure_ratio } => {
                        self.window.push_back((now_ms, failed));
                        while self.window.front().is_some_and(|&(t, _)| t + window_ms <= now_ms) {
                            self.window.pop_front();
                        }
                        let calls = self.window.len() as u32;
                        let fails = self.window.iter().filter(|w| w.1).count() as f64;
                        calls >= min_calls && fails / f64::from(calls) >= failure_ratio
                    }
                };
                if trip {
                    self.state = State::Open { until_ms: now_ms + cfg.open_ms };
                    self.consecutive = 0;
                    self.window.clear();
                }
                trip
            }
            // A call admitted before the breaker opened, returning while it is open or
            // half-open: its outcome no longer changes the state.
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_defaults_trip_hold_probe_close() {
        let cfg = BreakerConfig::default();
        let mut b = Breaker::default();
        assert!(!b.record(&cfg, 0, true, false));
        assert!(!b.record(&cfg, 0, true, false));
        assert!(b.record(&cfg, 0, true, false), "third failure opens");
        assert_eq!(b.admit(&cfg, 29_999), Admit::Reject { remaining_ms: 1 });
        assert_eq!(b.admit(&cfg, 30_000), Admit::Probe);
        assert_eq!(b.admit(&cfg, 30_000), Admit::Reject { remaining_ms: 0 }, "one probe at a time");
        b.record(&cfg, 30_100, false, true);
        assert_eq!(b.admit(&cfg, 30_100), Admit::Probe);
        b.record(&cfg, 30_200, false, true);
        assert_eq!(b.state, State::Closed);
    }

    #[test]
    fn failed_probe_reopens_without_counting_a_trip() {
        let cfg = BreakerConfig::default();
        let mut b = Breaker::default();
        for _ in 0..3 {
            b.record(&cfg, 0, true, false);
        }
        assert_eq!(b.admit(&cfg, 30_000), Admit::Probe);
        assert!(!b.record(&cfg, 30_000, true, true));
        assert_eq!(b.state, State::Open { until_ms: 60_000 });
    }

    #[test]
    fn a_late_call_from_before_the_trip_does_not_count_as_a_probe() {
        let cfg = BreakerConfig { close_after: 1, ..BreakerConfig::default() };
        let mut b = Breaker::default();
        for _ in 0..3 {
            b.record(&cfg, 0, true, false);
        }
        assert_eq!(b.admit(&cfg, 30_000), Admit::Probe);
        // A call admitted while closed returns now: its success must not close the breaker,
        // nor its failure reopen it.
        assert!(!b.record(&cfg, 30_050, false, false));
        assert_eq!(b.state, State::HalfOpen { in_flight: 1, successes: 0 });
        assert!(!b.record(&cfg, 30_060, true, false));
        assert_eq!(b.state, State::HalfOpen { in_flight: 1, successes: 0 });
        b.record(&cfg, 30_100, false, true);
        assert_eq!(b.state, State::Closed);
    }

    #[test]
    fn rate_mode() {
        let cfg = BreakerConfig {
            mode: BreakerMode::Rate { window_ms: 10_000, min_calls: 4, failure_ratio: 0.5 },
            ..BreakerConfig::default()
        };
        let mut b = Breaker::default();
        assert!(!b.record(&cfg, 0, true, false));
        assert!(!b.record(&cfg, 1, false, false));
        assert!(!b.record(&cfg, 2, false, false));
        assert!(b.record(&cfg, 3, true, false), "2 of 4 failed");
        let mut c = Breaker::default();
        c.record(&cfg, 0, true, false);
        c.record(&cfg, 1, true, false);
        assert!(!c.record(&cfg, 20_000, false, false), "old failures left the window");
    }

    #[test]
    fn a_fleet_breaker_is_heard_of_sync_ms_late_by_the_others() {
        let cfg = BreakerConfig { sync_ms: 500, fleet: true, ..BreakerConfig::default() };
        let mut b = FleetBreaker::default();
        // Agents 1, 2 and 1 fail: agent 1's failure opens it at t = 100.
        assert!(!b.record(&cfg, 10, true, false, 1));
        assert!(!b.record(&cfg, 20, true, false, 2));
        assert!(b.record(&cfg, 100, true, false, 1));
        assert_eq!((b.opened_at, b.opened_by), (100, 1));
        assert_eq!(b.admit(&cfg, 100, 1), Admit::Reject { remaining_ms: 30_000 }, "the opener knows at once");
        assert_eq!(b.admit(&cfg, 599, 2), Admit::Yes, "the others hear 500 ms later");
        assert_eq!(b.admit(&cfg, 600, 2), Admit::Reject { remaining_ms: 29_500 });
        // A late outcome from an agent that had not heard changes nothing while it is open.
        assert!(!b.record(&cfg, 300, true, false, 2));
        assert_eq!(b.opened_at, 100);
        // Without sync_ms everyone hears at once.
        let now = BreakerConfig { sync_ms: 0, ..cfg };
        assert_eq!(b.admit(&now, 101, 3), Admit::Reject { remaining_ms: 29_999 });
        // A new run starts closed, with no opening on record.
        b.reset();
        assert_eq!((b.admit(&cfg, 101, 3), b.opened_at, b.opened_by), (Admit::Yes, 0, 0));
    }
}
