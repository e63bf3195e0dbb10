//! Criterion benches: the engine's inner loop (one run, envelope serialization on), fleets of
//! 1 000 and 10 000 agents contending for one tool, the serializers alone, and a whole-suite run
//! as `tracefault run --jobs 1` does it.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tracefault::engine::run::{Workspace, simulate};
use tracefault::envelope::render::{Body, Renderer};
use tracefault::envelope::{Encoding, ErrorKind, ToolError};
use tracefault::fault::Fault;
use tracefault::metrics::run::RunMetrics;
use tracefault::provider::Format;
use tracefault::scenario::load::{load_file, load_str, load_suite};
use tracefault::suite::{RunOptions, run_suite};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Simulated calls in runs 0..n of every strategy: the unit of throughput.
fn calls_in(sc: &tracefault::scenario::Scenario, runs: u64) -> u64 {
    let mut ws = Workspace::default();
    let mut m = RunMetrics::default();
    let mut calls = 0;
    for run in 0..runs {
        for s in &sc.strategies {
            m.reset(sc.faults.rules.len());
            simulate(sc, s, run, sc.seed, &mut ws, &mut m);
            calls += m.calls();
        }
    }
    calls
}

fn inner_loop(c: &mut Criterion) {
    let mut group = c.benchmark_group("inner_loop");
    for name in ["01-worked-example.toml", "08-realistic-mix.toml", "02-ambiguous-loop.toml"] {
        let sc = load_file(&root().join("scenarios").join(name)).unwrap();
        const RUNS: u64 = 100;
        group.throughput(Throughput::Elements(calls_in(&sc, RUNS)));
        group.bench_function(name, |b| {
            let mut ws = Workspace::default();
            let mut m = RunMetrics::default();
            b.iter(|| {
                for run in 0..RUNS {
                    for s in &sc.strategies {
                        m.reset(sc.faults.rules.len());
                        black_box(simulate(&sc, s, run, sc.seed, &mut ws, &mut m));
                    }
                }
            });
        });
    }
    group.finish();
}

/// A fleet that arrives at 200 agents a second and contends for one search tool: 50 requests a
/// second (burst 20), 40 in flight at most (the rest queue), |Normal(80, 20)| ms a call, a 503
/// outage of 5 s, and 5% of calls failing at random.
fn fleet_scenario(agents: u32) -> tracefault::scenario::Loaded {
    let src = format!(
        r#"name = "fleet-bench"
seed = 9
runs = 1
strategies = ["error-string", "five-field", "five-field-guarded"]
[fleet]
agents = {agents}
start = {{ poisson_per_s = 200 }}
[task]
[[task.steps]]
tool = "search"
args = {{ q = "flights" }}
[[task.steps]]
tool = "search"
args = {{ q = "hotels" }}
[[task.steps]]
tool = "book"
[tools.search]
concurrency = 40
queue = true
rate = {{ per_s = 50, burst = 20 }}
service_ms = {{ dist = "normal", mean = 80, sd = 20 }}
[[faults]]
target = "search"
window_ms = [2000, 7000]
http = 503
[[faults]]
target = "*"
probability = 0.05
http = 503
"#
    );
    load_str(&src, std::path::Path::new("fleet-bench.toml")).unwrap()
}

fn fleet(c: &mut Criterion) {
    let mut group = c.benchmark_group("fleet");
    group.sample_size(10);
    for agents in [1_000, 10_000] {
        let sc = fleet_scenario(agents);
        group.throughput(Throughput::Elements(calls_in(&sc, 1)));
        group.bench_function(format!("{agents}_agents"), |b| {
            let mut ws = Workspace::default();
            let mut m = RunMetrics::default();
            b.iter(|| {
                for s in &sc.strategies {
                    m.reset(sc.faults.rules.len());
                    black_box(simulate(&sc, s, 0, sc.seed, &mut ws, &mut m));
                }
            });
        });
    }
    group.finish();
}

fn render(c: &mut Criterion) {
    let fault = Fault::Http {
        status: 400,
        retry_after_ms: None,
        param: Some("query".into()),
        message: Some("query must name a city".into()),
    };
    let err = ToolError {
        kind: ErrorKind::Fault(&fault),
        class: fault.class(),
        tool: "search",
        attempts: 3,
        retry_after_ms: None,
        body: r#"{"city":"Paris","temp_c":18}"#,
        idempotency_key: None,
    };
    let mut group = c.benchmark_group("render");
    group.throughput(Throughput::Elements((Format::ALL.len() * Encoding::ALL.len()) as u64));
    group.bench_function("every_format_and_encoding", |b| {
        let mut r = Renderer::default();
        b.iter(|| {
            for f in Format::ALL {
                for e in Encoding::ALL {
                    black_box(r.render(f, 42, "search", Body::Error { err, encoding: e }).len());
                }
            }
        });
    });
    group.finish();
}

fn whole_suite(c: &mut Criterion) {
    let mut suite = load_suite(&[root().join("scenarios")]).unwrap();
    let opts = RunOptions { jobs: 1, runs: Some(200), ..RunOptions::default() };
    tracefault::suite::apply_overrides(&mut suite, &opts).unwrap();
    let calls: u64 = suite.iter().map(|sc| calls_in(sc, 200)).sum();
    let mut group = c.benchmark_group("suite");
    group.throughput(Throughput::Elements(calls));
    group.sample_size(10);
    group.bench_function("bundled_suite_200_runs_jobs_1", |b| {
        b.iter(|| {
            let mut sink = std::io::sink();
            black_box(run_suite(&suite, &opts, &mut sink, true, &|_| {}).unwrap());
        });
    });
    group.finish();
}

criterion_group!(benches, inner_loop, fleet, render, whole_suite);
criterion_main!(benches);
