//! Soak: one `tracefault serve` process answers a million requests — tool calls (some failing),
//! fresh provider conversations, oversized bodies refused while they stream, unknown paths —
//! from four keep-alive clients, and a fifth client's MCP sessions (initialise, `tools/call`,
//! `tools/list`, malformed messages; half the sessions closed, half abandoned), and its resident
//! memory is read before and after. Memory must stay flat: nothing per request is kept. Then
//! 1 000 requests of 1 MiB each (tool calls and Responses requests, all different) must leave
//! its memory within 64 MiB of where it was.
//!
//! Last, `tracefault proxy` in front of that `serve` records 120 000 conversations' model calls:
//! its memory must stay flat after the first 20 000 (its trace's oldest events wait on disk), and
//! its trace must hold every one of them when it stops.
//!
//!     cargo bench --bench soak      (SOAK_REQUESTS=N, SOAK_BIG_REQUESTS=N, PROXY_SOAK_REQUESTS=N
//!                                    to change the counts)

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The value of `export VAR=…` in a starting server's banner, read up to its last line.
fn banner(child: &mut std::process::Child, var: &str) -> String {
    let mut value = String::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(v) =
            line.strip_prefix("export ").and_then(|l| l.strip_prefix(var)).and_then(|l| l.strip_prefix('='))
        {
            value = v.to_owned();
        }
        if line.starts_with("# tracefault is serving") {
            break;
        }
    }
    value
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let total: u64 = std::env::var("SOAK_REQUESTS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_tracefault"))
        .current_dir(&root)
        .args(["serve", "scenarios/08-realistic-mix.toml", "--time-scale", "0.001"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tracefault serve starts");
    let base = banner(&mut child, "TRACEFAULT_BASE_URL");
    let big = vec![b'x'; 9 << 20];
    let client = |n: u64, k: u64| {
        let agent = ureq::AgentBuilder::new().build();
        for i in 0..n {
            let r = match (i + k) % 10 {
                0..=5 => agent
                    .post(&format!("{base}/tools/search_flights"))
                    .send_string(r#"{"from":"JFK","to":"CDG","date":"2026-05-12"}"#),
                6 | 7 => agent
                    .post(&format!("{base}/v1/chat/completions"))
                    .send_string(r#"{"model":"m","messages":[{"role":"user","content":"book"}]}"#),
                8 => agent.get(&format!("{base}/nowhere/{i}")).call(),
                _ if i % 1000 == 0 => agent.post(&format!("{base}/tools/book_car")).send_bytes(&big),
                _ => agent.post(&format!("{base}/tools/book_car")).send_string(r#"{"pickup":"CDG","days":3}"#),
            };
            let _ = r.map(|r| r.into_string());
        }
    };
    let mcp_client = |n: u64| {
        let agent = ureq::AgentBuilder::new().build();
        let url = format!("{base}/mcp");
        let post = |session: Option<&str>, body: &str| {
            let mut req = agent
                .post(&url)
                .set("content-type", "application/json")
                .set("accept", "application/json, text/event-stream");
            if let Some(id) = session {
                req = req.set("mcp-session-id", id).set("mcp-protocol-version", "2025-06-18");
            }
            match req.send_string(body) {
                Ok(r) | Err(ureq::Error::Status(_, r)) => {
                    let id = r.header("mcp-session-id").map(str::to_owned);
                    let _ = r.into_string();
                    id
                }
                Err(_) => None,
            }
        };
        let mut session: Option<String> = None;
        for i in 0..n {
            if i % 200 == 0 {
                if let (Some(id), true) = (&session, i % 400 == 0) {
                    let _ = agent.delete(&url).set("mcp-session-id", id).call();
                }
                session = post(
                    None,
                    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"soak","version":"1"}}}"#,
                );
                post(session.as_deref(), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
                continue;
            }
            let body = match i % 50 {
                0 => "{not json".to_owned(),
                1 => format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/list"}}"#),
                _ => format!(
                    r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"search_flights","arguments":{{"from":"JFK","to":"CDG","date":"2026-05-12"}}}}}}"#
                ),
            };
            post(session.as_deref(), &body);
        }
    };
    let pid = child.id();
    std::thread::scope(|s| {
        s.spawn(|| client(total / 100, 0));
        s.spawn(|| mcp_client(total / 100));
    });
    let before = rss_kib(pid);
    std::thread::scope(|s| {
        for k in 0..4 {
            s.spawn(move || client(total / 4, k));
        }
        s.spawn(|| mcp_client(total / 4));
    });
    let after = rss_kib(pid);
    println!(
        "soak: {total} requests; serve RSS {before} KiB after warm-up, {after} KiB after ({:+} KiB)",
        after as i64 - before as i64
    );
    // Large bodies: 1 000 requests of 1 MiB, each different (tool calls, whose arguments the
    // mocks remember, and Responses requests, whose conversations are kept for
    // previous_response_id). The mocks keep digests and capped copies: RSS must stay within
    // 64 MiB of where it was.
    let big_requests: u64 = std::env::var("SOAK_BIG_REQUESTS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let agent = ureq::AgentBuilder::new().build();
    let start = rss_kib(pid);
    for i in 0..big_requests {
        let filler = format!("{i:08}").repeat((1 << 20) / 8);
        let r = if i % 2 == 0 {
            let body = format!(r#"{{"from":"JFK","to":"CDG","date":"2026-05-12","note":"{filler}"}}"#);
            agent.post(&format!("{base}/tools/search_flights")).send_string(&body)
        } else {
            let body = format!(r#"{{"model":"m","input":"{filler}"}}"#);
            agent.post(&format!("{base}/v1/responses")).send_string(&body)
        };
        let _ = r.map(|r| r.into_string());
    }
    let end = rss_kib(pid);
    let grew = end as i64 - start as i64;
    println!("soak: {big_requests} requests of 1 MiB; serve RSS {start} KiB before, {end} KiB after ({grew:+} KiB)");
    if grew > 64 << 10 {
        eprintln!("soak: serve memory grew by more than 64 MiB under large bodies");
        std::process::exit(1);
    }
    let proxy_grew = soak_proxy(&root, &base);
    let _ = child.kill();
    let _ = child.wait();
    if proxy_grew > 8 << 10 {
        eprintln!("soak: proxy memory grew by more than 8 MiB");
        std::process::exit(1);
    }
}

/// `tracefault proxy` in front of that `serve` (playing the real provider): fresh Chat
/// conversations from four keep-alive clients, each answered with the mock model's tool calls
/// and recorded in the proxy's trace. Its resident memory is read once the trace has reached
/// its in-memory bound (20 000 requests), and again after `PROXY_SOAK_REQUESTS` (100 000) more:
/// the trace's oldest events wait on disk, so it must stay flat (within 8 MiB). Then Ctrl-C: the
/// proxy must write its report set, every request's model call in its trace. Returns the growth
/// in KiB.
fn soak_proxy(root: &std::path::Path, upstream: &str) -> i64 {
    let total: u64 = std::env::var("PROXY_SOAK_REQUESTS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let warm_up = 20_000;
    let out = std::env::temp_dir().join(format!("tracefault-proxy-soak-{}", std::process::id()));
    let mut proxy = Command::new(env!("CARGO_BIN_EXE_tracefault"))
        .current_dir(root)
        .args(["proxy", "scenarios/08-realistic-mix.toml", "--time-scale", "0.001", "--upstream"])
        .arg(format!("openai={upstream}"))
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tracefault proxy starts");
    let base = banner(&mut proxy, "OPENAI_BASE_URL");
    let client = |n: u64, k: u64| {
        let agent = ureq::AgentBuilder::new().build();
        for i in 0..n {
            let body = format!(r#"{{"model":"m","messages":[{{"role":"user","content":"book {k} {i}"}}]}}"#);
            let _ = agent.post(&format!("{base}/chat/completions")).send_string(&body).map(|r| r.into_string());
        }
    };
    let pid = proxy.id();
    std::thread::scope(|s| {
        for k in 0..4 {
            s.spawn(move || client(warm_up / 4, k));
        }
    });
    let before = rss_kib(pid);
    std::thread::scope(|s| {
        for k in 0..4 {
            s.spawn(move || client(total / 4, 4 + k));
        }
    });
    let after = rss_kib(pid);
    let grew = after as i64 - before as i64;
    println!(
        "soak: {total} requests through proxy after {warm_up}; proxy RSS {before} KiB, then {after} KiB ({grew:+} KiB)"
    );
    let _ = Command::new("kill").args(["-INT", &pid.to_string()]).status();
    let _ = proxy.wait();
    let trace = std::fs::read_to_string(out.join("traces/agent-0.jsonl")).unwrap_or_default();
    let calls = trace.lines().filter(|l| l.contains(r#""type":"model_call""#)).count() as u64;
    let _ = std::fs::remove_dir_all(&out);
    println!("soak: the proxy's trace holds {calls} model calls of {} requests", warm_up + total);
    if calls != warm_up + total {
        eprintln!("soak: the proxy's trace lost model calls");
        std::process::exit(1);
    }
    grew
}
