//! The scenario's tools over the Model Context Protocol, on the official Rust SDK (`rmcp`):
//! streamable HTTP at `/mcp` (`/agents/K/mcp` for agent K) and stdio (`tracefault mcp
//! --stdio`), protocol version negotiation by the SDK. A `tools/call` meets the same mocks as
//! `POST /tools/NAME` (the fleet's door, the seeded injector, the faults' memory); the answer
//! takes the shape of the server's MCP strategy: `isError` with a sentence (`mcp-text`),
//! `isError` with the five fields as text and `structuredContent` (`mcp-envelope`), or a
//! JSON-RPC error (`jsonrpc-error`: -32602 for bad arguments, -32603 otherwise). A fault marked
//! `transport = true` is the endpoint's own HTTP answer before the SDK sees the message: a status
//! with `retry-after` (429, 503, 529…) or a dropped connection (`reset`); `session_expired` is
//! always the endpoint's: 404, and the request's session is closed.

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use super::reply::Reply;
use super::schema::tool_list;
use super::server::{Shared, tool_call};
use super::tools::{self, Called};
use crate::engine::strategy::Strategy;
use crate::envelope::render::{MORE_AVAILABLE, error_text, truncated};
use crate::envelope::{Encoding, ErrorKind, ToolError};
use crate::error::Error;
use crate::fault::{ErrorClass, Fault};
use crate::scenario::Scenario;

/// How the mock MCP server hands a failed call back: the encoding of one of the MCP strategies.
pub fn encoding_of(strategy: &str) -> Result<Encoding, Error> {
    Strategy::mcp_presets().into_iter().find(|s| s.name == strategy).map(|s| s.encoding).ok_or_else(|| {
        let names: Vec<String> = Strategy::mcp_presets().into_iter().map(|s| s.name).collect();
        Error::Usage(format!("--mcp-strategy: one of {}, got {strategy:?}", names.join(", ")))
    })
}

/// What the HTTP layer decided for one `tools/call` before the SDK answers it (carried in the
/// request's extensions).
#[derive(Clone)]
struct Decided(Arc<Result<Called, Reply>>);

/// The MCP server of a scenario's tools.
#[derive(Clone)]
pub struct McpTools {
    tools: Arc<Vec<Tool>>,
    encoding: Encoding,
    /// Over stdio, the server decides calls itself (as this agent); over HTTP the HTTP layer
    /// has decided every call before the server sees it.
    direct: Option<(Arc<Shared>, u32)>,
}

impl McpTools {
    pub fn new(scenario: &Scenario, encoding: Encoding, direct: Option<(Arc<Shared>, u32)>) -> McpTools {
        let list = tool_list(&scenario.task);
        let tools = list["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                let schema = match &t["input_schema"] {
                    Value::Object(o) => o.clone(),
                    _ => Map::from_iter([("type".to_owned(), json!("object"))]),
                };
                Tool::new(
                    Cow::Owned(t["name"].as_str().unwrap_or_default().to_owned()),
                    Cow::Owned(t["description"].as_str().unwrap_or_default().to_owned()),
                    Arc::new(schema),
                )
            })
            .collect();
        McpTools { tools: Arc::new(tools), encoding, direct }
    }

    /// A call decided here (stdio): through the same door and mocks as over HTTP.
    async fn decide(&self, name: &str, args: Value) -> Result<Called, Reply> {
        let Some((shared, agent)) = &self.direct else {
            return Err(Reply::text(500, "tracefault: an MCP call reached the server undecided"));
        };
        let called = tool_call(shared, *agent, name, Ok(args)).await?;
        if transport_fault(&called) {
            let mut m = shared.lock();
            let w = m.world(*agent).expect("the stdio server's own agent");
            return Err(tools::http_reply(w, &called));
        }
        Ok(called)
    }
}

impl ServerHandler for McpTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("tracefault", env!("CARGO_PKG_VERSION")))
            .with_instructions("The scenario's tools, served by tracefault's mocks with seeded faults.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let decided = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<Decided>())
            .map(|d| d.0.clone());
        let outcome = match decided {
            Some(d) => d.as_ref().clone(),
            None => {
                if !self.tools.iter().any(|t| t.name == request.name) {
                    return Err(unknown_tool(&self.tools, &request.name));
                }
                let args = Value::Object(request.arguments.clone().unwrap_or_default());
                self.decide(&request.name, args).await
            }
        };
        match outcome {
            Ok(called) => answer(&called, self.encoding).map(CallToolResponse::from),
            Err(reply) if reply.status == 404 => Err(unknown_tool(&self.tools, &request.name)),
            Err(reply) => Err(refusal(&reply)),
        }
    }
}

/// `-32602` naming the tool and the tools there are.
fn unknown_tool(tools: &[Tool], name: &str) -> ErrorData {
    let known: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    ErrorData::invalid_params(
        format!("Unknown tool: {name:?} (this server has {})", known.join(", ")),
        Some(json!({"tool": name})),
    )
}

/// An HTTP refusal (a fleet limit, a transport fault) where there is no HTTP to send it on
/// (stdio): a JSON-RPC error with the status and the wait.
fn refusal(reply: &Reply) -> ErrorData {
    let wait = reply.headers.iter().find(|(k, _)| *k == "retry-after-ms").map(|(_, v)| v.clone());
    let body = String::from_utf8_lossy(reply_bytes(reply));
    ErrorData::internal_error(
        format!("HTTP {}: {body}", reply.status),
        Some(json!({"status": reply.status, "retry_after_ms": wait.and_then(|w| w.parse::<u64>().ok())})),
    )
}

/// A call's answer as an MCP tool result, or a JSON-RPC error under `jsonrpc-error`.
pub fn answer(called: &Called, encoding: Encoding) -> Result<CallToolResult, ErrorData> {
    let body = called.result.to_string();
    let Some(fault) = &called.fault else {
        return Ok(CallToolResult::success(vec![ContentBlock::text(body)]));
    };
    match fault {
        Fault::TruncatedJson => return Ok(CallToolResult::success(vec![ContentBlock::text(truncated(&body))])),
        Fault::CodeFencedJson => {
            return Ok(CallToolResult::success(vec![ContentBlock::text(format!("```json\n{body}\n```"))]));
        }
        Fault::Ambiguous if encoding == Encoding::Envelope => {
            let stated = json!({"data": called.result, "complete": true});
            return Ok(CallToolResult::success(vec![ContentBlock::text(stated.to_string())]));
        }
        Fault::Ambiguous => {
            let more = json!({"data": called.result, "note": MORE_AVAILABLE});
            return Ok(CallToolResult::success(vec![ContentBlock::text(more.to_string())]));
        }
        _ => {}
    }
    let err = ToolError {
        kind: ErrorKind::Fault(fault),
        class: fault.class(),
        tool: &called.tool,
        attempts: 1,
        retry_after_ms: called.retry_after_ms,
        body: &body,
    };
    match encoding {
        Encoding::JsonRpcError => {
            let message = tools::message(&called.tool, fault, called.retry_after_ms, &body);
            let data = serde_json::from_str::<Value>(&error_text(&err, Encoding::Envelope)).ok();
            Err(if fault.class() == ErrorClass::BadArgs {
                ErrorData::invalid_params(message, data)
            } else {
                ErrorData::internal_error(message, data)
            })
        }
        Encoding::Envelope => {
            let five = serde_json::from_str::<Value>(&error_text(&err, Encoding::Envelope)).unwrap_or(Value::Null);
            Ok(CallToolResult::structured_error(five))
        }
        other => Ok(CallToolResult::error(vec![ContentBlock::text(error_text(&err, other))])),
    }
}

/// Whether a fault is the transport's on streamable HTTP (`transport = true`): an HTTP status
/// with no JSON-RPC answer, or a dropped connection.
fn transport_fault(called: &Called) -> bool {
    called.transport && called.fault.is_some()
}

/// The streamable HTTP service behind `/mcp` (ended by its cancellation token), and its
/// sessions (a `transport = true` 404 expires the caller's).
pub struct HttpService {
    service: StreamableHttpService<McpTools, LocalSessionManager>,
    sessions: Arc<LocalSessionManager>,
    encoding: Encoding,
}

pub fn http_service(
    scenario: &Scenario,
    encoding: Encoding,
    stop: tokio_util::sync::CancellationToken,
    hosts: Vec<String>,
) -> HttpService {
    let tools = McpTools::new(scenario, encoding, None);
    let config = StreamableHttpServerConfig::default().with_cancellation_token(stop).with_allowed_hosts(hosts);
    let sessions = Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(move || Ok(tools.clone()), sessions.clone(), config);
    HttpService { service, sessions, encoding }
}

/// A request at `/mcp`: a `tools/call` is decided here (a transport fault answered as HTTP),
/// everything else goes straight to the SDK's service.
pub async fn http(
    shared: &Arc<Shared>,
    service: &HttpService,
    agent: u32,
    mut parts: axum::http::request::Parts,
    body: axum::body::Bytes,
) -> Response {
    if parts.method == axum::http::Method::POST
        && let Some(reply) = malformed(&body)
    {
        return super::server::respond(reply).await;
    }
    if let Some((id, name, args)) = tool_call_of(&body) {
        let request = serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null);
        let outcome = tool_call(shared, agent, &name, Ok(args)).await;
        if let Some(w) = shared.lock().world(agent) {
            w.log_mcp(request);
            w.log_mcp(logged_answer(&id, &outcome, service.encoding));
        }
        let transport = match &outcome {
            Ok(called) if transport_fault(called) => {
                let mut m = shared.lock();
                let w = m.world(agent).expect("an agent of the fleet, checked above");
                Some(tools::http_reply(w, called))
            }
            Err(reply) if reply.status != 404 => Some(reply.clone()),
            _ => None,
        };
        if let Some(reply) = transport {
            // A 404 on a request with a session id is how a session expires: the session is
            // gone for every later request too, and the client must initialise again.
            if matches!(&outcome, Ok(c) if c.fault == Some(Fault::SessionExpired))
                && let Some(id) = parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok())
            {
                use rmcp::transport::streamable_http_server::SessionManager;
                let _ = service.sessions.close_session(&Arc::from(id)).await;
            }
            return super::server::respond(reply).await;
        }
        parts.extensions.insert(Decided(Arc::new(outcome)));
    }
    let req = Request::from_parts(parts, Body::from(body));
    let mut service = service.service.clone();
    match tower_service::Service::call(&mut service, req).await {
        Ok(r) => r.map(Body::new),
        Err(e) => match e {},
    }
}

/// A POST body that is not one JSON-RPC message: 400 with the spec's error (`-32700` for text
/// that is not JSON, `-32600` for JSON that is not a request, notification or response).
pub fn malformed(body: &[u8]) -> Option<Reply> {
    let error = |code: i32, message: String| {
        Some(Reply::json(400, &json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})))
    };
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return error(-32700, format!("Parse error: the body is not JSON ({e})")),
    };
    let Some(o) = v.as_object() else {
        return error(-32600, "Invalid Request: one JSON-RPC message object per POST (no batches)".to_owned());
    };
    let id_ok = o.get("id").is_none_or(|id| id.is_string() || id.is_i64() || id.is_u64());
    let request = o.get("method").is_some_and(Value::is_string);
    let response = o.contains_key("id") && (o.contains_key("result") || o.contains_key("error"));
    if o.get("jsonrpc") != Some(&json!("2.0")) || !id_ok || !(request || response) {
        return error(
            -32600,
            "Invalid Request: a JSON-RPC 2.0 message needs \"jsonrpc\": \"2.0\", a string \"method\" (or a \
             response's \"result\"/\"error\") and a string or integer \"id\""
                .to_owned(),
        );
    }
    None
}

/// The answer to `tools/call` `id` as the exec log records it: the JSON-RPC message the SDK
/// sends, or, for an answer of the endpoint's own, the HTTP status (0 for a dropped
/// connection) and a stand-in error message (`-32000`, which no SDK sent).
fn logged_answer(id: &Value, outcome: &Result<Called, Reply>, encoding: Encoding) -> Value {
    let http = |status: u16, text: String| json!({"http_status": status, "message": {"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": text}}});
    match outcome {
        Ok(called) if transport_fault(called) => match &called.fault {
            Some(Fault::Reset) => http(0, "the connection was dropped".into()),
            Some(f) => http(f.status().unwrap_or(404), tools::message(&called.tool, f, called.retry_after_ms, "")),
            None => Value::Null,
        },
        Ok(called) => match answer(called, encoding) {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        },
        Err(reply) if reply.status == 404 => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "Unknown tool"}})
        }
        Err(reply) => http(reply.status, String::from_utf8_lossy(reply_bytes(reply)).into_owned()),
    }
}

fn reply_bytes(reply: &Reply) -> &[u8] {
    match &reply.body {
        super::reply::Body::Bytes { bytes, .. } => bytes,
        super::reply::Body::Reset => b"the connection was dropped",
    }
}

/// The id, tool and arguments of a JSON-RPC `tools/call` request (one message, not a batch).
fn tool_call_of(body: &[u8]) -> Option<(Value, String, Value)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    if v["method"] != "tools/call" || v.get("id").is_none() {
        return None;
    }
    let name = v["params"]["name"].as_str()?.to_owned();
    let args = match &v["params"]["arguments"] {
        Value::Object(o) => Value::Object(o.clone()),
        _ => Value::Object(Map::new()),
    };
    Some((v["id"].clone(), name, args))
}

/// Serves the scenario's tools over stdio as agent 0 of run 0 until the client closes stdin.
pub async fn serve_stdio(shared: Arc<Shared>, encoding: Encoding) -> Result<(), Error> {
    use rmcp::ServiceExt;
    let scenario = shared.lock().scenario().clone();
    let server = McpTools::new(&scenario, encoding, Some((shared, 0)));
    let running = server
        .serve(rmcp::transport::io::stdio())
        .await
        .map_err(|e| Error::Usage(format!("mcp --stdio: the client's initialize failed: {e}")))?;
    running.waiting().await.map_err(|e| Error::Usage(format!("mcp --stdio: {e}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn called(fault: Option<Fault>) -> Called {
        Called { tool: "search".into(), result: json!({"hits": 3}), fault, retry_after_ms: None, transport: false }
    }

    #[test]
    fn each_strategy_hands_a_failure_back_its_way() {
        let c = called(Some(Fault::http(500)));
        let text = answer(&c, Encoding::Flag).unwrap();
        assert_eq!(text.is_error, Some(true));
        assert!(text.structured_content.is_none());
        let envelope = answer(&c, Encoding::Envelope).unwrap();
        assert_eq!(envelope.is_error, Some(true));
        let five = envelope.structured_content.unwrap();
        assert_eq!(five["code"], "TRANSPORT");
        assert_eq!(five["retryable"], true);
        let err = answer(&c, Encoding::JsonRpcError).unwrap_err();
        assert_eq!(err.code.0, -32603);
        let bad = answer(&called(Some(Fault::http(400))), Encoding::JsonRpcError).unwrap_err();
        assert_eq!(bad.code.0, -32602);
        assert_eq!(bad.data.unwrap()["code"], "INVALID_ARGS");
        let ok = answer(&called(None), Encoding::JsonRpcError).unwrap();
        assert_eq!(ok.is_error, Some(false));
    }

    #[test]
    fn partial_results_say_more_unless_the_envelope_states_them_complete() {
        let c = called(Some(Fault::Ambiguous));
        let text =
            |r: CallToolResult| serde_json::to_value(&r.content).unwrap()[0]["text"].as_str().unwrap().to_owned();
        assert!(text(answer(&c, Encoding::Flag).unwrap()).contains(MORE_AVAILABLE));
        assert!(text(answer(&c, Encoding::Envelope).unwrap()).contains(r#""complete":true"#));
    }

    #[test]
    fn malformed_messages_get_the_specs_errors() {
        let code = |body: &[u8]| {
            let r = malformed(body)?;
            let super::super::reply::Body::Bytes { bytes, .. } = r.body else { return None };
            serde_json::from_slice::<Value>(&bytes).ok()?["error"]["code"].as_i64()
        };
        assert_eq!(code(b"{not json"), Some(-32700));
        assert_eq!(code(b""), Some(-32700));
        assert_eq!(code(b"[]"), Some(-32600));
        assert_eq!(code(br#"{"jsonrpc":"1.0","id":1,"method":"x"}"#), Some(-32600));
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#), Some(-32600));
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":5}"#), Some(-32600));
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#), None);
        assert_eq!(code(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), None);
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#), None);
    }

    #[test]
    fn only_tool_calls_are_decided_before_the_sdk() {
        let call =
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}"#;
        assert_eq!(tool_call_of(call), Some((json!(3), "search".into(), json!({"q": "x"}))));
        assert_eq!(tool_call_of(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#), None);
        assert_eq!(tool_call_of(br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"s"}}"#), None);
        assert_eq!(tool_call_of(b"not json"), None);
    }
}
