//! OpenAI Responses: `input` items (`function_call` / `function_call_output` and
//! `custom_tool_call` / `custom_tool_call_output` paired on `call_id`, messages) and `output`
//! items of a response. A custom tool's freeform `input` is kept as a string.

use serde_json::Value;

use super::ImportError;
use super::conversation::{CallItem, Item, parse_args, text_of, tool_defs, with_usage};
use crate::trace::{Args, ToolDef};

/// Consecutive assistant messages and function calls form one model turn.
pub fn items(input: &[Value], path: &str) -> Result<Vec<Item>, ImportError> {
    let mut out: Vec<Item> = Vec::new();
    let mut open_turn = false;
    for (i, it) in input.iter().enumerate() {
        let kind = it.get("type").and_then(Value::as_str).unwrap_or("message");
        let role = it.get("role").and_then(Value::as_str);
        match (kind, role) {
            ("function_call" | "custom_tool_call", _) => {
                let args = match kind {
                    "custom_tool_call" => Args::new(it.get("input").unwrap_or(&Value::Null)),
                    _ => parse_args(it.get("arguments").and_then(Value::as_str).unwrap_or("{}")),
                };
                let call = CallItem {
                    id: it.get("call_id").and_then(Value::as_str).map(str::to_owned),
                    name: it.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    args,
                };
                match out.last_mut() {
                    Some(Item::Model { calls, .. }) if open_turn => calls.push(call),
                    _ => out.push(Item::model(None, vec![call])),
                }
                open_turn = true;
            }
            ("function_call_output" | "custom_tool_call_output", _) => {
                out.push(Item::Result {
                    id: it.get("call_id").and_then(Value::as_str).map(str::to_owned),
                    name: None,
                    content: text_of(it.get("output").unwrap_or(&Value::Null)),
                    flag: None,
                });
                open_turn = false;
            }
            ("message", Some("assistant")) => {
                out.push(Item::model(Some(text_of(it.get("content").unwrap_or(&Value::Null))), Vec::new()));
                open_turn = true;
            }
            ("message", Some("user")) => {
                out.push(Item::User(text_of(it.get("content").unwrap_or(&Value::Null))));
                open_turn = false;
            }
            ("message", Some("system" | "developer")) | ("reasoning", _) => {}
            ("message", _) => return Err(ImportError::at(format!("{path}/{i}"), "a message with a `role`")),
            _ => {}
        }
    }
    Ok(out)
}

pub fn response(body: &Value) -> Option<Item> {
    let output = body.get("output")?.as_array()?;
    let items = items(output, "/output").ok()?;
    // A response is one model turn: merge its pieces.
    let mut text = None;
    let mut calls = Vec::new();
    for it in items {
        if let Item::Model { text: t, calls: c, .. } = it {
            text = text.or(t);
            calls.extend(c);
        }
    }
    Some(with_usage(Item::model(text, calls), body.get("usage"), "input_tokens", "output_tokens"))
}

pub fn tools(body: &Value) -> Vec<ToolDef> {
    tool_defs(body.get("tools"), "parameters")
}
