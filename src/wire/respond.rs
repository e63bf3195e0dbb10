//! What the mock provider sends back: the model's turn in each provider's shape (JSON, or SSE
//! with the event names and order the official SDKs' parsers expect), and provider errors with
//! the status and body that provider really sends.

use serde_json::{Value, json};

use super::conversation::Turn;
use super::reply::Reply;
use crate::envelope::Format;

/// What a request asked of the answer's shape.
#[derive(Clone, Debug, Default)]
pub struct Shape {
    pub model: String,
    pub stream: bool,
    /// Chat Completions `stream_options.include_usage`: the usage chunk only when asked.
    pub include_usage: bool,
    /// Responses echo the request's `tools`, `tool_choice` and `parallel_tool_calls`.
    pub tools: Value,
    pub tool_choice: Value,
    pub parallel_tool_calls: bool,
    /// The Responses object's id (`resp_…`), which `previous_response_id` will name.
    pub response_id: String,
}

/// A fixed creation time: responses are reproducible, and no SDK checks it.
const CREATED: u64 = 1_700_000_000;

fn json_body(status: u16, body: &Value) -> Reply {
    Reply::json(status, body)
}

fn sse(events: Vec<(Option<&str>, Value)>, tail: &str) -> Reply {
    let mut out = String::new();
    for (name, data) in events {
        if let Some(n) = name {
            out.push_str("event: ");
            out.push_str(n);
            out.push('\n');
        }
        out.push_str("data: ");
        out.push_str(&data.to_string());
        out.push_str("\n\n");
    }
    out.push_str(tail);
    Reply::sse(out)
}

/// The model's turn. `n` numbers the response (ids); `tokens` is (in, out).
pub fn reply(format: Format, reply: &Turn, shape: &Shape, n: u32, tokens: (u64, u64)) -> Reply {
    let (tin, tout) = tokens;
    let (model, stream) = (shape.model.as_str(), shape.stream);
    match format {
        Format::OpenAiChat | Format::GeminiOpenAi => openai_chat(reply, shape, n, tin, tout),
        Format::OpenAiResponses => openai_responses(reply, shape, n, tin, tout),
        Format::Anthropic => anthropic(reply, model, n, tin, tout, stream),
        Format::Gemini => gemini(reply, model, n, tin, tout, stream),
    }
    .header("x-request-id", format!("req_tracefault_{n:06}"))
    .header("request-id", format!("req_tracefault_{n:06}"))
}

fn openai_chat(reply: &Turn, shape: &Shape, n: u32, tin: u64, tout: u64) -> Reply {
    let (model, stream) = (shape.model.as_str(), shape.stream);
    let id = format!("chatcmpl-tracefault{n:06}");
    let usage = json!({"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout});
    let (content, calls, finish) = match reply {
        Turn::Final { text } => (json!(text), Vec::new(), "stop"),
        Turn::Calls(c) => (Value::Null, c.clone(), "tool_calls"),
    };
    if !stream {
        let mut message = json!({"role": "assistant", "content": content, "refusal": null});
        if !calls.is_empty() {
            message["tool_calls"] = calls
                .iter()
                .map(|(cid, name, args)| json!({"id": cid, "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
                .collect();
        }
        return json_body(
            200,
            &json!({
                "id": id, "object": "chat.completion", "created": CREATED, "model": model,
                "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
                "usage": usage, "system_fingerprint": "fp_tracefault",
            }),
        );
    }
    let chunk = |delta: Value, finish: Value| {
        (
            None,
            json!({"id": id, "object": "chat.completion.chunk", "created": CREATED, "model": model, "system_fingerprint": "fp_tracefault",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]}),
        )
    };
    let mut events = Vec::new();
    match reply {
        Turn::Final { text } => {
            events.push(chunk(json!({"role": "assistant", "content": "", "refusal": null}), Value::Null));
            events.push(chunk(json!({"content": text}), Value::Null));
        }
        Turn::Calls(c) => {
            for (i, (cid, name, args)) in c.iter().enumerate() {
                let mut first = json!({"tool_calls": [{"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}]});
                if i == 0 {
                    first["role"] = json!("assistant");
                    first["content"] = Value::Null;
                }
                events.push(chunk(first, Value::Null));
                let a = args.to_string();
                let mid = a.len() / 2;
                let mid = (0..=mid).rev().find(|&k| a.is_char_boundary(k)).unwrap_or(0);
                for part in [&a[..mid], &a[mid..]] {
                    events.push(chunk(
                        json!({"tool_calls": [{"index": i, "function": {"arguments": part}}]}),
                        Value::Null,
                    ));
                }
            }
        }
    }
    events.push(chunk(json!({}), json!(finish)));
    if shape.include_usage {
        events.push((None, json!({"id": id, "object": "chat.completion.chunk", "created": CREATED, "model": model, "choices": [], "usage": usage})));
    }
    sse(events, "data: [DONE]\n\n")
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

fn openai_responses(reply: &Turn, shape: &Shape, n: u32, tin: u64, tout: u64) -> Reply {
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
        return json_body(200, &response("completed", Value::Array(output)));
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

fn anthropic(reply: &Turn, model: &str, n: u32, tin: u64, tout: u64, stream: bool) -> Reply {
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
        return json_body(
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

fn gemini(reply: &Turn, model: &str, n: u32, tin: u64, tout: u64, stream: bool) -> Reply {
    let parts: Vec<Value> = match reply {
        Turn::Final { text } => vec![json!({"text": text})],
        Turn::Calls(c) => {
            c.iter().map(|(id, name, args)| json!({"functionCall": {"id": id, "name": name, "args": args}})).collect()
        }
    };
    let body = json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": tin, "candidatesTokenCount": tout, "totalTokenCount": tin + tout},
        "modelVersion": model, "responseId": format!("tracefault{n:06}")});
    if stream { sse(vec![(None, body)], "") } else { json_body(200, &body) }
}

/// The status a provider really sends for a fault: 529 is Anthropic's overload; Gemini and
/// OpenAI answer an overload with 503.
pub fn provider_status(format: Format, status: u16) -> u16 {
    match (format, status) {
        (Format::Anthropic, s) => s,
        (_, 529) => 503,
        (_, s) => s,
    }
}

/// A provider failure in the provider's own shape, with `retry-after` headers (a real wait)
/// when known.
pub fn provider_error(format: Format, status: u16, retry_after_real_ms: Option<u64>, n: u32) -> Reply {
    let status = provider_status(format, status);
    let request_id = format!("req_tracefault_{n:06}");
    let body = match format {
        Format::Anthropic => {
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
        Format::Gemini => {
            let (rpc, message) = match status {
                400 | 422 => ("INVALID_ARGUMENT", "Request contains an invalid argument."),
                401 => ("UNAUTHENTICATED", "API key not valid. Please pass a valid API key."),
                403 => ("PERMISSION_DENIED", "The caller does not have permission."),
                404 => ("NOT_FOUND", "Requested entity was not found."),
                429 => (
                    "RESOURCE_EXHAUSTED",
                    "You exceeded your current quota, please check your plan and billing details.",
                ),
                500 => ("INTERNAL", "An internal error has occurred."),
                504 => ("DEADLINE_EXCEEDED", "Deadline exceeded."),
                _ => ("UNAVAILABLE", "The model is overloaded. Please try again later."),
            };
            let mut e = json!({"error": {"code": status, "message": message, "status": rpc}});
            if let Some(ms) = retry_after_real_ms {
                e["error"]["details"] = json!([{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{}s", ms.div_ceil(1000))}]);
            }
            e
        }
        _ => {
            let (kind, code, message) = match status {
                401 => ("invalid_request_error", Some("invalid_api_key"), "Incorrect API key provided."),
                429 => ("tokens", Some("rate_limit_exceeded"), "Rate limit reached. Please try again later."),
                400 | 422 => ("invalid_request_error", None, "Invalid request."),
                503 => (
                    "server_error",
                    None,
                    "That model is currently overloaded with other requests. You can retry your request, or contact us through our help center at help.openai.com if the error persists.",
                ),
                s if s >= 500 => (
                    "server_error",
                    None,
                    "The server had an error processing your request. Sorry about that! You can retry your request, or contact us through our help center at help.openai.com if you keep seeing this error.",
                ),
                _ => ("invalid_request_error", None, "The request was refused."),
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
    };
    let r = json_body(status, &body).header("x-request-id", request_id.clone()).header("request-id", request_id);
    match retry_after_real_ms {
        Some(ms) => r.retry_after(ms),
        None => r,
    }
}
