//! Anthropic Messages: `tool_use` blocks in assistant messages, `tool_result` blocks (with
//! `is_error`, the only structural error flag among the formats) in user messages, results
//! first. The mock answers with a `message` (SSE `message_start` … `message_stop` when
//! streamed), keeps 529 for an overload and fails with Anthropic's typed error object.

use serde_json::{Value, json};

use super::choice::str_at;
use super::{
    Choice, Provider, Reply, RequestProblem, ResultPart, ResultShape, Shape, ToolChoice, Turn, Violation,
    first_of_type, sse,
};
use crate::exchange::{Args, ToolDef};
use crate::exchange::{CallItem, ImportError, Item, text_of, tool_defs, with_usage};

pub struct Anthropic;

impl Provider for Anthropic {
    fn serves(&self, _version: &str, rest: &str) -> Option<bool> {
        (rest == "/messages").then_some(false)
    }

    fn conversation_key(&self) -> &'static str {
        "messages"
    }

    fn items(&self, list: &[Value], path: &str) -> Result<Vec<Item>, ImportError> {
        let messages = list;
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
                    return Err(ImportError::at(
                        format!("{path}/{i}/role"),
                        format!("user or assistant, got {other:?}"),
                    ));
                }
            }
        }
        Ok(out)
    }

    fn response(&self, body: &Value) -> Option<Item> {
        Some(with_usage(assistant(body.get("content")?), body.get("usage"), "input_tokens", "output_tokens"))
    }

    fn tools(&self, body: &Value) -> Vec<ToolDef> {
        tool_defs(body.get("tools"), "input_schema")
    }

    fn result_shape(&self) -> ResultShape {
        ResultShape::Content {
            prefix: r#"{"type":"tool_result","tool_use_id":"toolu_"#,
            content_key: r#""content":"#,
            error_flag: true,
        }
    }

    /// A `tool_result` block sits in a user message.
    fn wrap_message(&self, item: &str) -> String {
        format!(r#"{{"role":"user","content":[{item}]}}"#)
    }

    fn result_nodes<'a>(&self, list: &'a mut [Value]) -> Vec<(Option<String>, &'a mut Value)> {
        list.iter_mut()
            .filter_map(|m| m.get_mut("content").and_then(Value::as_array_mut))
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| (b.get("tool_use_id").and_then(Value::as_str).map(str::to_owned), b))
            .collect()
    }

    fn result_part<'a>(&self, message: &'a Value) -> Option<ResultPart<'a>> {
        let block =
            if message["type"] == "tool_result" { message } else { first_of_type(&message["content"], "tool_result")? };
        Some(ResultPart::Content { content: &block["content"], flag: block["is_error"] == true })
    }

    fn call_id_prefix(&self) -> &'static str {
        "toolu_"
    }

    /// The request's `tool_choice` (`auto`, `any`, `tool`, `none`, `disable_parallel_tool_use`).
    fn tool_choice(&self, body: &Value) -> Choice {
        let tc = body.get("tool_choice");
        let choice = match tc.and_then(|t| str_at(t, "/type")) {
            Some("none") => ToolChoice::None,
            Some("any") => ToolChoice::Required,
            Some("tool") => match tc.and_then(|t| str_at(t, "/name")) {
                Some(n) => ToolChoice::Named(n.to_owned()),
                None => ToolChoice::Auto,
            },
            _ => ToolChoice::Auto,
        };
        let one = tc.and_then(|t| t.get("disable_parallel_tool_use")) == Some(&Value::Bool(true));
        Choice { choice, allowed: None, one_call_per_turn: one }
    }

    fn request_error(&self, problem: RequestProblem<'_>) -> Violation {
        let message = match problem {
            RequestProblem::NotJson(err) => format!("Error parsing JSON body: {err}"),
            RequestProblem::NotAnObject(what) => format!("Input should be a valid dictionary, got {what}"),
            RequestProblem::Missing(key) => format!("{key}: Field required"),
            RequestProblem::NotAList { key, .. } => format!("{key}: Input should be a valid list"),
            RequestProblem::NotAnObjectAt { key, index, .. } => {
                format!("{key}.{index}: Input should be a valid dictionary")
            }
        };
        Violation { body: json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}) }
    }

    /// Anthropic Messages.
    fn pairing(&self, body: &Value, request_id: &str) -> Option<Violation> {
        let msgs = body.get("messages")?.as_array()?;
        let err = |message: String| Violation {
            body: json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}, "request_id": request_id}),
        };
        for (i, m) in msgs.iter().enumerate() {
            let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
            if role == "user" {
                let prev: Vec<String> = match i.checked_sub(1).map(|p| &msgs[p]) {
                    Some(p) if p.get("role").and_then(Value::as_str) == Some("assistant") => tool_use_ids(p),
                    _ => Vec::new(),
                };
                for (j, b) in blocks(m).into_iter().enumerate() {
                    if block_type(b) == "tool_result" {
                        let id = b.get("tool_use_id").and_then(Value::as_str).unwrap_or_default();
                        if !prev.iter().any(|p| p == id) {
                            return Some(err(format!(
                                "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                            )));
                        }
                    }
                }
            }
            if role == "assistant" {
                let mut seen: Vec<&str> = Vec::new();
                for (j, b) in blocks(m).into_iter().enumerate().filter(|(_, b)| block_type(b) == "tool_use") {
                    let id = b.get("id").and_then(Value::as_str).unwrap_or_default();
                    if id.is_empty() || !id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-') {
                        return Some(err(format!(
                            "messages.{i}.content.{j}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                        )));
                    }
                    if !b.get("input").is_some_and(Value::is_object) {
                        return Some(err(format!(
                            "messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary"
                        )));
                    }
                    if seen.contains(&id) {
                        return Some(err(format!("messages.{i}.content.{j}: `tool_use` ids must be unique")));
                    }
                    seen.push(id);
                }
                let uses = tool_use_ids(m);
                if uses.is_empty() {
                    continue;
                }
                let answered: Vec<String> = match msgs.get(i + 1) {
                    Some(n) if n.get("role").and_then(Value::as_str) == Some("user") => blocks(n)
                        .into_iter()
                        .take_while(|b| block_type(b) == "tool_result")
                        .filter_map(|b| b.get("tool_use_id").and_then(Value::as_str).map(str::to_owned))
                        .collect(),
                    _ => Vec::new(),
                };
                let missing: Vec<&String> = uses.iter().filter(|u| !answered.contains(u)).collect();
                if !missing.is_empty() {
                    let ids: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
                    return Some(err(format!(
                        "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                        ids.join(", ")
                    )));
                }
            }
        }
        None
    }

    fn answer(&self, turn: &Turn, shape: &Shape, n: u32, tokens: (u64, u64)) -> Reply {
        answer(turn, shape, n, tokens)
    }

    /// 529 is Anthropic's own overload status.
    fn status(&self, status: u16) -> u16 {
        status
    }

    /// Anthropic's documented `error` event (`overloaded_error`), which its SDK raises.
    fn stream_error_event(&self, request_id: &str) -> String {
        format!("event: error\ndata: {}\n\n", self.error_body(529, None, request_id))
    }

    fn error_body(&self, status: u16, _retry_after_real_ms: Option<u64>, request_id: &str) -> Value {
        let (kind, message) = match status {
            400 | 422 => ("invalid_request_error", "Invalid request."),
            401 => ("authentication_error", "invalid x-api-key"),
            402 => ("billing_error", "Your credit balance is too low."),
            403 => ("permission_error", "Your API key does not have permission to use the specified resource."),
            404 => ("not_found_error", "Not found."),
            413 => ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
            429 => (
                "rate_limit_error",
                "This request would exceed the rate limit for your organization. Please try again later.",
            ),
            504 => ("timeout_error", "Request timed out."),
            529 => ("overloaded_error", "Overloaded"),
            _ => ("api_error", "Internal server error"),
        };
        json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id})
    }
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

fn blocks(m: &Value) -> Vec<&Value> {
    m.get("content").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default()
}

fn block_type(b: &Value) -> &str {
    b.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// The ids of an assistant message's `tool_use` blocks.
fn tool_use_ids(m: &Value) -> Vec<String> {
    blocks(m)
        .into_iter()
        .filter(|b| block_type(b) == "tool_use")
        .filter_map(|b| b.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

fn answer(turn: &Turn, shape: &Shape, n: u32, tokens: (u64, u64)) -> Reply {
    let (reply, (tin, tout), model, stream) = (turn, tokens, shape.model.as_str(), shape.stream);
    let (content, stop) = match reply {
        Turn::Final { text } => (vec![json!({"type": "text", "text": text})], "end_turn"),
        Turn::Calls(c) => (
            c.iter()
                .map(|(id, name, args)| json!({"type": "tool_use", "id": id, "name": name, "input": args}))
                .collect(),
            "tool_use",
        ),
    };
    let id = format!("msg_tracefault{n:06}");
    if !stream {
        return Reply::json(
            200,
            &json!({"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop, "stop_sequence": null, "usage": {"input_tokens": tin, "output_tokens": tout}}),
        );
    }
    let mut events = vec![(
        Some("message_start"),
        json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
        "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": tin, "output_tokens": 1}}}),
    )];
    for (i, block) in content.iter().enumerate() {
        if block["type"] == "text" {
            events.push((
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}),
            ));
            events.push((Some("ping"), json!({"type": "ping"})));
            events.push((Some("content_block_delta"), json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": block["text"]}})));
        } else {
            events.push((
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": i,
                "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}),
            ));
            events.push((Some("content_block_delta"), json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": ""}})));
            events.push((Some("content_block_delta"), json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": block["input"].to_string()}})));
        }
        events.push((Some("content_block_stop"), json!({"type": "content_block_stop", "index": i})));
    }
    events.push((Some("message_delta"), json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": tout}})));
    events.push((Some("message_stop"), json!({"type": "message_stop"})));
    sse(events, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_texts() {
        let body = json!({"messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01N82CRmSxsFBkxD4tYG2md8", "name": "a", "input": {}}]},
            {"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "tool_result", "tool_use_id": "toolu_01N82CRmSxsFBkxD4tYG2md8", "content": "r"}]}
        ]});
        let v = Anthropic.pairing(&body, "req_1").unwrap();
        assert_eq!(
            v.body["error"]["message"],
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01N82CRmSxsFBkxD4tYG2md8. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
        );
        let body = json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_019ETtGZEhTBXgWPVsdVnXMh", "content": "r"}]}]});
        assert_eq!(
            Anthropic.pairing(&body, "r").unwrap().body["error"]["message"],
            "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_019ETtGZEhTBXgWPVsdVnXMh. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
        );
    }

    #[test]
    fn anthropic_tool_use_shape_texts() {
        let msg = |blocks: Value| json!({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": blocks}]});
        let tu = |id: &str, input: Value| json!({"type": "tool_use", "id": id, "name": "a", "input": input});
        let text =
            |b: Value| Anthropic.pairing(&msg(b), "r").unwrap().body["error"]["message"].as_str().unwrap().to_owned();
        assert_eq!(
            text(json!([tu("toolu_1", json!({})), tu("toolu_1", json!({}))])),
            "messages.1.content.1: `tool_use` ids must be unique"
        );
        assert_eq!(
            text(json!([tu("toolu.1", json!({}))])),
            "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        );
        assert_eq!(
            text(json!([tu("toolu_1", json!("x"))])),
            "messages.1.content.0.tool_use.input: Input should be a valid dictionary"
        );
    }
}
