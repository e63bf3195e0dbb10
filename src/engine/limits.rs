//! What a tool can take when a fleet shares it (`[tools.NAME]`): its concurrency limit, its
//! rate limit, how long it serves a call, and whether writes conflict; and the tool's state in
//! one run. Faults that come from these are *load* faults: they emerge from contention, apart
//! from the scenario's scheduled `[[faults]]`.

use super::capacity::{Entry, Gate, OccRow, RetryAfter, TokenBucket};
use crate::fault::{ErrorClass, Fault};

/// How long the tool takes to serve one call, in ms of virtual time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Service {
    Constant(u64),
    /// Uniform over `[min, max]`.
    Uniform {
        min: u64,
        max: u64,
    },
    /// Normal, never below `floor`.
    Normal {
        mean: f64,
        sd: f64,
        floor: f64,
    },
    /// Lognormal with this median and shape σ.
    LogNormal {
        median: f64,
        sigma: f64,
    },
}

impl Service {
    /// One service time from two uniform draws in [0, 1) (rounded to the millisecond).
    /// `libm` computes the same logarithms and cosines on every machine.
    pub fn sample(&self, u1: f64, u2: f64) -> u64 {
        let normal = || libm::sqrt(-2.0 * libm::log(1.0 - u1)) * libm::cos(std::f64::consts::TAU * u2);
        let ms = match *self {
            Service::Constant(ms) => return ms,
            Service::Uniform { min, max } => min as f64 + u1 * (max - min + 1) as f64,
            Service::Normal { mean, sd, floor } => (mean + sd * normal()).max(floor),
            Service::LogNormal { median, sigma } => median * libm::exp(sigma * normal()),
        };
        // Uniform draws land in [min, max + 1): flooring keeps every whole ms equally likely.
        if matches!(self, Service::Uniform { .. }) { ms.floor() as u64 } else { ms.round().max(0.0) as u64 }
    }

    /// The service time of `tool`'s attempt `attempt`, from two uniform draws (`unit`) at the
    /// slots the service stream keeps for it.
    #[inline]
    pub fn sample_at(&self, tool: usize, attempt: u64, mut unit: impl FnMut(u64) -> f64) -> u64 {
        let slot = (tool as u64) << 40 | attempt << 1;
        self.sample(unit(slot), unit(slot + 1))
    }
}

/// The service times one agent has drawn in a run, by tool and attempt. The service stream is
/// keyed without the strategy, so every strategy of a run draws the same times for the same
/// attempts; each is computed once (a normal's logarithm and cosine are most of a fleet's
/// sampling) and read back by the others.
#[derive(Default)]
pub struct ServiceTimes {
    /// Per tool: the distribution the times were drawn from, and time + 1 by attempt − 1
    /// (0: not drawn yet).
    by_tool: Vec<(Option<Service>, Vec<u64>)>,
}

impl ServiceTimes {
    /// Attempts past this many are sampled each time rather than kept, which bounds the
    /// memory at 2 KiB per agent and tool (20 MiB for 10 000 agents retrying one tool).
    const KEPT: usize = 1 << 8;

    /// Forgets every time (the agent's streams were keyed anew).
    pub fn clear(&mut self) {
        self.by_tool.iter_mut().for_each(|(_, times)| times.clear());
    }

    /// The service time of `tool`'s attempt `attempt` (from 1) under `dist`: `draw` samples it
    /// the first time it is asked for.
    #[inline]
    pub fn get(&mut self, tool: usize, attempt: u32, dist: Service, draw: impl FnOnce() -> u64) -> u64 {
        let i = (attempt as usize).wrapping_sub(1);
        if i >= Self::KEPT {
            return draw();
        }
        if tool >= self.by_tool.len() {
            self.by_tool.resize_with(tool + 1, Default::default);
        }
        let (drawn_from, times) = &mut self.by_tool[tool];
        if *drawn_from != Some(dist) {
            // Another scenario's tool under the same stream keys.
            *drawn_from = Some(dist);
            times.clear();
        }
        if let Some(&kept) = times.get(i).filter(|&&t| t != 0) {
            return kept - 1;
        }
        if times.len() <= i {
            times.resize(i + 1, 0);
        }
        let t = draw();
        // (A time of u64::MAX is not kept: it leaves no room for the +1 that marks a kept time.)
        times[i] = t.checked_add(1).unwrap_or(0);
        t
    }
}

/// `[tools.NAME]`: what the tool can take. The default takes everything (no load faults).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ToolLoad {
    /// Calls in flight at most; beyond it a call is refused with 503, or waits with `queue`.
    pub concurrency: Option<u32>,
    pub queue: bool,
    /// A rate limit shared by the fleet: (per second, burst).
    pub rate: Option<(f64, u32)>,
    pub service: Option<Service>,
    /// Optimistic concurrency: a call reads when it starts and writes when it ends; the write
    /// fails with 409 when another committed in between.
    pub occ: bool,
    /// With `occ` (`conflict = "occ-read-write"`): each attempt reads the row in a round trip
    /// of its own, then sends its write, as a client of a remote store does; the read answer's
    /// and the write's network delays lie between the read and the write.
    pub reads_first: bool,
    /// The network delay of each message between the agent and the tool (`network_ms`): a
    /// request reaches the tool that long after it is sent, an answer the agent that long
    /// after it is made.
    pub network: Option<Service>,
}

/// A message of one attempt (a leg of its trip), in the order they travel: the request, and with `reads_first`
/// the read's answer and the write, then the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leg {
    Request = 0,
    ReadAnswer = 1,
    Write = 2,
    Answer = 3,
}

impl ToolLoad {
    /// The network delay of leg `leg` of `tool`'s attempt `attempt` (0 without
    /// `network_ms`), from two uniform draws of the service stream at slots of their own:
    /// every strategy of a run meets the same delays for the same attempts.
    #[inline]
    pub fn network_ms(&self, tool: usize, attempt: u64, leg: Leg, mut unit: impl FnMut(u64) -> f64) -> u64 {
        let Some(dist) = self.network else { return 0 };
        // Apart from the service times' slots (`Service::sample_at`, attempt < 2^32).
        let slot = (tool as u64) << 40 | 1 << 39 | (attempt & ((1 << 35) - 1)) << 3 | (leg as u64) << 1;
        dist.sample(unit(slot), unit(slot + 1))
    }

    /// The network delays between a read and its write (`reads_first`): the read's answer
    /// travelling back and the write travelling out.
    #[inline]
    pub fn read_to_write_ms(&self, tool: usize, attempt: u64, mut unit: impl FnMut(u64) -> f64) -> u64 {
        if !self.reads_first {
            return 0;
        }
        [Leg::ReadAnswer, Leg::Write].into_iter().map(|leg| self.network_ms(tool, attempt, leg, &mut unit)).sum()
    }
}

/// A load fault: what a tool under load answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoadFault {
    /// 429 from the shared rate limit, with the wait its bucket implies.
    RateLimited,
    /// 503: the concurrency limit is reached.
    Busy,
    /// 409: another write committed since this call read.
    Conflict,
}

static RATE_LIMITED: Fault = Fault::Http { status: 429, retry_after_ms: None, param: None, message: None };
static BUSY: Fault = Fault::Http { status: 503, retry_after_ms: None, param: None, message: None };
static CONFLICT: Fault = Fault::Http { status: 409, retry_after_ms: None, param: None, message: None };

impl LoadFault {
    /// The fault as the envelopes render it (the wait goes beside it, as for any fault).
    pub fn fault(self) -> &'static Fault {
        match self {
            LoadFault::RateLimited => &RATE_LIMITED,
            LoadFault::Busy => &BUSY,
            LoadFault::Conflict => &CONFLICT,
        }
    }

    pub fn class(self) -> ErrorClass {
        self.fault().class()
    }
}

/// `[provider] rpm`, `tpm`: the fleet's limits at the model provider, per minute, as the real
/// APIs set them per organisation. Each is a token bucket that holds a minute's allowance and
/// refills continuously (Anthropic's documented algorithm); a request needs one request token
/// and its input tokens, and its output tokens are charged when the answer is made.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProviderLoad {
    pub rpm: Option<f64>,
    pub tpm: Option<f64>,
}

impl ProviderLoad {
    pub fn is_limited(&self) -> bool {
        self.rpm.is_some() || self.tpm.is_some()
    }
}

/// The provider's limits in one run, shared by every agent.
#[derive(Clone, Debug, Default)]
pub struct ProviderState {
    requests: Option<TokenBucket>,
    tokens: Option<TokenBucket>,
}

impl ProviderState {
    pub fn reset(&mut self, load: &ProviderLoad) {
        let per_minute = |n: f64| TokenBucket::holding(n / 60.0, n.ceil() as u64);
        self.requests = load.rpm.map(per_minute);
        self.tokens = load.tpm.map(per_minute);
    }

    /// Admits a request carrying `tokens_in` at `now_ms`, or refuses it (a 429) with the wait
    /// until both limits would let it through (`None`: never, a request larger than `tpm`).
    pub fn admit(&mut self, now_ms: u64, tokens_in: u64) -> Result<(), Option<u64>> {
        let mut wait = Some(0);
        for (b, n) in [(&mut self.requests, 1), (&mut self.tokens, tokens_in)] {
            if let Some(b) = b {
                b.refill(now_ms);
                if let Some(RetryAfter(w)) = b.wait(n) {
                    wait = wait.zip(w).map(|(a, b)| a.max(b));
                }
            }
        }
        match wait {
            Some(0) => {
                for (b, n) in [(&mut self.requests, 1), (&mut self.tokens, tokens_in)] {
                    if let Some(b) = b {
                        b.spend(n);
                    }
                }
                Ok(())
            }
            w => Err(w),
        }
    }

    /// Charges the output tokens of an answer just made.
    pub fn charge(&mut self, tokens_out: u64) {
        if let Some(b) = &mut self.tokens {
            b.spend(tokens_out);
        }
    }
}

/// Who waits for a place: (agent, slot).
pub type Waiter = (u32, u32);

/// One tool's state in one run, shared by every agent.
#[derive(Clone, Debug, Default)]
pub struct ToolState {
    gate: Option<Gate<Waiter>>,
    bucket: Option<TokenBucket>,
    row: OccRow,
    /// Calls being served now, and the most at once.
    busy: u32,
    peak: u32,
}

/// How a call fares at the door of a tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Served now (holding a place when the tool limits concurrency).
    Served {
        place: bool,
    },
    /// Waiting for a place; [`ToolState::release`] hands it one.
    Queued,
    Refused(LoadFault, Option<u64>),
}

impl ToolState {
    pub fn reset(&mut self, load: &ToolLoad) {
        self.gate = load.concurrency.map(|c| Gate::new(c, load.queue));
        self.bucket = load.rate.map(|(per_s, burst)| TokenBucket::new(per_s, burst));
        self.row = OccRow::default();
        self.busy = 0;
        self.peak = 0;
    }

    /// A call arrives at `now_ms`: the rate limit first (a refused call takes no place), then
    /// the concurrency limit.
    pub fn admit(&mut self, now_ms: u64, who: Waiter) -> Admission {
        if let Some(b) = &mut self.bucket
            && let Err(RetryAfter(wait)) = b.take(now_ms)
        {
            return Admission::Refused(LoadFault::RateLimited, wait);
        }
        match self.gate.as_mut().map(|g| g.enter(who)) {
            None => Admission::Served { place: false },
            Some(Entry::Admitted) => Admission::Served { place: true },
            Some(Entry::Queued) => Admission::Queued,
            Some(Entry::Rejected) => Admission::Refused(LoadFault::Busy, None),
        }
    }

    /// A call starts being served; returns the version it reads.
    pub fn start(&mut self) -> u64 {
        self.busy += 1;
        self.peak = self.peak.max(self.busy);
        self.row.read()
    }

    /// A served call ends; `write` commits the version it read (false: a conflict).
    pub fn end(&mut self, write: Option<u64>) -> bool {
        self.busy -= 1;
        write.is_none_or(|v| self.row.commit(v))
    }

    /// A call gives its place back; the first waiting call, if any, takes it.
    pub fn release(&mut self) -> Option<Waiter> {
        self.gate.as_mut().and_then(Gate::leave)
    }

    /// Nothing served, held or waiting.
    pub fn idle(&self) -> bool {
        self.busy == 0 && self.gate.as_ref().is_none_or(|g| g.in_flight() == 0 && g.waiting() == 0)
    }

    /// The most calls served at once.
    pub fn peak(&self) -> u32 {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_time_is_drawn_once_per_tool_and_attempt_until_cleared() {
        let normal = Service::Normal { mean: 300.0, sd: 80.0, floor: 50.0 };
        let mut times = ServiceTimes::default();
        let mut draws = 0;
        let mut get = |times: &mut ServiceTimes, tool, attempt, dist, t| {
            times.get(tool, attempt, dist, || {
                draws += 1;
                t
            })
        };
        assert_eq!(get(&mut times, 1, 3, normal, 250), 250);
        // Another strategy of the run asks again: the kept time, not a new draw.
        assert_eq!(get(&mut times, 1, 3, normal, 999), 250);
        // Another attempt, another tool: drawn.
        assert_eq!(get(&mut times, 1, 2, normal, 7), 7);
        assert_eq!(get(&mut times, 0, 3, normal, 0), 0);
        assert_eq!(get(&mut times, 0, 3, normal, 5), 0, "a time of 0 is kept too");
        // Another distribution under the same keys (another scenario): drawn anew.
        assert_eq!(get(&mut times, 1, 3, Service::Constant(40), 40), 40);
        // A new run's streams: drawn anew.
        times.clear();
        assert_eq!(get(&mut times, 1, 3, Service::Constant(40), 41), 41);
        // Past what is kept, and a time with no room for the mark: drawn every time.
        let far = ServiceTimes::KEPT as u32 + 1;
        assert_eq!(get(&mut times, 0, far, normal, 1), 1);
        assert_eq!(get(&mut times, 0, far, normal, 2), 2);
        assert_eq!(get(&mut times, 0, 9, normal, u64::MAX), u64::MAX);
        assert_eq!(get(&mut times, 0, 9, normal, 3), 3);
        assert_eq!(draws, 9);
    }

    #[test]
    fn the_provider_admits_within_both_limits_and_waits_for_the_slower() {
        // 3 requests and 600 tokens a minute: 1 request per 20 s, 10 tokens per second.
        let mut p = ProviderState::default();
        p.reset(&ProviderLoad { rpm: Some(3.0), tpm: Some(600.0) });
        assert_eq!(p.admit(0, 100), Ok(()));
        assert_eq!(p.admit(0, 100), Ok(()));
        p.charge(350);
        // 50 tokens left: a request of 100 waits 5 s for tokens, though a request token is there.
        assert_eq!(p.admit(0, 100), Err(Some(5_000)));
        assert_eq!(p.admit(5_000, 100), Ok(()));
        // No request token now: the wait is the request bucket's (20 s for one more).
        assert_eq!(p.admit(5_000, 1), Err(Some(15_000)));
        // Larger than the minute's allowance: never.
        assert_eq!(p.admit(60_000, 601), Err(None));
        // Only a request limit: tokens do not matter.
        let mut r = ProviderState::default();
        r.reset(&ProviderLoad { rpm: Some(60.0), tpm: None });
        assert_eq!(r.admit(0, u64::MAX), Ok(()));
    }

    #[test]
    fn service_times_follow_their_distribution() {
        assert_eq!(Service::Constant(7).sample(0.3, 0.9), 7);
        let u = Service::Uniform { min: 5, max: 6 };
        assert_eq!([u.sample(0.0, 0.0), u.sample(0.49, 0.0), u.sample(0.5, 0.0), u.sample(0.999, 0.0)], [5, 5, 6, 6]);
        let wide = Service::Uniform { min: 10, max: 19 };
        assert_eq!([wide.sample(0.0, 0.0), wide.sample(0.55, 0.0), wide.sample(0.999, 0.0)], [10, 15, 19]);
        // The Box–Muller draw at u2 = 0 is sqrt(-2 ln(1 - u1)): u1 = 1 - e^-2 gives z = 2.
        let u1 = 1.0 - (-2.0f64).exp();
        assert_eq!(Service::Normal { mean: 10.0, sd: 2.0, floor: 0.0 }.sample(u1, 0.0), 14);
        assert_eq!(Service::Normal { mean: 10.0, sd: 2.0, floor: 0.0 }.sample(u1, 0.5), 6);
        assert_eq!(Service::Normal { mean: 1.0, sd: 2.0, floor: 0.0 }.sample(u1, 0.5), 0, "floored");
        assert_eq!(Service::LogNormal { median: 10.0, sigma: 0.5 }.sample(u1, 0.0), 27); // 10·e
        // Sample mean of the normal near its mean.
        let mut s = super::super::rng::LazyStream::default();
        s.reset(3);
        let n = 20_000u64;
        let total: u64 = (0..n)
            .map(|i| Service::Normal { mean: 10.0, sd: 2.0, floor: 0.0 }.sample(s.unit(2 * i), s.unit(2 * i + 1)))
            .sum();
        assert!((total as f64 / n as f64 - 10.0).abs() < 0.1);
    }

    #[test]
    fn the_rate_limit_refuses_before_the_gate_is_asked() {
        let load = ToolLoad { concurrency: Some(1), rate: Some((1.0, 1)), ..ToolLoad::default() };
        let mut t = ToolState::default();
        t.reset(&load);
        assert_eq!(t.admit(0, (0, 0)), Admission::Served { place: true });
        assert_eq!(t.admit(0, (1, 0)), Admission::Refused(LoadFault::RateLimited, Some(1000)));
        // At 1 s a token is back but the place is still held: 503.
        assert_eq!(t.admit(1000, (1, 0)), Admission::Refused(LoadFault::Busy, None));
        assert_eq!(t.release(), None);
        assert_eq!(t.admit(2000, (1, 0)), Admission::Served { place: true });
    }

    #[test]
    fn a_write_conflicts_when_another_committed_while_it_was_served() {
        let mut t = ToolState::default();
        t.reset(&ToolLoad { occ: true, ..ToolLoad::default() });
        let (a, b) = (t.start(), t.start());
        assert_eq!(t.peak(), 2);
        assert!(t.end(Some(a)));
        assert!(!t.end(Some(b)));
        let c = t.start();
        assert!(t.end(Some(c)));
        assert_eq!(t.peak(), 2);
    }
}
