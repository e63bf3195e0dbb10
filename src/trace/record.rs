//! Records a simulated run's events as native traces (`--trace-out`), one per agent of the
//! run's fleet: each tool result's content is the text the model read, as in an imported trace.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{FinalOutcome, Header, Stop, Trace, TraceEvent};
use crate::engine::events::{By, Event, Observer, TerminatedBy};
use crate::envelope::Format;
use crate::envelope::read::message_content;
use crate::scenario::Scenario;

pub struct Recorder {
    /// One trace per agent, in agent order (a lone agent's header names no agent).
    pub traces: Vec<Trace>,
    agent: usize,
    /// (agent, call id) → the latest attempt's status and the attempts so far.
    status: BTreeMap<(usize, u32), (Option<u16>, u32)>,
    model_latency_ms: u64,
    format: Format,
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
        }
    }
}

impl Observer for Recorder {
    fn event(&mut self, e: &Event<'_>) {
        let ev = match *e {
            Event::ModelCall { turn, status, tokens_in, tokens_out, ends, .. } => TraceEvent::ModelCall {
                turn,
                status,
                tokens_in,
                tokens_out,
                latency_ms: Some(if status == 200 { self.model_latency_ms } else { 0 }),
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
            Event::Attempt { call_id, status, by, .. } => {
                let entry = self.status.entry((self.agent, call_id)).or_insert((None, 0));
                entry.0 = status;
                entry.1 = if by == By::Orchestrator { entry.1 + 1 } else { 1 };
                return;
            }
            Event::Rejected { call_id, .. } => {
                self.status.insert((self.agent, call_id), (None, 0));
                return;
            }
            Event::ToolResult { call_id, class, content, latency_ms, .. } => {
                let (status, attempts) = self.status.remove(&(self.agent, call_id)).unwrap_or((None, 0));
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
                }
            }
            Event::End { by, text, .. } => TraceEvent::Final {
                text: text.to_owned(),
                outcome: match by {
                    TerminatedBy::Answer => FinalOutcome::Answer,
                    TerminatedBy::GaveUp => FinalOutcome::GaveUp,
                    _ => FinalOutcome::CutOff,
                },
                reason: None,
                success: None,
            },
            Event::BreakerTrip { .. } | Event::ProtocolViolation { .. } | Event::Done { .. } => return,
        };
        self.traces[self.agent].events.push(ev);
    }

    fn agent(&mut self, agent: u32) {
        self.agent = agent as usize;
    }
}
