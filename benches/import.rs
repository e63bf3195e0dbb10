//! Import speed: native JSONL and a provider format (OpenAI Chat, the tau-bench file), in bytes
//! per second, on the tau-bench file in `tests/fixtures/corpus`.

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tracefault::trace::Trace;
use tracefault::trace::import::{ImportOptions, import_str};

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

criterion_group!(benches, import);
criterion_main!(benches);
