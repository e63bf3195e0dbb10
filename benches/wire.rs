//! Wire-mode overhead: request latency of tracefault's mock tool and mock provider, and of live
//! mode's proxy in front of a provider (here the bare server, as the upstream), against a bare
//! response from the same HTTP stack (axum on hyper), on loopback, with one keep-alive client.
//! Prints p50/p99 from 3000 requests each (the aim: a mock adds less than 1 ms at p99), then
//! criterion's means.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tracefault::envelope::Encoding;
use tracefault::scenario::load::load_file;
use tracefault::wire::WireServer;
use tracefault::wire::upstream::Upstream;

struct Servers {
    _rt: tokio::runtime::Runtime,
    bare: String,
    mock: WireServer,
    /// Live mode, the bare server as every provider's upstream.
    live: WireServer,
}

fn servers() -> Servers {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let sc = load_file(&root.join("tests/fixtures/wire/plain.toml")).unwrap().scenario;
    let (bare, mock, live) = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let bare = format!("http://{}", listener.local_addr().unwrap());
        let app =
            axum::Router::new().fallback(|| async { ([("content-type", "application/json")], r#"{"temp_c":18}"#) });
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let upstream = Upstream::new(&[format!("openai={bare}")], None, None).unwrap();
        let addr = "127.0.0.1:0".parse().unwrap();
        let live = WireServer::start(sc.clone(), addr, 1.0, 1, Encoding::Flag, Some(Arc::new(upstream))).await.unwrap();
        (bare, WireServer::start(sc, addr, 1.0, 1, Encoding::Flag, None).await.unwrap(), live)
    });
    Servers { _rt: rt, bare, mock, live }
}

// A latency benchmark measures wall time; the ban on the wall clock is for the engine.
#[allow(clippy::disallowed_methods)]
fn once(agent: &ureq::Agent, url: &str, body: &serde_json::Value) -> Duration {
    let t = Instant::now();
    let _ = agent.post(url).send_json(body.clone()).map(|r| r.into_string());
    t.elapsed()
}

fn percentiles(mut d: Vec<Duration>) -> (f64, f64) {
    d.sort();
    let at = |q: f64| d[((q * d.len() as f64) as usize).min(d.len() - 1)].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

fn wire(c: &mut Criterion) {
    let s = servers();
    let agent = ureq::AgentBuilder::new().build();
    let args = json!({"query": "Paris"});
    let chat = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]});
    let cases = [
        ("bare axum", format!("{}/tools/search", s.bare), args.clone()),
        ("mock tool", format!("{}/tools/search", s.mock.uri()), args.clone()),
        ("mock provider (chat completions)", format!("{}/v1/chat/completions", s.mock.uri()), chat.clone()),
        ("live proxy to the bare upstream", format!("{}/v1/chat/completions", s.live.uri()), chat.clone()),
    ];
    let mut bare_p99 = 0.0;
    for (name, url, body) in &cases {
        for _ in 0..200 {
            once(&agent, url, body);
        }
        let (p50, p99) = percentiles((0..3000).map(|_| once(&agent, url, body)).collect());
        if *name == "bare axum" {
            bare_p99 = p99;
        }
        println!("{name:<34} p50 {p50:.3} ms  p99 {p99:.3} ms  (p99 over bare: {:+.3} ms)", p99 - bare_p99);
    }
    let mut group = c.benchmark_group("wire");
    for (name, url, body) in &cases {
        group.bench_function(*name, |b| b.iter(|| once(&agent, url, body)));
    }
    group.finish();
}

criterion_group!(benches, wire);
criterion_main!(benches);
