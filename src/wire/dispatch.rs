//! What every transport of wire mode shares (the HTTP server, MCP over HTTP and over stdio):
//! the mocks' state, a call at a mock tool made on it, a reply sent as an HTTP response, and
//! the size limit of one message.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body as AxumBody, Bytes};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;

use super::mocks::{Door, Mocks};
use super::tools;
use crate::engine::limits::{Leg, LoadFault};
use crate::fault::Fault;
use crate::provider::reply::{Body, Reply, Step};

/// Requests larger than this are refused with 413, while they stream in.
pub const MAX_BODY_BYTES: usize = 8 << 20;

/// The mocks' state, shared by every request.
pub struct Shared {
    pub mocks: Mutex<Mocks>,
    /// Time scale for new runs' clocks.
    pub time_scale: f64,
    /// The real providers, in live mode (else the mock model answers).
    pub upstream: Option<Arc<super::upstream::Upstream>>,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Mocks> {
        // A panic in one request must not take the mock down for the rest of the run.
        self.mocks.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A call at a mock tool: through the fleet's door (rate and concurrency limits, a queue),
/// served for its service time (a timeout for its own delay), and under optimistic concurrency
/// committed at its end. A client that goes away while it waits or is served gives its place
/// back. `Err` is an answer that never reached the tool: an unknown tool, arguments that are
/// not a JSON object, a refusal by the fleet's limits.
/// `idempotency_key` is the key the call carried (HTTP's `Idempotency-Key` header), for a write
/// tool that honours one.
pub async fn tool_call(
    shared: &Arc<Shared>,
    agent: u32,
    name: &str,
    args: Result<Value, Reply>,
    idempotency_key: Option<&str>,
) -> Result<tools::Called, Reply> {
    // The request travels to the tool for the tool's network delay (`network_ms`), if any.
    // The call's number at this agent keys its draws (service time, network legs), whatever
    // calls of the same agent arrive while it travels or waits.
    let (tool, epoch, args, n, at, request_ms, answer_ms) = {
        let mut m = shared.lock();
        let epoch = m.epoch;
        let (w, _) = m.agent(agent).expect("an agent of the fleet, checked above");
        w.http_requests[1] += 1;
        let Some(tool) = tools::index(w, name) else { return Err(tools::unknown(w, name)) };
        tools::arrive(w, tool);
        let args = args?;
        // The attempt is numbered as it is sent, as the engine numbers it: before it travels,
        // meets the fleet's limits or waits in a queue.
        let at = w.attempt(tool);
        let load = w.scenario.loads[tool];
        let n = w.tool_calls;
        let request_ms = load.network_ms(tool, n, Leg::Request, |k| w.service.unit(k));
        let answer_ms = load.network_ms(tool, n, Leg::Answer, |k| w.service.unit(k));
        (tool, epoch, args, n, at, request_ms, answer_ms)
    };
    if request_ms > 0 {
        let real_ms = shared.lock().clock.real_ms(request_ms).min(tools::MAX_DELAY_MS);
        tokio::time::sleep(Duration::from_millis(real_ms)).await;
    }
    let answer: Result<tools::Called, Reply> = async {
        let door = {
            let mut m = shared.lock();
            if m.epoch != epoch {
                return Err(Reply::text(503, "tracefault: the run ended while this call travelled to its tool"));
            }
            let now = m.clock.now_ms();
            let (w, limits) = m.agent(agent).expect("an agent of the fleet, checked above");
            match limits.admit(agent, tool, now) {
                Door::Refused(load, wait) => return Err(tools::refused(w, (name, &args), load, wait, None)),
                door => door,
            }
        };
        let mut held = Held { shared: shared.clone(), epoch, tool, place: false, serving: false, at_real: None };
        match door {
            Door::Served { place } => held.place = place,
            Door::Queued(rx) => {
                if rx.await.is_err() {
                    return Err(Reply::text(503, "tracefault: the run ended while this call waited for a place"));
                }
                held.place = true;
            }
            Door::Refused(..) => unreachable!("answered above"),
        }
        let (called, delay, read, occ) = {
            let mut m = shared.lock();
            let load = m.scenario().loads[tool];
            let (w, limits) = m.agent(agent).expect("an agent of the fleet, checked above");
            let read = limits.tools[tool].start();
            held.serving = true;
            let mut called = tools::invoke(w, name, &args, at);
            // A write tool's answer hands back the key its call carried.
            if w.scenario.effects[tool].write {
                called.idempotency_key = idempotency_key.map(str::to_owned);
            }
            // A timeout keeps its own delay (from the request's sending); anything else takes the
            // tool's service time, and a write that reads first the legs between its read and write.
            let timeout = matches!(called.fault, Some(Fault::Timeout { .. }));
            let virtual_ms = match (&called.fault, load.service) {
                (Some(Fault::Timeout { after_ms }), _) => Some(after_ms.saturating_sub(request_ms)),
                (_, Some(dist)) => Some(dist.sample_at(tool, n, |k| w.service.unit(k))),
                _ => None,
            };
            let legs = if timeout { 0 } else { load.read_to_write_ms(tool, n, |k| w.service.unit(k)) };
            let virtual_ms = match (virtual_ms, legs) {
                (v, 0) => v,
                (v, legs) => Some(v.unwrap_or(0).saturating_add(legs)),
            };
            let delay = virtual_ms.map(|ms| Duration::from_millis(w.clock.real_ms(ms).min(tools::MAX_DELAY_MS)));
            (called, delay, read, load.occ)
        };
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
        }
        // Live mode: a call no fault stopped goes to the user's real tool, when it has one, while
        // it holds its place and its service (the tool's concurrency counts it).
        let real = {
            let m = shared.lock();
            if m.epoch != epoch {
                held.place = false;
                held.serving = false;
                return Ok(called);
            }
            // A fault that comes after the write (`commit = "before_failure"`) lets the real tool
            // write first.
            match (&shared.upstream, &m.scenario().tool_upstreams[tool]) {
                (Some(up), Some(url)) if called.fault.is_none() || called.commits => Some((up.clone(), url.clone())),
                _ => None,
            }
        };
        let mut called = called;
        let is_real = real.is_some();
        if let (Some((upstream, url)), Some(_)) = (&real, &called.fault) {
            // The real tool writes; the caller gets the scheduled failure all the same. A write
            // the real tool refused was not committed.
            called.commits = upstream.call_tool(url, &args).await.is_ok();
        } else if let Some((upstream, url)) = real {
            held.at_real = Some((agent, called.counted));
            let answer = upstream.call_tool(&url, &args).await;
            held.at_real = None;
            if let Err(fault) = answer.as_ref() {
                let mut m = shared.lock();
                if m.epoch == epoch
                    && let Some(w) = m.world(agent)
                {
                    w.real_tool_failures += 1;
                    // Its name, not its URL: a query may hold a key.
                    w.note(format!("the real tool behind {name} failed: {}", fault_line(fault)));
                    // Its `retry-after`, on the run's clock.
                    called.retry_after_ms = fault.retry_after_ms().map(|ms| (ms as f64 / w.clock.scale()) as u64);
                    tools::failed_after_all(w, (name, &args), fault, called.counted);
                }
            }
            match answer {
                // A tainting fault changes the real answer as it would the mock's.
                Ok(result) => {
                    called.result = match &called.taint {
                        Some(f) => crate::taint::tainted(f, &result).unwrap_or(result),
                        None => result,
                    }
                }
                Err(fault) => called.fault = Some(fault),
            }
        }
        let mut m = shared.lock();
        if m.epoch != epoch {
            held.place = false;
            held.serving = false;
            return Ok(called);
        }
        let (w, limits) = m.agent(agent).expect("an agent of the fleet, checked above");
        held.serving = false;
        // A real tool decides its own conflicts: the mock's optimistic check is the mock's.
        let committed = limits.tools[tool].end((occ && !is_real && called.fault.is_none()).then_some(read));
        if std::mem::take(&mut held.place) {
            limits.hand_on(tool);
        }
        if !committed {
            return Err(tools::refused(w, (name, &args), LoadFault::Conflict, None, Some(&called)));
        }
        if w.scenario.effects[tool].write && tools::committed(&called) {
            w.wrote(tool, called.args_key, idempotency_key);
        }
        Ok(called)
    }
    .await;
    // The answer travels back for the network delay (a timeout is the caller giving up:
    // nothing travels).
    let timed_out = matches!(&answer, Ok(c) if matches!(c.fault, Some(Fault::Timeout { .. })));
    if answer_ms > 0 && !timed_out {
        let real_ms = shared.lock().clock.real_ms(answer_ms).min(tools::MAX_DELAY_MS);
        tokio::time::sleep(Duration::from_millis(real_ms)).await;
    }
    answer
}

/// A real tool's failure in a few words.
fn fault_line(f: &Fault) -> String {
    match f {
        Fault::Http { status, message, .. } => format!("{status} {}", message.as_deref().unwrap_or_default()),
        Fault::Timeout { after_ms } => format!("no answer within {after_ms} ms"),
        other => format!("{other:?}"),
    }
}

/// A place or a service a tool call holds, given back if the call is dropped before its end
/// (the client went away); and, while the user's real tool serves it, the agent whose call it
/// is and whether its result counted for the goal: dropped then, its outcome at the real tool
/// is unknown, so the success the mocks counted is taken back (as a cancelled MCP call's is).
struct Held {
    shared: Arc<Shared>,
    epoch: u64,
    tool: usize,
    place: bool,
    serving: bool,
    at_real: Option<(u32, bool)>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if !(self.place || self.serving || self.at_real.is_some()) {
            return;
        }
        let mut m = self.shared.lock();
        // A call of a run the mocks were reset from holds nothing in the new one.
        if m.epoch != self.epoch {
            return;
        }
        if let Some((agent, counted)) = self.at_real
            && let Some(w) = m.world(agent)
        {
            w.unsucceeded(self.tool, counted);
        }
        if self.serving {
            m.limits.tools[self.tool].end(None);
        }
        if self.place {
            m.limits.hand_on(self.tool);
        }
    }
}

/// Sends a reply, after its delay.
pub async fn respond(reply: Reply) -> Response {
    if let Some(d) = reply.delay {
        tokio::time::sleep(d).await;
    }
    let body = match reply.body {
        Body::Bytes { bytes, content_type } => {
            let mut r = Response::new(AxumBody::from(bytes));
            r.headers_mut().insert("content-type", HeaderValue::from_static(content_type));
            r
        }
        Body::Reset => Response::new(AxumBody::new(Broken)),
        Body::Steps { steps, content_type } => {
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            tokio::spawn(async move {
                for step in steps {
                    match step {
                        Step::Pass(bytes) => {
                            if tx.send(Ok(Bytes::from(bytes))).await.is_err() {
                                return;
                            }
                        }
                        Step::Stall(d) => tokio::time::sleep(d).await,
                        Step::Cut => {
                            // What was sent reaches the client first.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            let reset =
                                std::io::Error::new(std::io::ErrorKind::ConnectionReset, "stream cut by the mock");
                            let _ = tx.send(Err(reset)).await;
                            return;
                        }
                        Step::End => return,
                    }
                }
            });
            let mut r = Response::new(AxumBody::new(Channel(rx)));
            r.headers_mut().insert("content-type", HeaderValue::from_static(content_type));
            r
        }
        Body::Cut { bytes, content_type } => {
            let then = BrokenLater(Box::pin(tokio::time::sleep(Duration::from_millis(20))));
            let mut r = Response::new(AxumBody::new(Prefixed { prefix: Some(Bytes::from(bytes)), then }));
            r.headers_mut().insert("content-type", HeaderValue::from_static(content_type));
            r
        }
    };
    let mut r = body;
    *r.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (k, v) in reply.headers {
        if let Ok(v) = HeaderValue::from_str(&v) {
            r.headers_mut().insert(k, v);
        }
    }
    r
}

/// A body that fails as soon as it is read: hyper drops the connection, and the client sees it
/// reset in the middle of the response.
struct Broken;

impl http_body::Body for Broken {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Poll::Ready(Some(Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection reset by the mock"))))
    }
}

/// A body that fails once its moment comes: what is sent before it reaches the client first
/// (hyper would drop a prefix that fails at once unsent).
struct BrokenLater(Pin<Box<tokio::time::Sleep>>);

impl http_body::Body for BrokenLater {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        match self.0.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => Pin::new(&mut Broken).poll_frame(cx),
        }
    }
}

/// A body that sends `prefix` first, then `then`'s frames.
pub struct Prefixed<B> {
    pub prefix: Option<Bytes>,
    pub then: B,
}

impl<B: http_body::Body<Data = Bytes> + Unpin> http_body::Body for Prefixed<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        match self.prefix.take() {
            Some(bytes) => Poll::Ready(Some(Ok(http_body::Frame::data(bytes)))),
            None => Pin::new(&mut self.then).poll_frame(cx),
        }
    }
}

/// A body fed by a task (the steps of a mock's answer, a real provider's answer passed on).
pub struct Channel(pub tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>);

impl http_body::Body for Channel {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx).map(|o| o.map(|r| r.map(http_body::Frame::data)))
    }
}
