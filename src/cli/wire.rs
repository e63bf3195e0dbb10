//! `tracefault serve` and `tracefault exec`: the mocks over real HTTP, for a user's own agent.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use crate::error::{Error, Result, exit};
use std::collections::BTreeMap;
use std::path::Path;

use super::redact::redact;
use crate::engine::events::TerminatedBy;
use crate::engine::strategy::Strategy;
use crate::metrics::run::RunMetrics;
use crate::output::FolderWriter;
use crate::report::checks::{CheckRow, CheckStatus, Checklist};
use crate::report::{self, Report};
use crate::scenario::load::load_file;
use crate::trace::{FinalOutcome, Trace, TraceEvent};
use crate::wire::WireServer;
use crate::wire::checks::{Check, Finding};
use crate::wire::mcp;
use crate::wire::spending::Budget;
use crate::wire::upstream::Upstream;
use crate::wire::world::World;

#[derive(Debug, Args)]
pub struct ServeArgs {
    pub scenario: PathBuf,
    /// Where to listen. Loopback unless you say otherwise; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub addr: SocketAddr,
    /// Which run's fault draws to serve.
    #[arg(long, default_value_t = 0)]
    pub run: u64,
    /// Real seconds per virtual second for time-based faults and announced waits (0.01 makes a
    /// 60 s outage last 0.6 s).
    #[arg(long, default_value_t = 1.0, value_parser = time_scale)]
    pub time_scale: f64,
    /// Agents served at once, each under its own prefix `/agents/K/` (K from 0) with its own
    /// fault draws and conversations (rules with `scope = "fleet"` count every agent's calls);
    /// the plain paths are agent 0. 1 to 10000.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub agents: u32,
    /// How the MCP endpoint hands a failed tool call back: mcp-text (isError and a sentence),
    /// mcp-envelope (isError and the five fields, as text and structuredContent) or
    /// jsonrpc-error (a JSON-RPC error: -32602 for bad arguments, -32603 otherwise).
    #[arg(long, default_value = "mcp-text")]
    pub mcp_strategy: String,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    pub scenario: PathBuf,
    /// Times to run the agent, each against fresh mock state (1 to 10^8).
    #[arg(long, default_value_t = 1, value_parser = super::runs_parser())]
    pub runs: u64,
    #[arg(long, default_value = "exec-reports")]
    pub out: PathBuf,
    #[arg(long, default_value = "127.0.0.1:0")]
    pub addr: SocketAddr,
    /// Seconds one run of the agent may take; then its whole process group is killed.
    #[arg(long, default_value_t = 120)]
    pub timeout_s: u64,
    /// The agent says its tool results are JSON: check that every OpenAI-format one parses.
    #[arg(long)]
    pub json_envelope: bool,
    /// Real seconds per virtual second for time-based faults and announced waits.
    #[arg(long, default_value_t = 1.0, value_parser = time_scale)]
    pub time_scale: f64,
    /// Copies of the agent started at once against one set of mocks, agent K at base URLs under
    /// `/agents/K/`, sharing the tools' and the provider's limits and the counts of fault rules
    /// with `scope = "fleet"`. 1 to 1000.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub agents: u32,
    /// How the MCP endpoint hands a failed tool call back: mcp-text (isError and a sentence),
    /// mcp-envelope (isError and the five fields, as text and structuredContent) or
    /// jsonrpc-error (a JSON-RPC error: -32602 for bad arguments, -32603 otherwise).
    #[arg(long, default_value = "mcp-text")]
    pub mcp_strategy: String,
    /// The agent's name in the reports (its row, where `run` has a strategy's): by default
    /// the command's file name. Two agents, or two versions of one, compare by their labels.
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    /// A reports folder of an earlier `exec` (or `run`) to compare with: the comparison and
    /// the change gates, as `run --baseline`. A folder with no report yet is a warning.
    #[arg(long, value_name = "DIR")]
    pub baseline: Option<PathBuf>,
    /// Fail the change gates when the `--baseline` folder holds no report yet.
    #[arg(long, requires = "baseline")]
    pub require_baseline: bool,
    /// With `--baseline`: exit 1 on a significant regression even where no gate says so.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// A host the agent may send requests to besides the mocks (repeatable); any other host
    /// fails check 8.
    #[arg(long = "allow-elsewhere", value_name = "HOST")]
    pub allow_elsewhere: Vec<String>,
    #[command(flatten)]
    pub live: LiveArgs,
    /// The agent's command line.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
    /// The report set is of `proxy`'s traffic: no agent process is tracefault's child.
    #[arg(skip)]
    pub proxied: bool,
}

/// Live mode: the real providers behind the provider endpoints.
#[derive(Clone, Debug, Args)]
pub struct LiveArgs {
    /// Forward the agent's model requests to the real providers (with the agent's own keys),
    /// injecting the scenario's provider faults on the way. Nothing goes to a provider without
    /// it or `--upstream`.
    #[arg(long)]
    pub live: bool,
    #[command(flatten)]
    pub to: UpstreamArgs,
}

/// Where live mode sends model requests, and how many at most.
#[derive(Clone, Debug, Args)]
pub struct UpstreamArgs {
    /// Where each provider is: openai=URL,anthropic=URL,gemini=URL (repeatable; implies live
    /// mode). The URL is the origin the agent's request path (`/v1/…`) is put after, so
    /// `https://api.openai.com`, not `…/v1`. A provider not named keeps its public endpoint.
    #[arg(long, value_name = "PROVIDER=URL")]
    pub upstream: Vec<String>,
    /// Model requests sent to the providers at most, over every run and agent: past it a request
    /// is refused here (403, `spending_limit`) and never sent.
    #[arg(long, value_name = "N")]
    pub max_model_calls: Option<u64>,
    /// USD spent on the providers at most, over every run and agent, priced by the scenario's
    /// `[pricing.models]`: each request is reserved at the most it can cost before it is sent,
    /// and refused here (403, `spending_limit`) when that could pass the limit.
    #[arg(long, value_name = "USD")]
    pub max_usd: Option<f64>,
    /// Rewrite the tool results the agent sends: a result the scenario's tool faults fail (as
    /// they would fail the call at a mock tool) reaches the real model as that failure, encoded
    /// by this strategy (one of the scenario's, or a preset), the same way each time it is sent.
    #[arg(long, value_name = "STRATEGY")]
    pub rewrite: Option<String>,
}

impl UpstreamArgs {
    /// The upstreams, the USD limit priced by the scenario's `prices`, results rewritten in one
    /// of its `strategies` (or a preset).
    pub fn build(&self, sc: &crate::engine::Scenario) -> Result<std::sync::Arc<Upstream>> {
        let budget = self.max_usd.map(|usd| Budget::new(usd, &sc.prices).map_err(Error::Usage)).transpose()?;
        let rewrite = match &self.rewrite {
            None => None,
            Some(name) => Some(sc.strategy_or_preset(name).ok_or_else(|| {
                let mut known: Vec<String> = sc.strategies.iter().map(|s| s.name.clone()).collect();
                for preset in Strategy::named() {
                    if !known.contains(&preset.name) {
                        known.push(preset.name);
                    }
                }
                Error::Usage(format!(
                    "--rewrite: a strategy of the scenario or a preset ({}), got {name:?}",
                    known.join(", ")
                ))
            })?),
        };
        Ok(std::sync::Arc::new(Upstream::new(&self.upstream, self.max_model_calls, budget)?.rewriting(rewrite)))
    }
}

impl LiveArgs {
    /// The upstreams, when live mode is on (`--live`, or an `--upstream` named).
    pub fn upstream(&self, sc: &crate::engine::Scenario) -> Result<Option<std::sync::Arc<Upstream>>> {
        if !self.live && self.to.upstream.is_empty() {
            for (flag, given) in [
                ("--max-model-calls", self.to.max_model_calls.is_some()),
                ("--max-usd", self.to.max_usd.is_some()),
                ("--rewrite", self.to.rewrite.is_some()),
            ] {
                if given {
                    return Err(Error::Usage(format!(
                        "{flag} bounds the requests sent to real providers: it needs --live or --upstream"
                    )));
                }
            }
            return Ok(None);
        }
        // The agent's base URL is replaced by the mocks': a key it holds for another service
        // (a gateway, OpenRouter, Azure) must not go to the public endpoint instead.
        for (var, provider) in BASE_URL_VARS {
            let named = self
                .to
                .upstream
                .iter()
                .flat_map(|s| s.split(','))
                .any(|s| s.trim().starts_with(&format!("{provider}=")));
            if !named && std::env::var(var).is_ok_and(|v| !v.trim().is_empty()) {
                return Err(Error::Usage(format!(
                    "{var} is set: your agent's {provider} requests go to that service, and its key is for it; say \
                     where live mode sends them with --upstream {provider}=URL (the URL's origin, without /v1)"
                )));
            }
        }
        self.to.build(sc).map(Some)
    }
}

/// The base-URL variables an agent may carry for another service, and their provider.
const BASE_URL_VARS: [(&str, &str); 5] = [
    ("OPENAI_BASE_URL", "openai"),
    ("OPENAI_API_BASE", "openai"),
    ("ANTHROPIC_BASE_URL", "anthropic"),
    ("GOOGLE_GEMINI_BASE_URL", "gemini"),
    ("GEMINI_API_BASE", "gemini"),
];

fn time_scale(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1000.0 => Ok(v),
        _ => Err(format!("a time scale in (0, 1000], got {s:?}")),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::Usage(format!("cannot start the async runtime: {e}")))
}

/// The environment agent `agent` of `agents` gets: every base-URL variable the SDKs and
/// frameworks read, pointed at the mocks (so none can bypass them; under `/agents/K/` in a
/// fleet), placeholder keys, known telemetry switched off, and the proxy variables pointed at
/// the mock server, which refuses and records any request for another host.
pub fn agent_env(server: &str, agent: u32, agents: u32) -> Vec<(&'static str, String)> {
    let base = &if agents > 1 { format!("{server}/agents/{agent}") } else { server.to_owned() };
    let v1 = format!("{base}/v1");
    let mut env = vec![
        ("OPENAI_BASE_URL", v1.clone()),
        ("OPENAI_API_BASE", v1),
        ("ANTHROPIC_BASE_URL", base.to_owned()),
        ("ANTHROPIC_API_URL", base.to_owned()),
        ("ANTHROPIC_API_BASE", base.to_owned()),
        ("GOOGLE_GEMINI_BASE_URL", base.to_owned()),
        ("GEMINI_API_BASE", base.to_owned()),
        ("TRACEFAULT_BASE_URL", base.to_owned()),
        ("TRACEFAULT_TOOLS_URL", format!("{base}/tools")),
        ("TRACEFAULT_MCP_URL", format!("{base}/mcp")),
        ("OPENAI_API_KEY", "sk-tracefault-placeholder".into()),
        ("ANTHROPIC_API_KEY", "sk-ant-tracefault-placeholder".into()),
        ("GEMINI_API_KEY", "tracefault-placeholder".into()),
        ("GOOGLE_API_KEY", "tracefault-placeholder".into()),
        ("GOOGLE_GENERATIVE_AI_API_KEY", "tracefault-placeholder".into()),
        ("OPENAI_AGENTS_DISABLE_TRACING", "1".into()),
        ("LITELLM_LOCAL_MODEL_COST_MAP", "True".into()),
        ("LANGCHAIN_TRACING_V2", "false".into()),
        ("LANGSMITH_TRACING", "false".into()),
        ("DO_NOT_TRACK", "1".into()),
        ("NO_PROXY", "127.0.0.1,localhost,::1".into()),
        ("no_proxy", "127.0.0.1,localhost,::1".into()),
        ("TRACEFAULT_AGENT", agent.to_string()),
    ];
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
        env.push((k, server.to_owned()));
    }
    env
}

pub fn serve(args: ServeArgs) -> Result<i32> {
    let sc = load_file(&args.scenario)?.scenario;
    runtime()?.block_on(async {
        let mcp = mcp::encoding_of(&args.mcp_strategy)?;
        let server = WireServer::start(sc, args.addr, args.time_scale, args.agents, mcp, None).await?;
        // A long serve keeps no trace: memory stays flat.
        server.reset(args.run, false);
        // Ctrl-C and SIGTERM are caught from before the banner: a caller that stops the server
        // as soon as it has read its URL gets the closing line, not the default signal death.
        let stop = stop_signal()?;
        // Written whole, and a closed stdout ignored: a reader that stops after the banner's
        // first lines (`serve … | head -3`, a test that found its URL) must not stop the server.
        let mut banner = String::new();
        for (k, v) in
            agent_env(&server.uri(), 0, 1).into_iter().filter(|(k, _)| !k.to_ascii_lowercase().contains("proxy"))
        {
            let _ = writeln!(banner, "export {k}={v}");
        }
        let _ = writeln!(
            banner,
            "# tracefault is serving {} (run {}, time scale {}); Ctrl-C to stop",
            args.scenario.display(),
            args.run,
            args.time_scale
        );
        let _ = writeln!(
            banner,
            "# MCP ({}): streamable HTTP at {}/mcp; over stdio: tracefault mcp {} --stdio --mcp-strategy {}",
            args.mcp_strategy,
            server.uri(),
            args.scenario.display(),
            args.mcp_strategy
        );
        if args.agents > 1 {
            let _ = writeln!(
                banner,
                "# agents 0 to {} each have their own mocks under {}/agents/K/ (e.g. {}/agents/1/v1)",
                args.agents - 1,
                server.uri(),
                server.uri()
            );
        }
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(banner.as_bytes()).and_then(|()| out.flush());
        drop(out);
        stop.await;
        {
            let m = server.mocks();
            let (model, tool) = m.worlds().fold((0, 0), |(a, b), w| (a + w.model_calls, b + w.tool_calls));
            eprintln!("served {model} model calls and {tool} tool calls");
        }
        server.stop().await;
        Ok(exit::OK)
    })
}

#[derive(Debug, Args)]
pub struct ProxyArgs {
    #[command(flatten)]
    pub serve: ServeArgs,
    #[command(flatten)]
    pub to: UpstreamArgs,
    /// Where the traffic's report set goes when the proxy stops: the traces
    /// (`traces/agent-K.jsonl`, native schema, no header or key in them) and the reports `exec`
    /// writes, the traffic scored as one run.
    #[arg(long, default_value = "proxy-traces")]
    pub out: PathBuf,
    /// The agent's name in the reports.
    #[arg(long, value_name = "NAME", default_value = "proxy")]
    pub label: String,
}

/// `tracefault proxy SCENARIO`: the agent's model requests go to the real providers, the
/// scenario's provider faults injected on the way; the tools are the scenario's mocks. Until
/// Ctrl-C, then the traces of what passed are written as one set.
pub fn proxy(args: ProxyArgs) -> Result<i32> {
    let loaded = load_file(&args.serve.scenario)?;
    let upstream = args.to.build(&loaded)?;
    // The reports are exec's, of one run: the agents whose traffic passed.
    let mut report_args = ExecArgs {
        scenario: args.serve.scenario.clone(),
        runs: 1,
        out: args.out.clone(),
        addr: args.serve.addr,
        timeout_s: 0,
        json_envelope: false,
        time_scale: args.serve.time_scale,
        agents: 1,
        mcp_strategy: args.serve.mcp_strategy.clone(),
        label: Some(args.label.clone()),
        baseline: None,
        require_baseline: false,
        fail_on_regression: false,
        allow_elsewhere: Vec::new(),
        live: LiveArgs { live: true, to: args.to.clone() },
        cmd: vec!["tracefault proxy".to_owned()],
        proxied: true,
    };
    let label = agent_label(&report_args)?;
    let (mut reported, dropped) = exec_scenario(&loaded, &label);
    reported.runs = 1;
    check_exec_gates(&reported, &args.serve.scenario)?;
    let sc = loaded.scenario.clone();
    let (args, out_dir, max) = (args.serve, args.out, args.to.max_model_calls);
    runtime()?.block_on(async {
        let mcp = mcp::encoding_of(&args.mcp_strategy)?;
        let server =
            WireServer::start(sc, args.addr, args.time_scale, args.agents, mcp, Some(upstream.clone())).await?;
        server.reset(args.run, true);
        let stop = stop_signal()?;
        let mut banner = String::new();
        for (k, v) in agent_env(&server.uri(), 0, 1)
            .into_iter()
            .filter(|(k, _)| !k.to_ascii_lowercase().contains("proxy") && !k.ends_with("_API_KEY"))
        {
            let _ = writeln!(banner, "export {k}={v}");
        }
        let mut limit = max.map_or_else(|| "no limit on calls".to_owned(), |n| format!("at most {n}"));
        if let Some((usd, _)) = upstream.spending() {
            let _ = write!(limit, ", at most ${usd} priced by the scenario");
        }
        let _ = writeln!(
            banner,
            "# model requests go to {} ({limit}); your agent's own keys go with them",
            upstream.describe()
        );
        let _ = writeln!(
            banner,
            "# tracefault is serving {} live (run {}, time scale {}); Ctrl-C to stop and write {}",
            args.scenario.display(),
            args.run,
            args.time_scale,
            out_dir.display()
        );
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(banner.as_bytes()).and_then(|()| out.flush());
        drop(out);
        stop.await;
        // Stopped first, so the answers still streaming are in the traces.
        let shared = server.shared.clone();
        server.stop().await;
        // Begun once stopped: a set being written is what Ctrl-C throws away.
        let set = FolderWriter::begin(&out_dir)?;
        let mut m = shared.lock();
        // Every agent whose traffic passed (agent 0, which never called, when none did), ended
        // where it stood.
        for w in m.worlds_mut() {
            w.unspill();
        }
        let ended = |w: &World| Ran { exit: None, timed_out: false, ended_ms: w.clock.now_ms(), proxied: true };
        let mut records: Vec<AgentRecord> = m
            .worlds()
            .filter(|w| w.http_requests.iter().any(|&n| n > 0))
            .map(|w| record(w, ended(w), 0, true))
            .collect();
        if records.is_empty()
            && let Some(w) = m.world(0)
        {
            records.push(record(w, ended(w), 0, true));
        }
        report_args.agents = records.len() as u32;
        let run = run_record(&m, records);
        let (model, tool) = m.worlds().fold((0, 0), |(a, b), w| (a + w.model_calls, b + w.tool_calls));
        let failed: u64 = m.worlds().map(|w| w.upstream_failures).sum();
        let rewritten: u64 = m.worlds().map(|w| w.rewritten_results).sum();
        let rewritten = match upstream.rewrite() {
            Some(s) => format!(", {rewritten} tool results rewritten under {}", s.name),
            None => String::new(),
        };
        let spent = upstream.spending().map_or_else(String::new, |(_, usd)| format!(", ${usd:.6} spent"));
        eprintln!(
            "served {model} model calls ({} sent to the providers{spent}, {failed} not answered by them) and {tool} \
             tool calls{rewritten}",
            upstream.sent()
        );
        drop(m);
        // Its stdout carried the banner, and its reader may have gone: what follows goes to
        // stderr, where a closed reader cannot make a report fail.
        let _ = std::io::stdout().flush();
        #[cfg(unix)]
        let _ = rustix::stdio::dup2_stdout(std::io::stderr());
        let reports = Reports {
            args: &report_args,
            upstream: Some(&upstream),
            sc: &loaded,
            reported,
            dropped,
            first_run: args.run,
        };
        report_set(reports, vec![run], set)
    })
}

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub serve: McpServeArgs,
    /// Speak MCP on stdin and stdout (for hosts that start a server as a subprocess). For
    /// streamable HTTP, `tracefault serve` serves `/mcp`.
    #[arg(long, required = true)]
    pub stdio: bool,
}

/// What an MCP server on stdio serves: `mcp` and `mcp-proxy` alike.
#[derive(Debug, Args)]
pub struct McpServeArgs {
    pub scenario: PathBuf,
    /// Which run's fault draws to serve.
    #[arg(long, default_value_t = 0)]
    pub run: u64,
    /// Real seconds per virtual second for time-based faults and announced waits.
    #[arg(long, default_value_t = 1.0, value_parser = time_scale)]
    pub time_scale: f64,
    /// How a failed tool call is handed back: mcp-text, mcp-envelope or jsonrpc-error.
    #[arg(long, default_value = "mcp-text")]
    pub mcp_strategy: String,
}

impl McpServeArgs {
    /// The scenario's mocks for one agent of run `--run`, and the MCP encoding.
    fn mocks(&self) -> Result<(std::sync::Arc<crate::wire::dispatch::Shared>, crate::envelope::Encoding)> {
        let sc = load_file(&self.scenario)?.scenario;
        let encoding = mcp::encoding_of(&self.mcp_strategy)?;
        let mocks = crate::wire::mocks::Mocks::new(sc, self.run, 1, self.time_scale, false);
        let shared = crate::wire::dispatch::Shared {
            mocks: std::sync::Mutex::new(mocks),
            time_scale: self.time_scale,
            upstream: None,
        };
        Ok((std::sync::Arc::new(shared), encoding))
    }
}

#[derive(Args, Debug)]
pub struct McpProxyArgs {
    #[command(flatten)]
    pub serve: McpServeArgs,
    /// Your MCP server's command line (it speaks MCP on its stdin and stdout).
    #[arg(last = true, value_name = "CMD", required_unless_present = "upstream", conflicts_with = "upstream")]
    pub cmd: Vec<String>,
    /// Your MCP server's streamable HTTP endpoint (e.g. http://127.0.0.1:3001/mcp), instead of
    /// a command.
    #[arg(long, value_name = "URL")]
    pub upstream: Option<String>,
    /// The environment variable holding a bearer token for `--upstream` (sent as
    /// `Authorization: Bearer …`, never recorded or printed).
    #[arg(long, value_name = "VAR", requires = "upstream")]
    pub upstream_bearer_env: Option<String>,
}

/// `tracefault mcp-proxy SCENARIO -- CMD ARGS` (or `--upstream URL`): the host talks MCP to
/// tracefault on stdio, and tracefault to the user's real server (started as CMD, or over
/// streamable HTTP at URL): `initialize` is tracefault's, the
/// tools are the real server's, a call of a scenario tool meets the scenario's faults first (in
/// `--mcp-strategy`'s encoding) and otherwise goes to the real server, as does any call of a
/// tool the scenario does not name. What passed is said on stderr at the end.
pub fn mcp_proxy(args: McpProxyArgs) -> Result<i32> {
    let (shared, encoding) = args.serve.mocks()?;
    runtime()?.block_on(async {
        let real = match &args.upstream {
            Some(url) => {
                let bearer = match &args.upstream_bearer_env {
                    Some(var) => Some(std::env::var(var).map_err(|_| {
                        Error::Usage(format!("mcp-proxy --upstream-bearer-env {var}: no such environment variable"))
                    })?),
                    None => None,
                };
                crate::wire::mcp_upstream::RealServer::connect(url, bearer).await?
            }
            None => crate::wire::mcp_upstream::RealServer::start(&args.cmd).await?,
        };
        let real = std::sync::Arc::new(real);
        mcp::serve_stdio(shared.clone(), encoding, Some(real.clone())).await?;
        let (calls, faults, failed) = {
            let mut m = shared.lock();
            let w = m.world(0).expect("agent 0 of a lone agent's fleet");
            (w.tool_calls, w.faults_injected, w.real_tool_failures)
        };
        eprintln!(
            "mcp-proxy: {calls} calls of the scenario's tools ({faults} met a fault); {} forwarded to the server \
             ({failed} failed there)",
            real.forwarded()
        );
        if let Ok(real) = std::sync::Arc::try_unwrap(real) {
            real.stop().await;
        }
        Ok(exit::OK)
    })
}

/// `tracefault mcp SCENARIO --stdio`: the scenario's tools as an MCP server on stdio, one agent
/// of run `--run`, until the client closes stdin. Nothing but MCP goes to stdout.
pub fn mcp_stdio(args: McpArgs) -> Result<i32> {
    let (shared, encoding) = args.serve.mocks()?;
    runtime()?.block_on(async {
        mcp::serve_stdio(shared, encoding, None).await?;
        Ok(exit::OK)
    })
}

/// What one agent left in its world in one run.
struct AgentRecord {
    /// Which agent of the fleet it was.
    agent: u32,
    trace: Trace,
    ended: String,
    exit: Option<i32>,
    /// When it ended (its process exited), in virtual ms since the run started.
    ended_ms: u64,
    findings: Vec<Finding>,
    http: [u64; 4],
    /// The agent's run by the engine's metric definitions: one row of `runs.csv`.
    metrics: RunMetrics,
    /// Formats whose conversations made the round trip (a result read, or an ending).
    round_trips: Vec<String>,
    /// Three or more identical calls in a row got identical results.
    looped: bool,
    unknown_paths: Vec<String>,
    elsewhere: Vec<String>,
    /// The MCP tools/call messages that crossed, one JSON-RPC message per line.
    mcp_log: Vec<serde_json::Value>,
}

/// One run: every agent's record, the fleet's metrics (its `runs.csv` row) and each tool's
/// peak in flight.
struct RunRecord {
    agents: Vec<AgentRecord>,
    metrics: RunMetrics,
    peaks: serde_json::Map<String, serde_json::Value>,
}

/// Resolves at Ctrl-C (SIGINT) or SIGTERM; the handlers are in place when this returns.
fn stop_signal() -> Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let io = |e| Error::Usage(format!("cannot catch Ctrl-C: {e}"));
        let (mut int, mut term) =
            (signal(SignalKind::interrupt()).map_err(io)?, signal(SignalKind::terminate()).map_err(io)?);
        Ok(async move {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}

/// Consecutive identical calls (tool and arguments) with identical results: the longest run.
fn longest_identical_repeat(trace: &Trace) -> u32 {
    let mut calls: Vec<(&str, String, Option<&str>)> = Vec::new();
    for e in &trace.events {
        match e {
            TraceEvent::ToolCall { call_id, name, args, .. } => {
                calls.push((call_id.as_str(), format!("{name} {args}"), None))
            }
            TraceEvent::ToolResult { call_id, content, .. } => {
                if let Some(c) = calls.iter_mut().rev().find(|c| c.0 == call_id) {
                    c.2 = Some(content.as_str());
                }
            }
            _ => {}
        }
    }
    let (mut best, mut run) = (1, 1);
    for w in calls.windows(2) {
        run = if w[0].1 == w[1].1 && w[0].2 == w[1].2 && w[1].2.is_some() { run + 1 } else { 1 };
        best = best.max(run);
    }
    if calls.is_empty() { 0 } else { best }
}

/// What one agent left in its world in one run.
/// `live`: a real model answered (`exec --live`, `proxy`), not the mock model.
fn record(world: &World, ran: Ran, timeout_s: u64, live: bool) -> AgentRecord {
    let Ran { exit, timed_out, ended_ms, proxied } = ran;
    let sc = &world.scenario;
    let mut findings = world.findings.clone();
    // The conversation that went furthest is the run's.
    let main = world.conversations.values().max_by_key(|c| c.turns);
    // Live mode: an agent that exits 0 (or, behind `proxy`, that asks nothing more before the
    // proxy is stopped) after its model called its framework's final-answer tool ended with
    // that call.
    let by_tool = main
        .and_then(|c| c.answer_by_tool.filter(|(_, seq)| *seq == c.requests).map(|(how, _)| how))
        .filter(|_| (exit == Some(0) || proxied) && !timed_out);
    if by_tool.is_some() {
        let then = if proxied { "no request followed before the proxy stopped" } else { "the agent then exited 0" };
        findings.push(Finding {
            check: None,
            detail: format!(
                "the last answer called the framework's final-answer tool and {then}: the run ended with that answer"
            ),
        });
    }
    let ended = match (timed_out, main.and_then(|c| c.ended).or(by_tool)) {
        (true, _) => "timeout".to_owned(),
        (false, Some(e)) => e.to_owned(),
        (false, None) if world.model_calls == 0 => "never_called".to_owned(),
        (false, None) => "cut_off".to_owned(),
    };
    let model_calls = world.model_calls;
    if model_calls == 0 {
        let why = if world.unknown_paths.is_empty() {
            "check its base URL: OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL".to_owned()
        } else {
            let paths: Vec<&str> = world.unknown_paths.iter().map(String::as_str).collect();
            format!("it called {}", paths.join("; "))
        };
        findings.push(terminates(format!("the agent never called the mock provider ({why})")));
    }
    if timed_out {
        findings
            .push(terminates(format!("the agent did not finish within {timeout_s} s (its process group was killed)")));
    }
    match ended.as_str() {
        "step_cap" => findings
            .push(terminates(format!("the agent looped: still calling after {} model turns", sc.policy.max_steps))),
        "cut_off" if main.is_some_and(|c| c.waiting_on().next().is_some()) => findings.push(terminates(format!(
            "the agent stopped while the model still asked for tools, after {model_calls} model calls"
        ))),
        "gave_up" if main.is_some_and(|c| !c.failing.is_empty()) => {
            // A real model (live mode): it answered with a failure standing.
            let mut tools: Vec<String> = main
                .into_iter()
                .flat_map(|c| c.failing.keys())
                .map(|(t, _)| crate::escape::printable(t).into_owned())
                .collect();
            tools.dedup();
            findings.push(terminates(format!(
                "the model gave up: it answered, after {model_calls} model calls, while the latest result of {} was a \
                 failure",
                tools.join(", ")
            )))
        }
        "gave_up" => {
            // The reading and the seeded draw that ended it: a coin flip said as one.
            let why = world
                .trace
                .events
                .iter()
                .rev()
                .find(|e| matches!(e, TraceEvent::Decision { action, .. } if action == "give_up"))
                .and_then(|e| match e {
                    TraceEvent::Decision { call_id, .. } => {
                        Some(format!("{call_id} {}", crate::trace::inspect::decision_line(e)?))
                    }
                    _ => None,
                })
                .unwrap_or_else(|| "no decision recorded".to_owned());
            findings.push(terminates(format!(
                "the mock model gave up after {model_calls} model calls: {why} (seeded draws against the scenario's \
                 profile; the trace's decision events hold every reading)"
            )))
        }
        "cut_off" => findings
            .push(terminates(format!("the agent stopped without a final answer, after {model_calls} model calls"))),
        _ => {}
    }
    let repeats = longest_identical_repeat(&world.trace);
    if repeats >= 3 {
        findings.push(terminates(format!(
            "{repeats} identical calls in a row got identical results ({model_calls} model calls)"
        )));
    }
    // The ending claims the task done: an answer does, and the mock model's give-up by its
    // `p_claim_success` draw; a real model's give-up (an answer while a failure stands) is not
    // read for a claim. Without the goal, that claim is a false success.
    let claimed = ended == "answer" || (ended == "gave_up" && main.is_some_and(|c| c.claimed));
    let false_success = claimed && !world.goal_reached(live);
    if false_success {
        findings.push(Finding {
            check: None,
            detail: "a false success: the run ended claiming the task done, but its goal was not reached (a goal tool \
                     never succeeded, or its latest call failed)"
                .to_owned(),
        });
    }
    let mut trace = world.trace.clone();
    let last_text = trace.events.iter().rev().find_map(|e| match e {
        TraceEvent::ModelCall { text: Some(t), .. } => Some(t.clone()),
        _ => None,
    });
    trace.events.push(TraceEvent::Final {
        text: last_text.unwrap_or_default(),
        // A false success is written as a source with a verdict writes it: an answer, judged
        // unsuccessful.
        outcome: match ended.as_str() {
            _ if false_success => FinalOutcome::Answer,
            "answer" => FinalOutcome::Answer,
            "gave_up" => FinalOutcome::GaveUp,
            _ => FinalOutcome::CutOff,
        },
        reason: None,
        // A give-up did not complete the task, claimed or not (calibrate's verdict).
        success: (false_success || ended == "gave_up").then_some(false),
        started_ms: None,
        t_ms: None,
        in_flight_attempts: None,
    });
    let round_trips = world
        .conversations
        .values()
        .filter(|c| c.ended.is_some() || c.turns > 1)
        .map(|c| c.format.name().to_owned())
        .collect();
    let mut metrics = agent_metrics(world, &trace, &ended, &findings, ended_ms);
    metrics.false_successes = u64::from(false_success);
    AgentRecord {
        agent: world.agent,
        trace,
        ended,
        exit,
        ended_ms,
        http: world.http_requests,
        metrics,
        findings,
        round_trips,
        looped: repeats >= 3,
        unknown_paths: world.unknown_paths.iter().cloned().collect(),
        elsewhere: world.elsewhere.iter().cloned().collect(),
        mcp_log: world.mcp_log.clone(),
    }
}

/// A finding against check 6.
fn terminates(detail: String) -> Finding {
    Finding { check: Some(Check::Terminates), detail }
}

/// How an agent's run ended, as the engine names endings: a give-up by the mock model is
/// `gave_up`; a timeout, an agent that stopped midway or never called are cut off before an
/// answer, counted with the step cap as the engine counts a run that did not finish.
fn terminated_by(ended: &str) -> TerminatedBy {
    match ended {
        "answer" => TerminatedBy::Answer,
        "gave_up" => TerminatedBy::GaveUp,
        _ => TerminatedBy::StepCap,
    }
}

/// One agent's run by the engine's definitions, from what the mocks counted (every HTTP
/// attempt, the agent's own retries, faults and refusals) and what its trace shows (the model
/// calls, their tokens, which tool calls were first issues).
fn agent_metrics(world: &World, trace: &Trace, ended: &str, findings: &[Finding], ended_ms: u64) -> RunMetrics {
    let mut m = RunMetrics::default();
    m.reset(world.rule_fired.len());
    m.rule_fired.copy_from_slice(&world.rule_fired);
    let by = terminated_by(ended);
    let compiled = crate::trace::compile::compile(trace);
    let model_issued = compiled.calls.len() as u64;
    let first_issues = compiled.calls.iter().filter(|c| c.issue == crate::trace::compile::Issue::First).count() as u64;
    let count = |c: Check| findings.iter().filter(|f| f.check == Some(c)).count() as u64;
    let mut previous_failed = false;
    for e in &trace.events {
        match e {
            TraceEvent::ModelCall { status, tokens_in, tokens_out, .. } => {
                m.first_attempts += u64::from(!previous_failed);
                previous_failed = *status != 200;
                m.tokens += tokens_in + tokens_out;
                m.tokens_in += tokens_in;
                m.tokens_out += tokens_out;
            }
            TraceEvent::ToolResult { error_class: Some(c), .. } => {
                let class = crate::fault::ErrorClass::parse(c);
                m.met_fault |= class.is_some_and(crate::fault::ErrorClass::is_failure);
                m.met_non_retryable |= class.is_some_and(|c| c.is_failure() && !c.retryable());
            }
            _ => {}
        }
    }
    // The calls the mock model answered (the trace also holds the provider's refusals).
    m.model_calls = world.model_calls;
    m.tool_calls = world.tool_calls;
    m.first_attempts += first_issues;
    m.orchestrator_retries = world.tool_calls.saturating_sub(model_issued);
    m.wasted_retries = world.wasted_retries;
    m.faults_injected = world.faults_injected;
    m.load_rejections = world.load_rejections;
    m.duplicate_writes = world.duplicate_writes;
    m.wrong_accepted = world.wrong_accepted();
    m.injection_followed = world.injection_followed;
    m.met_fault |= world.faults_injected > 0 || world.load_rejections > 0;
    m.protocol_violations = count(Check::RoundTrip);
    m.raw_leaks = count(Check::NoRawText);
    m.terminated_by = Some(by);
    m.agents = 1;
    m.agents_succeeded = u64::from(by == TerminatedBy::Answer);
    m.virtual_ms = ended_ms;
    m.agent_ms.push(ended_ms);
    m
}

/// How one agent's process ended.
#[derive(Clone, Copy, Debug)]
struct Ran {
    exit: Option<i32>,
    timed_out: bool,
    ended_ms: u64,
    /// The agent is no child of ours: `proxy` was stopped by its user (so no exit status).
    proxied: bool,
}

/// Runs one copy of the agent against the mocks: its own process group (killed whole on
/// timeout, Ctrl-C or SIGTERM), its output in `log`, its end read on the mocks' `clock`.
async fn run_agent(
    cmd: Vec<String>,
    env: Vec<(&'static str, String)>,
    run: u64,
    timeout_s: u64,
    clock: crate::wire::world::Clock,
    log: std::fs::File,
) -> Result<Ran> {
    let err_log = log.try_clone().map_err(|e| Error::Usage(format!("cannot share the agent's log: {e}")))?;
    let mut child = tokio::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .envs(env)
        .env("TRACEFAULT_RUN", run.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(err_log)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Error::Usage(format!("cannot start `{}`: {e}", redact(&cmd).join(" "))))?;
    let group = child.id().map(|p| p as i32);
    if let Some(g) = group {
        crate::interrupt::kill_on_interrupt(g);
    }
    let waited = tokio::time::timeout(Duration::from_secs(timeout_s), child.wait()).await;
    let ended_ms = clock.now_ms();
    let result = match waited {
        Ok(Ok(s)) => Ok(Ran { exit: s.code(), timed_out: false, ended_ms, proxied: false }),
        Ok(Err(e)) => Err(Error::Usage(format!("waiting for the agent: {e}"))),
        Err(_) => Ok(Ran { exit: None, timed_out: true, ended_ms, proxied: false }),
    };
    // Whatever happened, nothing the agent started outlives its run.
    if let Some(g) = group {
        crate::interrupt::kill_group(g);
        crate::interrupt::forget_group(g);
    }
    let _ = child.wait().await;
    result
}

/// One run: every copy of the agent started at once, each awaited to its end; then what each
/// left in its world.
async fn exec_run(args: &ExecArgs, server: &WireServer, run: u64, logs: &Path) -> Result<RunRecord> {
    server.reset(run, true);
    let clock = server.mocks().clock;
    let mut agents = tokio::task::JoinSet::new();
    for k in 0..args.agents {
        let name =
            if args.agents > 1 { format!("agent-run-{run}-agent-{k}.log") } else { format!("agent-run-{run}.log") };
        let log_path = logs.join(name);
        let log = std::fs::File::create(&log_path).map_err(|e| Error::io(&log_path, e))?;
        let mut env = agent_env(&server.uri(), k, args.agents);
        if server.shared.upstream.is_some() {
            // Live: the agent's own keys (from its environment) go to the providers.
            env.retain(|(k, _)| !k.ends_with("_API_KEY"));
        }
        let launch = run_agent(args.cmd.clone(), env, run, args.timeout_s, clock, log);
        agents.spawn(async move { (k, launch.await) });
    }
    let mut ran = vec![None; args.agents as usize];
    while let Some(done) = agents.join_next().await {
        let (k, r) = done.map_err(|e| Error::Usage(format!("an agent's task failed: {e}")))?;
        ran[k as usize] = Some(r?);
    }
    let mut m = server.mocks();
    let mut records = Vec::with_capacity(ran.len());
    for (k, r) in ran.into_iter().enumerate() {
        let r = r.expect("every agent's task reported");
        let world = m.world(k as u32).expect("an agent of the fleet");
        world.unspill();
        records.push(record(world, r, args.timeout_s, args.live.live));
    }
    Ok(run_record(&m, records))
}

/// One run of `records`' agents: the fleet's metrics (its `runs.csv` row) and each tool's peak
/// in flight.
fn run_record(m: &crate::wire::mocks::Mocks, records: Vec<AgentRecord>) -> RunRecord {
    let mut metrics = RunMetrics::default();
    metrics.reset(m.scenario().faults.rules.len());
    let mut order: Vec<&AgentRecord> = records.iter().collect();
    order.sort_by_key(|a| a.ended_ms);
    for a in order {
        metrics.add_agent(&a.metrics);
    }
    metrics.peak_by_tool = m.limits.tools.iter().map(|s| u64::from(s.peak())).collect();
    metrics.peak_in_flight = u64::from(m.limits.peak_in_flight());
    let peaks =
        m.scenario().task.tools.iter().zip(&m.limits.tools).map(|(t, s)| (t.clone(), json!(s.peak()))).collect();
    RunRecord { agents: records, metrics, peaks }
}

pub fn exec(args: ExecArgs) -> Result<i32> {
    let sc = load_file(&args.scenario)?;
    let label = agent_label(&args)?;
    let upstream = args.live.upstream(&sc.scenario)?;
    let (mut reported, dropped) = exec_scenario(&sc, &label);
    reported.runs = args.runs;
    check_exec_gates(&reported, &args.scenario)?;
    let set = FolderWriter::begin(&args.out)?;
    let logs = set.path("");
    let rt = runtime()?;
    let records = rt.block_on(async {
        let mcp = mcp::encoding_of(&args.mcp_strategy)?;
        let server =
            WireServer::start(sc.scenario.clone(), args.addr, args.time_scale, args.agents, mcp, upstream.clone())
                .await?;
        let exe = std::env::current_exe().map_or_else(|_| "tracefault".into(), |p| p.display().to_string());
        eprintln!(
            "# MCP ({}): TRACEFAULT_MCP_URL={}/mcp; a host that starts its server runs: {exe} mcp {} --stdio \
             --mcp-strategy {} (its own mocks: exec does not count those calls)",
            args.mcp_strategy,
            server.uri(),
            args.scenario.display(),
            args.mcp_strategy
        );
        let mut records = Vec::new();
        for run in 0..args.runs {
            records.push(exec_run(&args, &server, run, &logs).await?);
        }
        server.stop().await;
        Ok::<_, Error>(records)
    })?;
    let reports = Reports { args: &args, upstream: upstream.as_deref(), sc: &sc, reported, dropped, first_run: 0 };
    report_set(reports, records, set)
}

/// What a report set is of: the command's settings, the upstreams in live mode, the scenario as
/// loaded and as reported (the agent its one strategy), the warnings of gates not checked, and
/// the index of the first run (`exec` runs 0, 1, …; `proxy` serves the one its `--run` names).
struct Reports<'a> {
    args: &'a ExecArgs,
    upstream: Option<&'a Upstream>,
    sc: &'a crate::scenario::Loaded,
    reported: crate::scenario::Loaded,
    dropped: Vec<String>,
    first_run: u64,
}

/// The runs' report set, with the agent as the row: runs.csv, summary.csv, report.json,
/// report.md, junit.xml, report.html, the traces and exec.json, put in place as one set; the
/// outcome printed; the exit code.
fn report_set(reports: Reports, records: Vec<RunRecord>, set: FolderWriter) -> Result<i32> {
    let Reports { args, upstream, sc, reported, dropped, first_run } = reports;
    let label = &reported.strategies[0].name;
    let fleet = args.agents > 1;
    // An agent by its id in the fleet (under proxy, only the agents whose traffic passed are
    // reported, so ids can skip).
    let ids: Vec<Vec<u32>> = records.iter().map(|r| r.agents.iter().map(|a| a.agent).collect()).collect();
    let who = |i: usize, k: usize| {
        let run = first_run + i as u64;
        if fleet { format!("run {run} agent {}", ids[i][k]) } else { format!("run {run}") }
    };
    let every =
        || records.iter().enumerate().flat_map(|(i, r)| r.agents.iter().enumerate().map(move |(k, a)| (i, k, a)));
    let checklist = checklist(args, &records, &who);
    let mut aggregate = crate::metrics::aggregate::Aggregate::default();
    let mut runs_csv = report::csv::runs_header();
    let prefix = crate::suite::csv_prefix(&sc.name, label);
    for (i, r) in records.iter().enumerate() {
        let run = first_run + i as u64;
        aggregate.add(&r.metrics, run);
        crate::suite::push_run_row(&mut runs_csv, &prefix, run, sc.seed, &r.metrics);
    }
    // An agent's run is not reproduced by `run --run N`: no repro line.
    aggregate.worst = None;
    let mut result = crate::suite::finish_scenario(&reported, vec![aggregate]);
    result.warnings.extend(dropped);
    let results = [result];
    set.write("runs.csv", &runs_csv)?;
    let cmp = super::run::against_baseline(
        std::slice::from_ref(&reported),
        &results,
        Some(set.path("runs.csv")),
        args.baseline.as_deref(),
        args.require_baseline,
    )?;
    let rep = Report {
        results: &results,
        comparison: cmp.as_ref(),
        fail_on_regression: args.fail_on_regression,
        checks: Some(&checklist),
    };
    for (i, k, r) in every() {
        let name = match (args.proxied, fleet) {
            (true, _) => format!("agent-{}.jsonl", r.agent),
            (false, true) => format!("run-{i}-agent-{k}.jsonl"),
            (false, false) => format!("run-{i}.jsonl"),
        };
        set.write(&format!("traces/{name}"), r.trace.to_jsonl().as_bytes())?;
        if !r.mcp_log.is_empty() {
            let lines: String = r.mcp_log.iter().map(|m| m.to_string() + "\n").collect();
            set.write(&format!("mcp/{name}"), lines.as_bytes())?;
        }
    }
    set.write("exec.json", &exec_json(args, upstream, sc, (&records, first_run), &checklist, rep.passed()))?;

    for (i, k, r) in every() {
        println!(
            "{}: {} after {} model calls and {} tool calls (agent exit {})",
            who(i, k),
            r.ended,
            r.metrics.model_calls,
            r.metrics.tool_calls,
            r.exit.map_or("none".to_owned(), |c| c.to_string())
        );
    }
    println!("{}", checklist.outcome);
    for row in &checklist.checks {
        println!("{:<4} {}", row.status.word(), row.title);
        for d in row.status.details().iter().take(5) {
            println!("       {}", crate::escape::printable(d));
        }
    }
    for e in &checklist.elsewhere {
        println!("request to another host: {}", crate::escape::printable(e));
    }
    super::run::publish(&rep, set)?;
    if let Some(cmp) = &cmp {
        print!("{}", crate::baseline::markdown(cmp, args.fail_on_regression));
    }
    super::run::report_outcome(&rep);
    super::run::step_summary(&rep);
    Ok(if rep.passed() { exit::OK } else { exit::FAILED })
}

/// The agent's name in the reports: `--label`, else the command's file name.
fn agent_label(args: &ExecArgs) -> Result<String> {
    let label = match &args.label {
        Some(l) => l.clone(),
        None => Path::new(&args.cmd[0])
            .file_name()
            .map_or_else(|| args.cmd[0].clone(), |n| n.to_string_lossy().into_owned()),
    };
    if label.trim().is_empty() || label.chars().any(char::is_control) {
        return Err(Error::Usage(format!("--label {label:?}: a name without control characters, not empty")));
    }
    Ok(label)
}

/// The scenario as `exec` reports it: the agent is its one strategy (named by the label), so
/// every report, `diff` and `--baseline` read it as they read a strategy's row. Its gates are
/// those on `strategy = "*"` or on the label; each gate on another (simulated) strategy is
/// returned as a warning that says it was not checked.
fn exec_scenario(sc: &crate::scenario::Loaded, label: &str) -> (crate::scenario::Loaded, Vec<String>) {
    let mut reported = sc.clone();
    let mut agent = sc.strategies[sc.baseline].clone();
    agent.name = label.to_owned();
    reported.strategies = vec![agent];
    reported.baseline = 0;
    let (kept, other): (Vec<_>, Vec<_>) =
        std::mem::take(&mut reported.gates).into_iter().partition(|g| g.strategy == "*" || g.strategy == label);
    reported.gates = kept;
    let dropped = other
        .iter()
        .map(|g| {
            format!(
                "gate `{} {}` is on the simulated strategy `{}`, not on the agent (`{label}`): not checked by exec \
                 (write strategy = \"*\" to gate the agent)",
                g.metric,
                report::gate_bounds(g.min, g.max),
                g.strategy
            )
        })
        .collect();
    (reported, dropped)
}

/// Metrics no agent run can measure: the agent's own breaker is inside it (the mocks see
/// only its calls), and there is no simulated baseline strategy to pair it with.
const NOT_MEASURED_BY_EXEC: [(&str, &str); 5] = [
    ("breaker_trips", "the agent's circuit breaker is inside the agent: the mocks see only its calls"),
    ("breaker_trips_per_run", "the agent's circuit breaker is inside the agent: the mocks see only its calls"),
    ("calls_delta_vs_baseline", "an agent run has no simulated baseline strategy to pair with"),
    ("calls_delta_lo", "an agent run has no simulated baseline strategy to pair with"),
    ("calls_delta_hi", "an agent run has no simulated baseline strategy to pair with"),
];

/// A gate `exec` cannot decide is bad input, said before the agent runs.
fn check_exec_gates(sc: &crate::scenario::Scenario, file: &Path) -> Result<()> {
    for g in &sc.gates {
        if let Some((metric, why)) = NOT_MEASURED_BY_EXEC.iter().find(|(m, _)| *m == g.metric) {
            return Err(Error::Parse {
                file: file.display().to_string(),
                message: format!(
                    "[[gates]] metric = \"{metric}\": exec cannot compute it ({why}); gate it under `run`"
                ),
            });
        }
        if g.is_robustness() {
            return Err(Error::Parse {
                file: file.display().to_string(),
                message: format!("[[gates]] metric = \"{}\": a sweep's gate; exec runs one profile", g.metric),
            });
        }
    }
    Ok(())
}

/// The checklist over every run and agent ("run 2" alone, "run 2 agent 5" in a fleet), the
/// outcome line, and requests that went elsewhere.
fn checklist(args: &ExecArgs, records: &[RunRecord], who: &dyn Fn(usize, usize) -> String) -> Checklist {
    let every =
        || records.iter().enumerate().flat_map(|(i, r)| r.agents.iter().enumerate().map(move |(k, a)| (i, k, a)));
    let mut failed: BTreeMap<Check, Vec<String>> = BTreeMap::new();
    let mut notes = Vec::new();
    let mut elsewhere = Vec::new();
    let allowed = |host: &str| {
        let h = host.split('/').next().unwrap_or(host);
        args.allow_elsewhere.iter().any(|a| a == h || h.split(':').next() == Some(a.as_str()))
    };
    for (i, k, r) in every() {
        for f in &r.findings {
            match f.check {
                None => notes.push(format!("{}: {}", who(i, k), f.detail)),
                Some(c) => failed.entry(c).or_default().push(format!("{}: {}", who(i, k), f.detail)),
            }
        }
        if r.exit != Some(0) && !args.proxied {
            failed.entry(Check::ExitStatus).or_default().push(format!(
                "{}: the agent exited with {}",
                who(i, k),
                r.exit.map_or("no status (killed)".to_owned(), |c| c.to_string())
            ));
        }
        for host in &r.elsewhere {
            elsewhere.push(format!("{}: {host}", who(i, k)));
            if !allowed(host) {
                failed
                    .entry(Check::StaysLocal)
                    .or_default()
                    .push(format!("{}: a request for {host} (allow it with --allow-elsewhere HOST)", who(i, k)));
            }
        }
        if args.json_envelope && openai_format(r) {
            for e in &r.trace.events {
                if let TraceEvent::ToolResult { ok: false, content, call_id, .. } = e
                    && serde_json::from_str::<serde_json::Value>(content).map_or(true, |v| !v.is_object())
                {
                    failed
                        .entry(Check::JsonEnvelope)
                        .or_default()
                        .push(format!("{}: the result of {call_id} is not a JSON object", who(i, k)));
                }
            }
        }
    }
    let mut used: Vec<&str> = every().filter_map(|(_, _, r)| r.trace.header.provider.as_deref()).collect();
    used.sort_unstable();
    used.dedup();
    for f in &used {
        if !every().any(|(_, _, r)| r.round_trips.iter().any(|t| t == f)) {
            failed
                .entry(Check::RoundTrip)
                .or_default()
                .push(format!("no conversation through {f} got a tool result back to the model or an ending"));
        }
    }
    let anthropic = used.contains(&"anthropic");
    let checks = Check::ALL
        .iter()
        .map(|&c| {
            let status = match failed.remove(&c) {
                Some(d) => CheckStatus::Fail(d),
                None if c == Check::ExitStatus && args.proxied => {
                    CheckStatus::NotApplicable("the agent is not tracefault's child under proxy".into())
                }
                None if c == Check::IsError && !anthropic => {
                    CheckStatus::NotApplicable("the agent sent no Anthropic request".into())
                }
                None if c == Check::JsonEnvelope && !args.json_envelope => {
                    CheckStatus::NotApplicable("--json-envelope not given".into())
                }
                None if c == Check::JsonEnvelope && !every().any(|(_, _, r)| openai_format(r)) => {
                    CheckStatus::NotApplicable("the agent sent no OpenAI-format request".into())
                }
                None => CheckStatus::Pass,
            };
            CheckRow { title: c.title(), status }
        })
        .collect();
    Checklist { agent: redact(&args.cmd).join(" "), outcome: outcome(records, args.proxied), checks, notes, elsewhere }
}

fn openai_format(r: &AgentRecord) -> bool {
    matches!(r.trace.header.provider.as_deref(), Some("openai-chat" | "openai-responses" | "gemini-openai"))
}

/// `answered 4/5 · gave up 1 · looped 0 · step cap 0 · stopped midway 0 · crashed 0`: each
/// agent run counted once, under the first of crashed (a non-zero exit, killed or timed out),
/// step cap, looped (identical calls with identical results), gave up, stopped midway (cut
/// off, never called) and answered that holds.
fn outcome(records: &[RunRecord], proxied: bool) -> String {
    let mut n = [0usize; 6];
    let mut total = 0;
    for a in records.iter().flat_map(|r| &r.agents) {
        total += 1;
        let k = match a.ended.as_str() {
            _ if (a.exit != Some(0) && !proxied) || a.ended == "timeout" => 5,
            "step_cap" => 3,
            _ if a.looped => 2,
            "gave_up" => 1,
            "answer" => 0,
            _ => 4,
        };
        n[k] += 1;
    }
    format!(
        "answered {}/{total} · gave up {} · looped {} · step cap {} · stopped midway {} · crashed {}",
        n[0], n[1], n[2], n[3], n[4], n[5]
    )
}

/// `exec.json`: each run's details (endings, HTTP counts, paths no mock serves), the checks.
fn exec_json(
    args: &ExecArgs,
    upstream: Option<&Upstream>,
    sc: &crate::scenario::Scenario,
    (records, first_run): (&[RunRecord], u64),
    checklist: &Checklist,
    passed: bool,
) -> Vec<u8> {
    let fleet = args.agents > 1;
    let checks: Vec<_> = checklist
        .checks
        .iter()
        .map(|c| {
            json!({"check": c.title, "passed": !matches!(c.status, CheckStatus::Fail(_)), "result": c.status.word(),
            "details": c.status.details()})
        })
        .collect();
    let describe = |r: &AgentRecord| {
        json!({"ended": r.ended, "agent_exit_code": r.exit, "provider": r.trace.header.provider,
        "http_requests": {"provider": r.http[0], "tools": r.http[1], "other": r.http[2], "tool_lists": r.http[3]},
        "counted": {"model_calls": r.metrics.model_calls, "tool_calls": r.metrics.tool_calls,
            "duplicate_writes": r.metrics.duplicate_writes, "false_success": r.metrics.false_successes,
            "wrong_accepted": r.metrics.wrong_accepted, "injection_followed": r.metrics.injection_followed},
        "unknown_paths": r.unknown_paths, "requests_elsewhere": r.elsewhere,
        "rewritten_results": r.trace.events.iter().filter(|e| matches!(e, TraceEvent::ToolResult { evidence: Some(ev), .. }
            if ev.starts_with(crate::wire::rewrite::EVIDENCE))).count(),
        "decisions": r.trace.events.iter().filter_map(|e| match e {
            TraceEvent::Decision { call_id, .. } => {
                crate::trace::inspect::decision_line(e).map(|l| format!("{call_id}: {l}"))
            }
            _ => None,
        }).collect::<Vec<_>>()})
    };
    let runs: Vec<_> = records
        .iter()
        .zip(first_run..)
        .map(|(r, run)| match r.agents.as_slice() {
            [one] if !fleet => {
                let mut d = describe(one);
                d["run"] = json!(run);
                d
            }
            agents => {
                let each: Vec<_> = agents
                    .iter()
                    .map(|a| {
                        let mut d = describe(a);
                        d["agent"] = json!(a.agent);
                        d["ended_ms"] = json!(a.ended_ms);
                        d
                    })
                    .collect();
                json!({"run": run, "agents": each, "agents_succeeded": r.metrics.agents_succeeded,
                    "makespan_ms": r.metrics.virtual_ms, "peak_in_flight": r.metrics.peak_in_flight,
                    "peak_in_flight_by_tool": r.peaks, "load_rejections": r.metrics.load_rejections})
            }
        })
        .collect();
    let timing = json!({"clock": "wall", "time_scale": args.time_scale,
        "note": "faults in time (windows, rate limits, retry-after) followed the agent's real waiting, scaled"});
    // Live mode: which providers answered the model requests (the mock model answered none).
    let model = match upstream {
        Some(u) => json!({"answered_by": "the providers (live)", "upstreams": u.describe(), "requests_sent": u.sent(),
            "max_model_calls": args.live.to.max_model_calls, "max_usd": args.live.to.max_usd,
            "usd_spent": u.spending().map(|(_, usd)| usd),
            "rewrite": u.rewrite().map(|s| s.name.clone())}),
        None => json!({"answered_by": "the mock model"}),
    };
    let doc = json!({"tracefault_version": report::VERSION, "scenario": sc.name, "seed": sc.seed,
        "agent": redact(&args.cmd), "passed": passed, "outcome": checklist.outcome, "timing": timing,
        "model": model, "checks": checks, "notes": checklist.notes, "requests_elsewhere": checklist.elsewhere,
        "runs": runs});
    let mut text = serde_json::to_vec_pretty(&doc).expect("a JSON value serializes");
    text.push(b'\n');
    text
}
