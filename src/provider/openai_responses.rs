//! OpenAI Responses: `input` items (`function_call` / `function_call_output` and
//! `custom_tool_call` / `custom_tool_call_output` paired on `call_id`, messages) and `output`
//! items of a response. A custom tool's freeform `input` is kept as a string. A request may
//! name a `previous_response_id` instead of carrying the conversation, or give `input` as a
//! plain string. The mock answers with a `response` object (SSE `response.*` events when
//! streamed) and fails with OpenAI's error object.

use serde_json::{Value, json};

use super::choice::{mode, str_at};
use super::openai_chat::{OpenAiChat, openai_error};
use super::{
    CREATED, Choice, Provider, Reply, RequestProblem, ResultPart, ResultShape, Shape, ToolChoice, Turn, Violation, sse,
};
use crate::exchange::{Args, ToolDef};
use crate::exchange::{CallItem, ImportError, Item, parse_args, text_of, tool_defs, with_usage};

pub struct OpenAiResponses;

impl Provider for OpenAiResponses {
    fn serves(&self, _version: &str, rest: &str) -> Option<bool> {
        (rest == "/responses").then_some(false)
    }

    fn conversation_key(&self) -> &'static str {
        "input"
    }

    /// Consecutive assistant messages and function calls form one model turn.
    fn items(&self, list: &[Value], path: &str) -> Result<Vec<Item>, ImportError> {
        let input = list;
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

    fn response(&self, body: &Value) -> Option<Item> {
        let output = body.get("output")?.as_array()?;
        let items = self.items(output, "/output").ok()?;
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

    fn tools(&self, body: &Value) -> Vec<ToolDef> {
        tool_defs(body.get("tools"), "parameters")
    }

    fn result_shape(&self) -> ResultShape {
        ResultShape::Content {
            prefix: r#"{"type":"function_call_output","call_id":"call_"#,
            content_key: r#""output":"#,
            error_flag: false,
        }
    }

    fn result_nodes<'a>(&self, list: &'a mut [Value]) -> Vec<(Option<String>, &'a mut Value)> {
        list.iter_mut()
            .filter(|m| matches!(m["type"].as_str(), Some("function_call_output" | "custom_tool_call_output")))
            .map(|m| (m.get("call_id").and_then(Value::as_str).map(str::to_owned), m))
            .collect()
    }

    fn result_part<'a>(&self, message: &'a Value) -> Option<ResultPart<'a>> {
        Some(ResultPart::Content { content: &message["output"], flag: false })
    }

    /// The request's `tool_choice` (a mode, a named function or custom tool, or `allowed_tools`)
    /// and `parallel_tool_calls`.
    fn tool_choice(&self, body: &Value) -> Choice {
        let parallel_off = body.get("parallel_tool_calls") == Some(&Value::Bool(false));
        let tc = body.get("tool_choice");
        let (choice, allowed) = match tc {
            Some(Value::String(s)) => (mode(s), None),
            Some(o @ Value::Object(_)) => match str_at(o, "/type") {
                Some("allowed_tools") => {
                    let names = o
                        .get("tools")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
                        .collect();
                    (mode(str_at(o, "/mode").unwrap_or("auto")), Some(names))
                }
                Some("function" | "custom") => match str_at(o, "/name") {
                    Some(n) => (ToolChoice::Named(n.to_owned()), None),
                    None => (ToolChoice::Auto, None),
                },
                _ => (ToolChoice::Auto, None),
            },
            _ => (ToolChoice::Auto, None),
        };
        Choice { choice, allowed, one_call_per_turn: parallel_off }
    }

    /// A request that names a previous response continues its conversation without one.
    fn conversation_required(&self, body: &Value) -> bool {
        body.get("previous_response_id").is_none()
    }

    fn takes_text_input(&self) -> bool {
        true
    }

    fn continues<'a>(&self, body: &'a Value) -> Option<&'a str> {
        body.get("previous_response_id").and_then(Value::as_str)
    }

    fn with_history(&self, body: &mut Value, id: &str, history: Option<Vec<Value>>) -> Result<(), Violation> {
        let Some(history) = history else {
            return Err(Violation {
                body: json!({"error": {"message": format!("Previous response with id '{id}' not found."),
                "type": "invalid_request_error", "param": "previous_response_id", "code": "previous_response_not_found"}}),
            });
        };
        let new = match body.get("input") {
            Some(Value::Array(a)) => a.clone(),
            Some(Value::String(s)) => vec![json!({"role": "user", "content": s})],
            _ => Vec::new(),
        };
        body["input"] = Value::Array(history.into_iter().chain(new).collect());
        Ok(())
    }

    fn remembers_responses(&self) -> bool {
        true
    }

    fn history(&self, body: &Value, turn: &Turn, n: u32) -> Option<Vec<Value>> {
        let mut history = body.get("input").and_then(Value::as_array).cloned().unwrap_or_default();
        history.extend(continuation(turn, n));
        Some(history)
    }

    fn request_error(&self, problem: RequestProblem<'_>) -> Violation {
        OpenAiChat.request_error(problem)
    }

    /// OpenAI Responses: `function_call` and `function_call_output` paired on `call_id`.
    fn pairing(&self, body: &Value, _request_id: &str) -> Option<Violation> {
        let input = body.get("input")?.as_array()?;
        let of = |t: &str| -> Vec<String> {
            input
                .iter()
                .filter(|it| it.get("type").and_then(Value::as_str) == Some(t))
                .filter_map(|it| it.get("call_id").and_then(Value::as_str).map(str::to_owned))
                .collect()
        };
        let (calls, outputs) = (of("function_call"), of("function_call_output"));
        if let Some(c) = calls.iter().find(|c| !outputs.contains(c)) {
            return Some(openai_error(format!("No tool output found for function call {c}."), Some("input".into())));
        }
        if let Some(o) = outputs.iter().find(|o| !calls.contains(o)) {
            return Some(openai_error(
                format!("No tool call found for function call output with call_id {o}."),
                Some("input".into()),
            ));
        }
        None
    }

    fn answer(&self, turn: &Turn, shape: &Shape, n: u32, tokens: (u64, u64)) -> Reply {
        answer(turn, shape, n, tokens)
    }

    fn error_body(&self, status: u16, retry_after_real_ms: Option<u64>, request_id: &str) -> Value {
        OpenAiChat.error_body(status, retry_after_real_ms, request_id)
    }

    /// The Responses stream's `error` event (code, message, param at the top level).
    fn stream_error_event(&self, request_id: &str) -> String {
        let e = &OpenAiChat.error_body(500, None, request_id)["error"];
        let event = json!({"type": "error", "code": "server_error", "message": e["message"], "param": null});
        format!("event: error\ndata: {event}\n\n")
    }
}

fn responses_items(reply: &Turn, n: u32) -> Vec<Value> {
    match reply {
        Turn::Final { text } => vec![json!({"type": "message", "id": format!("msg_tf{n:06}"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]})],
        Turn::Calls(c) => c
            .iter()
            .enumerate()
            .map(|(i, (cid, name, args))| json!({"type": "function_call", "id": format!("fc_tf{n:06}_{i}"), "call_id": cid, "name": name, "arguments": args.to_string(), "status": "completed"}))
            .collect(),
    }
}

fn answer(turn: &Turn, shape: &Shape, n: u32, tokens: (u64, u64)) -> Reply {
    let (reply, (tin, tout)) = (turn, tokens);
    let (model, stream) = (shape.model.as_str(), shape.stream);
    let output = responses_items(reply, n);
    let response = |status: &str, output: Value| {
        json!({"id": shape.response_id, "object": "response", "created_at": CREATED, "status": status, "model": model,
            "output": output, "error": null, "incomplete_details": null, "parallel_tool_calls": shape.parallel_tool_calls,
            "tool_choice": shape.tool_choice, "tools": shape.tools,
            "usage": {"input_tokens": tin, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": tout,
                "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": tin + tout}})
    };
    if !stream {
        return Reply::json(200, &response("completed", Value::Array(output)));
    }
    let mut seq = 0u64;
    let mut events = Vec::new();
    let mut push = |events: &mut Vec<(Option<&str>, Value)>, name: &'static str, mut data: Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(seq);
        seq += 1;
        events.push((Some(name), data));
    };
    push(&mut events, "response.created", json!({"response": response("in_progress", json!([]))}));
    for (i, item) in output.iter().enumerate() {
        if item["type"] == "function_call" {
            let mut added = item.clone();
            added["arguments"] = json!("");
            added["status"] = json!("in_progress");
            push(&mut events, "response.output_item.added", json!({"output_index": i, "item": added}));
            push(
                &mut events,
                "response.function_call_arguments.delta",
                json!({"item_id": item["id"], "output_index": i, "delta": item["arguments"]}),
            );
            push(
                &mut events,
                "response.function_call_arguments.done",
                json!({"item_id": item["id"], "output_index": i, "name": item["name"], "arguments": item["arguments"]}),
            );
        } else {
            let text = item["content"][0]["text"].clone();
            let mut added = item.clone();
            added["content"] = json!([]);
            added["status"] = json!("in_progress");
            push(&mut events, "response.output_item.added", json!({"output_index": i, "item": added}));
            let part = json!({"type": "output_text", "text": "", "annotations": []});
            push(
                &mut events,
                "response.content_part.added",
                json!({"item_id": item["id"], "output_index": i, "content_index": 0, "part": part}),
            );
            push(
                &mut events,
                "response.output_text.delta",
                json!({"item_id": item["id"], "output_index": i, "content_index": 0, "delta": text}),
            );
            push(
                &mut events,
                "response.output_text.done",
                json!({"item_id": item["id"], "output_index": i, "content_index": 0, "text": text}),
            );
            push(
                &mut events,
                "response.content_part.done",
                json!({"item_id": item["id"], "output_index": i, "content_index": 0, "part": item["content"][0]}),
            );
        }
        push(&mut events, "response.output_item.done", json!({"output_index": i, "item": item}));
    }
    push(&mut events, "response.completed", json!({"response": response("completed", Value::Array(output))}));
    sse(events, "")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_pairing() {
        let v = OpenAiResponses.pairing(&json!({"input": [{"type": "function_call", "call_id": "call_eM9vRKidFzbpz05S7hlNJBHa", "name": "a", "arguments": "{}"}]}), "r").unwrap();
        assert_eq!(
            v.body,
            json!({"error": {"message": "No tool output found for function call call_eM9vRKidFzbpz05S7hlNJBHa.", "type": "invalid_request_error", "param": "input", "code": null}})
        );
        let v = OpenAiResponses.pairing(&json!({"input": [{"type": "function_call_output", "call_id": "call_uelfkqtHfJDC4Btqeoozq82e", "output": "x"}]}), "r").unwrap();
        assert_eq!(
            v.body["error"]["message"],
            "No tool call found for function call output with call_id call_uelfkqtHfJDC4Btqeoozq82e."
        );
    }
}
