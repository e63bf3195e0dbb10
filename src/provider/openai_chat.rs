//! OpenAI Chat Completions: `messages` (with `tool_calls` / `role: "tool"`, or the legacy
//! `function_call` / `role: "function"`), request bodies, and `choices[0].message` responses. A
//! tool message's `error` field, which harnesses add (tau2's `error: true`), is its structural
//! failure flag. The mock answers in the Chat shape (SSE chunks with `data: [DONE]` when
//! streamed) and fails with OpenAI's error object. Gemini's OpenAI-compatible endpoint speaks it
//! too ([`super::gemini_openai`]).

use serde_json::{Value, json};

use super::choice::{mode, str_at};
use super::{
    CREATED, Choice, Provider, Reply, RequestProblem, ResultPart, ResultShape, Shape, ToolChoice, Turn, Violation,
    kind, sse,
};
use crate::exchange::ToolDef;
use crate::exchange::{CallItem, ImportError, Item, parse_args, text_of, with_usage};

pub struct OpenAiChat;

impl Provider for OpenAiChat {
    fn serves(&self, version: &str, rest: &str) -> Option<bool> {
        (rest == "/chat/completions" && version != "/v1beta/openai").then_some(false)
    }

    fn conversation_key(&self) -> &'static str {
        "messages"
    }

    fn items(&self, list: &[Value], path: &str) -> Result<Vec<Item>, ImportError> {
        let messages = list;
        let mut out = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            let at = || format!("{path}/{i}");
            let role = m
                .get("role")
                .and_then(Value::as_str)
                .ok_or_else(|| ImportError::at(at(), "a message with a `role`"))?;
            match role {
                "system" | "developer" => {}
                "user" => out.push(Item::User(text_of(m.get("content").unwrap_or(&Value::Null)))),
                "assistant" => out.push(assistant(m)),
                "tool" => out.push(Item::Result {
                    id: m.get("tool_call_id").and_then(Value::as_str).map(str::to_owned),
                    name: m.get("name").and_then(Value::as_str).map(str::to_owned),
                    content: text_of(m.get("content").unwrap_or(&Value::Null)),
                    flag: error_flag(m.get("error")),
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

    /// The model turn a response body holds, with its usage.
    fn response(&self, body: &Value) -> Option<Item> {
        let msg = body.get("choices")?.get(0)?.get("message")?;
        Some(with_usage(assistant(msg), body.get("usage"), "prompt_tokens", "completion_tokens"))
    }

    fn tools(&self, body: &Value) -> Vec<ToolDef> {
        let mut out = Vec::new();
        for t in body.get("tools").and_then(Value::as_array).into_iter().flatten() {
            let f = t.get("function").unwrap_or(t);
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                out.push(ToolDef {
                    name: name.to_owned(),
                    description: f
                        .get("description")
                        .and_then(Value::as_str)
                        .filter(|d| !d.is_empty())
                        .map(str::to_owned),
                    parameters: f.get("parameters").cloned(),
                });
            }
        }
        for f in body.get("functions").and_then(Value::as_array).into_iter().flatten() {
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                out.push(ToolDef {
                    name: name.to_owned(),
                    description: None,
                    parameters: f.get("parameters").cloned(),
                });
            }
        }
        out
    }

    fn result_shape(&self) -> ResultShape {
        ResultShape::Content {
            prefix: r#"{"role":"tool","tool_call_id":"call_"#,
            content_key: r#""content":"#,
            error_flag: false,
        }
    }

    fn result_nodes<'a>(&self, list: &'a mut [Value]) -> Vec<(Option<String>, &'a mut Value)> {
        list.iter_mut()
            .filter(|m| m["role"] == "tool")
            .map(|m| (m.get("tool_call_id").and_then(Value::as_str).map(str::to_owned), m))
            .collect()
    }

    fn result_part<'a>(&self, message: &'a Value) -> Option<ResultPart<'a>> {
        Some(ResultPart::Content { content: &message["content"], flag: false })
    }

    /// The request's `tool_choice` (or the legacy `function_call`) and `parallel_tool_calls`.
    fn tool_choice(&self, body: &Value) -> Choice {
        let parallel_off = body.get("parallel_tool_calls") == Some(&Value::Bool(false));
        let choice = match body.get("tool_choice").or_else(|| body.get("function_call")) {
            Some(Value::String(s)) => mode(s),
            Some(o @ Value::Object(_)) => match str_at(o, "/function/name").or_else(|| str_at(o, "/name")) {
                Some(n) => ToolChoice::Named(n.to_owned()),
                None => ToolChoice::Auto,
            },
            _ => ToolChoice::Auto,
        };
        Choice { choice, allowed: None, one_call_per_turn: parallel_off }
    }

    /// A request's shape problem in OpenAI's words (the not-JSON text is its documented one).
    fn request_error(&self, problem: RequestProblem<'_>) -> Violation {
        let typed = |message: String, param: String| {
            let mut e = openai_error(message, Some(param));
            e.body["error"]["code"] = json!("invalid_type");
            e
        };
        match problem {
            RequestProblem::NotJson(_) => openai_error(
                "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)".into(),
                None,
            ),
            RequestProblem::NotAnObject(what) => openai_error(
                format!("Invalid type for request body: expected an object, but got {what} instead."),
                None,
            ),
            RequestProblem::Missing(key) => {
                let mut v = openai_error(format!("Missing required parameter: '{key}'."), Some(key.into()));
                v.body["error"]["code"] = json!("missing_required_parameter");
                v
            }
            RequestProblem::NotAList { key, value } => typed(
                format!("Invalid type for '{key}': expected an array of objects, but got {} instead.", kind(value)),
                key.into(),
            ),
            RequestProblem::NotAnObjectAt { key, index: i, value } => typed(
                format!("Invalid type for '{key}[{i}]': expected an object, but got {} instead.", kind(value)),
                format!("{key}[{i}]"),
            ),
        }
    }

    /// OpenAI Chat Completions (also Gemini's OpenAI-compatible endpoint).
    fn pairing(&self, body: &Value, _request_id: &str) -> Option<Violation> {
        let msgs = body.get("messages")?.as_array()?;
        for (i, m) in msgs.iter().enumerate() {
            if m.get("role").and_then(Value::as_str) == Some("tool")
                && m.get("tool_call_id").and_then(Value::as_str).is_none()
            {
                return Some(openai_error(
                    "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'.".into(),
                    Some(format!("messages.[{i}].tool_call_id")),
                ));
            }
        }
        let mut i = 0;
        while i < msgs.len() {
            let m = &msgs[i];
            let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
            if role == "assistant" && m.get("tool_calls").is_some_and(|t| t.as_array().is_some_and(|a| !a.is_empty())) {
                let mut missing = ids_of(m.get("tool_calls"));
                let mut k = i + 1;
                while k < msgs.len() && msgs[k].get("role").and_then(Value::as_str) == Some("tool") {
                    let id = msgs[k].get("tool_call_id").and_then(Value::as_str).unwrap_or_default();
                    match missing.iter().position(|x| x == id) {
                        Some(p) => {
                            missing.remove(p);
                        }
                        None => {
                            return Some(openai_error(
                                "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.".into(),
                                Some(format!("messages.[{k}].role")),
                            ));
                        }
                    }
                    k += 1;
                }
                if !missing.is_empty() {
                    let at = if k < msgs.len() { k } else { i };
                    return Some(openai_error(
                        format!(
                            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                            missing.join(", ")
                        ),
                        Some(format!("messages.[{at}].role")),
                    ));
                }
                i = k;
                continue;
            }
            if role == "tool" {
                return Some(openai_error(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.".into(),
                    Some(format!("messages.[{i}].role")),
                ));
            }
            i += 1;
        }
        None
    }

    fn answer(&self, turn: &Turn, shape: &Shape, n: u32, tokens: (u64, u64)) -> Reply {
        answer(turn, shape, n, tokens)
    }

    /// OpenAI's error object for a status.
    fn error_body(&self, status: u16, _retry_after_real_ms: Option<u64>, _request_id: &str) -> Value {
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
}

/// A tool message's own `error` field, which harnesses add to the Chat shape (tau2's
/// `error: true`, Inspect's `error {type, message}`): the structural flag when it is set.
pub fn error_flag(error: Option<&Value>) -> Option<(bool, &'static str)> {
    match error? {
        Value::Bool(true) => Some((true, "tool message `error: true`")),
        Value::Bool(false) => Some((false, "tool message `error: false`")),
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::Object(o) if o.is_empty() => None,
        _ => Some((true, "tool message `error` set")),
    }
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

pub(super) fn openai_error(message: String, param: Option<String>) -> Violation {
    Violation {
        body: json!({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": null}}),
    }
}

fn ids_of(calls: Option<&Value>) -> Vec<String> {
    calls
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

fn answer(turn: &Turn, shape: &Shape, n: u32, tokens: (u64, u64)) -> Reply {
    let (reply, (tin, tout)) = (turn, tokens);
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
        return Reply::json(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_unanswered_call_gets_the_verified_text() {
        let body = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_W353ADYhbga77VOI65B7MIsL", "type": "function", "function": {"name": "a", "arguments": "{}"}},
                {"id": "call_IFx8fBJ6Oiz1XKIztWbsf9QX", "type": "function", "function": {"name": "a", "arguments": "{}"}}]},
            {"role": "user", "content": "well?"}
        ]});
        let v = OpenAiChat.pairing(&body, "r").unwrap();
        assert_eq!(
            v.body["error"]["message"],
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_W353ADYhbga77VOI65B7MIsL, call_IFx8fBJ6Oiz1XKIztWbsf9QX"
        );
        assert_eq!(v.body["error"]["param"], "messages.[2].role");
        assert_eq!(v.body["error"]["type"], "invalid_request_error");
        assert!(v.body["error"]["code"].is_null());
    }

    #[test]
    fn openai_orphan_and_missing_id() {
        let v = OpenAiChat.pairing(&json!({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "c", "content": "r"}]}), "r").unwrap();
        assert_eq!(
            v.body["error"]["message"],
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
        );
        assert_eq!(v.body["error"]["param"], "messages.[1].role");
        let v = OpenAiChat.pairing(&json!({"messages": [{"role": "tool", "content": "r"}]}), "r").unwrap();
        assert_eq!(
            v.body["error"]["message"],
            "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'."
        );
        assert_eq!(v.body["error"]["param"], "messages.[0].tool_call_id");
    }
}
