//! Anthropic Messages: `tool_use` blocks in assistant messages, `tool_result` blocks (with
//! `is_error`) in user messages.

use serde_json::Value;

use super::ImportError;
use super::conversation::{CallItem, Item, text_of, tool_defs, with_usage};
use crate::trace::{Args, ToolDef};

pub fn items(messages: &[Value], path: &str) -> Result<Vec<Item>, ImportError> {
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| ImportError::at(format!("{path}/{i}"), "a message with a `role`"))?;
        let content = m.get("content").unwrap_or(&Value::Null);
        match role {
            "assistant" => out.push(assistant(content)),
            "user" => match content {
                Value::Array(blocks) => {
                    let mut text = Vec::new();
                    for b in blocks {
                        match b.get("type").and_then(Value::as_str) {
                            Some("tool_result") => {
                                let is_error = b.get("is_error").and_then(Value::as_bool);
                                out.push(Item::Result {
                                    id: b.get("tool_use_id").and_then(Value::as_str).map(str::to_owned),
                                    name: None,
                                    content: text_of(b.get("content").unwrap_or(&Value::Null)),
                                    flag: Some(match is_error {
                                        Some(true) => (true, "is_error: true"),
                                        Some(false) => (false, "is_error: false"),
                                        None => (false, "no is_error flag"),
                                    }),
                                });
                            }
                            _ => text.extend(b.get("text").and_then(Value::as_str).map(str::to_owned)),
                        }
                    }
                    if !text.is_empty() {
                        out.push(Item::User(text.join("\n")));
                    }
                }
                other => out.push(Item::User(text_of(other))),
            },
            other => {
                return Err(ImportError::at(format!("{path}/{i}/role"), format!("user or assistant, got {other:?}")));
            }
        }
    }
    Ok(out)
}

fn assistant(content: &Value) -> Item {
    let Value::Array(blocks) = content else {
        return Item::model(Some(text_of(content)), Vec::new());
    };
    let mut text = Vec::new();
    let mut calls = Vec::new();
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("tool_use") => calls.push(CallItem {
                id: b.get("id").and_then(Value::as_str).map(str::to_owned),
                name: b.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                args: Args::new(b.get("input").unwrap_or(&Value::Null)),
            }),
            Some("text") => text.extend(b.get("text").and_then(Value::as_str).map(str::to_owned)),
            _ => {}
        }
    }
    Item::model(Some(text.join("\n")), calls)
}

pub fn response(body: &Value) -> Option<Item> {
    Some(with_usage(assistant(body.get("content")?), body.get("usage"), "input_tokens", "output_tokens"))
}

pub fn tools(body: &Value) -> Vec<ToolDef> {
    tool_defs(body.get("tools"), "input_schema")
}
