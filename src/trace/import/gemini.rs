//! Gemini `generateContent`: `functionCall` parts in model turns, `functionResponse` parts
//! (with `response.error` as the failure signal; ids may be missing) in user turns. The API
//! parses protobuf JSON, so every field may also come in its snake_case name (LiteLLM sends
//! `function_call`); both are read.

use serde_json::Value;

use super::ImportError;
use super::conversation::{CallItem, Item, with_usage};
use crate::trace::{Args, ToolDef};

/// A protobuf-JSON field by its camelCase name or its snake_case one.
pub fn field<'a>(v: &'a Value, camel: &str, snake: &str) -> Option<&'a Value> {
    v.get(camel).or_else(|| v.get(snake))
}

pub fn items(contents: &[Value], path: &str) -> Result<Vec<Item>, ImportError> {
    let mut out = Vec::new();
    for (i, c) in contents.iter().enumerate() {
        let parts = c
            .get("parts")
            .and_then(Value::as_array)
            .ok_or_else(|| ImportError::at(format!("{path}/{i}"), "a content with `parts`"))?;
        match c.get("role").and_then(Value::as_str).unwrap_or("user") {
            "model" => out.push(model(parts)),
            _ => {
                let mut text = Vec::new();
                for p in parts {
                    if let Some(fr) = field(p, "functionResponse", "function_response") {
                        let response = fr.get("response").cloned().unwrap_or(Value::Null);
                        let error = response.get("error").filter(|e| !e.is_null());
                        let content = match (error, response.get("output")) {
                            (Some(e), _) => e.as_str().map_or_else(|| e.to_string(), str::to_owned),
                            (None, Some(Value::String(s))) => s.clone(),
                            (None, Some(o)) => o.to_string(),
                            (None, None) => response.to_string(),
                        };
                        out.push(Item::Result {
                            id: fr.get("id").and_then(Value::as_str).map(str::to_owned),
                            name: fr.get("name").and_then(Value::as_str).map(str::to_owned),
                            content,
                            flag: Some(if error.is_some() {
                                (true, "response.error")
                            } else {
                                (false, "no response.error")
                            }),
                        });
                    } else if let Some(t) = p.get("text").and_then(Value::as_str) {
                        text.push(t.to_owned());
                    }
                }
                if !text.is_empty() {
                    out.push(Item::User(text.join("\n")));
                }
            }
        }
    }
    Ok(out)
}

fn model(parts: &[Value]) -> Item {
    let mut text = Vec::new();
    let mut calls = Vec::new();
    for p in parts {
        if let Some(fc) = field(p, "functionCall", "function_call") {
            calls.push(CallItem {
                id: fc.get("id").and_then(Value::as_str).map(str::to_owned),
                name: fc.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                args: fc.get("args").map_or_else(|| Args::new(&Value::Object(Default::default())), Args::new),
            });
        } else if let Some(t) = p.get("text").and_then(Value::as_str)
            && p.get("thought").and_then(Value::as_bool) != Some(true)
        {
            text.push(t.to_owned());
        }
    }
    Item::model(Some(text.join("\n")), calls)
}

pub fn response(body: &Value) -> Option<Item> {
    let parts = body.get("candidates")?.get(0)?.get("content")?.get("parts")?.as_array()?;
    Some(with_usage(
        model(parts),
        field(body, "usageMetadata", "usage_metadata"),
        "promptTokenCount",
        "candidatesTokenCount",
    ))
}

pub fn tools(body: &Value) -> Vec<ToolDef> {
    let mut out = Vec::new();
    for t in body.get("tools").and_then(Value::as_array).into_iter().flatten() {
        for f in
            field(t, "functionDeclarations", "function_declarations").and_then(Value::as_array).into_iter().flatten()
        {
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                out.push(ToolDef {
                    name: name.to_owned(),
                    description: f.get("description").and_then(Value::as_str).map(str::to_owned),
                    parameters: f
                        .get("parameters")
                        .or_else(|| f.get("parameters_json_schema"))
                        .or_else(|| f.get("parametersJsonSchema"))
                        .cloned(),
                });
            }
        }
    }
    out
}
