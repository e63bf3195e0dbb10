//! OpenTelemetry GenAI spans as OTLP/JSON: chat spans carry the conversation in
//! `gen_ai.input.messages` / `gen_ai.output.messages` (current conventions) or in per-message
//! span events (before semantic conventions 1.37, with `gen_ai.system`); `execute_tool` spans
//! with status ERROR mark their `gen_ai.tool.call.id` as failed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::conversation::{CallItem, Conversation, Item, text_of};
use super::{Exchange, ImportError, SourceFormat, chain};
use crate::trace::Args;

fn attr<'a>(attrs: &'a [Value], key: &str) -> Option<&'a Value> {
    attrs.iter().find(|a| a.get("key").and_then(Value::as_str) == Some(key)).and_then(|a| a.get("value"))
}

fn attr_str(attrs: &[Value], key: &str) -> Option<String> {
    attr(attrs, key).and_then(|v| v.get("stringValue")).and_then(Value::as_str).map(str::to_owned)
}

fn attr_u64(attrs: &[Value], key: &str) -> u64 {
    attr(attrs, key)
        .and_then(|v| v.get("intValue"))
        .and_then(|i| i.as_str().and_then(|s| s.parse().ok()).or_else(|| i.as_u64()))
        .unwrap_or(0)
}

fn arguments(v: Option<&Value>) -> Args {
    match v {
        Some(Value::String(s)) => super::conversation::parse_args(s),
        Some(other) => Args::new(other),
        None => Args::new(&Value::Object(Default::default())),
    }
}

/// Items from messages in the current conventions (`parts` of type text, tool_call,
/// tool_call_response).
fn items(messages: &[Value]) -> Vec<Item> {
    let mut out = Vec::new();
    for m in messages {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        let parts = m.get("parts").and_then(Value::as_array).cloned().unwrap_or_default();
        let mut text = Vec::new();
        let mut calls = Vec::new();
        for p in &parts {
            match p.get("type").and_then(Value::as_str) {
                Some("tool_call") => calls.push(CallItem {
                    id: p.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: p.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    args: arguments(p.get("arguments")),
                }),
                Some("tool_call_response") => out.push(Item::Result {
                    id: p.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: None,
                    content: text_of(p.get("response").unwrap_or(&Value::Null)),
                    flag: None,
                }),
                _ => text.extend(p.get("content").and_then(Value::as_str).map(str::to_owned)),
            }
        }
        match role {
            "assistant" => out.push(Item::model(Some(text.join("\n")), calls)),
            "user" if !text.is_empty() => out.push(Item::User(text.join("\n"))),
            _ => {}
        }
    }
    out
}

/// Items from pre-1.37 span events: gen_ai.{user,assistant,tool}.message and gen_ai.choice,
/// each with its fields in the event's attributes (or a JSON `body`).
fn legacy_items(events: &[Value]) -> (Vec<Item>, Option<Item>) {
    let mut out = Vec::new();
    let mut choice = None;
    for e in events {
        let name = e.get("name").and_then(Value::as_str).unwrap_or_default();
        let attrs = e.get("attributes").and_then(Value::as_array).cloned().unwrap_or_default();
        let body: Value = attr_str(&attrs, "body").and_then(|b| serde_json::from_str(&b).ok()).unwrap_or(Value::Null);
        let field = |k: &str| attr_str(&attrs, k).or_else(|| body.get(k).and_then(Value::as_str).map(str::to_owned));
        let calls_of = |v: &Value| -> Vec<CallItem> {
            v.get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| CallItem {
                    id: c.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: c.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    args: arguments(c.pointer("/function/arguments")),
                })
                .collect()
        };
        match name {
            "gen_ai.user.message" => out.push(Item::User(field("content").unwrap_or_default())),
            "gen_ai.assistant.message" => out.push(Item::model(field("content"), calls_of(&body))),
            "gen_ai.tool.message" => out.push(Item::Result {
                id: field("id"),
                name: None,
                content: field("content").unwrap_or_default(),
                flag: None,
            }),
            "gen_ai.choice" => {
                let msg = body.get("message").cloned().unwrap_or(Value::Null);
                choice =
                    Some(Item::model(msg.get("content").and_then(Value::as_str).map(str::to_owned), calls_of(&msg)));
            }
            _ => {}
        }
    }
    (out, choice)
}

pub fn conversations(v: &Value, id: &str) -> Result<Vec<Conversation>, ImportError> {
    let rs = v
        .get("resourceSpans")
        .and_then(Value::as_array)
        .ok_or_else(|| ImportError::at("/resourceSpans", "OTLP/JSON resourceSpans"))?;
    // traceId → spans ordered by start time.
    let mut traces: BTreeMap<String, Vec<(u64, &Value)>> = BTreeMap::new();
    for r in rs {
        for ss in r.get("scopeSpans").and_then(Value::as_array).into_iter().flatten() {
            for span in ss.get("spans").and_then(Value::as_array).into_iter().flatten() {
                let trace_id = span.get("traceId").and_then(Value::as_str).unwrap_or_default().to_owned();
                let start = span
                    .get("startTimeUnixNano")
                    .and_then(|s| s.as_str().and_then(|s| s.parse().ok()).or_else(|| s.as_u64()))
                    .unwrap_or(0);
                traces.entry(trace_id).or_default().push((start, span));
            }
        }
    }
    let mut out = Vec::new();
    let many = traces.len() > 1;
    for (n, (_, mut spans)) in traces.into_iter().enumerate() {
        spans.sort_by_key(|s| s.0);
        let mut exchanges = Vec::new();
        let mut failed_ids = BTreeSet::new();
        let mut provider = None;
        for (_, span) in &spans {
            let attrs = span.get("attributes").and_then(Value::as_array).cloned().unwrap_or_default();
            let op = attr_str(&attrs, "gen_ai.operation.name").unwrap_or_default();
            if op == "execute_tool" {
                let error = span.pointer("/status/code").is_some_and(|c| c == 2 || c == "STATUS_CODE_ERROR");
                if let (true, Some(call_id)) = (error, attr_str(&attrs, "gen_ai.tool.call.id")) {
                    failed_ids.insert(call_id);
                }
                continue;
            }
            if !matches!(op.as_str(), "chat" | "text_completion" | "generate_content") {
                continue;
            }
            provider = provider.or(attr_str(&attrs, "gen_ai.provider.name")).or(attr_str(&attrs, "gen_ai.system"));
            let parse = |k: &str| -> Vec<Value> {
                attr_str(&attrs, k).and_then(|s| serde_json::from_str::<Vec<Value>>(&s).ok()).unwrap_or_default()
            };
            let (mut req, resp) = match attr_str(&attrs, "gen_ai.input.messages") {
                Some(_) => {
                    (items(&parse("gen_ai.input.messages")), items(&parse("gen_ai.output.messages")).into_iter().next())
                }
                None => legacy_items(span.get("events").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])),
            };
            let mut resp = resp;
            if let Some(Item::Model { tokens_in, tokens_out, .. }) = &mut resp {
                *tokens_in = attr_u64(&attrs, "gen_ai.usage.input_tokens");
                *tokens_out = attr_u64(&attrs, "gen_ai.usage.output_tokens");
            }
            if span.pointer("/status/code").is_some_and(|c| c == 2) && resp.is_none() {
                resp = Some(Item::Model { text: None, calls: Vec::new(), tokens_in: 0, tokens_out: 0, status: 500 });
            }
            req.retain(|i| !matches!(i, Item::Model { text: None, calls, .. } if calls.is_empty()));
            exchanges.push(Exchange {
                items: req,
                response: resp,
                tools: Vec::new(),
                model: attr_str(&attrs, "gen_ai.request.model"),
            });
        }
        let conv_id = if many { format!("{id}#{}", n + 1) } else { id.to_owned() };
        for mut c in chain(exchanges, SourceFormat::Otel, &conv_id, None) {
            c.provider =
                provider.as_deref().map(|p| if p == "openai" { "openai-chat".to_owned() } else { p.to_owned() });
            for item in &mut c.items {
                if let Item::Result { id: Some(i), flag, .. } = item
                    && failed_ids.contains(i)
                {
                    *flag = Some((true, "execute_tool span status ERROR"));
                }
            }
            out.push(c);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kv(k: &str, v: &str) -> Value {
        json!({"key": k, "value": {"stringValue": v}})
    }

    /// The pre-1.37 form: per-message span events and `gen_ai.system`.
    #[test]
    fn legacy_span_events() {
        let body = |v: Value| kv("body", &v.to_string());
        let span = json!({
            "traceId": "t1", "startTimeUnixNano": "1",
            "attributes": [kv("gen_ai.operation.name", "chat"), kv("gen_ai.system", "openai")],
            "events": [
                {"name": "gen_ai.user.message", "attributes": [body(json!({"content": "weather?"}))]},
                {"name": "gen_ai.assistant.message", "attributes": [body(json!({"tool_calls": [{"id": "c1", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]}))]},
                {"name": "gen_ai.tool.message", "attributes": [body(json!({"id": "c1", "content": "Error: city not found"}))]},
                {"name": "gen_ai.choice", "attributes": [body(json!({"message": {"content": "Sorry, no data."}}))]},
            ]
        });
        let doc = json!({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]});
        let convs = conversations(&doc, "legacy").unwrap();
        assert_eq!(convs.len(), 1);
        let trace = crate::trace::import::conversation::to_trace(convs[0].clone(), &Default::default());
        let s = crate::trace::inspect::stats(&trace);
        assert_eq!((s.model_calls, s.tool_calls, s.tool_failures, s.ended), (2, 1, 1, "answer"));
        assert_eq!(s.rows[0].outcome, "terminal");
    }
}
