//! MCP JSON-RPC message logs: one message per line, both directions (a bare message, or one
//! under `message` as loggers wrap it). Each `tools/call` becomes a model turn that asks for
//! that call and its answer the tool result: `isError` is the structural flag, a JSON-RPC
//! error a failure with its message; `tools/list` answers give the tool definitions. There is
//! no model in an MCP log: its turns are the calls.

use std::collections::BTreeMap;

use serde_json::Value;

use super::conversation::{CallItem, Conversation, Item, text_of};
use super::{ImportError, SourceFormat};
use crate::trace::{Args, ToolDef};

/// Whether a value looks like a JSON-RPC message (or a list that starts with one).
pub fn looks_like(v: &Value) -> bool {
    let first = match v {
        Value::Array(items) => items.first(),
        other => Some(other),
    };
    first.map(unwrap).is_some_and(|m| m.get("jsonrpc").is_some_and(|j| j == "2.0"))
}

/// A logged message: the message itself, or the one under `message`.
fn unwrap(v: &Value) -> &Value {
    match v.get("message") {
        Some(m) if m.get("jsonrpc").is_some() => m,
        _ => v,
    }
}

/// The one conversation of a log.
pub fn conversations(v: &Value, id: &str) -> Result<Vec<Conversation>, ImportError> {
    let messages: Vec<&Value> = match v {
        Value::Array(items) => items.iter().map(unwrap).collect(),
        other => vec![unwrap(other)],
    };
    let mut conv =
        Conversation { id: id.to_owned(), source_format: SourceFormat::Mcp.name().to_owned(), ..Default::default() };
    // Requests by JSON-RPC id: a tools/call's (name), a tools/list's (no name).
    let mut pending: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (i, m) in messages.iter().enumerate() {
        if m.get("jsonrpc") != Some(&Value::from("2.0")) {
            return Err(ImportError::at(format!("/{i}"), "a JSON-RPC 2.0 message (\"jsonrpc\": \"2.0\")"));
        }
        let rpc_id = m.get("id").map(Value::to_string);
        match (m.get("method").and_then(Value::as_str), rpc_id) {
            (Some("tools/call"), Some(rid)) => {
                let params = m.get("params").unwrap_or(&Value::Null);
                let Some(name) = params.get("name").and_then(Value::as_str) else {
                    return Err(ImportError::at(format!("/{i}/params/name"), "the called tool's name"));
                };
                let args = params.get("arguments").cloned().unwrap_or_else(|| Value::Object(Default::default()));
                let call = CallItem {
                    id: Some(format!("mcp-{}", rid.trim_matches('"'))),
                    name: name.to_owned(),
                    args: Args::new(&args),
                };
                conv.items.push(Item::model(None, vec![call]));
                pending.insert(rid, Some(name.to_owned()));
            }
            (Some("tools/list"), Some(rid)) => {
                pending.insert(rid, None);
            }
            (Some(_), _) => {}
            (None, Some(rid)) => match pending.remove(&rid) {
                Some(Some(name)) => conv.items.push(result(m, &rid, name)),
                Some(None) => tools(m, &mut conv.tools),
                None => {}
            },
            (None, None) => return Err(ImportError::at(format!("/{i}"), "a request, a notification or a response")),
        }
    }
    Ok(vec![conv])
}

/// A `tools/call` answer as a tool result.
fn result(m: &Value, rid: &str, name: String) -> Item {
    let id = Some(format!("mcp-{}", rid.trim_matches('"')));
    if let Some(err) = m.get("error") {
        let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = err.get("message").and_then(Value::as_str).unwrap_or_default();
        let content = format!("JSON-RPC error {code}: {message}");
        return Item::Result { id, name: Some(name), content, flag: Some((true, "JSON-RPC error")) };
    }
    let r = m.get("result").unwrap_or(&Value::Null);
    let content = text_of(r.get("content").unwrap_or(&Value::Null));
    let flag = match r.get("isError").and_then(Value::as_bool) {
        Some(true) => (true, "isError: true"),
        Some(false) => (false, "isError: false"),
        None => (false, "no isError flag"),
    };
    Item::Result { id, name: Some(name), content, flag: Some(flag) }
}

/// The tools a `tools/list` answer describes.
fn tools(m: &Value, out: &mut Vec<ToolDef>) {
    for t in m.pointer("/result/tools").and_then(Value::as_array).into_iter().flatten() {
        let Some(name) = t.get("name").and_then(Value::as_str) else { continue };
        if out.iter().any(|d| d.name == name) {
            continue;
        }
        out.push(ToolDef {
            name: name.to_owned(),
            description: t.get("description").and_then(Value::as_str).map(str::to_owned),
            parameters: t.get("inputSchema").cloned(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_and_answers_become_turns_and_results() {
        let log = json!([
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
            {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18"}},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "search", "inputSchema": {"type": "object"}}]}},
            {"direction": "send", "message": {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "search", "arguments": {"q": "x"}}}},
            {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "down"}], "isError": true}},
            {"jsonrpc": "2.0", "id": "b", "method": "tools/call", "params": {"name": "search"}},
            {"jsonrpc": "2.0", "id": "b", "error": {"code": -32602, "message": "bad q"}},
        ]);
        assert!(looks_like(&log));
        let c = &conversations(&log, "log").unwrap()[0];
        assert_eq!(c.tools.len(), 1);
        assert_eq!(c.items.len(), 4);
        let Item::Result { content, flag, .. } = &c.items[1] else { panic!("{:?}", c.items[1]) };
        assert_eq!((content.as_str(), *flag), ("down", Some((true, "isError: true"))));
        let Item::Result { content, flag, id, .. } = &c.items[3] else { panic!() };
        assert_eq!(content, "JSON-RPC error -32602: bad q");
        assert_eq!(*flag, Some((true, "JSON-RPC error")));
        assert_eq!(id.as_deref(), Some("mcp-b"));
        assert!(conversations(&json!([{"id": 1}]), "x").is_err());
    }
}
