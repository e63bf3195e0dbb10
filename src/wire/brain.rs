//! The mock provider's model: it follows the scenario's task and profile, and decides each
//! turn by reading the tool results the agent actually sent — an `is_error` flag, a five-field
//! object, an `ERROR:` prefix, a stack trace, "more may be available" — with the same
//! perception and decision rules as the engine.

use serde_json::Value;

use super::state::{FIX_KEY, WireSlot, WireState};
use crate::engine::model::{Action, CallHistory, Perceived, act, perceive_failure};
use crate::envelope::Format;
use crate::envelope::read::read_text;
use crate::fault::ErrorClass;
use crate::trace::import::conversation::{FailureRules, Item, judge};
use crate::trace::{Stop, TraceEvent};

/// What the mock model answers.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// Tool calls: (id, tool, arguments).
    Calls(Vec<(String, String, Value)>),
    Final {
        text: String,
    },
}

fn class_from_name(s: &str) -> Option<ErrorClass> {
    Some(match s {
        "transient" => ErrorClass::Transient,
        "rate_limited" => ErrorClass::RateLimited,
        "bad_args" => ErrorClass::BadArgs,
        "terminal" => ErrorClass::Terminal,
        "partial" => ErrorClass::Partial,
        _ => return None,
    })
}

fn id_prefix(format: Format) -> &'static str {
    match format {
        Format::Anthropic => "toolu_",
        Format::Gemini => "fc_",
        _ => "call_",
    }
}

/// The arguments of a slot's call as the mock model sends them.
fn args_of(state: &WireState, slot: &WireSlot) -> Value {
    let spec = &state.scenario.task.calls[slot.call as usize];
    let mut v: Value = serde_json::from_str(&spec.args).unwrap_or(Value::Null);
    if slot.variant > 0
        && let Value::Object(m) = &mut v
    {
        m.insert(FIX_KEY.into(), Value::from(slot.variant));
    }
    v
}

/// A tool result in the agent's request: id, tool name, content, structural error flag.
type ResultRef<'a> = (Option<&'a String>, Option<&'a String>, &'a String, Option<(bool, &'static str)>);

/// Decides the next turn from the conversation the agent sent.
pub fn next_turn(state: &mut WireState, items: &[Item], format: Format, tokens_in: u64) -> Reply {
    state.turns += 1;
    state.model_calls += 1;
    for v in state.last_failure.values_mut() {
        v.1 = true;
    }
    let turn = u64::from(state.turns);
    let profile = state.scenario.profile.clone();
    let mut give_up = false;
    let mut reissue = false;
    let results: Vec<ResultRef<'_>> = items
        .iter()
        .filter_map(|i| match i {
            Item::Result { id, name, content, flag } => Some((id.as_ref(), name.as_ref(), content, *flag)),
            _ => None,
        })
        .collect();
    let mut used = vec![false; results.len()];
    for i in 0..state.slots.len() {
        if !state.slots[i].active {
            continue;
        }
        let tool = state.scenario.task.tools[usize::from(state.scenario.task.calls[state.slots[i].call as usize].tool)]
            .clone();
        // The result for this call: by id, else the next unused one of this tool, else in order.
        let pos = results
            .iter()
            .enumerate()
            .rposition(|(k, r)| !used[k] && r.0 == Some(&state.slots[i].id))
            .or_else(|| results.iter().enumerate().position(|(k, r)| !used[k] && r.0.is_none() && r.1 == Some(&tool)))
            .or_else(|| results.iter().enumerate().position(|(k, r)| !used[k] && r.0.is_none()));
        let Some(pos) = pos else {
            state.findings.push((1, format!("call {} ({tool}) got no result in the next turn", state.slots[i].id)));
            state.slots[i].active = false;
            continue;
        };
        used[pos] = true;
        let (_, _, content, flag) = results[pos];
        let args = args_of(state, &state.slots[i]);
        let canon = crate::engine::task::canonical_json(&args);
        let truth = match state.outcomes.get(&(tool.clone(), canon.clone())) {
            Some(class) => *class,
            // The agent answered without calling the tool: judge what it said.
            None => judge(content, flag, &FailureRules::default()).class.and_then(class_from_name),
        };
        let reading = read_text(content, flag.is_some_and(|f| f.0));
        if reading.stack_trace {
            state.findings.push((5, format!("the result of {} shows the model a raw exception", state.slots[i].id)));
        }
        let failed = truth.is_some_and(ErrorClass::is_failure);
        if format == Format::Anthropic && failed && flag.is_none_or(|f| !f.0) {
            state.findings.push((3, format!("failed Anthropic result {} has no is_error: true", state.slots[i].id)));
        }
        state.trace.events.push(TraceEvent::ToolResult {
            call_id: state.slots[i].id.clone(),
            ok: !failed,
            status: None,
            content: content.clone(),
            error_class: truth.map(|c| c.name().to_owned()),
            latency_ms: None,
            attempts: None,
            evidence: Some("class from the mock tool's own outcome".into()),
        });
        let slot = (i as u64 * (1 << 24) + turn) * 4;
        let perceived = match truth {
            None => Perceived::Ok,
            Some(ErrorClass::Partial) if reading.more_available => Perceived::Partial,
            Some(ErrorClass::Partial) => Perceived::Ok,
            Some(c) => perceive_failure(
                &profile,
                reading.signal,
                c,
                state.model_stream.unit(slot),
                state.model_stream.unit(slot + 1),
            ),
        };
        let u = if perceived == Perceived::Ok { 0.0 } else { state.model_stream.unit(slot + 2) };
        let hist: CallHistory = state.slots[i].hist;
        match act(&profile, perceived, &hist, u) {
            Action::Accept => state.slots[i].active = false,
            Action::Repeat => {
                if matches!(perceived, Perceived::Transient | Perceived::Terminal) {
                    state.slots[i].hist.model_retries += 1;
                }
                reissue = true;
            }
            Action::FixArgs => {
                let s = &mut state.slots[i];
                s.hist.fix_attempts += 1;
                s.variant += 1;
                if truth == Some(ErrorClass::BadArgs) && state.model_stream.unit(slot + 3) >= profile.p_fix_args {
                    let (c, v) = (s.call, s.variant);
                    state.still_bad.push((c, v));
                }
                reissue = true;
            }
            Action::GiveUp => give_up = true,
        }
    }
    let reply = if give_up {
        state.ended = Some("gave_up");
        Reply::Final { text: crate::engine::run::GIVE_UP_TEXT.to_owned() }
    } else if state.turns > state.scenario.policy.max_steps {
        state.ended = Some("step_cap");
        Reply::Final { text: "Stopping: the step cap is reached.".to_owned() }
    } else {
        if !reissue {
            if state.next_step == state.scenario.task.steps.len() {
                state.ended = Some("answer");
            } else {
                let step = state.scenario.task.steps[state.next_step].clone();
                state.slots = step
                    .iter()
                    .map(|&c| WireSlot {
                        call: c,
                        variant: 0,
                        hist: CallHistory::default(),
                        id: String::new(),
                        active: true,
                    })
                    .collect();
                state.next_step += 1;
            }
        }
        if state.ended == Some("answer") {
            Reply::Final { text: state.scenario.task.final_text.clone() }
        } else {
            let mut calls = Vec::new();
            for i in 0..state.slots.len() {
                if !state.slots[i].active {
                    continue;
                }
                let id = format!("{}{:06}", id_prefix(format), state.next_id);
                state.next_id += 1;
                state.slots[i].id = id.clone();
                let tool = state.scenario.task.tools
                    [usize::from(state.scenario.task.calls[state.slots[i].call as usize].tool)]
                .clone();
                calls.push((id, tool, args_of(state, &state.slots[i])));
            }
            Reply::Calls(calls)
        }
    };
    let (stop, tokens_out) = match &reply {
        Reply::Calls(c) => (Stop::ToolCalls, 10 * c.len() as u64 + 5),
        Reply::Final { text } => (Stop::End, text.len() as u64 / 4 + 5),
    };
    state.trace.events.push(TraceEvent::ModelCall {
        turn: state.turns,
        status: 200,
        tokens_in,
        tokens_out,
        latency_ms: None,
        stop,
        text: match &reply {
            Reply::Final { text } => Some(text.clone()),
            Reply::Calls(_) => None,
        },
    });
    if let Reply::Calls(calls) = &reply {
        for (id, tool, args) in calls {
            state.trace.events.push(TraceEvent::ToolCall {
                turn: state.turns,
                call_id: id.clone(),
                name: tool.clone(),
                args: args.clone(),
            });
        }
    }
    reply
}
