//! Live mode against a fake provider upstream (wiremock): what passes goes through byte for
//! byte with the agent's key, what the scenario faults is answered here and never sent, the
//! spending limit is never passed, a down upstream is said to be one, and no key reaches a trace.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::root;

const KEY: &str = "sk-live-secret-0123456789";

/// A chat completion as a provider sends it, with its usage (31 in, 12 out) and one call.
fn chat_answer() -> Vec<u8> {
    serde_json::to_vec_pretty(&json!({"id": "chatcmpl-9", "object": "chat.completion", "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
        "tool_calls": [{"id": "call_up_1", "type": "function", "function": {"name": "search", "arguments": "{\"query\":\"Paris\"}"}}]}}],
        "usage": {"prompt_tokens": 31, "completion_tokens": 12, "total_tokens": 43}}))
    .unwrap()
}

fn request() -> Value {
    json!({"model": "gpt-x", "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]})
}

/// A running `tracefault proxy`, stopped by Ctrl-C when dropped.
struct Proxy {
    child: Child,
    base: String,
    out: tempfile::TempDir,
}

impl Proxy {
    fn start(scenario: &str, extra: &[&str]) -> Proxy {
        let out = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("tracefault"))
            .current_dir(root())
            .args(["proxy", scenario, "--out"])
            .arg(out.path().join("set"))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut base = String::new();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if let Some(v) = line.strip_prefix("export ANTHROPIC_BASE_URL=") {
                base = v.to_owned();
            }
            assert!(!line.contains("_API_KEY"), "live mode sets no key: {line}");
            if line.starts_with("# tracefault is serving") {
                break;
            }
        }
        assert!(base.starts_with("http://127.0.0.1:"), "loopback by default: {base:?}");
        Proxy { child, base, out }
    }

    /// POSTs `body` with the agent's key: (status, headers' content-type, body bytes).
    fn post(&self, path: &str, body: &Value) -> (u16, String, Vec<u8>) {
        let r = match ureq::post(&format!("{}{path}", self.base))
            .set("authorization", &format!("Bearer {KEY}"))
            .send_json(body.clone())
        {
            Ok(r) | Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{e}"),
        };
        let (status, ct) = (r.status(), r.header("content-type").unwrap_or_default().to_owned());
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut r.into_reader(), &mut bytes).unwrap();
        (status, ct, bytes)
    }

    /// Stops it (Ctrl-C) and returns its stderr and the trace of agent 0.
    fn stop(self) -> (String, Vec<Value>, tempfile::TempDir) {
        rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), rustix::process::Signal::INT)
            .unwrap();
        let out = self.child.wait_with_output().unwrap();
        // 1 when a check of the traffic failed (a conversation left waiting on its tools).
        assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
        assert!(self.out.path().join("set/runs.csv").exists(), "the report set is written: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let trace = std::fs::read_to_string(self.out.path().join("set/traces/agent-0.jsonl")).unwrap_or_default();
        let events = trace.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        (stderr, events, self.out)
    }
}

/// Every file under `dir`, read as text.
fn all_text(dir: &std::path::Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.push_str(&all_text(&p));
        } else {
            out.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
        }
    }
    out
}

fn model_calls(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| e["type"] == "model_call").collect()
}

#[test]
fn an_answer_passes_byte_for_byte_with_the_agents_key_which_no_trace_keeps() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upstream = rt.block_on(MockServer::start());
    rt.block_on(
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(header("authorization", format!("Bearer {KEY}").as_str()))
            .respond_with(ResponseTemplate::new(200).set_body_raw(chat_answer(), "application/json"))
            .expect(1)
            .mount(&upstream),
    );
    let p = Proxy::start("tests/fixtures/wire/plain.toml", &["--upstream", &format!("openai={}", upstream.uri())]);
    let (status, ct, bytes) = p.post("/v1/chat/completions", &request());
    assert_eq!((status, ct.as_str()), (200, "application/json"));
    assert_eq!(bytes, chat_answer(), "the provider's bytes, unchanged");
    let (stderr, events, out) = p.stop();
    assert!(stderr.contains("1 sent to the providers"), "{stderr}");
    let calls = model_calls(&events);
    assert_eq!(calls.len(), 1, "{events:?}");
    // The usage the answer reports, and the call it made.
    assert_eq!(
        (calls[0]["status"].as_u64(), calls[0]["tokens_in"].as_u64(), calls[0]["tokens_out"].as_u64()),
        (Some(200), Some(31), Some(12))
    );
    let tool_calls: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool_call").collect();
    assert_eq!(tool_calls.len(), 1);
    assert_eq!(
        (tool_calls[0]["call_id"].as_str(), tool_calls[0]["name"].as_str()),
        (Some("call_up_1"), Some("search"))
    );
    assert!(!all_text(out.path()).contains(KEY), "a key in the written set");
    // The traffic scored as one run of the agent `proxy`: one model call, no tool call, and the
    // conversation stopped while the model still asked for a tool (cut off, counted with the
    // step cap as exec counts it).
    let rows = crate::support::csv::Table::read(&out.path().join("set/runs.csv")).rows;
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    let cells = [&r["strategy"], &r["model_calls"], &r["tool_calls"], &r["terminated_by"], &r["tokens"]];
    assert_eq!(cells, ["proxy", "1", "0", "step_cap", "43"], "{:?}", r.cells());
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("set/exec.json")).unwrap()).unwrap();
    assert_eq!(report["model"]["answered_by"], "the providers (live)", "{report}");
    assert_eq!(report["runs"][0]["ended"], "cut_off", "{report}");
    let exit = report["checks"].as_array().unwrap().iter().find(|c| c["check"].as_str().unwrap().contains("exit"));
    assert_eq!(exit.map(|c| c["result"].clone()), Some(json!("N/A")), "{report}");
    rt.block_on(upstream.verify());
}

/// A proxy stopped before any traffic reports the one agent as never having called, and fails
/// that check: no silent pass with nothing scored. The run is reported as the one its `--run`
/// served (its draws), not as run 0.
#[test]
fn a_proxy_that_saw_no_traffic_says_so() {
    let p = Proxy::start("tests/fixtures/wire/plain.toml", &["--upstream", "openai=http://127.0.0.1:9", "--run", "7"]);
    let (_, events, out) = p.stop();
    assert!(model_calls(&events).is_empty(), "{events:?}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("set/exec.json")).unwrap()).unwrap();
    assert_eq!(report["runs"][0]["ended"], "never_called", "{report}");
    assert_eq!(report["passed"], false, "{report}");
    assert!(report["outcome"].as_str().unwrap().contains("crashed 0"), "not crashed: it is no child: {report}");
    assert_eq!(report["runs"][0]["run"], 7, "{report}");
    let rows = crate::support::csv::Table::read(&out.path().join("set/runs.csv")).rows;
    assert_eq!((rows.len(), &rows[0]["model_calls"][..], &rows[0]["run"][..]), (1, "0", "7"));
}

/// A stream is forwarded as it arrives: the provider (a raw HTTP server here) sends its first
/// event and holds the rest back until the agent says it has that event. A proxy that waited
/// for more before forwarding would never get the word (the provider gives up waiting after
/// 30 s and sends the rest, and the test fails).
#[test]
fn a_stream_is_forwarded_as_it_arrives() {
    use std::io::{Read, Write};
    let first = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n";
    let rest = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (got_first, word) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        // The request: its head, then as many bytes as it says.
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            conn.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
        let length: usize =
            head.lines().find_map(|l| l.strip_prefix("content-length:")).map_or(0, |v| v.trim().parse().unwrap());
        conn.read_exact(&mut vec![0u8; length]).unwrap();
        let chunk = |s: &str| format!("{:x}\r\n{s}\r\n", s.len());
        conn.write_all(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{}",
                chunk(first)
            )
            .as_bytes(),
        )
        .unwrap();
        conn.flush().unwrap();
        let heard = word.recv_timeout(std::time::Duration::from_secs(30)).is_ok();
        conn.write_all(format!("{}0\r\n\r\n", chunk(rest)).as_bytes()).unwrap();
        heard
    });
    let p =
        Proxy::start("tests/fixtures/wire/plain.toml", &["--upstream", &format!("anthropic=http://127.0.0.1:{port}")]);
    let body = json!({"model": "claude-x", "max_tokens": 100, "stream": true, "messages": [{"role": "user", "content": "Weather?"}]});
    let response = ureq::post(&format!("{}/v1/messages", p.base)).send_json(body).unwrap();
    let mut reader = response.into_reader();
    let mut got = vec![0u8; first.len()];
    reader.read_exact(&mut got).unwrap();
    got_first.send(()).unwrap();
    let mut tail = Vec::new();
    reader.read_to_end(&mut tail).unwrap();
    assert!(server.join().unwrap(), "the first event reached the agent only with the rest");
    assert_eq!(String::from_utf8(got).unwrap(), first);
    assert_eq!(String::from_utf8(tail).unwrap(), rest);
    let (_, events, _) = p.stop();
    assert_eq!(model_calls(&events).len(), 1, "{events:?}");
}

/// A stream is passed on as the provider sends it; its usage comes from its events.
#[test]
fn a_stream_passes_byte_for_byte_and_is_read_for_its_usage() {
    let sse = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"18 C\"}}\n\n\
        event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n\
        event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upstream = rt.block_on(MockServer::start());
    rt.block_on(
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(sse.as_bytes().to_vec(), "text/event-stream"))
            .expect(1)
            .mount(&upstream),
    );
    let p = Proxy::start("tests/fixtures/wire/plain.toml", &["--upstream", &format!("anthropic={}", upstream.uri())]);
    let body = json!({"model": "claude-x", "max_tokens": 100, "stream": true, "messages": [{"role": "user", "content": "Weather?"}]});
    // An SDK that leaves the version out of the path (`/messages`) reaches `/v1/messages`.
    let (status, ct, bytes) = p.post("/messages", &body);
    assert_eq!((status, ct.as_str()), (200, "text/event-stream"));
    assert_eq!(String::from_utf8(bytes).unwrap(), sse);
    let (_, events, _) = p.stop();
    let calls = model_calls(&events);
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0]["tokens_in"].as_u64(), calls[0]["tokens_out"].as_u64(), calls[0]["stop"].as_str()),
        (Some(25), Some(15), Some("end"))
    );
    assert_eq!(calls[0]["text"], "18 C", "the stream's text assembled");
    rt.block_on(upstream.verify());
}

/// A fake Gemini upstream of `generateContent` for model `gemini-x`: each request gets the
/// answer of the first rule, by priority, whose text its body contains; each rule must match
/// exactly its count of requests.
fn gemini_upstream<const N: usize>(rt: &tokio::runtime::Runtime, rules: [(u8, &str, Value, u64); N]) -> MockServer {
    rt.block_on(async {
        let upstream = MockServer::start().await;
        for (priority, text, answer, times) in rules {
            Mock::given(method("POST"))
                .and(path("/v1beta/models/gemini-x:generateContent"))
                .and(body_string_contains(text))
                .respond_with(ResponseTemplate::new(200).set_body_json(answer))
                .with_priority(priority)
                .expect(times)
                .mount(&upstream)
                .await;
        }
        upstream
    })
}

/// The trace's `tool_call` or `tool_result` events as (call id, their name, arguments and
/// content as text).
fn tool_events(events: &[Value], ty: &str) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e["type"] == ty)
        .map(|e| {
            let id = e["call_id"].as_str().unwrap().to_owned();
            (id, format!("{} {} {}", e["name"], e["args"], e["content"]))
        })
        .collect()
}

/// Gemini's calls often carry no id: a streamed answer with two such calls is recorded at once
/// (its calls from the stream), under ids of tracefault's own, and the results the agent sends
/// back without ids are paired with them in order, each recorded once, however the agent splits
/// the answer into contents when it sends it back.
#[test]
fn gemini_calls_without_ids_are_recorded_from_the_stream_and_paired_with_their_results() {
    let sse = "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"search\",\"args\":{\"query\":\"Oslo\"}}},\
        {\"functionCall\":{\"name\":\"search\",\"args\":{\"query\":\"Rome\"}}}]}}],\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":6}}\r\n\r\n";
    let answer = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Oslo 3 C, Rome 18 C."}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 8}});
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upstream = rt.block_on(MockServer::start());
    rt.block_on(async {
        Mock::given(method("POST"))
            .and(path("/v1beta/models/gemini-x:streamGenerateContent"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(sse.as_bytes().to_vec(), "text/event-stream"))
            .expect(1)
            .mount(&upstream)
            .await;
        Mock::given(method("POST"))
            .and(path("/v1beta/models/gemini-x:generateContent"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer))
            .expect(1)
            .mount(&upstream)
            .await;
    });
    let p = Proxy::start("tests/fixtures/wire/plain.toml", &["--upstream", &format!("gemini={}", upstream.uri())]);
    let user = json!({"role": "user", "parts": [{"text": "Weather in Oslo and Rome?"}]});
    let (status, _, _) = p.post("/v1beta/models/gemini-x:streamGenerateContent?alt=sse", &json!({"contents": [user]}));
    assert_eq!(status, 200);
    // The agent sends the streamed answer back a chunk a content (as google-genai's chat does).
    let first = json!({"role": "model", "parts": [{"functionCall": {"name": "search", "args": {"query": "Oslo"}}}]});
    let second = json!({"role": "model", "parts": [{"functionCall": {"name": "search", "args": {"query": "Rome"}}}]});
    let results = json!({"role": "user", "parts": [{"functionResponse": {"name": "search", "response": {"temp_c": 3}}},
        {"functionResponse": {"name": "search", "response": {"temp_c": 18}}}]});
    let history = json!({"contents": [user, first, second, results]});
    let (status, _, _) = p.post("/v1beta/models/gemini-x:generateContent", &history);
    assert_eq!(status, 200);
    let (_, events, _) = p.stop();
    let called = tool_events(&events, "tool_call");
    assert_eq!(called.len(), 2, "{events:?}");
    assert!(called[0].1.contains("Oslo") && called[1].1.contains("Rome"), "{called:?}");
    let answered = tool_events(&events, "tool_result");
    assert_eq!(answered.len(), 2, "{events:?}");
    assert_eq!((&answered[0].0, &answered[1].0), (&called[0].0, &called[1].0), "paired in order");
    assert!(answered[0].1.contains('3') && answered[1].1.contains("18"), "{answered:?}");
    assert_ne!(called[0].0, called[1].0);
    let texts: Vec<&Value> = model_calls(&events).iter().map(|e| &e["text"]).collect();
    assert_eq!(texts, [&Value::Null, &json!("Oslo 3 C, Rome 18 C.")]);
    rt.block_on(upstream.verify());
}

/// An agent run twice behind one proxy opens both conversations alike, and Gemini's calls carry
/// no ids: each conversation's call and result are recorded under ids of their own (by hand: 2
/// calls, 2 results, each result paired with its own conversation's call), never taken for the
/// first conversation's and dropped as already recorded.
#[test]
fn two_gemini_conversations_that_open_alike_keep_their_calls_apart() {
    let call = json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "search", "args": {"query": "Oslo"}}}]},
        "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 6}});
    let answer = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Oslo 3 C."}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 4}});
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upstream = gemini_upstream(&rt, [(1, "functionResponse", answer, 2), (2, "Weather in Oslo", call, 2)]);
    let p = Proxy::start("tests/fixtures/wire/plain.toml", &["--upstream", &format!("gemini={}", upstream.uri())]);
    let user = json!({"role": "user", "parts": [{"text": "Weather in Oslo?"}]});
    let called = json!({"role": "model", "parts": [{"functionCall": {"name": "search", "args": {"query": "Oslo"}}}]});
    for temp in [3, 4] {
        let (status, _, _) = p.post("/v1beta/models/gemini-x:generateContent", &json!({"contents": [user]}));
        assert_eq!(status, 200);
        let result =
            json!({"role": "user", "parts": [{"functionResponse": {"name": "search", "response": {"temp_c": temp}}}]});
        let (status, _, _) =
            p.post("/v1beta/models/gemini-x:generateContent", &json!({"contents": [user, called, result]}));
        assert_eq!(status, 200);
    }
    let (_, events, _) = p.stop();
    let (calls, results) = (tool_events(&events, "tool_call"), tool_events(&events, "tool_result"));
    assert_eq!(calls.len(), 2, "{events:?}");
    assert_ne!(calls[0].0, calls[1].0, "{events:?}");
    let ids = |v: &[(String, String)]| v.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&results), ids(&calls), "each result paired with its own conversation's call: {events:?}");
    assert!(results[0].1.contains('3') && results[1].1.contains('4'), "{results:?}");
    assert_eq!(model_calls(&events).len(), 4);
    rt.block_on(upstream.verify());
}

/// A sub-agent's conversation begun in the middle of its parent's (a tool that runs another
/// agent, as ADK's AgentTool does), Gemini's calls without ids: the parent's next request is
/// its own, not the sub-agent's, so by hand 2 calls (the parent's `research`, the sub-agent's
/// `search`) and 2 results, each paired with its own conversation's call.
#[test]
fn a_sub_agents_gemini_conversation_does_not_take_its_parents_results() {
    let part = |p: Value| {
        json!({"candidates": [{"content": {"role": "model", "parts": [p]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 6}})
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upstream = gemini_upstream(
        &rt,
        [
            (1, "functionResponse", part(json!({"text": "Done."})), 2),
            (2, "Plan the trip", part(json!({"functionCall": {"name": "research", "args": {"topic": "flights"}}})), 1),
            (3, "Find flights", part(json!({"functionCall": {"name": "search", "args": {"query": "CDG"}}})), 1),
        ],
    );
    let p = Proxy::start("tests/fixtures/wire/plain.toml", &["--upstream", &format!("gemini={}", upstream.uri())]);
    let url = "/v1beta/models/gemini-x:generateContent";
    let user = |text: &str| json!({"role": "user", "parts": [{"text": text}]});
    let model =
        |name: &str, args: Value| json!({"role": "model", "parts": [{"functionCall": {"name": name, "args": args}}]});
    let result =
        |name: &str, r: Value| json!({"role": "user", "parts": [{"functionResponse": {"name": name, "response": r}}]});
    let (parent, sub) = (user("Plan the trip"), user("Find flights"));
    assert_eq!(p.post(url, &json!({"contents": [parent]})).0, 200);
    // The parent's `research` tool runs the sub-agent, to its end.
    assert_eq!(p.post(url, &json!({"contents": [sub]})).0, 200);
    let searched =
        json!({"contents": [sub, model("search", json!({"query": "CDG"})), result("search", json!({"price": 410}))]});
    assert_eq!(p.post(url, &searched).0, 200);
    let researched = json!({"contents": [parent, model("research", json!({"topic": "flights"})), result("research", json!({"found": "AF 410"}))]});
    assert_eq!(p.post(url, &researched).0, 200);
    let (_, events, _) = p.stop();
    let (calls, results) = (tool_events(&events, "tool_call"), tool_events(&events, "tool_result"));
    assert_eq!(calls.len(), 2, "{events:?}");
    assert!(calls[0].1.contains("research") && calls[1].1.contains("search"), "{calls:?}");
    assert_eq!(results.len(), 2, "{events:?}");
    assert_eq!((&results[0].0, &results[1].0), (&calls[1].0, &calls[0].0), "each result its own call's: {events:?}");
    assert!(results[0].1.contains("410") && results[1].1.contains("AF 410"), "{results:?}");
    rt.block_on(upstream.verify());
}

/// The scenario's provider fault is answered here, in the provider's dialect, and never sent;
/// the spending limit refuses what would pass it; the upstream sees exactly what was allowed.
#[test]
fn a_fault_and_the_spending_limit_are_answered_here_and_never_sent() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upstream = rt.block_on(MockServer::start());
    rt.block_on(
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(chat_answer(), "application/json"))
            .expect(1)
            .mount(&upstream),
    );
    let p = Proxy::start(
        "tests/fixtures/wire/live-429-first.toml",
        &["--upstream", &format!("openai={}", upstream.uri()), "--max-model-calls", "1", "--time-scale", "0.01"],
    );
    let (status, _, bytes) = p.post("/v1/chat/completions", &request());
    assert_eq!(status, 429);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["error"]["code"], "rate_limit_exceeded", "OpenAI's own error shape: {v}");
    assert_eq!(rt.block_on(upstream.received_requests()).unwrap().len(), 0, "a fault never reaches the provider");
    std::thread::sleep(std::time::Duration::from_millis(100));
    let (status, _, bytes) = p.post("/v1/chat/completions", &request());
    assert_eq!(status, 200);
    assert_eq!(bytes, chat_answer());
    let (status, _, bytes) = p.post("/v1/chat/completions", &request());
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&bytes));
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["error"]["type"], "spending_limit");
    assert!(v["error"]["message"].as_str().unwrap().contains("--max-model-calls 1"), "{v}");
    let (stderr, events, _) = p.stop();
    let statuses: Vec<u64> = model_calls(&events).iter().filter_map(|e| e["status"].as_u64()).collect();
    assert_eq!(statuses, [429, 200], "the fault and the one call sent; the refusal is no model call");
    assert!(stderr.contains("1 sent to the providers"), "{stderr}");
    rt.block_on(upstream.verify());
}

/// An upstream that is down is said to be one, with a 502 of tracefault's own, and is no
/// model call.
#[test]
fn a_down_upstream_is_a_502_that_says_so_and_no_model_call() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let down = format!("http://127.0.0.1:{port}");
    let p = Proxy::start("tests/fixtures/wire/plain.toml", &["--upstream", &format!("openai={down},gemini={down}")]);
    let (status, _, bytes) = p.post("/v1/chat/completions", &request());
    assert_eq!(status, 502);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["error"]["type"], "upstream_unreachable");
    assert!(v["error"]["message"].as_str().unwrap().contains(&format!("127.0.0.1:{port}")), "{v}");
    // A key in the query (Gemini's `?key=`) is in no answer or log.
    let gemini = json!({"contents": [{"role": "user", "parts": [{"text": "Weather?"}]}]});
    let (status, _, bytes) = p.post(&format!("/v1beta/models/gemini-x:generateContent?key={KEY}"), &gemini);
    assert_eq!(status, 502);
    assert!(!String::from_utf8_lossy(&bytes).contains(KEY), "{}", String::from_utf8_lossy(&bytes));
    let (stderr, events, out) = p.stop();
    assert!(!stderr.contains(KEY) && !all_text(out.path()).contains(KEY), "{stderr}");
    assert!(model_calls(&events).is_empty(), "{events:?}");
    assert!(stderr.contains("0 sent to the providers, 2 not answered by them"), "{stderr}");
}

#[test]
fn bad_upstreams_and_a_limit_without_live_mode_are_refused() {
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin!("tracefault"))
        .current_dir(root())
        .args(["proxy", "tests/fixtures/wire/plain.toml", "--upstream", "mistral=http://x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("one of openai, anthropic, gemini"));
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin!("tracefault"))
        .current_dir(root())
        .args(["exec", "tests/fixtures/wire/plain.toml", "--max-model-calls", "3", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --live"), "{out:?}");
    // A refused value is not echoed: it may carry a key.
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin!("tracefault"))
        .current_dir(root())
        .args([
            "proxy",
            "tests/fixtures/wire/plain.toml",
            "--upstream",
            &format!("openai=https://x.example/?key={KEY}"),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("--upstream (openai)") && !stderr.contains(KEY), "{stderr}");
    // An agent whose base URL points at another service keeps its key for that service:
    // live mode will not send it to the public endpoint unless told where to.
    let out = crate::tracefault()
        .env("OPENAI_BASE_URL", "https://openrouter.example/api/v1")
        .args(["exec", "tests/fixtures/wire/plain.toml", "--live", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("OPENAI_BASE_URL is set") && stderr.contains("--upstream openai="), "{stderr}");
}

/// `exec --live`: the reference agent's model requests go to the upstream (a scripted model:
/// a call of `search`, then, once a result comes back, an answer), its tool calls to the
/// scenario's mock tool, whose first attempt meets a 503. By hand, per run: 2 model calls, both
/// sent upstream with the usage the upstream reports (31 + 12, then 40 + 5), 2 tool calls (the
/// 503 and the agent's own retry), 1 fault, an answer.
#[test]
fn exec_live_scores_a_real_agent_against_the_upstream_by_runs_definitions() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upstream = rt.block_on(MockServer::start());
    let answer = json!({"id": "chatcmpl-2", "object": "chat.completion", "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "It is 18 C."}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45}});
    rt.block_on(async {
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(wiremock::matchers::body_string_contains("tool_call_id"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer))
            .with_priority(1)
            .expect(2)
            .mount(&upstream)
            .await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(chat_answer(), "application/json"))
            .with_priority(2)
            .expect(2)
            .mount(&upstream)
            .await;
    });
    let dir = tempfile::tempdir().unwrap();
    let sc = crate::write(
        dir.path(),
        "live.toml",
        "name = \"live\"\n[task]\n[[task.steps]]\ntool = \"search\"\nargs = { query = \"Paris\" }\nresult = { temp_c = 18 }\n\
         [[faults]]\ntarget = \"search\"\nat = [1]\nhttp = 503\n",
    );
    let agent = crate::wire::reference_agent();
    let out = dir.path().join("out");
    let (code, report, stdout) = crate::wire::exec(
        sc.to_str().unwrap(),
        &out,
        &[agent.to_str().unwrap(), "--format", "openai-chat", "--strategy", "five-field"],
        &["--runs", "2", "--live", "--upstream", &format!("openai={}", upstream.uri()), "--max-model-calls", "4"],
    );
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("answered 2/2"), "{stdout}");
    let rows = crate::support::csv::Table::read(&out.join("runs.csv")).rows;
    assert_eq!(rows.len(), 2);
    for r in &rows {
        let cells = [&r["model_calls"], &r["tool_calls"], &r["faults_injected"], &r["terminated_by"]];
        assert_eq!(cells, ["2", "2", "1", "answer"], "{:?}", r.cells());
        assert_eq!(r["tokens"], "88", "31 + 12 + 40 + 5: {:?}", r.cells());
    }
    assert_eq!(report["runs"].as_array().map(Vec::len), Some(2), "{report}");
    assert_eq!(report["model"]["answered_by"], "the providers (live)", "{report}");
    assert_eq!(report["model"]["requests_sent"], 4, "{report}");
    rt.block_on(upstream.verify());
}

/// A Chat Completions stream as OpenAI sends it: chunks, then (`include_usage`) the usage.
fn chat_stream(deltas: &[Value], finish: &str, usage: (u64, u64)) -> String {
    let chunk = |choices: Value, usage: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "gpt-x",
                "choices": choices, "usage": usage})
        )
    };
    let mut out = String::new();
    for d in deltas {
        out += &chunk(json!([{"index": 0, "delta": d, "finish_reason": null}]), Value::Null);
    }
    out += &chunk(json!([{"index": 0, "delta": {}, "finish_reason": finish}]), Value::Null);
    let (tin, tout) = usage;
    out += &chunk(json!([]), json!({"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout}));
    out + "data: [DONE]\n\n"
}

/// The official `openai` SDK (examples/openai_agent.py), streaming and not, through
/// `exec --live`: its key reaches the upstream, the scenario's 429 (answered here) is retried by
/// the SDK itself, and the upstream (a scripted model: a call of `search`, then an answer once a
/// result comes back) sees only what passed. By hand, per run: 3 model calls (the 429, then two
/// sent upstream with usage 31 + 12 and 40 + 5), 2 tool calls (the mock tool's 503, which the
/// agent's tool client retries, then 200), 2 faults, an answer.
#[test]
fn the_official_openai_sdk_through_exec_live_streaming_and_not() {
    let Some(python) = crate::wire::sdk_python() else { return };
    for stream in [false, true] {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let upstream = rt.block_on(MockServer::start());
        let (call, answer) = if stream {
            let call = chat_stream(
                &[
                    json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": "call_s1", "type": "function",
                        "function": {"name": "search", "arguments": ""}}]}),
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"query\":\"Paris\"}"}}]}),
                ],
                "tool_calls",
                (31, 12),
            );
            let answer = chat_stream(&[json!({"role": "assistant", "content": "It is 18 C."})], "stop", (40, 5));
            (
                ResponseTemplate::new(200).set_body_raw(call.into_bytes(), "text/event-stream"),
                ResponseTemplate::new(200).set_body_raw(answer.into_bytes(), "text/event-stream"),
            )
        } else {
            let answer = json!({"id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "gpt-x",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "It is 18 C."}}],
                "usage": {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45}});
            (
                ResponseTemplate::new(200).set_body_raw(chat_answer(), "application/json"),
                ResponseTemplate::new(200).set_body_json(answer),
            )
        };
        rt.block_on(async {
            let key = || header("authorization", "Bearer sk-live-sdk-test");
            Mock::given(method("POST"))
                .and(path("/v1/chat/completions"))
                .and(key())
                .and(wiremock::matchers::body_string_contains("\"tool\""))
                .respond_with(answer)
                .with_priority(1)
                .expect(1)
                .mount(&upstream)
                .await;
            Mock::given(method("POST"))
                .and(path("/v1/chat/completions"))
                .and(key())
                .respond_with(call)
                .with_priority(2)
                .expect(1)
                .mount(&upstream)
                .await;
        });
        let dir = tempfile::tempdir().unwrap();
        let sc = crate::write(
            dir.path(),
            "live-sdk.toml",
            "name = \"live-sdk\"\n[task]\n[[task.steps]]\ntool = \"search\"\nargs = { query = \"Paris\" }\n\
             result = { temp_c = 18 }\n[[faults]]\ntarget = \"provider\"\nat = [1]\nhttp = 429\nretry_after_s = 1\n\
             [[faults]]\ntarget = \"search\"\nat = [1]\nhttp = 503\n",
        );
        let out = dir.path().join("out");
        let mut agent = vec![python.to_str().unwrap(), "examples/openai_agent.py"];
        if stream {
            agent.push("--stream");
        }
        let o = crate::tracefault()
            .env("OPENAI_API_KEY", "sk-live-sdk-test")
            .args(["exec", sc.to_str().unwrap(), "--out", out.to_str().unwrap(), "--live", "--time-scale", "0.01"])
            .args(["--upstream", &format!("openai={}", upstream.uri())])
            .arg("--")
            .args(&agent)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "stream {stream}: {stdout}");
        let rows = crate::support::csv::Table::read(&out.join("runs.csv")).rows;
        let r = &rows[0];
        let cells = [&r["model_calls"], &r["tool_calls"], &r["faults_injected"], &r["terminated_by"], &r["tokens"]];
        assert_eq!(cells, ["3", "2", "2", "answer", "88"], "stream {stream}: {:?}", r.cells());
        let trace =
            std::fs::read_to_string(out.join("traces").read_dir().unwrap().next().unwrap().unwrap().path()).unwrap();
        let events: Vec<Value> = trace.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let statuses: Vec<u64> = model_calls(&events).iter().filter_map(|e| e["status"].as_u64()).collect();
        assert_eq!(statuses, [429, 200, 200], "stream {stream}");
        let call = events.iter().find(|e| e["type"] == "tool_call").unwrap();
        assert_eq!(call["name"], "search", "stream {stream}: the model's call, read from the history after a stream");
        assert!(!all_text(&out).contains("sk-live-sdk-test"), "stream {stream}: the key in the written set");
        rt.block_on(upstream.verify());
    }
}

/// `[tools.NAME] upstream`: in live mode a call no fault stops goes to the user's real tool
/// and its answer is the result; a scheduled fault is answered here and never sent; the real
/// tool's own failure is passed on as that failure. Without live mode the mock answers and the
/// real tool hears nothing.
#[test]
fn a_real_tool_answers_in_live_mode_alone_and_faults_still_come_first() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tool = rt.block_on(MockServer::start());
    rt.block_on(async {
        Mock::given(method("POST"))
            .and(path("/search"))
            .and(wiremock::matchers::body_json(json!({"query": "Paris"})))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"temp_c": 21, "from": "the real tool"})))
            .up_to_n_times(1)
            .expect(1)
            .mount(&tool)
            .await;
        Mock::given(method("POST"))
            .and(path("/search"))
            .respond_with(ResponseTemplate::new(500).set_body_string("backend down\nstack trace here"))
            .with_priority(10)
            .expect(1)
            .mount(&tool)
            .await;
    });
    let dir = tempfile::tempdir().unwrap();
    let sc = crate::write(
        dir.path(),
        "real-tool.toml",
        &format!(
            "name = \"real-tool\"\n[task]\n[[task.steps]]\ntool = \"search\"\nargs = {{ query = \"Paris\" }}\n\
             result = {{ temp_c = 18 }}\n[tools.search]\nupstream = \"{}/search\"\n\
             [[faults]]\ntarget = \"search\"\nat = [2]\nhttp = 503\n",
            tool.uri()
        ),
    );
    let sc = sc.to_str().unwrap();
    let args = json!({"query": "Paris"});
    // Without live mode: the mock's result, and nothing sent.
    let served = crate::wire::Served::start_with(sc, &[]);
    let r = ureq::post(&format!("{}/tools/search", served.base)).send_json(args.clone()).unwrap();
    assert_eq!(r.into_json::<Value>().unwrap()["temp_c"], 18);
    drop(served);
    assert_eq!(rt.block_on(tool.received_requests()).unwrap().len(), 0, "serve sends nothing to a real tool");
    let p = Proxy::start(sc, &["--upstream", "openai=http://127.0.0.1:9"]);
    let post = |args: &Value| match ureq::post(&format!("{}/tools/search", p.base)).send_json(args.clone()) {
        Ok(r) => (r.status(), r.into_json::<Value>().unwrap()),
        Err(ureq::Error::Status(code, r)) => (code, r.into_json::<Value>().unwrap_or(Value::Null)),
        Err(e) => panic!("{e}"),
    };
    let (status, body) = post(&args);
    assert_eq!((status, &body["from"]), (200, &json!("the real tool")), "{body}");
    let (status, _) = post(&args);
    assert_eq!(status, 503, "the scheduled fault, answered here");
    assert_eq!(rt.block_on(tool.received_requests()).unwrap().len(), 1, "a fault never reaches the real tool");
    let (status, body) = post(&args);
    // Told as the mock tells a 500 (the run's notes keep the real tool's first line).
    assert_eq!(status, 500, "the real tool's own failure: {body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("HTTP 500"), "{body}");
    assert!(!body.to_string().contains("stack trace"), "{body}");
    p.stop();
    rt.block_on(tool.verify());
}

#[test]
fn a_tool_upstream_that_is_no_url_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let sc = crate::write(
        dir.path(),
        "bad.toml",
        "name = \"bad\"\n[task]\n[[task.steps]]\ntool = \"search\"\n[tools.search]\nupstream = \"ftp://x/y\"\n",
    );
    let out = crate::tracefault().args(["validate", sc.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("tools.search.upstream") && text.contains("http://"), "{text}");
}

/// A key in a request's query (Gemini's `?key=`) reaches no file `exec --live` writes, even when
/// the upstream is down and the run's notes say why.
#[test]
fn a_key_in_the_query_reaches_no_report_when_the_upstream_is_down() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let agent = format!(
        "import json, os, urllib.request, urllib.error\n\
         url = os.environ['TRACEFAULT_BASE_URL'] + '/v1beta/models/gemini-x:generateContent?key={KEY}'\n\
         body = json.dumps({{'contents': [{{'role': 'user', 'parts': [{{'text': 'hi'}}]}}]}}).encode()\n\
         req = urllib.request.Request(url, data=body, headers={{'content-type': 'application/json'}})\n\
         try:\n    urllib.request.urlopen(req, timeout=30)\nexcept urllib.error.HTTPError as e:\n    print(e.code)\n"
    );
    let script = crate::write(dir.path(), "agent.py", &agent);
    let out = dir.path().join("out");
    let o = crate::tracefault()
        .args(["exec", "tests/fixtures/wire/plain.toml", "--out", out.to_str().unwrap(), "--live"])
        .args(["--upstream", &format!("gemini=http://127.0.0.1:{port}"), "--", "python3", script.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let written = all_text(&out);
    assert!(written.contains("could not be reached"), "the notes say the upstream was down: {stdout}");
    assert!(!written.contains(KEY) && !stdout.contains(KEY), "a key in the written set: {stdout}");
}

/// `--max-usd`: each request is reserved at the most it can cost before it is sent, then
/// settled at its usage. By hand, with the scenario's $2.5 and $10 per million tokens: a body
/// of B bytes asking for at most 100 tokens may cost (B + 1024) × 2.5 + 100 × 10 µUSD; each
/// answer (40 in, 10 out) costs 40 × 2.5 + 10 × 10 = 200 µUSD. With a limit of that most plus
/// 500 µUSD, three requests go (0, 200 and 400 µUSD spent before each) and the fourth, with 600
/// spent, could pass it: refused here, never sent. A model without a price is refused by name.
#[test]
fn the_usd_limit_is_reserved_before_and_settled_after_and_never_passed() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upstream = rt.block_on(MockServer::start());
    let answer = json!({"id": "chatcmpl-3", "object": "chat.completion", "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "18 C."}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 10, "total_tokens": 50}});
    rt.block_on(
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer))
            .expect(3)
            .mount(&upstream),
    );
    let mut body = request();
    body["max_tokens"] = json!(100);
    let b = serde_json::to_vec(&body).unwrap().len() as f64;
    let most_usd = ((b + 1024.0) * 2.5 + 100.0 * 10.0) / 1e6;
    let limit = format!("{:.9}", most_usd + 500e-6);
    let p = Proxy::start(
        "tests/fixtures/wire/live-priced.toml",
        &["--upstream", &format!("openai={}", upstream.uri()), "--max-usd", &limit],
    );
    for n in 1..=3 {
        let (status, _, bytes) = p.post("/v1/chat/completions", &body);
        assert_eq!(status, 200, "request {n}: {}", String::from_utf8_lossy(&bytes));
    }
    let (status, _, bytes) = p.post("/v1/chat/completions", &body);
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&bytes));
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["error"]["type"], "spending_limit");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("$0.000600 spent or reserved") && message.contains("may cost up to"), "{message}");
    let mut other = body.clone();
    other["model"] = json!("gpt-unpriced");
    let (status, _, bytes) = p.post("/v1/chat/completions", &other);
    assert_eq!(status, 403);
    assert!(
        String::from_utf8_lossy(&bytes).contains("\\\"gpt-unpriced\\\" has no price"),
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    let (stderr, events, _) = p.stop();
    assert!(stderr.contains("3 sent to the providers, $0.000600 spent"), "{stderr}");
    assert_eq!(model_calls(&events).len(), 3, "refusals are no model calls");
    rt.block_on(upstream.verify());
    // A USD limit needs prices, and live mode.
    for (args, says) in [
        (vec!["proxy", "tests/fixtures/wire/plain.toml", "--max-usd", "1"], "[pricing.models.NAME]"),
        (vec!["exec", "tests/fixtures/wire/live-priced.toml", "--max-usd", "1", "--", "true"], "needs --live"),
    ] {
        let out = crate::tracefault().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(says), "{out:?}");
    }
}

/// Anthropic's event stream for one answer: a text or a `tool_use` block (its input in two
/// `input_json_delta` pieces), with usage.
fn anthropic_stream(text: Option<&str>, usage: (u64, u64)) -> String {
    let ev = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let (tin, tout) = usage;
    let mut out = ev(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_s", "type": "message", "role": "assistant", "content": [],
            "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": tin, "output_tokens": 1}}}),
    );
    let stop = match text {
        Some(t) => {
            out += &ev(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            );
            out += &ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}),
            );
            "end_turn"
        }
        None => {
            out += &ev(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_s1", "name": "search", "input": {}}}),
            );
            for piece in ["{\"query\": ", "\"Paris\"}"] {
                out += &ev(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": piece}}),
                );
            }
            "tool_use"
        }
    };
    out += &ev("content_block_stop", json!({"type": "content_block_stop", "index": 0}));
    out += &ev(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": tout}}),
    );
    out + &ev("message_stop", json!({"type": "message_stop"}))
}

/// The official `anthropic` and `google-genai` SDKs (examples/anthropic_agent.py,
/// examples/gemini_agent.py), streaming and not, through `exec --live` against a scripted
/// upstream: a call of `search`, then, once its result comes back, an answer. The scenario's 503
/// on the first tool call, and for Anthropic a 429 first (the SDK retries it; google-genai does
/// not retry by default, so Gemini gets none). By hand, per run: Anthropic 3 model calls (429,
/// 200, 200), Gemini 2; 2 tool calls (the 503 and the agent's retry); tokens 31 + 12 + 40 + 5 =
/// 88; the model's call recorded once, from the answer, and its result paired with it (Gemini's
/// call has no id: tracefault's own). Anthropic's runs also carry `--max-usd` at $3 and $15 per
/// million tokens: 31·3 + 12·15 + 40·3 + 5·15 = 468 µUSD spent.
#[test]
fn the_official_anthropic_and_gemini_sdks_through_exec_live_streaming_and_not() {
    let Some(python) = crate::wire::sdk_python() else { return };
    for (sdk, stream) in [("anthropic", false), ("anthropic", true), ("gemini", false), ("gemini", true)] {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let upstream = rt.block_on(MockServer::start());
        let gemini_answer = |parts: Value, usage: (u64, u64)| {
            json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": usage.0, "candidatesTokenCount": usage.1, "totalTokenCount": usage.0 + usage.1}})
        };
        let (route, follow_up, call, answer) = match (sdk, stream) {
            ("anthropic", false) => (
                "/v1/messages".to_owned(),
                "tool_result",
                ResponseTemplate::new(200).set_body_json(json!({"id": "msg_1", "type": "message", "role": "assistant",
                    "model": "claude-sonnet-4-5", "stop_reason": "tool_use", "stop_sequence": null,
                    "content": [{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"query": "Paris"}}],
                    "usage": {"input_tokens": 31, "output_tokens": 12}})),
                ResponseTemplate::new(200).set_body_json(json!({"id": "msg_2", "type": "message", "role": "assistant",
                    "model": "claude-sonnet-4-5", "stop_reason": "end_turn", "stop_sequence": null,
                    "content": [{"type": "text", "text": "It is 18 C."}], "usage": {"input_tokens": 40, "output_tokens": 5}})),
            ),
            ("anthropic", true) => (
                "/v1/messages".to_owned(),
                "tool_result",
                ResponseTemplate::new(200).set_body_raw(anthropic_stream(None, (31, 12)).into_bytes(), "text/event-stream"),
                ResponseTemplate::new(200)
                    .set_body_raw(anthropic_stream(Some("It is 18 C."), (40, 5)).into_bytes(), "text/event-stream"),
            ),
            (_, false) => (
                "/v1beta/models/gemini-2.5-flash:generateContent".to_owned(),
                "functionResponse",
                ResponseTemplate::new(200)
                    .set_body_json(gemini_answer(json!([{"functionCall": {"name": "search", "args": {"query": "Paris"}}}]), (31, 12))),
                ResponseTemplate::new(200).set_body_json(gemini_answer(json!([{"text": "It is 18 C."}]), (40, 5))),
            ),
            (_, true) => {
                let sse = |v: Value| format!("data: {v}\r\n\r\n").into_bytes();
                (
                    "/v1beta/models/gemini-2.5-flash:streamGenerateContent".to_owned(),
                    "functionResponse",
                    ResponseTemplate::new(200).set_body_raw(
                        sse(gemini_answer(json!([{"functionCall": {"name": "search", "args": {"query": "Paris"}}}]), (31, 12))),
                        "text/event-stream",
                    ),
                    ResponseTemplate::new(200)
                        .set_body_raw(sse(gemini_answer(json!([{"text": "It is 18 C."}]), (40, 5))), "text/event-stream"),
                )
            }
        };
        rt.block_on(async {
            Mock::given(method("POST"))
                .and(path(route.as_str()))
                .and(wiremock::matchers::body_string_contains(follow_up))
                .respond_with(answer)
                .with_priority(1)
                .expect(1)
                .mount(&upstream)
                .await;
            Mock::given(method("POST"))
                .and(path(route.as_str()))
                .respond_with(call)
                .with_priority(2)
                .expect(1)
                .mount(&upstream)
                .await;
        });
        let dir = tempfile::tempdir().unwrap();
        let provider_fault = if sdk == "anthropic" {
            "[[faults]]\ntarget = \"provider\"\nat = [1]\nhttp = 429\nretry_after_s = 1\n\
             [pricing]\n[pricing.models.claude-sonnet-4-5]\ninput_per_mtok = 3.0\noutput_per_mtok = 15.0\n"
        } else {
            ""
        };
        let sc = crate::write(
            dir.path(),
            "live-sdk.toml",
            &format!(
                "name = \"live-sdk\"\n[task]\n[[task.steps]]\ntool = \"search\"\nargs = {{ query = \"Paris\" }}\n\
                 result = {{ temp_c = 18 }}\n[[faults]]\ntarget = \"search\"\nat = [1]\nhttp = 503\n{provider_fault}"
            ),
        );
        let out = dir.path().join("out");
        let script = format!("examples/{sdk}_agent.py");
        let mut agent = vec![python.to_str().unwrap(), script.as_str()];
        if stream {
            agent.push("--stream");
        }
        let key = "sk-live-sdk-test-2";
        let mut cmd = crate::tracefault();
        cmd.env("ANTHROPIC_API_KEY", key).env("GEMINI_API_KEY", key).env_remove("GOOGLE_API_KEY");
        cmd.args(["exec", sc.to_str().unwrap(), "--out", out.to_str().unwrap(), "--live", "--time-scale", "0.01"]);
        cmd.args(["--upstream", &format!("{sdk}={}", upstream.uri())]);
        if sdk == "anthropic" {
            cmd.args(["--max-usd", "1"]);
        }
        let o = cmd.arg("--").args(&agent).output().unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        let what = format!("{sdk}, stream {stream}");
        assert_eq!(o.status.code(), Some(0), "{what}: {stdout} {}", String::from_utf8_lossy(&o.stderr));
        let rows = crate::support::csv::Table::read(&out.join("runs.csv")).rows;
        let r = &rows[0];
        let cells = [&r["model_calls"], &r["tool_calls"], &r["faults_injected"], &r["terminated_by"], &r["tokens"]];
        let (calls, faults) = if sdk == "anthropic" { ("3", "2") } else { ("2", "1") };
        assert_eq!(cells, [calls, "2", faults, "answer", "88"], "{what}: {:?}", r.cells());
        let trace =
            std::fs::read_to_string(out.join("traces").read_dir().unwrap().next().unwrap().unwrap().path()).unwrap();
        let events: Vec<Value> = trace.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let called: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool_call").collect();
        assert_eq!(called.len(), 1, "{what}: the model's call, once: {events:?}");
        assert_eq!((&called[0]["name"], &called[0]["args"]["query"]), (&json!("search"), &json!("Paris")), "{what}");
        let id = called[0]["call_id"].as_str().unwrap();
        assert!(!id.is_empty(), "{what}");
        let results: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool_result").collect();
        assert_eq!(results.len(), 1, "{what}: {events:?}");
        assert_eq!(results[0]["call_id"], id, "{what}: the result paired with its call");
        let texts: Vec<&Value> = model_calls(&events).iter().map(|e| &e["text"]).filter(|t| !t.is_null()).collect();
        assert_eq!(texts, [&json!("It is 18 C.")], "{what}");
        let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("exec.json")).unwrap()).unwrap();
        if sdk == "anthropic" {
            let spent = report["model"]["usd_spent"].as_f64().unwrap();
            assert!((spent - 468e-6).abs() < 1e-12, "{what}: {spent}");
        }
        assert!(!all_text(&out).contains(key), "{what}: the key in the written set");
        rt.block_on(upstream.verify());
    }
}

/// A real tool's call is part of the call: it holds the tool's place while it runs (so
/// `concurrency = 1` refuses a second call meanwhile), and a real failure is a failure to the
/// scenario's triggers (an `after_successes = 1` fault fires only after a real success). By
/// hand: the first call's real tool fails (500), the second succeeds, the third meets the fault
/// (503); a call sent while the slow real tool serves another is refused as busy.
#[test]
fn a_real_tools_call_holds_its_place_and_its_failure_is_no_success() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tool = rt.block_on(MockServer::start());
    rt.block_on(async {
        Mock::given(method("POST"))
            .and(path("/search"))
            .respond_with(ResponseTemplate::new(500).set_body_string("backend down"))
            .up_to_n_times(1)
            .with_priority(1)
            .expect(1)
            .mount(&tool)
            .await;
        Mock::given(method("POST"))
            .and(path("/search"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"temp_c": 21}))
                    .set_delay(std::time::Duration::from_millis(600)),
            )
            .with_priority(2)
            .expect(1)
            .mount(&tool)
            .await;
    });
    let dir = tempfile::tempdir().unwrap();
    let sc = crate::write(
        dir.path(),
        "real-tool-held.toml",
        &format!(
            "name = \"real-tool-held\"\n[task]\n[[task.steps]]\ntool = \"search\"\nargs = {{ query = \"Paris\" }}\n\
             result = {{ temp_c = 18 }}\n[tools.search]\nupstream = \"{}/search\"\nconcurrency = 1\n\
             [[faults]]\ntarget = \"search\"\nafter_successes = 1\nhttp = 503\n",
            tool.uri()
        ),
    );
    let p = Proxy::start(sc.to_str().unwrap(), &["--upstream", "openai=http://127.0.0.1:9"]);
    let url = format!("{}/tools/search", p.base);
    let post = move || match ureq::post(&url).send_json(json!({"query": "Paris"})) {
        Ok(r) => r.status(),
        Err(ureq::Error::Status(code, _)) => code,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(post(), 500, "the real tool's failure");
    let slow = std::thread::spawn(post.clone());
    std::thread::sleep(std::time::Duration::from_millis(200));
    let busy = post();
    assert_eq!(slow.join().unwrap(), 200, "no success before it: the fault does not fire");
    assert!(matches!(busy, 429 | 503), "the real tool held the one place: {busy}");
    assert_eq!(post(), 503, "after one real success, the scheduled fault");
    p.stop();
    rt.block_on(tool.verify());
}

/// The scenario's stream faults break the real provider's stream on its way to the agent, in
/// its dialect, after the events the rule names: a cut sends the first 2 events and drops the
/// connection; an error event follows them and ends the stream; a malformed event is the third
/// event with its data cut in half, the rest passing; a stall holds the rest back 400 ms. A
/// broken answer is recorded as a failed model call (502) and its calls are not recorded; the
/// stalled one is the answer, whole.
#[test]
#[allow(clippy::disallowed_methods)] // The stall is a real wait, timed on the wall clock.
fn stream_faults_break_the_real_providers_stream_in_its_dialect() {
    let sse = anthropic_stream(None, (25, 15));
    let events: Vec<&str> = sse.split_inclusive("\n\n").collect();
    let head = events[..2].concat();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upstream = rt.block_on(MockServer::start());
    rt.block_on(
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(sse.as_bytes().to_vec(), "text/event-stream"))
            .mount(&upstream),
    );
    let dir = tempfile::tempdir().unwrap();
    let body = json!({"model": "claude-x", "max_tokens": 100, "stream": true, "messages": [{"role": "user", "content": "Weather?"}]});
    for fault in ["stream_cut", "stream_error", "stream_malformed", "stream_stall"] {
        let scenario = dir.path().join(format!("{fault}.toml"));
        let stall = if fault == "stream_stall" { "stall_ms = 400\n" } else { "" };
        std::fs::write(
            &scenario,
            format!(
                "name = \"{fault}\"\nruns = 1\n[task]\n[[task.steps]]\ntool = \"search\"\n[[faults]]\n\
                 target = \"provider\"\nat = [1]\nfault = \"{fault}\"\nafter_events = 2\n{stall}"
            ),
        )
        .unwrap();
        let p = Proxy::start(scenario.to_str().unwrap(), &["--upstream", &format!("anthropic={}", upstream.uri())]);
        let clock = std::time::Instant::now();
        let answer = ureq::post(&format!("{}/v1/messages", p.base)).send_json(body.clone()).unwrap();
        let mut got = Vec::new();
        let read = std::io::Read::read_to_end(&mut answer.into_reader(), &mut got);
        let waited = clock.elapsed();
        let got = String::from_utf8(got).unwrap();
        match fault {
            "stream_cut" => {
                assert!(read.is_err(), "the agent's read fails");
                assert_eq!(got, head);
            }
            "stream_error" => {
                assert_eq!(
                    got,
                    format!(
                        "{head}event: error\ndata: {{\"error\":{{\"message\":\"Overloaded\",\"type\":\"overloaded_error\"}},\"request_id\":\"req_tracefault_000001\",\"type\":\"error\"}}\n\n"
                    )
                );
            }
            "stream_malformed" => {
                let third = events[2];
                let data = third.split_once("data: ").unwrap().1.trim_end();
                let cut = format!("{}data: {}\n\n", third.split_once("data: ").unwrap().0, &data[..data.len() / 2]);
                assert_eq!(got, format!("{head}{cut}{}", events[3..].concat()));
            }
            _ => {
                assert_eq!(got, sse, "a stall passes everything");
                assert!(waited >= std::time::Duration::from_millis(400), "{waited:?}");
            }
        }
        let (_, events, _) = p.stop();
        let calls = model_calls(&events);
        assert_eq!(calls.len(), 1, "{fault}: {events:?}");
        let recorded = events.iter().filter(|e| e["type"] == "tool_call").count();
        if fault == "stream_stall" {
            assert_eq!(
                (calls[0]["status"].as_u64(), calls[0]["stop"].as_str(), recorded),
                (Some(200), Some("tool_calls"), 1)
            );
        } else {
            assert_eq!(
                (calls[0]["status"].as_u64(), calls[0]["stop"].as_str(), recorded),
                (Some(502), Some("error"), 0),
                "{fault}"
            );
        }
    }
}

/// `--rewrite`: a tool result the agent sends reaches the real model as the failure the
/// scenario schedules for that call, in the strategy's encoding, with its ids kept; the same
/// result is rewritten the same way each time the agent sends its history again; a result
/// the faults spare, and one of a tool the scenario does not name, pass as they came, and the
/// rest of the request goes out byte for byte. By hand (scenario: `search` fails with 503 on
/// its first and third attempts): in Chat the first result becomes the five-field envelope
/// (code TRANSPORT, retryable, status 503), in Anthropic the same with `is_error: true`; the
/// second call's result is untouched however often it is sent; the third call's is rewritten.
#[test]
fn rewrite_hands_the_real_model_the_scenarios_fault_in_the_strategys_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("rewrite.toml");
    std::fs::write(
        &scenario,
        "name = \"rewrite\"\nruns = 1\n[task]\n[[task.steps]]\ntool = \"search\"\n[[faults]]\ntarget = \"search\"\n\
         at = [1, 3]\nhttp = 503\n",
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upstream = rt.block_on(MockServer::start());
    rt.block_on(async {
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(chat_answer(), "application/json"))
            .mount(&upstream)
            .await;
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(ResponseTemplate::new(200).set_body_json(
                json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
                        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                        "usage": {"input_tokens": 5, "output_tokens": 1}}),
            ))
            .mount(&upstream)
            .await;
    });
    let to = format!("openai={0},anthropic={0}", upstream.uri());
    let p = Proxy::start(scenario.to_str().unwrap(), &["--upstream", &to, "--rewrite", "five-field"]);
    let call = |id: &str, tool: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": tool, "arguments": "{}"}}]})
    };
    let result = |id: &str, text: &str| json!({"role": "tool", "tool_call_id": id, "content": text});
    // The agent's bytes, its keys in its own order (which a rewrite must not sort).
    let send = |messages: &[Value]| {
        let list: Vec<String> = messages.iter().map(Value::to_string).collect();
        let raw = format!(
            "{{\"tools\":[{{\"type\":\"function\",\"function\":{{\"name\":\"search\",\"parameters\":{{\"type\":\"object\",\
             \"properties\":{{\"z\":{{}},\"a\":{{}}}}}}}}}}],\"model\":\"gpt-x\",\"messages\":[{}]}}",
            list.join(",")
        );
        ureq::post(&format!("{}/v1/chat/completions", p.base))
            .set("content-type", "application/json")
            .send_string(&raw)
            .unwrap();
        raw
    };
    let mut messages =
        vec![json!({"role": "user", "content": "Weather?"}), call("c1", "search"), result("c1", "{\"temp_c\":18}")];
    let first = send(&messages);
    messages.extend([call("c2", "search"), result("c2", "{\"temp_c\":19}"), call("c3", "lookup"), result("c3", "raw")]);
    send(&messages);
    messages.extend([call("c4", "search"), result("c4", "{\"temp_c\":20}")]);
    send(&messages);
    let received = rt.block_on(upstream.received_requests()).unwrap();
    let bodies: Vec<Value> = received.iter().map(|r| serde_json::from_slice(&r.body).unwrap()).collect();
    assert_eq!(bodies.len(), 3);
    // Byte for byte but the rewritten message: the agent's key order kept.
    let sent = String::from_utf8(received[0].body.clone()).unwrap();
    let head = &first[..first.find("{\"content\":\"{\\\"temp_c").unwrap()];
    assert!(head.starts_with("{\"tools\"") && sent.starts_with(head), "{sent}");
    for body in &bodies {
        let first = &body["messages"][2];
        assert_eq!(first["tool_call_id"], "c1", "ids kept: {first}");
        let shown: Value = serde_json::from_str(first["content"].as_str().unwrap()).unwrap();
        assert_eq!((shown["code"].as_str(), shown["retryable"].as_bool()), (Some("TRANSPORT"), Some(true)), "{shown}");
        assert_eq!(shown["details"]["status"], 503);
    }
    assert_eq!(bodies[0]["messages"][2], bodies[1]["messages"][2], "rewritten the same way again");
    assert_eq!(bodies[1]["messages"][2], bodies[2]["messages"][2]);
    for body in &bodies[1..] {
        assert_eq!(body["messages"][4]["content"], "{\"temp_c\":19}", "the second attempt is spared, each time");
        assert_eq!(body["messages"][6]["content"], "raw", "a tool the scenario does not name passes");
    }
    let third: Value = serde_json::from_str(bodies[2]["messages"][8]["content"].as_str().unwrap()).unwrap();
    assert_eq!(third["code"], "TRANSPORT", "the third attempt fails: {third}");
    // Anthropic: the block's flag is set too.
    let anthropic = json!({"model": "claude-x", "max_tokens": 10, "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_9", "name": "search", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "18 C"}]}]});
    let (_, events, _) = {
        let q = Proxy::start(scenario.to_str().unwrap(), &["--upstream", &to, "--rewrite", "five-field"]);
        q.post("/v1/messages", &anthropic);
        q.stop()
    };
    let received = rt.block_on(upstream.received_requests()).unwrap();
    let sent: Value = serde_json::from_slice(&received.last().unwrap().body).unwrap();
    let block = &sent["messages"][2]["content"][0];
    assert_eq!((block["tool_use_id"].as_str(), block["is_error"].as_bool()), (Some("toolu_9"), Some(true)), "{block}");
    // The trace holds what the model read, marked as rewritten.
    let results: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool_result").collect();
    assert_eq!(results.len(), 1, "{events:?}");
    assert_eq!((results[0]["ok"].as_bool(), results[0]["error_class"].as_str()), (Some(false), Some("transient")));
    assert!(
        results[0]["evidence"].as_str().unwrap().starts_with("rewritten by tracefault (http 503, under five-field)")
    );
    let (_, events, _) = p.stop();
    let oks: Vec<(String, bool)> = events
        .iter()
        .filter(|e| e["type"] == "tool_result")
        .map(|e| (e["call_id"].as_str().unwrap().to_owned(), e["ok"].as_bool().unwrap()))
        .collect();
    let want = [("c1", false), ("c2", true), ("c3", true), ("c4", false)].map(|(c, ok)| (c.to_owned(), ok));
    assert_eq!(oks, want);
    // Each call is recorded before its result.
    for (id, _) in &want {
        let at = |ty: &str| events.iter().position(|e| e["type"] == ty && e["call_id"] == id.as_str()).unwrap();
        assert!(at("tool_call") < at("tool_result"), "{id}: {events:?}");
    }
}

/// A fault that comes after the write (`commit = "before_failure"`) lets the user's real tool
/// write first: the real tool gets the call, the agent gets the scheduled 503. By hand: the
/// first call reaches the real tool and fails for the agent; the second reaches it and
/// succeeds, the same arguments written twice: one duplicate write in the proxy's runs.csv.
#[test]
fn a_fault_after_the_commit_lets_the_real_tool_write_first() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tool = rt.block_on(MockServer::start());
    rt.block_on(async {
        Mock::given(method("POST"))
            .and(path("/charge"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"payment": "P-1"})))
            .expect(2)
            .mount(&tool)
            .await;
    });
    let dir = tempfile::tempdir().unwrap();
    let sc = crate::write(
        dir.path(),
        "write.toml",
        &format!(
            "name = \"real-write\"\n[task]\n[[task.steps]]\ntool = \"charge\"\nargs = {{ cart = \"A\" }}\n\
             result = {{ payment = \"mock\" }}\n[tools.charge]\nupstream = \"{}/charge\"\neffect = \"write\"\n\
             [[faults]]\ntarget = \"charge\"\nat = [1]\nhttp = 503\ncommit = \"before_failure\"\n",
            tool.uri()
        ),
    );
    let p = Proxy::start(sc.to_str().unwrap(), &["--upstream", "openai=http://127.0.0.1:9"]);
    let post = || match ureq::post(&format!("{}/tools/charge", p.base)).send_json(json!({"cart": "A"})) {
        Ok(r) => r.status(),
        Err(ureq::Error::Status(code, _)) => code,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(post(), 503, "the scheduled failure, after the real write");
    assert_eq!(post(), 200);
    let (_, _, out) = p.stop();
    rt.block_on(tool.verify());
    assert_eq!(crate::wire::runs_row(&out.path().join("set"))["duplicate_writes"], 1);
}
