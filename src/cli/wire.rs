//! `tracefault serve` and `tracefault exec`: the mocks over real HTTP, for a user's own agent.

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

#[derive(Debug, Args)]
pub struct ServeArgs {
    pub scenario: PathBuf,
    /// Where to listen. Loopback unless you say otherwise; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub addr: SocketAddr,
    /// Which run's fault draws to serve.
    #[arg(long, default_value_t = 0)]
    pub run: u64,
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
    /// Seconds one run of the agent may take.
    #[arg(long, default_value_t = 120)]
    pub timeout_s: u64,
    /// The agent says its tool results are JSON: check that every OpenAI-format one parses.
    #[arg(long)]
    pub json_envelope: bool,
    /// The agent's command line.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::Usage(format!("cannot start the async runtime: {e}")))
}

pub fn serve(args: ServeArgs) -> Result<i32> {
    let sc = load_file(&args.scenario)?;
    runtime()?.block_on(async {
        let server = WireServer::start(sc, args.addr).await?;
        server.reset(args.run).await;
        for (k, v) in server.env() {
            println!("export {k}={v}");
        }
        println!("# tracefault is serving {} (run {}); Ctrl-C to stop", args.scenario.display(), args.run);
        let _ = std::io::stdout().flush();
        let _ = tokio::signal::ctrl_c().await;
        let s = server.state();
        eprintln!("served {} model calls and {} tool calls", s.model_calls, s.tool_calls);
        Ok(exit::OK)
    })
}

/// The six checks of seed 000's checklist, each PASS/FAIL with details.
pub const CHECKS: [&str; 6] = [
    "1. one fixture conversation through every provider format the agent used",
    "2. retryable=false never retried without the model",
    "3. is_error on every failed Anthropic result",
    "4. every OpenAI tool message parses as JSON (when the agent claims a JSON envelope)",
    "5. no raw exception text reaches the model",
    "6. the agent terminates rather than loops",
];

struct RunRecord {
    trace: Trace,
    ended: String,
    exit: Option<i32>,
    findings: Vec<(u8, String)>,
    row: [String; 17],
    wiremock: (usize, usize),
    counted: (u64, u64),
}

pub fn exec(args: ExecArgs) -> Result<i32> {
    let sc = load_file(&args.scenario)?;
    std::fs::create_dir_all(args.out.join("traces")).map_err(|e| Error::io(&args.out, e))?;
    let rt = runtime()?;
    let records = rt.block_on(async {
        let server = WireServer::start(sc.clone(), args.addr).await?;
        let mut records = Vec::new();
        let mut seen = 0usize;
        for run in 0..args.runs {
            server.reset(run).await;
            let log_path = args.out.join(format!("agent-run-{run}.log"));
            let log = std::fs::File::create(&log_path).map_err(|e| Error::io(&log_path, e))?;
            let err_log = log.try_clone().map_err(|e| Error::io(&log_path, e))?;
            let mut child = tokio::process::Command::new(&args.cmd[0])
                .args(&args.cmd[1..])
                .envs(server.env())
                .env("TRACEFAULT_RUN", run.to_string())
                .stdin(std::process::Stdio::null())
                .stdout(log)
                .stderr(err_log)
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| Error::Usage(format!("cannot start `{}`: {e}", args.cmd.join(" "))))?;
            let status = tokio::time::timeout(Duration::from_secs(args.timeout_s), child.wait()).await;
            let (exit, timed_out) = match status {
                Ok(Ok(s)) => (s.code(), false),
                Ok(Err(e)) => return Err(Error::Usage(format!("waiting for the agent: {e}"))),
                Err(_) => {
                    let _ = child.kill().await;
                    (None, true)
                }
            };
            let received = server.received().await;
            let new = &received[seen..];
            seen = received.len();
            let tools = new.iter().filter(|r| r.url.path().starts_with("/tools/")).count();
            let providers = new.len() - tools;
            let s = server.state();
            let mut findings = s.findings.clone();
            let ended = match (timed_out, s.ended) {
                (true, _) => "timeout".to_owned(),
                (false, Some(e)) => e.to_owned(),
                (false, None) if s.model_calls == 0 => "never_called".to_owned(),
                (false, None) => "cut_off".to_owned(),
            };
            if s.model_calls == 0 {
                findings.push((6, "the agent never called the mock provider (check its base URL: OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL)".into()));
            }
            if timed_out {
                findings.push((6, format!("the agent did not finish within {} s", args.timeout_s)));
            }
            if ended == "step_cap" {
                findings.push((6, format!("the agent looped: still calling after {} model turns", sc.policy.max_steps)));
            }
            let mut trace = s.trace.clone();
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
            });
            let tokens: u64 = trace.events.iter().map(|e| match e {
                TraceEvent::ModelCall { tokens_in, tokens_out, .. } => tokens_in + tokens_out,
                _ => 0,
            }).sum();
            let model_issued = trace.events.iter().filter(|e| matches!(e, TraceEvent::ToolCall { .. })).count() as u64;
            let row = [
                sc.name.clone(),
                "agent".into(),
                run.to_string(),
                sc.seed.to_string(),
                ended.clone(),
                (s.model_calls + s.tool_calls).to_string(),
                s.model_calls.to_string(),
                s.tool_calls.to_string(),
                s.wasted_retries.to_string(),
                s.tool_calls.saturating_sub(model_issued).to_string(),
                "0".into(),
                "0".into(),
                s.faults_injected.to_string(),
                tokens.to_string(),
                s.virtual_ms.to_string(),
                findings.iter().filter(|f| f.0 == 1).count().to_string(),
                findings.iter().filter(|f| f.0 == 5).count().to_string(),
            ];
            records.push(RunRecord { trace, ended, exit, findings, row, wiremock: (providers, tools), counted: (s.model_calls, s.tool_calls) });
        }
        Ok::<_, Error>(records)
    })?;

    // The checklist over all runs.
    let mut results: Vec<(bool, Vec<String>)> = vec![(true, Vec::new()); 6];
    for (i, r) in records.iter().enumerate() {
        for (item, detail) in &r.findings {
            let k = usize::from(*item).clamp(1, 6) - 1;
            results[k].0 = false;
            results[k].1.push(format!("run {i}: {detail}"));
        }
        if args.json_envelope
            && matches!(r.trace.header.provider.as_deref(), Some("openai-chat" | "openai-responses" | "gemini-openai"))
        {
            for e in &r.trace.events {
                if let TraceEvent::ToolResult { ok: false, content, call_id, .. } = e
                    && serde_json::from_str::<serde_json::Value>(content).map_or(true, |v| !v.is_object())
                {
                    results[3].0 = false;
                    results[3].1.push(format!("run {i}: the result of {call_id} is not a JSON object"));
                }
            }
        }
    }
    let mut used: Vec<&str> = records.iter().filter_map(|r| r.trace.header.provider.as_deref()).collect();
    used.sort_unstable();
    used.dedup();
    for f in &used {
        if !records.iter().any(|r| r.trace.header.provider.as_deref() == Some(*f) && r.ended == "answer") {
            results[0].0 = false;
            results[0].1.push(format!("no run through {f} completed the conversation"));
        }
    }

    // Reports: runs.csv, one native trace per run, exec.json, report.md.
    let mut csv = RUNS_COLUMNS.join(",") + "\n";
    for r in &records {
        let mut w = ::csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
        w.write_record(&r.row).map_err(|e| Error::Usage(e.to_string()))?;
        csv.push_str(&String::from_utf8_lossy(&w.into_inner().map_err(|e| Error::Usage(e.to_string()))?));
    }
    output::write_file(&args.out.join("runs.csv"), csv.as_bytes())?;
    for (i, r) in records.iter().enumerate() {
        output::write_file(&args.out.join("traces").join(format!("run-{i}.jsonl")), r.trace.to_jsonl().as_bytes())?;
    }
    let checks: Vec<_> = CHECKS
        .iter()
        .zip(&results)
        .map(|(name, (ok, details))| json!({"check": name, "passed": ok, "details": details}))
        .collect();
    let runs: Vec<_> = records
        .iter()
        .map(|r| {
            json!({"ended": r.ended, "agent_exit_code": r.exit, "provider": r.trace.header.provider,
            "wiremock_requests": {"provider": r.wiremock.0, "tools": r.wiremock.1},
            "counted": {"model_calls": r.counted.0, "tool_calls": r.counted.1}})
        })
        .collect();
    let passed = results.iter().all(|r| r.0);
    let doc = json!({"tracefault_version": report::VERSION, "scenario": sc.name, "seed": sc.seed, "agent": args.cmd, "passed": passed, "checks": checks, "runs": runs});
    let mut text = serde_json::to_string_pretty(&doc).expect("serializes");
    text.push('\n');
    output::write_file(&args.out.join("exec.json"), text.as_bytes())?;
    let mut md = format!(
        "# tracefault exec: {}\n\nAgent: `{}` · {} run(s) · seed {}\n\n| check | result |\n|---|---|\n",
        sc.name,
        args.cmd.join(" "),
        records.len(),
        sc.seed
    );
    for (name, (ok, details)) in CHECKS.iter().zip(&results) {
        md.push_str(&format!(
            "| {name} | {} |\n",
            if *ok { "PASS".to_owned() } else { format!("**FAIL**: {}", details.join("; ")) }
        ));
    }
    output::write_file(&args.out.join("report.md"), md.as_bytes())?;

    for (i, r) in records.iter().enumerate() {
        println!(
            "run {i}: {} after {} model calls and {} tool calls (agent exit {})",
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
