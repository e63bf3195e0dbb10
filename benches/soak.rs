//! Soak: one `tracefault serve` process answers a million requests — tool calls (some failing),
//! fresh provider conversations, oversized bodies refused while they stream, unknown paths —
//! from four keep-alive clients, and a fifth client's MCP sessions (initialise, `tools/call`,
//! `tools/list`, malformed messages; half the sessions closed, half abandoned), and its resident
//! memory is read before and after. Memory must stay flat: nothing per request is kept. Then
//! 1 000 requests of 1 MiB each (tool calls and Responses requests, all different) must leave
//! its memory within 64 MiB of where it was.
//!
//!     cargo bench --bench soak      (SOAK_REQUESTS=N, SOAK_BIG_REQUESTS=N to change the counts)

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
    let mut base = String::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(v) = line.strip_prefix("export TRACEFAULT_BASE_URL=") {
            base = v.to_owned();
        }
        if line.starts_with("# tracefault is serving") {
            break;
        }
    }
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
    let _ = child.kill();
    let _ = child.wait();
    let grew = end as i64 - start as i64;
    println!("soak: {big_requests} requests of 1 MiB; serve RSS {start} KiB before, {end} KiB after ({grew:+} KiB)");
    if grew > 64 << 10 {
        eprintln!("soak: serve memory grew by more than 64 MiB under large bodies");
        std::process::exit(1);
    }
}
