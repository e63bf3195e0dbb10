//! Soak: one `tracefault serve` process answers a million requests — tool calls (some failing),
//! fresh provider conversations, oversized bodies refused while they stream, unknown paths —
//! from four keep-alive clients, and its resident memory is read before and after. Memory must
//! stay flat: nothing per request is kept.
//!
//!     cargo bench --bench soak            (SOAK_REQUESTS=N to change the count)

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
    let pid = child.id();
    std::thread::scope(|s| {
        s.spawn(|| client(total / 100, 0));
    });
    let before = rss_kib(pid);
    std::thread::scope(|s| {
        for k in 0..4 {
            s.spawn(move || client(total / 4, k));
        }
    });
    let after = rss_kib(pid);
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "soak: {total} requests; serve RSS {before} KiB after warm-up, {after} KiB after ({:+} KiB)",
        after as i64 - before as i64
    );
}
