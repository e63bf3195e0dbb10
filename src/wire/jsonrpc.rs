//! JSON-RPC 2.0 as the MCP endpoints read it, over HTTP and stdio alike: a message checked
//! before the SDK sees it, and the error answered instead (with the request's id where it has
//! one, `null` where the text is not JSON).

use serde_json::{Value, json};

/// A JSON-RPC error message.
pub fn jsonrpc_error(id: Value, code: i32, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// One JSON-RPC message (a POST body, a line over stdio), or the error to answer instead:
/// `-32700` with `id: null` for text that is not JSON, `-32600` for JSON that is not a request,
/// notification or response, `-32602` with the request's id for `params` that are not an object
/// (MCP names every parameter).
pub fn check(text: &[u8]) -> Result<Value, Value> {
    let v: Value = serde_json::from_slice(text)
        .map_err(|e| jsonrpc_error(Value::Null, -32700, format!("Parse error: the message is not JSON ({e})")))?;
    let Some(o) = v.as_object() else {
        return Err(jsonrpc_error(
            Value::Null,
            -32600,
            "Invalid Request: one JSON-RPC message object at a time (no batches)",
        ));
    };
    let id_ok = o.get("id").is_none_or(|id| id.is_string() || id.is_i64() || id.is_u64());
    let request = o.get("method").is_some_and(Value::is_string);
    let response = o.contains_key("id") && (o.contains_key("result") || o.contains_key("error"));
    if o.get("jsonrpc") != Some(&json!("2.0")) || !id_ok || !(request || response) {
        let id = if id_ok { o.get("id").cloned().unwrap_or_default() } else { Value::Null };
        return Err(jsonrpc_error(
            id,
            -32600,
            "Invalid Request: a JSON-RPC 2.0 message needs \"jsonrpc\": \"2.0\", a string \"method\" (or a \
             response's \"result\"/\"error\") and a string or integer \"id\"",
        ));
    }
    if let Some(id) = o.get("id").filter(|_| request)
        && o.get("params").is_some_and(|p| !(p.is_object() || p.is_null()))
    {
        return Err(jsonrpc_error(id.clone(), -32602, "Invalid params: \"params\" must be an object"));
    }
    Ok(v)
}

/// A checked message as the SDK reads it; for a request the SDK cannot read, the error to answer
/// with its id (`-32602` if it has `params`, which are then of the wrong shape; `-32600`
/// otherwise); for a notification or response, nothing to answer.
pub fn read_message(v: Value) -> Result<rmcp::model::ClientJsonRpcMessage, Option<Value>> {
    let request = v.get("method").and(v.get("id")).cloned();
    let has_params = v.get("params").is_some_and(|p| !p.is_null());
    serde_json::from_value(v).map_err(|e| {
        request.map(|id| {
            if has_params {
                jsonrpc_error(id, -32602, format!("Invalid params: {e}"))
            } else {
                jsonrpc_error(id, -32600, format!("Invalid Request: {e}"))
            }
        })
    })
}
