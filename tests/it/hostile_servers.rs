//! Hostile clients against the servers tracefault starts (`serve`'s HTTP mocks and `/mcp`,
//! `mcp --stdio`): requests the MCP endpoint refuses use no fault attempts, foreign origins are
//! refused, bodies, connections and unread answers cost bounded memory and descriptors, and bad
//! JSON-RPC gets the spec's answer with its id. Each drives the real binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::root;

/// `tracefault serve SCENARIO` on a free loopback port, with at most `nofile` open files when
/// given.
struct Serve {
    child: Child,
    base: String,
    addr: SocketAddr,
}

impl Serve {
    fn start(scenario: &str, nofile: Option<u32>) -> Serve {
        let bin = assert_cmd::cargo::cargo_bin!("tracefault");
        let mut cmd = match nofile {
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c").arg(format!("ulimit -n {n} && exec \"$0\" \"$@\"")).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let mut child = cmd
            .current_dir(root())
            .args(["serve", scenario])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = crate::wire::banner_base(&mut child);
        let addr = base.strip_prefix("http://").unwrap().parse().unwrap();
        Serve { child, base, addr }
    }

    /// `GET /tools` on a fresh connection: its status, or the error.
    fn tools(&self, timeout: Duration) -> Result<u16, String> {
        let agent = ureq::AgentBuilder::new().timeout(timeout).build();
        agent.get(&format!("{}/tools", self.base)).call().map(|r| r.status()).map_err(|e| e.to_string())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A figure of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`: the peak).
fn status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(key)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// An answer from `/mcp`: the status, the JSON-RPC message (from JSON or the event stream).
fn mcp_post(serve: &Serve, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let mut req = ureq::post(&format!("{}/mcp", serve.base));
    for (k, v) in headers {
        req = req.set(k, v);
    }
    let r = match req.send_string(body) {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{e}"),
    };
    let status = r.status();
    let text = r.into_string().unwrap();
    let message = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .or_else(|| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    (status, message)
}

const JSON: (&str, &str) = ("content-type", "application/json");
const ACCEPT: (&str, &str) = ("accept", "application/json, text/event-stream");

/// `initialize` and `notifications/initialized`: the session id.
fn mcp_session(serve: &Serve) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}});
    let r = ureq::post(&format!("{}/mcp", serve.base))
        .set(JSON.0, JSON.1)
        .set(ACCEPT.0, ACCEPT.1)
        .send_string(&init.to_string())
        .unwrap();
    let id = r.header("mcp-session-id").unwrap().to_owned();
    let _ = r.into_string();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let (status, _) = mcp_post(serve, &[JSON, ACCEPT, ("mcp-session-id", &id), VERSION], &note);
    assert_eq!(status, 202);
    id
}

const VERSION: (&str, &str) = ("mcp-protocol-version", "2025-06-18");

fn search_call(id: u64, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "search", "arguments": arguments}})
        .to_string()
}

/// Item 2: a `tools/call` the endpoint refuses (content it does not accept, no session or an
/// unknown one, a foreign origin, wrong-typed arguments) never reaches the tool, so it uses no
/// fault attempt: the first call served still meets the first attempt's fault (503).
#[test]
fn mcp_calls_the_endpoint_refuses_use_no_fault_attempts() {
    let serve = Serve::start("tests/fixtures/wire/mcp-faults.toml", None);
    let session = mcp_session(&serve);
    let sid = ("mcp-session-id", session.as_str());
    let call = search_call(2, json!({"query": "weather Paris"}));
    // What a web page can send with no preflight: text/plain, any answer accepted.
    let (status, _) = mcp_post(&serve, &[("content-type", "text/plain"), ("accept", "*/*"), sid, VERSION], &call);
    assert_eq!(status, 406);
    let (status, _) = mcp_post(&serve, &[("content-type", "text/plain"), ACCEPT, sid, VERSION], &call);
    assert_eq!(status, 415);
    let (status, _) = mcp_post(&serve, &[JSON, ACCEPT, VERSION], &call);
    assert_eq!(status, 400, "no session");
    let (status, _) = mcp_post(&serve, &[JSON, ACCEPT, ("mcp-session-id", "no-such-session"), VERSION], &call);
    assert_eq!(status, 404, "an unknown session");
    let (status, _) = mcp_post(&serve, &[JSON, ACCEPT, sid, VERSION, ("origin", "http://evil.example")], &call);
    assert_eq!(status, 403, "a foreign origin");
    let (_, wrong) = mcp_post(&serve, &[JSON, ACCEPT, sid, VERSION], &search_call(3, json!("weather Paris")));
    assert_eq!(wrong["error"]["code"], -32602, "wrong-typed arguments: {wrong}");
    let (status, served) =
        mcp_post(&serve, &[JSON, ACCEPT, sid, VERSION], &search_call(4, json!({"query": "weather Paris"})));
    assert_eq!(status, 503, "the first call served meets attempt 1's fault: {served}");
}

/// Item 2: `/mcp` refuses a present Origin that is not the loopback's (DNS rebinding), on every
/// method; no Origin, or a loopback one on any port, is served.
#[test]
fn mcp_refuses_foreign_origins() {
    let serve = Serve::start("tests/fixtures/wire/mcp-faults.toml", None);
    let session = mcp_session(&serve);
    let sid = ("mcp-session-id", session.as_str());
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    for origin in ["http://localhost:5173", "http://127.0.0.1:8080", "https://[::1]:3000", "http://localhost"] {
        let (status, answer) = mcp_post(&serve, &[JSON, ACCEPT, sid, VERSION, ("origin", origin)], &list);
        assert_eq!(status, 200, "{origin}");
        assert_eq!(answer["result"]["tools"][0]["name"], "search", "{origin}");
    }
    for origin in ["http://evil.example", "null", "http://localhost.evil.example", "http://127.0.0.1.nip.io:80"] {
        let (status, _) = mcp_post(&serve, &[JSON, ACCEPT, sid, VERSION, ("origin", origin)], &list);
        assert_eq!(status, 403, "{origin}");
        let (status, _) = mcp_post(&serve, &[JSON, ACCEPT, sid, VERSION, ("origin", origin)], "{not json");
        assert_eq!(status, 403, "{origin}: refused before anything is read");
        let get = ureq::get(&format!("{}/mcp", serve.base))
            .set("accept", "text/event-stream")
            .set("mcp-session-id", &session)
            .set("origin", origin)
            .call();
        assert!(matches!(get, Err(ureq::Error::Status(403, _))), "{origin}: GET too");
    }
}

/// Item 14: a body sent in 1-byte chunks costs about its bytes, not a chunk's bookkeeping per
/// byte (2 MiB cost +88 MiB before).
#[test]
fn a_body_sent_a_byte_at_a_time_costs_its_bytes() {
    let serve = Serve::start("tests/fixtures/wire/plain.toml", None);
    assert_eq!(serve.tools(Duration::from_secs(5)), Ok(200));
    let pid = serve.child.id();
    let before = status_kib(pid, "VmHWM");
    let mut tcp = TcpStream::connect(serve.addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut wire = b"POST /tools/search HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
        transfer-encoding: chunked\r\nconnection: close\r\n\r\n1\r\n\"\r\n"
        .to_vec();
    for _ in 0..2 << 20 {
        wire.extend_from_slice(b"1\r\nx\r\n");
    }
    wire.extend_from_slice(b"1\r\n\"\r\n0\r\n\r\n");
    tcp.write_all(&wire).unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let grew = status_kib(pid, "VmHWM").saturating_sub(before);
    assert!(grew < 24 << 10, "a 2 MiB body in 1-byte chunks took {grew} KiB at its peak");
}

/// Item 15: connections that send half a request and stop do not use up the server's open
/// files (here 128): a real request is still answered, at once.
#[test]
fn half_sent_requests_leave_room_for_real_ones() {
    let serve = Serve::start("tests/fixtures/wire/plain.toml", Some(128));
    let half: Vec<TcpStream> = (0..200)
        .filter_map(|_| {
            let mut c = TcpStream::connect_timeout(&serve.addr, Duration::from_secs(1)).ok()?;
            c.write_all(b"GET /tools HTTP/1.1\r\nhost: 127.0.0.1\r\n").ok()?;
            Some(c)
        })
        .collect();
    assert!(half.len() > 150, "{} connections", half.len());
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..3 {
        assert_eq!(serve.tools(Duration::from_secs(3)), Ok(200), "a real request beside {} half ones", half.len());
    }
    assert!(serve.child.id() > 0 && std::fs::metadata(format!("/proc/{}", serve.child.id())).is_ok());
}

/// Item 15: a request whose headers stop coming, and a keep-alive connection left idle, are
/// closed after the header timeout (10 s).
#[test]
#[allow(clippy::disallowed_methods)] // Real timeouts, timed on the wall clock.
fn slow_headers_and_idle_connections_are_closed() {
    let serve = Serve::start("tests/fixtures/wire/plain.toml", None);
    let started = Instant::now();
    let mut half = TcpStream::connect(serve.addr).unwrap();
    half.write_all(b"GET /tools HTTP/1.1\r\nhost: 127.0.0.1\r\n").unwrap();
    let mut idle = TcpStream::connect(serve.addr).unwrap();
    idle.write_all(b"GET /tools HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").unwrap();
    // The whole answer: its head, then content-length bytes.
    let mut reader = BufReader::new(idle.try_clone().unwrap());
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    for (what, mut c) in [("half a request", half), ("an idle connection", idle)] {
        c.set_read_timeout(Some(Duration::from_secs(14).saturating_sub(started.elapsed()))).unwrap();
        let mut rest = Vec::new();
        let closed = c.read_to_end(&mut rest).is_ok();
        let after = started.elapsed();
        assert!(closed, "{what}: still open after {after:?}");
        assert!(after > Duration::from_secs(8), "{what}: closed too soon, after {after:?}");
    }
}

/// The lines a child writes, read on a thread (so a test can wait for one with a timeout).
fn lines_of(out: Stdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

type Stdout = BufReader<std::process::ChildStdout>;

/// `tracefault mcp SCENARIO --stdio` after `initialize` (its stdout not read further).
fn mcp_stdio(scenario: &str) -> (Child, ChildStdin, Stdout) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin!("tracefault"))
        .current_dir(root())
        .args(["mcp", scenario, "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}});
    writeln!(stdin, "{init}").unwrap();
    let mut answer = String::new();
    out.read_line(&mut answer).unwrap();
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["result"]["serverInfo"]["name"], "tracefault");
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
    (child, stdin, out)
}

/// Item 16: a stdio client that sends and never reads its answers does not make the server
/// read on and keep every answer (50 000 requests took +230 MiB before); once the client reads,
/// every answer comes.
#[test]
#[allow(clippy::disallowed_methods)] // The client waits on the wall clock for the server to stop reading.
fn mcp_stdio_stops_reading_while_its_answers_go_unread() {
    const REQUESTS: u64 = 50_000;
    let (mut child, mut stdin, out) = mcp_stdio("tests/fixtures/wire/mcp-faults.toml");
    let pid = child.id();
    let before = status_kib(pid, "VmRSS");
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = sent.clone();
    let writer = std::thread::spawn(move || {
        let mut out = std::io::BufWriter::with_capacity(4096, &mut stdin);
        for id in 0..REQUESTS {
            let request = json!({"jsonrpc": "2.0", "id": id + 10, "method": "tools/list"});
            if writeln!(out, "{request}").is_err() {
                return;
            }
            counter.store(id + 1, std::sync::atomic::Ordering::Relaxed);
        }
        let _ = out.flush();
    });
    // Until the client has sent everything, or the server has read nothing for 2 s.
    let (mut last, mut since) = (0, Instant::now());
    while !writer.is_finished() && since.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(100));
        let now = sent.load(std::sync::atomic::Ordering::Relaxed);
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
    let grew = status_kib(pid, "VmHWM").saturating_sub(before);
    assert!(grew < 48 << 10, "unread answers took {grew} KiB");
    let lines = lines_of(out);
    let mut answered = 0;
    while answered < REQUESTS {
        match lines.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => answered += u64::from(line.contains("\"id\"")),
            Err(_) => break,
        }
    }
    assert_eq!(answered, REQUESTS, "every request answered once the client reads");
    writer.join().unwrap();
    let _ = child.kill();
    let _ = child.wait();
}

/// Item 19: over stdio and over `/mcp`, text that is not JSON gets -32700 with `id: null`,
/// wrong-typed params -32602 with the request's id (never -32601, never without the id), and
/// none of them uses a fault attempt.
#[test]
fn mcp_answers_bad_messages_with_the_specs_errors_and_ids() {
    let (mut child, mut stdin, out) = mcp_stdio("tests/fixtures/wire/mcp-faults.toml");
    let lines = lines_of(out);
    let mut ask = |line: &str| {
        writeln!(stdin, "{line}").unwrap();
        let answer = lines.recv_timeout(Duration::from_secs(5)).unwrap_or_else(|_| panic!("no answer to {line}"));
        serde_json::from_str::<Value>(&answer).unwrap()
    };
    let garbled = ask("{not json");
    assert_eq!((garbled["id"].clone(), garbled["error"]["code"].clone()), (Value::Null, json!(-32700)), "{garbled}");
    let params = ask(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"str"}"#);
    assert_eq!((params["id"].clone(), params["error"]["code"].clone()), (json!(7), json!(-32602)), "{params}");
    let args = ask(&search_call(8, json!("weather Paris")));
    assert_eq!((args["id"].clone(), args["error"]["code"].clone()), (json!(8), json!(-32602)), "{args}");
    let name = ask(r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":5}}"#);
    assert_eq!((name["id"].clone(), name["error"]["code"].clone()), (json!(9), json!(-32602)), "{name}");
    let served = ask(&search_call(10, json!({"query": "weather Paris"})));
    assert_eq!(served["error"]["data"]["status"], 503, "attempt 1's fault: {served}");
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0));

    let serve = Serve::start("tests/fixtures/wire/mcp-faults.toml", None);
    let session = mcp_session(&serve);
    let h = [JSON, ACCEPT, ("mcp-session-id", session.as_str()), VERSION];
    let (status, garbled) = mcp_post(&serve, &h, "{not json");
    assert_eq!((status, garbled["id"].clone(), garbled["error"]["code"].clone()), (400, Value::Null, json!(-32700)));
    let (_, params) = mcp_post(&serve, &h, r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"str"}"#);
    assert_eq!((params["id"].clone(), params["error"]["code"].clone()), (json!(7), json!(-32602)), "{params}");
    let (_, args) = mcp_post(&serve, &h, &search_call(8, json!("weather Paris")));
    assert_eq!((args["id"].clone(), args["error"]["code"].clone()), (json!(8), json!(-32602)), "{args}");
    let (status, _) = mcp_post(&serve, &h, &search_call(10, json!({"query": "weather Paris"})));
    assert_eq!(status, 503, "attempt 1's fault");
}

/// `serve` stopped by Ctrl-C the moment its banner is read (as a test fixture stops it) ends
/// with its closing line and status 0, never by the default signal action: the handlers are in
/// place before the banner is written.
#[test]
fn serve_stops_cleanly_on_ctrl_c_right_after_its_banner() {
    for _ in 0..10 {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin!("tracefault"))
            .current_dir(root())
            .args(["serve", "scenarios/01-worked-example.toml"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut first).unwrap();
        assert!(first.starts_with("export "), "{first}");
        rustix::process::kill_process(rustix::process::Pid::from_child(&child), rustix::process::Signal::INT).unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{text}");
        assert!(text.contains("served"), "{text}");
    }
}
