//! MCP: the scenario's tools over streamable HTTP (`serve`, `/mcp`) and stdio (`tracefault
//! mcp --stdio`), spoken to as raw JSON-RPC, and real MCP clients (the official Python SDK, the
//! OpenAI Agents SDK) run by `exec` under each MCP strategy.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use serde_json::{Value, json};

use crate::root;
use crate::wire::{Served, exec, runs_row, sdk_python};

/// Longer than any announced wait at time scale 0.001.
const WAIT: std::time::Duration = std::time::Duration::from_millis(30);

/// A session with the streamable HTTP endpoint, as a client speaks it: `initialize`, then the
/// session id on every request; answers come as JSON or as server-sent events.
struct Session {
    url: String,
    id: Option<String>,
    next: u64,
    /// Headers sent with every request from here on.
    extra: Vec<(&'static str, &'static str)>,
}

/// An answer: the HTTP status, the JSON-RPC message (if any), the headers we look at.
struct Answer {
    status: u16,
    message: Value,
    retry_after_ms: Option<String>,
    /// The methods of the notifications that came ahead of the answer on its event stream.
    notifications: Vec<String>,
}

impl Session {
    fn open(base: &str) -> Session {
        let mut s = Session { url: format!("{base}/mcp"), id: None, next: 1, extra: Vec::new() };
        let init = s.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}),
        );
        assert_eq!(init.status, 200);
        assert_eq!(init.message["result"]["protocolVersion"], "2025-06-18", "the version the client asked for");
        assert_eq!(init.message["result"]["serverInfo"]["name"], "tracefault");
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
        s
    }

    fn request(&mut self, method: &str, params: Value) -> Answer {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())
    }

    fn send(&mut self, body: &str) -> Answer {
        let mut req = ureq::post(&self.url)
            .set("content-type", "application/json")
            .set("accept", "application/json, text/event-stream");
        if let Some(id) = &self.id {
            req = req.set("mcp-session-id", id).set("mcp-protocol-version", "2025-06-18");
        }
        for (name, value) in &self.extra {
            req = req.set(name, value);
        }
        let r = match req.send_string(body) {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{e}"),
        };
        if let Some(id) = r.header("mcp-session-id") {
            self.id = Some(id.to_owned());
        }
        let status = r.status();
        let retry_after_ms = r.header("retry-after-ms").map(str::to_owned);
        let sse = r.content_type() == "text/event-stream";
        let text = r.into_string().unwrap();
        let events: Vec<Value> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .collect();
        let message = if sse {
            events.iter().find(|v| v.get("id").is_some()).cloned().unwrap_or(Value::Null)
        } else {
            serde_json::from_str(&text).unwrap_or(Value::Null)
        };
        let notifications = events
            .iter()
            .take_while(|v| v.get("id").is_none())
            .filter_map(|v| v["method"].as_str().map(str::to_owned))
            .collect();
        Answer { status, message, retry_after_ms, notifications }
    }

    fn call(&mut self, tool: &str, query: &str) -> Answer {
        self.request("tools/call", json!({"name": tool, "arguments": {"query": query}}))
    }
}

#[test]
fn tools_list_describes_each_tool_with_its_input_schema() {
    let served = Served::start_with("tests/fixtures/wire/mcp-faults.toml", &[]);
    let mut s = Session::open(&served.base);
    let list = s.request("tools/list", json!({}));
    let tools = list.message["result"]["tools"].as_array().unwrap().clone();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["name"], "search");
    assert_eq!(tools[0]["inputSchema"]["properties"]["query"]["type"], "string");
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["query"]));
}

/// A write's failure hands back the idempotency key its `tools/call` carried, from the
/// request's `_meta.idempotencyKey` or from its HTTP `Idempotency-Key` header (the header
/// first). `charge_card` fails its attempts 1 and 3 after committing.
#[test]
fn mcp_envelope_hands_back_a_writes_idempotency_key() {
    let served = Served::start_with("tests/fixtures/writes/writes.toml", &["--mcp-strategy", "mcp-envelope"]);
    let mut s = Session::open(&served.base);
    let mut charge = |meta: Value| {
        let a = s.request("tools/call", json!({"name": "charge_card", "arguments": {"cart": "A"}, "_meta": meta}));
        assert_eq!(a.status, 200, "{}", a.message);
        a.message["result"].clone()
    };
    let first = charge(json!({"idempotencyKey": "k-meta"}));
    assert_eq!(first["isError"], true, "{first}");
    assert_eq!(first["structuredContent"]["details"]["idempotency_key"], "k-meta", "{first}");
    let second = charge(json!({"idempotencyKey": "k-meta"}));
    assert_ne!(second["isError"], true, "{second}");
    s.extra = vec![("idempotency-key", "k-header")];
    let third = s.request(
        "tools/call",
        json!({"name": "charge_card", "arguments": {"cart": "A"}, "_meta": {"idempotencyKey": "k-meta"}}),
    );
    let third = &third.message["result"];
    assert_eq!(third["isError"], true, "{third}");
    assert_eq!(third["structuredContent"]["details"]["idempotency_key"], "k-header", "{third}");
    // A call without a key names none.
    s.extra.clear();
    let plain = s.request("tools/call", json!({"name": "charge_card", "arguments": {"cart": "B"}}));
    assert!(plain.message["result"]["structuredContent"]["details"].get("idempotency_key").is_none());
}

#[test]
fn mcp_envelope_hands_back_each_fault_as_the_scenario_orders_it() {
    // Attempt 1: the endpoint's own 503 (transport = true) with retry-after 2 s; attempt 2: the
    // tool's 500 as isError with the five fields (retryable); attempt 3: 400 on the arguments
    // (not retryable); attempt 4, other arguments: the result. At time scale 0.001 the 2 s
    // wait is 2 real ms, honoured before the next call (one sooner is refused the same way).
    let served = Served::start_with(
        "tests/fixtures/wire/mcp-faults.toml",
        &["--mcp-strategy", "mcp-envelope", "--time-scale", "0.001"],
    );
    let mut s = Session::open(&served.base);
    let first = s.call("search", "weather Paris");
    assert_eq!(first.status, 503);
    assert_eq!(first.retry_after_ms.as_deref(), Some("2"));
    std::thread::sleep(WAIT);
    let second = s.call("search", "weather Paris");
    assert_eq!(second.status, 200);
    let result = &second.message["result"];
    assert_eq!(result["isError"], true);
    assert_eq!(result["structuredContent"]["code"], "TRANSPORT");
    assert_eq!(result["structuredContent"]["retryable"], true);
    assert_eq!(result["structuredContent"]["details"]["status"], 500);
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, result["structuredContent"], "the five fields as text and as structuredContent");
    let third = s.call("search", "weather Paris");
    assert_eq!(third.message["result"]["structuredContent"]["code"], "INVALID_ARGS");
    assert_eq!(third.message["result"]["structuredContent"]["retryable"], false);
    let fourth = s.call("search", "Paris");
    assert_eq!(fourth.message["result"]["isError"], false);
    assert_eq!(fourth.message["result"]["content"][0]["text"], r#"{"temp_c":18}"#);
}

#[test]
fn jsonrpc_error_uses_the_specs_codes_and_bad_input_gets_the_specs_errors() {
    let served = Served::start_with(
        "tests/fixtures/wire/mcp-faults.toml",
        &["--mcp-strategy", "jsonrpc-error", "--time-scale", "0.001"],
    );
    let mut s = Session::open(&served.base);
    assert_eq!(s.call("search", "q").status, 503);
    std::thread::sleep(WAIT);
    let internal = s.call("search", "q");
    assert_eq!(internal.message["error"]["code"], -32603, "{}", internal.message);
    assert_eq!(internal.message["error"]["data"]["retryable"], true);
    let bad = s.call("search", "q");
    assert_eq!(bad.message["error"]["code"], -32602, "{}", bad.message);
    assert_eq!(bad.message["error"]["data"]["code"], "INVALID_ARGS");
    let unknown = s.call("nope", "q");
    assert_eq!(unknown.message["error"]["code"], -32602);
    assert!(unknown.message["error"]["message"].as_str().unwrap().contains("\"nope\""), "{}", unknown.message);
    let garbled = s.send("{not json");
    assert_eq!((garbled.status, garbled.message["error"]["code"].as_i64()), (400, Some(-32700)), "{}", garbled.message);
    let invalid = s.send(r#"{"jsonrpc":"2.0","id":9}"#);
    assert_eq!((invalid.status, invalid.message["error"]["code"].as_i64()), (400, Some(-32600)), "{}", invalid.message);
    // The server is still there.
    let list = s.request("tools/list", json!({}));
    assert_eq!(list.message["result"]["tools"][0]["name"], "search");
}

/// A server on stdio (`tracefault mcp ARGS --stdio`) after `initialize`: the child, its stdin,
/// its stdout's lines, and the `initialize` result.
fn stdio_session(args: &[&str]) -> (std::process::Child, std::process::ChildStdin, StdoutLines, Value) {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("tracefault"))
        .current_dir(root())
        .arg("mcp")
        .args(args)
        .arg("--stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}})
    )
    .unwrap();
    let init: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
    (child, stdin, lines, init["result"].clone())
}

type StdoutLines = std::io::Lines<BufReader<std::process::ChildStdout>>;

#[test]
fn stdio_serves_the_same_tools_and_faults() {
    let (mut child, mut stdin, mut lines, init) =
        stdio_session(&["tests/fixtures/wire/mcp-faults.toml", "--mcp-strategy", "mcp-text", "--time-scale", "0.001"]);
    assert_eq!(init["serverInfo"]["name"], "tracefault");
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    let mut answers = Vec::new();
    for id in 2..6 {
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": if id < 5 { "weather Paris" } else { "Paris" }}}}));
        answers.push(serde_json::from_str::<Value>(&lines.next().unwrap().unwrap()).unwrap());
        std::thread::sleep(WAIT);
    }
    drop(stdin);
    // No HTTP on stdio: the endpoint's 503 is a JSON-RPC error carrying the status and wait.
    assert_eq!(answers[0]["error"]["data"]["status"], 503, "{}", answers[0]);
    assert_eq!(answers[0]["error"]["data"]["retry_after_ms"], 2);
    assert_eq!(answers[1]["result"]["isError"], true);
    assert!(answers[1]["result"]["content"][0]["text"].as_str().unwrap().contains("HTTP 500"), "{}", answers[1]);
    assert!(answers[1]["result"].get("structuredContent").is_none());
    assert_eq!(answers[2]["result"]["isError"], true);
    assert_eq!(answers[3]["result"]["isError"], false);
    assert_eq!(child.wait().unwrap().code(), Some(0), "stdin closed: the server ends cleanly");
}

/// Over stdio the schema change is announced on the same stream, ahead of the failed answer.
#[test]
fn stdio_announces_a_schema_change_before_the_answer() {
    let (mut child, mut stdin, mut lines, init) = stdio_session(&["tests/fixtures/mcp/schema-drift.toml"]);
    assert_eq!(init["capabilities"]["tools"]["listChanged"], true);
    let mut next = move || serde_json::from_str::<Value>(&lines.next().unwrap().unwrap()).unwrap();
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "Paris"}}}));
    assert_eq!(next()["method"], "notifications/tools/list_changed");
    assert_eq!(next()["result"]["isError"], true);
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    let list = next();
    assert!(list["result"]["tools"][0]["description"].as_str().unwrap().contains("revision 1"), "{list}");
    send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "Paris"}}}));
    assert_eq!(next()["result"]["isError"], false);
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// How each tool call of an agent run ended, from the agent's stderr lines `mcp-call TOOL: …`.
fn endings(out: &std::path::Path) -> Vec<String> {
    let log = std::fs::read_to_string(out.join("agent-run-0.log")).unwrap_or_default();
    log.lines().filter_map(|l| l.strip_prefix("mcp-call search: ")).map(str::to_owned).collect()
}

/// Every check but 6 passed, and check 6 only for runs the mock model ended by giving up: the
/// protocol held; whether the mock model then answers or gives up is its seeded reading of the
/// encoding (a give-up fails check 6, and so the exit code).
fn protocol_held(code: i32, report: &Value, stdout: &str, what: &str) {
    let failed: Vec<&Value> = report["checks"].as_array().unwrap().iter().filter(|c| c["result"] == "FAIL").collect();
    for c in &failed {
        assert!(c["check"].as_str().unwrap().starts_with("6."), "{what}: {stdout}");
        for d in c["details"].as_array().unwrap() {
            assert!(d.as_str().unwrap().contains("the mock model gave up"), "{what}: {d}");
        }
    }
    assert_eq!(code, if failed.is_empty() { 0 } else { 1 }, "{what}: {stdout}");
}

#[test]
fn the_official_python_sdk_meets_every_strategy_and_a_transport_failure() {
    let Some(py) = sdk_python() else { return };
    let py = py.to_string_lossy().into_owned();
    let agent = [py.as_str(), "examples/mcp/mcp_sdk_agent.py"];
    // The fixture's run 0: the endpoint's 503 (the SDK raises), then the tool's 500: a result
    // with isError under the text and envelope strategies, a raised JSON-RPC error otherwise.
    // What the mock model does next is its own draw.
    let cases = [("mcp-text", "is_error"), ("mcp-envelope", "is_error"), ("jsonrpc-error", "raised MCPError")];
    for (strategy, second) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (code, report, stdout) = exec(
            "tests/fixtures/wire/mcp-faults.toml",
            dir.path(),
            &agent,
            &["--mcp-strategy", strategy, "--time-scale", "0.001"],
        );
        protocol_held(code, &report, &stdout, strategy);
        assert_eq!(report["runs"][0]["agent_exit_code"], 0, "{strategy}: {report}");
        let got = endings(dir.path());
        assert!(got.len() >= 2, "{strategy}: {got:?}");
        assert_eq!(got[..2], ["raised MCPError", second], "{strategy}");
        // The MCP messages as they crossed: request, the endpoint's 503, request, the answer.
        let log = std::fs::read_to_string(dir.path().join("mcp/run-0.jsonl")).unwrap();
        let lines: Vec<Value> = log.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines[0]["method"], "tools/call");
        assert_eq!(lines[1]["http_status"], 503);
        assert_eq!(lines[2]["id"], lines[3]["id"]);
        match strategy {
            "jsonrpc-error" => assert_eq!(lines[3]["error"]["code"], -32603, "{log}"),
            _ => assert_eq!(lines[3]["result"]["isError"], true, "{log}"),
        }
        // The native trace holds the same messages where they crossed, between the tool call
        // the model asked for and the result the agent handed back.
        let trace = std::fs::read_to_string(dir.path().join("traces/run-0.jsonl")).unwrap();
        let events: Vec<Value> = trace.lines().skip(1).map(|l| serde_json::from_str(l).unwrap()).collect();
        let crossed: Vec<&Value> = events.iter().filter(|e| e["type"] == "mcp").map(|e| &e["message"]).collect();
        assert_eq!(crossed, lines.iter().collect::<Vec<_>>(), "{trace}");
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        let first_call = kinds.iter().position(|k| *k == "tool_call").unwrap();
        assert_eq!(kinds[first_call..first_call + 4], ["tool_call", "mcp", "mcp", "tool_result"], "{trace}");
        let inspect = crate::tracefault().arg("inspect").arg(dir.path().join("mcp/run-0.jsonl")).output().unwrap();
        let table = String::from_utf8_lossy(&inspect.stdout);
        assert!(inspect.status.success() && table.contains("(mcp)") && table.contains("transient"), "{table}");
    }
}

#[test]
fn real_mcp_clients_complete_the_worked_example() {
    let Some(py) = sdk_python() else { return };
    let py = py.to_string_lossy().into_owned();
    for script in ["examples/mcp/mcp_sdk_agent.py", "examples/mcp/openai_agents_mcp_agent.py"] {
        for strategy in ["mcp-text", "mcp-envelope", "jsonrpc-error"] {
            let dir = tempfile::tempdir().unwrap();
            let (code, report, stdout) = exec(
                "scenarios/01-worked-example.toml",
                dir.path(),
                &[py.as_str(), script],
                &["--runs", "3", "--mcp-strategy", strategy],
            );
            protocol_held(code, &report, &stdout, &format!("{script} {strategy}"));
            let runs = report["runs"].as_array().unwrap();
            assert_eq!(runs.len(), 3, "{script} {strategy}: the checklist and metrics per run");
            for r in runs {
                assert_eq!(r["agent_exit_code"], 0, "{script} {strategy}: {r}");
                assert!(matches!(r["ended"].as_str(), Some("answer" | "gave_up")), "{script} {strategy}: {r}");
                let calls = r["counted"]["tool_calls"].as_u64().unwrap();
                assert!(calls >= 1, "{script} {strategy}: tools came over MCP: {r}");
            }
        }
    }
}

#[test]
fn an_expired_session_answers_404_until_the_client_initialises_again() {
    let served = Served::start_with("tests/fixtures/wire/mcp-session.toml", &[]);
    let mut s = Session::open(&served.base);
    let first = s.call("search", "Paris");
    assert_eq!(first.message["result"]["isError"], false, "{} {}", first.status, first.message);
    assert_eq!(s.call("search", "Paris").status, 404, "the fault expires the session");
    assert_eq!(s.request("tools/list", json!({})).status, 404, "and it stays expired");
    let mut again = Session::open(&served.base);
    assert_ne!(again.id, s.id);
    assert_eq!(again.call("search", "Paris").message["result"]["isError"], false);
}

#[test]
fn schema_drift_announces_a_new_revision_and_fails_until_the_tools_are_listed_again() {
    let served = Served::start_with("tests/fixtures/mcp/schema-drift.toml", &["--mcp-strategy", "jsonrpc-error"]);
    let mut s = Session::open(&served.base);
    let before = s.request("tools/list", json!({}));
    assert!(!before.message["result"]["tools"][0]["description"].as_str().unwrap().contains("revision"));
    let first = s.call("search", "Paris");
    assert_eq!(first.notifications, ["notifications/tools/list_changed"], "announced ahead of the answer");
    assert_eq!(first.message["error"]["code"], -32602, "bad arguments: {}", first.message);
    assert_eq!(first.message["error"]["data"]["code"], "SCHEMA_CHANGED");
    let stale = s.call("search", "Paris (corrected 1)");
    assert_eq!(stale.message["error"]["data"]["code"], "SCHEMA_CHANGED", "other arguments do not help");
    assert!(stale.notifications.is_empty(), "the change is announced once");
    let list = s.request("tools/list", json!({}));
    let tool = &list.message["result"]["tools"][0];
    assert!(tool["description"].as_str().unwrap().ends_with("Input schema revision 1."), "{tool}");
    assert_eq!(tool["inputSchema"]["$comment"], "revision 1");
    let after = s.call("search", "Paris");
    assert_eq!(after.message["result"]["isError"], false, "{}", after.message);
}

/// A long `serve` keeps at most 128 sessions: the 129th a client opens closes the oldest.
#[test]
fn past_the_session_limit_the_oldest_session_is_closed() {
    let served = Served::start_with("tests/fixtures/mcp/schema-drift.toml", &[]);
    let mut sessions: Vec<Session> = (0..128).map(|_| Session::open(&served.base)).collect();
    assert_eq!(sessions[0].request("tools/list", json!({})).status, 200);
    sessions.push(Session::open(&served.base));
    assert_eq!(sessions[0].request("tools/list", json!({})).status, 404, "the oldest is closed");
    assert_eq!(sessions[1].request("tools/list", json!({})).status, 200, "the others stay");
    assert_eq!(sessions[128].request("tools/list", json!({})).status, 200);
}

/// The text the model was given for the first tool result of run 0, from the native trace.
fn first_result_seen(out: &std::path::Path) -> Option<String> {
    let trace = std::fs::read_to_string(out.join("traces/run-0.jsonl")).ok()?;
    trace
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "tool_result")
        .and_then(|e| e["content"].as_str().map(str::to_owned))
}

/// What each real MCP client does with each fault (the README's table): the agent's exit
/// status, what the model was shown, and that the client never retried on its own (one tool
/// call per model turn that asked for one).
#[test]
fn what_real_mcp_clients_do_with_each_fault() {
    let Some(py) = sdk_python() else { return };
    let py = py.to_string_lossy().into_owned();
    const GENERIC: &str = "An error occurred while running the tool. Please try again.";
    const RAISED: &str = "Error: Server returned an error response";
    /// An agent's exit status and a part of what the model was shown.
    type Seen = (i32, &'static str);
    // (fixture, strategy, python SDK agent, Agents SDK)
    let table: [(&str, &str, Seen, Seen); 13] = [
        ("tool-500", "mcp-text", (0, "temporarily unavailable (HTTP 500"), (0, "temporarily unavailable (HTTP 500")),
        ("tool-500", "jsonrpc-error", (0, "Error: The search tool is temporarily unavailable"), (0, GENERIC)),
        ("bad-args", "mcp-text", (0, "rejected the arguments (HTTP 400)"), (0, "rejected the arguments (HTTP 400)")),
        ("bad-args", "jsonrpc-error", (0, "Error: The search tool rejected the arguments"), (0, GENERIC)),
        ("endpoint-503", "mcp-text", (0, RAISED), (0, GENERIC)),
        ("endpoint-429", "mcp-text", (0, RAISED), (0, GENERIC)),
        ("dropped", "mcp-text", (1, ""), (1, "")),
        ("stream-dropped", "mcp-text", (0, "Error: SSE stream ended without a response"), (0, GENERIC)),
        ("session-expired", "mcp-text", (0, "Error: Session terminated"), (0, GENERIC)),
        ("slow", "mcp-text", (0, "timed out after 60000 ms"), (0, "timed out after 60000 ms")),
        ("ambiguous", "mcp-text", (0, "More results may be available."), (0, "More results may be available.")),
        ("ambiguous-cursor", "mcp-text", (0, r#""next_cursor":"page-2""#), (0, r#""next_cursor":"page-2""#)),
        ("schema-drift", "mcp-text", (0, "input schema changed"), (0, "input schema changed")),
    ];
    for (fixture, strategy, sdk, agents) in table {
        for (script, (exit, shown)) in
            [("examples/mcp/mcp_sdk_agent.py", sdk), ("examples/mcp/openai_agents_mcp_agent.py", agents)]
        {
            let dir = tempfile::tempdir().unwrap();
            let scenario = format!("tests/fixtures/mcp/{fixture}.toml");
            let (_, report, stdout) = exec(
                &scenario,
                dir.path(),
                &[py.as_str(), script],
                &["--mcp-strategy", strategy, "--time-scale", "0.01", "--timeout-s", "60"],
            );
            let run = &report["runs"][0];
            let what = format!("{fixture} {strategy} {script}: {run} {stdout}");
            assert_eq!(run["agent_exit_code"], exit, "{what}");
            if exit == 0 {
                let seen = first_result_seen(dir.path()).unwrap_or_default();
                assert!(seen.contains(shown), "{what}: the model saw {seen:?}");
                let (model, tools) = (&run["counted"]["model_calls"], &run["counted"]["tool_calls"]);
                assert_eq!(tools.as_u64().unwrap() + 1, model.as_u64().unwrap(), "{what}: no retry of its own");
            }
            if fixture == "schema-drift" {
                // The Python SDK agent lists again on the notification; the Agents SDK lists on
                // every turn. Either way the corrected call succeeds.
                assert_eq!(run["ended"], "answer", "{what}");
                let log = std::fs::read_to_string(dir.path().join("agent-run-0.log")).unwrap();
                assert_eq!(log.contains("mcp-relisted"), script.contains("mcp_sdk_agent"), "{what}: {log}");
            }
        }
    }
}

/// Auth mid-session (an OAuth access token that expires after one success: 401 with its
/// bearer challenge on every later call), as each real MCP client hands it to the model. Hand
/// count: three calls (Paris, then Rome, re-asked once); the first succeeds, so the rule fires
/// on the other two, and the run gives up. Neither client re-authorises or retries by itself.
#[test]
fn an_expired_oauth_token_mid_session_reaches_real_mcp_clients_as() {
    let Some(py) = sdk_python() else { return };
    let py = py.to_string_lossy().into_owned();
    for (script, shown) in [
        ("examples/mcp/mcp_sdk_agent.py", "Error: Server returned an error response"),
        ("examples/mcp/openai_agents_mcp_agent.py", "An error occurred while running the tool. Please try again."),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let extra = ["--mcp-strategy", "mcp-text", "--time-scale", "0.01", "--timeout-s", "60"];
        let (_, report, stdout) =
            exec("tests/fixtures/mcp/auth-expired.toml", dir.path(), &[py.as_str(), script], &extra);
        let run = &report["runs"][0];
        let what = format!("{script}: {run} {stdout}");
        assert_eq!((run["agent_exit_code"].as_i64(), run["ended"].as_str()), (Some(0), Some("gave_up")), "{what}");
        let row = runs_row(dir.path());
        assert_eq!((row["tool_calls"], row["faults_injected"]), (3, 2), "{what}");
        let trace = std::fs::read_to_string(dir.path().join("traces/run-0.jsonl")).unwrap();
        let results: Vec<Value> = trace
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["type"] == "tool_result")
            .collect();
        assert_eq!(results[0]["ok"], true, "{what}");
        for r in &results[1..] {
            assert_eq!((r["ok"].as_bool(), r["content"].as_str()), (Some(false), Some(shown)), "{what}");
        }
        let log = std::fs::read_to_string(dir.path().join("mcp/run-0.jsonl")).unwrap();
        assert_eq!(log.matches(r#""http_status":401"#).count(), 2, "{what}: {log}");
    }
}

#[test]
fn a_captured_mcp_session_imports_inspects_and_replays() {
    let log = "tests/fixtures/mcp/session-log.jsonl";
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    crate::tracefault().current_dir(root()).args(["import", log, "--out"]).arg(&out).assert().code(0);
    let trace = std::fs::read_to_string(&out).unwrap();
    let results: Vec<Value> = trace
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "tool_result")
        .collect();
    // 503 as isError, 400 as a JSON-RPC -32602 error, then the answer.
    let classes: Vec<&str> = results.iter().map(|r| r["error_class"].as_str().unwrap_or("ok")).collect();
    assert_eq!(classes, ["transient", "bad_args", "ok"], "{trace}");
    assert_eq!(results[1]["call_id"], "mcp-3");
    assert!(trace.contains(r#""source_format":"mcp""#) && trace.contains(r#""description":"Web search""#));
    crate::tracefault().current_dir(root()).args(["replay", log, "--out"]).arg(dir.path().join("r")).assert().code(0);
    let bad = crate::write(
        dir.path(),
        "bad.jsonl",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}\n",
    );
    let o = crate::tracefault().args(["import", "--format", "mcp"]).arg(&bad).arg("--out").arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/0/params/name"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The real MCP servers `scripts/node-env.sh` installs (examples/mcp-servers), when they are
/// there; required under scripts/test.sh.
fn real_mcp_server(name: &str) -> Option<std::path::PathBuf> {
    let js = crate::root()
        .join(format!("examples/mcp-servers/node_modules/@modelcontextprotocol/server-{name}/dist/index.js"));
    if js.exists() {
        return Some(js);
    }
    let required = crate::wire::sdks_required();
    assert!(!required, "the mcp-proxy tests need the real MCP servers: run bash scripts/node-env.sh");
    eprintln!("skipping: no examples/mcp-servers/node_modules (run scripts/node-env.sh)");
    None
}

/// The official Python client through `tracefault mcp-proxy` to a real server: (its output as
/// JSON, mcp-proxy's stderr as the client passed it on).
/// `server` is what follows the scenario on mcp-proxy's command line (`--` and a command, or
/// `--upstream URL`).
fn through_mcp_proxy(py: &std::path::Path, scenario: &str, server: &[&str], calls: Value) -> (Value, String) {
    let exe = assert_cmd::cargo::cargo_bin!("tracefault");
    let mut cmd = vec![exe.to_str().unwrap(), "mcp-proxy", scenario];
    cmd.extend_from_slice(server);
    let o = std::process::Command::new(py)
        .current_dir(crate::root())
        .arg("tests/fixtures/mcp/mcp_client.py")
        .arg(serde_json::to_string(&cmd).unwrap())
        .arg(calls.to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    (serde_json::from_slice(&o.stdout).unwrap(), stderr)
}

/// The calls of [`everything_calls`] as the "everything" server behind `proxy-echo.toml`
/// answers them: its own tools listed, the first `echo` stopped by the scenario's 503, the
/// second and `get-sum` answered by the server.
fn everything_answered(out: &Value, stderr: &str) {
    let tools: Vec<&str> = out["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert!(tools.contains(&"echo") && tools.contains(&"get-sum"), "the real server's tools: {tools:?}");
    let c = &out["calls"];
    assert_eq!(c[0]["is_error"], true, "{out}");
    assert!(c[0]["text"].as_str().unwrap().contains("503"), "{out}");
    assert_eq!((&c[1]["is_error"], &c[1]["text"]), (&json!(false), &json!("Echo: hi")), "{out}");
    assert_eq!(c[2]["text"], "The sum of 2 and 3 is 5.", "{out}");
    assert!(
        stderr.contains("2 calls of the scenario's tools (1 met a fault); 2 forwarded to the server (0 failed there)"),
        "{stderr}"
    );
}

/// Two `echo` calls and a `get-sum`.
fn everything_calls() -> Value {
    json!([["echo", {"message": "hi"}], ["echo", {"message": "hi"}], ["get-sum", {"a": 2, "b": 3}]])
}

/// `mcp-proxy` in front of the reference "everything" server: the host sees the server's own
/// tools; the scenario's 503 on the first `echo` is answered here (never sent); the second
/// `echo` and a tool the scenario does not name (`get-sum`) are the server's own answers. By
/// hand: 2 calls of the scenario's tool, 1 fault, 2 forwarded.
#[test]
fn mcp_proxy_puts_the_scenarios_faults_in_front_of_a_real_server() {
    let Some(py) = sdk_python() else { return };
    let Some(server) = real_mcp_server("everything") else { return };
    let calls = everything_calls();
    let (out, stderr) = through_mcp_proxy(
        &py,
        "tests/fixtures/mcp/proxy-echo.toml",
        &["--", "node", server.to_str().unwrap(), "stdio"],
        calls,
    );
    everything_answered(&out, &stderr);
}

/// In front of the reference filesystem server, a write the scenario faults never reaches it
/// (its file is not there), the next one does (the file, written for real), and the server's own error (a
/// file that is not there) is a failure there. By hand: 1 fault, 2 forwarded, 1 failed there.
#[test]
fn mcp_proxy_stops_a_faulted_write_before_the_real_filesystem() {
    let Some(py) = sdk_python() else { return };
    let Some(server) = real_mcp_server("filesystem") else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let sc = crate::write(
        dir.path(),
        "fs.toml",
        "name = \"mcp-proxy-fs\"\n[task]\n[[task.steps]]\ntool = \"write_file\"\nargs = { path = \"a.txt\", content = \"x\" }\n\
         result = { ok = true }\n[[task.steps]]\ntool = \"read_text_file\"\nargs = { path = \"a.txt\" }\nresult = { text = \"x\" }\n\
         [[faults]]\ntarget = \"write_file\"\nat = [1]\nhttp = 503\n",
    );
    let file = root.join("a.txt");
    let f = file.to_str().unwrap();
    let stopped = root.join("b.txt");
    let b = stopped.to_str().unwrap();
    let calls = json!([["write_file", {"path": b, "content": "stopped"}], ["write_file", {"path": f, "content": "written"}],
        ["read_text_file", {"path": root.join("missing.txt").to_str().unwrap()}]]);
    let (out, stderr) = through_mcp_proxy(
        &py,
        sc.to_str().unwrap(),
        &["--", "node", server.to_str().unwrap(), root.to_str().unwrap()],
        calls,
    );
    let c = &out["calls"];
    assert_eq!(c[0]["is_error"], true, "{out}");
    assert_eq!(c[1]["is_error"], false, "{out}");
    assert!(!stopped.exists(), "the faulted write never reached the server");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "written", "the second write reached the disk");
    assert!(c[2]["is_error"] == true || c[2].get("raised").is_some(), "{out}");
    assert!(
        stderr.contains("3 calls of the scenario's tools (1 met a fault); 2 forwarded to the server (1 failed there)"),
        "{stderr}"
    );
}

/// The "everything" server over streamable HTTP (`mcp-proxy --upstream URL`), started on a free
/// port: the same calls as over stdio give the same answers. By hand: 2 calls of the scenario's
/// tool, 1 fault (answered here), 2 forwarded over HTTP.
#[test]
fn mcp_proxy_reaches_a_real_server_over_streamable_http() {
    let Some(py) = sdk_python() else { return };
    let Some(server) = real_mcp_server("everything") else { return };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut node = std::process::Command::new("node")
        .arg(&server)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(node.stderr.take().unwrap()).lines();
    let listening = lines.by_ref().map_while(Result::ok).any(|l| l.contains("listening on port"));
    assert!(listening, "the everything server did not start on port {port}");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let calls = everything_calls();
    let (out, stderr) = through_mcp_proxy(&py, "tests/fixtures/mcp/proxy-echo.toml", &["--upstream", &url], calls);
    let _ = node.kill();
    let _ = node.wait();
    everything_answered(&out, &stderr);
}

/// `--upstream-bearer-env` sends the variable's token as the server's authorization and never
/// says it; a server that refuses the handshake (401) is bad input, exit 2, named by its URL
/// without the URL's query (which may hold a key too).
#[test]
fn mcp_proxy_sends_the_bearer_token_and_never_says_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let bare = format!("http://{}/mcp", listener.local_addr().unwrap());
    let url = format!("{bare}?key=s3cret-query");
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        let mut auth = None;
        for line in reader.lines().map_while(Result::ok) {
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("authorization")
            {
                auth = Some(value.trim().to_owned());
            }
        }
        let mut stream = stream;
        stream
            .write_all(b"HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer realm=\"x\"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .unwrap();
        auth
    });
    let o = crate::tracefault()
        .args([
            "mcp-proxy",
            "tests/fixtures/mcp/proxy-echo.toml",
            "--upstream",
            &url,
            "--upstream-bearer-env",
            "TF_TEST_TOKEN",
        ])
        .env("TF_TEST_TOKEN", "s3cret-token")
        .write_stdin("")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(server.join().unwrap().as_deref(), Some("Bearer s3cret-token"));
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&bare) && stderr.contains("did not initialise"), "{stderr}");
    assert!(!stderr.contains("s3cret") && !String::from_utf8_lossy(&o.stdout).contains("s3cret"), "{stderr}");
}
