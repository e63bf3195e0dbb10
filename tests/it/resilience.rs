//! Resilience on the orchestrator's side: retries (backoff, retry-after honoured or not, the
//! SDKs' provider retries), breakers (consecutive and rate mode), retry budgets, the loop guard,
//! token and time budgets. Single runs against `runs.csv` rows derived by hand (the cases'
//! conventions are in `support/oracle.rs`), distributions against expectations computed by
//! hand, and properties over random scenarios checked on the engine's own events: every tool
//! call gets exactly one result, attempts never exceed the cap, non-retryable failures are never
//! retried by the orchestrator, budgets hold, the breaker matches an oracle, delays stay within
//! their bounds.

use std::path::Path;

use proptest::prelude::*;
use tracefault::engine::breaker::{Admit, Breaker, BreakerConfig, BreakerMode};
use tracefault::engine::strategy::Routing;
use tracefault::scenario::load::load_str;
use tracefault::suite::run_one;

use crate::support::arbitrary::{load, scenario};
use crate::support::invariants::Invariants;
use crate::support::oracle::*;
use crate::support::{RUNS, mean_se};

/// A 503 once, then success; the orchestrator retries at once (no backoff). t: model call
/// 0–1000, attempt 1 1000–1100 (503), attempt 2 1100–1200 (ok, delivered), final call
/// 1200–2200. Tokens: 100+8, then (108 + ok) + 9.
#[test]
fn a_503_retried_by_the_orchestrator() {
    let body =
        format!("{ONE_CALL}{}{}[[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 503\n", policy_no_backoff(), profile(&[]));
    let first = 100 + EMPTY_ARGS_OUT;
    let tokens = first + (first + chat(1, OK) + DONE_OUT);
    Case {
        scenario: body,
        strategy: "five-field",
        ends: "answer",
        expect: [
            ("model_calls", 2),
            ("tool_calls", 2),
            ("wasted_retries", 0),
            ("orchestrator_retries", 1),
            ("model_transient_roundtrips", 0),
            ("breaker_trips", 0),
            ("faults_injected", 1),
            ("tokens", tokens),
            ("virtual_ms", 2200),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// The same 429, retried by an orchestrator that honours `retry-after`: it waits the 5 s (the
/// wait is a floor on the backoff) and the retry at 6100 is not refused. Final call 6200–7200.
#[test]
fn a_429_waited_out_by_the_orchestrator() {
    let body = format!(
        "{ONE_CALL}{}{}[[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 429\nretry_after_s = 5\n",
        policy_no_backoff(),
        profile(&[])
    );
    let c1 = 100 + EMPTY_ARGS_OUT;
    let c2 = (c1 + chat(1, OK)) + DONE_OUT;
    Case {
        scenario: body,
        strategy: "five-field",
        ends: "answer",
        expect: [
            ("model_calls", 2),
            ("tool_calls", 2),
            ("wasted_retries", 0),
            ("orchestrator_retries", 1),
            ("model_transient_roundtrips", 0),
            ("breaker_trips", 0),
            ("faults_injected", 1),
            ("tokens", c1 + c2),
            ("virtual_ms", 7200),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// A 503 with `retry-after: 3` under an orchestrator that ignores it (no backoff, 3 attempts):
/// the 503 answers at 1100 (refusing until 4100). Orchestrator retries at 1100 and 1200 are
/// refused (wasted); the model gets the failure at 1300 and re-sends at 2300: refused, and its
/// two orchestrator retries too (2400, 2500); again at 3600, 3700, 3800: all refused; the
/// model's fourth send at 4900 is past 4100 and passes. 8 wasted attempts (2 + 3 + 3), 6
/// orchestrator retries; model turns 2, 3, 4 follow a transient result.
#[test]
fn a_503_retried_before_its_retry_after_by_an_orchestrator_that_ignores_it() {
    let head = "[strategies.impatient]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\npartials = \"terminal\"\n\
                retry = { max_attempts = 3, backoff = \"none\", honor_retry_after = false }\n";
    let body =
        format!("{ONE_CALL}{}[[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 503\nretry_after_s = 3\n", profile(&[]));
    // The model sees the last refusal of each chain: 3 attempts and the wait left, rounded up.
    let err = |id, secs| {
        five(
            id,
            "TRANSPORT",
            S503,
            true,
            &format!(r#""status":503,"tool":"s","attempts":3,"retry_after_seconds":{secs}"#),
            "tool",
        )
    };
    // Waits left at delivery: 4100-1200 = 2900 (3 s), 4100-2500 = 1600 (2 s), 4100-3800 = 300 (1 s).
    let (e1, e2, e3) = (err(1, 3), err(2, 2), err(3, 1));
    let c1 = 100 + EMPTY_ARGS_OUT;
    let c2 = (c1 + e1) + EMPTY_ARGS_OUT;
    let c3 = (c1 + e1 + e2 + EMPTY_ARGS_OUT) + EMPTY_ARGS_OUT;
    let c4 = (c1 + e1 + e2 + e3 + 2 * EMPTY_ARGS_OUT) + EMPTY_ARGS_OUT;
    let c5 = (c1 + e1 + e2 + e3 + 3 * EMPTY_ARGS_OUT + chat(4, OK)) + DONE_OUT;
    Case {
        scenario: format!("{head}\n{body}"),
        strategy: "impatient",
        ends: "answer",
        expect: [
            ("model_calls", 5),
            ("tool_calls", 10),
            ("wasted_retries", 8),
            ("orchestrator_retries", 6),
            ("model_transient_roundtrips", 3),
            ("breaker_trips", 0),
            ("faults_injected", 9),
            ("tokens", c1 + c2 + c3 + c4 + c5),
            ("virtual_ms", 6000),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// The provider answers 529 to the first model call; the orchestrator retries it at once (the
/// SDKs do). The failed attempt costs no tokens and no time; then 0–1000 call, 1000–1100
/// tool, 1100–2100 final.
#[test]
fn a_provider_529_retried_like_an_sdk() {
    let body = format!(
        "{ONE_CALL}{}{}[[faults]]\ntarget = \"provider\"\nat = [1]\nhttp = 529\n",
        policy_no_backoff(),
        profile(&[])
    );
    let c1 = 100 + EMPTY_ARGS_OUT;
    let c2 = (c1 + chat(1, OK)) + DONE_OUT;
    Case {
        scenario: body,
        strategy: "error-string",
        ends: "answer",
        expect: [
            ("model_calls", 3),
            ("tool_calls", 1),
            ("wasted_retries", 0),
            ("orchestrator_retries", 1),
            ("model_transient_roundtrips", 0),
            ("breaker_trips", 0),
            ("faults_injected", 1),
            ("tokens", c1 + c2),
            ("virtual_ms", 2100),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// The SDKs' presets on a 429 announcing 200 s at the first model call: openai-python does not
/// retry past 120 s, so the run gives up at once, costing nothing (the failed attempt takes no
/// tokens and no time).
#[test]
fn the_openai_preset_gives_up_on_a_retry_after_past_120_s() {
    let body = format!(
        "{ONE_CALL}[policy]\nretry = {{ preset = \"openai\" }}\n{}[[faults]]\ntarget = \"provider\"\nat = [1]\nhttp = 429\nretry_after_s = 200\n",
        profile(&[])
    );
    Case {
        scenario: body,
        strategy: "error-string",
        ends: "gave_up",
        expect: [
            ("model_calls", 1),
            ("tool_calls", 0),
            ("wasted_retries", 0),
            ("orchestrator_retries", 0),
            ("model_transient_roundtrips", 0),
            ("breaker_trips", 0),
            ("faults_injected", 1),
            ("tokens", 0),
            ("virtual_ms", 0),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// anthropic-python waits any announced wait instead of its backoff: the retry goes at 200 s,
/// then as in [`a_provider_529_retried_like_an_sdk`], 200 s later: 200 000–201 000 call,
/// 201 000–201 100 tool, 201 100–202 100 final.
#[test]
fn the_anthropic_preset_waits_a_retry_after_of_200_s() {
    let body = format!(
        "{ONE_CALL}[policy]\nretry = {{ preset = \"anthropic\" }}\n{}[[faults]]\ntarget = \"provider\"\nat = [1]\nhttp = 429\nretry_after_s = 200\n",
        profile(&[])
    );
    let c1 = 100 + EMPTY_ARGS_OUT;
    let c2 = (c1 + chat(1, OK)) + DONE_OUT;
    Case {
        scenario: body,
        strategy: "error-string",
        ends: "answer",
        expect: [
            ("model_calls", 3),
            ("tool_calls", 1),
            ("wasted_retries", 0),
            ("orchestrator_retries", 1),
            ("model_transient_roundtrips", 0),
            ("breaker_trips", 0),
            ("faults_injected", 1),
            ("tokens", c1 + c2),
            ("virtual_ms", 202_100),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// Two parallel calls, the second failing once: both get exactly one result in the next turn;
/// only the failed one is retried (at 1100, ok at 1200). One model turn asks for both (2 × 8
/// tokens out), one answers.
#[test]
fn parallel_calls_with_one_failing() {
    let body = format!(
        "[task]\n[[task.steps]]\ncalls = [{{ tool = \"a\", result = \"ok\" }}, {{ tool = \"b\", result = \"ok\" }}]\n{}{}[[faults]]\ntarget = \"b\"\nat = [1]\nhttp = 503\n",
        policy_no_backoff(),
        profile(&[])
    );
    let c1 = 100 + 2 * EMPTY_ARGS_OUT;
    let c2 = (c1 + chat(1, OK) + chat(2, OK)) + DONE_OUT;
    Case {
        scenario: body,
        strategy: "five-field",
        ends: "answer",
        expect: [
            ("model_calls", 2),
            ("tool_calls", 3),
            ("wasted_retries", 0),
            ("orchestrator_retries", 1),
            ("model_transient_roundtrips", 0),
            ("breaker_trips", 0),
            ("faults_injected", 1),
            ("tokens", c1 + c2),
            ("virtual_ms", 2200),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// An outage (503 on every call before 100 s) under five-field-guarded, breaker 3 / 30 s.
/// Attempts at 1000, 1100, 1200 fail; the third failure (at 1300) trips the breaker; the model
/// gets the 503 and re-sends at 2300: the open breaker answers CIRCUIT_OPEN (29 s left) without
/// a tool call; the model re-sends again at 3300 into the same open breaker: breaker_abort.
#[test]
fn a_breaker_trips_then_aborts_the_run() {
    let body = format!(
        "{ONE_CALL}[policy]\nretry = {{ backoff = \"none\" }}\nbreaker = {{ mode = \"consecutive\", failures = 3, open_ms = 30000, probes = 1, close_after = 2 }}\n{}[[faults]]\ntarget = \"s\"\nwindow_ms = [0, 100000]\nhttp = 503\n",
        profile(&[])
    );
    let e503 = five(1, "TRANSPORT", S503, true, r#""status":503,"tool":"s","attempts":3"#, "tool");
    let open = five(
        2,
        "CIRCUIT_OPEN",
        "The s tool is switched off after repeated failures (circuit open); do not call it for 29 seconds.",
        true,
        r#""tool":"s","attempts":1,"retry_after_seconds":29"#,
        "orchestrator",
    );
    let c1 = 100 + EMPTY_ARGS_OUT;
    let c2 = (c1 + e503) + EMPTY_ARGS_OUT;
    let c3 = (c1 + e503 + EMPTY_ARGS_OUT + open) + EMPTY_ARGS_OUT;
    Case {
        scenario: body,
        strategy: "five-field-guarded",
        ends: "breaker_abort",
        expect: [
            ("model_calls", 3),
            ("tool_calls", 3),
            ("wasted_retries", 0),
            ("orchestrator_retries", 2),
            ("model_transient_roundtrips", 2),
            ("breaker_trips", 1),
            ("faults_injected", 3),
            ("tokens", c1 + c2 + c3),
            ("virtual_ms", 3300),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// A breaker in rate mode (window 10 s, at least 2 calls, half failing) that opens for 2 s,
/// half-opens for one probe and closes after one success. Attempts at 1000 (503) and, after a
/// constant 1500 ms backoff, 2600 (503): 2 of 2 failed at 2700, it trips until 4700. The
/// retry at 4200 is rejected (CIRCUIT_OPEN, 500 ms left: 1 s) without reaching the tool. The
/// model re-sends at 5200: the probe passes and closes the breaker; final call 5300–6300.
#[test]
fn a_rate_mode_breaker_trips_probes_and_closes() {
    let body = format!(
        "{ONE_CALL}[policy]\nretry = {{ backoff = \"constant\", base_ms = 1500 }}\nbreaker = {{ mode = \"rate\", window_ms = 10000, min_calls = 2, failure_ratio = 0.5, open_ms = 2000, probes = 1, close_after = 1 }}\n{}[[faults]]\ntarget = \"s\"\nat = [1, 2]\nhttp = 503\n",
        profile(&[])
    );
    let open = five(
        1,
        "CIRCUIT_OPEN",
        "The s tool is switched off after repeated failures (circuit open); do not call it for 1 seconds.",
        true,
        r#""tool":"s","attempts":3,"retry_after_seconds":1"#,
        "orchestrator",
    );
    let c1 = 100 + EMPTY_ARGS_OUT;
    let c2 = (c1 + open) + EMPTY_ARGS_OUT;
    let c3 = (c1 + open + EMPTY_ARGS_OUT + chat(2, OK)) + DONE_OUT;
    Case {
        scenario: body,
        strategy: "five-field-guarded",
        ends: "answer",
        expect: [
            ("model_calls", 3),
            ("tool_calls", 3),
            ("wasted_retries", 0),
            ("orchestrator_retries", 1),
            ("model_transient_roundtrips", 1),
            ("breaker_trips", 1),
            ("faults_injected", 2),
            ("tokens", c1 + c2 + c3),
            ("virtual_ms", 6300),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// A retry budget of 0.5 retries per first attempt (at least one): one first attempt allows
/// one orchestrator retry in the whole run. Attempts 1 and 2 fail (503, 503); the model gets
/// the failure (2 attempts) and re-sends: attempt 3 fails and the budget is spent, so the model
/// gets it again and re-sends: attempt 4 passes. t: 0–1000, 1000–1200, 1200–2200, 2200–2300,
/// 2300–3300, 3300–3400, 3400–4400.
#[test]
fn a_retry_budget_limits_orchestrator_retries() {
    let body = format!(
        "{ONE_CALL}[policy]\nretry = {{ max_attempts = 5, backoff = \"none\", budget_ratio = 0.5 }}\n{}[[faults]]\ntarget = \"s\"\nat = [1, 2, 3]\nhttp = 503\n",
        profile(&[])
    );
    let e = |id, attempts| {
        five(id, "TRANSPORT", S503, true, &format!(r#""status":503,"tool":"s","attempts":{attempts}"#), "tool")
    };
    let c1 = 100 + EMPTY_ARGS_OUT;
    let c2 = (c1 + e(1, 2)) + EMPTY_ARGS_OUT;
    let c3 = (c1 + e(1, 2) + e(2, 1) + EMPTY_ARGS_OUT) + EMPTY_ARGS_OUT;
    let c4 = (c1 + e(1, 2) + e(2, 1) + 2 * EMPTY_ARGS_OUT + chat(3, OK)) + DONE_OUT;
    Case {
        scenario: body,
        strategy: "five-field",
        ends: "answer",
        expect: [
            ("model_calls", 4),
            ("tool_calls", 4),
            ("wasted_retries", 0),
            ("orchestrator_retries", 1),
            ("model_transient_roundtrips", 2),
            ("breaker_trips", 0),
            ("faults_injected", 3),
            ("tokens", c1 + c2 + c3 + c4),
            ("virtual_ms", 4400),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// The loop guard (K = 3) of a strategy that passes "more may be available" through: the
/// third delivery of the same partial outcome for the same call stops the run, at 3300.
#[test]
fn the_loop_guard_stops_the_third_identical_outcome() {
    let head = "[strategies.guarded-prefix]\nencoding = \"prefix\"\nloop_guard = true\n";
    let body = format!(
        "{ONE_CALL}{}[[faults]]\ntarget = \"s\"\nat = [1]\nfault = \"ambiguous\"\n",
        profile(&[("p_continue", "1.0")])
    );
    let p = |id| chat(id, PARTIAL_NOTE);
    let c1 = 100 + EMPTY_ARGS_OUT;
    let c2 = (c1 + p(1)) + EMPTY_ARGS_OUT;
    let c3 = (c1 + p(1) + p(2) + EMPTY_ARGS_OUT) + EMPTY_ARGS_OUT;
    Case {
        scenario: format!("{head}\n{body}"),
        strategy: "guarded-prefix",
        ends: "loop_guard",
        expect: [
            ("model_calls", 3),
            ("tool_calls", 3),
            ("wasted_retries", 2),
            ("orchestrator_retries", 0),
            ("model_transient_roundtrips", 0),
            ("breaker_trips", 0),
            ("faults_injected", 3),
            ("tokens", c1 + c2 + c3),
            ("virtual_ms", 3300),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// The token budget is checked before each model call with the tokens that call will add:
/// the first run above needs 108 + 130 = 238; with `max_tokens = 237` the final call (130)
/// would exceed it, so the run stops at 1200 with 108 tokens spent.
#[test]
fn a_token_budget_stops_before_the_call_that_would_exceed_it() {
    let body = format!(
        "{ONE_CALL}[policy]\nmax_tokens = 237\nretry = {{ backoff = \"none\" }}\n{}[[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 503\n",
        profile(&[])
    );
    Case {
        scenario: body,
        strategy: "five-field-guarded",
        ends: "token_budget",
        expect: [
            ("model_calls", 1),
            ("tool_calls", 2),
            ("wasted_retries", 0),
            ("orchestrator_retries", 1),
            ("model_transient_roundtrips", 0),
            ("breaker_trips", 0),
            ("faults_injected", 1),
            ("tokens", 100 + EMPTY_ARGS_OUT),
            ("virtual_ms", 1200),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// The time budget is checked before each model call with its latency: at 1200 the final call
/// would end at 2200 > 2000, so the run stops at 1200.
#[test]
fn a_time_budget_stops_before_the_call_that_would_exceed_it() {
    let body = format!(
        "{ONE_CALL}[policy]\nmax_virtual_ms = 2000\nretry = {{ backoff = \"none\" }}\n{}[[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 503\n",
        profile(&[])
    );
    Case {
        scenario: body,
        strategy: "five-field-guarded",
        ends: "time_budget",
        expect: [
            ("model_calls", 1),
            ("tool_calls", 2),
            ("wasted_retries", 0),
            ("orchestrator_retries", 1),
            ("model_transient_roundtrips", 0),
            ("breaker_trips", 0),
            ("faults_injected", 1),
            ("tokens", 100 + EMPTY_ARGS_OUT),
            ("virtual_ms", 1200),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// A timeout in flight past the time budget: the attempt at 1000 would take 5000 ms; the
/// agent's deadline stops the run at the budget, 3000, not later.
#[test]
fn a_slow_call_in_flight_is_cut_at_the_time_budget() {
    let body = format!(
        "{ONE_CALL}[policy]\nmax_virtual_ms = 3000\n{}[[faults]]\ntarget = \"s\"\nat = [1]\nfault = \"timeout\"\nafter_ms = 5000\n",
        profile(&[])
    );
    Case {
        scenario: body,
        strategy: "five-field-guarded",
        ends: "time_budget",
        expect: [
            ("model_calls", 1),
            ("tool_calls", 1),
            ("wasted_retries", 0),
            ("orchestrator_retries", 0),
            ("model_transient_roundtrips", 0),
            ("breaker_trips", 0),
            ("faults_injected", 1),
            ("tokens", 100 + EMPTY_ARGS_OUT),
            ("virtual_ms", 3000),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// A transient fault with probability q on every attempt, retried by the orchestrator up to 3
/// attempts; the model gives up on whatever reaches it. Then E[orchestrator retries] = q + q²
/// and P(gave up) = q³.
#[test]
fn orchestrator_retries_of_independent_faults() {
    let q: f64 = 0.4;
    let src = format!(
        "name = \"retry\"\nstrategies = [\"five-field\"]\n[profile]\np_retry_transient = 0.0\n[task]\n[[task.steps]]\ntool = \"t\"\n\
         [[faults]]\ntarget = \"t\"\nprobability = {q}\nhttp = 503\n"
    );
    let sc = load_str(&src, Path::new("retry.toml")).unwrap();
    let (mut retries, mut gave_up) = (Vec::new(), Vec::new());
    for run in 0..RUNS {
        let m = run_one(&sc, 0, run, &mut ());
        retries.push(m.orchestrator_retries as f64);
        gave_up.push(f64::from(u8::from(m.terminated_by().name() == "gave_up")));
    }
    let (mean, se) = mean_se(&retries);
    assert!((mean - (q + q * q)).abs() < 3.0 * se, "retries {mean} ± {se}");
    let (rate, se) = mean_se(&gave_up);
    assert!((rate - q.powi(3)).abs() < 3.0 * se, "gave up {rate} ± {se}");
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
            // A strategy with budgets never exceeds them (checked before every model call and
            // orchestrator retry, with a deadline for calls in flight).
            if s.budgets {
                prop_assert!(m.tokens <= sc.policy.max_tokens.unwrap(), "{}: {} tokens\n{}", s.name, m.tokens, src);
                prop_assert!(m.virtual_ms <= sc.policy.max_virtual_ms.unwrap(), "{}: {} ms\n{}", s.name, m.virtual_ms, src);
            }
        }
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

    /// Delays stay within their formulas' bounds; a honoured retry-after is a floor.
    #[test]
    fn backoff_delays_are_bounded(retry in 0u32..12, prev in 0u64..20_000, u in 0.0f64..1.0, ra in prop::option::of(0u64..90_000), kind in 0usize..8) {
        use tracefault::engine::retry::{Backoff, RetryPolicy};
        let b = Backoff::parse(Backoff::NAMES[kind]).unwrap();
        let p = RetryPolicy { backoff: b, ..RetryPolicy::default() };
        let d = p.delay_ms(retry, prev, u, ra);
        let ceiling = if b == Backoff::Sdk { 8000 } else { p.cap_ms };
        prop_assert!(d <= ceiling.max(ra.unwrap_or(0)), "{:?} {}", b, d);
        if let Some(ra) = ra { prop_assert!(d >= ra); }
    }
}
