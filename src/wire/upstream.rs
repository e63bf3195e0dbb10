//! Live mode: the real providers behind the provider endpoints. A request meets the fleet's
//! limits and the scenario's provider faults first, answered in the provider's dialect as the
//! mock answers them; a request that passes is forwarded to the provider (the agent's own
//! key with it), and its answer streamed back to the agent as it arrives. What the trace keeps
//! of it: the status, the usage the answer reports, the model's tool calls, its final text (of
//! an answer read whole; a stream's text is not assembled), the time it took — never a header
//! or a query, so a key never reaches a trace, a report or a log.
//!
//! Spending is bounded before it happens: with a limit on model calls, a request past it is
//! refused here and never sent. An upstream that cannot be reached is answered with a 502 of
//! tracefault's own and noted as such, never counted as the model's behaviour.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::{Body as AxumBody, Bytes};
use axum::http::{HeaderMap, HeaderName, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::dispatch::{Channel, Shared, respond};
use super::provider::{StreamFault, break_whole, call_ids, refusal};
use super::rewrite::rewrite;
use super::schema::recorded_args_key;
use super::spending::{Budget, Reservation, Usage};
use super::stream_break::{Breaking, Step};
use super::world::World;
use crate::engine::strategy::Strategy;
use crate::error::{Error, Result};
use crate::exchange::{Args, Item, parse_args};
use crate::fault::Fault;
use crate::provider::{Format, Reply};
use crate::trace::{Stop, TraceEvent};

/// The providers' public endpoints, the upstreams when none is named.
pub const DEFAULTS: [(&str, &str); 3] = [
    ("openai", "https://api.openai.com"),
    ("anthropic", "https://api.anthropic.com"),
    ("gemini", "https://generativelanguage.googleapis.com"),
];

/// How much of one answer is kept to read its usage, calls and text (the agent gets all of it).
const KEPT_BYTES: usize = 4 << 20;

/// Request headers that are the connection's, not the request's (RFC 9110 §7.6.1), and those
/// this hop sets itself: never forwarded. `accept-encoding` is dropped so the answer comes
/// uncompressed and can be read for its usage.
const HOP_HEADERS: [&str; 11] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

/// The real providers a live run forwards to, and its spending limit.
pub struct Upstream {
    /// openai, anthropic, gemini: the origin (and any path prefix) a request's path is put after.
    bases: [String; 3],
    client: reqwest::Client,
    max_model_calls: Option<u64>,
    /// Requests sent upstream so far, over every run and agent of this process.
    sent: AtomicU64,
    /// `--max-usd`, over the scenario's prices.
    budget: Option<Budget>,
    /// `--rewrite`: the strategy tool results the scenario's faults fail are rewritten in.
    rewrite: Option<Strategy>,
}

impl Upstream {
    /// From `--upstream` values (`openai=URL,anthropic=URL,gemini=URL`, repeatable; an
    /// unnamed provider keeps its public endpoint), `--max-model-calls` and `--max-usd`.
    pub fn new(specs: &[String], max_model_calls: Option<u64>, budget: Option<Budget>) -> Result<Upstream> {
        let mut bases = DEFAULTS.map(|(_, url)| url.to_owned());
        for spec in specs.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
            // The value is not echoed: the ones refused are the ones that may carry a key.
            let who = spec.split_once('=').map_or("a value", |(n, _)| n.trim());
            let who = if DEFAULTS.iter().any(|(n, _)| *n == who) { who } else { "a value" };
            let bad = |why: &str| Error::Usage(format!("--upstream ({who}): {why}"));
            let (name, url) =
                spec.split_once('=').ok_or_else(|| bad("expected PROVIDER=URL, e.g. openai=http://127.0.0.1:8080"))?;
            let i = DEFAULTS
                .iter()
                .position(|(n, _)| *n == name.trim())
                .ok_or_else(|| bad("the provider is one of openai, anthropic, gemini"))?;
            let url = url.trim().trim_end_matches('/');
            let parsed = reqwest::Url::parse(url).map_err(|e| bad(&format!("not a URL ({e})")))?;
            if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                return Err(bad("expected an http:// or https:// URL with a host"));
            }
            if parsed.query().is_some() || !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(bad("give the origin and path alone: no query, no user or password in the URL"));
            }
            bases[i] = url.to_owned();
        }
        let client = super::https::client()?;
        Ok(Upstream { bases, client, max_model_calls, sent: AtomicU64::new(0), budget, rewrite: None })
    }

    /// With tool results rewritten in `strategy` (`--rewrite`).
    pub fn rewriting(self, strategy: Option<Strategy>) -> Upstream {
        Upstream { rewrite: strategy, ..self }
    }

    /// The strategy tool results are rewritten in, if any.
    pub fn rewrite(&self) -> Option<&Strategy> {
        self.rewrite.as_ref()
    }

    /// Where `format`'s requests go.
    pub fn base(&self, format: Format) -> &str {
        match format {
            Format::OpenAiChat | Format::OpenAiResponses => &self.bases[0],
            Format::Anthropic => &self.bases[1],
            Format::Gemini | Format::GeminiOpenAi => &self.bases[2],
        }
    }

    /// Every upstream, `name=URL`, for the banner.
    pub fn describe(&self) -> String {
        DEFAULTS.iter().zip(&self.bases).map(|((n, _), b)| format!("{n}={b}")).collect::<Vec<_>>().join(", ")
    }

    /// Takes one request's place under the limits (its USD reservation when there is a USD
    /// limit); `Err(why)` when it would pass one, nothing taken then.
    fn reserve(&self, format: Format, path: &str, body: &[u8]) -> std::result::Result<Option<Reservation>, String> {
        let n = self.sent.fetch_add(1, Ordering::SeqCst);
        if let Some(max) = self.max_model_calls.filter(|max| n >= *max) {
            self.sent.fetch_sub(1, Ordering::SeqCst);
            return Err(format!("--max-model-calls {max} reached"));
        }
        let Some(budget) = &self.budget else { return Ok(None) };
        budget.reserve(format, path, body).map(Some).inspect_err(|_| {
            self.sent.fetch_sub(1, Ordering::SeqCst);
        })
    }

    /// Gives back a place taken for a request that never reached the provider.
    fn release(&self, usd: Option<Reservation>) {
        self.sent.fetch_sub(1, Ordering::SeqCst);
        if let (Some(b), Some(r)) = (&self.budget, usd) {
            b.release(r);
        }
    }

    /// Requests sent upstream so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    /// `--max-usd` and the USD spent (and reserved), when there is a USD limit.
    pub fn spending(&self) -> Option<(f64, f64)> {
        self.budget.as_ref().map(|b| (b.max_usd(), b.spent_usd()))
    }
}

/// How long a real tool may take to answer.
const TOOL_TIMEOUT: Duration = Duration::from_secs(120);

impl Upstream {
    /// A call of the user's real tool at `url`: its arguments POSTed as JSON. A 2xx JSON answer is
    /// the result (a 2xx that is not JSON, its text as a string); any other status is that
    /// failure, with its `retry-after` and the first line of its body; no answer is a timeout
    /// or a reset.
    pub async fn call_tool(&self, url: &str, args: &Value) -> std::result::Result<Value, Fault> {
        let body = serde_json::to_vec(args).expect("a JSON value serializes");
        let sent = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .body(body)
            .timeout(TOOL_TIMEOUT)
            .send()
            .await;
        let answer = match sent {
            Ok(a) => a,
            Err(e) if e.is_timeout() => return Err(Fault::Timeout { after_ms: TOOL_TIMEOUT.as_millis() as u64 }),
            Err(_) => return Err(Fault::Reset),
        };
        let status = answer.status().as_u16();
        let retry_after_ms = answer
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| (s * 1000.0) as u64);
        let text = match answer.text().await {
            Ok(t) => t,
            Err(_) => return Err(Fault::Reset),
        };
        if !(200..300).contains(&status) {
            let line: String = text.lines().next().unwrap_or_default().chars().take(200).collect();
            let message = (!line.trim().is_empty()).then_some(line);
            return Err(Fault::Http { status, retry_after_ms, param: None, message });
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
}

/// The path a request goes to upstream: as the agent sent it, with the format's version put
/// back where the agent's SDK left it out (`/messages` is `/v1/messages`).
fn upstream_path(format: Format, path: &str) -> String {
    if path.starts_with("/v1/") || path.starts_with("/v1beta/") {
        return path.to_owned();
    }
    let version = match format {
        Format::OpenAiChat | Format::OpenAiResponses | Format::Anthropic => "/v1",
        Format::Gemini => "/v1beta",
        Format::GeminiOpenAi => "/v1beta/openai",
    };
    format!("{version}{path}")
}

/// What one request is, for the forwarding.
pub struct Forward<'a> {
    pub agent: u32,
    pub prefix: Option<u32>,
    pub format: Format,
    /// The path after any `/agents/K` prefix, and the query.
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
    pub body: Bytes,
}

/// One provider request in live mode: refused by the limits, a fault or the spending limit as
/// the scenario says, else forwarded and its answer streamed back and recorded.
pub async fn forward(shared: &Arc<Shared>, upstream: &Arc<Upstream>, req: Forward<'_>) -> Response {
    let Forward { agent, prefix, format, path, query, headers, body } = req;
    let Place { asked, started_ms, epoch, usd, broken: plan, rewritten } =
        match admit(shared, upstream, agent, (prefix, format, path), &body) {
            Ok(place) => place,
            Err(reply) => return respond(reply).await,
        };
    let body = rewritten.map_or(body, Bytes::from);
    // Settled at the most it could cost unless its usage settles it: the agent may go away
    // while it is sent.
    let mut unsettled = Unsettled { upstream: upstream.clone(), usd };
    let base = upstream.base(format).to_owned();
    let mut url = format!("{base}{}", upstream_path(format, path));
    if let Some(q) = query {
        url.push('?');
        url.push_str(q);
    }
    let mut out = reqwest::header::HeaderMap::new();
    let named = connection_named(headers);
    for (k, v) in headers {
        if !HOP_HEADERS.contains(&k.as_str()) && k != "accept-encoding" && !named.iter().any(|n| n == k.as_str()) {
            out.append(k.clone(), v.clone());
        }
    }
    let answer = match upstream.client.post(&url).headers(out).body(body).send().await {
        Ok(a) => a,
        Err(e) => {
            // The place is given back only when nothing can have reached the provider.
            // (Else it may have reached the provider: spent at the most it could cost.)
            if e.is_connect() || e.is_builder() {
                upstream.release(unsettled.usd.take());
            }
            // Without its URL: a query may hold a key (Gemini's `?key=`).
            let e = e.without_url();
            let why = if e.is_timeout() { "timed out".to_owned() } else { error_chain(&e) };
            let message = format!(
                "tracefault: the upstream {base} could not be reached ({why}); the request was not answered by the provider"
            );
            {
                let mut m = shared.lock();
                if m.epoch == epoch
                    && let Some(w) = m.world(agent)
                {
                    // A stream fault of a request that got no answer did not fire.
                    if let Some(p) = plan {
                        w.stream_fault(p.fault.rule, false);
                    }
                    w.upstream_failures += 1;
                    w.note(format!("the upstream {base} could not be reached ({why}): not the model's behaviour"));
                }
            }
            return respond(Reply::json(502, &json!({"error": {"type": "upstream_unreachable", "message": message}})))
                .await;
        }
    };
    let status = answer.status().as_u16();
    let is_sse = answer
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    // A stream fault breaks a good answer only; an answer that is no stream breaks as a whole.
    let unfired = plan.filter(|_| status != 200).map(|p| p.fault.rule);
    let plan = plan.filter(|_| status == 200);
    if let Some(plan) = plan.filter(|_| !is_sse) {
        let (bytes, broken) = match answer.bytes().await {
            Ok(b) => (b.to_vec(), None),
            Err(e) => (Vec::new(), Some(error_chain(&e.without_url()))),
        };
        let whole = broken.is_none() && bytes.len() < KEPT_BYTES;
        let reply = match &broken {
            None => break_whole(
                Reply::raw(status, bytes.clone(), "application/json"),
                plan.fault.how,
                format,
                plan.n,
                plan.stall,
            ),
            Some(_) => Reply::reset(),
        };
        if let mut m = shared.lock()
            && m.epoch == epoch
            && let Some((w, limits)) = m.agent(agent)
        {
            w.stream_fault(plan.fault.rule, true);
            let latency_ms = w.clock.now_ms().saturating_sub(started_ms);
            let kept = &bytes[..bytes.len().min(KEPT_BYTES)];
            let injected = plan.fault.fails().then_some(plan);
            let a = Answered { asked, status, is_sse, kept, latency_ms, broken, agent_left: false, injected };
            let usage = answered(w, a);
            limits.provider.charge(usage.output);
            settle(w, &mut unsettled, usage, status, whole);
        }
        return respond(reply).await;
    }
    let mut breaking =
        plan.map(|p| Breaking::new(p.fault.after_events, p.fault.how, format.stream_error_event(p.n), p.stall));
    let mut response = Response::builder().status(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY));
    let named = connection_named(answer.headers());
    for (k, v) in answer.headers() {
        if HOP_HEADERS.contains(&k.as_str()) || named.iter().any(|n| n == k.as_str()) {
            continue;
        }
        if let Ok(name) = HeaderName::from_bytes(k.as_str().as_bytes()) {
            response = response.header(name, v.as_bytes());
        }
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<std::result::Result<Bytes, std::io::Error>>(16);
    let shared = shared.clone();
    tokio::spawn(async move {
        let mut answer = answer;
        let mut kept = Vec::new();
        let mut broken = None;
        let mut agent_left = false;
        // The steps a stream fault makes of the answer; whether it ended the stream early.
        let mut steps = Vec::new();
        let mut stopped = false;
        'read: loop {
            match answer.chunk().await {
                Ok(Some(bytes)) => {
                    // What the provider sent is read for its usage, whatever reached the agent.
                    if kept.len() < KEPT_BYTES {
                        let room = KEPT_BYTES - kept.len();
                        kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
                    }
                    let Some(b) = &mut breaking else {
                        if tx.send(Ok(bytes)).await.is_err() {
                            agent_left = true;
                            break;
                        }
                        continue;
                    };
                    b.feed(&bytes, &mut steps);
                    for step in steps.drain(..) {
                        match step {
                            Step::Pass(bytes) => {
                                if tx.send(Ok(Bytes::from(bytes))).await.is_err() {
                                    agent_left = true;
                                    break 'read;
                                }
                            }
                            Step::Stall(d) => tokio::time::sleep(d).await,
                            Step::Cut => {
                                stopped = true;
                                // What was sent reaches the agent first (hyper drops a body
                                // that fails at once with what it holds unsent).
                                tokio::time::sleep(Duration::from_millis(20)).await;
                                let cut = std::io::Error::new(
                                    std::io::ErrorKind::ConnectionReset,
                                    "tracefault cut the stream (stream_cut)",
                                );
                                let _ = tx.send(Err(cut)).await;
                                break 'read;
                            }
                            Step::End => {
                                stopped = true;
                                break 'read;
                            }
                        }
                    }
                }
                Ok(None) => {
                    if let Some(b) = &mut breaking {
                        b.finish(&mut steps);
                        for step in steps.drain(..) {
                            if let Step::Pass(bytes) = step {
                                let _ = tx.send(Ok(Bytes::from(bytes))).await;
                            }
                        }
                    }
                    break;
                }
                Err(e) => {
                    let e = e.without_url();
                    broken = Some(error_chain(&e));
                    let _ = tx.send(Err(std::io::Error::other(e))).await;
                    break;
                }
            }
        }
        // An answer that ends after its run did (the agent killed, the next run begun) is no
        // part of any run.
        let mut m = shared.lock();
        let current = m.epoch == epoch;
        let world = m.agent(agent).filter(|_| current);
        // (Spent all the same: the guard settles it at the most it could cost.)
        let Some((w, limits)) = world else { return };
        let latency_ms = w.clock.now_ms().saturating_sub(started_ms);
        // A usage read from an answer that did not end, or past what is kept, may be short.
        let whole = broken.is_none() && !agent_left && !stopped && kept.len() < KEPT_BYTES;
        let fired = breaking.as_ref().is_some_and(Breaking::fired);
        if let Some(rule) = unfired {
            w.stream_fault(rule, false);
        }
        if let Some(p) = plan {
            w.stream_fault(p.fault.rule, fired);
            if !fired {
                w.note(p.fault.unfired(p.n, "passed on whole"));
            }
        }
        let injected = plan.filter(|p| fired && p.fault.fails());
        let a = Answered { asked, status, is_sse, kept: &kept, latency_ms, broken, agent_left, injected };
        let usage = answered(w, a);
        limits.provider.charge(usage.output);
        settle(w, &mut unsettled, usage, status, whole);
    });
    response.body(AxumBody::new(Channel(rx))).unwrap_or_else(|_| Response::new(AxumBody::empty()))
}

/// Settles a request's reservation at the usage its answer reports when the answer was read
/// `whole` (no usage: a failed answer is not billed, a good one costs what was reserved), else
/// at what was reserved; notes a cost past the reservation.
fn settle(w: &mut World, unsettled: &mut Unsettled, usage: Usage, status: u16, whole: bool) {
    let (Some(b), Some(r)) = (&unsettled.upstream.budget, unsettled.usd.take()) else { return };
    let billed = match (usage.is_empty(), status, whole) {
        (_, _, false) | (true, 200, _) => None,
        (false, _, true) => Some(usage),
        (true, _, true) => Some(Usage::default()),
    };
    let cost = b.settle(r, billed);
    if cost > r.most as f64 / 1e12 {
        w.note(format!(
            "request {}: cost ${cost:.6}, more than the ${:.6} reserved for it (an image or file linked by URL or id is \
             billed beyond its bytes): --max-usd may be passed",
            w.model_calls,
            r.most as f64 / 1e12
        ));
    }
}

/// A live request's place (its conversation, turn, and the clock's reading) when it goes upstream; else the answer
/// it gets here: the fleet's limits, a provider fault, the spending limit.
/// `to`: the request's `/agents/K` prefix, format and path.
fn admit(
    shared: &Shared,
    upstream: &Upstream,
    agent: u32,
    to: (Option<u32>, Format, &str),
    body: &[u8],
) -> std::result::Result<Place, Reply> {
    let (prefix, format, path) = to;
    let mut m = shared.lock();
    let (w, limits) = m.agent(agent).expect("an agent of the fleet, checked by the caller");
    w.http_requests[0] += 1;
    w.trace.header.provider.get_or_insert_with(|| format.name().to_owned());
    let parsed = serde_json::from_slice::<Value>(body).ok();
    // The trace names the model the agent asked for (Gemini names it in the path), not the mock.
    if w.trace.header.model.as_deref().is_none_or(|m| m.starts_with("mock:")) {
        let named = parsed
            .as_ref()
            .and_then(|b| b["model"].as_str())
            .or_else(|| path.split_once("/models/").map(|(_, m)| m.split_once(':').map_or(m, |(name, _)| name)));
        let named: String = named.unwrap_or("unnamed").chars().take(200).collect();
        w.trace.header.model = Some(format!("live:{named}"));
    }
    let items = parsed.map(|b| format.request_items(&b)).unwrap_or_default();
    let c = conversation(w, prefix, format, &items);
    // Results the scenario's tool faults fail are rewritten before the model reads them (and
    // recorded as it reads them); the body goes as the agent sent it otherwise, byte for byte.
    let rewritten = upstream
        .rewrite
        .as_ref()
        .and_then(|strategy| rewrite(w, c, format, strategy, (body, &items), |n| positional(c, n)));
    record_history(w, c, &items);
    w.conversation(c).requests += 1;
    let seq = w.conversation(c).requests;
    let body = rewritten.as_deref().unwrap_or(body);
    // The spending limit first: a request it refuses meets no fault and takes no place under
    // the fleet's limits; a request a fault or a limit refuses gives its reservation back.
    let usd = match upstream.reserve(format, path, body) {
        Ok(usd) => usd,
        Err(why) => {
            w.spending_refusals += 1;
            if w.spending_refusals == 1 {
                w.note(format!(
                    "the spending limit refused a request ({why}); refused requests were never sent to the provider"
                ));
            }
            let message =
                format!("tracefault: the spending limit refused this request ({why}); it was not sent to the provider");
            return Err(Reply::json(403, &json!({"error": {"type": "spending_limit", "message": message}})));
        }
    };
    let n = w.model_calls as u32 + 1;
    let broken = match refusal(w, &mut limits.provider, c, format, n, body.len() as u64 / 4) {
        Ok(broken) => broken,
        Err(reply) => {
            upstream.release(usd);
            return Err(reply);
        }
    };
    let broken = broken.map(|fault| BreakPlan { fault, n, stall: fault.stall(&w.clock) });
    let (turn, now) = (w.conversation(c).turns + 1, w.clock.now_ms());
    let unnamed = items
        .iter()
        .map(|i| match i {
            Item::Model { calls, .. } => calls.iter().filter(|c| c.id.is_none()).count(),
            _ => 0,
        })
        .sum();
    let asked = Asked { c, turn, seq, format, unnamed };
    Ok(Place { asked, started_ms: now, epoch: m.epoch, usd, broken, rewritten })
}

/// Where a request admitted stands.
struct Place {
    asked: Asked,
    /// The clock's reading when it went, and the run's epoch.
    started_ms: u64,
    epoch: u64,
    usd: Option<Reservation>,
    /// The `stream_*` fault its answer meets.
    broken: Option<BreakPlan>,
    /// Its body with tool results rewritten (`--rewrite`), when any was.
    rewritten: Option<Vec<u8>>,
}

/// What its answer is recorded against: the request's conversation and turn, its format and
/// the calls without an id in its history (its answer's are numbered on from there).
#[derive(Clone, Copy)]
struct Asked {
    c: usize,
    turn: u32,
    /// Its number among the conversation's requests.
    seq: u32,
    format: Format,
    unnamed: usize,
}

/// A `stream_*` fault request `n` met, a stall lasting `stall` in real time.
#[derive(Clone, Copy)]
struct BreakPlan {
    fault: StreamFault,
    n: u32,
    stall: Duration,
}

/// A request's USD reservation until its answer settles it; settled at the most it could cost
/// when dropped unsettled (the agent went away, the run ended, the send failed past connecting).
struct Unsettled {
    upstream: Arc<Upstream>,
    usd: Option<Reservation>,
}

impl Drop for Unsettled {
    fn drop(&mut self) {
        if let (Some(b), Some(r)) = (&self.upstream.budget, self.usd.take()) {
            b.settle(r, None);
        }
    }
}

/// The id the `n`th call without one in conversation `c` is recorded under (Gemini's calls
/// often have none); the `n`th result without one sent back in it gets the same (results come
/// back in the calls' order). Named by the conversation's index, which the world never gives
/// twice: two conversations that open alike (an agent run again behind one proxy) keep their
/// calls apart.
fn positional(c: usize, n: usize) -> String {
    format!("tracefault-{c}-{n}")
}

/// The headers a message's `Connection` field names: the connection's own, never forwarded
/// (RFC 9110 §7.6.1), lower case.
fn connection_named(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("connection")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// An error with its causes, on one line (reqwest's own says little: "error sending request").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// The conversation a live request belongs to: the one that gave out (or saw) one of its
/// call ids; else, when it carries calls or results, the latest of its agent prefix that opened
/// with the same first message (a sub-agent's conversation, begun in the middle of its
/// parent's, does not take the parent's next request), or failing that the latest of its
/// prefix; else (a first request) a new one.
fn conversation(w: &mut World, prefix: Option<u32>, format: Format, items: &[Item]) -> usize {
    let ids = call_ids(items);
    if let Some(c) = ids.iter().rev().find_map(|id| w.owner.get(id).copied())
        && let Some(c) = w.conversation_index(c)
    {
        return c;
    }
    let opening = opening(items);
    let continues = items.iter().any(|i| matches!(i, Item::Result { .. } | Item::Model { .. }));
    if continues {
        let mut latest = w.conversations.iter().rev().filter(|(_, conv)| conv.agent == prefix);
        let alike = latest.clone().find(|(_, conv)| conv.opening == opening);
        if let Some((&c, _)) = alike.or_else(|| latest.next()) {
            return c;
        }
    }
    w.add_conversation(|w, index| {
        let mut conv = super::conversation::Conversation::new(w.conversation_key(index), index, prefix, format);
        conv.opening = opening;
        conv
    })
}

/// A digest of a request's first message, which every request of its conversation repeats.
fn opening(items: &[Item]) -> u64 {
    use std::fmt::Write;
    items.first().map_or(0, |i| {
        let mut h = crate::engine::rng::Fnv1a64::default();
        // Writing into a hash cannot fail.
        let _ = write!(h, "{i:?}");
        h.0
    })
}

/// What a request's history shows that the trace has not yet: the model's calls (when the
/// answer that made them was a stream, read from the history the agent sends back) and their
/// results, in the order the agent sends them.
fn record_history(w: &mut World, c: usize, items: &[Item]) {
    let turn = w.conversation(c).turns;
    let mut seen: BTreeSet<String> = BTreeSet::new();
    // Calls and results without an id so far (the nth of each paired).
    let (mut calls_unnamed, mut results_unnamed) = (0, 0);
    // The calls in the history, by id: a result's tool and arguments.
    let mut called: std::collections::BTreeMap<String, (&str, &Args)> = std::collections::BTreeMap::new();
    for item in items {
        match item {
            Item::Model { calls, .. } => {
                for call in calls {
                    let id = call.id.clone().unwrap_or_else(|| {
                        calls_unnamed += 1;
                        positional(c, calls_unnamed - 1)
                    });
                    called.insert(id.clone(), (call.name.as_str(), &call.args));
                    if w.owner.contains_key(&id) {
                        continue;
                    }
                    w.own(id.clone(), c);
                    w.record(TraceEvent::ToolCall {
                        turn,
                        call_id: id,
                        name: call.name.clone(),
                        args: call.args.clone(),
                    });
                }
            }
            Item::Result { id, content, flag, .. } => {
                let id = id.clone().unwrap_or_else(|| {
                    results_unnamed += 1;
                    positional(c, results_unnamed - 1)
                });
                let key = format!("result:{id}");
                if w.owner.contains_key(&key) || !seen.insert(key.clone()) {
                    continue;
                }
                w.own(key, c);
                // A call that reached the mock tools failed as they answered it; else as the
                // result's own error flag says. The call: in this request, else as recorded (a
                // Responses request continuing an earlier response holds no calls).
                let call = called
                    .get(&id)
                    .map(|&(tool, args)| (tool.to_owned(), args.clone()))
                    .or_else(|| w.recorded_call(&id).map(|(tool, args)| (tool.to_owned(), args.clone())));
                let call = call.map(|(tool, args)| (tool, recorded_args_key(&args)));
                let mocked = call.as_ref().and_then(|(tool, key)| w.outcomes.get(&(tool.clone(), *key)).copied());
                let flagged = flag.is_some_and(|(failed, _)| failed);
                let (failed, class, evidence) = match mocked {
                    Some(class) => (
                        class.is_some_and(crate::fault::ErrorClass::is_failure),
                        class,
                        Some("class from the mock tool's own outcome".to_owned()),
                    ),
                    None => (flagged, None, flagged.then(|| "the provider's error flag on the result".to_owned())),
                };
                if let Some((tool, key)) = &call {
                    w.result_read(c, (tool, *key), failed, class);
                }
                let error_class = class.map(|c| c.name().to_owned());
                w.record(TraceEvent::ToolResult {
                    call_id: id,
                    ok: !failed,
                    status: None,
                    content: content.clone(),
                    error_class,
                    latency_ms: None,
                    attempts: None,
                    evidence,
                    cancelled: false,
                    attempt_ms: Vec::new(),
                });
            }
            _ => {}
        }
    }
}

/// What came back from upstream for one request.
struct Answered<'a> {
    asked: Asked,
    status: u16,
    is_sse: bool,
    kept: &'a [u8],
    latency_ms: u64,
    /// The upstream's stream broke off (why).
    broken: Option<String>,
    /// The stream fault that kept the agent from the answer whole.
    injected: Option<BreakPlan>,
    /// The agent closed its connection before the answer ended.
    agent_left: bool,
}

/// Records an answer from upstream: a model call with its usage, the calls it made (ids kept,
/// so the results that come back are known), and whether it ended the conversation; returns
/// the usage it reports, as billed.
fn answered(w: &mut World, a: Answered<'_>) -> Usage {
    let Answered { asked, status, is_sse, kept, latency_ms, broken, agent_left, injected } = a;
    let Asked { c, turn, seq, format, unnamed } = asked;
    w.model_calls += 1;
    let text = String::from_utf8_lossy(kept);
    let read = if is_sse { read_stream(&text) } else { read_json(format, &text) };
    if status == 200 && read.is_none() && broken.is_none() {
        w.note(format!(
            "request {}: the provider's answer could not be read ({} bytes); passed on unchanged",
            w.model_calls,
            kept.len()
        ));
    }
    let read = read.unwrap_or_default();
    if let Some(why) = &broken {
        w.note(format!("request {}: the provider's stream broke off ({why})", w.model_calls));
    }
    if agent_left {
        w.note(format!("request {}: the agent closed the connection before the answer ended", w.model_calls));
    }
    if let Some(p) = injected {
        w.note(format!(
            "request {}: tracefault broke the answer ({} after {} events)",
            w.model_calls,
            p.fault.how.name(),
            p.fault.after_events
        ));
    }
    let ok = status == 200 && broken.is_none() && !read.error && injected.is_none();
    if read.error {
        w.note(format!("request {}: the provider's stream carried an error event", w.model_calls));
    }
    if ok {
        w.succeeded(w.provider_target());
    }
    let stop = match (ok, read.calls) {
        (false, _) => Stop::Error,
        (true, true) => Stop::ToolCalls,
        (true, false) => Stop::End,
    };
    w.record(TraceEvent::ModelCall {
        turn,
        status: if ok {
            200
        } else if status == 200 {
            502
        } else {
            status
        },
        tokens_in: read.tokens_in,
        tokens_out: read.tokens_out,
        latency_ms: Some(latency_ms),
        t_ms: None,
        stop,
        text: read.text.clone(),
    });
    let held = w.conversations.contains_key(&c);
    let mut n = unnamed;
    // Only an answer the agent got whole can be acted on: a retry of a broken or abandoned one
    // gets its own (with the same ids when they are positional), recorded then.
    let calls = if ok && !agent_left { read.call_list } else { Vec::new() };
    let final_tool =
        !calls.is_empty() && calls.iter().all(|(_, name, _)| super::conversation::is_final_answer_tool(name));
    for (id, name, args) in calls {
        let id = id.unwrap_or_else(|| {
            n += 1;
            positional(c, n - 1)
        });
        // The agent's next request may have been read first (it acted on the stream's last
        // event): a call recorded from its history is not recorded again.
        if w.owner.contains_key(&id) {
            continue;
        }
        if held {
            w.own(id.clone(), c);
        }
        w.record(TraceEvent::ToolCall { turn, call_id: id, name, args });
    }
    // A conversation forgotten meanwhile (a long proxy holds a bounded number) is not brought back.
    if let Some(conv) = w.conversations.get_mut(&c) {
        if ok {
            conv.turns = turn;
        }
        // An answer while a tool's latest result is a failure stops the task without completing
        // it: the simulated model's give-up, read from what the real one did.
        let ending = if conv.failing.is_empty() { "answer" } else { "gave_up" };
        conv.ended = (ok && !read.calls && !agent_left).then_some(ending);
        conv.answer_by_tool = final_tool.then_some((ending, seq));
    }
    Usage {
        input: read.tokens_in.saturating_add(read.cache_read),
        cache_write: read.cache_write,
        output: read.tokens_out.saturating_add(read.thoughts),
    }
}

/// What an answer says of itself.
#[derive(Default)]
struct Read {
    tokens_in: u64,
    tokens_out: u64,
    /// It asks for tools.
    calls: bool,
    /// The calls, when the answer was read whole: (id, name, arguments).
    call_list: Vec<(Option<String>, String, Args)>,
    text: Option<String>,
    /// A stream that carried an error event (Anthropic's `error`, Responses' `response.failed`).
    error: bool,
    /// Anthropic's cache reads and writes (beside `input_tokens`), Gemini's thinking (beside
    /// `candidatesTokenCount`).
    cache_read: u64,
    cache_write: u64,
    thoughts: u64,
}

/// A JSON answer, read by its format's reader; `None` when it is not one.
fn read_json(format: Format, text: &str) -> Option<Read> {
    let v: Value = serde_json::from_str(text).ok()?;
    let mut read = Read::default();
    usage(&v, &mut read);
    if let Some(Item::Model { text, calls, .. }) = format.provider().response(&v) {
        read.calls = !calls.is_empty();
        read.call_list = calls.into_iter().map(|c| (c.id, c.name, c.args)).collect();
        read.text = text;
    } else {
        read.calls = asks_for_tools(&v);
    }
    Some(read)
}

/// A server-sent-events answer: every `data:` event that is JSON, read for usage (the largest
/// count any event reports: providers repeat and grow them), for a call's mark, and assembled
/// into the answer's text and calls ([`assemble`]); `None` when no event is JSON.
fn read_stream(text: &str) -> Option<Read> {
    let mut read = Read::default();
    let mut whole = Assembly::default();
    let mut any = false;
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data:") else { continue };
        let Ok(v) = serde_json::from_str::<Value>(data.trim()) else { continue };
        any = true;
        // Anthropic's and Responses' error events; Chat's and Gemini's error chunk.
        read.error |= matches!(v.get("type").and_then(Value::as_str), Some("error" | "response.failed"))
            || v.get("error").is_some_and(Value::is_object);
        usage(&v, &mut read);
        read.calls |= asks_for_tools(&v);
        assemble(&v, &mut whole);
    }
    read.text = Some(whole.text).filter(|t| !t.is_empty());
    read.calls |= !whole.calls.is_empty();
    read.call_list = whole
        .calls
        .into_iter()
        .map(|c| {
            let args = match c.whole {
                Some(v) => Args::new(&v),
                None if c.args.trim().is_empty() => Args::new(&json!({})),
                None => parse_args(&c.args),
            };
            (c.id, c.name, args)
        })
        .collect();
    any.then_some(read)
}

/// A stream's text and calls, as its events give them.
#[derive(Default)]
struct Assembly {
    text: String,
    /// In order of first appearance, each under its dialect and index in the stream.
    calls: Vec<StreamCall>,
}

#[derive(Default)]
struct StreamCall {
    key: (u8, u64),
    id: Option<String>,
    name: String,
    /// The arguments' JSON text as it came in pieces, or (`whole`) a value given at once.
    args: String,
    whole: Option<Value>,
}

impl Assembly {
    /// The call at `key`, begun when it is new.
    fn call(&mut self, key: (u8, u64)) -> &mut StreamCall {
        let at = match self.calls.iter().position(|c| c.key == key) {
            Some(at) => at,
            None => {
                self.calls.push(StreamCall { key, ..StreamCall::default() });
                self.calls.len() - 1
            }
        };
        &mut self.calls[at]
    }
}

/// One event's piece of the answer, in any provider's dialect: Chat Completions' deltas (the
/// first choice; Gemini's OpenAI-compatible endpoint too), Anthropic's content blocks, the
/// Responses API's text deltas and finished items, Gemini's candidate parts (thoughts left out).
fn assemble(v: &Value, a: &mut Assembly) {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let index = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    if let Some(choices) = v.get("choices").and_then(Value::as_array) {
        for delta in choices.iter().filter(|c| index(c, "index") == 0).filter_map(|c| c.get("delta")) {
            a.text.push_str(delta.get("content").and_then(Value::as_str).unwrap_or_default());
            for tc in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                let c = a.call((0, index(tc, "index")));
                c.id = c.id.take().or_else(|| s(tc, "id"));
                if let Some(f) = tc.get("function") {
                    if c.name.is_empty() {
                        c.name = s(f, "name").unwrap_or_default();
                    }
                    c.args.push_str(f.get("arguments").and_then(Value::as_str).unwrap_or_default());
                }
            }
        }
        return;
    }
    if let Some(candidates) = v.get("candidates").and_then(Value::as_array) {
        let parts = candidates.first().and_then(|c| c.get("content")).and_then(|c| c.get("parts"));
        for part in parts.and_then(Value::as_array).into_iter().flatten() {
            if let Some(f) = part.get("functionCall") {
                let n = a.calls.len() as u64;
                let c = a.call((3, n));
                (c.id, c.name, c.whole) = (s(f, "id"), s(f, "name").unwrap_or_default(), f.get("args").cloned());
            } else if part.get("thought").and_then(Value::as_bool) != Some(true) {
                a.text.push_str(part.get("text").and_then(Value::as_str).unwrap_or_default());
            }
        }
        return;
    }
    let none = Value::Null;
    match v.get("type").and_then(Value::as_str) {
        Some("content_block_start") => {
            let block = v.get("content_block").unwrap_or(&none);
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => {
                    let c = a.call((1, index(v, "index")));
                    (c.id, c.name) = (s(block, "id"), s(block, "name").unwrap_or_default());
                }
                Some("text") => a.text.push_str(block.get("text").and_then(Value::as_str).unwrap_or_default()),
                _ => {}
            }
        }
        Some("content_block_delta") => {
            let delta = v.get("delta").unwrap_or(&none);
            match delta.get("type").and_then(Value::as_str) {
                Some("text_delta") => a.text.push_str(delta.get("text").and_then(Value::as_str).unwrap_or_default()),
                Some("input_json_delta") => {
                    let piece = delta.get("partial_json").and_then(Value::as_str).unwrap_or_default();
                    a.call((1, index(v, "index"))).args.push_str(piece);
                }
                _ => {}
            }
        }
        Some("response.output_text.delta") => {
            a.text.push_str(v.get("delta").and_then(Value::as_str).unwrap_or_default())
        }
        Some("response.output_item.done") => {
            let item = v.get("item").unwrap_or(&none);
            let args = match item.get("type").and_then(Value::as_str) {
                Some("function_call") => item.get("arguments").and_then(Value::as_str).map(|t| (t.to_owned(), None)),
                // As the Responses reader takes it: the freeform input is the arguments.
                Some("custom_tool_call") => Some((String::new(), Some(item.get("input").cloned().unwrap_or_default()))),
                _ => None,
            };
            if let Some((text, whole)) = args {
                let c = a.call((2, index(v, "output_index")));
                (c.id, c.name, c.args, c.whole) =
                    (s(item, "call_id"), s(item, "name").unwrap_or_default(), text, whole);
            }
        }
        _ => {}
    }
}

/// The usage fields of every provider, wherever they sit in `v`: the largest of each.
fn usage(v: &Value, read: &mut Read) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let n = x.as_u64();
                match (k.as_str(), n) {
                    ("prompt_tokens" | "input_tokens" | "promptTokenCount", Some(n)) => {
                        read.tokens_in = read.tokens_in.max(n)
                    }
                    ("completion_tokens" | "output_tokens" | "candidatesTokenCount", Some(n)) => {
                        read.tokens_out = read.tokens_out.max(n)
                    }
                    ("cache_read_input_tokens", Some(n)) => read.cache_read = read.cache_read.max(n),
                    ("cache_creation_input_tokens", Some(n)) => read.cache_write = read.cache_write.max(n),
                    ("thoughtsTokenCount", Some(n)) => read.thoughts = read.thoughts.max(n),
                    _ => usage(x, read),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| usage(x, read)),
        _ => {}
    }
}

/// Whether a piece of an answer asks for a tool, in any provider's shape: OpenAI's
/// `tool_calls` (or a `tool_calls` finish), a Responses `function_call` item, an Anthropic
/// `tool_use` block (or stop), a Gemini `functionCall` part.
fn asks_for_tools(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.iter().any(|(k, x)| match (k.as_str(), x) {
            ("tool_calls", Value::Array(a)) => !a.is_empty(),
            ("functionCall", Value::Object(_)) => true,
            ("type", Value::String(t)) => matches!(t.as_str(), "function_call" | "tool_use" | "custom_tool_call"),
            ("finish_reason" | "stop_reason", Value::String(r)) => matches!(r.as_str(), "tool_calls" | "tool_use"),
            _ => asks_for_tools(x),
        }),
        Value::Array(a) => a.iter().any(asks_for_tools),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_parse_and_refuse_what_is_no_origin() {
        let u = Upstream::new(&["openai=http://127.0.0.1:9/,gemini=https://g.example/x".into()], None, None).unwrap();
        assert_eq!(u.base(Format::OpenAiChat), "http://127.0.0.1:9");
        assert_eq!(u.base(Format::Anthropic), "https://api.anthropic.com");
        assert_eq!(u.base(Format::GeminiOpenAi), "https://g.example/x");
        for bad in ["openai", "mistral=http://x", "openai=ftp://x", "openai=http://k:s@x", "openai=http://x?a=1"] {
            let e = Upstream::new(&[bad.into()], None, None).err().unwrap().to_string();
            assert!(e.contains("--upstream"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_limit_is_never_passed() {
        let u = Upstream::new(&[], Some(2), None).unwrap();
        let reserve = || u.reserve(Format::OpenAiChat, "/v1/chat/completions", b"{}");
        assert!(reserve().is_ok() && reserve().is_ok());
        assert_eq!(reserve().unwrap_err(), "--max-model-calls 2 reached");
        u.release(None);
        assert!(reserve().is_ok());
        assert!(reserve().is_err());
        assert_eq!(u.sent(), 2);
    }

    /// Both limits at once: a request the USD limit refuses takes no call's place.
    #[test]
    fn a_request_the_usd_limit_refuses_takes_no_place() {
        let price =
            crate::engine::scenario::Price { input_per_mtok: 1.0, output_per_mtok: 1.0, max_output_tokens: None };
        let budget = Budget::new(0.01, &std::collections::BTreeMap::from([("m".to_owned(), price)])).unwrap();
        let u = Upstream::new(&[], Some(5), Some(budget)).unwrap();
        let cheap = br#"{"model": "m", "max_tokens": 10}"#;
        let dear = br#"{"model": "m", "max_tokens": 100000}"#;
        let r = u.reserve(Format::OpenAiChat, "/", cheap).unwrap();
        assert!(r.is_some());
        assert!(u.reserve(Format::OpenAiChat, "/", dear).unwrap_err().contains("--max-usd 0.01"));
        assert_eq!(u.sent(), 1);
        u.release(r);
        assert_eq!((u.sent(), u.spending()), (0, Some((0.01, 0.0))));
    }

    /// What is billed beside the plain counts: Anthropic's cache reads and writes, Gemini's
    /// thinking; OpenAI's cached tokens are inside `prompt_tokens` already.
    #[test]
    fn cache_and_thinking_tokens_are_read_for_pricing() {
        let mut read = Read::default();
        usage(
            &json!({"usage": {"input_tokens": 7, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 50,
                "output_tokens": 3}}),
            &mut read,
        );
        usage(&json!({"usageMetadata": {"candidatesTokenCount": 4, "thoughtsTokenCount": 9}}), &mut read);
        usage(&json!({"usage": {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 2}}}), &mut read);
        let got = (read.tokens_in, read.cache_read, read.cache_write, read.tokens_out, read.thoughts);
        assert_eq!(got, (7, 100, 50, 4, 9));
    }

    /// Headers the `Connection` field names are the hop's own, in any case.
    #[test]
    fn connection_named_headers_are_the_hops() {
        let mut h = HeaderMap::new();
        h.append("connection", "Keep-Alive, X-Hop".parse().unwrap());
        h.append("connection", "close".parse().unwrap());
        assert_eq!(connection_named(&h), ["keep-alive", "x-hop", "close"]);
    }

    /// Each dialect's stream assembled into its answer's text and calls: Chat Completions'
    /// pieces of arguments by index, Anthropic's blocks and `input_json_delta`s, the Responses
    /// API's finished items (a freeform call's input as its arguments), Gemini's parts without
    /// their thoughts and calls without ids.
    #[test]
    fn streams_are_assembled_into_text_and_calls() {
        let chat = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Let me \"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"look.\",\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"function\":{\"name\":\"search\",\"arguments\":\"{\\\"q\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"function\":{\"name\":\"get\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Paris\\\"}\"}}]}}]}\n\n",
            "data: [DONE]\n\n"
        );
        let r = read_stream(chat).unwrap();
        assert_eq!(r.text.as_deref(), Some("Let me look."));
        let calls: Vec<_> = r.call_list.iter().map(|(id, n, a)| (id.as_deref(), n.as_str(), a.to_string())).collect();
        assert_eq!(
            calls,
            [(Some("call_a"), "search", r#"{"q":"Paris"}"#.to_owned()), (Some("call_b"), "get", "{}".to_owned())]
        );
        let anthropic = concat!(
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"On it.\"}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"search\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\": \\\"Pa\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"ris\\\"}\"}}\n\n"
        );
        let r = read_stream(anthropic).unwrap();
        assert_eq!(r.text.as_deref(), Some("On it."));
        assert_eq!(r.call_list.len(), 1);
        assert_eq!(
            (r.call_list[0].0.as_deref(), r.call_list[0].2.to_string()),
            (Some("toolu_1"), r#"{"q":"Paris"}"#.to_owned())
        );
        let responses = concat!(
            "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Patching.\"}\n\n",
            "data: {\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":{\"type\":\"custom_tool_call\",\"call_id\":\"call_p\",\"name\":\"apply_patch\",\"input\":\"*** Begin Patch\"}}\n\n"
        );
        let r = read_stream(responses).unwrap();
        assert_eq!(r.text.as_deref(), Some("Patching."));
        assert_eq!(
            (r.call_list[0].1.as_str(), r.call_list[0].2.to_string()),
            ("apply_patch", r#""*** Begin Patch""#.to_owned())
        );
        let gemini = concat!(
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hmm\",\"thought\":true},{\"text\":\"Sure.\"}]}}]}\r\n\r\n",
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"get\",\"args\":{\"city\":\"Oslo\"}}},{\"functionCall\":{\"name\":\"get\",\"args\":{\"city\":\"Rome\"}}}]}}]}\r\n\r\n"
        );
        let r = read_stream(gemini).unwrap();
        assert_eq!(r.text.as_deref(), Some("Sure."));
        let calls: Vec<_> = r.call_list.iter().map(|(id, _, a)| (id.is_none(), a.to_string())).collect();
        assert_eq!(calls, [(true, r#"{"city":"Oslo"}"#.to_owned()), (true, r#"{"city":"Rome"}"#.to_owned())]);
    }

    #[test]
    fn paths_get_their_version_back() {
        assert_eq!(upstream_path(Format::Anthropic, "/messages"), "/v1/messages");
        assert_eq!(upstream_path(Format::OpenAiChat, "/v1/chat/completions"), "/v1/chat/completions");
        assert_eq!(upstream_path(Format::Gemini, "/models/m:generateContent"), "/v1beta/models/m:generateContent");
        assert_eq!(upstream_path(Format::GeminiOpenAi, "/chat/completions"), "/v1beta/openai/chat/completions");
    }

    /// Usage and a call's mark from each provider's stream, counted by hand from the events.
    #[test]
    fn streams_are_read_for_usage_and_calls() {
        let anthropic = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n\
            event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get\",\"input\":{}}}\n\n\
            event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":15}}\n\n";
        let r = read_stream(anthropic).unwrap();
        assert_eq!((r.tokens_in, r.tokens_out, r.calls), (25, 15, true));
        let chat = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n\
            data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n\
            data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11}}\n\ndata: [DONE]\n\n";
        let r = read_stream(chat).unwrap();
        assert_eq!((r.tokens_in, r.tokens_out, r.calls), (9, 2, false));
        let gemini = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"get\",\"args\":{}}}]}}],\"usageMetadata\":{\"promptTokenCount\":7,\"candidatesTokenCount\":3}}\r\n\r\n";
        let r = read_stream(gemini).unwrap();
        assert_eq!((r.tokens_in, r.tokens_out, r.calls), (7, 3, true));
        assert!(read_stream("not an event stream").is_none());
        let overloaded = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n\
            event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        assert!(read_stream(overloaded).unwrap().error, "an error event mid-stream");
        assert!(!read_stream(anthropic).unwrap().error);
    }

    #[test]
    fn a_json_answer_is_read_by_its_format() {
        let body = json!({"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "lookup", "arguments": "{\"q\":\"x\"}"}}]}}],
            "usage": {"prompt_tokens": 31, "completion_tokens": 12, "total_tokens": 43}});
        let r = read_json(Format::OpenAiChat, &body.to_string()).unwrap();
        assert_eq!((r.tokens_in, r.tokens_out, r.calls), (31, 12, true));
        assert_eq!(r.call_list.len(), 1);
        assert_eq!(r.call_list[0].0.as_deref(), Some("call_1"));
        assert_eq!(r.call_list[0].1, "lookup");
        assert!(read_json(Format::OpenAiChat, "<html>").is_none());
    }
}
