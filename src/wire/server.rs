//! The HTTP server behind wire mode (axum on hyper): one handler that names the route of every
//! request and hands it to the mocks, bodies read under a size limit and a deadline into one
//! buffer while they stream (no request is kept: memory stays flat however long `serve` runs),
//! slow answers and dropped connections, and a clear answer for paths nothing serves and for
//! requests meant for other hosts. Malformed HTTP is answered or closed by hyper; nothing here
//! panics on it. A client that half-closes its connection after the request still gets the
//! answer. Connections are capped ([`max_connections`]; at the cap the oldest one between
//! requests makes room), and one whose request head stops coming or that idles between requests
//! is closed after [`HEADER_TIMEOUT`].

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body as AxumBody, Bytes};
use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::Response;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::dispatch::{MAX_BODY_BYTES, Shared, respond, tool_call};
use super::mocks::Mocks;
use super::upstream::{self, Forward, Upstream};
use super::{mcp, provider, tools};
use crate::engine::Scenario;
use crate::envelope::Encoding;
use crate::error::Error;
use crate::provider::Format;
use crate::provider::Reply;

/// A request's head must arrive within this, and a connection idle between requests is closed
/// after it.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// A request's body must arrive within this once its head has (408 otherwise): 8 MiB at
/// 140 KB/s.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// Connections served at once, at most ([`max_connections`]).
pub const MAX_CONNECTIONS: usize = 512;

/// The connections served at once: [`MAX_CONNECTIONS`], or half the open files the process may
/// have if that is fewer (the rest are for agents, traces and reports), at least 16.
pub fn max_connections() -> usize {
    let files = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    let half = files.map_or(usize::MAX, |n| usize::try_from(n / 2).unwrap_or(usize::MAX));
    MAX_CONNECTIONS.min(half).max(16)
}

/// What a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route<'a> {
    Provider {
        format: Format,
        gemini_stream: bool,
    },
    ToolList,
    Tool(&'a str),
    /// MCP's streamable HTTP endpoint (every method: POST, GET for the stream, DELETE).
    Mcp,
}

/// Every path the mocks serve, for the 404 that names the nearest one.
pub const SERVED: [&str; 10] = [
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/messages",
    "/v1beta/models/MODEL:generateContent",
    "/v1beta/models/MODEL:streamGenerateContent",
    "/v1beta/openai/chat/completions",
    "/tools",
    "/tools/NAME",
    "/mcp",
    "/agents/K/…",
];

/// The route of a path (after any `/agents/K` prefix). Provider paths are served with and
/// without their version prefix (`/v1/messages` and `/messages`: some SDKs add it to a base URL
/// that already has it, some do not), where nothing collides.
pub fn route<'a>(method: &Method, path: &'a str) -> Option<Route<'a>> {
    let p = path.trim_end_matches('/');
    if p == "/mcp" {
        return Some(Route::Mcp);
    }
    if method == Method::GET && p == "/tools" {
        return Some(Route::ToolList);
    }
    if method != Method::POST {
        return None;
    }
    if let Some(name) = p.strip_prefix("/tools/") {
        return (!name.is_empty() && !name.contains('/')).then_some(Route::Tool(name));
    }
    let unversioned = ["/v1beta/openai", "/v1beta", "/v1", ""].iter().find_map(|v| p.strip_prefix(v).map(|r| (*v, r)));
    let (version, rest) = unversioned?;
    Format::ALL.into_iter().find_map(|format| {
        let stream = format.provider().serves(version, rest)?;
        Some(Route::Provider { format, gemini_stream: stream })
    })
}

/// The served path nearest to an unknown one: the fewest edits between them, with `NAME` and
/// `MODEL` standing for what the unknown path has there.
pub fn nearest(path: &str) -> &'static str {
    let path: String = path.chars().take(200).collect();
    let last = path.rsplit('/').next().unwrap_or_default();
    let model = path.split("models/").nth(1).and_then(|m| m.split(':').next()).unwrap_or("MODEL");
    SERVED
        .iter()
        .min_by_key(|s| edits(&path, &s.replace("NAME", last).replace("MODEL", model)))
        .copied()
        .unwrap_or("/v1/chat/completions")
}

/// Levenshtein distance (inputs are short: paths are cut at 200 characters).
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1).min(row[j] + 1).min(prev + usize::from(ca != *cb));
            prev = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// `/agents/K/rest` → (Some(K), rest).
fn agent_prefix(path: &str) -> (Option<u32>, &str) {
    if let Some(rest) = path.strip_prefix("/agents/")
        && let Some((k, _)) = rest.split_once('/')
        && let Ok(n) = k.parse()
    {
        return (Some(n), &rest[k.len()..]);
    }
    (None, path)
}

/// What every request's handler holds: the mocks' state and the MCP endpoint's service.
struct Served {
    shared: Arc<Shared>,
    mcp: mcp::HttpService,
}

/// A running wire server.
pub struct WireServer {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
    /// Ends the MCP sessions (their streams stay open otherwise).
    mcp_stop: CancellationToken,
}

impl WireServer {
    /// Binds `addr` (127.0.0.1 unless told otherwise) and serves the scenario's mocks to
    /// `agents` agents (`/agents/K/` with K below it; the plain paths are agent 0), MCP tool
    /// failures encoded as `mcp` says.
    pub async fn start(
        scenario: Scenario,
        addr: SocketAddr,
        time_scale: f64,
        agents: u32,
        mcp: Encoding,
        upstream: Option<Arc<Upstream>>,
    ) -> Result<WireServer, Error> {
        let listener = std::net::TcpListener::bind(addr).map_err(|e| {
            let what = if e.kind() == std::io::ErrorKind::AddrInUse {
                "is in use (pick another --addr, or port 0 for any free one)".to_owned()
            } else {
                e.to_string()
            };
            Error::Usage(format!("cannot listen on {addr}: {what}"))
        })?;
        listener.set_nonblocking(true).map_err(|e| Error::Usage(format!("cannot listen on {addr}: {e}")))?;
        let addr = listener.local_addr().map_err(|e| Error::Usage(format!("cannot listen on {addr}: {e}")))?;
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| Error::Usage(format!("cannot listen on {addr}: {e}")))?;
        let mcp_stop = CancellationToken::new();
        let hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned(), addr.ip().to_string()];
        let service = mcp::http_service(&scenario, agents, mcp, mcp_stop.clone(), hosts);
        let mocks = Mocks::new(scenario, 0, agents, time_scale, true);
        let shared = Arc::new(Shared { mocks: Mutex::new(mocks), time_scale, upstream });
        let app = axum::Router::new()
            .fallback(handle)
            .layer(tower_http::limit::RequestBodyLimitLayer::new(MAX_BODY_BYTES))
            .with_state(Arc::new(Served { shared: shared.clone(), mcp: service }));
        let stop = CancellationToken::new();
        let task = tokio::spawn(accept_loop(listener, app, stop.clone()));
        Ok(WireServer { addr, shared, stop, task: Some(task), mcp_stop })
    }

    /// `http://127.0.0.1:PORT`
    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Fresh mock state for run `run` (traffic recorded as traces when `record_trace`).
    pub fn reset(&self, run: u64, record_trace: bool) {
        let mut m = self.shared.lock();
        let (scenario, agents) = (m.scenario().clone(), m.agents());
        *m = Mocks::new(scenario, run, agents, self.shared.time_scale, record_trace);
    }

    pub fn mocks(&self) -> MutexGuard<'_, Mocks> {
        self.shared.lock()
    }

    /// Stops accepting and waits for requests in flight.
    pub async fn stop(mut self) {
        self.mcp_stop.cancel();
        self.stop.cancel();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

/// Every request comes here.
async fn handle(State(served): State<Arc<Served>>, req: Request) -> Response {
    let shared = served.shared.clone();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let (prefix, inner) = agent_prefix(&path);
    let agent = prefix.unwrap_or(0);
    // A request meant for another host (through the proxy variables exec sets, or CONNECT).
    if method == Method::CONNECT || req.uri().authority().is_some() {
        let host = req.uri().authority().map_or_else(|| req.uri().to_string(), |a| a.to_string());
        if let Some(w) = shared.lock().world(agent) {
            w.elsewhere.insert(host.clone());
            w.bound_memory();
        }
        return respond(Reply::text(
            403,
            format!("tracefault: {host} is not reachable during a test; only the mocks are"),
        ))
        .await;
    }
    let agents = shared.lock().agents();
    if agent >= agents {
        return respond(Reply::text(
            404,
            format!(
                "tracefault: no agent {agent} here: this mock serves agents 0 to {} (/agents/K/ with K below \
                 --agents {agents})",
                agents - 1
            ),
        ))
        .await;
    }
    let Some(route) = route(&method, inner) else {
        let near = nearest(inner);
        if let Some(w) = shared.lock().world(agent) {
            w.http_requests[2] += 1;
            w.unknown_paths.insert(format!("{method} {path} (nearest served path: {near})"));
            w.bound_memory();
        }
        return respond(Reply::text(
            404,
            format!(
                "tracefault: no mock at {method} {path}; the nearest is POST {near}. Served: {}",
                SERVED.join(", ")
            ),
        ))
        .await;
    };
    let (parts, body) = req.into_parts();
    let body = match tokio::time::timeout(BODY_TIMEOUT, read_body(body, MAX_BODY_BYTES)).await {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            if let BodyError::Broken(err) = &e
                && !e.too_large()
            {
                eprintln!("tracefault: {method} {path}: the request body broke off ({err})");
            }
            let status = if e.too_large() { 413 } else { 400 };
            return respond(Reply::text(
                status,
                format!("tracefault: request body over {MAX_BODY_BYTES} bytes or broken off"),
            ))
            .await;
        }
        Err(_) => {
            let secs = BODY_TIMEOUT.as_secs();
            return respond(Reply::text(408, format!("tracefault: the request body did not arrive within {secs} s")))
                .await;
        }
    };
    let reply = match route {
        Route::Provider { format, .. } if shared.upstream.is_some() => {
            let upstream = shared.upstream.clone().expect("checked by the guard");
            let query = parts.uri.query();
            let req = Forward { agent, prefix, format, path: inner, query, headers: &parts.headers, body };
            return upstream::forward(&shared, &upstream, req).await;
        }
        Route::Provider { format, gemini_stream } => {
            let mut m = shared.lock();
            let (w, limits) = m.agent(agent).expect("an agent of the fleet, checked above");
            w.http_requests[0] += 1;
            provider::respond(w, &mut limits.provider, prefix, format, gemini_stream, &body)
        }
        Route::ToolList => {
            let mut m = shared.lock();
            let w = m.world(agent).expect("an agent of the fleet, checked above");
            w.http_requests[3] += 1;
            tools::list(w)
        }
        Route::Mcp => {
            return mcp::http(&shared, &served.mcp, agent, parts, body).await;
        }
        Route::Tool(name) => {
            let key = parts.headers.get("idempotency-key").and_then(|v| v.to_str().ok());
            match tool_call(&shared, agent, name, tools::arguments(&body), key).await {
                Ok(called) => tools::http_reply(shared.lock().world(agent).expect("an agent of the fleet"), &called),
                Err(reply) => reply,
            }
        }
    };
    respond(reply).await
}

/// Why a body could not be read.
enum BodyError {
    TooLarge,
    Broken(axum::Error),
}

impl BodyError {
    /// Over the limit, found here or by the limit layer (which sees an announced length).
    fn too_large(&self) -> bool {
        match self {
            BodyError::TooLarge => true,
            BodyError::Broken(e) => format!("{e:?}").contains("LengthLimit"),
        }
    }
}

/// A request's body, at most `limit` bytes, in one buffer: each chunk is copied in as it arrives
/// and let go, so a body sent a byte at a time costs its bytes (not a chunk's bookkeeping per
/// byte), and the buffer grows by doubling but never past `limit`.
async fn read_body(mut body: AxumBody, limit: usize) -> Result<Bytes, BodyError> {
    use http_body::Body as _;
    let mut buf = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let Ok(data) = frame.map_err(BodyError::Broken)?.into_data() else { continue };
        if data.len() > limit - buf.len() {
            return Err(BodyError::TooLarge);
        }
        if buf.capacity() - buf.len() < data.len() {
            let grown = (buf.len() + data.len()).max(2 * buf.capacity()).max(4096).min(limit);
            buf.reserve_exact(grown - buf.len());
        }
        buf.extend_from_slice(&data);
    }
    Ok(Bytes::from(buf))
}

/// Serves each accepted connection on its own task until `stop`, then closes the connections
/// between requests and waits for the requests in flight. Connections may be half-closed: a
/// client that shuts its write side after sending the request still gets the answer (hyper's
/// default would drop the connection on that EOF, racing the response). At most
/// [`max_connections`] are served at once: past that the oldest connection between requests (or
/// still sending a request's head) is closed to make room, and while none is, the next waits
/// (the kernel's queue holds it). A head that takes longer than [`HEADER_TIMEOUT`], and a
/// connection idle that long between requests, is closed.
async fn accept_loop(listener: tokio::net::TcpListener, app: axum::Router, stop: CancellationToken) {
    let cap = max_connections();
    let slots = Arc::new(tokio::sync::Semaphore::new(cap));
    let open: Arc<Mutex<BTreeMap<u64, Open>>> = Arc::default();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.half_close(true).timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
    for id in 0u64.. {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors and the like: wait a moment rather than spin.
                    eprintln!("tracefault: cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        let Some(slot) = room(&slots, &open, &stop).await else { break };
        let _ = stream.set_nodelay(true);
        let this = Open { shed: stop.child_token(), in_flight: Arc::default() };
        lock(&open).insert(id, this.clone());
        let service = tracked(app.clone(), this.in_flight.clone());
        let connection = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
        let open = open.clone();
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            // A client that breaks the protocol or goes away ends its own connection only.
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = this.shed.cancelled() => {
                    // Told to make room or to stop: closed at once between requests (or while a
                    // request's head comes in), after its answer otherwise.
                    if this.in_flight.load(Ordering::Acquire) > 0 {
                        connection.as_mut().graceful_shutdown();
                        let _ = connection.await;
                    }
                }
            }
            lock(&open).remove(&id);
            drop(slot);
        });
    }
    drop(listener);
    // Every connection gives its slot back when it ends.
    let _ = slots.acquire_many(u32::try_from(cap).unwrap_or(u32::MAX)).await;
}

/// A connection being served: told to end by `shed`, serving `in_flight` requests.
#[derive(Clone)]
struct Open {
    shed: CancellationToken,
    in_flight: Arc<AtomicUsize>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A slot for one more connection: at the cap, the oldest connection between requests is closed
/// to make room (again every 100 ms while every connection is in a request). `None` once the
/// server stops.
async fn room(
    slots: &Arc<tokio::sync::Semaphore>,
    open: &Mutex<BTreeMap<u64, Open>>,
    stop: &CancellationToken,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    loop {
        if let Ok(slot) = slots.clone().try_acquire_owned() {
            return Some(slot);
        }
        let idle = {
            let mut open = lock(open);
            let oldest = open.iter().find(|(_, c)| c.in_flight.load(Ordering::Acquire) == 0).map(|(id, _)| *id);
            oldest.and_then(|id| open.remove(&id))
        };
        if let Some(c) = idle {
            c.shed.cancel();
        }
        tokio::select! {
            slot = slots.clone().acquire_owned() => return slot.ok(),
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = stop.cancelled() => return None,
        }
    }
}

/// The app as hyper's service, counting the requests in flight on one connection: from the
/// request's head until its answer's body is sent (or dropped).
fn tracked(
    app: axum::Router,
    in_flight: Arc<AtomicUsize>,
) -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = Response<Tracked>,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<Response<Tracked>, std::convert::Infallible>> + Send,
> {
    hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let busy = Busy::new(in_flight.clone());
        let mut app = app.clone();
        async move {
            let response = tower_service::Service::call(&mut app, req).await?;
            Ok(response.map(|body| Tracked { body, _busy: busy }))
        }
    })
}

/// One request in flight on its connection, until dropped.
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn new(count: Arc<AtomicUsize>) -> Busy {
        count.fetch_add(1, Ordering::AcqRel);
        Busy(count)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An answer's body, holding its request's place in flight until it is sent or dropped.
struct Tracked {
    body: AxumBody,
    _busy: Busy,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The JSON the `serve`/`exec` banner and tests use to describe the served paths.
pub fn served_json() -> Value {
    json!({ "served": SERVED })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_with_and_without_version_prefixes() {
        let post = Method::POST;
        assert_eq!(
            route(&post, "/v1/messages"),
            Some(Route::Provider { format: Format::Anthropic, gemini_stream: false })
        );
        assert_eq!(
            route(&post, "/messages"),
            Some(Route::Provider { format: Format::Anthropic, gemini_stream: false })
        );
        assert_eq!(
            route(&post, "/chat/completions"),
            Some(Route::Provider { format: Format::OpenAiChat, gemini_stream: false })
        );
        assert_eq!(
            route(&post, "/v1beta/openai/chat/completions"),
            Some(Route::Provider { format: Format::GeminiOpenAi, gemini_stream: false })
        );
        assert_eq!(
            route(&post, "/v1/models/gemini-2.5-flash:streamGenerateContent"),
            Some(Route::Provider { format: Format::Gemini, gemini_stream: true })
        );
        assert_eq!(
            route(&post, "/models/g:generateContent"),
            Some(Route::Provider { format: Format::Gemini, gemini_stream: false })
        );
        assert_eq!(route(&post, "/tools/search"), Some(Route::Tool("search")));
        assert_eq!(route(&Method::GET, "/tools"), Some(Route::ToolList));
        assert_eq!(route(&post, "/v2/messages"), None);
        assert_eq!(route(&Method::GET, "/v1/messages"), None);
        assert_eq!(agent_prefix("/agents/3/v1/messages"), (Some(3), "/v1/messages"));
        assert_eq!(agent_prefix("/v1/messages"), (None, "/v1/messages"));
    }

    #[test]
    fn unknown_paths_name_the_nearest() {
        assert_eq!(nearest("/v1/v1/messages"), "/v1/messages");
        assert_eq!(nearest("/api/chat/completions"), "/v1/chat/completions");
        assert_eq!(nearest("/tool/search"), "/tools/NAME");
    }
}
