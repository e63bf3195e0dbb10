//! OpenAI Chat Completions: `messages` (with `tool_calls` / `role: "tool"`, or the legacy
//! `function_call` / `role: "function"`), request bodies, and `choices[0].message` responses.

use serde_json::Value;

use super::ImportError;
use super::conversation::{CallItem, Item, parse_args, text_of, with_usage};
use crate::trace::ToolDef;

pub fn items(messages: &[Value], path: &str) -> Result<Vec<Item>, ImportError> {
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let at = || format!("{path}/{i}");
        let role =
            m.get("role").and_then(Value::as_str).ok_or_else(|| ImportError::at(at(), "a message with a `role`"))?;
        match role {
            "system" | "developer" => {}
            "user" => out.push(Item::User(text_of(m.get("content").unwrap_or(&Value::Null)))),
            "assistant" => out.push(assistant(m)),
            "tool" => out.push(Item::Result {
                id: m.get("tool_call_id").and_then(Value::as_str).map(str::to_owned),
                name: m.get("name").and_then(Value::as_str).map(str::to_owned),
                content: text_of(m.get("content").unwrap_or(&Value::Null)),
                flag: None,
            }),
            "function" => out.push(Item::Result {
                id: None,
                name: m.get("name").and_then(Value::as_str).map(str::to_owned),
                content: text_of(m.get("content").unwrap_or(&Value::Null)),
                flag: None,
            }),
            other => {
                return Err(ImportError::at(
                    at(),
                    format!("role system, user, assistant, tool or function, got {other:?}"),
                ));
            }
        }
    }
    Ok(out)
}

fn assistant(m: &Value) -> Item {
    let mut calls = Vec::new();
    for c in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let f = c.get("function").unwrap_or(&Value::Null);
        calls.push(CallItem {
            id: c.get("id").and_then(Value::as_str).map(str::to_owned),
            name: f.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
            args: parse_args(f.get("arguments").and_then(Value::as_str).unwrap_or("{}")),
        });
    }
    if let Some(f) = m.get("function_call").filter(|f| f.is_object()) {
        calls.push(CallItem {
            id: None,
            name: f.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
            args: parse_args(f.get("arguments").and_then(Value::as_str).unwrap_or("{}")),
        });
    }
    let text = m.get("content").map(text_of);
    Item::model(text, calls)
}

/// The model turn a response body holds, with its usage.
pub fn response(body: &Value) -> Option<Item> {
    let msg = body.get("choices")?.get(0)?.get("message")?;
    Some(with_usage(assistant(msg), body.get("usage"), "prompt_tokens", "completion_tokens"))
}

pub fn tools(body: &Value) -> Vec<ToolDef> {
    let mut out = Vec::new();
    for t in body.get("tools").and_then(Value::as_array).into_iter().flatten() {
        let f = t.get("function").unwrap_or(t);
        if let Some(name) = f.get("name").and_then(Value::as_str) {
            out.push(ToolDef {
                name: name.to_owned(),
                description: f.get("description").and_then(Value::as_str).filter(|d| !d.is_empty()).map(str::to_owned),
                parameters: f.get("parameters").cloned(),
            });
        }
    }
    for f in body.get("functions").and_then(Value::as_array).into_iter().flatten() {
        if let Some(name) = f.get("name").and_then(Value::as_str) {
            out.push(ToolDef { name: name.to_owned(), description: None, parameters: f.get("parameters").cloned() });
        }
    }
    out
}
