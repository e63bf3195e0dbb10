//! Single runs checked against values derived by hand from the metric definitions (design 4),
//! never copied from output. Every case runs the real binary on a one-run scenario with a
//! deterministic profile (the model reads every signal right, retries transient failures,
//! gives up on terminal ones, fixes arguments, never re-asks after a partial unless told), so
//! each row of `runs.csv` follows from the events alone. The comment above each case walks the
//! run in virtual time; `tokens` follow the estimate: a model call's input is the context so
//! far (prompt + every earlier output + every delivered result, at 4 bytes a token), its
//! output is `args/4 + 8` per call it asks for, or `text/4 + 8` for the final message.

use crate::{tracefault, write};

/// The deterministic profile; `over` replaces lines by key.
fn profile(over: &[(&str, &str)]) -> String {
    let mut lines = vec![
        ("p_retry_transient", "1.0"),
        ("max_model_retries", "3"),
        ("p_give_up_terminal", "1.0"),
        ("p_fix_args", "1.0"),
        ("max_fix_attempts", "3"),
        ("p_continue", "0.0"),
        ("model_latency_ms", "1000"),
        ("tool_latency_ms", "100"),
        ("prompt_tokens", "100"),
    ];
    let mut perception = [
        ("envelope", "1.0"),
        ("flag", "1.0"),
        ("object", "1.0"),
        ("prefix", "1.0"),
        ("raw", "1.0"),
        ("unmarked", "1.0"),
    ];
    for (k, v) in over {
        if let Some(p) = k.strip_prefix("perception.") {
            perception.iter_mut().filter(|l| l.0 == p).for_each(|l| l.1 = v);
        } else {
            lines.iter_mut().filter(|l| l.0 == *k).for_each(|l| l.1 = v);
        }
    }
    let mut s = String::from("[profile]\n");
    lines.iter().for_each(|(k, v)| s.push_str(&format!("{k} = {v}\n")));
    s.push_str("[profile.perception]\n");
    perception.iter().for_each(|(k, v)| s.push_str(&format!("{k} = {v}\n")));
    s
}

/// One tool `s`, no arguments, result "ok", answer "Done.".
const ONE_CALL: &str = "[task]\n[[task.steps]]\ntool = \"s\"\nresult = \"ok\"\n";

/// A row of `runs.csv` from `terminated_by` on.
#[derive(Debug, PartialEq)]
struct Row {
    terminated_by: &'static str,
    model_calls: u64,
    tool_calls: u64,
    wasted_retries: u64,
    orchestrator_retries: u64,
    model_transient_roundtrips: u64,
    breaker_trips: u64,
    faults_injected: u64,
    tokens: u64,
    virtual_ms: u64,
    protocol_violations: u64,
    raw_leaks: u64,
}

/// Runs run 0 of `scenario` under `strategy` and checks its `runs.csv` row, `calls` included.
fn check(head: &str, strategy: &str, body: &str, expected: Row) {
    let dir = tempfile::tempdir().unwrap();
    let src = format!("name = \"oracle\"\nruns = 1\n{head}\n{body}");
    let sc = write(dir.path(), "s.toml", &src);
    let out = dir.path().join("out");
    let o = tracefault().arg("run").arg(&sc).args(["--strategy", strategy, "--out"]).arg(&out).output().unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}\n{src}", String::from_utf8_lossy(&o.stderr));
    let runs = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let line = runs
        .lines()
        .find(|l| l.starts_with(&format!("oracle,{strategy},0,")))
        .unwrap_or_else(|| panic!("no row for {strategy}:\n{runs}"));
    let c: Vec<&str> = line.split(',').collect();
    let n = |i: usize| c[i].parse::<u64>().unwrap();
    let got = Row {
        terminated_by: Box::leak(c[4].to_owned().into_boxed_str()),
        model_calls: n(6),
        tool_calls: n(7),
        wasted_retries: n(8),
        orchestrator_retries: n(9),
        model_transient_roundtrips: n(10),
        breaker_trips: n(11),
        faults_injected: n(12),
        tokens: n(13),
        virtual_ms: n(14),
        protocol_violations: n(15),
        raw_leaks: n(16),
    };
    assert_eq!(got, expected, "{strategy}\n{src}");
    assert_eq!(n(5), expected.model_calls + expected.tool_calls, "calls = model_calls + tool_calls");
}

/// Tokens of an OpenAI Chat tool message holding `content`: its bytes / 4.
fn chat(id: u32, content: &str) -> u64 {
    let msg = format!(
        r#"{{"role":"tool","tool_call_id":"call_{id}","content":{}}}"#,
        serde_json::to_string(content).unwrap()
    );
    msg.len() as u64 / 4
}

/// Tokens of the five-field envelope for a failure of tool `s`, as a Chat tool message.
fn five(id: u32, code: &str, message: &str, retryable: bool, details: &str, source: &str) -> u64 {
    chat(
        id,
        &format!(
            r#"{{"code":"{code}","message":"{message}","retryable":{retryable},"details":{{{details}}},"source":"{source}"}}"#
        ),
    )
}

const OK: &str = "ok";
const DONE_OUT: u64 = 5 / 4 + 8; // "Done."
const GIVE_UP_OUT: u64 = 30 / 4 + 8; // "I could not complete the task."
/// `{}`: 2 bytes, 0 tokens, plus 8.
const EMPTY_ARGS_OUT: u64 = 8;
const S503: &str =
    "The s tool is temporarily unavailable (HTTP 503 Service Unavailable); the same call may succeed later.";

fn policy_no_backoff() -> &'static str {
    "[policy]\nretry = { backoff = \"none\" }\n"
}

/// A 503 once, then success; the orchestrator retries at once (no backoff). t: model call
/// 0–1000, attempt 1 1000–1100 (503), attempt 2 1100–1200 (ok, delivered), final call
/// 1200–2200. Tokens: 100+8, then (108 + ok) + 9.
#[test]
fn a_503_retried_by_the_orchestrator() {
    let body =
        format!("{ONE_CALL}{}{}[[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 503\n", policy_no_backoff(), profile(&[]));
    let first = 100 + EMPTY_ARGS_OUT;
    let tokens = first + (first + chat(1, OK) + DONE_OUT);
    check(
        "",
        "five-field",
        &body,
        Row {
            terminated_by: "answer",
            model_calls: 2,
            tool_calls: 2,
            wasted_retries: 0,
            orchestrator_retries: 1,
            model_transient_roundtrips: 0,
            breaker_trips: 0,
            faults_injected: 1,
            tokens,
            virtual_ms: 2200,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
}

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
    check(
        "",
        "error-string",
        &body,
        Row {
            terminated_by: "answer",
            model_calls: 3,
            tool_calls: 2,
            wasted_retries: 0,
            orchestrator_retries: 0,
            model_transient_roundtrips: 1,
            breaker_trips: 0,
            faults_injected: 1,
            tokens: c1 + c2 + c3,
            virtual_ms: 3200,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        "",
        "raw-exception",
        &body,
        Row {
            terminated_by: "answer",
            model_calls: 3,
            tool_calls: 2,
            wasted_retries: 0,
            orchestrator_retries: 0,
            model_transient_roundtrips: 1,
            breaker_trips: 0,
            faults_injected: 1,
            tokens: c1 + c2 + c3,
            virtual_ms: 3200,
            protocol_violations: 0,
            raw_leaks: 1,
        },
    );
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
        check(
            "",
            "five-field",
            &body,
            Row {
                terminated_by: "answer",
                model_calls: 3,
                tool_calls: 2,
                wasted_retries: 0,
                orchestrator_retries: 0,
                model_transient_roundtrips: 0,
                breaker_trips: 0,
                faults_injected: 1,
                tokens: c1 + c2 + c3,
                virtual_ms: 3200,
                protocol_violations: 0,
                raw_leaks: 0,
            },
        );
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
    check(
        "",
        "error-string",
        &body,
        Row {
            terminated_by: "gave_up",
            model_calls: 5,
            tool_calls: 4,
            wasted_retries: 0,
            orchestrator_retries: 0,
            model_transient_roundtrips: 0,
            breaker_trips: 0,
            faults_injected: 4,
            tokens: c1 + c2 + c3 + c4 + c5,
            virtual_ms: 5400,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        "",
        "five-field",
        &body,
        Row {
            terminated_by: "gave_up",
            model_calls: 2,
            tool_calls: 1,
            wasted_retries: 0,
            orchestrator_retries: 0,
            model_transient_roundtrips: 0,
            breaker_trips: 0,
            faults_injected: 1,
            tokens: c1 + c2,
            virtual_ms: 2100,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        "",
        "five-field",
        &body,
        Row {
            terminated_by: "gave_up",
            model_calls: 5,
            tool_calls: 4,
            wasted_retries: 3,
            orchestrator_retries: 0,
            model_transient_roundtrips: 0,
            breaker_trips: 0,
            faults_injected: 4,
            tokens: c1 + c2 + c3 + c4 + c5,
            virtual_ms: 5400,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
}

const PARTIAL_NOTE: &str = r#"{"data":"ok","note":"More results may be available."}"#;
const PARTIAL_CURSOR: &str = r#"{"data":"ok","note":"More results may be available.","next_cursor":"page-2"}"#;

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
        check(
            "",
            "error-string",
            &body,
            Row {
                terminated_by: "step_cap",
                model_calls: 4,
                tool_calls: 4,
                wasted_retries: 3,
                orchestrator_retries: 0,
                model_transient_roundtrips: 0,
                breaker_trips: 0,
                faults_injected: 4,
                tokens: c1 + c2 + c3 + c4,
                virtual_ms: 4400,
                protocol_violations: 0,
                raw_leaks: 0,
            },
        );
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
    check(
        "",
        "five-field",
        &body,
        Row {
            terminated_by: "answer",
            model_calls: 2,
            tool_calls: 1,
            wasted_retries: 0,
            orchestrator_retries: 0,
            model_transient_roundtrips: 0,
            breaker_trips: 0,
            faults_injected: 1,
            tokens: c1 + c2,
            virtual_ms: 2100,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        "",
        "error-string",
        &body,
        Row {
            terminated_by: "gave_up",
            model_calls: 5,
            tool_calls: 4,
            wasted_retries: 3,
            orchestrator_retries: 0,
            model_transient_roundtrips: 4,
            breaker_trips: 0,
            faults_injected: 4,
            tokens: c1 + c2 + c3 + c4 + c5,
            virtual_ms: 5400,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        "",
        "five-field",
        &body,
        Row {
            terminated_by: "answer",
            model_calls: 2,
            tool_calls: 2,
            wasted_retries: 0,
            orchestrator_retries: 1,
            model_transient_roundtrips: 0,
            breaker_trips: 0,
            faults_injected: 1,
            tokens: c1 + c2,
            virtual_ms: 7200,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        head,
        "impatient",
        &body,
        Row {
            terminated_by: "answer",
            model_calls: 5,
            tool_calls: 10,
            wasted_retries: 8,
            orchestrator_retries: 6,
            model_transient_roundtrips: 3,
            breaker_trips: 0,
            faults_injected: 9,
            tokens: c1 + c2 + c3 + c4 + c5,
            virtual_ms: 6000,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        "",
        "five-field-guarded",
        &body,
        Row {
            terminated_by: "breaker_abort",
            model_calls: 3,
            tool_calls: 3,
            wasted_retries: 0,
            orchestrator_retries: 2,
            model_transient_roundtrips: 2,
            breaker_trips: 1,
            faults_injected: 3,
            tokens: c1 + c2 + c3,
            virtual_ms: 3300,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        "",
        "five-field-guarded",
        &body,
        Row {
            terminated_by: "answer",
            model_calls: 3,
            tool_calls: 3,
            wasted_retries: 0,
            orchestrator_retries: 1,
            model_transient_roundtrips: 1,
            breaker_trips: 1,
            faults_injected: 2,
            tokens: c1 + c2 + c3,
            virtual_ms: 6300,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        "",
        "five-field",
        &body,
        Row {
            terminated_by: "answer",
            model_calls: 2,
            tool_calls: 3,
            wasted_retries: 0,
            orchestrator_retries: 1,
            model_transient_roundtrips: 0,
            breaker_trips: 0,
            faults_injected: 1,
            tokens: c1 + c2,
            virtual_ms: 2200,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        "",
        "error-string",
        &body,
        Row {
            terminated_by: "answer",
            model_calls: 3,
            tool_calls: 1,
            wasted_retries: 0,
            orchestrator_retries: 1,
            model_transient_roundtrips: 0,
            breaker_trips: 0,
            faults_injected: 1,
            tokens: c1 + c2,
            virtual_ms: 2100,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        "",
        "five-field-guarded",
        &body,
        Row {
            terminated_by: "token_budget",
            model_calls: 1,
            tool_calls: 2,
            wasted_retries: 0,
            orchestrator_retries: 1,
            model_transient_roundtrips: 0,
            breaker_trips: 0,
            faults_injected: 1,
            tokens: 100 + EMPTY_ARGS_OUT,
            virtual_ms: 1200,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
}

/// The time budget is checked before each model call with its latency: at 1200 the final call
/// would end at 2200 > 2000, so the run stops at 1200.
#[test]
fn a_time_budget_stops_before_the_call_that_would_exceed_it() {
    let body = format!(
        "{ONE_CALL}[policy]\nmax_virtual_ms = 2000\nretry = {{ backoff = \"none\" }}\n{}[[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 503\n",
        profile(&[])
    );
    check(
        "",
        "five-field-guarded",
        &body,
        Row {
            terminated_by: "time_budget",
            model_calls: 1,
            tool_calls: 2,
            wasted_retries: 0,
            orchestrator_retries: 1,
            model_transient_roundtrips: 0,
            breaker_trips: 0,
            faults_injected: 1,
            tokens: 100 + EMPTY_ARGS_OUT,
            virtual_ms: 1200,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
}

/// A timeout in flight past the time budget: the attempt at 1000 would take 5000 ms; the
/// agent's deadline stops the run at the budget, 3000, not later.
#[test]
fn a_slow_call_in_flight_is_cut_at_the_time_budget() {
    let body = format!(
        "{ONE_CALL}[policy]\nmax_virtual_ms = 3000\n{}[[faults]]\ntarget = \"s\"\nat = [1]\nfault = \"timeout\"\nafter_ms = 5000\n",
        profile(&[])
    );
    check(
        "",
        "five-field-guarded",
        &body,
        Row {
            terminated_by: "time_budget",
            model_calls: 1,
            tool_calls: 1,
            wasted_retries: 0,
            orchestrator_retries: 0,
            model_transient_roundtrips: 0,
            breaker_trips: 0,
            faults_injected: 1,
            tokens: 100 + EMPTY_ARGS_OUT,
            virtual_ms: 3000,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        "",
        "five-field",
        &body,
        Row {
            terminated_by: "answer",
            model_calls: 2,
            tool_calls: 2,
            wasted_retries: 0,
            orchestrator_retries: 1,
            model_transient_roundtrips: 0,
            breaker_trips: 0,
            faults_injected: 1,
            tokens: c1 + c2,
            virtual_ms: 7100,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        head,
        "guarded-prefix",
        &body,
        Row {
            terminated_by: "loop_guard",
            model_calls: 3,
            tool_calls: 3,
            wasted_retries: 2,
            orchestrator_retries: 0,
            model_transient_roundtrips: 0,
            breaker_trips: 0,
            faults_injected: 3,
            tokens: c1 + c2 + c3,
            virtual_ms: 3300,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        "",
        "error-string",
        &body,
        Row {
            terminated_by: "gave_up",
            model_calls: 4,
            tool_calls: 3,
            wasted_retries: 0,
            orchestrator_retries: 0,
            model_transient_roundtrips: 2,
            breaker_trips: 0,
            faults_injected: 2,
            tokens: c1 + c2 + c3 + c4,
            virtual_ms: 4300,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        "",
        "five-field",
        &body,
        Row {
            terminated_by: "answer",
            model_calls: 4,
            tool_calls: 4,
            wasted_retries: 0,
            orchestrator_retries: 1,
            model_transient_roundtrips: 2,
            breaker_trips: 0,
            faults_injected: 3,
            tokens: c1 + c2 + c3 + c4,
            virtual_ms: 4400,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
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
    check(
        "",
        "error-string",
        &body,
        Row {
            terminated_by: "gave_up",
            model_calls: 3,
            tool_calls: 2,
            wasted_retries: 0,
            orchestrator_retries: 0,
            model_transient_roundtrips: 0,
            breaker_trips: 0,
            faults_injected: 1,
            tokens: c1 + c2,
            virtual_ms: 2200,
            protocol_violations: 0,
            raw_leaks: 0,
        },
    );
}
