//! Folds one run's events into its metrics (one row of `runs.csv`).

use crate::engine::events::{By, Event, Observer, TerminatedBy};

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
    pub virtual_ms: u64,
    pub protocol_violations: u64,
    pub raw_leaks: u64,
    /// Whether the run met any fault, and any that was not retryable.
    pub met_fault: bool,
    pub met_non_retryable: bool,
    /// Times each fault rule's trigger fired.
    pub rule_fired: Vec<u64>,
    transient_pending: bool,
}

impl RunMetrics {
    pub fn reset(&mut self, rules: usize) {
        let mut rule_fired = std::mem::take(&mut self.rule_fired);
        rule_fired.clear();
        rule_fired.resize(rules, 0);
        *self = RunMetrics { rule_fired, ..RunMetrics::default() };
    }

    pub fn calls(&self) -> u64 {
        self.model_calls + self.tool_calls
    }

    pub fn terminated_by(&self) -> TerminatedBy {
        self.terminated_by.unwrap_or(TerminatedBy::ProtocolError)
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
            Event::ModelCall { status, tokens_in, tokens_out, retry, rule, fired, wasted, .. } => {
                self.model_calls += 1;
                self.tokens += tokens_in + tokens_out;
                if retry {
                    self.orchestrator_retries += 1;
                }
                if wasted {
                    self.wasted_retries += 1;
                }
                if let Some(r) = rule {
                    self.faults_injected += 1;
                    if fired {
                        self.rule_fired[usize::from(r)] += 1;
                    }
                    self.met_fault = true;
                    let retryable = crate::fault::http_class(status).is_none_or(|c| c.retryable());
                    self.met_non_retryable |= !retryable;
                } else if status == 200 && std::mem::take(&mut self.transient_pending) {
                    self.model_transient_roundtrips += 1;
                }
            }
            Event::Attempt { by, class, rule, fired, wasted, .. } => {
                self.tool_calls += 1;
                if by == By::Orchestrator {
                    self.orchestrator_retries += 1;
                }
                if wasted {
                    self.wasted_retries += 1;
                }
                if let Some(c) = class {
                    self.faults_injected += 1;
                    self.met_fault = true;
                    self.met_non_retryable |= !c.retryable();
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
            Event::End { by, t_ms, .. } => {
                self.terminated_by = Some(by);
                self.virtual_ms = t_ms;
            }
            Event::ToolCall { .. } => {}
        }
    }
}
