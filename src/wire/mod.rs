//! Wire mode: the mocks behind real HTTP (wiremock on tokio), so a user's own agent or an
//! official SDK talks to them. Mock providers (OpenAI Chat and Responses, Anthropic Messages,
//! Gemini generateContent and its OpenAI-compatible endpoint, streaming or not) play the model;
//! mock tools at `/tools/{name}` inject the scenario's faults. This is the only async code.

pub mod brain;
pub mod respond;
pub mod state;
pub mod tools;
pub mod validate;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use self::state::WireState;
use crate::envelope::Format;
use crate::error::Error;
use crate::scenario::Scenario;
use crate::trace::TraceEvent;
use crate::trace::import::{anthropic, gemini, openai_chat, openai_responses};

/// Requests larger than this are refused with 413.
pub const MAX_BODY_BYTES: usize = 8 << 20;

#[derive(Clone, Copy, Debug)]
enum Endpoint {
    Provider(Format),
    GeminiStream,
    Tool,
}

struct Handler {
    state: Arc<Mutex<WireState>>,
    endpoint: Endpoint,
}

fn lock(state: &Mutex<WireState>) -> MutexGuard<'_, WireState> {
    // A panic in one handler must not take the mock down for the rest of the run.
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl Respond for Handler {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        if req.body.len() > MAX_BODY_BYTES {
            return ResponseTemplate::new(413).set_body_string(format!("request body over {MAX_BODY_BYTES} bytes"));
        }
        let mut state = lock(&self.state);
        match self.endpoint {
            Endpoint::Tool => {
                let name = req.url.path().trim_start_matches("/tools/").to_owned();
                tools::respond(&mut state, &name, req)
            }
            Endpoint::Provider(f) => provider(&mut state, f, req, false),
            Endpoint::GeminiStream => provider(&mut state, Format::Gemini, req, true),
        }
    }
}

/// The conversation a request carries, parsed by the same code as the importers.
fn items(format: Format, body: &Value) -> Vec<crate::trace::import::conversation::Item> {
    let list = |k: &str| body.get(k).and_then(Value::as_array).cloned().unwrap_or_default();
    match format {
        Format::OpenAiChat | Format::GeminiOpenAi => openai_chat::items(&list("messages"), "/messages"),
        Format::OpenAiResponses => openai_responses::items(&list("input"), "/input"),
        Format::Anthropic => anthropic::items(&list("messages"), "/messages"),
        Format::Gemini => gemini::items(&list("contents"), "/contents"),
    }
    .unwrap_or_default()
}

fn provider(state: &mut WireState, format: Format, req: &Request, gemini_stream: bool) -> ResponseTemplate {
    let n = state.model_calls as u32 + 1;
    let request_id = format!("req_tracefault_{n:06}");
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => {
            return respond::provider_error(format, 400, None, n)
                .set_body_string(format!("request body is not JSON: {e}"));
        }
    };
    state.trace.header.provider.get_or_insert_with(|| format.name().to_owned());
    if let Some(v) = validate::validate(format, &body, &request_id) {
        state.findings.push((1, format!("the provider rejected request {n}: {}", v.body)));
        return ResponseTemplate::new(400)
            .set_body_raw(v.body.to_string().into_bytes(), "application/json")
            .insert_header("x-request-id", request_id.clone())
            .insert_header("request-id", request_id);
    }
    let prov = state.provider_target();
    let latency = state.scenario.profile.model_latency_ms;
    if let Some(f) = state.decide(prov, latency) {
        let fault = state.fault(f.rule).clone();
        state.faults_injected += 1;
        state.model_calls += 1;
        let status = fault.status().unwrap_or(503);
        state.trace.events.push(TraceEvent::ModelCall {
            turn: state.turns + 1,
            status,
            tokens_in: 0,
            tokens_out: 0,
            latency_ms: None,
            stop: crate::trace::Stop::Error,
            text: None,
        });
        return respond::provider_error(format, status, f.retry_after_ms, n);
    }
    state.successes[prov] += 1;
    let stream = gemini_stream || body.get("stream").and_then(Value::as_bool) == Some(true);
    let model = body.get("model").and_then(Value::as_str).unwrap_or("tracefault-mock").to_owned();
    let conversation = items(format, &body);
    let tokens_in = req.body.len() as u64 / 4;
    let reply = brain::next_turn(state, &conversation, format, tokens_in);
    let tokens_out = state
        .trace
        .events
        .iter()
        .rev()
        .find_map(|e| match e {
            TraceEvent::ModelCall { tokens_out, .. } => Some(*tokens_out),
            _ => None,
        })
        .unwrap_or_default();
    respond::reply(format, &reply, &model, n, (tokens_in, tokens_out), stream)
}

/// A running mock server and the state of its current run.
pub struct WireServer {
    pub server: MockServer,
    pub state: Arc<Mutex<WireState>>,
}

impl WireServer {
    /// Binds `addr` (127.0.0.1 unless told otherwise) and mounts every mock.
    pub async fn start(scenario: Scenario, addr: SocketAddr) -> Result<WireServer, Error> {
        let listener = std::net::TcpListener::bind(addr).map_err(|e| {
            let what = if e.kind() == std::io::ErrorKind::AddrInUse {
                "is in use (pick another --addr, or port 0 for any free one)".to_owned()
            } else {
                e.to_string()
            };
            Error::Usage(format!("cannot listen on {addr}: {what}"))
        })?;
        let server = MockServer::builder().listener(listener).start().await;
        let state = Arc::new(Mutex::new(WireState::new(scenario, 0)));
        let mount = |m: Mock| m.mount(&server);
        let h = |endpoint| Handler { state: state.clone(), endpoint };
        mount(
            Mock::given(method("POST"))
                .and(path("/v1/chat/completions"))
                .respond_with(h(Endpoint::Provider(Format::OpenAiChat))),
        )
        .await;
        mount(
            Mock::given(method("POST"))
                .and(path("/v1/responses"))
                .respond_with(h(Endpoint::Provider(Format::OpenAiResponses))),
        )
        .await;
        mount(
            Mock::given(method("POST"))
                .and(path("/v1/messages"))
                .respond_with(h(Endpoint::Provider(Format::Anthropic))),
        )
        .await;
        mount(
            Mock::given(method("POST"))
                .and(path_regex(r"^/v1(beta)?/models/[^/:]+:generateContent$"))
                .respond_with(h(Endpoint::Provider(Format::Gemini))),
        )
        .await;
        mount(
            Mock::given(method("POST"))
                .and(path_regex(r"^/v1(beta)?/models/[^/:]+:streamGenerateContent$"))
                .respond_with(h(Endpoint::GeminiStream)),
        )
        .await;
        mount(
            Mock::given(method("POST"))
                .and(path("/v1beta/openai/chat/completions"))
                .respond_with(h(Endpoint::Provider(Format::GeminiOpenAi))),
        )
        .await;
        mount(Mock::given(method("POST")).and(path_regex(r"^/tools/[A-Za-z0-9_-]+$")).respond_with(h(Endpoint::Tool)))
            .await;
        // Anything else: say what exists, instead of an empty 404.
        mount(Mock::given(wiremock::matchers::any()).respond_with(|req: &Request| {
            ResponseTemplate::new(404).set_body_string(format!(
                "tracefault: no mock at {} {}; it serves POST /v1/chat/completions, /v1/responses, /v1/messages, /v1beta/models/MODEL:generateContent, :streamGenerateContent, /v1beta/openai/chat/completions and /tools/NAME",
                req.method,
                req.url.path()
            ))
        }))
        .await;
        Ok(WireServer { server, state })
    }

    /// Fresh mock state for run `run`.
    pub async fn reset(&self, run: u64) {
        let mut s = lock(&self.state);
        let scenario = s.scenario.clone();
        *s = WireState::new(scenario, run);
    }

    /// The requests wiremock itself recorded since it started.
    pub async fn received(&self) -> Vec<Request> {
        self.server.received_requests().await.unwrap_or_default()
    }

    /// The environment an agent needs: base URLs and placeholder keys.
    pub fn env(&self) -> Vec<(String, String)> {
        let base = self.server.uri();
        vec![
            ("OPENAI_BASE_URL".into(), format!("{base}/v1")),
            ("ANTHROPIC_BASE_URL".into(), base.clone()),
            ("GOOGLE_GEMINI_BASE_URL".into(), base.clone()),
            ("TRACEFAULT_TOOLS_URL".into(), format!("{base}/tools")),
            ("OPENAI_API_KEY".into(), "sk-tracefault-placeholder".into()),
            ("ANTHROPIC_API_KEY".into(), "sk-ant-tracefault-placeholder".into()),
            ("GEMINI_API_KEY".into(), "tracefault-placeholder".into()),
        ]
    }

    pub fn state(&self) -> MutexGuard<'_, WireState> {
        lock(&self.state)
    }
}
