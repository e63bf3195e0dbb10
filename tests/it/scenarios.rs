//! Every bundled scenario does what its description says. The checks read the committed
//! `reports/`, which `golden::committed_reports_match_a_fresh_run` proves equal to a fresh run.

use std::collections::BTreeMap;

use crate::root;
use crate::support::csv::Table;

/// summary.csv as (scenario, strategy) → column → value (empty cells are absent).
fn summary() -> BTreeMap<(String, String), BTreeMap<String, f64>> {
    Table::read(&root().join("reports/summary.csv")).numbers()
}

struct Scenario {
    rows: BTreeMap<(String, String), BTreeMap<String, f64>>,
    name: &'static str,
}

impl Scenario {
    fn new(name: &'static str) -> Scenario {
        Scenario { rows: summary(), name }
    }

    fn get(&self, strategy: &str, metric: &str) -> f64 {
        self.rows
            .get(&(self.name.to_owned(), strategy.to_owned()))
            .and_then(|r| r.get(metric))
            .copied()
            .unwrap_or_else(|| panic!("{} / {strategy} / {metric} missing", self.name))
    }

    fn strategies(&self) -> Vec<String> {
        self.rows.keys().filter(|k| k.0 == self.name && k.1 != "recorded").map(|k| k.1.clone()).collect()
    }
}

const MODEL_ROUTED: [&str; 4] = ["raw-exception", "error-string", "is-error-flag", "response-object"];

#[test]
fn s01_worked_example() {
    let s = Scenario::new("worked-example-503-503-400");
    assert!(s.get("five-field", "success_rate") >= 0.95);
    assert_eq!(s.get("five-field", "unnecessary_failure_rate"), 0.0);
    for m in MODEL_ROUTED {
        assert!(s.get(m, "success_rate") < s.get("five-field", "success_rate"), "{m}");
        assert!(s.get(m, "unnecessary_failure_rate") > 0.0, "{m} gives up on some 503s");
        assert!(s.get(m, "success_rate") >= s.get("raw-exception", "success_rate"), "{m}");
        assert_eq!(s.get(m, "raw_leaks") > 0.0, m == "raw-exception", "{m}");
    }
    // The recorded agent: 5 model calls, 4 tool calls, answered, never repeated the 400.
    assert_eq!(s.get("recorded", "runs"), 1.0);
    assert_eq!(s.get("recorded", "calls_mean"), 9.0);
    assert_eq!(s.get("recorded", "success_rate"), 1.0);
    assert_eq!(s.get("recorded", "wasted_retries"), 0.0);
}

#[test]
fn s02_ambiguous_loop() {
    let s = Scenario::new("ambiguous-more-may-be-available");
    for m in MODEL_ROUTED {
        let loops = s.get(m, "loop_rate");
        assert!((0.14..0.22).contains(&loops), "{m}: {loops} vs 0.93^24 = 0.175");
        assert!(s.get(m, "wasted_retries_per_run") > 5.0, "{m}");
    }
    for m in ["five-field", "five-field-guarded"] {
        assert_eq!(s.get(m, "loop_rate"), 0.0);
        assert_eq!(s.get(m, "tool_calls_mean"), 1.0, "{m} stops after one call");
    }
    assert_eq!(s.get("recorded", "calls_mean"), 27.0);
    assert_eq!(s.get("recorded", "wasted_retries"), 12.0);
}

#[test]
fn s03_rate_limit_storm() {
    let s = Scenario::new("rate-limit-storm-retry-after");
    for m in ["five-field", "five-field-guarded"] {
        assert_eq!(s.get(m, "success_rate"), 1.0);
        assert_eq!(s.get(m, "wasted_retries"), 0.0);
    }
    for m in MODEL_ROUTED {
        assert!(s.get(m, "wasted_retries_per_run") > 0.5, "{m}");
        assert!(s.get(m, "gave_up_rate") > 0.5, "{m}: most give up");
    }
}

#[test]
fn s04_outage_breaker() {
    let s = Scenario::new("outage-window-breaker");
    for m in s.strategies() {
        assert_eq!(s.get(&m, "success_rate"), 0.0, "{m}: nothing outlasts the outage");
    }
    assert_eq!(s.get("five-field-guarded", "breaker_trips_per_run"), 1.0);
    assert_eq!(s.get("five-field", "breaker_trips"), 0.0);
    assert!(s.get("five-field-guarded", "calls_mean") < 0.5 * s.get("five-field", "calls_mean"));
    assert!(s.get("five-field-guarded", "tool_calls_mean") <= 4.0);
}

#[test]
fn s05_terminal_401() {
    let s = Scenario::new("terminal-401");
    for m in s.strategies() {
        assert_eq!(s.get(&m, "success_rate"), 0.0, "{m}");
        assert_eq!(s.get(&m, "orchestrator_retries"), 0.0, "{m}: a 401 is never retried");
        assert!(s.get(&m, "wasted_retries_per_run") <= s.get("raw-exception", "wasted_retries_per_run"), "{m}");
    }
    assert!(s.get("five-field", "wasted_retries_per_run") < s.get("raw-exception", "wasted_retries_per_run") / 2.0);
}

#[test]
fn s06_parallel_one_failing() {
    let s = Scenario::new("parallel-calls-one-failing");
    for m in s.strategies() {
        assert_eq!(s.get(&m, "protocol_violations"), 0.0, "{m}");
    }
    assert_eq!(s.get("five-field", "success_rate"), 1.0);
    assert_eq!(s.get("five-field", "model_calls_mean"), 2.0, "the three calls stay one turn");
    assert_eq!(s.get("five-field", "tool_calls_mean"), 4.0, "only news is retried");
    for m in MODEL_ROUTED {
        assert!(s.get(m, "gave_up_rate") > 0.0, "{m}");
    }
    assert!(s.get("is-error-flag", "success_rate") < s.get("error-string", "success_rate"), "no flag on Gemini");
}

#[test]
fn s07_token_budget() {
    let s = Scenario::new("token-budget-runs-out");
    assert!(s.get("error-string", "loop_rate") > 0.5);
    assert_eq!(s.get("error-string-budgeted", "loop_rate"), 0.0);
    // Never past the ceiling, in any run.
    let runs = Table::read(&root().join("reports/runs.csv"));
    let max = runs
        .rows
        .iter()
        .filter(|r| r["scenario"] == "token-budget-runs-out" && r["strategy"] == "error-string-budgeted")
        .map(|r| r.num::<u64>("tokens"))
        .max()
        .unwrap();
    assert!(max <= 20_000, "{max}");
}

#[test]
fn s08_realistic_mix() {
    let s = Scenario::new("realistic-mix");
    assert!(s.get("five-field", "success_rate") >= 0.95);
    for m in MODEL_ROUTED {
        assert!(s.get(m, "success_rate") < s.get("five-field", "success_rate"), "{m}");
        assert_eq!(s.get(m, "raw_leaks") > 0.0, m == "raw-exception", "{m}");
    }
}

#[test]
fn s09_provider_overload() {
    let s = Scenario::new("provider-overload-529");
    for m in s.strategies() {
        assert!(s.get(&m, "orchestrator_retries") >= 3.0 * s.get(&m, "runs"), "{m}");
        assert_eq!(s.get(&m, "wasted_retries"), 0.0, "{m}: the retry-after is honoured");
    }
}

#[test]
fn s10_to_s15_replays_show_the_recording_apart() {
    for name in [
        "replay-openai-chat-cassette",
        "replay-openai-responses-cassette",
        "replay-anthropic-cassette",
        "replay-gemini-cassette",
        "replay-otel-genai-spans",
        "replay-tau-bench-airline-13",
    ] {
        let s = Scenario::new(name);
        assert_eq!(s.get("recorded", "runs"), 1.0, "{name}");
        assert!(s.get("five-field", "success_rate") >= 0.9, "{name}");
    }
    let s = Scenario::new("replay-tau-bench-airline-13");
    assert_eq!(s.get("recorded", "calls_mean"), 42.0);
    assert_eq!(s.get("recorded", "wasted_retries"), 3.0);
    for m in s.strategies() {
        assert!(s.get(&m, "calls_mean") < 21.0, "{m}: less than half the recorded calls");
    }
    // Only the failing location is re-issued: every model turn after the first sends one call,
    // so tool calls equal model calls (no orchestrator retries: the failure is a 400).
    let s = Scenario::new("replay-openai-responses-cassette");
    for m in s.strategies() {
        assert_eq!(s.get(&m, "tool_calls_mean"), s.get(&m, "model_calls_mean"), "{m}");
    }
    // The OTel spans and the Chat cassette compile to the same task and fault schedule.
    let load = |f: &str| tracefault::scenario::load::load_file(&root().join("scenarios").join(f)).unwrap();
    let (a, b) = (load("10-openai-chat-cassette.toml"), load("14-otel-spans.toml"));
    assert_eq!(a.task, b.task);
    assert_eq!(a.faults.rules, b.faults.rules);
}
