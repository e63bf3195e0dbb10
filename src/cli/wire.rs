//! `tracefault serve` and `tracefault exec`: the mocks over real HTTP, for a user's own agent.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use crate::error::{Error, Result, exit};
use crate::metrics::summary::RUNS_COLUMNS;
use crate::output;
use crate::report;
use crate::scenario::load::load_file;
use crate::trace::{FinalOutcome, Trace, TraceEvent};
use crate::wire::WireServer;
use crate::wire::mcp;
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
    /// fault draws and conversations; the plain paths are agent 0. 1 to 10000.
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
    /// `/agents/K/`, sharing the tools' and the provider's limits. 1 to 1000.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub agents: u32,
    /// How the MCP endpoint hands a failed tool call back: mcp-text (isError and a sentence),
    /// mcp-envelope (isError and the five fields, as text and structuredContent) or
    /// jsonrpc-error (a JSON-RPC error: -32602 for bad arguments, -32603 otherwise).
    #[arg(long, default_value = "mcp-text")]
    pub mcp_strategy: String,
    /// The agent's command line.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

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
    let sc = load_file(&args.scenario)?;
    runtime()?.block_on(async {
        let mcp = mcp::encoding_of(&args.mcp_strategy)?;
        let server = WireServer::start(sc, args.addr, args.time_scale, args.agents, mcp).await?;
        // A long serve keeps no trace: memory stays flat.
        server.reset(args.run, false);
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
        let _ = tokio::signal::ctrl_c().await;
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
pub struct McpArgs {
    pub scenario: PathBuf,
    /// Speak MCP on stdin and stdout (for hosts that start a server as a subprocess). For
    /// streamable HTTP, `tracefault serve` serves `/mcp`.
    #[arg(long, required = true)]
    pub stdio: bool,
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

/// `tracefault mcp SCENARIO --stdio`: the scenario's tools as an MCP server on stdio, one agent
/// of run `--run`, until the client closes stdin. Nothing but MCP goes to stdout.
pub fn mcp_stdio(args: McpArgs) -> Result<i32> {
    let sc = load_file(&args.scenario)?;
    let encoding = mcp::encoding_of(&args.mcp_strategy)?;
    runtime()?.block_on(async {
        let mocks = crate::wire::mocks::Mocks::new(sc, args.run, 1, args.time_scale, false);
        let shared = std::sync::Arc::new(crate::wire::server::Shared {
            mocks: std::sync::Mutex::new(mocks),
            time_scale: args.time_scale,
            mcp: None,
        });
        mcp::serve_stdio(shared, encoding).await?;
        Ok(exit::OK)
    })
}

/// The checks of seed 000's six-point list, and the agent's own exit status.
pub const CHECKS: [&str; 7] = [
    "1. the conversation makes the round trip through every provider format the agent used",
    "2. retryable=false never retried without the model",
    "3. is_error on every failed Anthropic result",
    "4. every OpenAI tool message parses as JSON (when the agent claims a JSON envelope)",
    "5. no raw exception text reaches the model",
    "6. the agent terminates with an answer rather than loops or stops midway",
    "7. the agent exits with status 0",
];

/// What one agent left in its world in one run.
struct AgentRecord {
    trace: Trace,
    ended: String,
    exit: Option<i32>,
    /// When it ended (its process exited), in virtual ms since the run started.
    ended_ms: u64,
    findings: Vec<(u8, String)>,
    http: [u64; 3],
    counted: (u64, u64),
    wasted_retries: u64,
    /// Tool attempts the model did not ask for (the agent's own retries).
    agent_retries: u64,
    faults_injected: u64,
    load_rejections: u64,
    tokens: u64,
    /// Formats whose conversations made the round trip (a result read, or an ending).
    round_trips: Vec<String>,
    unknown_paths: Vec<String>,
    elsewhere: Vec<String>,
    /// The MCP tools/call messages that crossed, one JSON-RPC message per line.
    mcp_log: Vec<serde_json::Value>,
}

/// One run: every agent's record, the fleet's `runs.csv` row and each tool's peak in flight.
struct RunRecord {
    agents: Vec<AgentRecord>,
    row: [String; 25],
    peaks: serde_json::Map<String, serde_json::Value>,
}

/// Values on an agent's command line that look like credentials, replaced before they are
/// written anywhere: `sk-…` / `AIza…` keys, `Bearer …`, and the value after a flag or in a
/// `NAME=value` whose name says key, token, secret or password.
pub fn redact(cmd: &[String]) -> Vec<String> {
    let secret_name = |s: &str| {
        let l = s.to_ascii_lowercase();
        ["key", "token", "secret", "password", "passwd", "auth"].iter().any(|w| l.contains(w))
    };
    let looks_secret = |s: &str| {
        let t = s.trim_start_matches("Bearer ").trim();
        (t.starts_with("sk-") || t.starts_with("AIza") || t.starts_with("xox") || t.starts_with("ghp_")) && t.len() > 8
    };
    let mut out = Vec::with_capacity(cmd.len());
    let mut hide_next = false;
    for a in cmd {
        let redacted = if hide_next || looks_secret(a) || a.starts_with("Bearer ") {
            "[redacted]".to_owned()
        } else if let Some((name, _)) = a.split_once('=').filter(|(n, _)| secret_name(n)) {
            format!("{name}=[redacted]")
        } else {
            a.clone()
        };
        hide_next = a.starts_with('-') && !a.contains('=') && secret_name(a);
        out.push(redacted);
    }
    out
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
fn record(world: &World, ran: Ran, timeout_s: u64) -> AgentRecord {
    let Ran { exit, timed_out, ended_ms } = ran;
    let sc = &world.scenario;
    let mut findings = world.findings.clone();
    // The conversation that went furthest is the run's.
    let main = world.conversations.values().max_by_key(|c| c.turns);
    let ended = match (timed_out, main.and_then(|c| c.ended)) {
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
        findings.push((6, format!("the agent never called the mock provider ({why})")));
    }
    if timed_out {
        findings.push((6, format!("the agent did not finish within {timeout_s} s (its process group was killed)")));
    }
    match ended.as_str() {
        "step_cap" => {
            findings.push((6, format!("the agent looped: still calling after {} model turns", sc.policy.max_steps)))
        }
        "cut_off" if main.is_some_and(|c| c.waiting_on().next().is_some()) => findings.push((
            6,
            format!("the agent stopped while the model still asked for tools, after {model_calls} model calls"),
        )),
        "cut_off" => {
            findings.push((6, format!("the agent stopped without a final answer, after {model_calls} model calls")))
        }
        _ => {}
    }
    let repeats = longest_identical_repeat(&world.trace);
    if repeats >= 3 {
        findings
            .push((6, format!("{repeats} identical calls in a row got identical results ({model_calls} model calls)")));
    }
    let mut trace = world.trace.clone();
    let last_text = trace.events.iter().rev().find_map(|e| match e {
        TraceEvent::ModelCall { text: Some(t), .. } => Some(t.clone()),
        _ => None,
    });
    trace.events.push(TraceEvent::Final {
        text: last_text.unwrap_or_default(),
        outcome: match ended.as_str() {
            "answer" => FinalOutcome::Answer,
            "gave_up" => FinalOutcome::GaveUp,
            _ => FinalOutcome::CutOff,
        },
        reason: None,
        success: None,
        started_ms: None,
        t_ms: None,
        in_flight_attempts: None,
    });
    let tokens: u64 = trace
        .events
        .iter()
        .map(|e| match e {
            TraceEvent::ModelCall { tokens_in, tokens_out, .. } => tokens_in + tokens_out,
            _ => 0,
        })
        .sum();
    let model_issued = trace.events.iter().filter(|e| matches!(e, TraceEvent::ToolCall { .. })).count() as u64;
    let round_trips = world
        .conversations
        .values()
        .filter(|c| c.ended.is_some() || c.turns > 1)
        .map(|c| c.format.name().to_owned())
        .collect();
    AgentRecord {
        trace,
        ended,
        exit,
        ended_ms,
        http: world.http_requests,
        counted: (model_calls, world.tool_calls),
        wasted_retries: world.wasted_retries,
        agent_retries: world.tool_calls.saturating_sub(model_issued),
        faults_injected: world.faults_injected,
        load_rejections: world.load_rejections,
        tokens,
        findings,
        round_trips,
        unknown_paths: world.unknown_paths.iter().cloned().collect(),
        elsewhere: world.elsewhere.iter().cloned().collect(),
        mcp_log: world.mcp_log.clone(),
    }
}

/// The fleet's `runs.csv` row: totals over the agents; the run ends as its first agent to end
/// without an answer did (as in the engine), and lasts until its last agent ends. First
/// attempts are not counted on the wire, so `retry_amplification` stays empty.
fn run_row(sc: &crate::scenario::Scenario, run: u64, agents: &[AgentRecord], peak_in_flight: u32) -> [String; 25] {
    let sum = |f: fn(&AgentRecord) -> u64| agents.iter().map(f).sum::<u64>();
    let ended = agents
        .iter()
        .filter(|a| a.ended != "answer")
        .min_by_key(|a| a.ended_ms)
        .map_or("answer", |a| a.ended.as_str())
        .to_owned();
    let mut times: Vec<u64> = agents.iter().map(|a| a.ended_ms).collect();
    times.sort_unstable();
    let rank = |q: f64| times[((q * times.len() as f64).ceil() as usize).clamp(1, times.len()) - 1];
    let makespan = times.last().copied().unwrap_or(0);
    let (model_calls, tool_calls) = (sum(|a| a.counted.0), sum(|a| a.counted.1));
    let count = |item: u8| agents.iter().flat_map(|a| &a.findings).filter(|f| f.0 == item).count().to_string();
    [
        sc.name.clone(),
        "agent".into(),
        run.to_string(),
        sc.seed.to_string(),
        ended,
        (model_calls + tool_calls).to_string(),
        model_calls.to_string(),
        tool_calls.to_string(),
        sum(|a| a.wasted_retries).to_string(),
        sum(|a| a.agent_retries).to_string(),
        "0".into(),
        "0".into(),
        sum(|a| a.faults_injected).to_string(),
        sum(|a| a.tokens).to_string(),
        makespan.to_string(),
        count(1),
        count(5),
        agents.len().to_string(),
        agents.iter().filter(|a| a.ended == "answer").count().to_string(),
        makespan.to_string(),
        rank(0.5).to_string(),
        rank(0.99).to_string(),
        peak_in_flight.to_string(),
        String::new(),
        sum(|a| a.load_rejections).to_string(),
    ]
}

/// How one agent's process ended.
#[derive(Clone, Copy, Debug)]
struct Ran {
    exit: Option<i32>,
    timed_out: bool,
    ended_ms: u64,
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
        Ok(Ok(s)) => Ok(Ran { exit: s.code(), timed_out: false, ended_ms }),
        Ok(Err(e)) => Err(Error::Usage(format!("waiting for the agent: {e}"))),
        Err(_) => Ok(Ran { exit: None, timed_out: true, ended_ms }),
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
async fn exec_run(args: &ExecArgs, server: &WireServer, run: u64) -> Result<RunRecord> {
    server.reset(run, true);
    let clock = server.mocks().clock;
    let mut agents = tokio::task::JoinSet::new();
    for k in 0..args.agents {
        let name =
            if args.agents > 1 { format!("agent-run-{run}-agent-{k}.log") } else { format!("agent-run-{run}.log") };
        let log_path = args.out.join(name);
        let log = std::fs::File::create(&log_path).map_err(|e| Error::io(&log_path, e))?;
        let env = agent_env(&server.uri(), k, args.agents);
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
        records.push(record(world, r, args.timeout_s));
    }
    let row = run_row(m.scenario(), run, &records, m.limits.peak_in_flight());
    let peaks =
        m.scenario().task.tools.iter().zip(&m.limits.tools).map(|(t, s)| (t.clone(), json!(s.peak()))).collect();
    Ok(RunRecord { agents: records, row, peaks })
}

pub fn exec(args: ExecArgs) -> Result<i32> {
    let sc = load_file(&args.scenario)?;
    std::fs::create_dir_all(&args.out).map_err(|e| Error::io(&args.out, e))?;
    let rt = runtime()?;
    let records = rt.block_on(async {
        let mcp = mcp::encoding_of(&args.mcp_strategy)?;
        let server = WireServer::start(sc.clone(), args.addr, args.time_scale, args.agents, mcp).await?;
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
            records.push(exec_run(&args, &server, run).await?);
        }
        server.stop().await;
        Ok::<_, Error>(records)
    })?;

    // The checklist over all runs and agents ("run 2" alone, "run 2 agent 5" in a fleet).
    let fleet = args.agents > 1;
    let who = |run: usize, k: usize| if fleet { format!("run {run} agent {k}") } else { format!("run {run}") };
    let every =
        || records.iter().enumerate().flat_map(|(i, r)| r.agents.iter().enumerate().map(move |(k, a)| (i, k, a)));
    let mut results: Vec<(bool, Vec<String>)> = vec![(true, Vec::new()); CHECKS.len()];
    let mut notes = Vec::new();
    for (i, k, r) in every() {
        for (item, detail) in &r.findings {
            match item {
                0 => notes.push(format!("{}: {detail}", who(i, k))),
                item => {
                    let item = usize::from(*item).clamp(1, 6) - 1;
                    results[item].0 = false;
                    results[item].1.push(format!("{}: {detail}", who(i, k)));
                }
            }
        }
        if r.exit != Some(0) {
            results[6].0 = false;
            results[6].1.push(format!(
                "{}: the agent exited with {}",
                who(i, k),
                r.exit.map_or("no status (killed)".to_owned(), |c| c.to_string())
            ));
        }
        if args.json_envelope
            && matches!(r.trace.header.provider.as_deref(), Some("openai-chat" | "openai-responses" | "gemini-openai"))
        {
            for e in &r.trace.events {
                if let TraceEvent::ToolResult { ok: false, content, call_id, .. } = e
                    && serde_json::from_str::<serde_json::Value>(content).map_or(true, |v| !v.is_object())
                {
                    results[3].0 = false;
                    results[3].1.push(format!("{}: the result of {call_id} is not a JSON object", who(i, k)));
                }
            }
        }
    }
    let mut used: Vec<&str> = every().filter_map(|(_, _, r)| r.trace.header.provider.as_deref()).collect();
    used.sort_unstable();
    used.dedup();
    for f in &used {
        if !every().any(|(_, _, r)| r.round_trips.iter().any(|t| t == f)) {
            results[0].0 = false;
            results[0].1.push(format!("no conversation through {f} got a tool result back to the model or an ending"));
        }
    }

    // Reports: runs.csv (one row per run, fleet totals), one native trace per run and agent,
    // exec.json, report.md.
    let mut csv = RUNS_COLUMNS.join(",") + "\n";
    for r in &records {
        let mut w = ::csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
        w.write_record(&r.row).map_err(|e| Error::Usage(e.to_string()))?;
        csv.push_str(&String::from_utf8_lossy(&w.into_inner().map_err(|e| Error::Usage(e.to_string()))?));
    }
    output::write_file(&args.out.join("runs.csv"), csv.as_bytes())?;
    for (i, k, r) in every() {
        let name = if fleet { format!("run-{i}-agent-{k}.jsonl") } else { format!("run-{i}.jsonl") };
        output::write_file(&args.out.join("traces").join(&name), r.trace.to_jsonl().as_bytes())?;
        if !r.mcp_log.is_empty() {
            let lines: String = r.mcp_log.iter().map(|m| m.to_string() + "\n").collect();
            output::write_file(&args.out.join("mcp").join(&name), lines.as_bytes())?;
        }
    }
    let agent = redact(&args.cmd);
    let checks: Vec<_> = CHECKS
        .iter()
        .zip(&results)
        .map(|(name, (ok, details))| json!({"check": name, "passed": ok, "details": details}))
        .collect();
    let describe = |r: &AgentRecord| {
        json!({"ended": r.ended, "agent_exit_code": r.exit, "provider": r.trace.header.provider,
        "http_requests": {"provider": r.http[0], "tools": r.http[1], "other": r.http[2]},
        "counted": {"model_calls": r.counted.0, "tool_calls": r.counted.1},
        "unknown_paths": r.unknown_paths, "requests_elsewhere": r.elsewhere})
    };
    let runs: Vec<_> = records
        .iter()
        .map(|r| match r.agents.as_slice() {
            [one] if !fleet => describe(one),
            agents => {
                let each: Vec<_> = agents
                    .iter()
                    .enumerate()
                    .map(|(k, a)| {
                        let mut d = describe(a);
                        d["agent"] = json!(k);
                        d["ended_ms"] = json!(a.ended_ms);
                        d
                    })
                    .collect();
                json!({"agents": each, "agents_succeeded": r.row[18], "makespan_ms": r.row[19],
                    "peak_in_flight": r.row[22], "peak_in_flight_by_tool": r.peaks, "load_rejections": r.row[24]})
            }
        })
        .collect();
    let passed = results.iter().all(|r| r.0);
    let timing = json!({"clock": "wall", "time_scale": args.time_scale,
        "note": "faults in time (windows, rate limits, retry-after) followed the agent's real waiting, scaled"});
    let doc = json!({"tracefault_version": report::VERSION, "scenario": sc.name, "seed": sc.seed, "agent": agent,
        "passed": passed, "timing": timing, "checks": checks, "notes": notes, "runs": runs});
    let mut text = serde_json::to_string_pretty(&doc).expect("serializes");
    text.push('\n');
    output::write_file(&args.out.join("exec.json"), text.as_bytes())?;
    let copies = if fleet { format!(" × {} agents", args.agents) } else { String::new() };
    let mut md = format!(
        "# tracefault exec: {}\n\nAgent: `{}`{copies} · {} run(s) · seed {} · timing: wall clock × {}\n\n| check | result |\n|---|---|\n",
        sc.name,
        agent.join(" "),
        records.len(),
        sc.seed,
        args.time_scale
    );
    for (name, (ok, details)) in CHECKS.iter().zip(&results) {
        md.push_str(&format!(
            "| {name} | {} |\n",
            if *ok { "PASS".to_owned() } else { format!("**FAIL**: {}", details.join("; ")) }
        ));
    }
    if !notes.is_empty() {
        md.push_str("\nNotes:\n\n");
        for n in &notes {
            md.push_str(&format!("- {n}\n"));
        }
    }
    output::write_file(&args.out.join("report.md"), md.as_bytes())?;

    for (i, k, r) in every() {
        println!(
            "{}: {} after {} model calls and {} tool calls (agent exit {})",
            who(i, k),
            r.ended,
            r.counted.0,
            r.counted.1,
            r.exit.map_or("none".to_owned(), |c| c.to_string())
        );
    }
    for (name, (ok, details)) in CHECKS.iter().zip(&results) {
        println!("{} {name}", if *ok { "PASS" } else { "FAIL" });
        for d in details.iter().take(5) {
            println!("       {d}");
        }
    }
    println!("reports written to {}/", args.out.display());
    Ok(if passed { exit::OK } else { exit::FAILED })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_on_the_command_line_are_redacted() {
        let cmd: Vec<String> = [
            "agent",
            "--api-key",
            "sk-live-1234567890",
            "--model",
            "gpt-4o",
            "TOKEN=abc",
            "sk-proj-abcdefghij",
            "--stream",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            redact(&cmd),
            ["agent", "--api-key", "[redacted]", "--model", "gpt-4o", "TOKEN=[redacted]", "[redacted]", "--stream"]
        );
    }
}
