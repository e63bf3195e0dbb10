//! Faults as a run meets them: each kind (a 503 or a stack trace handed to the model, 400s and
//! schema drift, 401s read right and misread, ambiguous results, 429s re-sent too early,
//! timeouts, `after_successes`) checked on single runs against `runs.csv` rows derived by hand
//! (the cases' conventions are in `support/oracle.rs`), and in distribution against
//! expectations computed by hand.

use std::path::Path;

use tracefault::metrics::aggregate::Aggregate;
use tracefault::scenario::load::load_str;
use tracefault::suite::run_one;

use crate::support::oracle::*;
use crate::support::{RUNS, mean_se};

/// The same 503 reaches the model as `ERROR: …`; it re-issues the call (a model turn spent
/// because a transient failure reached it). t: 0–1000 call, 1000–1100 503, 1100–2100 call,
/// 2100–2200 ok, 2200–3200 final.
#[test]
fn a_503_retried_by_the_model() {
    let body = format!("{ONE_CALL}{}[[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 503\n", profile(&[]));
    let err = chat(1, &format!("ERROR: {S503}"));
    let c1 = 100 + EMPTY_ARGS_OUT;
    let c2 = (c1 + err) + EMPTY_ARGS_OUT;
    let c3 = (c1 + err + EMPTY_ARGS_OUT + chat(2, OK)) + DONE_OUT;
    Case {
        scenario: body,
        strategy: "error-string",
        ends: "answer",
        expect: [
            ("model_calls", 3),
            ("tool_calls", 2),
            ("wasted_retries", 0),
            ("orchestrator_retries", 0),
            ("model_transient_roundtrips", 1),
            ("breaker_trips", 0),
            ("faults_injected", 1),
            ("tokens", c1 + c2 + c3),
            ("virtual_ms", 3200),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// A raw traceback reaches the model: the same run as above, plus one raw leak.
#[test]
fn a_raw_exception_leaks_a_stack_trace() {
    let body = format!("{ONE_CALL}{}[[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 503\n", profile(&[]));
    let tb = "Traceback (most recent call last):\n  File \"agent/tools.py\", line 88, in call_tool\n    response.raise_for_status()\nrequests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: http://tools.internal/s";
    let err = chat(1, tb);
    let c1 = 100 + EMPTY_ARGS_OUT;
    let c2 = (c1 + err) + EMPTY_ARGS_OUT;
    let c3 = (c1 + err + EMPTY_ARGS_OUT + chat(2, OK)) + DONE_OUT;
    Case {
        scenario: body,
        strategy: "raw-exception",
        ends: "answer",
        expect: [
            ("model_calls", 3),
            ("tool_calls", 2),
            ("wasted_retries", 0),
            ("orchestrator_retries", 0),
            ("model_transient_roundtrips", 1),
            ("breaker_trips", 0),
            ("faults_injected", 1),
            ("tokens", c1 + c2 + c3),
            ("virtual_ms", 3200),
            ("protocol_violations", 0),
            ("raw_leaks", 1),
        ],
    }
    .check();
}

/// A 400: the orchestrator never retries it; the model sends the named correction, which
/// passes. Arguments `{"q":"weather Paris"}` (21 bytes: 13 tokens out), fixed `{"q":"Paris"}`
/// (13 bytes: 11 out). t: 0–1000, 400 1000–1100, fix 1100–2100, ok 2100–2200, final 2200–3200.
/// A schema change is the same bad-arguments failure (the corrected call is the model's re-read
/// of the tools) with its own code and sentence: the same calls and time, its own tokens.
#[test]
fn a_400_or_a_schema_change_fixed_with_the_named_correction() {
    let cases = [
        (
            "http = 400",
            "INVALID_ARGS",
            "The s tool rejected the arguments (HTTP 400): fix the arguments and call it again.",
            r#""status":400,"tool":"s","attempts":1"#,
        ),
        (
            "fault = \"schema_drift\"",
            "SCHEMA_CHANGED",
            "The s tool's input schema changed since the tools were listed; list the tools again and call it with arguments that match the new schema.",
            r#""tool":"s","attempts":1"#,
        ),
    ];
    for (fault, code, message, details) in cases {
        let body = format!(
            "[task]\n[[task.steps]]\ntool = \"s\"\nargs = {{ q = \"weather Paris\" }}\nfixed_args = {{ q = \"Paris\" }}\nresult = \"ok\"\n{}[[faults]]\ntarget = \"s\"\nat = [1]\n{fault}\n",
            profile(&[])
        );
        let err = five(1, code, message, false, details, "tool");
        let c1 = 100 + 13;
        let c2 = (c1 + err) + 11;
        let c3 = (c1 + err + 11 + chat(2, OK)) + DONE_OUT;
        Case {
            scenario: body,
            strategy: "five-field",
            ends: "answer",
            expect: [
                ("model_calls", 3),
                ("tool_calls", 2),
                ("wasted_retries", 0),
                ("orchestrator_retries", 0),
                ("model_transient_roundtrips", 0),
                ("breaker_trips", 0),
                ("faults_injected", 1),
                ("tokens", c1 + c2 + c3),
                ("virtual_ms", 3200),
                ("protocol_violations", 0),
                ("raw_leaks", 0),
            ],
        }
        .check();
    }
}

/// A 400 the model cannot fix (`p_fix_args = 0`): each correction is new arguments that fail
/// again (the fault sticks to them), three corrections (`max_fix_attempts`), then it gives up.
/// No attempt is wasted: each changed the arguments. Arguments `{"q":"x"}` (10 out); the made-up
/// corrections `{"q":"x (corrected N)"}` are 23 bytes (13 out). t: model calls at 0, 1100, 2200,
/// 3300, 4400, each 1000 ms; the run ends at 5400.
#[test]
fn a_400_the_model_cannot_fix() {
    let body = format!(
        "[task]\n[[task.steps]]\ntool = \"s\"\nargs = {{ q = \"x\" }}\nresult = \"ok\"\n{}[[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 400\nparam = \"q\"\nmessage = \"query must name a city\"\n",
        profile(&[("p_fix_args", "0.0")])
    );
    let err = |id| chat(id, "ERROR: The s tool rejected argument 'q' (HTTP 400): query must name a city.");
    let c1 = 100 + 10;
    let c2 = (c1 + err(1)) + 13;
    let c3 = (c1 + err(1) + 13 + err(2)) + 13;
    let c4 = (c1 + err(1) + 13 + err(2) + 13 + err(3)) + 13;
    let c5 = (c1 + err(1) + 13 + err(2) + 13 + err(3) + 13 + err(4)) + GIVE_UP_OUT;
    Case {
        scenario: body,
        strategy: "error-string",
        ends: "gave_up",
        expect: [
            ("model_calls", 5),
            ("tool_calls", 4),
            ("wasted_retries", 0),
            ("orchestrator_retries", 0),
            ("model_transient_roundtrips", 0),
            ("breaker_trips", 0),
            ("faults_injected", 4),
            ("tokens", c1 + c2 + c3 + c4 + c5),
            ("virtual_ms", 5400),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// A 401: never retried by the orchestrator; the model reads it as terminal and gives up.
#[test]
fn a_401_given_up_at_once() {
    let body = format!("{ONE_CALL}{}[[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 401\n", profile(&[]));
    let err = five(
        1,
        "UNAUTHORIZED",
        "The s tool refused the call (HTTP 401 Unauthorized); retrying will not help.",
        false,
        r#""status":401,"tool":"s","attempts":1"#,
        "tool",
    );
    let c1 = 100 + EMPTY_ARGS_OUT;
    let c2 = (c1 + err) + GIVE_UP_OUT;
    Case {
        scenario: body,
        strategy: "five-field",
        ends: "gave_up",
        expect: [
            ("model_calls", 2),
            ("tool_calls", 1),
            ("wasted_retries", 0),
            ("orchestrator_retries", 0),
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

/// The 401 misread as transient (envelope accuracy 0): the model re-sends the identical call
/// three times (`max_model_retries`); the fault sticks to the tool, so each re-send is wasted.
/// A terminal failure is not transient: no transient round trips.
#[test]
fn a_401_misread_wastes_identical_resends() {
    let body = format!(
        "{ONE_CALL}{}[[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 401\n",
        profile(&[("perception.envelope", "0.0")])
    );
    let err = |id| {
        five(
            id,
            "UNAUTHORIZED",
            "The s tool refused the call (HTTP 401 Unauthorized); retrying will not help.",
            false,
            r#""status":401,"tool":"s","attempts":1"#,
            "tool",
        )
    };
    let c1 = 100 + EMPTY_ARGS_OUT;
    let c2 = (c1 + err(1)) + EMPTY_ARGS_OUT;
    let c3 = (c1 + err(1) + EMPTY_ARGS_OUT + err(2)) + EMPTY_ARGS_OUT;
    let c4 = (c1 + err(1) + EMPTY_ARGS_OUT + err(2) + EMPTY_ARGS_OUT + err(3)) + EMPTY_ARGS_OUT;
    let c5 = (c1 + err(1) + 3 * EMPTY_ARGS_OUT + err(2) + err(3) + err(4)) + GIVE_UP_OUT;
    Case {
        scenario: body,
        strategy: "five-field",
        ends: "gave_up",
        expect: [
            ("model_calls", 5),
            ("tool_calls", 4),
            ("wasted_retries", 3),
            ("orchestrator_retries", 0),
            ("model_transient_roundtrips", 0),
            ("breaker_trips", 0),
            ("faults_injected", 4),
            ("tokens", c1 + c2 + c3 + c4 + c5),
            ("virtual_ms", 5400),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// "More may be available", and a model that always asks again (`p_continue = 1`): the result
/// is complete in truth and sticks to the call, so every re-ask is wasted, until the step cap
/// (4 model turns) stops the run when the 4th result is in: t = 3·1100 + 1100 = 4400.
#[test]
fn an_ambiguous_result_loops_to_the_step_cap() {
    // With a cursor the result says more twice over (the note and `next_cursor`); following it
    // returns the same page, so the loop is the same with longer results.
    for (cursor, partial) in [("", PARTIAL_NOTE), ("cursor = true\n", PARTIAL_CURSOR)] {
        let body = format!(
            "{ONE_CALL}[policy]\nmax_steps = 4\n{}[[faults]]\ntarget = \"s\"\nat = [1]\nfault = \"ambiguous\"\n{cursor}",
            profile(&[("p_continue", "1.0")])
        );
        let p = |id| chat(id, partial);
        let c1 = 100 + EMPTY_ARGS_OUT;
        let c2 = (c1 + p(1)) + EMPTY_ARGS_OUT;
        let c3 = (c1 + p(1) + EMPTY_ARGS_OUT + p(2)) + EMPTY_ARGS_OUT;
        let c4 = (c1 + p(1) + p(2) + p(3) + 2 * EMPTY_ARGS_OUT) + EMPTY_ARGS_OUT;
        Case {
            scenario: body,
            strategy: "error-string",
            ends: "step_cap",
            expect: [
                ("model_calls", 4),
                ("tool_calls", 4),
                ("wasted_retries", 3),
                ("orchestrator_retries", 0),
                ("model_transient_roundtrips", 0),
                ("breaker_trips", 0),
                ("faults_injected", 4),
                ("tokens", c1 + c2 + c3 + c4),
                ("virtual_ms", 4400),
                ("protocol_violations", 0),
                ("raw_leaks", 0),
            ],
        }
        .check();
    }
}

/// The same result stated complete (five-field's `partials = "terminal"`) reads as done.
#[test]
fn an_ambiguous_result_stated_complete_ends_the_call() {
    let body = format!(
        "{ONE_CALL}{}[[faults]]\ntarget = \"s\"\nat = [1]\nfault = \"ambiguous\"\n",
        profile(&[("p_continue", "1.0")])
    );
    let c1 = 100 + EMPTY_ARGS_OUT;
    let c2 = (c1 + chat(1, r#"{"data":"ok","complete":true}"#)) + DONE_OUT;
    Case {
        scenario: body,
        strategy: "five-field",
        ends: "answer",
        expect: [
            ("model_calls", 2),
            ("tool_calls", 1),
            ("wasted_retries", 0),
            ("orchestrator_retries", 0),
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

/// A 429 with `retry-after: 5`, handed to the model: it answers at 1100 (refusing until
/// 6100). The model re-sends after each 1000 ms turn, at 2100, 3200 and 4300: all before
/// 6100, so the server refuses each with 429 and the remaining wait (4, 3, 2 s), and each is a
/// wasted retry. After three re-sends (`max_model_retries`) the model gives up at 4400 + 1000.
/// Every model turn after the first follows a rate-limited result: 4 transient round trips.
#[test]
fn a_429_resent_before_its_retry_after_is_refused_and_wasted() {
    let body =
        format!("{ONE_CALL}{}[[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 429\nretry_after_s = 5\n", profile(&[]));
    let err = |id, s| {
        chat(id, &format!("ERROR: The s tool is rate limited (HTTP 429 Too Many Requests); retry after {s} seconds."))
    };
    let c1 = 100 + EMPTY_ARGS_OUT;
    let c2 = (c1 + err(1, 5)) + EMPTY_ARGS_OUT;
    let c3 = (c1 + err(1, 5) + EMPTY_ARGS_OUT + err(2, 4)) + EMPTY_ARGS_OUT;
    let c4 = (c1 + err(1, 5) + err(2, 4) + err(3, 3) + 2 * EMPTY_ARGS_OUT) + EMPTY_ARGS_OUT;
    let c5 = (c1 + err(1, 5) + err(2, 4) + err(3, 3) + err(4, 2) + 3 * EMPTY_ARGS_OUT) + GIVE_UP_OUT;
    Case {
        scenario: body,
        strategy: "error-string",
        ends: "gave_up",
        expect: [
            ("model_calls", 5),
            ("tool_calls", 4),
            ("wasted_retries", 3),
            ("orchestrator_retries", 0),
            ("model_transient_roundtrips", 4),
            ("breaker_trips", 0),
            ("faults_injected", 4),
            ("tokens", c1 + c2 + c3 + c4 + c5),
            ("virtual_ms", 5400),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// A timeout's latency is its `after_ms`: attempt 1 runs 1000–6000, the retry 6000–6100, the
/// final call 6100–7100.
#[test]
fn a_timeout_takes_its_after_ms() {
    let body = format!(
        "{ONE_CALL}{}{}[[faults]]\ntarget = \"s\"\nat = [1]\nfault = \"timeout\"\nafter_ms = 5000\n",
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
            ("virtual_ms", 7100),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// `after_successes = 1`: the tool fails once it has succeeded once, and for good. Step 1
/// passes; step 2 fails, the model re-sends once (`max_model_retries = 1`), fails, gives up.
/// Arguments `{"n":1}` / `{"n":2}` (7 bytes: 9 tokens out). t: 0–1000, 1000–1100 ok,
/// 1100–2100, 2100–2200 503, 2200–3200, 3200–3300 503, 3300–4300 final.
#[test]
fn after_successes_fails_every_call_once_reached() {
    let body = format!(
        "[task]\n[[task.steps]]\ntool = \"s\"\nargs = {{ n = 1 }}\nresult = \"ok\"\n[[task.steps]]\ntool = \"s\"\nargs = {{ n = 2 }}\nresult = \"ok\"\n{}[[faults]]\ntarget = \"s\"\nafter_successes = 1\nhttp = 503\n",
        profile(&[("max_model_retries", "1")])
    );
    let err = |id| chat(id, &format!("ERROR: {S503}"));
    let c1 = 100 + 9;
    let c2 = (c1 + chat(1, OK)) + 9;
    let c3 = (c1 + chat(1, OK) + 9 + err(2)) + 9;
    let c4 = (c1 + chat(1, OK) + 9 + err(2) + 9 + err(3)) + GIVE_UP_OUT;
    Case {
        scenario: body,
        strategy: "error-string",
        ends: "gave_up",
        expect: [
            ("model_calls", 4),
            ("tool_calls", 3),
            ("wasted_retries", 0),
            ("orchestrator_retries", 0),
            ("model_transient_roundtrips", 2),
            ("breaker_trips", 0),
            ("faults_injected", 2),
            ("tokens", c1 + c2 + c3 + c4),
            ("virtual_ms", 4300),
            ("protocol_violations", 0),
            ("raw_leaks", 0),
        ],
    }
    .check();
}

/// `after_successes = 2` on the provider: its third call fails with 401, which no one retries,
/// so the run ends `gave_up` there. Model call 1 (t 0–1000) asks s {"n":1} (7 bytes: 9 tokens
/// out), the tool answers at 1100; model call 2 (1100–2100) asks s {"n":2}, answered at 2200;
/// model call 3 at 2200 is refused (no tokens) and ends the run at 2200.
#[test]
fn after_successes_counts_the_providers_successes() {
    let body = format!(
        "[task]\n[[task.steps]]\ntool = \"s\"\nargs = {{ n = 1 }}\nresult = \"ok\"\n[[task.steps]]\ntool = \"s\"\nargs = {{ n = 2 }}\nresult = \"ok\"\n[[task.steps]]\ntool = \"s\"\nargs = {{ n = 3 }}\nresult = \"ok\"\n{}[[faults]]\ntarget = \"provider\"\nafter_successes = 2\nhttp = 401\n",
        profile(&[])
    );
    let c1 = 100 + 9;
    let c2 = (c1 + chat(1, OK)) + 9;
    Case {
        scenario: body,
        strategy: "error-string",
        ends: "gave_up",
        expect: [
            ("model_calls", 3),
            ("tool_calls", 2),
            ("wasted_retries", 0),
            ("orchestrator_retries", 0),
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

/// An ambiguous result that sticks, under a strategy that passes "more may be available"
/// through: the model asks again with p = p_continue until it stops or the step cap (25 model
/// turns) ends the run. Tool calls are min(G, 25) with G ~ Geometric(1 − p), so
/// E[tool calls] = (1 − p²⁵)/(1 − p), and the run loops iff G ≥ 25: P = p²⁴.
#[test]
fn geometric_loop_of_p_continue() {
    let p: f64 = 0.93;
    let src = format!(
        "name = \"geo\"\nstrategies = [\"error-string\"]\n[profile]\np_continue = {p}\n[task]\n[[task.steps]]\ntool = \"find\"\n\
         [[faults]]\ntarget = \"find\"\nat = [1]\nfault = \"ambiguous\"\n"
    );
    let sc = load_str(&src, Path::new("geo.toml")).unwrap();
    let mut tool_calls = Vec::new();
    let mut loops = Vec::new();
    let mut agg = Aggregate::default();
    for run in 0..RUNS {
        let m = run_one(&sc, 0, run, &mut ());
        tool_calls.push(m.tool_calls as f64);
        loops.push(f64::from(u8::from(m.terminated_by().is_loop())));
        agg.add(&m, run);
    }
    let (mean, se) = mean_se(&tool_calls);
    let expect = (1.0 - p.powi(25)) / (1.0 - p);
    assert!((mean - expect).abs() < 3.0 * se, "tool calls {mean} ± {se}, expected {expect}");
    let (rate, se) = mean_se(&loops);
    let expect = p.powi(24);
    assert!((rate - expect).abs() < 3.0 * se, "loop rate {rate} ± {se}, expected {expect}");
    // The same fault under a strategy that states the result is complete: one call, no loop.
    let sc = load_str(&src.replace("error-string", "five-field"), Path::new("geo.toml")).unwrap();
    for run in 0..200 {
        let m = run_one(&sc, 0, run, &mut ());
        assert_eq!((m.tool_calls, m.model_calls), (1, 2));
    }
}
