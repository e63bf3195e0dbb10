//! The scenario's tools over the Model Context Protocol, on the official Rust SDK (`rmcp`):
//! streamable HTTP at `/mcp` (`/agents/K/mcp` for agent K) and stdio (`tracefault mcp
//! --stdio`), protocol version negotiation by the SDK. A `tools/call` meets the same mocks as
//! `POST /tools/NAME` (the fleet's door, the seeded injector, the faults' memory); the answer
//! takes the shape of the server's MCP strategy: `isError` with a sentence (`mcp-text`),
//! `isError` with the five fields as text and `structuredContent` (`mcp-envelope`), or a
//! JSON-RPC error (`jsonrpc-error`: -32602 for bad arguments, -32603 otherwise). A fault marked
//! `transport = true` is the endpoint's own HTTP answer before the SDK sees the message: a status
//! with `retry-after` (429, 503, 529…) or a dropped connection (`reset`); `session_expired` is
//! always the endpoint's: 404, and the request's session is closed. A `schema_drift` fault
//! sends `notifications/tools/list_changed` and revises the tool in `tools/list`; its calls
//! fail as bad arguments until the client lists the tools again.
//!
//! A call meets the mocks only once the SDK has let it through (its content type, session and
//! parameters checked): a request the endpoint refuses uses no fault attempt. `/mcp` refuses a
//! present `Origin` that is not this machine's (403). Messages the SDK cannot read get the
//! JSON-RPC answers: `-32700` with `id: null` for text that is not JSON, `-32600` for JSON that
//! is not a message, `-32602` with the request's id for parameters of the wrong shape.

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest, CustomResult, ErrorCode,
    ErrorData, Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use super::dispatch::{Shared, tool_call};
use super::jsonrpc::{check, read_message};
use super::mcp_upstream::RealServer;
use super::schema::tool_list;
use super::tools::{self, Called};
use crate::engine::Scenario;
use crate::engine::strategy::Strategy;
use crate::engine::task::Task;
use crate::envelope::render::{error_text, partial_text, truncated};
use crate::envelope::{Encoding, ErrorKind, ToolError};
use crate::error::Error;
use crate::fault::{ErrorClass, Fault};
use crate::provider::Reply;

/// How the mock MCP server hands a failed call back: the encoding of one of the MCP strategies.
pub fn encoding_of(strategy: &str) -> Result<Encoding, Error> {
    Strategy::mcp_presets().into_iter().find(|s| s.name == strategy).map(|s| s.encoding).ok_or_else(|| {
        let names: Vec<String> = Strategy::mcp_presets().into_iter().map(|s| s.name).collect();
        Error::Usage(format!("--mcp-strategy: one of {}, got {strategy:?}", names.join(", ")))
    })
}

/// What a call met at the mocks: the tool's answer, or an answer that never reached it.
type Outcome = Result<Called, Reply>;

/// Where a request at `/mcp` goes (carried in its extensions to the SDK's handler): the mocks
/// and the agent of its path, and, for a `tools/call`, where the HTTP layer hears what the call
/// met (it answers transport faults itself). A request the SDK refuses is dropped unanswered
/// here, and the HTTP layer hears nothing.
#[derive(Clone)]
struct Reached {
    shared: Arc<Shared>,
    agent: u32,
    told: Option<Arc<std::sync::Mutex<Option<tokio::sync::oneshot::Sender<Outcome>>>>>,
}

/// The MCP server of a scenario's tools.
#[derive(Clone)]
pub struct McpTools {
    task: Arc<Task>,
    encoding: Encoding,
    /// Over stdio, the mocks and the agent every request is for; over HTTP each request
    /// carries its own ([`Reached`]).
    direct: Option<(Arc<Shared>, u32)>,
    /// `mcp-proxy`: the real server whose tools are listed and whose calls no fault stops go to.
    real: Option<Arc<RealServer>>,
}

impl McpTools {
    pub fn new(scenario: &Scenario, encoding: Encoding, direct: Option<(Arc<Shared>, u32)>) -> McpTools {
        McpTools { task: Arc::new(scenario.task.clone()), encoding, direct, real: None }
    }

    /// The tools as MCP describes them, each schema at its revision.
    fn tools(&self, revisions: &[u32]) -> Vec<Tool> {
        let list = tool_list(&self.task, revisions);
        list["tools"]
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
            .collect()
    }

    /// The mocks and the agent a request is for.
    fn reached(&self, context: &RequestContext<RoleServer>) -> Result<Reached, ErrorData> {
        let parts = context.extensions.get::<axum::http::request::Parts>();
        if let Some(r) = parts.and_then(|p| p.extensions.get::<Reached>()) {
            return Ok(r.clone());
        }
        let (shared, agent) =
            self.direct.clone().ok_or_else(|| ErrorData::internal_error("no mocks behind this request", None))?;
        Ok(Reached { shared, agent, told: None })
    }
}

impl ServerHandler for McpTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
            .with_server_info(Implementation::new("tracefault", env!("CARGO_PKG_VERSION")))
            .with_instructions("The scenario's tools, served by tracefault's mocks with seeded faults.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let reached = self.reached(&context)?;
        if let Some(real) = &self.real {
            let tools = real.tools().await?;
            // Listing clears a schema change's failures, behind mcp-proxy too, once it listed.
            listed(&reached.shared, reached.agent);
            return Ok(ListToolsResult::with_all_items(tools));
        }
        Ok(ListToolsResult::with_all_items(self.tools(&listed(&reached.shared, reached.agent))))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Reached { shared, agent, told } = self.reached(&context)?;
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        // Kept for the real server's answer, when there is one.
        let kept = self.real.as_ref().map(|_| args.clone());
        // Behind mcp-proxy, a tool the scenario does not name meets no mock: straight through.
        if let Some(real) = &self.real
            && !self.task.tools.iter().any(|t| *t == request.name)
        {
            return tokio::select! {
                answer = real.call(request) => answer,
                () = context.ct.cancelled() => Err(ErrorData::internal_error("the request was cancelled", None)),
            };
        }
        // Over HTTP the HTTP layer hears what the call met: it answers a transport fault itself
        // (the SDK's answer is not sent) and puts a schema change's notification on the
        // answer's stream.
        let mut told = told.and_then(|t| t.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take());
        let over_http = told.is_some();
        // A client that goes away (or cancels the request) gives the call's place back.
        let key = idempotency_key(&context, &request);
        let outcome = tokio::select! {
            outcome = tool_call(&shared, agent, &request.name, Ok(args), key.as_deref()) => outcome,
            () = went_away(&mut told) => return Err(ErrorData::internal_error("the client went away", None)),
            () = context.ct.cancelled() => return Err(ErrorData::internal_error("the request was cancelled", None)),
        };
        if let Some(tx) = told {
            let _ = tx.send(outcome.clone());
        }
        let outcome = match outcome {
            Ok(called) if transport_fault(&called) => {
                let mut m = shared.lock();
                let w = m.world(agent).expect("an agent of the fleet, checked before the call");
                Err(tools::http_reply(w, &called))
            }
            other => other,
        };
        match outcome {
            Ok(called) => {
                // Over stdio the notification goes before the answer.
                if called.list_changed && !over_http {
                    let _ = context.peer.notify_tool_list_changed().await;
                }
                match &self.real {
                    Some(real) if called.fault.is_none() => {
                        let name = request.name.to_string();
                        tokio::select! {
                            answer = forwarded(real, request, &shared, (agent, called.counted), kept.as_ref().unwrap_or(&Value::Null)) => {
                                answer.map(|r| tainted_real(r, called.taint.as_ref()))
                            }
                            () = context.ct.cancelled() => {
                                // Its outcome at the server is unknown: no success to the triggers.
                                if let Some(w) = shared.lock().world(agent) {
                                    tools::cancelled_for_real(w, &name, called.counted);
                                }
                                Err(ErrorData::internal_error("the request was cancelled", None))
                            }
                        }
                    }
                    _ => answer(&called, self.encoding).map(CallToolResponse::from),
                }
            }
            Err(reply) if reply.status == 404 => Err(unknown_tool(&self.task, &request.name)),
            Err(reply) => Err(refusal(&reply)),
        }
    }

    /// The SDK hands a request of a method it knows here when its params are not of the
    /// method's shape: `-32602` (Invalid params) for the methods served, `-32601` otherwise.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        const SERVED: [&str; 4] = ["initialize", "ping", "tools/list", "tools/call"];
        if !SERVED.contains(&request.method.as_str()) {
            return Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, request.method, None));
        }
        let why = match request.method.as_str() {
            "tools/call" => serde_json::from_value::<CallToolRequestParams>(request.params.unwrap_or_default())
                .err()
                .map(|e| e.to_string()),
            _ => None,
        };
        let why = why.unwrap_or_else(|| "not of the method's shape".to_owned());
        Err(ErrorData::invalid_params(format!("Invalid params for {}: {why}", request.method), None))
    }
}

/// A call no fault stopped, answered by the real server as it answers it; an `isError` result
/// is a failure to the scenario's triggers (as a real HTTP tool's failure is), of the one class
/// MCP tells: a tool error, here transient. `counted`: whether the mock counted the call's
/// result for the task's goal.
async fn forwarded(
    real: &RealServer,
    request: CallToolRequestParams,
    shared: &Shared,
    (agent, counted): (u32, bool),
    args: &Value,
) -> Result<CallToolResponse, ErrorData> {
    let name = request.name.to_string();
    let response = real.call(request).await;
    let failed = match &response {
        Ok(CallToolResponse::Complete(r)) => r.is_error == Some(true),
        Ok(_) => false,
        Err(_) => true,
    };
    if failed {
        let mut m = shared.lock();
        if let Some(w) = m.world(agent) {
            w.real_tool_failures += 1;
            tools::failed_after_all(w, (&name, args), &Fault::http(500), counted);
        }
    }
    response
}

/// A real server's result as a tainting fault changes it (its first text block, read as JSON
/// where it is JSON); a failed or unchanged result as it came.
fn tainted_real(response: CallToolResponse, fault: Option<&Fault>) -> CallToolResponse {
    match (fault, response) {
        (Some(f), CallToolResponse::Complete(mut r)) if r.is_error != Some(true) => {
            if let Some(i) = r.content.iter().position(|c| c.as_text().is_some()) {
                let text = r.content[i].as_text().map(|t| t.text.clone()).unwrap_or_default();
                let v: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
                let changed = crate::taint::tainted(f, &v).unwrap_or(v);
                let out = match changed {
                    Value::String(s) => s,
                    v => v.to_string(),
                };
                r.content[i] = ContentBlock::text(out);
            }
            CallToolResponse::Complete(r)
        }
        (_, r) => r,
    }
}

/// Once the HTTP layer no longer waits to hear a call's outcome (its client went away); never
/// without an HTTP layer.
async fn went_away(told: &mut Option<tokio::sync::oneshot::Sender<Outcome>>) {
    match told {
        Some(tx) => tx.closed().await,
        None => std::future::pending().await,
    }
}

/// Agent `agent` read the tool list: the revision of each tool's schema it now knows.
fn listed(shared: &Shared, agent: u32) -> Vec<u32> {
    let mut m = shared.lock();
    m.world(agent).map_or_else(Vec::new, |w| {
        w.listed();
        w.revisions.clone()
    })
}

/// `-32602` naming the tool and the tools there are.
fn unknown_tool(task: &Task, name: &str) -> ErrorData {
    let known: Vec<&str> = task.tools.iter().map(String::as_str).collect();
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

/// The idempotency key a `tools/call` carries: MCP names none, so the ways clients send one
/// are read — the `Idempotency-Key` header of its HTTP request, else `idempotencyKey` in the
/// request's `_meta` (as the protocol's idempotency proposal spells the field).
fn idempotency_key(context: &RequestContext<RoleServer>, request: &CallToolRequestParams) -> Option<String> {
    let parts = context.extensions.get::<axum::http::request::Parts>();
    let header = parts.and_then(|p| p.headers.get("idempotency-key")).and_then(|v| v.to_str().ok());
    // The SDK moves a request's `_meta` to its context; a params' own is read as well.
    let metas = [Some(&context.meta), request.meta.as_ref()];
    let meta = metas.into_iter().flatten().find_map(|m| m.0.0.get("idempotencyKey").and_then(Value::as_str));
    header.or(meta).map(str::to_owned)
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
        Fault::Ambiguous { cursor } => {
            let text = partial_text(&body, encoding == Encoding::Envelope, *cursor);
            return Ok(CallToolResult::success(vec![ContentBlock::text(text)]));
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
        idempotency_key: called.idempotency_key.as_deref(),
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

/// Sessions kept at once, at least (two per agent of a fleet when that is more): past this,
/// the oldest is closed when a client initialises another (its client gets 404 and must
/// initialise again), so a long `serve` keeps flat memory (an idle session holds ~120 KiB in
/// the SDK until its 5-minute keep-alive ends).
pub const MAX_SESSIONS: usize = 128;

/// The streamable HTTP service behind `/mcp` (ended by its cancellation token), and its
/// sessions (a `transport = true` 404 expires the caller's), oldest first.
pub struct HttpService {
    service: StreamableHttpService<McpTools, LocalSessionManager>,
    sessions: Arc<LocalSessionManager>,
    opened: std::sync::Mutex<std::collections::VecDeque<Arc<str>>>,
    max_sessions: usize,
    encoding: Encoding,
}

impl HttpService {
    /// Counts a session a client just opened, closing the oldest past the limit.
    async fn opened(&self, id: &str) {
        use rmcp::transport::streamable_http_server::SessionManager;
        let oldest = {
            let mut opened = self.opened.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            opened.push_back(Arc::from(id));
            if opened.len() > self.max_sessions { opened.pop_front() } else { None }
        };
        if let Some(old) = oldest {
            let _ = self.sessions.close_session(&old).await;
        }
    }
}

pub fn http_service(
    scenario: &Scenario,
    agents: u32,
    encoding: Encoding,
    stop: tokio_util::sync::CancellationToken,
    hosts: Vec<String>,
) -> HttpService {
    let tools = McpTools::new(scenario, encoding, None);
    let config = StreamableHttpServerConfig::default().with_cancellation_token(stop).with_allowed_hosts(hosts);
    let mut manager = LocalSessionManager::default();
    // A finished request's events are not kept for a late resumption (the server offers none):
    // a session holds only what is in flight.
    manager.session_config.completed_cache_ttl = std::time::Duration::ZERO;
    let sessions = Arc::new(manager);
    let service = StreamableHttpService::new(move || Ok(tools.clone()), sessions.clone(), config);
    let max_sessions = MAX_SESSIONS.max(2 * agents as usize);
    HttpService { service, sessions, opened: Default::default(), max_sessions, encoding }
}

/// A request at `/mcp`: refused if its `Origin` is foreign, answered here if its body is not a
/// JSON-RPC message, otherwise handed to the SDK, which checks it and calls the mocks. What a
/// `tools/call` met is logged here, and a transport fault answered here (the SDK's answer
/// dropped); a session that expires by a fault is closed.
pub async fn http(
    shared: &Arc<Shared>,
    service: &HttpService,
    agent: u32,
    mut parts: axum::http::request::Parts,
    body: axum::body::Bytes,
) -> Response {
    if !local_origin(&parts.headers) {
        let refused = "tracefault: /mcp serves pages of this machine only (an Origin of localhost, 127.0.0.1 or [::1])";
        return super::dispatch::respond(Reply::text(403, refused)).await;
    }
    let message = if parts.method == axum::http::Method::POST {
        // What the SDK cannot read is answered here, with the request's id.
        let checked = check(&body).and_then(|m| match read_message(m.clone()) {
            Err(Some(error)) => Err(error),
            _ => Ok(m),
        });
        match checked {
            Ok(message) => Some(message),
            Err(error) => return super::dispatch::respond(Reply::json(400, &error)).await,
        }
    } else {
        None
    };
    let initialize = message.as_ref().is_some_and(|m| m["method"] == "initialize");
    let call = message.filter(|m| m["method"] == "tools/call" && m.get("id").is_some());
    let (tx, heard) = tokio::sync::oneshot::channel();
    let told = call.is_some().then(|| Arc::new(std::sync::Mutex::new(Some(tx))));
    parts.extensions.insert(Reached { shared: shared.clone(), agent, told });
    let session = parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).map(Arc::<str>::from);
    let response = sdk(service, parts, body).await;
    if initialize {
        if let Some(id) = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            service.opened(id).await;
        }
        return response;
    }
    // Only a call the SDK let through reached the mocks: one it refused was dropped unheard.
    let (Some(call), Ok(outcome)) = (call, heard.await) else { return response };
    if let Some(w) = shared.lock().world(agent) {
        w.log_mcp(call.clone());
        w.log_mcp(logged_answer(&call["id"], &outcome, service.encoding));
        if matches!(&outcome, Ok(c) if c.list_changed) {
            w.log_mcp(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
        }
    }
    let transport = match &outcome {
        Ok(called) if called.fault == Some(Fault::StreamDropped) => Some(Reply::sse_cut()),
        Ok(called) if transport_fault(called) => {
            let mut m = shared.lock();
            let w = m.world(agent).expect("an agent of the fleet, checked above");
            Some(tools::http_reply(w, called))
        }
        Err(reply) if reply.status != 404 => Some(reply.clone()),
        _ => None,
    };
    if let Some(reply) = transport {
        // A 404 on a request with a session id is how a session expires: the session is gone
        // for every later request too, and the client must initialise again.
        if matches!(&outcome, Ok(c) if c.fault == Some(Fault::SessionExpired))
            && let Some(id) = session
        {
            use rmcp::transport::streamable_http_server::SessionManager;
            let _ = service.sessions.close_session(&id).await;
        }
        return super::dispatch::respond(reply).await;
    }
    if matches!(&outcome, Ok(c) if c.list_changed) { announce_list_changed(response) } else { response }
}

/// Whether a request's `Origin`, if it has one, is this machine's (any port, http or https): a
/// page served from elsewhere must not reach the tools through a visitor's browser (DNS
/// rebinding; the MCP spec's transports section asks servers to check it).
fn local_origin(headers: &axum::http::HeaderMap) -> bool {
    let Some(origin) = headers.get(axum::http::header::ORIGIN) else { return true };
    let Some(uri) = origin.to_str().ok().and_then(|o| o.parse::<axum::http::Uri>().ok()) else { return false };
    let host = uri.host().map(str::to_ascii_lowercase);
    matches!(uri.scheme_str(), Some("http" | "https"))
        && matches!(host.as_deref(), Some("localhost" | "127.0.0.1" | "[::1]" | "::1"))
}

/// The SDK's answer to a request.
async fn sdk(service: &HttpService, parts: axum::http::request::Parts, body: axum::body::Bytes) -> Response {
    let req = Request::from_parts(parts, Body::from(body));
    let mut service = service.service.clone();
    match tower_service::Service::call(&mut service, req).await {
        Ok(r) => r.map(Body::new),
        Err(e) => match e {},
    }
}

/// `notifications/tools/list_changed` ahead of the call's answer on its event stream, so the
/// client learns of the change before it sees the failure (the SDK would send it on the
/// standalone stream, which a client may not have open, racing the answer).
fn announce_list_changed(response: Response) -> Response {
    let sse = response.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !sse {
        return response;
    }
    let event = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";
    let (parts, body) = response.into_parts();
    let prefixed =
        super::dispatch::Prefixed { prefix: Some(axum::body::Bytes::from_static(event.as_bytes())), then: body };
    Response::from_parts(parts, Body::new(prefixed))
}

/// The answer to `tools/call` `id` as the exec log records it: the JSON-RPC message the SDK
/// sends, or, for an answer of the endpoint's own, the HTTP status (0 for a dropped
/// connection) and a stand-in error message (`-32000`, which no SDK sent).
fn logged_answer(id: &Value, outcome: &Result<Called, Reply>, encoding: Encoding) -> Value {
    let http = |status: u16, text: String| json!({"http_status": status, "message": {"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": text}}});
    match outcome {
        Ok(called) if transport_fault(called) => match &called.fault {
            Some(Fault::Reset) => http(0, "the connection was dropped".into()),
            Some(Fault::StreamDropped) => http(200, "the event stream was dropped before the answer".into()),
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
        crate::provider::reply::Body::Bytes { bytes, .. } => bytes,
        crate::provider::reply::Body::Reset
        | crate::provider::reply::Body::Cut { .. }
        | crate::provider::reply::Body::Steps { .. } => b"the connection was dropped",
    }
}

/// Serves the scenario's tools over stdio as agent 0 of run 0 until the client closes stdin,
/// reading no further while [`super::stdio::IN_FLIGHT`] answers wait to be written.
/// With `real` (`mcp-proxy`), its tools are listed and the calls no fault stops go to it.
pub async fn serve_stdio(shared: Arc<Shared>, encoding: Encoding, real: Option<Arc<RealServer>>) -> Result<(), Error> {
    use rmcp::ServiceExt;
    let scenario = shared.lock().scenario().clone();
    let mut server = McpTools::new(&scenario, encoding, Some((shared, 0)));
    server.real = real;
    let (input, output) = rmcp::transport::io::stdio();
    let running = server
        .serve(super::stdio::lines(input, output))
        .await
        .map_err(|e| Error::Usage(format!("mcp --stdio: the client's initialize failed: {e}")))?;
    running.waiting().await.map_err(|e| Error::Usage(format!("mcp --stdio: {e}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn called(fault: Option<Fault>) -> Called {
        Called { tool: "search".into(), result: json!({"hits": 3}), fault, ..Called::default() }
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
        use crate::envelope::render::MORE_AVAILABLE;
        let text =
            |r: CallToolResult| serde_json::to_value(&r.content).unwrap()[0]["text"].as_str().unwrap().to_owned();
        let c = called(Some(Fault::Ambiguous { cursor: false }));
        assert_eq!(
            text(answer(&c, Encoding::Flag).unwrap()),
            format!(r#"{{"data":{{"hits":3}},"note":"{MORE_AVAILABLE}"}}"#)
        );
        assert_eq!(text(answer(&c, Encoding::Envelope).unwrap()), r#"{"data":{"hits":3},"complete":true}"#);
        let c = called(Some(Fault::Ambiguous { cursor: true }));
        assert_eq!(
            text(answer(&c, Encoding::Flag).unwrap()),
            format!(r#"{{"data":{{"hits":3}},"note":"{MORE_AVAILABLE}","next_cursor":"page-2"}}"#)
        );
        assert_eq!(
            text(answer(&c, Encoding::Envelope).unwrap()),
            r#"{"data":{"hits":3},"complete":true}"#,
            "no cursor when complete"
        );
    }

    #[test]
    fn malformed_messages_get_the_specs_errors_with_the_id_when_there_is_one() {
        let error = |body: &[u8]| {
            let e = check(body).err()?;
            Some((e["id"].clone(), e["error"]["code"].as_i64()?))
        };
        assert_eq!(error(b"{not json"), Some((Value::Null, -32700)));
        assert_eq!(error(b""), Some((Value::Null, -32700)));
        assert_eq!(error(b"[]"), Some((Value::Null, -32600)));
        assert_eq!(error(br#"{"jsonrpc":"1.0","id":1,"method":"x"}"#), Some((json!(1), -32600)));
        assert_eq!(error(br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#), Some((Value::Null, -32600)));
        assert_eq!(error(br#"{"jsonrpc":"2.0","id":5}"#), Some((json!(5), -32600)));
        assert_eq!(
            error(br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":"s"}"#),
            Some((json!("a"), -32602))
        );
        assert_eq!(error(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":[1]}"#), Some((json!(2), -32602)));
        assert_eq!(error(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#), None);
        assert_eq!(error(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}"#), None);
        assert_eq!(error(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), None);
        assert_eq!(error(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#), None);
    }

    #[test]
    fn what_the_sdk_cannot_read_is_answered_with_the_requests_id() {
        let code =
            |m: &str| read_message(check(m.as_bytes()).unwrap()).err().map(|e| e.map(|e| e["error"]["code"].clone()));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":5}}"#),
            Some(Some(json!(-32602)))
        );
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"s"}}"#), None);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"error":5}"#), Some(None), "a response is not answered");
    }

    #[test]
    fn only_pages_of_this_machine_reach_the_endpoint() {
        let with = |origin: Option<&str>| {
            let mut h = axum::http::HeaderMap::new();
            if let Some(o) = origin {
                h.insert("origin", o.parse().unwrap());
            }
            local_origin(&h)
        };
        assert!(with(None));
        for ok in ["http://localhost:5173", "https://LOCALHOST", "http://127.0.0.1:1", "http://[::1]:8080"] {
            assert!(with(Some(ok)), "{ok}");
        }
        for refused in ["null", "http://evil.example", "http://localhost.evil.example", "file://", "ws://localhost"] {
            assert!(!with(Some(refused)), "{refused}");
        }
    }
}
