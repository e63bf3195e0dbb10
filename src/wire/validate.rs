//! Request validation like the real APIs (the book: testing an agent): every tool call answered in
//! the next turn, results first (Anthropic), pairing rules for Responses and Gemini. A violation
//! gets the provider's real status and error body, byte for byte where the text is verified.

use serde_json::{Value, json};

use crate::envelope::Format;
use crate::trace::import::gemini::field;

const CALL: (&str, &str) = ("functionCall", "function_call");
const RESPONSE: (&str, &str) = ("functionResponse", "function_response");

/// A rejected request: the provider's error body (always HTTP 400 here).
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    pub body: Value,
}

fn openai_error(message: String, param: Option<String>) -> Violation {
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

/// OpenAI Chat Completions (also Gemini's OpenAI-compatible endpoint).
pub fn openai_chat(body: &Value) -> Option<Violation> {
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

/// OpenAI Responses: `function_call` and `function_call_output` paired on `call_id`.
pub fn openai_responses(body: &Value) -> Option<Violation> {
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

/// Anthropic Messages.
pub fn anthropic(body: &Value, request_id: &str) -> Option<Violation> {
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

/// Gemini generateContent.
pub fn gemini(body: &Value) -> Option<Violation> {
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

/// A body that is not JSON, in the provider's words. (The OpenAI text is its documented one;
/// the others follow each provider's error shape with the parser's message.)
pub fn not_json(format: Format, err: &str) -> Violation {
    match format {
        Format::Anthropic => anthropic_error(format!("Error parsing JSON body: {err}")),
        Format::Gemini => gemini_error(format!("Invalid JSON payload received. {err}")),
        _ => openai_error(
            "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)".into(),
            None,
        ),
    }
}

fn anthropic_error(message: String) -> Violation {
    Violation { body: json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}) }
}

fn gemini_error(message: String) -> Violation {
    Violation { body: json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}) }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a decimal",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The request's own shape: an object with the conversation list the API requires, made of
/// objects. A malformed request gets the provider's 400 and never a model turn.
pub fn shape(format: Format, body: &Value) -> Option<Violation> {
    let (key, required) = match format {
        Format::OpenAiChat | Format::GeminiOpenAi => ("messages", true),
        Format::OpenAiResponses => ("input", body.get("previous_response_id").is_none()),
        Format::Anthropic => ("messages", true),
        Format::Gemini => ("contents", true),
    };
    let Some(obj) = body.as_object() else {
        return Some(match format {
            Format::Anthropic => anthropic_error(format!("Input should be a valid dictionary, got {}", kind(body))),
            Format::Gemini => {
                gemini_error(format!("Invalid JSON payload received. Expected an object, got {}.", kind(body)))
            }
            _ => openai_error(
                format!("Invalid type for request body: expected an object, but got {} instead.", kind(body)),
                None,
            ),
        });
    };
    let list = obj.get(key);
    let problem = match list {
        None if required => Some(None),
        None => None,
        // Responses also takes a plain string as input.
        Some(Value::String(_)) if format == Format::OpenAiResponses => None,
        Some(Value::Array(a)) => a.iter().position(|m| !m.is_object()).map(|i| Some((i, &a[i]))),
        Some(other) => Some(Some((usize::MAX, other))),
    }?;
    Some(match (format, problem) {
        (Format::Anthropic, None) => anthropic_error(format!("{key}: Field required")),
        (Format::Anthropic, Some((usize::MAX, _))) => anthropic_error(format!("{key}: Input should be a valid list")),
        (Format::Anthropic, Some((i, _))) => anthropic_error(format!("{key}.{i}: Input should be a valid dictionary")),
        (Format::Gemini, None) => gemini_error(format!("* GenerateContentRequest.{key}: {key} is not specified\n")),
        (Format::Gemini, Some((_, v))) => gemini_error(format!(
            "Invalid value at '{key}' (type.googleapis.com/google.ai.generativelanguage.v1beta.Content), {v}"
        )),
        (_, None) => {
            let mut v = openai_error(format!("Missing required parameter: '{key}'."), Some(key.into()));
            v.body["error"]["code"] = json!("missing_required_parameter");
            v
        }
        (_, Some((usize::MAX, v))) => {
            let mut e = openai_error(
                format!("Invalid type for '{key}': expected an array of objects, but got {} instead.", kind(v)),
                Some(key.into()),
            );
            e.body["error"]["code"] = json!("invalid_type");
            e
        }
        (_, Some((i, v))) => {
            let mut e = openai_error(
                format!("Invalid type for '{key}[{i}]': expected an object, but got {} instead.", kind(v)),
                Some(format!("{key}[{i}]")),
            );
            e.body["error"]["code"] = json!("invalid_type");
            e
        }
    })
}

pub fn validate(format: Format, body: &Value, request_id: &str) -> Option<Violation> {
    if let Some(v) = shape(format, body) {
        return Some(v);
    }
    match format {
        Format::OpenAiChat | Format::GeminiOpenAi => openai_chat(body),
        Format::OpenAiResponses => openai_responses(body),
        Format::Anthropic => anthropic(body, request_id),
        Format::Gemini => gemini(body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_requests_get_the_providers_400() {
        let v = validate(Format::OpenAiChat, &json!({"model": "m", "messages": 5}), "r").unwrap();
        assert_eq!(
            v.body["error"]["message"],
            "Invalid type for 'messages': expected an array of objects, but got an integer instead."
        );
        let v = validate(Format::Anthropic, &json!([]), "r").unwrap();
        assert_eq!(v.body["error"]["type"], "invalid_request_error");
        assert!(validate(Format::Anthropic, &json!({"model": "m"}), "r").is_some(), "messages: Field required");
        assert!(validate(Format::Gemini, &json!({"contents": "x"}), "r").is_some());
        assert!(validate(Format::OpenAiResponses, &json!({"model": "m", "input": "hello"}), "r").is_none());
        assert!(validate(Format::OpenAiChat, &json!({"model": "m", "messages": [1]}), "r").is_some());
    }

    #[test]
    fn openai_unanswered_call_gets_the_verified_text() {
        let body = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_W353ADYhbga77VOI65B7MIsL", "type": "function", "function": {"name": "a", "arguments": "{}"}},
                {"id": "call_IFx8fBJ6Oiz1XKIztWbsf9QX", "type": "function", "function": {"name": "a", "arguments": "{}"}}]},
            {"role": "user", "content": "well?"}
        ]});
        let v = openai_chat(&body).unwrap();
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
        let v = openai_chat(&json!({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "c", "content": "r"}]})).unwrap();
        assert_eq!(
            v.body["error"]["message"],
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
        );
        assert_eq!(v.body["error"]["param"], "messages.[1].role");
        let v = openai_chat(&json!({"messages": [{"role": "tool", "content": "r"}]})).unwrap();
        assert_eq!(
            v.body["error"]["message"],
            "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'."
        );
        assert_eq!(v.body["error"]["param"], "messages.[0].tool_call_id");
    }

    #[test]
    fn responses_pairing() {
        let v = openai_responses(&json!({"input": [{"type": "function_call", "call_id": "call_eM9vRKidFzbpz05S7hlNJBHa", "name": "a", "arguments": "{}"}]})).unwrap();
        assert_eq!(
            v.body,
            json!({"error": {"message": "No tool output found for function call call_eM9vRKidFzbpz05S7hlNJBHa.", "type": "invalid_request_error", "param": "input", "code": null}})
        );
        let v = openai_responses(&json!({"input": [{"type": "function_call_output", "call_id": "call_uelfkqtHfJDC4Btqeoozq82e", "output": "x"}]})).unwrap();
        assert_eq!(
            v.body["error"]["message"],
            "No tool call found for function call output with call_id call_uelfkqtHfJDC4Btqeoozq82e."
        );
    }

    #[test]
    fn anthropic_texts() {
        let body = json!({"messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01N82CRmSxsFBkxD4tYG2md8", "name": "a", "input": {}}]},
            {"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "tool_result", "tool_use_id": "toolu_01N82CRmSxsFBkxD4tYG2md8", "content": "r"}]}
        ]});
        let v = anthropic(&body, "req_1").unwrap();
        assert_eq!(
            v.body["error"]["message"],
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01N82CRmSxsFBkxD4tYG2md8. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
        );
        let body = json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_019ETtGZEhTBXgWPVsdVnXMh", "content": "r"}]}]});
        assert_eq!(
            anthropic(&body, "r").unwrap().body["error"]["message"],
            "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_019ETtGZEhTBXgWPVsdVnXMh. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
        );
    }

    #[test]
    fn anthropic_tool_use_shape_texts() {
        let msg = |blocks: Value| json!({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": blocks}]});
        let tu = |id: &str, input: Value| json!({"type": "tool_use", "id": id, "name": "a", "input": input});
        let text = |b: Value| anthropic(&msg(b), "r").unwrap().body["error"]["message"].as_str().unwrap().to_owned();
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

    #[test]
    fn gemini_texts() {
        let call = json!({"role": "model", "parts": [{"functionCall": {"name": "a", "args": {}}}]});
        let resp = json!({"role": "user", "parts": [{"functionResponse": {"name": "a", "response": {}}}]});
        let user = json!({"role": "user", "parts": [{"text": "x"}]});
        assert_eq!(
            gemini(&json!({"contents": [user, resp]})).unwrap().body["error"]["message"],
            "Please ensure that function response turn comes immediately after a function call turn."
        );
        assert_eq!(
            gemini(&json!({"contents": [call]})).unwrap().body["error"]["message"],
            "Please ensure that function call turn comes immediately after a user turn or after a function response turn."
        );
        assert_eq!(
            gemini(&json!({"contents": [user, call, user]})).unwrap().body["error"]["message"],
            "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."
        );
        assert!(gemini(&json!({"contents": [user, call, resp]})).is_none());
        assert_eq!(gemini(&json!({"contents": [user, call, resp]})), None);
    }
}
