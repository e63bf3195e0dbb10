//! The agent frameworks people build on — pydantic-ai, the OpenAI Agents SDK, LangChain
//! `create_agent`, LiteLLM, the Vercel AI SDK, smolagents, AutoGen AgentChat, Agno, Haystack,
//! LlamaIndex, Strands Agents and Google ADK — run by `exec` over every API each supports,
//! streaming and not (where a provider of the framework always streams, streaming only), on
//! bundled scenarios. Each combination must end with the verdict the scenario implies; where a
//! framework's own documented behaviour decides the verdict (its turn limit, a provider it does
//! not retry), that is listed below as an expectation.
//!
//! Which combinations meet which scenario (see [`breadth`]), with `TRACEFAULT_FRAMEWORKS=all`:
//! every combination meets the scenarios whose verdict or history turns on the provider's
//! dialect and streaming (the worked example, the ambiguous loop's 20-odd turns of history in
//! each dialect, parallel calls, provider overload directly and through live mode). One
//! combination per framework (the fast subset, which covers every provider format, streaming and
//! chaining between them) meets the storm, whose verdict the framework alone decides (what it does
//! with a tool's repeated 429: the expectation names no API but Anthropic's check 3, which the
//! worked example covers), and the proxy's life cycle (its banner, built as exec builds an
//! agent's environment, Ctrl-C, the traffic scored as a run), whose live path the whole matrix
//! meets through live mode.
//!
//! The same agents also run through live mode (`exec --live`) on the provider-overload
//! scenario: their model requests go through tracefault, which answers the scenario's
//! provider faults in each provider's dialect, to an upstream provider (a `tracefault serve` of
//! the scenario without those faults, on another port, playing the real model), so each
//! framework's own client meets the live proxy (over every API, streaming and not, chained
//! where it chains, with `TRACEFAULT_FRAMEWORKS=all`), and must end with the verdicts it ends
//! with against the mocks.
//!
//! And through `tracefault proxy`: the proxy started on its own, the agent run once with the
//! proxy's banner as its environment, the proxy stopped with Ctrl-C; its report set must
//! score the traffic as the run the agent had (its ending and its checks), since the proxy
//! never sees the agent's exit status.
//!
//! `scripts/test.sh` runs the fast subset alone; `.ci/run` sets `TRACEFAULT_FRAMEWORKS=all` for
//! the whole matrix.

use std::collections::BTreeSet;
use std::sync::Mutex;

use serde_json::Value;

use crate::{root, tracefault};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Framework {
    PydanticAi,
    OpenAiAgents,
    LangChain,
    LiteLlm,
    VercelAi,
    /// `ToolCallingAgent`: `tool_choice: "required"`, a `final_answer` tool, results handed back
    /// as plain messages, a final request without tools after its step limit.
    Smolagents,
    /// `AssistantAgent` with `reflect_on_tool_use`: a request without tools after the tools ran.
    AutoGen,
    /// `Agent` with `OpenAIChat` (its telemetry off: `telemetry=False`).
    Agno,
    /// `Agent` with `OpenAIChatGenerator` (its telemetry off: `HAYSTACK_TELEMETRY_ENABLED`).
    Haystack,
    /// `FunctionAgent` with its `OpenAI` LLM, in `.venv-llamaindex` (it needs `openai<3`).
    LlamaIndex,
    /// `Agent` with its `OpenAIModel`, `OpenAIResponsesModel` (`stateful` for `--chain`),
    /// `AnthropicModel` or `GeminiModel`, in `.venv-strands` (it needs `mcp<2.2`). Only the chat
    /// provider has a non-streaming mode; the other three always stream.
    Strands,
    /// `LlmAgent` with its `Gemini` model, run by a `Runner` (`--stream`: `StreamingMode.SSE`),
    /// in `.venv-adk` (it needs `opentelemetry-api<=1.44`, `websockets<16`).
    Adk,
}
use Framework::*;

/// One agent: a framework, the provider API it talks, streaming or not, and (Responses only)
/// whether it chains turns with `previous_response_id`.
#[derive(Clone, Copy, Debug)]
struct Agent {
    framework: Framework,
    api: &'static str,
    stream: bool,
    chain: bool,
}

impl Agent {
    fn command(&self) -> Vec<String> {
        let py = root().join(".venv/bin/python").display().to_string();
        let script = |s: &str| root().join("examples").join(s).display().to_string();
        let mut cmd = match self.framework {
            PydanticAi => vec![py, script("frameworks/pydantic_ai_agent.py")],
            OpenAiAgents => vec![py, script("frameworks/openai_agents_agent.py")],
            LangChain => vec![py, script("frameworks/langchain_agent.py")],
            LiteLlm => vec![py, script("frameworks/litellm_agent.py")],
            VercelAi => vec!["node".into(), script("vercel-ai/agent.mjs")],
            Smolagents => vec![py, script("frameworks/smolagents_agent.py")],
            AutoGen => vec![py, script("frameworks/autogen_agent.py")],
            Agno => vec![py, script("frameworks/agno_agent.py")],
            Haystack => vec![py, script("frameworks/haystack_agent.py")],
            LlamaIndex => vec![
                root().join(".venv-llamaindex/bin/python").display().to_string(),
                script("frameworks/llamaindex_agent.py"),
            ],
            Strands => vec![
                root().join(".venv-strands/bin/python").display().to_string(),
                script("frameworks/strands_agent.py"),
            ],
            Adk => vec![root().join(".venv-adk/bin/python").display().to_string(), script("frameworks/adk_agent.py")],
        };
        cmd.extend(["--api".into(), self.api.into()]);
        if self.stream {
            cmd.push("--stream".into());
        }
        if self.chain {
            cmd.push("--chain".into());
        }
        cmd
    }

    fn anthropic(&self) -> bool {
        self.api == "anthropic"
    }

    fn gemini(&self) -> bool {
        self.api == "gemini"
    }
}

impl std::fmt::Display for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stream = if self.stream { " --stream" } else { "" };
        let chain = if self.chain { " --chain" } else { "" };
        write!(f, "{:?} --api {}{stream}{chain}", self.framework, self.api)
    }
}

/// Every framework over every API it supports, streaming and not (streaming only where the
/// framework's provider has no other mode); the Responses API also chained where the framework
/// offers it.
fn matrix() -> Vec<Agent> {
    let mut out = Vec::new();
    for (framework, list) in apis() {
        for &api in list {
            for &stream in streams(framework, api) {
                out.push(Agent { framework, api, stream, chain: false });
            }
        }
        if matches!(framework, OpenAiAgents | LangChain | Strands) {
            let stream = framework == Strands;
            out.push(Agent { framework, api: "responses", stream, chain: true });
        }
    }
    out
}

/// Every framework and the provider APIs it supports.
fn apis() -> [(Framework, &'static [&'static str]); 12] {
    [
        (PydanticAi, &["chat", "responses", "anthropic", "gemini"]),
        (OpenAiAgents, &["responses", "chat"]),
        (LangChain, &["chat", "responses", "anthropic", "gemini"]),
        (LiteLlm, &["openai", "anthropic", "gemini"]),
        (VercelAi, &["chat", "responses", "anthropic", "gemini"]),
        (Smolagents, &["chat"]),
        (AutoGen, &["chat"]),
        (Agno, &["chat"]),
        (Haystack, &["chat"]),
        (LlamaIndex, &["chat"]),
        (Strands, &["chat", "responses", "anthropic", "gemini"]),
        (Adk, &["gemini"]),
    ]
}

/// Whether a framework runs an API streaming, not, or both: Strands' Responses, Anthropic and
/// Gemini providers always stream.
fn streams(framework: Framework, api: &str) -> &'static [bool] {
    match (framework, api) {
        (Strands, "responses" | "anthropic" | "gemini") => &[true],
        _ => &[false, true],
    }
}

/// The fast subset `scripts/test.sh` runs: one combination per framework, together covering
/// every provider format, streaming, and response chaining.
fn fast(a: &Agent) -> bool {
    matches!(
        (a.framework, a.api, a.stream, a.chain),
        (PydanticAi, "chat", false, false)
            | (OpenAiAgents, "responses", false, true)
            | (LangChain, "anthropic", true, false)
            | (LiteLlm, "gemini", false, false)
            | (VercelAi, "responses", true, false)
            | (Smolagents, "chat", false, false)
            | (AutoGen, "chat", true, false)
            | (Agno, "chat", false, false)
            | (Haystack, "chat", true, false)
            | (LlamaIndex, "chat", false, false)
            | (Strands, "responses", true, true)
            | (Adk, "gemini", true, false)
    )
}

/// How many runs `agent` has on `scenario`: three for the fast subset's combinations where the
/// runs' draws decide the ending or its path (an answer, giving up or a loop; the storm's
/// re-issues), one elsewhere (an agent's run is seconds of CPU: the whole matrix at three runs
/// each took half of CI's time).
fn runs(scenario: &str, agent: &Agent) -> u32 {
    let drawn = scenario != "09-provider-overload";
    if fast(agent) && drawn { 3 } else { 1 }
}

/// How much of the matrix meets a scenario (with `TRACEFAULT_FRAMEWORKS=all`).
#[derive(Clone, Copy, PartialEq)]
enum Breadth {
    /// Every combination: the verdict or the history turns on the provider's dialect and
    /// streaming.
    Matrix,
    /// The fast subset: the framework alone decides the verdict (the storm), or the whole
    /// matrix meets the same path elsewhere (the proxy's, through live mode).
    PerFramework,
}

fn breadth(scenario: &str, through: Through) -> Breadth {
    match (scenario, through) {
        (_, Through::Proxy) | ("03-rate-limit-storm", _) => Breadth::PerFramework,
        _ => Breadth::Matrix,
    }
}

/// What a run of `agent` on `scenario` must show: the endings each run may have, the checks
/// that must fail (all others pass), and the agent's own exit status.
struct Expect {
    endings: &'static [&'static str],
    failing: BTreeSet<u8>,
    agent_exit: i32,
}

fn expect(scenario: &str, a: &Agent) -> Expect {
    let checks = |c: &[u8]| c.iter().copied().collect::<BTreeSet<u8>>();
    // The example tools hand back what the mock tool answered as plain text, as a tool written
    // the plain way does: no framework marks it `is_error`, so on Anthropic every failed
    // result fails check 3.
    let plain_failure = |a: &Agent| if a.anthropic() { checks(&[3]) } else { checks(&[]) };
    match scenario {
        "01-worked-example" | "06-parallel-one-failing" => {
            Expect { endings: &["answer", "gave_up"], failing: plain_failure(a), agent_exit: 0 }
        }
        // At real speed the quote API (in the test's copy, one call per 10 s: see
        // `with_slower_limiter`) refuses the third quote with a 429. No framework retries a
        // tool on its own, so the mock model sees the 429, re-issues it a model turn later —
        // before the retry-after is over — is refused again (up to its 3 re-issues, each drawn),
        // and gives up; check 6 flags the identical calls with identical results.
        "03-rate-limit-storm" => {
            let mut failing = plain_failure(a);
            failing.insert(6);
            Expect { endings: &["gave_up"], failing, agent_exit: 0 }
        }
        // The tool keeps saying more may be available. The mock model follows it until the
        // scenario's step cap (25) unless the framework stops first: the Agents SDK raises
        // MaxTurnsExceeded after 10 turns, the example LiteLLM loop exits 1 after 10 model
        // calls, the AI SDK stops quietly at its 20 steps. Check 6 flags every case.
        "02-ambiguous-loop" => match a.framework {
            OpenAiAgents | LiteLlm => Expect { endings: &["cut_off"], failing: checks(&[6, 7]), agent_exit: 1 },
            VercelAi => Expect { endings: &["cut_off", "answer"], failing: checks(&[6]), agent_exit: 0 },
            // smolagents stops at its 10 steps and asks for a final answer with no tools;
            // AutoGen stops at its 10 tool iterations and reflects with no tools: the mock
            // answers text that says which call waits, and the run stops midway.
            // Haystack stops at its `max_agent_steps` (20 in the example) while the model still
            // asks for tools.
            Smolagents | AutoGen | Haystack => {
                Expect { endings: &["cut_off", "answer"], failing: checks(&[6]), agent_exit: 0 }
            }
            // LlamaIndex raises `WorkflowRuntimeError` at its `max_iterations` (20 in the example):
            // a run cut off there exits 1 (these runs' draws: runs 0 and 2 loop, run 1 answers).
            LlamaIndex => Expect { endings: &["cut_off", "answer"], failing: checks(&[6, 7]), agent_exit: 1 },
            // Strands has no turn limit unless given one: the example passes `limits={"turns": 20}`,
            // at which its loop stops quietly (`stop_reason="limit_turns"`, no exception) while the
            // model still asks for tools.
            Strands => Expect { endings: &["cut_off", "answer"], failing: checks(&[6]), agent_exit: 0 },
            // ADK raises `LlmCallsLimitExceededError` past `RunConfig.max_llm_calls` (20 in the
            // example; its default is 500): a run cut off there exits 1.
            Adk => Expect { endings: &["cut_off", "answer"], failing: checks(&[6, 7]), agent_exit: 1 },
            // Agno sets no tool-call limit: the loop runs to the scenario's step cap.
            Agno => Expect { endings: &["step_cap", "answer"], failing: checks(&[6]), agent_exit: 0 },
            PydanticAi | LangChain => Expect { endings: &["step_cap", "answer"], failing: checks(&[6]), agent_exit: 0 },
        },
        // The provider answers overloaded twice, then 429 with retry-after. The official
        // openai and anthropic SDKs retry those by default (twice), and so does every framework
        // built on them; google-genai (under pydantic-ai) retries nothing unless configured, and
        // LiteLLM retries nothing by default where it calls the provider itself (Anthropic,
        // Gemini; its OpenAI path goes through the openai SDK): the first overload ends those.
        // ADK's `Gemini` model passes no retry options to google-genai unless given
        // `retry_options`; Strands' own retry strategy (6 attempts) covers only throttling, and
        // its Gemini provider maps only a `ClientError` (4xx) to it, so a 503 ends the run there.
        "09-provider-overload" => {
            let no_retry = match a.framework {
                PydanticAi | Strands => a.gemini(),
                Adk => true,
                LiteLlm => a.api != "openai",
                _ => false,
            };
            if no_retry {
                Expect { endings: &["cut_off"], failing: checks(&[1, 6, 7]), agent_exit: 1 }
            } else {
                // (The refund tool's 10 % 503 does not fire in these runs.)
                Expect { endings: &["answer"], failing: checks(&[]), agent_exit: 0 }
            }
        }
        other => panic!("no expectation for {other}"),
    }
}

/// The ending text the mock model sent, from the run's trace.
fn final_text(trace: &str) -> Option<String> {
    trace
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|e| (e["type"] == "final").then(|| e["text"].as_str().unwrap_or_default().to_owned()))
}

/// Adds to `wrong` unless the report's failing checks are the ones expected; the exit code the
/// report's command must have.
fn checks_as_expected(report: &Value, want: &Expect, wrong: &mut Vec<String>) -> i32 {
    let failing: BTreeSet<u8> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["check"].as_str().unwrap()[..1].parse().unwrap())
        .collect();
    if failing != want.failing {
        wrong.push(format!("failing checks {failing:?}, expected {:?}: {}", want.failing, report["checks"]));
    }
    if want.failing.is_empty() { 0 } else { 1 }
}

/// `scenarios/NAME.toml` changed by `edit`, written into `dir` as `file`.
fn scenario_copy(
    name: &str,
    dir: &std::path::Path,
    file: &str,
    edit: impl FnOnce(&mut toml::Table),
) -> std::path::PathBuf {
    let text = std::fs::read_to_string(root().join(format!("scenarios/{name}.toml"))).unwrap();
    let mut doc: toml::Table = toml::from_str(&text).unwrap();
    assert!(!doc.contains_key("trace"), "a scenario with a trace path would need it rebased");
    edit(&mut doc);
    let path = dir.join(file);
    std::fs::write(&path, toml::to_string(&doc).unwrap()).unwrap();
    path
}

/// The scenario `scenarios/NAME.toml` without its provider faults, written into `dir`: what
/// the upstream provider serves in live mode (the faults are the live proxy's to answer).
fn without_provider_faults(name: &str, dir: &std::path::Path) -> std::path::PathBuf {
    scenario_copy(name, dir, "upstream.toml", |doc| {
        if let Some(toml::Value::Array(faults)) = doc.get_mut("faults") {
            let before = faults.len();
            faults.retain(|f| f.get("target").and_then(toml::Value::as_str) != Some("provider"));
            assert!(faults.len() < before, "{name} has provider faults for the live proxy to answer");
        }
    })
}

/// The rate-limit storm with its quote API refilling one call per 10 s instead of 2 s, written
/// into `dir`: run in real time, the window in which a re-issue is refused must outlast the
/// agent's turns until the mock model gives up (up to its 3 re-issues), and at 2 s turns slowed
/// by a busy machine (a framework's Python on a loaded CPU) let the bucket refill, so the run
/// answered. Burst, faults and task are the scenario's.
fn with_slower_limiter(name: &str, dir: &std::path::Path) -> std::path::PathBuf {
    scenario_copy(name, dir, &format!("{name}.toml"), |doc| {
        let mut slowed = 0;
        for fault in doc["faults"].as_array_mut().unwrap() {
            if let Some(limit) = fault.get_mut("rate_limit").and_then(toml::Value::as_table_mut) {
                limit.insert("per_s".into(), toml::Value::Float(0.1));
                slowed += 1;
            }
        }
        assert_eq!(slowed, 1, "{name} has one rate limiter");
    })
}

/// Runs `agent` on `scenario` (through live mode to an upstream provider when `live`) and
/// returns what disagrees with the expectation.
fn check(scenario: &str, agent: &Agent, live: bool) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    // Real time for the rate limiter (its window must outlast an agent's turn); a hundredth
    // elsewhere, so outages and retry-after waits pass quickly.
    let storm = scenario == "03-rate-limit-storm";
    let time_scale = if storm { "1" } else { "0.01" };
    let file = if storm {
        with_slower_limiter(scenario, tmp.path())
    } else {
        std::path::PathBuf::from(format!("scenarios/{scenario}.toml"))
    };
    let runs = runs(scenario, agent).to_string();
    let mut exec = tracefault();
    exec.arg("exec").arg(&file).args(["--runs", &runs, "--time-scale", time_scale, "--out"]).arg(&dir);
    let upstream = live.then(|| {
        let sc = without_provider_faults(scenario, tmp.path());
        crate::wire::Served::start_with(sc.to_str().unwrap(), &["--time-scale", time_scale])
    });
    if let Some(up) = &upstream {
        let base = &up.base;
        exec.args(["--live", "--upstream", &format!("openai={base},anthropic={base},gemini={base}")]);
        // Live mode passes the user's own keys through: these stand for them.
        for var in
            ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY"]
        {
            exec.env(var, "user-key-for-the-upstream");
        }
    }
    let out = exec.arg("--").args(agent.command()).output().unwrap();
    drop(upstream);
    let mut want = expect(scenario, agent);
    let mut wrong = Vec::new();
    let Ok(report) = std::fs::read_to_string(dir.join("exec.json")) else {
        return vec![format!("no exec.json: {}", String::from_utf8_lossy(&out.stderr))];
    };
    let report: Value = serde_json::from_str(&report).unwrap();
    // A run the mock model ended by giving up is not an answer: check 6 fails for it.
    if report["runs"].as_array().unwrap().iter().any(|r| r["ended"] == "gave_up") {
        want.failing.insert(6);
    }
    let code = checks_as_expected(&report, &want, &mut wrong);
    if out.status.code() != Some(code) {
        wrong.push(format!("exec exited {:?}, expected {code}", out.status.code()));
    }
    for note in report["notes"].as_array().unwrap().iter().filter(|n| n.to_string().contains("matched no call")) {
        wrong.push(format!("a result matched no call of the mock tool: {note}"));
    }
    for (i, run) in report["runs"].as_array().unwrap().iter().enumerate() {
        let ended = run["ended"].as_str().unwrap_or_default();
        if !want.endings.contains(&ended) {
            wrong.push(format!("run {i} ended {ended}, expected one of {:?}", want.endings));
        }
        // A framework that raises at its own turn limit exits 1 only in the runs it cut off.
        let exit = if want.agent_exit == 1 && ended == "answer" { 0 } else { want.agent_exit };
        if run["agent_exit_code"] != exit {
            wrong.push(format!("run {i}: agent exited {}, expected {exit}", run["agent_exit_code"]));
        }
        if run["http_requests"]["provider"].as_u64() < run["counted"]["model_calls"].as_u64() {
            wrong.push(format!("run {i}: fewer provider requests than model calls: {run}"));
        }
        // The mock's ending reached the agent: what it printed is what the mock model said.
        let log = std::fs::read_to_string(dir.join(format!("agent-run-{i}.log"))).unwrap_or_default();
        let trace = std::fs::read_to_string(dir.join(format!("traces/run-{i}.jsonl"))).unwrap_or_default();
        if let Some(text) = final_text(&trace).filter(|_| ended != "cut_off")
            && !log.contains(&text)
        {
            wrong.push(format!("run {i}: the agent did not print the mock's final text {text:?}: {log}"));
        }
    }
    wrong
}

/// Runs `agent` once through `tracefault proxy` on `scenario` (the proxy's upstream a serve of
/// the scenario without its provider faults) and returns what disagrees with run 0's
/// expectation.
fn check_through_proxy(scenario: &str, agent: &Agent) -> Vec<String> {
    use std::io::BufRead;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let sc = without_provider_faults(scenario, tmp.path());
    let up = crate::wire::Served::start_with(sc.to_str().unwrap(), &["--time-scale", "0.01"]);
    let base = &up.base;
    let mut proxy = std::process::Command::new(assert_cmd::cargo::cargo_bin!("tracefault"))
        .current_dir(root())
        .args(["proxy", &format!("scenarios/{scenario}.toml"), "--time-scale", "0.01", "--out"])
        .arg(&dir)
        .args(["--upstream", &format!("openai={base},anthropic={base},gemini={base}")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The banner is the agent's environment: `export NAME=VALUE` lines.
    let mut env = Vec::new();
    for line in std::io::BufReader::new(proxy.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some((k, v)) = line.strip_prefix("export ").and_then(|l| l.split_once('=')) {
            env.push((k.to_owned(), v.to_owned()));
        }
        if line.starts_with("# tracefault is serving") {
            break;
        }
    }
    let cmd = agent.command();
    let mut run = std::process::Command::new(&cmd[0]);
    run.args(&cmd[1..]).current_dir(root()).envs(env);
    // The user's own keys, which the proxy passes through to the upstream.
    for var in
        ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY"]
    {
        run.env(var, "user-key-for-the-upstream");
    }
    let agent_out = run.output().unwrap();
    rustix::process::kill_process(rustix::process::Pid::from_child(&proxy), rustix::process::Signal::INT).unwrap();
    let out = proxy.wait_with_output().unwrap();
    drop(up);
    let mut want = expect(scenario, agent);
    let log = String::from_utf8_lossy(&agent_out.stdout).into_owned();
    let Ok(report) = std::fs::read_to_string(dir.join("exec.json")) else {
        return vec![format!("no exec.json: {}", String::from_utf8_lossy(&out.stderr))];
    };
    let report: Value = serde_json::from_str(&report).unwrap();
    let mut wrong = Vec::new();
    let runs = report["runs"].as_array().unwrap();
    if runs.len() != 1 {
        wrong.push(format!("{} runs, expected the traffic scored as one", runs.len()));
    }
    let run = &runs[0];
    let ended = run["ended"].as_str().unwrap_or_default();
    if ended == "gave_up" {
        want.failing.insert(6);
    }
    // The proxy never sees the agent's exit status: check 7 is the one exec alone can judge.
    want.failing.remove(&7);
    let code = checks_as_expected(&report, &want, &mut wrong);
    if out.status.code() != Some(code) {
        wrong.push(format!(
            "proxy exited {:?}, expected {code}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if !want.endings.contains(&ended) {
        wrong.push(format!("the run ended {ended}, expected one of {:?}", want.endings));
    }
    let exit = if want.agent_exit == 1 && ended == "answer" { 0 } else { want.agent_exit };
    if agent_out.status.code() != Some(exit) {
        wrong.push(format!(
            "the agent exited {:?}, expected {exit}: {}",
            agent_out.status.code(),
            String::from_utf8_lossy(&agent_out.stderr)
        ));
    }
    if run["http_requests"]["provider"].as_u64() < run["counted"]["model_calls"].as_u64() {
        wrong.push(format!("fewer provider requests than model calls: {run}"));
    }
    let trace = std::fs::read_to_string(dir.join("traces/agent-0.jsonl")).unwrap_or_default();
    if let Some(text) = final_text(&trace).filter(|_| ended != "cut_off")
        && !log.contains(&text)
    {
        wrong.push(format!("the agent did not print the upstream's final text {text:?}: {log}"));
    }
    wrong
}

/// Runs the matrix (or its fast subset) on `scenario`, two agents at a time, and fails with
/// every disagreement at once.
fn run_scenario(scenario: &str) {
    run_matrix(scenario, Through::Exec);
}

/// How the matrix meets the scenario: `exec` against the mocks, `exec --live`, or `proxy`.
#[derive(Clone, Copy, PartialEq)]
enum Through {
    Exec,
    ExecLive,
    Proxy,
}

/// [`run_scenario`], directly against the mocks, through live mode or through the proxy.
fn run_matrix(scenario: &str, through: Through) {
    if !crate::wire::frameworks_installed() {
        return;
    }
    let all = std::env::var("TRACEFAULT_FRAMEWORKS").is_ok_and(|v| v == "all")
        && breadth(scenario, through) == Breadth::Matrix;
    let agents: Vec<Agent> = matrix().into_iter().filter(|a| all || fast(a)).collect();
    let next = Mutex::new(agents.iter());
    let wrong = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while let Some(agent) = { next.lock().unwrap().next() } {
                    let found = match through {
                        Through::Proxy => check_through_proxy(scenario, agent),
                        _ => check(scenario, agent, through == Through::ExecLive),
                    };
                    for w in found {
                        let how = match through {
                            Through::Exec => "",
                            Through::ExecLive => " through live mode",
                            Through::Proxy => " through proxy",
                        };
                        wrong.lock().unwrap().push(format!("{agent} on {scenario}{how}: {w}"));
                    }
                }
            });
        }
    });
    let wrong = wrong.into_inner().unwrap();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn frameworks_on_the_worked_example() {
    run_scenario("01-worked-example");
}

#[test]
fn frameworks_on_the_ambiguous_loop() {
    run_scenario("02-ambiguous-loop");
}

#[test]
fn frameworks_on_the_rate_limit_storm() {
    run_scenario("03-rate-limit-storm");
}

#[test]
fn frameworks_on_parallel_calls() {
    run_scenario("06-parallel-one-failing");
}

#[test]
fn frameworks_on_provider_overload() {
    run_scenario("09-provider-overload");
}

#[test]
fn frameworks_on_provider_overload_through_live_mode() {
    run_matrix("09-provider-overload", Through::ExecLive);
}

#[test]
fn frameworks_on_provider_overload_through_proxy() {
    run_matrix("09-provider-overload", Through::Proxy);
}

#[test]
fn the_fast_subset_covers_every_framework_and_format() {
    let fast: Vec<Agent> = matrix().into_iter().filter(fast).collect();
    assert_eq!(fast.len(), 12);
    for (f, _) in apis() {
        assert!(fast.iter().any(|a| a.framework == f), "{f:?}");
    }
    assert!(fast.iter().any(|a| a.stream) && fast.iter().any(|a| a.chain));
}
