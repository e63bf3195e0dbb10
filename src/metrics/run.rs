//! Folds one run's events into its metrics (one row of `runs.csv`): a fleet's run folds every
//! agent's events into fleet totals.

use crate::engine::events::{By, Event, Misled, Observer, TerminatedBy};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunMetrics {
    pub terminated_by: Option<TerminatedBy>,
    pub model_calls: u64,
    pub tool_calls: u64,
    pub wasted_retries: u64,
    pub orchestrator_retries: u64,
    pub model_transient_roundtrips: u64,
    pub breaker_trips: u64,
    pub breaker_rejections: u64,
    pub faults_injected: u64,
    pub tokens: u64,
    /// Of `tokens`: what the model calls sent (input) and got back (output), for the cost.
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub virtual_ms: u64,
    pub protocol_violations: u64,
    pub raw_leaks: u64,
    /// Whether the run met any fault, and any that was not retryable.
    pub met_fault: bool,
    pub met_non_retryable: bool,
    /// Times each fault rule's trigger fired.
    pub rule_fired: Vec<u64>,
    /// Agents that ended, and those that answered.
    pub agents: u64,
    pub agents_succeeded: u64,
    /// Each agent's time from its start to its end, in the order they ended (sorted once the
    /// run is done).
    pub agent_ms: Vec<u64>,
    /// Attempts that were not retries or re-issues: model calls and a call's first attempt.
    pub first_attempts: u64,
    /// Attempts a tool refused under load (rate, concurrency, write conflict).
    pub load_rejections: u64,
    /// Attempts of a write tool's call that committed after one of the same call had.
    pub duplicate_writes: u64,
    /// Agents whose ending claimed the task done while its goal was not reached.
    pub false_successes: u64,
    /// Wrong values (`wrong_content`) the model took as right.
    pub wrong_accepted: u64,
    /// Injected instructions the model followed (it called the tool one asked for).
    pub injection_followed: u64,
    /// The most calls one tool served at once, and each tool's (by index; empty when no
    /// tool was tracked).
    pub peak_in_flight: u64,
    pub peak_by_tool: Vec<u64>,
    transient_pending: bool,
    /// In a fleet: whose events come now, and each agent's `transient_pending`.
    agent: usize,
    pending_by_agent: Vec<bool>,
}

impl RunMetrics {
    pub fn reset(&mut self, rules: usize) {
        let mut rule_fired = std::mem::take(&mut self.rule_fired);
        rule_fired.clear();
        rule_fired.resize(rules, 0);
        let mut agent_ms = std::mem::take(&mut self.agent_ms);
        agent_ms.clear();
        let mut pending_by_agent = std::mem::take(&mut self.pending_by_agent);
        pending_by_agent.clear();
        let mut peak_by_tool = std::mem::take(&mut self.peak_by_tool);
        peak_by_tool.clear();
        *self = RunMetrics { rule_fired, agent_ms, pending_by_agent, peak_by_tool, ..RunMetrics::default() };
    }

    /// Nearest-rank percentile of the agents' times (`q` in (0, 1]); 0 before any ended.
    pub fn agent_ms_percentile(&self, q: f64) -> u64 {
        let n = self.agent_ms.len();
        if n <= 1 {
            // A lone agent's time is every percentile (the common case, without the float work).
            return self.agent_ms.first().copied().unwrap_or(0);
        }
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n.max(1));
        self.agent_ms.get(rank - 1).copied().unwrap_or(0)
    }

    /// Attempts per first attempt, in thousandths rounded to the nearest (a half up), as every
    /// ratio a report prints is rounded (1000 when nothing was retried).
    pub fn retry_amplification_milli(&self) -> u64 {
        (self.calls() * 2000).checked_div(self.first_attempts).map_or(0, |twice| twice.div_ceil(2))
    }

    pub fn calls(&self) -> u64 {
        self.model_calls + self.tool_calls
    }

    pub fn terminated_by(&self) -> TerminatedBy {
        self.terminated_by.unwrap_or(TerminatedBy::ProtocolError)
    }

    /// Folds one agent's finished run into this fleet run, by the rules of [`Event::End`]: the
    /// run ends as its first agent to end without an answer did (agents are added in the order
    /// they ended), counts are summed, and the run lasts until its last agent ends. A lone
    /// agent's run is that agent's, folded into a reset `RunMetrics`.
    pub fn add_agent(&mut self, a: &RunMetrics) {
        if self.terminated_by.is_none_or(|t| t == TerminatedBy::Answer) {
            self.terminated_by = a.terminated_by;
        }
        for (into, from) in [
            (&mut self.model_calls, a.model_calls),
            (&mut self.tool_calls, a.tool_calls),
            (&mut self.wasted_retries, a.wasted_retries),
            (&mut self.orchestrator_retries, a.orchestrator_retries),
            (&mut self.model_transient_roundtrips, a.model_transient_roundtrips),
            (&mut self.breaker_trips, a.breaker_trips),
            (&mut self.breaker_rejections, a.breaker_rejections),
            (&mut self.faults_injected, a.faults_injected),
            (&mut self.tokens, a.tokens),
            (&mut self.tokens_in, a.tokens_in),
            (&mut self.tokens_out, a.tokens_out),
            (&mut self.protocol_violations, a.protocol_violations),
            (&mut self.raw_leaks, a.raw_leaks),
            (&mut self.agents, a.agents),
            (&mut self.agents_succeeded, a.agents_succeeded),
            (&mut self.first_attempts, a.first_attempts),
            (&mut self.load_rejections, a.load_rejections),
            (&mut self.duplicate_writes, a.duplicate_writes),
            (&mut self.false_successes, a.false_successes),
            (&mut self.wrong_accepted, a.wrong_accepted),
            (&mut self.injection_followed, a.injection_followed),
        ] {
            *into += from;
        }
        self.virtual_ms = self.virtual_ms.max(a.virtual_ms);
        self.met_fault |= a.met_fault;
        self.met_non_retryable |= a.met_non_retryable;
        self.agent_ms.extend_from_slice(&a.agent_ms);
        self.agent_ms.sort_unstable();
        if self.rule_fired.len() < a.rule_fired.len() {
            self.rule_fired.resize(a.rule_fired.len(), 0);
        }
        for (into, from) in self.rule_fired.iter_mut().zip(&a.rule_fired) {
            *into += from;
        }
    }

    /// Gave up although every fault it met was retryable.
    pub fn unnecessary_failure(&self) -> bool {
        self.terminated_by == Some(TerminatedBy::GaveUp) && self.met_fault && !self.met_non_retryable
    }
}

impl Observer for RunMetrics {
    const READS_CONTENT: bool = false;

    // Always inlined: each call site builds one known variant, so the match folds away.
    #[inline(always)]
    fn event(&mut self, e: &Event<'_>) {
        match *e {
            Event::ModelCall { status, tokens_in, tokens_out, retry, rule, fired, wasted, load, .. } => {
                self.model_calls += 1;
                self.first_attempts += u64::from(!retry);
                self.tokens += tokens_in + tokens_out;
                self.tokens_in += tokens_in;
                self.tokens_out += tokens_out;
                if retry {
                    self.orchestrator_retries += 1;
                }
                if wasted {
                    self.wasted_retries += 1;
                }
                if load {
                    self.load_rejections += 1;
                    self.met_fault = true;
                } else if let Some(r) = rule {
                    self.faults_injected += 1;
                    if fired {
                        self.rule_fired[usize::from(r)] += 1;
                    }
                    self.met_fault = true;
                    let retryable = crate::fault::http_class(status).is_none_or(|c| c.retryable());
                    self.met_non_retryable |= !retryable;
                }
                // (A stalled answer is a fault's and a turn all the same.)
                if status == 200 && std::mem::take(&mut self.transient_pending) {
                    self.model_transient_roundtrips += 1;
                }
            }
            Event::Attempt { by, class, rule, fired, wasted, load, duplicate, .. } => {
                self.tool_calls += 1;
                self.duplicate_writes += u64::from(duplicate);
                self.first_attempts += u64::from(by == By::Model);
                if by == By::Orchestrator {
                    self.orchestrator_retries += 1;
                }
                if wasted {
                    self.wasted_retries += 1;
                }
                if load {
                    self.load_rejections += 1;
                    self.met_fault = true;
                } else if let Some(c) = class {
                    self.faults_injected += 1;
                    self.met_fault = true;
                    self.met_non_retryable |= !c.retryable();
                } else if rule.is_some() {
                    // A result that succeeded, changed by a rule's fault (wrong, large, injected).
                    self.faults_injected += 1;
                    self.met_fault = true;
                }
                if let (true, Some(r)) = (fired, rule) {
                    self.rule_fired[usize::from(r)] += 1;
                }
            }
            Event::Rejected { .. } => {
                self.breaker_rejections += 1;
                self.met_fault = true;
            }
            Event::BreakerTrip { .. } => self.breaker_trips += 1,
            Event::ToolResult { class, raw_leak, .. } => {
                if class.is_some_and(|c| c.retryable()) {
                    self.transient_pending = true;
                }
                if raw_leak {
                    self.raw_leaks += 1;
                }
            }
            Event::ProtocolViolation { .. } => self.protocol_violations += 1,
            Event::Misled { how: Misled::WrongAccepted, .. } => self.wrong_accepted += 1,
            Event::Misled { how: Misled::InjectionFollowed, .. } => self.injection_followed += 1,
            Event::Decision { .. } => {}
            Event::End { by, t_ms, started_ms, false_success, .. } => {
                self.false_successes += u64::from(false_success);
                // A fleet's run ends as its first agent to end without an answer did, or with
                // an answer when every agent answered; it lasts until its last agent ends.
                if self.terminated_by.is_none_or(|t| t == TerminatedBy::Answer) {
                    self.terminated_by = Some(by);
                }
                self.agents += 1;
                self.agents_succeeded += u64::from(by == TerminatedBy::Answer);
                self.virtual_ms = self.virtual_ms.max(t_ms);
                self.agent_ms.push(t_ms - started_ms);
            }
            Event::Done { peaks } => {
                self.peak_by_tool.clear();
                self.peak_by_tool.extend(peaks.iter().map(|&p| u64::from(p)));
                self.peak_in_flight = self.peak_by_tool.iter().copied().max().unwrap_or(0);
                self.agent_ms.sort_unstable();
            }
            Event::ToolCall { .. } => {}
        }
    }

    // Called before every event of a fleet (the lone agent's loop never calls it).
    #[inline(always)]
    fn agent(&mut self, agent: u32) {
        let agent = agent as usize;
        if self.pending_by_agent.len() <= agent.max(self.agent) {
            self.pending_by_agent.resize(agent.max(self.agent) + 1, false);
        }
        self.pending_by_agent[self.agent] = self.transient_pending;
        self.transient_pending = self.pending_by_agent[agent];
        self.agent = agent;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attempts per first attempt, rounded to the nearest thousandth with a half up, by hand.
    #[test]
    fn retry_amplification_is_rounded_not_cut() {
        let amp = |calls: u64, first: u64| {
            RunMetrics { tool_calls: calls, first_attempts: first, ..RunMetrics::default() }.retry_amplification_milli()
        };
        assert_eq!(amp(120_678, 100_000), 1207, "1.20678 rounds up, where cutting gave 1.206");
        assert_eq!(amp(120_649, 100_000), 1206);
        assert_eq!(amp(2001, 2000), 1001, "exactly 1.0005: a half goes up");
        assert_eq!(amp(7, 4), 1750);
        assert_eq!(amp(2, 3), 667);
        assert_eq!(amp(5, 0), 0, "no first attempt: nothing to divide by");
    }

    /// A fleet of two by hand: the first agent to end without an answer decides, counts add
    /// up, the run lasts as long as its slowest agent.
    #[test]
    fn agents_fold_into_a_fleet_run() {
        let agent = |by, calls, ms| RunMetrics {
            terminated_by: Some(by),
            model_calls: calls,
            tool_calls: 2 * calls,
            agents: 1,
            agents_succeeded: u64::from(by == TerminatedBy::Answer),
            virtual_ms: ms,
            agent_ms: vec![ms],
            ..RunMetrics::default()
        };
        let mut fleet = RunMetrics::default();
        fleet.add_agent(&agent(TerminatedBy::Answer, 3, 500));
        fleet.add_agent(&agent(TerminatedBy::GaveUp, 2, 900));
        fleet.add_agent(&agent(TerminatedBy::StepCap, 5, 700));
        assert_eq!(fleet.terminated_by(), TerminatedBy::GaveUp);
        assert_eq!((fleet.model_calls, fleet.tool_calls, fleet.calls()), (10, 20, 30));
        assert_eq!((fleet.agents, fleet.agents_succeeded, fleet.virtual_ms), (3, 1, 900));
        assert_eq!(fleet.agent_ms, [500, 700, 900]);
        assert_eq!(fleet.agent_ms_percentile(0.5), 700);
    }
}
