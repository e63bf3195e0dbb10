//! Rewriting, in live mode (`--rewrite STRATEGY`): a tool result in the conversation the agent
//! sends is replaced, before the real model reads it, by the failure the scenario schedules for
//! that call (the tool's faults, decided as for the mock tools), encoded the way the strategy
//! hands a failure to the model. The agent ran the tool; the model reads that it failed. The
//! same result is replaced the same way each time the agent sends its history again, so
//! envelope strategies meet the real model with the agent's code unchanged. Only the messages
//! that change are written anew: the rest of the request goes out byte for byte.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::value::RawValue;

use super::world::World;
use crate::engine::strategy::{Partials, Strategy};
use crate::envelope::render::{Body, Renderer};
use crate::envelope::{ErrorKind, ToolError};
use crate::exchange::Item;
use crate::fault::Fault;
use crate::provider::Format;
use crate::trace::TraceEvent;

/// The start of a rewritten result's `evidence` in the trace.
pub const EVIDENCE: &str = "rewritten by tracefault";

/// Request `body` (of conversation `c`, holding `items`) with the tool results the scenario's
/// tool faults fail rewritten, when any is: new results are decided now, results rewritten
/// before are rewritten again; only the messages that change are written anew. `unnamed(n)`
/// is the id the `n`th result without one is known by.
pub fn rewrite(
    w: &mut World,
    c: usize,
    format: Format,
    strategy: &Strategy,
    (body, items): (&[u8], &[Item]),
    unnamed: impl Fn(usize) -> String,
) -> Option<Vec<u8>> {
    // The conversation's messages as they were sent, and as values to rewrite.
    let top: BTreeMap<Cow<str>, &RawValue> = serde_json::from_slice(body).ok()?;
    let sent: Vec<&RawValue> = serde_json::from_str(top.get(format.provider().conversation_key())?.get()).ok()?;
    let mut list: Vec<Value> = sent.iter().map(|m| serde_json::from_str(m.get())).collect::<Result<_, _>>().ok()?;
    let before = list.clone();
    if !rewrite_list(w, c, format, strategy, (&mut list, items), unnamed) {
        return None;
    }
    // Each changed message in place of its bytes, the last first.
    let mut out = body.to_vec();
    for (i, raw) in sent.iter().enumerate().rev() {
        if list[i] != before[i] {
            let at = raw.get().as_ptr() as usize - body.as_ptr() as usize;
            out.splice(at..at + raw.get().len(), serde_json::to_vec(&list[i]).ok()?);
        }
    }
    Some(out)
}

/// Rewrites the tool results in a conversation's messages `list`; whether any changed.
fn rewrite_list(
    w: &mut World,
    c: usize,
    format: Format,
    strategy: &Strategy,
    (list, items): (&mut [Value], &[Item]),
    unnamed: impl Fn(usize) -> String,
) -> bool {
    // Each call id's call, and each result's content, from the request itself.
    let mut calls_by_id: BTreeMap<&str, &crate::exchange::CallItem> = BTreeMap::new();
    let mut contents: Vec<(Option<&str>, Option<&str>, &str)> = Vec::new();
    for item in items {
        match item {
            Item::Model { calls, .. } => {
                for call in calls {
                    if let Some(id) = &call.id {
                        calls_by_id.insert(id, call);
                    }
                }
            }
            Item::Result { id, name, content, .. } => contents.push((id.as_deref(), name.as_deref(), content)),
            _ => {}
        }
    }
    let mut changed = false;
    let mut renderer = Renderer::default();
    let (mut unnamed_seen, mut unnamed_content) = (0, contents.iter().filter(|r| r.0.is_none()));
    for (id, node) in format.provider().result_nodes(list) {
        let (id, name, content) = match id {
            Some(id) => {
                let found = contents.iter().find(|r| r.0 == Some(id.as_str()));
                (id.clone(), found.and_then(|r| r.1), found.map_or("", |r| r.2))
            }
            None => {
                unnamed_seen += 1;
                let found = unnamed_content.next();
                (unnamed(unnamed_seen - 1), found.and_then(|r| r.1), found.map_or("", |r| r.2))
            }
        };
        if let Some(rendered) = w.conversations.get(&c).and_then(|conv| conv.rewritten.get(&id)) {
            format.replace_result(node, rendered);
            changed = true;
            continue;
        }
        // Decided once, in its own conversation.
        let key = format!("result:{id}");
        if w.owner.get(&key) == Some(&c) {
            continue;
        }
        let call = calls_by_id.get(id.as_str()).copied();
        // The tool: from the call in the request, else the result's own name, else the call as
        // recorded (a Responses request that continues an earlier response holds no calls).
        let recorded = || w.recorded_call(&id).map(|(name, _)| name.to_owned());
        let Some(tool) = call.map(|c| c.name.clone()).or(name.map(str::to_owned)).or_else(recorded) else { continue };
        let tool = tool.as_str();
        let Some(target) = w.scenario.task.tools.iter().position(|t| t == tool) else { continue };
        // A tool the agent calls through the mock tools meets its faults there.
        if w.arrived[target] {
            continue;
        }
        // What it returned counts as a mock tool's result does.
        let decision = w.decide(target);
        w.returned(target, decision.map(|d| d.rule));
        let Some(decision) = decision else { continue };
        w.faults_injected += 1;
        let fault = w.fault(decision.rule).clone();
        let class = fault.class();
        // The tool's own answer, as JSON, for the encodings that show it.
        let json = if serde_json::from_str::<Value>(content).is_ok() {
            content.to_owned()
        } else {
            Value::String(content.to_owned()).to_string()
        };
        let served;
        let shown = if fault.taints() {
            // A result that succeeds, changed (wrong, large, carrying an instruction).
            served = crate::taint::served(Some(&fault), &json, strategy.max_result_kb);
            Body::Ok { json: &served.0, text_literal: &served.1 }
        } else if class.is_failure() {
            let err = ToolError {
                kind: ErrorKind::Fault(&fault),
                class,
                tool,
                attempts: 1,
                retry_after_ms: decision.retry_after_ms,
                body: &json,
                idempotency_key: None,
            };
            Body::Error { err, encoding: strategy.encoding }
        } else {
            Body::Partial {
                json: &json,
                stated_complete: strategy.partials == Partials::Terminal,
                cursor: fault == Fault::Ambiguous { cursor: true },
            }
        };
        let Ok(rendered) = serde_json::from_str::<Value>(renderer.render(format, 1, tool, shown)) else { continue };
        format.replace_result(node, &rendered);
        changed = true;
        // Its call first, when the trace has not got it yet.
        if let Some(call) = call
            && !w.owner.contains_key(&id)
        {
            w.record(TraceEvent::ToolCall {
                turn: w.conversations.get(&c).map_or(0, |conv| conv.turns),
                call_id: id.clone(),
                name: call.name.clone(),
                args: call.args.clone(),
            });
            w.own(id.clone(), c);
        }
        let read = format.provider().result_part(&rendered).map(|p| match p {
            crate::provider::ResultPart::Content { content, .. } => content.clone(),
            crate::provider::ResultPart::Response(r) => r.clone(),
        });
        let shown_text = match read {
            Some(Value::String(s)) => s,
            Some(v) => v.to_string(),
            None => String::new(),
        };
        w.record(TraceEvent::ToolResult {
            call_id: id.clone(),
            ok: fault.taints() || !class.is_failure(),
            status: fault.status(),
            content: shown_text,
            // A tainted result is a success with changed content: no class.
            error_class: (!fault.taints()).then(|| class.name().to_owned()),
            latency_ms: None,
            attempts: None,
            evidence: Some(format!("{EVIDENCE} ({}, under {})", fault.label(), strategy.name)),
            cancelled: false,
            attempt_ms: Vec::new(),
        });
        w.rewritten_results += 1;
        let args = call.map(|c| &c.args).or_else(|| w.recorded_call(&id).map(|(_, a)| a));
        let args_key = args.map_or(0, super::schema::recorded_args_key);
        w.result_read(c, (tool, args_key), class.is_failure(), Some(class));
        if let Some(conv) = w.conversations.get_mut(&c) {
            conv.rewritten.insert(id, rendered);
        }
        w.own(key, c);
    }
    changed
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::envelope::Encoding;
    use crate::fault::ErrorClass;

    /// A request of `format` holding one result of `search` under call id `c1`, its content
    /// `18 C`, as agents send it.
    fn request(format: Format) -> Value {
        match format {
            Format::OpenAiChat | Format::GeminiOpenAi => json!({"messages": [{"role": "user", "content": "x"},
                {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "18 C"}]}]}),
            Format::OpenAiResponses => json!({"input": [{"role": "user", "content": "x"},
                {"type": "function_call", "call_id": "c1", "name": "search", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "18 C"}]}),
            Format::Anthropic => json!({"messages": [{"role": "user", "content": "x"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "search", "input": {}}]},
                {"role": "user", "content": [{"type": "text", "text": "here"},
                    {"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "18 C"}]}]}]}),
            Format::Gemini => json!({"contents": [{"role": "user", "parts": [{"text": "x"}]},
                {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "search", "args": {}}}]},
                {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "search", "response": {"output": "18 C"}}}]}]}),
        }
    }

    /// A result rewritten (or decided and left as it was) is the tool's outcome for the task's
    /// goal, as a mock tool's result is: kept, it reaches the goal; failed, or a wrong value,
    /// it does not.
    #[test]
    fn a_rewritten_result_is_the_tools_outcome() {
        for (faults, reached) in [
            ("", true),
            ("[[faults]]\ntarget = \"search\"\nat = [1]\nhttp = 503\n", false),
            ("[[faults]]\ntarget = \"search\"\nat = [1]\nfault = \"wrong_content\"\n", false),
            ("[[faults]]\ntarget = \"search\"\nat = [1]\nfault = \"ambiguous\"\n", true),
        ] {
            let mut w = crate::wire::world::search_with(faults);
            let format = Format::OpenAiChat;
            w.conversations.insert(0, crate::wire::conversation::Conversation::new(0, 0, None, format));
            let body = request(format);
            let items = format.request_items(&body);
            let bytes = serde_json::to_vec(&body).unwrap();
            let strategy = w.scenario.strategies[0].clone();
            rewrite(&mut w, 0, format, &strategy, (&bytes, &items), |n| format!("u{n}"));
            assert_eq!(w.goal_reached(true), reached, "{faults}");
        }
    }

    #[test]
    fn every_format_shows_the_model_the_rewritten_failure_with_its_ids_kept() {
        let fault = Fault::http(503);
        for format in Format::ALL {
            let mut body = request(format);
            let nodes = format.result_nodes(&mut body);
            assert_eq!(nodes.len(), 1, "{format:?}");
            let (id, node) = nodes.into_iter().next().unwrap();
            assert_eq!(id.as_deref(), Some("c1"), "{format:?}");
            let err = ToolError {
                kind: ErrorKind::Fault(&fault),
                class: ErrorClass::Transient,
                tool: "search",
                attempts: 1,
                retry_after_ms: None,
                body: "\"18 C\"",
                idempotency_key: None,
            };
            let mut renderer = Renderer::default();
            let rendered: Value = serde_json::from_str(renderer.render(
                format,
                1,
                "search",
                Body::Error { err, encoding: Encoding::Envelope },
            ))
            .unwrap();
            format.replace_result(node, &rendered);
            // The request reads back as the same result, now the failure, under the same id.
            let items = format.request_items(&body);
            let Some(Item::Result { id, content, flag, .. }) = items.iter().find(|i| matches!(i, Item::Result { .. }))
            else {
                panic!("{format:?}: {body}")
            };
            assert_eq!(id.as_deref(), Some("c1"), "{format:?}");
            assert!(content.contains("TRANSPORT") && content.contains("503"), "{format:?}: {content}");
            assert!(!content.contains("18 C"), "{format:?}: {content}");
            match format {
                // Anthropic's flag; Gemini's error channel.
                Format::Anthropic | Format::Gemini => assert_eq!(flag.map(|f| f.0), Some(true), "{format:?}: {body}"),
                _ => {}
            }
        }
    }
}
