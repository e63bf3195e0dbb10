//! Properties over random scenarios, checked on the engine's own events: every tool call gets
//! exactly one result; attempts never exceed the cap; non-retryable failures are never retried
//! by the orchestrator; the breaker matches an oracle; all strategies meet the same faults.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proptest::prelude::*;
use tracefault::engine::breaker::{Admit, Breaker, BreakerConfig, BreakerMode};
use tracefault::engine::events::{By, Event, Observer};
use tracefault::engine::strategy::Routing;
use tracefault::fault::ErrorClass;
use tracefault::scenario::Loaded as Scenario;
use tracefault::scenario::load::load_str;
use tracefault::suite::run_one;

const TOOLS: [&str; 3] = ["alpha", "beta", "gamma"];
const STATUSES: [u16; 15] = [400, 401, 402, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 504, 529];
const OTHER_FAULTS: [&str; 5] = ["timeout", "reset", "ambiguous", "truncated_json", "code_fenced_json"];

fn trigger() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(1u32..8, 1..4).prop_map(|at| format!("at = {at:?}")),
        (0.05f64..1.0).prop_map(|p| format!("probability = {p}")),
        (0u64..20_000, 1u64..60_000).prop_map(|(a, d)| format!("window_ms = [{a}, {}]", a + d)),
        (0u32..4).prop_map(|n| format!("after_successes = {n}")),
        (0.1f64..3.0, 1.0f64..4.0).prop_map(|(r, b)| format!("rate_limit = {{ per_s = {r}, burst = {b} }}")),
    ]
}

fn fault(provider: bool) -> impl Strategy<Value = String> {
    let http = (0..STATUSES.len(), prop::option::of(0u32..5)).prop_map(|(i, ra)| {
        let s = STATUSES[i];
        match ra {
            Some(r) if s == 429 || s == 503 => format!("http = {s}\nretry_after_s = {r}"),
            _ => format!("http = {s}"),
        }
    });
    let other = (0..OTHER_FAULTS.len()).prop_map(move |i| {
        let f = if provider { OTHER_FAULTS[i % 2] } else { OTHER_FAULTS[i] };
        if f == "timeout" { "fault = \"timeout\"\nafter_ms = 5000".to_owned() } else { format!("fault = \"{f}\"") }
    });
    prop_oneof![3 => http, 1 => other]
}

fn rule() -> impl Strategy<Value = String> {
    (0usize..5).prop_flat_map(|t| {
        let target = match t {
            0..=2 => TOOLS[t].to_owned(),
            3 => "*".to_owned(),
            _ => "provider".to_owned(),
        };
        (trigger(), fault(t == 4)).prop_map(move |(tr, f)| format!("[[faults]]\ntarget = \"{target}\"\n{tr}\n{f}\n"))
    })
}

/// A random scenario: 1–4 steps of 1–3 parallel calls, 1–4 fault rules, random policy, every
/// preset plus one random custom strategy.
fn scenario() -> impl Strategy<Value = String> {
    let steps = prop::collection::vec(prop::collection::vec((0usize..3, 0u32..3), 1..4), 1..5);
    let rules = prop::collection::vec(rule(), 1..5);
    let custom = (0usize..5, any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>());
    let policy = (1u32..6, 0usize..7, any::<bool>(), 1u32..5, 1u32..4, 5u32..40);
    let budgets = (300u64..8000, 500u64..200_000);
    (steps, rules, custom, policy, budgets, any::<u64>()).prop_map(|(steps, rules, custom, policy, budget, seed)| {
        let (max_tokens, max_virtual_ms) = budget;
        let (max_attempts, backoff, honor, failures, k, max_steps) = policy;
        let backoffs = ["none", "constant", "exponential", "full-jitter", "equal-jitter", "decorrelated", "sdk"];
        let encodings = ["raw", "prefix", "flag", "object", "envelope"];
        let (enc, orch, term, breaker, guard, budgets) = custom;
        let mut s = format!(
            "name = \"prop\"\nseed = {seed}\nruns = 1\nprovider = \"anthropic\"\n\
             [strategies.raw-exception]\n[strategies.error-string]\n[strategies.is-error-flag]\n\
             [strategies.response-object]\n[strategies.five-field]\n[strategies.five-field-guarded]\n\
             [strategies.custom]\nencoding = \"{}\"\nrouting = \"{}\"\npartials = \"{}\"\nbreaker = {breaker}\nloop_guard = {guard}\nbudgets = {budgets}\n\
             [policy]\nmax_steps = {max_steps}\nmax_tokens = {max_tokens}\nmax_virtual_ms = {max_virtual_ms}\n\
             retry = {{ max_attempts = {max_attempts}, backoff = \"{}\", base_ms = 100, cap_ms = 4000, honor_retry_after = {honor} }}\n\
             breaker = {{ failures = {failures}, open_ms = 10000 }}\nloop_guard = {{ k = {k} }}\n[task]\n",
            encodings[enc],
            if orch { "orchestrator" } else { "model" },
            if term { "terminal" } else { "ambiguous" },
            backoffs[backoff],
        );
        // A first parallel step with every tool, so every fault target is a tool of the task.
        s.push_str("[[task.steps]]\ncalls = [{ tool = \"alpha\" }, { tool = \"beta\" }, { tool = \"gamma\" }]\n");
        for calls in &steps {
            s.push_str("[[task.steps]]\ncalls = [\n");
            for (tool, arg) in calls {
                s.push_str(&format!("  {{ tool = \"{}\", args = {{ n = {arg} }}, result = {{ ok = {arg} }} }},\n", TOOLS[*tool]));
            }
            s.push_str("]\n");
        }
        for r in rules {
            s.push_str(&r);
        }
        s
    })
}

/// Watches one run's events and records every broken invariant.
#[derive(Default)]
struct Invariants {
    max_attempts: u32,
    pending: BTreeSet<u32>,
    answered: BTreeSet<u32>,
    attempts: BTreeMap<u32, (u32, Option<ErrorClass>)>,
    broken: Vec<String>,
}

impl Observer for Invariants {
    fn event(&mut self, e: &Event<'_>) {
        match *e {
            Event::ModelCall { .. } => {
                if !self.pending.is_empty() {
                    self.broken.push(format!("model called with unanswered calls {:?}", self.pending));
                }
                self.pending.clear();
            }
            Event::ToolCall { call_id, .. } => {
                self.pending.insert(call_id);
            }
            Event::Attempt { call_id, by, class, .. } => {
                let entry = self.attempts.entry(call_id).or_insert((0, None));
                entry.0 += 1;
                if entry.0 > self.max_attempts {
                    self.broken
                        .push(format!("call {call_id}: {} attempts > max_attempts {}", entry.0, self.max_attempts));
                }
                if by == By::Orchestrator && entry.1.is_some_and(|c| !c.retryable()) {
                    self.broken.push(format!("call {call_id}: orchestrator retried a non-retryable {:?}", entry.1));
                }
                entry.1 = class;
            }
            Event::ToolResult { call_id, .. } => {
                if !self.pending.remove(&call_id) {
                    self.broken.push(format!("result for call {call_id} that is not awaiting one"));
                }
                if !self.answered.insert(call_id) {
                    self.broken.push(format!("call {call_id} answered twice"));
                }
            }
            Event::ProtocolViolation { call_id } => self.broken.push(format!("protocol violation on {call_id}")),
            Event::Rejected { .. }
            | Event::BreakerTrip { .. }
            | Event::End { .. }
            | Event::Done { .. }
            | Event::Decision { .. } => {}
        }
    }
}

fn load(src: &str) -> Scenario {
    load_str(src, Path::new("prop.toml")).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn engine_invariants_hold(src in scenario(), run in 0u64..50) {
        let sc = load(&src);
        for (i, s) in sc.strategies.iter().enumerate() {
            let cap = match s.routing {
                Routing::Orchestrator => sc.policy.retry.max_attempts,
                Routing::Model => 1,
            };
            let mut inv = Invariants { max_attempts: cap, ..Invariants::default() };
            let m = run_one(&sc, i, run, &mut inv);
            prop_assert!(inv.broken.is_empty(), "{}: {:?}\n{}", s.name, inv.broken, src);
            prop_assert_eq!(m.protocol_violations, 0);
            prop_assert!(m.model_calls <= u64::from(sc.policy.max_steps) * u64::from(sc.policy.retry.max_attempts));
            // A strategy with budgets never exceeds them (design 3.5; checked before every
            // model call and orchestrator retry, with a deadline for calls in flight).
            if s.budgets {
                prop_assert!(m.tokens <= sc.policy.max_tokens.unwrap(), "{}: {} tokens\n{}", s.name, m.tokens, src);
                prop_assert!(m.virtual_ms <= sc.policy.max_virtual_ms.unwrap(), "{}: {} ms\n{}", s.name, m.virtual_ms, src);
            }
        }
    }

    /// Common random numbers: with history-free triggers and faults without memory, the n-th
    /// attempt on a tool meets the same rule under every strategy.
    #[test]
    fn every_strategy_meets_the_same_fault_at_the_same_attempt(
        seed in any::<u64>(),
        run in 0u64..1000,
        rules in prop::collection::vec((0usize..3, prop_oneof![
            prop::collection::vec(1u32..6, 1..3).prop_map(|a| format!("at = {a:?}")),
            (0.05f64..0.6).prop_map(|p| format!("probability = {p}")),
        ], prop_oneof![Just("http = 503"), Just("http = 429"), Just("fault = \"reset\""), Just("http = 502")]), 1..4),
    ) {
        let mut src = format!("name = \"crn\"\nseed = {seed}\nruns = 1\n[task]\n");
        for t in TOOLS {
            src.push_str(&format!("[[task.steps]]\ntool = \"{t}\"\n"));
        }
        for (t, trig, f) in &rules {
            src.push_str(&format!("[[faults]]\ntarget = \"{}\"\n{trig}\n{f}\n", TOOLS[*t]));
        }
        let sc = load(&src);
        struct Seen(BTreeMap<(u16, u32), Option<u16>>);
        impl Observer for Seen {
            fn event(&mut self, e: &Event<'_>) {
                if let Event::Attempt { tool, attempt, rule, .. } = *e {
                    self.0.insert((tool, attempt), rule);
                }
            }
        }
        let maps: Vec<_> = (0..sc.strategies.len()).map(|i| {
            let mut seen = Seen(BTreeMap::new());
            run_one(&sc, i, run, &mut seen);
            seen.0
        }).collect();
        for a in &maps {
            for b in &maps {
                for (k, r) in a {
                    if let Some(r2) = b.get(k) {
                        prop_assert_eq!(r, r2, "attempt {:?}", k);
                    }
                }
            }
        }
    }

    /// The metrics skip rendering and read results from a cache kept across a scenario's runs;
    /// an observer that reads content makes the engine render and read every result. Both must
    /// give the same numbers.
    #[test]
    fn cached_readings_give_the_numbers_of_rendering_every_result(src in scenario()) {
        use tracefault::engine::run::{Workspace, simulate};
        use tracefault::metrics::run::RunMetrics;
        let sc = load(&src);
        let mut ws = Workspace::default();
        ws.caching_for(&sc, |ws| {
            for run in 0..12 {
                for (i, s) in sc.strategies.iter().enumerate() {
                    let mut cached = RunMetrics::default();
                    cached.reset(sc.faults.rules.len());
                    simulate(&sc, s, run, sc.seed, ws, &mut cached);
                    let rendered = run_one(&sc, i, run, &mut Invariants::default());
                    prop_assert_eq!(&cached, &rendered, "{} run {}\n{}", s.name, run, src);
                }
            }
            Ok(())
        })?;
    }

    /// The breaker against a small oracle state machine (sequential calls, consecutive mode).
    #[test]
    fn breaker_matches_oracle(
        failures in 1u32..5,
        open_ms in 1u64..60_000,
        close_after in 1u32..4,
        calls in prop::collection::vec((0u64..40_000, any::<bool>()), 1..80),
    ) {
        let cfg = BreakerConfig { mode: BreakerMode::Consecutive { failures }, open_ms, probes: 1, close_after, ..BreakerConfig::default() };
        let mut b = Breaker::default();
        // Oracle: Closed(count) | Open(until) | HalfOpen(successes).
        #[derive(Debug, Clone, Copy, PartialEq)]
        enum O { Closed(u32), Open(u64), Half(u32) }
        let mut o = O::Closed(0);
        let (mut now, mut trips, mut oracle_trips) = (0u64, 0u32, 0u32);
        for (dt, fail) in calls {
            now += dt;
            if let O::Open(until) = o && now >= until {
                o = O::Half(0);
            }
            let oracle_admits = !matches!(o, O::Open(_));
            let admit = b.admit(&cfg, now);
            prop_assert_eq!(oracle_admits, !matches!(admit, Admit::Reject { .. }), "at {} oracle {:?}", now, o);
            if !oracle_admits {
                continue;
            }
            o = match (o, fail) {
                (O::Closed(n), true) if n + 1 >= failures => { oracle_trips += 1; O::Open(now + open_ms) }
                (O::Closed(n), true) => O::Closed(n + 1),
                (O::Closed(_), false) => O::Closed(0),
                (O::Half(_), true) => O::Open(now + open_ms),
                (O::Half(s), false) if s + 1 >= close_after => O::Closed(0),
                (O::Half(s), false) => O::Half(s + 1),
                (O::Open(_), _) => unreachable!(),
            };
            if b.record(&cfg, now, fail, admit == Admit::Probe) {
                trips += 1;
            }
        }
        prop_assert_eq!(trips, oracle_trips);
    }

    /// The breaker in rate mode against an oracle that recomputes the failure ratio from the
    /// whole history of calls since the breaker last closed (the code keeps a sliding deque),
    /// with several probes in flight while half-open.
    #[test]
    fn rate_breaker_matches_oracle(
        window_ms in 1u64..20_000,
        min_calls in 1u32..6,
        ratio in 0.1f64..1.0,
        open_ms in 1u64..30_000,
        probes in 1u32..3,
        close_after in 1u32..4,
        calls in prop::collection::vec((0u64..6_000, any::<bool>()), 1..120),
    ) {
        let cfg = BreakerConfig { mode: BreakerMode::Rate { window_ms, min_calls, failure_ratio: ratio }, open_ms, probes, close_after, ..BreakerConfig::default() };
        let mut b = Breaker::default();
        #[derive(Debug, Clone, Copy, PartialEq)]
        enum O { Closed, Open(u64), Half { in_flight: u32, ok: u32 } }
        let mut o = O::Closed;
        // Calls recorded while closed since the last close: (time, failed).
        let mut history: Vec<(u64, bool)> = Vec::new();
        let (mut now, mut trips, mut oracle_trips) = (0u64, 0u32, 0u32);
        for (dt, fail) in calls {
            now += dt;
            if let O::Open(until) = o && now >= until {
                o = O::Half { in_flight: 0, ok: 0 };
            }
            let oracle = match o {
                O::Closed => Some(false),
                O::Half { in_flight, ok } if in_flight < probes => { o = O::Half { in_flight: in_flight + 1, ok }; Some(true) }
                _ => None,
            };
            let admit = b.admit(&cfg, now);
            prop_assert_eq!(oracle.is_some(), !matches!(admit, Admit::Reject { .. }), "at {} oracle {:?}", now, o);
            let Some(probe) = oracle else { continue };
            prop_assert_eq!(probe, admit == Admit::Probe);
            o = match o {
                O::Closed => {
                    history.push((now, fail));
                    let recent: Vec<bool> = history.iter().filter(|(t, _)| t + window_ms > now).map(|h| h.1).collect();
                    let fails = recent.iter().filter(|f| **f).count() as f64;
                    if recent.len() as u32 >= min_calls && fails / recent.len() as f64 >= ratio {
                        oracle_trips += 1;
                        history.clear();
                        O::Open(now + open_ms)
                    } else {
                        O::Closed
                    }
                }
                O::Half { .. } if fail => O::Open(now + open_ms),
                O::Half { ok, .. } if ok + 1 >= close_after => { history.clear(); O::Closed }
                O::Half { in_flight, ok } => O::Half { in_flight: in_flight - 1, ok: ok + 1 },
                O::Open(_) => unreachable!(),
            };
            if b.record(&cfg, now, fail, probe) {
                trips += 1;
            }
        }
        prop_assert_eq!(trips, oracle_trips);
    }

    /// The simulated model reads structure, not words: whatever a failure's message says
    /// (codes, "retryable", "error:", JSON-looking text, "complete"), every encoding in every
    /// format reads as the same signal; and a partial result's data never decides whether it
    /// says more may be available.
    #[test]
    fn words_inside_messages_and_data_never_change_the_reading(
        words in prop::collection::vec(prop::sample::select(vec![
            "code", "retryable", "\"code\":\"X\"", "\"retryable\":true", "error", "ERROR:", "Error -",
            "{\"error\":1}", "is_error", "true", "complete", "\"complete\":true", "more may be available",
            "note", "{", "}", "\"", "\\", "\n",
        ]), 0..10),
        status in prop::sample::select(vec![400u16, 422]),
    ) {
        use tracefault::envelope::read::{Signal, read_message};
        use tracefault::envelope::render::{Body, Renderer};
        use tracefault::envelope::{Encoding, ErrorKind, Format, ToolError};
        use tracefault::fault::Fault;
        let message = words.join(" ");
        let fault = Fault::Http { status, retry_after_ms: None, param: Some("q".into()), message: Some(message.clone()) };
        let mut r = Renderer::default();
        for format in Format::ALL {
            for encoding in Encoding::ALL {
                let err = ToolError { kind: ErrorKind::Fault(&fault), class: fault.class(), tool: "s", attempts: 1, retry_after_ms: None, body: "{}" };
                let expected = match encoding {
                    Encoding::Envelope => Signal::Envelope,
                    Encoding::Flag if format == Format::Anthropic => Signal::Flag,
                    Encoding::Flag => Signal::Unmarked,
                    Encoding::Object => Signal::Object,
                    Encoding::Prefix => Signal::Prefix,
                    Encoding::Raw => Signal::Raw,
                    Encoding::JsonRpcError => Signal::Unmarked,
                };
                let bytes = r.render(format, 1, "s", Body::Error { err, encoding }).to_owned();
                prop_assert_eq!(read_message(format, &bytes).signal, expected, "{}", bytes);
            }
            let data = serde_json::to_string(&serde_json::json!({ "text": message })).unwrap();
            for (stated_complete, cursor) in [(false, false), (false, true), (true, false), (true, true)] {
                let bytes = r.render(format, 1, "s", Body::Partial { json: &data, stated_complete, cursor }).to_owned();
                prop_assert_eq!(read_message(format, &bytes).more_available, !stated_complete, "{}", bytes);
            }
        }
    }

    /// Delays stay within their formulas' bounds; a honoured retry-after is a floor.
    #[test]
    fn backoff_delays_are_bounded(retry in 0u32..12, prev in 0u64..20_000, u in 0.0f64..1.0, ra in prop::option::of(0u64..90_000), kind in 0usize..7) {
        use tracefault::engine::retry::{Backoff, RetryPolicy};
        let b = Backoff::parse(Backoff::NAMES[kind]).unwrap();
        let p = RetryPolicy { backoff: b, ..RetryPolicy::default() };
        let d = p.delay_ms(retry, prev, u, ra);
        let ceiling = if b == Backoff::Sdk { 8000 } else { p.cap_ms };
        prop_assert!(d <= ceiling.max(ra.unwrap_or(0)), "{:?} {}", b, d);
        if let Some(ra) = ra { prop_assert!(d >= ra); }
    }
}

/// Arbitrary JSON (shaped like the formats, so the importers get past detection).
fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{Value, json};
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z_ {}\":,\\[\\]]{0,12}".prop_map(Value::from),
        prop::sample::select(vec![
            "user",
            "assistant",
            "tool",
            "model",
            "function_call",
            "tool_use",
            "tool_result",
            "Error: x",
            "{}"
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let keys = prop::sample::select(vec![
            "role",
            "content",
            "tool_calls",
            "id",
            "function",
            "name",
            "arguments",
            "messages",
            "type",
            "input",
            "call_id",
            "output",
            "contents",
            "parts",
            "functionCall",
            "functionResponse",
            "response",
            "error",
            "is_error",
            "tool_use_id",
            "interactions",
            "request",
            "response",
            "resourceSpans",
            "traj",
            "choices",
        ]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((keys, inner), 0..5).prop_map(|kv| {
                let mut m = serde_json::Map::new();
                for (k, v) in kv {
                    m.insert(k.to_owned(), v);
                }
                Value::Object(m)
            }),
        ]
    })
    .prop_map(|v| json!(v))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Bad input gets an error, never a panic: every importer, every format, arbitrary JSON.
    #[test]
    fn importers_never_panic(v in arb_json(), format in 0usize..tracefault::trace::import::SourceFormat::NAMES.len()) {
        use tracefault::trace::import::{ImportOptions, SourceFormat, import_str};
        let f = SourceFormat::parse(SourceFormat::NAMES[format]).unwrap();
        let opts = ImportOptions { format: f, ..ImportOptions::default() };
        let text = v.to_string();
        if let Ok(imported) = import_str(&text, Path::new("x.json"), &opts) {
            for t in &imported.traces {
                // And whatever imports can be inspected, compiled and replayed as recorded.
                let _ = tracefault::trace::inspect::stats(t);
                let _ = tracefault::trace::compile::compile(t);
                let _ = tracefault::replay::replay_as_recorded(t.clone());
            }
        }
    }

    #[test]
    fn scenario_and_trace_parsers_never_panic(text in "[ -~\n]{0,200}") {
        let _ = load_str(&text, Path::new("x.toml"));
        let _ = load_str(&text, Path::new("x.json"));
        let _ = tracefault::trace::Trace::parse_many(&text, Path::new("x.jsonl"));
    }
}

/// Replaces the node reached by `path` (indices taken modulo each level's size) with `with`.
fn mutate(v: &mut serde_json::Value, path: &[usize], with: serde_json::Value) {
    use serde_json::Value;
    let Some((&step, rest)) = path.split_first() else {
        *v = with;
        return;
    };
    match v {
        Value::Array(a) if !a.is_empty() => {
            let n = a.len();
            mutate(&mut a[step % n], rest, with);
        }
        Value::Object(m) if !m.is_empty() => {
            let key = m.keys().nth(step % m.len()).cloned().expect("in range");
            mutate(m.get_mut(&key).expect("present"), rest, with);
        }
        other => *other = with,
    }
}

/// Small real traces of every format, parsed once.
fn corpus_values() -> &'static Vec<(String, serde_json::Value)> {
    static CORPUS: std::sync::OnceLock<Vec<(String, serde_json::Value)>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(|| {
        let dir = crate::root().join("traces");
        let mut out = Vec::new();
        for name in [
            "openai-chat_model-retry.cassette.yaml",
            "openai-responses_model-retry.cassette.yaml",
            "anthropic_tool-search.cassette.yaml",
            "gemini_model-retry.cassette.yaml",
            "otel_model-retry.otlp.json",
            "openai-chat_tau-bench-airline-13.json",
        ] {
            let text = std::fs::read_to_string(dir.join(name)).unwrap();
            let v: serde_json::Value = if name.ends_with(".yaml") {
                serde_norway::from_str(&text).unwrap()
            } else {
                serde_json::from_str(&text).unwrap()
            };
            out.push((name.to_owned(), v));
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Real traces with one node replaced at random: still an error or a trace, never a panic.
    #[test]
    fn mutated_corpus_traces_never_panic(
        which in 0usize..6,
        path in prop::collection::vec(any::<usize>(), 0..9),
        with in prop_oneof![
            Just(serde_json::Value::Null),
            Just(serde_json::json!(7)),
            Just(serde_json::json!("Error: x")),
            Just(serde_json::json!([])),
            Just(serde_json::json!({})),
            Just(serde_json::json!([{"role": "tool"}])),
        ],
    ) {
        use tracefault::trace::import::{ImportOptions, import_str};
        let (name, v) = &corpus_values()[which];
        let mut v = v.clone();
        mutate(&mut v, &path, with);
        let text = v.to_string();
        let file = if name.ends_with(".yaml") { "x.json" } else { name.as_str() };
        if let Ok(imported) = import_str(&text, Path::new(file), &ImportOptions::default()) {
            for t in &imported.traces {
                let _ = tracefault::trace::compile::compile(t);
                let _ = tracefault::replay::replay_as_recorded(t.clone());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// A file of wrapped conversations read one element at a time (`import_path`) gives what
    /// reading it whole (`import_str`) gives, whatever the conversations hold: the same traces
    /// when both read it, an error from both when one fails.
    #[test]
    fn streamed_import_equals_whole_file_import(
        conversations in prop::collection::vec(
            (0usize..3, prop::collection::vec(any::<usize>(), 0..5), prop_oneof![
                Just(serde_json::Value::Null),
                Just(serde_json::json!("Error: x ] } \" [")),
                Just(serde_json::json!([])),
                Just(serde_json::json!({"role": "tool", "content": "a\nb"})),
                arb_json(),
            ], any::<bool>()),
            1..4,
        ),
        jsonl in any::<bool>(),
        pretty in any::<bool>(),
    ) {
        use tracefault::trace::import::{ImportOptions, import_path, import_str};
        let (_, tau) = &corpus_values()[5];
        let keys = ["traj", "conversation", "trajectory"];
        let elements: Vec<serde_json::Value> = conversations
            .into_iter()
            .map(|(key, path, with, mutated)| {
                let mut messages = tau.clone();
                if mutated {
                    mutate(&mut messages, &path, with);
                }
                serde_json::json!({ keys[key]: messages, "reward": 1 })
            })
            .collect();
        let text = if jsonl {
            elements.iter().map(|e| e.to_string() + "\n").collect::<String>()
        } else if pretty {
            serde_json::to_string_pretty(&elements).unwrap()
        } else {
            serde_json::Value::Array(elements).to_string()
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(if jsonl { "c.jsonl" } else { "c.json" });
        std::fs::write(&path, &text).unwrap();
        let opts = ImportOptions::default();
        let streamed = import_path(&path, &opts);
        let whole = import_str(&text, &path, &opts);
        match (streamed, whole) {
            (Ok(s), Ok(w)) => {
                prop_assert_eq!(s.format, w.format);
                prop_assert_eq!(s.traces, w.traces);
            }
            (Err(_), Err(_)) => {}
            (s, w) => prop_assert!(false, "streamed {:?} but whole-file {:?}", s.map(|i| i.traces.len()), w.map(|i| i.traces.len())),
        }
    }
}

/// A random fleet: 2–24 agents under one start rule, on a task over the three tools where
/// `alpha` has random limits (concurrency, queue, rate, service time, write conflicts), with
/// random fault rules on top. Returns the source, alpha's concurrency and its rate.
fn fleet_scenario() -> impl Strategy<Value = (String, Option<u32>, Option<(f64, u32)>)> {
    let start = prop_oneof![
        Just("\"together\"".to_owned()),
        (0u64..300).prop_map(|ms| format!("{{ every_ms = {ms} }}")),
        (0.5f64..80.0).prop_map(|r| format!("{{ poisson_per_s = {r} }}")),
    ];
    let service = prop_oneof![
        (0u64..60).prop_map(|ms| ms.to_string()),
        (0u64..30, 0u64..30).prop_map(|(a, b)| format!("{{ dist = \"uniform\", min = {a}, max = {} }}", a + b)),
        (1.0f64..40.0, 0.0f64..10.0).prop_map(|(m, sd)| format!("{{ dist = \"normal\", mean = {m}, sd = {sd} }}")),
        (1.0f64..40.0, 0.0f64..1.5).prop_map(|(m, s)| format!("{{ dist = \"lognormal\", median = {m}, sigma = {s} }}")),
    ];
    let limits =
        (prop::option::of(1u32..5), any::<bool>(), prop::option::of((1u32..400, 1u32..5)), service, any::<bool>());
    let rules = prop::collection::vec(rule(), 0..3);
    (2u32..25, start, limits, rules, any::<u64>(), (1u32..6, 50u64..3000)).prop_map(|(agents, start, limits, rules, seed, policy)| {
        let (attempts, max_virtual_ms) = policy;
        let (concurrency, queue, rate, service, occ) = limits;
        let rate = rate.map(|(per_decis, burst)| (f64::from(per_decis) / 10.0, burst));
        let mut s = format!(
            "name = \"fleet\"\nseed = {seed}\nruns = 1\n\
             [strategies.five-field]\n[strategies.five-field-guarded]\n[strategies.error-string]\n\
             [strategies.budgeted]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\nbudgets = true\n\
             [strategies.retrying]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\n\
             [policy]\nmax_virtual_ms = {max_virtual_ms}\nretry = {{ max_attempts = {attempts}, backoff = \"full-jitter\", base_ms = 20, cap_ms = 400 }}\n\
             [fleet]\nagents = {agents}\nstart = {start}\n[tools.alpha]\nservice_ms = {service}\n"
        );
        if let Some((per_s, burst)) = rate {
            s.push_str(&format!("rate = {{ per_s = {per_s}, burst = {burst} }}\n"));
        }
        if occ {
            s.push_str("conflict = \"occ\"\n");
        }
        // The same concurrency at every tool (the peak in flight is the most at any one tool).
        if let Some(c) = concurrency {
            s.push_str(&format!("concurrency = {c}\nqueue = {queue}\n"));
            for t in ["beta", "gamma"] {
                s.push_str(&format!("[tools.{t}]\nconcurrency = {c}\nqueue = {queue}\n"));
            }
        }
        s.push_str("[task]\n[[task.steps]]\ncalls = [{ tool = \"alpha\" }, { tool = \"beta\" }, { tool = \"gamma\" }]\n");
        s.push_str("[[task.steps]]\ncalls = [{ tool = \"alpha\", args = { n = 2 } }, { tool = \"alpha\", args = { n = 3 } }]\n");
        for r in rules {
            s.push_str(&r);
        }
        (s, concurrency, rate)
    })
}

/// Every agent's events through its own [`Invariants`]; the times of the attempts the shared
/// rate limit let through at `tool`.
struct FleetWatch {
    agents: Vec<Invariants>,
    agent: usize,
    tool: u16,
    passed_rate: Vec<u64>,
}

impl Observer for FleetWatch {
    fn agent(&mut self, agent: u32) {
        self.agent = agent as usize;
    }

    fn event(&mut self, e: &Event<'_>) {
        if let Event::Attempt { tool, t_ms, load, status, .. } = *e
            && tool == self.tool
            && !(load && status == Some(429))
        {
            self.passed_rate.push(t_ms);
        }
        self.agents[self.agent].event(e);
    }
}

/// Each agent's events, in order, as text.
#[derive(Default)]
struct PerAgent(Vec<Vec<String>>, usize);

impl Observer for PerAgent {
    fn agent(&mut self, agent: u32) {
        self.1 = agent as usize;
    }

    fn event(&mut self, e: &Event<'_>) {
        if matches!(e, Event::Done { .. }) {
            return; // the run's, not an agent's
        }
        if self.0.len() <= self.1 {
            self.0.resize(self.1 + 1, Vec::new());
        }
        self.0[self.1].push(format!("{e:?}"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    /// In a fleet every agent keeps the engine's invariants; no tool ever serves more calls at
    /// once than its concurrency; the shared bucket never lets more than `burst + per_s × t`
    /// through by time t; every agent ends.
    #[test]
    fn a_fleet_keeps_every_agent_and_every_limit(
        (src, concurrency, rate) in fleet_scenario(),
        run in 0u64..20,
    ) {
        let sc = load(&src);
        let alpha = sc.task.tools.iter().position(|t| t == "alpha").unwrap() as u16;
        for (i, s) in sc.strategies.iter().enumerate() {
            let cap = match s.routing {
                Routing::Orchestrator => sc.policy.retry.max_attempts,
                Routing::Model => 1,
            };
            let agents = (0..sc.fleet.agents).map(|_| Invariants { max_attempts: cap, ..Invariants::default() }).collect();
            let mut w = FleetWatch { agents, agent: 0, tool: alpha, passed_rate: Vec::new() };
            let m = run_one(&sc, i, run, &mut w);
            for (k, inv) in w.agents.iter().enumerate() {
                prop_assert!(inv.broken.is_empty(), "{} agent {k}: {:?}\n{}", s.name, inv.broken, src);
            }
            prop_assert_eq!(m.agents, u64::from(sc.fleet.agents));
            if let Some(c) = concurrency {
                prop_assert!(m.peak_in_flight <= u64::from(c), "{}: peak {} > {c}\n{}", s.name, m.peak_in_flight, src);
            }
            if let Some((per_s, burst)) = rate {
                w.passed_rate.sort_unstable();
                for (n, &t) in w.passed_rate.iter().enumerate() {
                    let bound = f64::from(burst) + per_s * t as f64 / 1000.0;
                    prop_assert!((n + 1) as f64 <= bound + 1e-9, "{}: {} through by {t} ms > {bound}\n{}", s.name, n + 1, src);
                }
            }
        }
    }

    /// Agents that share nothing never meet: agent 0 of a fleet runs exactly as a lone agent
    /// does, adding agents changes nothing for the others, and under every strategy agent k
    /// meets the same fault at the same attempt (common random numbers across strategies).
    #[test]
    fn agents_that_share_nothing_keep_their_own_draws(src in scenario(), agents in 2u32..6, run in 0u64..20) {
        let lone = load(&src);
        let fleet = |n: u32| load(&format!("{src}[fleet]\nagents = {n}\nstart = {{ poisson_per_s = 3 }}\n"));
        let (small, large) = (fleet(agents), fleet(agents + 3));
        // Per strategy, per agent: (tool, attempt) → the rule it met.
        type Met = Vec<BTreeMap<(u16, u32), Option<u16>>>;
        let mut firsts: Vec<Met> = Vec::new();
        for i in 0..lone.strategies.len() {
            let mut alone = PerAgent::default();
            run_one(&lone, i, run, &mut alone);
            let (mut a, mut b) = (PerAgent::default(), PerAgent::default());
            run_one(&small, i, run, &mut a);
            run_one(&large, i, run, &mut b);
            prop_assert_eq!(&a.0[0], &alone.0[0], "agent 0 is the lone agent\n{}", src);
            prop_assert_eq!(&a.0[..], &b.0[..agents as usize], "more agents changed the first ones\n{}", src);
            // (tool, attempt) → rule, per agent, for the cross-strategy comparison.
            struct Faults(Vec<BTreeMap<(u16, u32), Option<u16>>>, usize);
            impl Observer for Faults {
                fn agent(&mut self, agent: u32) { self.1 = agent as usize; }
                fn event(&mut self, e: &Event<'_>) {
                    if let Event::Attempt { tool, attempt, rule, .. } = *e {
                        if self.0.len() <= self.1 { self.0.resize(self.1 + 1, BTreeMap::new()); }
                        self.0[self.1].insert((tool, attempt), rule);
                    }
                }
            }
            let mut f = Faults(Vec::new(), 0);
            run_one(&small, i, run, &mut f);
            firsts.push(f.0);
        }
        // Rules with memory (a terminal fault sticks) can differ in what later attempts meet,
        // so compare only the first attempt on each tool of each agent.
        for a in &firsts {
            for b in &firsts {
                for (k, (ma, mb)) in a.iter().zip(b).enumerate() {
                    for (key, r) in ma.iter().filter(|((_, n), _)| *n == 1) {
                        if let Some(r2) = mb.get(key) {
                            prop_assert_eq!(r, r2, "agent {} attempt {:?}", k, key);
                        }
                    }
                }
            }
        }
    }
}

/// Breaker trips (tool, time, agent) and attempts (tool, time, agent) of a fleet's run.
#[derive(Default)]
struct BreakerWatch {
    agent: u32,
    trips: Vec<(u16, u64, u32)>,
    attempts: Vec<(u16, u64, u32)>,
}

impl Observer for BreakerWatch {
    fn agent(&mut self, agent: u32) {
        self.agent = agent;
    }

    fn event(&mut self, e: &Event<'_>) {
        match *e {
            Event::BreakerTrip { tool, t_ms } => self.trips.push((tool, t_ms, self.agent)),
            Event::Attempt { tool, t_ms, .. } => self.attempts.push((tool, t_ms, self.agent)),
            _ => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    /// A fleet breaker opens for every agent at once: after it trips, no agent's call reaches
    /// the tool until it has been open `open_ms`, but for the agents that have not heard yet
    /// (`sync_ms` after the trip, all but the one that tripped it).
    #[test]
    fn a_fleet_breaker_opens_for_everyone(
        agents in 2u32..20,
        sync_ms in prop_oneof![Just(0u64), 0u64..800],
        failures in 1u32..4,
        p in 0.2f64..0.9,
        seed in any::<u64>(),
        run in 0u64..10,
    ) {
        let open_ms = 2000;
        let src = format!(
            "name = \"fb\"\nseed = {seed}\nruns = 1\n[strategies.shared]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\nbreaker = \"fleet\"\n\
             [policy]\nbreaker = {{ failures = {failures}, open_ms = {open_ms}, sync_ms = {sync_ms} }}\n\
             [fleet]\nagents = {agents}\nstart = {{ poisson_per_s = 20 }}\n[tools.search]\nservice_ms = {{ dist = \"uniform\", min = 5, max = 60 }}\n\
             [task]\n[[task.steps]]\ntool = \"search\"\n[[task.steps]]\ntool = \"search\"\nargs = {{ q = 2 }}\n\
             [[faults]]\ntarget = \"search\"\nprobability = {p}\nhttp = 503\n"
        );
        let sc = load(&src);
        let mut w = BreakerWatch::default();
        run_one(&sc, 0, run, &mut w);
        for &(tool, t, by) in &w.trips {
            for &(tool2, t2, agent) in &w.attempts {
                let open = tool2 == tool && t < t2 && t2 < t + open_ms;
                let unheard = agent != by && t2 < t + sync_ms;
                prop_assert!(!open || unheard, "agent {} reached the tool at {} ms, tripped at {} ms by agent {}\n{}", agent, t2, t, by, src);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    /// A fleet's retry budget is the fleet's: over a window longer than the run, the whole
    /// fleet's retries (tools and provider) stay within `ratio` × its calls' first attempts
    /// (or one retry), however many agents fail at once.
    #[test]
    fn a_fleet_retry_budget_bounds_the_whole_fleets_retries(
        agents in 2u32..30,
        ratio_pct in 5u32..80,
        p in 0.2f64..0.95,
        seed in any::<u64>(),
        run in 0u64..10,
    ) {
        let ratio = f64::from(ratio_pct) / 100.0;
        let src = format!(
            "name = \"rb\"\nseed = {seed}\nruns = 1\nstrategies = [\"five-field\"]\n\
             [policy]\nretry = {{ max_attempts = 6, backoff = \"full-jitter\", base_ms = 50, cap_ms = 800, budget_ratio = {ratio}, budget_window_ms = 86400000 }}\n\
             [fleet]\nagents = {agents}\n\
             [task]\n[[task.steps]]\ncalls = [{{ tool = \"search\" }}, {{ tool = \"fetch\" }}]\n[[task.steps]]\ntool = \"search\"\nargs = {{ q = 2 }}\n\
             [[faults]]\ntarget = \"*\"\nprobability = {p}\nhttp = 503\n\
             [[faults]]\ntarget = \"provider\"\nprobability = {}\nhttp = 529\n",
            p / 3.0
        );
        let sc = load(&src);
        #[derive(Default)]
        struct Firsts(u64);
        impl Observer for Firsts {
            fn event(&mut self, e: &Event<'_>) {
                if let Event::Attempt { by: By::Model, .. } = *e {
                    self.0 += 1;
                }
            }
        }
        let mut f = Firsts::default();
        let m = run_one(&sc, 0, run, &mut f);
        let bound = (ratio * f.0 as f64).max(1.0);
        prop_assert!(m.orchestrator_retries as f64 <= bound + 1e-9, "{} retries > {bound} ({} first attempts)\n{}", m.orchestrator_retries, f.0, src);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    /// A recorded trace re-adds to its run's row: over every agent's trace, the model calls and
    /// the attempts behind the results are the run's `model_calls` and `tool_calls`, for every
    /// strategy of a random fleet, a fleet-wide breaker among them (a retry the open breaker
    /// answers keeps the attempts that reached the tool; a call still in flight when a budget
    /// ends the run has its attempts in the `final` event).
    #[test]
    fn a_trace_re_adds_to_its_run(fleet in fleet_scenario(), run in 0u64..5, sync_ms in 0u64..400) {
        use tracefault::trace::TraceEvent;
        use tracefault::trace::record::Recorder;
        let (mut src, _, _) = fleet;
        src.push_str(
            "[strategies.shared-breaker]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\nbreaker = \"fleet\"\n\
             [strategies.own-breaker]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\nbreaker = true\n",
        );
        src = src.replace("[policy]\n", &format!("[policy]\nbreaker = {{ failures = 2, open_ms = 300, sync_ms = {sync_ms} }}\n"));
        let sc = load(&src);
        for (k, strategy) in sc.strategies.iter().enumerate() {
            let mut rec = Recorder::new(&sc, &strategy.name, run);
            let m = run_one(&sc, k, run, &mut rec);
            let (mut models, mut attempts) = (0u64, 0u64);
            for t in &rec.traces {
                for e in &t.events {
                    match e {
                        TraceEvent::ModelCall { .. } => models += 1,
                        TraceEvent::ToolResult { attempts: a, attempt_ms, .. } => {
                            attempts += u64::from(a.unwrap_or(0));
                            prop_assert_eq!(attempt_ms.len() as u32, a.unwrap_or(0));
                        }
                        TraceEvent::Final { in_flight_attempts: a, .. } => attempts += u64::from(a.unwrap_or(0)),
                        _ => {}
                    }
                }
            }
            prop_assert_eq!(models, m.model_calls, "{}: model calls\n{}", strategy.name, src);
            prop_assert_eq!(attempts, m.tool_calls, "{}: tool calls\n{}", strategy.name, src);
        }
    }
}

/// The fixtures of the readers of agent tools' own logs, parsed once (a JSONL file as the list of
/// its lines, as the readers get it).
fn session_log_values() -> &'static Vec<(String, serde_json::Value)> {
    static LOGS: std::sync::OnceLock<Vec<(String, serde_json::Value)>> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let mut out = Vec::new();
        for folder in [
            "codex",
            "claude-code",
            "agents-sdk",
            "inspect",
            "tau2",
            "swe-agent",
            "mini-swe-agent",
            "openhands",
            "otel",
        ] {
            let dir = crate::root().join("tests/fixtures").join(folder);
            let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
            names.sort();
            for path in names {
                let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default().to_owned();
                if !["json", "jsonl", "traj"].contains(&ext.as_str()) {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let v = serde_json::from_str(&text).unwrap_or_else(|_| {
                    serde_json::Value::Array(
                        text.lines()
                            .filter(|l| !l.trim().is_empty())
                            .filter_map(|l| serde_json::from_str(l).ok())
                            .collect(),
                    )
                });
                out.push((path.file_name().unwrap().to_string_lossy().into_owned(), v));
            }
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Agent tools' logs with one node replaced at random: still an error or a trace, never a
    /// panic, and whatever imports can be inspected, compiled and replayed as recorded.
    #[test]
    fn mutated_session_logs_never_panic(
        which in any::<prop::sample::Index>(),
        path in prop::collection::vec(any::<usize>(), 0..10),
        with in prop_oneof![
            Just(serde_json::Value::Null),
            Just(serde_json::json!(-1)),
            Just(serde_json::json!("Exit code: 1")),
            Just(serde_json::json!([])),
            Just(serde_json::json!({})),
            Just(serde_json::json!({"type": "tool_result", "is_error": true})),
            Just(serde_json::json!(1e300)),
        ],
    ) {
        use tracefault::trace::import::{ImportOptions, import_str};
        let logs = session_log_values();
        let (name, v) = &logs[which.index(logs.len())];
        let mut v = v.clone();
        mutate(&mut v, &path, with);
        if let Ok(imported) = import_str(&v.to_string(), Path::new(name), &ImportOptions::default()) {
            for t in &imported.traces {
                let _ = tracefault::trace::inspect::stats(t);
                let _ = tracefault::trace::compile::compile(t);
                let _ = tracefault::replay::replay_as_recorded(t.clone());
            }
        }
    }
}
