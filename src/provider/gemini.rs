//! Gemini `generateContent`: `functionCall` parts in model turns, `functionResponse` parts
//! (with `response.error` as the failure signal; ids may be missing) in user turns. The API
//! parses protobuf JSON, so every field may also come in its snake_case name (LiteLLM sends
//! `function_call`); both are read. A tool result is a `functionResponse` part whose
//! `response` holds `output` (a success) or `error` (a failure). The mock answers with
//! `candidates` (streamed: a text in two SSE events, calls in one), and fails with Google's
//! RPC error object, a `RetryInfo` detail carrying the wait.

use serde_json::{Value, json};

use super::choice::{mode, str_at};
use super::{
    Choice, Provider, Reply, RequestProblem, ResultPart, ResultShape, Shape, ToolChoice, Turn, Violation, sse,
};
use crate::exchange::{Args, ToolDef};
use crate::exchange::{CallItem, ImportError, Item, with_usage};

const CALL: (&str, &str) = ("functionCall", "function_call");
const RESPONSE: (&str, &str) = ("functionResponse", "function_response");

pub struct Gemini;

impl Provider for Gemini {
    /// `/models/MODEL:generateContent`, and `:streamGenerateContent` for a stream.
    fn serves(&self, _version: &str, rest: &str) -> Option<bool> {
        let (_, action) = rest.strip_prefix("/models/")?.rsplit_once(':')?;
        match action {
            "generateContent" => Some(false),
            "streamGenerateContent" => Some(true),
            _ => None,
        }
    }

    fn conversation_key(&self) -> &'static str {
        "contents"
    }

    fn items(&self, list: &[Value], path: &str) -> Result<Vec<Item>, ImportError> {
        let contents = list;
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

    fn response(&self, body: &Value) -> Option<Item> {
        let parts = body.get("candidates")?.get(0)?.get("content")?.get("parts")?.as_array()?;
        Some(with_usage(
            model(parts),
            field(body, "usageMetadata", "usage_metadata"),
            "promptTokenCount",
            "candidatesTokenCount",
        ))
    }

    fn tools(&self, body: &Value) -> Vec<ToolDef> {
        let mut out = Vec::new();
        for t in body.get("tools").and_then(Value::as_array).into_iter().flatten() {
            for f in field(t, "functionDeclarations", "function_declarations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
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

    fn result_shape(&self) -> ResultShape {
        ResultShape::FunctionResponse { prefix: r#"{"functionResponse":{"id":"fc_"# }
    }

    /// A `functionResponse` part sits in a user turn.
    fn wrap_message(&self, item: &str) -> String {
        format!(r#"{{"role":"user","parts":[{item}]}}"#)
    }

    fn result_nodes<'a>(&self, list: &'a mut [Value]) -> Vec<(Option<String>, &'a mut Value)> {
        list.iter_mut()
            .filter_map(|m| m.get_mut("parts").and_then(Value::as_array_mut))
            .flatten()
            .filter_map(|p| {
                let id = field(p, "functionResponse", "function_response")?
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                Some((id, p))
            })
            .collect()
    }

    fn result_part<'a>(&self, message: &'a Value) -> Option<ResultPart<'a>> {
        let part = if message.get("functionResponse").is_some() {
            message
        } else {
            message["parts"].as_array()?.iter().find(|p| p.get("functionResponse").is_some())?
        };
        Some(ResultPart::Response(&part["functionResponse"]["response"]))
    }

    fn error_mark(&self) -> &'static str {
        "response.error"
    }

    fn call_id_prefix(&self) -> &'static str {
        "fc_"
    }

    /// The request's `toolConfig.functionCallingConfig` (`mode`, `allowedFunctionNames`).
    fn tool_choice(&self, body: &Value) -> Choice {
        let config = ["/toolConfig/functionCallingConfig", "/tool_config/function_calling_config"]
            .iter()
            .find_map(|p| body.pointer(p));
        let choice = config.and_then(|c| str_at(c, "/mode")).map_or(ToolChoice::Auto, mode);
        let allowed = config
            .and_then(|c| c.get("allowedFunctionNames").or_else(|| c.get("allowed_function_names")))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect::<Vec<_>>());
        // One allowed name under ANY is a named call.
        let choice = match (&choice, allowed.as_deref()) {
            (ToolChoice::Required, Some([one])) => ToolChoice::Named(one.clone()),
            _ => choice,
        };
        Choice { choice, allowed, one_call_per_turn: false }
    }

    fn request_error(&self, problem: RequestProblem<'_>) -> Violation {
        let message = match problem {
            RequestProblem::NotJson(err) => format!("Invalid JSON payload received. {err}"),
            RequestProblem::NotAnObject(what) => {
                format!("Invalid JSON payload received. Expected an object, got {what}.")
            }
            RequestProblem::Missing(key) => format!("* GenerateContentRequest.{key}: {key} is not specified\n"),
            RequestProblem::NotAList { key, value } | RequestProblem::NotAnObjectAt { key, value, .. } => format!(
                "Invalid value at '{key}' (type.googleapis.com/google.ai.generativelanguage.v1beta.Content), {value}"
            ),
        };
        Violation { body: json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}) }
    }

    /// Gemini generateContent.
    fn pairing(&self, body: &Value, _request_id: &str) -> Option<Violation> {
        let contents = body.get("contents")?.as_array()?;
        let err = |message: &str| Violation {
            body: json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}),
        };
        let count = |c: &Value, camel: &str, snake: &str| {
            c.get("parts")
                .and_then(Value::as_array)
                .map_or(0, |ps| ps.iter().filter(|p| field(p, camel, snake).is_some()).count())
        };
        for (i, c) in contents.iter().enumerate() {
            let calls = count(c, CALL.0, CALL.1);
            let responses = count(c, RESPONSE.0, RESPONSE.1);
            let prev = i.checked_sub(1).map(|p| &contents[p]);
            if responses > 0 && prev.is_none_or(|p| count(p, CALL.0, CALL.1) == 0) {
                return Some(err(
                    "Please ensure that function response turn comes immediately after a function call turn.",
                ));
            }
            if calls > 0 {
                let ok_before = prev.is_some_and(|p| p.get("role").and_then(Value::as_str).unwrap_or("user") == "user");
                if !ok_before {
                    return Some(err(
                        "Please ensure that function call turn comes immediately after a user turn or after a function response turn.",
                    ));
                }
                if let Some(next) = contents.get(i + 1)
                    && count(next, RESPONSE.0, RESPONSE.1) != calls
                {
                    return Some(err(
                        "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.",
                    ));
                }
            }
        }
        None
    }

    fn answer(&self, turn: &Turn, shape: &Shape, n: u32, tokens: (u64, u64)) -> Reply {
        answer(turn, shape, n, tokens)
    }

    fn error_body(&self, status: u16, retry_after_real_ms: Option<u64>, _request_id: &str) -> Value {
        let (rpc, message) = match status {
            400 | 422 => ("INVALID_ARGUMENT", "Request contains an invalid argument."),
            401 => ("UNAUTHENTICATED", "API key not valid. Please pass a valid API key."),
            403 => ("PERMISSION_DENIED", "The caller does not have permission."),
            404 => ("NOT_FOUND", "Requested entity was not found."),
            429 => {
                ("RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing details.")
            }
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
}

/// A protobuf-JSON field by its camelCase name or its snake_case one.
pub fn field<'a>(v: &'a Value, camel: &str, snake: &str) -> Option<&'a Value> {
    v.get(camel).or_else(|| v.get(snake))
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

fn answer(turn: &Turn, shape: &Shape, n: u32, tokens: (u64, u64)) -> Reply {
    let (reply, (tin, tout), model, stream) = (turn, tokens, shape.model.as_str(), shape.stream);
    let parts: Vec<Value> = match reply {
        Turn::Final { text } => vec![json!({"text": text})],
        Turn::Calls(c) => {
            c.iter().map(|(id, name, args)| json!({"functionCall": {"id": id, "name": name, "args": args}})).collect()
        }
    };
    let body = json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": tin, "candidatesTokenCount": tout, "totalTokenCount": tin + tout},
        "modelVersion": model, "responseId": format!("tracefault{n:06}")});
    if !stream {
        return Reply::json(200, &body);
    }
    // A streamed text comes in pieces, as Gemini sends it: the first half, then the rest with
    // the finish reason and the usage.
    if let Turn::Final { text } = reply
        && let Some(half) = (text.len() / 2..text.len()).find(|&i| i > 0 && text.is_char_boundary(i))
    {
        let first = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": &text[..half]}]}, "index": 0}],
            "usageMetadata": {"promptTokenCount": tin, "totalTokenCount": tin},
            "modelVersion": model, "responseId": format!("tracefault{n:06}")});
        let mut rest = body;
        rest["candidates"][0]["content"]["parts"] = json!([{"text": &text[half..]}]);
        return sse(vec![(None, first), (None, rest)], "");
    }
    sse(vec![(None, body)], "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemini_texts() {
        let call = json!({"role": "model", "parts": [{"functionCall": {"name": "a", "args": {}}}]});
        let resp = json!({"role": "user", "parts": [{"functionResponse": {"name": "a", "response": {}}}]});
        let user = json!({"role": "user", "parts": [{"text": "x"}]});
        assert_eq!(
            Gemini.pairing(&json!({"contents": [user, resp]}), "r").unwrap().body["error"]["message"],
            "Please ensure that function response turn comes immediately after a function call turn."
        );
        assert_eq!(
            Gemini.pairing(&json!({"contents": [call]}), "r").unwrap().body["error"]["message"],
            "Please ensure that function call turn comes immediately after a user turn or after a function response turn."
        );
        assert_eq!(
            Gemini.pairing(&json!({"contents": [user, call, user]}), "r").unwrap().body["error"]["message"],
            "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."
        );
        assert!(Gemini.pairing(&json!({"contents": [user, call, resp]}), "r").is_none());
        assert_eq!(Gemini.pairing(&json!({"contents": [user, call, resp]}), "r"), None);
    }
}
