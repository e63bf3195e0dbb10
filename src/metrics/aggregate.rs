//! Exact aggregates per (scenario, strategy). Every field is an integer sum or count, so
//! merging partial aggregates in any order gives the same bytes: `--jobs` cannot change output.

use super::run::RunMetrics;

// Aggregates travel between shards and `merge` as JSON; every field is an exact integer.
use crate::engine::events::TerminatedBy;

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Aggregate {
    pub runs: u64,
    /// Runs by how they ended, indexed like [`TerminatedBy::ALL`].
    pub terminated: [u64; 8],
    pub unnecessary_failures: u64,
    pub calls_sum: u64,
    /// `calls_hist[c]` = runs that made `c` calls: exact percentiles in flat memory.
    pub calls_hist: Vec<u64>,
    pub model_calls_sum: u64,
    pub tool_calls_sum: u64,
    pub wasted_retries: u64,
    pub orchestrator_retries: u64,
    pub model_transient_roundtrips: u64,
    pub breaker_trips: u64,
    pub breaker_rejections: u64,
    pub faults_injected: u64,
    pub tokens_sum: u128,
    pub virtual_ms_sum: u128,
    pub protocol_violations: u64,
    pub raw_leaks: u64,
    /// Paired differences of calls against the baseline: Σd, Σd².
    pub delta_sum: i128,
    pub delta_sq_sum: i128,
    pub rule_fired: Vec<u64>,
    /// The run with the most calls (ties: the lowest run number), for the repro line.
    pub worst: Option<(u64, u64)>,
    /// Fleet figures: agents and those that answered, sums of each run's agent-time
    /// percentiles, the largest peak in flight, first attempts, load refusals.
    #[serde(default)]
    pub agents: u64,
    #[serde(default)]
    pub agents_succeeded: u64,
    #[serde(default)]
    pub agent_ms_p50_sum: u128,
    #[serde(default)]
    pub agent_ms_p99_sum: u128,
    #[serde(default)]
    pub peak_in_flight: u64,
    /// The largest peak in flight of each tool (by index), where tools were tracked.
    #[serde(default)]
    pub peak_by_tool: Vec<u64>,
    #[serde(default)]
    pub first_attempts: u64,
    #[serde(default)]
    pub load_rejections: u64,
    #[serde(default)]
    pub duplicate_writes: u64,
    /// Runs in which an agent's ending claimed the task done while its goal was not reached.
    #[serde(default)]
    pub false_success_runs: u64,
    /// Runs in which the model took a wrong value as right / followed an injected instruction.
    #[serde(default)]
    pub wrong_accepted_runs: u64,
    #[serde(default)]
    pub injection_followed_runs: u64,
    /// Σ of squares of each run's wasted retries and breaker trips (spreads for baselines).
    #[serde(default)]
    pub wasted_sq_sum: u128,
    #[serde(default)]
    pub trips_sq_sum: u128,
    /// Input and output tokens of every run, for the cost under `[pricing]`.
    #[serde(default)]
    pub tokens_in_sum: u128,
    #[serde(default)]
    pub tokens_out_sum: u128,
}

/// `into[i] = max(into[i], from[i])`, growing `into` to `from`'s length.
fn max_each(into: &mut Vec<u64>, from: &[u64]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(from) {
        *a = (*a).max(*b);
    }
}

impl Aggregate {
    pub fn add(&mut self, m: &RunMetrics, run: u64) {
        let calls = m.calls();
        self.runs += 1;
        self.terminated[m.terminated_by() as usize] += 1;
        self.unnecessary_failures += u64::from(m.unnecessary_failure());
        self.calls_sum += calls;
        let c = calls as usize;
        if self.calls_hist.len() <= c {
            self.calls_hist.resize(c + 1, 0);
        }
        self.calls_hist[c] += 1;
        self.model_calls_sum += m.model_calls;
        self.tool_calls_sum += m.tool_calls;
        self.wasted_retries += m.wasted_retries;
        self.orchestrator_retries += m.orchestrator_retries;
        self.model_transient_roundtrips += m.model_transient_roundtrips;
        self.breaker_trips += m.breaker_trips;
        self.breaker_rejections += m.breaker_rejections;
        self.faults_injected += m.faults_injected;
        self.tokens_sum += u128::from(m.tokens);
        self.virtual_ms_sum += u128::from(m.virtual_ms);
        self.protocol_violations += m.protocol_violations;
        self.raw_leaks += m.raw_leaks;
        self.agents += m.agents;
        self.agents_succeeded += m.agents_succeeded;
        self.agent_ms_p50_sum += u128::from(m.agent_ms_percentile(0.5));
        self.agent_ms_p99_sum += u128::from(m.agent_ms_percentile(0.99));
        self.peak_in_flight = self.peak_in_flight.max(m.peak_in_flight);
        max_each(&mut self.peak_by_tool, &m.peak_by_tool);
        self.first_attempts += m.first_attempts;
        self.load_rejections += m.load_rejections;
        self.duplicate_writes += m.duplicate_writes;
        self.false_success_runs += u64::from(m.false_successes > 0);
        self.wrong_accepted_runs += u64::from(m.wrong_accepted > 0);
        self.injection_followed_runs += u64::from(m.injection_followed > 0);
        self.wasted_sq_sum += u128::from(m.wasted_retries) * u128::from(m.wasted_retries);
        self.trips_sq_sum += u128::from(m.breaker_trips) * u128::from(m.breaker_trips);
        self.tokens_in_sum += u128::from(m.tokens_in);
        self.tokens_out_sum += u128::from(m.tokens_out);
        if self.rule_fired.len() < m.rule_fired.len() {
            self.rule_fired.resize(m.rule_fired.len(), 0);
        }
        for (a, b) in self.rule_fired.iter_mut().zip(&m.rule_fired) {
            *a += b;
        }
        self.note_worst(calls, run);
    }

    fn note_worst(&mut self, calls: u64, run: u64) {
        let better = match self.worst {
            None => true,
            Some((c, r)) => calls > c || (calls == c && run < r),
        };
        if better {
            self.worst = Some((calls, run));
        }
    }

    pub fn add_delta(&mut self, d: i64) {
        self.delta_sum += i128::from(d);
        self.delta_sq_sum += i128::from(d) * i128::from(d);
    }

    pub fn merge(&mut self, o: &Aggregate) {
        self.runs += o.runs;
        for (a, b) in self.terminated.iter_mut().zip(o.terminated) {
            *a += b;
        }
        self.unnecessary_failures += o.unnecessary_failures;
        self.calls_sum += o.calls_sum;
        if self.calls_hist.len() < o.calls_hist.len() {
            self.calls_hist.resize(o.calls_hist.len(), 0);
        }
        for (a, b) in self.calls_hist.iter_mut().zip(&o.calls_hist) {
            *a += b;
        }
        self.model_calls_sum += o.model_calls_sum;
        self.tool_calls_sum += o.tool_calls_sum;
        self.wasted_retries += o.wasted_retries;
        self.orchestrator_retries += o.orchestrator_retries;
        self.model_transient_roundtrips += o.model_transient_roundtrips;
        self.breaker_trips += o.breaker_trips;
        self.breaker_rejections += o.breaker_rejections;
        self.faults_injected += o.faults_injected;
        self.tokens_sum += o.tokens_sum;
        self.virtual_ms_sum += o.virtual_ms_sum;
        self.protocol_violations += o.protocol_violations;
        self.raw_leaks += o.raw_leaks;
        self.delta_sum += o.delta_sum;
        self.delta_sq_sum += o.delta_sq_sum;
        self.agents += o.agents;
        self.agents_succeeded += o.agents_succeeded;
        self.agent_ms_p50_sum += o.agent_ms_p50_sum;
        self.agent_ms_p99_sum += o.agent_ms_p99_sum;
        self.peak_in_flight = self.peak_in_flight.max(o.peak_in_flight);
        max_each(&mut self.peak_by_tool, &o.peak_by_tool);
        self.first_attempts += o.first_attempts;
        self.load_rejections += o.load_rejections;
        self.duplicate_writes += o.duplicate_writes;
        self.false_success_runs += o.false_success_runs;
        self.wrong_accepted_runs += o.wrong_accepted_runs;
        self.injection_followed_runs += o.injection_followed_runs;
        self.wasted_sq_sum += o.wasted_sq_sum;
        self.trips_sq_sum += o.trips_sq_sum;
        self.tokens_in_sum += o.tokens_in_sum;
        self.tokens_out_sum += o.tokens_out_sum;
        if self.rule_fired.len() < o.rule_fired.len() {
            self.rule_fired.resize(o.rule_fired.len(), 0);
        }
        for (a, b) in self.rule_fired.iter_mut().zip(&o.rule_fired) {
            *a += b;
        }
        if let Some((c, r)) = o.worst {
            self.note_worst(c, r);
        }
    }

    /// Sample standard deviations per run of calls, wasted retries and breaker trips.
    pub fn spreads(&self) -> [f64; 3] {
        let (mut sum, mut sq) = (0u128, 0u128);
        for (c, &runs) in self.calls_hist.iter().enumerate() {
            sum += c as u128 * u128::from(runs);
            sq += (c * c) as u128 * u128::from(runs);
        }
        [
            super::stats::sample_sd(sum, sq, self.runs),
            super::stats::sample_sd(u128::from(self.wasted_retries), self.wasted_sq_sum, self.runs),
            super::stats::sample_sd(u128::from(self.breaker_trips), self.trips_sq_sum, self.runs),
        ]
    }

    pub fn count(&self, t: TerminatedBy) -> u64 {
        self.terminated[t as usize]
    }

    pub fn loops(&self) -> u64 {
        TerminatedBy::ALL.iter().filter(|t| t.is_loop()).map(|&t| self.count(t)).sum()
    }

    /// Nearest-rank percentile of calls per run (`q` in (0, 1]).
    pub fn calls_percentile(&self, q: f64) -> u64 {
        let rank = ((q * self.runs as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (calls, &n) in self.calls_hist.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return calls as u64;
            }
        }
        0
    }

    pub fn calls_max(&self) -> u64 {
        self.calls_hist.iter().rposition(|&n| n > 0).unwrap_or(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(calls: u64, by: TerminatedBy) -> RunMetrics {
        let mut m = RunMetrics::default();
        m.model_calls = calls;
        m.terminated_by = Some(by);
        m
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut a = Aggregate::default();
        for (i, c) in [1, 2, 3, 4, 100].into_iter().enumerate() {
            a.add(&run(c, TerminatedBy::Answer), i as u64);
        }
        assert_eq!(a.calls_percentile(0.5), 3);
        assert_eq!(a.calls_percentile(0.95), 100);
        assert_eq!(a.calls_max(), 100);
        assert_eq!(a.worst, Some((100, 4)));
    }

    #[test]
    fn merge_is_order_independent() {
        let runs: Vec<RunMetrics> = (0..20)
            .map(|i| run(i % 7, if i % 3 == 0 { TerminatedBy::StepCap } else { TerminatedBy::Answer }))
            .collect();
        let mut whole = Aggregate::default();
        runs.iter().enumerate().for_each(|(i, r)| whole.add(r, i as u64));
        let (mut a, mut b) = (Aggregate::default(), Aggregate::default());
        runs.iter().enumerate().for_each(|(i, r)| if i < 9 { a.add(r, i as u64) } else { b.add(r, i as u64) });
        let mut ba = b.clone();
        ba.merge(&a);
        a.merge(&b);
        assert_eq!(a, whole);
        assert_eq!(ba, whole);
        assert_eq!(whole.loops(), 7);
    }
}
