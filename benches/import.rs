//! Import speed: native JSONL and a provider format (OpenAI Chat, the tau-bench file), in bytes
//! per second, on the tau-bench file in `tests/fixtures/corpus` — in memory, and streamed from a
//! large file of its conversations repeated (`TRACEFAULT_BENCH_COPIES`, default 25 ≈ 100 MB).

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

criterion_group!(benches, import, streamed);
criterion_main!(benches);
