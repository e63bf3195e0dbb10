//! The mock providers' endpoint: a request is checked the way the real API checks it, meets
//! the provider's faults (in that provider's own status and body), is matched to the
//! conversation it continues, and gets the mock model's next turn in the provider's shape.

use crate::wire::checks::Check;
use serde_json::{Value, json};

use super::choice::choice_of;
use super::conversation::{Conversation, Turn};
use super::model::{Ask, next_turn};
use super::plain::read_plain_results;
use super::reply::Reply;
use super::respond::{Shape, provider_error, reply};
use super::schema::declared_tools;
use super::validate::{not_json, validate};
use super::world::World;
use crate::engine::limits::ProviderState;
use crate::envelope::Format;
use crate::trace::import::conversation::Item;
use crate::trace::import::{anthropic, gemini, openai_chat, openai_responses};
use crate::trace::{Stop, TraceEvent};

/// The conversation a request carries, parsed by the same code as the importers.
fn items(format: Format, body: &Value) -> Vec<Item> {
    let list = |k: &str| match body.get(k) {
        Some(Value::Array(a)) => a.clone(),
        Some(Value::String(s)) => vec![json!({"role": "user", "content": s})],
        _ => Vec::new(),
    };
    match format {
        Format::OpenAiChat | Format::GeminiOpenAi => openai_chat::items(&list("messages"), "/messages"),
        Format::OpenAiResponses => openai_responses::items(&list("input"), "/input"),
        Format::Anthropic => anthropic::items(&list("messages"), "/messages"),
        Format::Gemini => gemini::items(&list("contents"), "/contents"),
    }
    .unwrap_or_default()
}

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
    let request_id = format!("req_tracefault_{n:06}");
    let bad_request = |body: Value| {
        Reply::json(400, &body).header("x-request-id", request_id.clone()).header("request-id", request_id.clone())
    };
    let mut body: Value = match serde_json::from_slice(raw) {
        Ok(v) => v,
        Err(e) => return bad_request(not_json(format, &e.to_string()).body),
    };
    // Responses: a request that names a previous response continues its whole conversation.
    let previous = body.get("previous_response_id").and_then(Value::as_str).map(str::to_owned);
    if let (Format::OpenAiResponses, Some(prev)) = (format, &previous) {
        let Some(history) = world.responses.get(prev).cloned() else {
            return bad_request(json!({"error": {"message": format!("Previous response with id '{prev}' not found."),
                "type": "invalid_request_error", "param": "previous_response_id", "code": "previous_response_not_found"}}));
        };
        let new = match body.get("input") {
            Some(Value::Array(a)) => a.clone(),
            Some(Value::String(s)) => vec![json!({"role": "user", "content": s})],
            _ => Vec::new(),
        };
        body["input"] = Value::Array(history.into_iter().chain(new).collect());
    }
    if let Some(v) = validate(format, &body, &request_id) {
        world.finding(Check::RoundTrip, format!("the provider rejected request {n}: {}", v.body));
        return bad_request(v.body);
    }
    world.trace.header.provider.get_or_insert_with(|| format.name().to_owned());
    let mut conversation = items(format, &body);
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
    let prov = world.provider_target();
    let tokens_in = raw.len() as u64 / 4;
    let now = world.clock.now_ms();
    if now < world.load_until[prov] {
        world.wasted_retries += 1;
    }
    // (status, the wait announced in virtual ms)
    let refusal = match limits.admit(now, tokens_in) {
        Err(wait) => {
            world.load_rejections += 1;
            if let Some(w) = wait {
                world.load_until[prov] = now.saturating_add(w);
            }
            Some((429, wait))
        }
        Ok(()) => world.decide(prov).map(|d| {
            world.faults_injected += 1;
            (world.fault(d.rule).status().unwrap_or(503), d.retry_after_ms)
        }),
    };
    if let Some((status, wait)) = refusal {
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
        return provider_error(format, status, wait.map(|ms| world.clock.real_ms(ms)), n);
    }
    world.succeeded(prov);
    let ask = Ask { tools: declared_tools(format, &body), choice: choice_of(format, &body), tokens_in };
    let turn = next_turn(world, c, &conversation, &ask);
    let tokens_out = match &turn {
        Turn::Calls(calls) => calls.iter().map(|(_, _, a)| a.to_string().len() as u64 / 4 + 8).sum(),
        Turn::Final { text } => text.len() as u64 / 4 + 8,
    };
    limits.charge(tokens_out);
    let response_id = if format == Format::OpenAiResponses { world.new_id("resp_tf", c) } else { String::new() };
    let shape = Shape {
        model: body.get("model").and_then(Value::as_str).unwrap_or("tracefault-mock").to_owned(),
        stream: gemini_stream || body.get("stream") == Some(&Value::Bool(true)),
        include_usage: body.pointer("/stream_options/include_usage") == Some(&Value::Bool(true)),
        tools: body.get("tools").cloned().unwrap_or(json!([])),
        tool_choice: body.get("tool_choice").cloned().unwrap_or(json!("auto")),
        parallel_tool_calls: body.get("parallel_tool_calls") != Some(&Value::Bool(false)),
        response_id: response_id.clone(),
    };
    if format == Format::OpenAiResponses {
        let mut history = body.get("input").and_then(Value::as_array).cloned().unwrap_or_default();
        history.extend(continuation(&turn, n));
        world.store_response(response_id, history);
    }
    reply(format, &turn, &shape, n, (ask.tokens_in, tokens_out))
}

/// The model's turn as Responses input items, for a later `previous_response_id`.
fn continuation(turn: &Turn, n: u32) -> Vec<Value> {
    match turn {
        Turn::Calls(calls) => calls
            .iter()
            .enumerate()
            .map(|(i, (id, name, args))| {
                json!({"type": "function_call", "id": format!("fc_tf{n:06}_{i}"), "call_id": id, "name": name, "arguments": args.to_string()})
            })
            .collect(),
        Turn::Final { text } => vec![json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})],
    }
}

/// The ids of the tool calls in a conversation (the model's turns and the results).
fn call_ids(items: &[Item]) -> Vec<String> {
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
