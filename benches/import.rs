//! Import speed: native JSONL and a provider format (OpenAI Chat, the tau-bench file), in bytes
//! per second, on the tau-bench file in `tests/fixtures/corpus` — in memory, and streamed from a
//! large file of its conversations repeated (`TRACEFAULT_BENCH_COPIES`, default 25 ≈ 100 MB) —
//! and the JSONL session logs of agent tools (a Claude Code transcript, a Codex rollout), each
//! one long session made of a fixture's lines repeated with fresh ids (about 32 MB) — an OpenAI
//! Agents SDK JSONL export, its traces repeated with fresh ids to about 32 MB, and an OTLP/JSON
//! JSONL file (a request a line, as the OpenTelemetry Collector's file exporter writes), an
//! OpenInference fixture's traces repeated with fresh ids to about 32 MB.

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tracefault::trace::Trace;
use tracefault::trace::import::{ImportOptions, import_each, import_str};

/// The allocator the `tracefault` binary uses (src/main.rs), so the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn provider_input() -> (PathBuf, String) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("tests/fixtures/corpus/tau-bench_gpt-4o-airline.json");
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

fn import(c: &mut Criterion) {
    let (path, text) = provider_input();
    let traces = import_str(&text, &path, &ImportOptions::default()).unwrap().traces;
    // A large native file: every conversation, repeated to about 16 MB.
    let one: String = traces.iter().map(Trace::to_jsonl).collect();
    let native = one.repeat((16 << 20) / one.len() + 1);
    let mut group = c.benchmark_group("import");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(native.len() as u64));
    group.bench_function("native_jsonl", |b| {
        b.iter(|| black_box(Trace::parse_many(&native, Path::new("big.jsonl")).unwrap().len()))
    });
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("openai_chat_tau_bench", |b| {
        b.iter(|| black_box(import_str(&text, &path, &ImportOptions::default()).unwrap().traces.len()))
    });
    group.finish();
}

/// The tau-bench conversations repeated into one large JSON array, read from disk one
/// conversation at a time as `inspect` and `import` do.
fn streamed(c: &mut Criterion) {
    let (path, text) = provider_input();
    let copies: usize = std::env::var("TRACEFAULT_BENCH_COPIES").ok().and_then(|v| v.parse().ok()).unwrap_or(25);
    let body = text.trim().strip_prefix('[').and_then(|t| t.strip_suffix(']')).expect("a JSON array");
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join(path.file_name().unwrap());
    std::fs::write(&big, format!("[{}]", vec![body; copies].join(","))).unwrap();
    let bytes = std::fs::metadata(&big).unwrap().len();
    let mut group = c.benchmark_group("import_streamed");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function(format!("openai_chat_tau_bench_x{copies}"), |b| {
        b.iter(|| {
            let mut events = 0;
            import_each(&big, &ImportOptions::default(), &mut |t| {
                events += t.events.len();
                Ok(())
            })
            .unwrap();
            black_box(events)
        })
    });
    group.finish();
}

/// `lines` repeated until about `bytes`, copy `k`'s ids (`keys`) suffixed with `-k`, so that no
/// line repeats another; lines for which `keep_first` holds appear once, at the start.
fn repeated(lines: &[serde_json::Value], keys: &[&str], bytes: usize, keep_first: bool) -> String {
    fn suffix(v: &mut serde_json::Value, keys: &[&str], k: usize) {
        match v {
            serde_json::Value::Object(o) => {
                for (key, value) in o.iter_mut() {
                    match value {
                        serde_json::Value::String(s) if keys.contains(&key.as_str()) => *s = format!("{s}-{k}"),
                        other => suffix(other, keys, k),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| suffix(x, keys, k)),
            _ => {}
        }
    }
    let (head, body) = if keep_first { lines.split_at(1) } else { lines.split_at(0) };
    let mut out: String = head.iter().map(|l| l.to_string() + "\n").collect();
    let mut k = 0;
    while out.len() < bytes {
        for line in body {
            let mut l = line.clone();
            suffix(&mut l, keys, k);
            out.push_str(&l.to_string());
            out.push('\n');
        }
        k += 1;
    }
    out
}

/// The ids of an OTLP/JSON span, suffixed in each copy.
const OTLP_IDS: [&str; 3] = ["traceId", "spanId", "parentSpanId"];

/// An OTLP/JSON file as the Collector's file exporter writes it: a request a line, here one
/// for each resource's scope.
fn otlp_requests(path: &Path) -> Vec<serde_json::Value> {
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out = Vec::new();
    for r in doc["resourceSpans"].as_array().unwrap() {
        for scope in r["scopeSpans"].as_array().unwrap() {
            out.push(serde_json::json!({"resourceSpans": [{"resource": r["resource"], "scopeSpans": [scope]}]}));
        }
    }
    out
}

/// `inspect`'s reading of agent tools' JSONL session logs, from disk.
fn session_logs(c: &mut Criterion) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let read = |p: &str| -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(root.join(p)).unwrap();
        text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let dir = tempfile::tempdir().unwrap();
    let logs = [
        (
            "claude_code_transcript",
            repeated(
                &read("claude-code/pypi-fasthooks-0.1.4-main-transcript-first34.jsonl"),
                &["uuid", "parentUuid", "id", "tool_use_id", "requestId"],
                32 << 20,
                false,
            ),
        ),
        (
            "codex_rollout",
            repeated(&read("codex/codex-tools.jsonl"), &["call_id", "response_id", "id"], 32 << 20, true),
        ),
        (
            "agents_sdk_export",
            repeated(&read("agents-sdk/agents-sdk-spans.jsonl"), &["id", "trace_id", "parent_id"], 32 << 20, false),
        ),
        (
            "otel_otlp_jsonl",
            repeated(&otlp_requests(&root.join("otel/openinference-openai.otlp.json")), &OTLP_IDS, 32 << 20, false),
        ),
    ];
    let mut group = c.benchmark_group("import_session_logs");
    group.sample_size(10);
    for (name, text) in logs {
        let path = dir.path().join(format!("{name}.jsonl"));
        std::fs::write(&path, &text).unwrap();
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut events = 0;
                import_each(&path, &ImportOptions::default(), &mut |t| {
                    events += t.events.len();
                    Ok(())
                })
                .unwrap();
                black_box(events)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, import, streamed, session_logs);
criterion_main!(benches);
