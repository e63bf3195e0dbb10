//! The mock providers' endpoint: a request is checked the way the real API checks it, meets
//! the provider's faults (in that provider's own status and body), is matched to the
//! conversation it continues, and gets the mock model's next turn in the provider's shape.

use crate::wire::checks::Check;
use serde_json::{Value, json};

use super::conversation::{Conversation, Turn};
use super::model::{Ask, next_turn, undelivered};
use super::plain::read_plain_results;
use super::schema::declared_tools;
use super::stream_break::Breaking;
use super::world::{Clock, World};
use crate::engine::limits::ProviderState;
use crate::fault::{Fault, StreamBreak};
use crate::provider::reply::Body;
use crate::provider::{Format, Reply, Shape, request_id};
use crate::trace::import::conversation::Item;
use crate::trace::{Stop, TraceEvent};
use std::time::Duration;

/// Answers one provider request of agent `world`, within the fleet's `limits` (`rpm`, `tpm`);
/// `agent` is the K of an `/agents/K/` base-URL prefix, which keeps the conversations of agents
/// apart where call ids cannot.
pub fn respond(
    world: &mut World,
    limits: &mut ProviderState,
    agent: Option<u32>,
    format: Format,
    gemini_stream: bool,
    raw: &[u8],
) -> Reply {
    let n = world.model_calls as u32 + 1;
    let request_id = request_id(n);
    let p = format.provider();
    let bad_request = |body: Value| {
        Reply::json(400, &body).header("x-request-id", request_id.clone()).header("request-id", request_id.clone())
    };
    let mut body: Value = match serde_json::from_slice(raw) {
        Ok(v) => v,
        Err(e) => return bad_request(format.not_json(&e.to_string()).body),
    };
    // A request that names an earlier response (Responses' `previous_response_id`) continues
    // its whole conversation.
    if let Some(prev) = p.continues(&body).map(str::to_owned)
        && let Err(v) = p.with_history(&mut body, &prev, world.responses.get(&prev).cloned())
    {
        return bad_request(v.body);
    }
    if let Some(v) = format.validate(&body, &request_id) {
        world.finding(Check::RoundTrip, format!("the provider rejected request {n}: {}", v.body));
        return bad_request(v.body);
    }
    world.trace.header.provider.get_or_insert_with(|| format.name().to_owned());
    let mut conversation = format.request_items(&body);
    if read_plain_results(&mut conversation, &world.owner) && !world.read_plain {
        world.read_plain = true;
        world.note(
            "the agent hands tool results back as plain messages (a text naming the calls, then a user turn with \
             what they said); the mock read them as results, judged by their text"
                .to_owned(),
        );
    }
    let Some(c) = conversation_of(world, agent, format, &conversation) else {
        let ids: Vec<String> = call_ids(&conversation).into_iter().take(3).collect();
        return Reply::json(
            409,
            &json!({"error": {"type": "conversation_unknown", "message": format!(
                "tracefault: this request continues a conversation this mock did not hold (tool call ids {}); \
                 a conversation must start on this mock. To run several agents at once, give each its own \
                 base URL prefix /agents/K/ (e.g. OPENAI_BASE_URL=…/agents/2/v1).", ids.join(", "))}}),
        );
    };
    // The fleet's limits, then the provider's faults, come before the model: they never reach it.
    let tokens_in = raw.len() as u64 / 4;
    let broken = match refusal(world, limits, c, format, n, tokens_in) {
        Ok(broken) => broken,
        Err(reply) => return reply,
    };
    let prov = world.provider_target();
    world.succeeded(prov);
    let ask = Ask { tools: declared_tools(format, &body), choice: p.tool_choice(&body), tokens_in };
    let (mark, calls_before) = (world.trace_len(), world.model_calls);
    let turn = next_turn(world, c, &conversation, &ask);
    let tokens_out = match &turn {
        Turn::Calls(calls) => calls.iter().map(|(_, _, a)| a.to_string().len() as u64 / 4 + 8).sum(),
        Turn::Final { text } => text.len() as u64 / 4 + 8,
    };
    limits.charge(tokens_out);
    let response_id = if p.remembers_responses() { world.new_id("resp_tf", c) } else { String::new() };
    let shape = Shape {
        model: body.get("model").and_then(Value::as_str).unwrap_or("tracefault-mock").to_owned(),
        stream: gemini_stream || body.get("stream") == Some(&Value::Bool(true)),
        include_usage: body.pointer("/stream_options/include_usage") == Some(&Value::Bool(true)),
        tools: body.get("tools").cloned().unwrap_or(json!([])),
        tool_choice: body.get("tool_choice").cloned().unwrap_or(json!("auto")),
        parallel_tool_calls: body.get("parallel_tool_calls") != Some(&Value::Bool(false)),
        response_id: response_id.clone(),
    };
    if let Some(history) = p.history(&body, &turn, n) {
        world.store_response(response_id, history);
    }
    let answer = format.answer(&turn, &shape, n, (ask.tokens_in, tokens_out));
    match broken {
        None => answer,
        Some(fault) => {
            let (answer, fired) = break_answer(world, answer, format, n, fault, shape.stream);
            world.stream_fault(fault.rule, fired);
            if fired && fault.fails() {
                world.unsucceeded(prov, false);
                undelivered(world, c, mark, tokens_in, world.model_calls > calls_before);
            }
            answer
        }
    }
}

/// A `stream_*` fault a request met (rule `rule`): its answer breaks after `after_events`
/// events, `how`.
#[derive(Clone, Copy, Debug)]
pub(super) struct StreamFault {
    pub after_events: u32,
    pub how: StreamBreak,
    pub rule: u16,
}

impl StreamFault {
    /// Whether the agent is kept from the answer whole when it fires (a stall only slows it).
    pub fn fails(self) -> bool {
        !matches!(self.how, StreamBreak::Stall { .. })
    }

    /// How long its stall lasts in real time on `clock` (zero for the other breaks).
    pub fn stall(self, clock: &Clock) -> Duration {
        match self.how {
            StreamBreak::Stall { ms } => Duration::from_millis(clock.real_ms(ms)),
            _ => Duration::ZERO,
        }
    }

    /// What is noted when request `n`'s stream ended before the fault could fire, the answer
    /// then `delivered` ("sent whole", "passed on whole").
    pub fn unfired(self, n: u32, delivered: &str) -> String {
        format!(
            "request {n}: the answer's stream had no more than the {} fault's {} events; it was {delivered}",
            self.how.name(),
            self.after_events
        )
    }
}

/// Answer `n`, which is no stream, broken as a whole as a `stream_*` fault says: cut
/// part-way, its JSON cut in half, late by `stall`, or the provider's overloaded error.
pub(super) fn break_whole(answer: Reply, how: StreamBreak, format: Format, n: u32, stall: Duration) -> Reply {
    let Body::Bytes { bytes, content_type } = &answer.body else { return answer };
    let (half, content_type) = (bytes[..bytes.len() / 2].to_vec(), *content_type);
    match how {
        StreamBreak::Cut => Reply { body: Body::Cut { bytes: half, content_type }, ..answer },
        StreamBreak::Malformed => Reply { body: Body::Bytes { bytes: half, content_type }, ..answer },
        StreamBreak::Stall { .. } => answer.delayed(stall),
        StreamBreak::Error => format.error(529, None, n),
    }
}

/// Answer `n` broken as `fault` says (after that many events, that way); whether the fault
/// fired (a stream whose last event is the fault's is sent whole). An answer that is no
/// stream breaks as a whole ([`break_whole`]).
fn break_answer(
    world: &mut World,
    answer: Reply,
    format: Format,
    n: u32,
    fault: StreamFault,
    stream: bool,
) -> (Reply, bool) {
    let StreamFault { after_events, how, .. } = fault;
    let stall = fault.stall(&world.clock);
    if !stream {
        return (break_whole(answer, how, format, n, stall), true);
    }
    let Body::Bytes { bytes, content_type } = &answer.body else { return (answer, false) };
    let mut b = Breaking::new(after_events, how, format.stream_error_event(n), stall);
    let mut steps = Vec::new();
    b.feed(bytes, &mut steps);
    b.finish(&mut steps);
    if !b.fired() {
        world.note(fault.unfired(n, "sent whole"));
        return (answer, false);
    }
    (Reply { body: Body::Steps { steps, content_type }, ..answer }, true)
}

/// The fleet's limits, then the provider's faults, on request `n` (of about `tokens_in`
/// tokens) of conversation `c`: the provider's error, recorded as a failed model call, when one
/// of them refuses it; else the request goes on to the model, its answer's stream to break
/// when a `stream_*` fault fired (after that many events, that way).
pub(super) fn refusal(
    world: &mut World,
    limits: &mut ProviderState,
    c: usize,
    format: Format,
    n: u32,
    tokens_in: u64,
) -> Result<Option<StreamFault>, Reply> {
    let prov = world.provider_target();
    // Numbered before the fleet's limits answer it, as the engine numbers it.
    let at = world.attempt(prov);
    let now = world.clock.now_ms();
    if now < world.load_until[prov] {
        world.wasted_retries += 1;
    }
    // (status, the wait announced in virtual ms)
    let (status, wait) = match limits.admit(now, tokens_in) {
        Err(wait) => {
            world.load_rejections += 1;
            if let Some(w) = wait {
                world.load_until[prov] = now.saturating_add(w);
            }
            (429, wait)
        }
        Ok(()) => {
            let Some(d) = world.decide_at(prov, at) else { return Ok(None) };
            // (A stream fault counts once it fired: [`World::stream_fault`].)
            if let Fault::Stream { after_events, how } = *world.fault(d.rule) {
                return Ok(Some(StreamFault { after_events, how, rule: d.rule }));
            }
            world.faults_injected += 1;
            (world.fault(d.rule).status().unwrap_or(503), d.retry_after_ms)
        }
    };
    world.model_calls += 1;
    let turn = world.conversation(c).turns + 1;
    world.record(TraceEvent::ModelCall {
        turn,
        status,
        tokens_in: 0,
        tokens_out: 0,
        latency_ms: None,
        t_ms: None,
        stop: Stop::Error,
        text: None,
    });
    Err(format.error(status, wait.map(|ms| world.clock.real_ms(ms)), n))
}

/// The ids of the tool calls in a conversation (the model's turns and the results).
pub(super) fn call_ids(items: &[Item]) -> Vec<String> {
    let mut out = Vec::new();
    for it in items {
        match it {
            Item::Model { calls, .. } => out.extend(calls.iter().filter_map(|c| c.id.clone())),
            Item::Result { id: Some(id), .. } => out.push(id.clone()),
            _ => {}
        }
    }
    out
}

/// The conversation a request continues: the one that gave out its tool call ids; a new one
/// for a conversation with no tool calls yet; `None` for one this mock never held.
fn conversation_of(world: &mut World, agent: Option<u32>, format: Format, items: &[Item]) -> Option<usize> {
    let ids = call_ids(items);
    if let Some(c) = ids.iter().rev().find_map(|id| world.owner.get(id).copied()) {
        return world.conversation_index(c);
    }
    let has_calls = items.iter().any(|i| matches!(i, Item::Model { calls, .. } if !calls.is_empty()));
    if !ids.is_empty() {
        return None;
    }
    if has_calls {
        // Tool calls without ids (some Gemini agents drop them): the conversation of the same
        // agent prefix waiting on calls, if exactly one is.
        let waiting: Vec<usize> = world
            .conversations
            .iter()
            .filter(|(_, c)| c.agent == agent && c.waiting_on().next().is_some())
            .map(|(&k, _)| k)
            .collect();
        return match waiting.as_slice() {
            [one] => Some(*one),
            _ => None,
        };
    }
    Some(world.add_conversation(|w, index| Conversation::new(w.conversation_key(index), index, agent, format)))
}
