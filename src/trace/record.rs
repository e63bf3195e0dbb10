//! Records a simulated run's events as native traces (`--trace-out`), one per agent of the
//! run's fleet: each tool result's content is the text the model read, as in an imported trace.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{FinalOutcome, Header, Stop, Trace, TraceEvent};
use crate::engine::Scenario;
use crate::engine::events::{By, Event, Observer, TerminatedBy};
use crate::envelope::read::message_content;
use crate::provider::Format;

/// A call's attempts at the tool so far: the latest one's status, how many, and when each
/// reached the tool.
#[derive(Default)]
struct Attempts {
    status: Option<u16>,
    count: u32,
    at_ms: Vec<u64>,
}

pub struct Recorder {
    /// One trace per agent, in agent order (a lone agent's header names no agent).
    pub traces: Vec<Trace>,
    agent: usize,
    /// (agent, call id) → the call's attempts so far.
    status: BTreeMap<(usize, u32), Attempts>,
    tools: Vec<String>,
    model_latency_ms: u64,
    format: Format,
    /// Whether the model's decisions are recorded (`run --explain`).
    pub explain: bool,
}

impl Recorder {
    pub fn new(sc: &Scenario, strategy: &str, run: u64) -> Recorder {
        let header = Header::for_scenario(
            sc,
            format!("{}/{}/run{}", sc.name, strategy, run),
            "tracefault-sim",
            Some(sc.format.name().into()),
            format!("simulated:{}", sc.profile.name),
        );
        let agents = sc.fleet.agents;
        let traces = (0..agents)
            .map(|k| {
                let mut header = header.clone();
                if agents > 1 {
                    header.id = format!("{}/agent{k}", header.id);
                    header.agent = Some(k);
                }
                Trace { header, events: Vec::new() }
            })
            .collect();
        Recorder {
            traces,
            agent: 0,
            status: BTreeMap::new(),
            model_latency_ms: sc.profile.model_latency_ms,
            format: sc.format,
            explain: false,
            tools: sc.task.tools.clone(),
        }
    }
}

impl Observer for Recorder {
    const EXPLAINS: bool = true;

    fn event(&mut self, e: &Event<'_>) {
        let ev = match *e {
            Event::ModelCall { turn, t_ms, status, tokens_in, tokens_out, ends, .. } => TraceEvent::ModelCall {
                turn,
                status,
                tokens_in,
                tokens_out,
                latency_ms: Some(if status == 200 { self.model_latency_ms } else { 0 }),
                t_ms: Some(t_ms),
                stop: if status != 200 {
                    Stop::Error
                } else if ends {
                    Stop::End
                } else {
                    Stop::ToolCalls
                },
                text: None,
            },
            Event::ToolCall { turn, call_id, tool, args, .. } => {
                let args: Value = serde_json::from_str(args).unwrap_or(Value::Null);
                TraceEvent::ToolCall {
                    turn,
                    call_id: format!("call_{call_id}"),
                    name: tool.to_owned(),
                    args: args.into(),
                }
            }
            Event::Attempt { call_id, status, by, t_ms, .. } => {
                let entry = self.status.entry((self.agent, call_id)).or_default();
                if by != By::Orchestrator {
                    *entry = Attempts::default();
                }
                entry.status = status;
                entry.count += 1;
                entry.at_ms.push(t_ms);
                return;
            }
            // What misled the model shows in the results' content.
            Event::Misled { .. } => return,
            // The open breaker answered: no status from the tool, and the attempts that did reach
            // it stay counted (none when the breaker met the call's first try).
            Event::Rejected { call_id, .. } => {
                self.status.entry((self.agent, call_id)).or_default().status = None;
                return;
            }
            Event::BreakerTrip { tool, t_ms } => {
                TraceEvent::Breaker { tool: self.tools.get(usize::from(tool)).cloned().unwrap_or_default(), t_ms }
            }
            Event::ToolResult { call_id, class, content, latency_ms, .. } => {
                let Attempts { status, count: attempts, at_ms: attempt_ms } =
                    self.status.remove(&(self.agent, call_id)).unwrap_or_default();
                TraceEvent::ToolResult {
                    call_id: format!("call_{call_id}"),
                    ok: class.is_none_or(|c| !c.is_failure()),
                    status,
                    content: message_content(self.format, content),
                    error_class: class.map(|c| c.name().to_owned()),
                    latency_ms: Some(latency_ms),
                    attempts: Some(attempts),
                    evidence: None,
                    cancelled: false,
                    attempt_ms,
                }
            }
            Event::End { by, text, t_ms, started_ms, false_success } => {
                let agent = self.agent;
                let in_flight: u32 = self.status.range((agent, 0)..=(agent, u32::MAX)).map(|(_, s)| s.count).sum();
                // A false success is recorded as a source with a verdict records it: an answer,
                // judged unsuccessful.
                TraceEvent::Final {
                    text: text.to_owned(),
                    outcome: match by {
                        _ if false_success => FinalOutcome::Answer,
                        TerminatedBy::Answer => FinalOutcome::Answer,
                        TerminatedBy::GaveUp => FinalOutcome::GaveUp,
                        _ => FinalOutcome::CutOff,
                    },
                    reason: None,
                    // A give-up did not complete the task, claimed or not: the verdict calibrate
                    // reads `p_claim_success` from.
                    success: (false_success || by == TerminatedBy::GaveUp).then_some(false),
                    started_ms: Some(started_ms),
                    t_ms: Some(t_ms),
                    in_flight_attempts: (in_flight > 0).then_some(in_flight),
                }
            }
            Event::Decision { call_id, signal, truth, perceived, action, draws } => {
                if !self.explain {
                    return;
                }
                TraceEvent::Decision {
                    call_id: format!("call_{call_id}"),
                    signal: signal.name().to_owned(),
                    truth: truth.name().to_owned(),
                    perceived: perceived.name().to_owned(),
                    action: action.name().to_owned(),
                    draws: draws.to_vec(),
                }
            }
            Event::ProtocolViolation { .. } | Event::Done { .. } => return,
        };
        self.traces[self.agent].events.push(ev);
    }

    fn agent(&mut self, agent: u32) {
        self.agent = agent as usize;
    }
}
