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

/// The message list of a wrapped conversation (`traj`, `conversation` or `trajectory`, as
/// [`super::container_inner`] picks), read without the text of system and developer messages,
/// which [`items`] skips: in tau-bench that is the policy prompt, a third of the bytes. `None`
/// when the element is not an object whose list holds objects (the caller reads it whole).
pub fn lean_wrapped(element: &[u8]) -> Option<Value> {
    #[derive(serde::Deserialize)]
    struct Wrapped {
        traj: Option<Vec<Lean>>,
        conversation: Option<Vec<Lean>>,
        trajectory: Option<Vec<Lean>>,
    }
    let w: Wrapped = serde_json::from_slice(element).ok()?;
    let list = w.traj.or(w.conversation).or(w.trajectory)?;
    Some(Value::Array(list.into_iter().map(|m| m.0).collect()))
}

/// One message, its `content` parsed only when its role is read.
struct Lean(Value);

impl<'de> serde::Deserialize<'de> for Lean {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Lean, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Lean;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a message object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Lean, A::Error> {
                let mut map = serde_json::Map::new();
                let mut content: Option<&'de serde_json::value::RawValue> = None;
                while let Some(k) = a.next_key::<String>()? {
                    if k == "content" {
                        content = Some(a.next_value()?);
                    } else {
                        map.insert(k, a.next_value()?);
                    }
                }
                let skipped = matches!(map.get("role").and_then(Value::as_str), Some("system" | "developer"));
                if let Some(raw) = content.filter(|_| !skipped) {
                    map.insert("content".into(), serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)?);
                }
                Ok(Lean(Value::Object(map)))
            }
        }
        d.deserialize_map(Visit)
    }
}
