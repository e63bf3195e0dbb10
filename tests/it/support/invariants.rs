//! An observer that checks the engine's invariants on one agent's events as they come.

use std::collections::{BTreeMap, BTreeSet};

use tracefault::engine::events::{By, Event, Observer};
use tracefault::fault::ErrorClass;

/// Watches one run's events and records every broken invariant.
#[derive(Default)]
pub struct Invariants {
    pub max_attempts: u32,
    pub pending: BTreeSet<u32>,
    pub answered: BTreeSet<u32>,
    pub attempts: BTreeMap<u32, (u32, Option<ErrorClass>)>,
    pub broken: Vec<String>,
}

impl Observer for Invariants {
    fn event(&mut self, e: &Event<'_>) {
        match *e {
            Event::ModelCall { .. } => {
                if !self.pending.is_empty() {
                    self.broken.push(format!("model called with unanswered calls {:?}", self.pending));
                }
                self.pending.clear();
            }
            Event::ToolCall { call_id, .. } => {
                self.pending.insert(call_id);
            }
            Event::Attempt { call_id, by, class, .. } => {
                let entry = self.attempts.entry(call_id).or_insert((0, None));
                entry.0 += 1;
                if entry.0 > self.max_attempts {
                    self.broken
                        .push(format!("call {call_id}: {} attempts > max_attempts {}", entry.0, self.max_attempts));
                }
                if by == By::Orchestrator && entry.1.is_some_and(|c| !c.retryable()) {
                    self.broken.push(format!("call {call_id}: orchestrator retried a non-retryable {:?}", entry.1));
                }
                entry.1 = class;
            }
            Event::ToolResult { call_id, .. } => {
                if !self.pending.remove(&call_id) {
                    self.broken.push(format!("result for call {call_id} that is not awaiting one"));
                }
                if !self.answered.insert(call_id) {
                    self.broken.push(format!("call {call_id} answered twice"));
                }
            }
            Event::ProtocolViolation { call_id } => self.broken.push(format!("protocol violation on {call_id}")),
            Event::Misled { call_id, how } => {
                if !self.answered.contains(&call_id) {
                    self.broken.push(format!("call {call_id} misled the model ({how:?}) before its result came"));
                }
            }
            Event::Rejected { .. }
            | Event::BreakerTrip { .. }
            | Event::End { .. }
            | Event::Done { .. }
            | Event::Decision { .. } => {}
        }
    }
}
