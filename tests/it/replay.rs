//! `tracefault replay` and `calibrate` against the corpus.

use predicates::prelude::*;

use crate::support::csv::Table;
use crate::{corpus, tracefault, write};

#[test]
fn as_recorded_reproduces_all_200_tau_bench_conversations() {
    tracefault()
        .arg("replay")
        .arg(corpus().join("tau-bench_gpt-4o-airline.json"))
        .arg("--as-recorded-only")
        .assert()
        .code(0)
        .stdout(predicate::str::contains("as-recorded: 200 of 200 conversation(s) reproduced exactly"));
}

#[test]
fn as_recorded_reproduces_cassettes_spans_and_legacy_chat() {
    for f in [
        "pydantic-ai_openai-chat_temporal_agent_with_model_retry.yaml",
        "pydantic-ai_openai-responses_model_retry.yaml",
        "pydantic-ai_anthropic-messages_tool_search_eval.yaml",
        "pydantic-ai_gemini_model_retry.yaml",
        "otel-contrib_openai-chat_tool_calls_with_content.yaml",
        "otel-genai-spans_from_otel-contrib_tool_calls_cassette.otlp.json",
        "otel-genai-spans_from_pydantic-ai_retry_cassette.otlp.json",
    ] {
        tracefault()
            .arg("replay")
            .arg(corpus().join(f))
            .arg("--as-recorded-only")
            .assert()
            .code(0)
            .stdout(predicate::str::contains("reproduced exactly"));
    }
    tracefault()
        .arg("replay")
        .arg(corpus().join("toolbench_G2_10_ChatGPT_DFS_woFilter_w2.json"))
        .args(["--select", "/answer_generation/train_messages/3", "--as-recorded-only"])
        .assert()
        .code(0);
}

#[test]
fn as_recorded_prints_both_sides() {
    tracefault()
        .arg("replay")
        .arg(corpus().join("tau-bench_gpt-4o-airline.subset5.json"))
        .args(["--select", "/0/traj", "--as-recorded-only"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("  identical repeats of failing calls            3          3"));
}

#[test]
fn what_if_writes_reports_and_names_the_first_divergence() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    tracefault()
        .arg("replay")
        .arg(corpus().join("pydantic-ai_openai-chat_temporal_agent_with_model_retry.yaml"))
        .args([
            "--runs",
            "50",
            "--strategy",
            "as-recorded",
            "--strategy",
            "raw-exception",
            "--strategy",
            "five-field",
            "--out",
        ])
        .arg(&out)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("five-field: "))
        .stdout(predicate::str::contains("raw-exception: "));
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert!(summary.contains("pydantic-ai_openai-chat_temporal_agent_with_model_retry,five-field,50,"), "{summary}");
}

#[test]
fn calibrate_writes_a_profile_scenarios_can_use() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("fitted.toml");
    tracefault()
        .arg("calibrate")
        .arg(corpus().join("tau-bench_gpt-4o-airline.json"))
        .arg("-o")
        .arg(&profile)
        .assert()
        .code(0)
        // Counted from the raw file by hand (a short script over `traj`: a tool message starting
        // "Error" is a failure, terminal when it says "not found"; the next assistant turn with
        // tool calls decides): of 66 bad-argument failures, 24 were followed by the same tool
        // with changed arguments only, and 9 of those changed calls succeeded; of 7 terminal
        // failures, 5 were not followed by the same tool. Their 95% Wilson intervals, by hand:
        // 9/24 → [0.21159, 0.57290], 5/7 → [0.35893, 0.91778]; a default keeps its plausible range.
        .stdout(predicate::str::contains(
            "p_fix_args = { value = 0.375, range = [0.211, 0.573] } # 9 of 24 argument changes",
        ))
        .stdout(predicate::str::contains(
            "p_give_up_terminal = { value = 0.714, range = [0.358, 0.918] } # 5 of 7 terminal failures",
        ))
        .stdout(predicate::str::contains(
            "p_continue = { value = 0.93, range = [0.8, 0.97] } # default kept: 0 observations",
        ));
    // `profile = "…"` resolves next to the scenario file, and the fitted figures are the ones used.
    let sc = write(dir.path(), "s.toml", &format!("profile = \"fitted.toml\"\n{}", crate::MINIMAL));
    let out = tracefault().arg("run").arg(&sc).arg("--out").arg(dir.path().join("o")).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("o/report.json")).unwrap()).unwrap();
    let profile = &report["scenarios"][0]["profile"];
    assert_eq!(profile["name"], "calibrated");
    assert_eq!(profile["p_fix_args"], 0.375);
    assert_eq!(profile["p_give_up_terminal"], 0.714);
    assert_eq!(profile["max_fix_attempts"], 4);
    assert_eq!(profile["ranges"]["p_fix_args"], serde_json::json!([0.211, 0.573]), "the report says the ranges");
    // A range that does not hold is bad input naming the parameter.
    let bad = std::fs::read_to_string(dir.path().join("fitted.toml")).unwrap().replace("[0.211, 0.573]", "[0.6, 0.5]");
    std::fs::write(dir.path().join("fitted.toml"), bad).unwrap();
    let out = tracefault().arg("validate").arg(&sc).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("p_fix_args: expected a range [LO, HI] with LO <= HI, got [0.6, 0.5]"), "{err}");
}

/// `profile = "calibrated"` fits the profile from the scenario's own trace.
#[test]
fn a_scenario_can_calibrate_its_profile_from_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let sc = write(
        dir.path(),
        "s.toml",
        &format!(
            "name = \"c\"\nruns = 10\nprofile = \"calibrated\"\ntrace = \"{}\"\n",
            crate::root().join("traces/ambiguous-search.jsonl").display()
        ),
    );
    tracefault().arg("run").arg(&sc).arg("--out").arg(dir.path().join("o")).assert().code(0);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("o/report.json")).unwrap()).unwrap();
    let profile = &report["scenarios"][0]["profile"];
    // 13 partial results: 12 followed by the identical call, the last by the answer.
    assert_eq!(profile["name"], "calibrated");
    assert_eq!(profile["p_continue"], 0.923);
    // A `[task]` scenario has no trace to fit from.
    let bad = write(dir.path(), "b.toml", &format!("profile = \"calibrated\"\n{}", crate::MINIMAL));
    tracefault()
        .arg("run")
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("only in a scenario with `trace"));
}

/// Design 3.6: every strategy in a comparison gets the same simulated model. A scenario that
/// replays the worked-example trace gives exactly the numbers of the same task and faults
/// written as a `[task]` (same name, so same draws); the recording adds only its own
/// `recorded` row, whose figures are counted from the trace.
#[test]
fn a_replayed_trace_gives_every_strategy_the_profile_and_shows_the_recording_apart() {
    let dir = tempfile::tempdir().unwrap();
    let traced = write(
        dir.path(),
        "traced.toml",
        &format!(
            "name = \"w\"\nseed = 7\nruns = 300\ntrace = \"{}\"\n",
            crate::root().join("traces/search-503-503-400.jsonl").display()
        ),
    );
    let tasked = write(
        dir.path(),
        "tasked.toml",
        r#"name = "w"
seed = 7
runs = 300
[task]
answer = "It is 18 °C in Paris."
[[task.steps]]
tool = "search"
args = { query = "weather Paris" }
fixed_args = { query = "Paris" }
result = { city = "Paris", temp_c = 18 }
[[faults]]
target = "search"
at = [1]
http = 503
[[faults]]
target = "search"
at = [2]
http = 503
[[faults]]
target = "search"
at = [3]
http = 400
"#,
    );
    let summary = |sc: &std::path::Path, out: &str| {
        let o = dir.path().join(out);
        tracefault().arg("run").arg(sc).arg("--out").arg(&o).assert().code(0);
        std::fs::read_to_string(o.join("summary.csv")).unwrap()
    };
    let a = summary(&traced, "a");
    let b = summary(&tasked, "b");
    let (recorded, strategies): (Vec<&str>, Vec<&str>) = a.lines().partition(|l| l.starts_with("w,recorded,"));
    assert_eq!(strategies, b.lines().collect::<Vec<_>>());
    // recorded: 1 run, answered; 5 model calls + 4 tool calls; no wasted retries (the 400 was
    // never repeated identically); the delta columns are empty (it is not paired).
    assert_eq!(recorded.len(), 1);
    let table = Table::parse(&a);
    let r = table.row(&[("scenario", "w"), ("strategy", "recorded")]);
    let cells = |columns: &[&str]| columns.iter().map(|c| r[*c].as_str()).collect::<Vec<_>>();
    assert_eq!(cells(&["runs", "success_rate", "loop_rate"]), ["1", "1.0000", "0.0000"], "{r:?}");
    assert_eq!(r["calls_mean"], "9.000", "{r:?}");
    assert_eq!(r["wasted_retries"], "0", "{r:?}");
    assert_eq!(cells(&["calls_delta_vs_baseline", "calls_delta_lo", "calls_delta_hi"]), ["", "", ""], "{r:?}");
    // One agent, which answered.
    assert_eq!(cells(&["agents", "agents_succeeded_rate"]), ["1", "1.0000"], "{r:?}");
}
