//! `exec` as a release gate: the user's agent gets `run`'s report set with itself as the row,
//! `[[gates]]` and the checklist decide the exit code, a baseline compares two agents' folders,
//! and requests to other hosts fail the checklist. Expected counts are derived by hand from the
//! scenario and the reference agent's documented behaviour.

use std::path::Path;

use predicates::prelude::PredicateBooleanExt;
use serde_json::Value;

use crate::support::csv::{Row, Table};
use crate::wire::{exec, reference_agent};
use crate::{tracefault, write};

/// One tool, one call; its first attempt meets a 503. The reference agent (five-field) retries
/// a retryable failure itself, so each run is: model call 1 (asks for `search`), tool attempt 1
/// (503), tool attempt 2 (200), model call 2 (answers) — 2 model calls, 2 tool calls, 1 fault,
/// 1 retry of the agent's own, an answer.
fn scenario(dir: &Path, gates: &str) -> String {
    let text = format!(
        "name = \"agent-gate\"\n[task]\n[[task.steps]]\ntool = \"search\"\nargs = {{ q = \"x\" }}\n\
         result = {{ n = 1 }}\n[[faults]]\ntarget = \"search\"\nat = [1]\nhttp = 503\n{gates}"
    );
    write(dir, "agent-gate.toml", &text).display().to_string()
}

const GATES: &str = "[[gates]]\nstrategy = \"*\"\nmetric = \"success_rate\"\nmin = 0.95\n\
                     [[gates]]\nstrategy = \"*\"\nmetric = \"tool_calls_mean\"\nmax = 1.5\n";

fn cmd() -> Vec<String> {
    vec![
        reference_agent().display().to_string(),
        "--format".into(),
        "openai-chat".into(),
        "--strategy".into(),
        "five-field".into(),
    ]
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The rows of a CSV file as maps from column to value.
fn csv_rows(path: &Path) -> Vec<Row> {
    Table::read(path).rows
}

#[test]
fn exec_writes_runs_report_set_and_its_gates_decide_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let sc = scenario(dir.path(), GATES);
    let out = dir.path().join("first");
    let (code, report, stdout) = exec(&sc, &out, &refs(&cmd()), &["--runs", "2"]);
    // tool_calls_mean is 2 (503, then the agent's retry) > 1.5: the gate fails, the checks pass.
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("GATE FAILED agent-gate / reference_agent: tool_calls_mean = 2 is not <= 1.5"), "{stdout}");
    assert!(
        stdout.contains("answered 2/2 · gave up 0 · looped 0 · step cap 0 · stopped midway 0 · crashed 0"),
        "{stdout}"
    );
    assert!(stdout.contains("FAIL: 1 of 2 gates failed, 0 of 8 checks failed"), "{stdout}");
    assert_eq!(report["passed"], false);
    for f in ["summary.csv", "runs.csv", "report.json", "report.md", "junit.xml", "report.html", "exec.json"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    assert!(out.join("traces/run-1.jsonl").is_file() && out.join("agent-run-1.log").is_file());

    // runs.csv: one row per run, the agent as the strategy, counts as derived above.
    let runs = csv_rows(&out.join("runs.csv"));
    assert_eq!(runs.len(), 2);
    for (i, r) in runs.iter().enumerate() {
        let want = [
            ("scenario", "agent-gate"),
            ("strategy", "reference_agent"),
            ("terminated_by", "answer"),
            ("calls", "4"),
            ("model_calls", "2"),
            ("tool_calls", "2"),
            ("orchestrator_retries", "1"),
            ("faults_injected", "1"),
            ("agents", "1"),
            ("agents_succeeded", "1"),
            // 4 calls over 3 first attempts (2 model calls, the tool call's first issue).
            ("retry_amplification", "1.333"),
        ];
        for (col, v) in want {
            assert_eq!(r[col], v, "run {i}, {col}");
        }
        assert_eq!(r["run"], i.to_string());
    }
    // summary.csv: the agent's row, by the same definitions as a strategy's.
    let summary = csv_rows(&out.join("summary.csv"));
    assert_eq!(summary.len(), 1);
    assert_eq!((summary[0]["strategy"].as_str(), summary[0]["success_rate"].as_str()), ("reference_agent", "1.0000"));
    assert_eq!(summary[0]["tool_calls_mean"], "2.000");

    // junit.xml: the gates and the eight checks as test cases (N/A ones skipped).
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(junit.contains(r#"<testsuite name="checks" tests="8" failures="0">"#), "{junit}");
    assert_eq!(junit.matches("<skipped").count(), 2, "checks 3 and 4 do not apply: {junit}");
    assert!(junit.contains("tool_calls_mean"), "{junit}");
    // report.md and report.json carry the agent's part.
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Agent") && md.contains("Outcome: answered 2/2"), "{md}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["agent"]["checks"].as_array().unwrap().len(), 8);

    // A second version of the agent against the first's folder: the comparison runs, `diff`
    // reads both folders.
    let second = dir.path().join("second");
    let (_, _, stdout) = exec(
        &sc,
        &second,
        &refs(&cmd()),
        &["--runs", "2", "--baseline", out.to_str().unwrap(), "--label", "reference_agent"],
    );
    assert!(stdout.to_lowercase().contains("baseline"), "{stdout}");
    tracefault().arg("diff").arg(&out).arg(&second).assert().code(0);
}

#[test]
fn checks_that_do_not_apply_say_why_and_gates_on_simulated_strategies_are_named_as_unchecked() {
    let dir = tempfile::tempdir().unwrap();
    let sc = scenario(dir.path(), "[[gates]]\nstrategy = \"five-field\"\nmetric = \"success_rate\"\nmin = 0.99\n");
    let out = dir.path().join("o");
    let o = tracefault()
        .args(["exec", &sc, "--out"])
        .arg(&out)
        .args(["--label", "my agent", "--"])
        .args(cmd())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("is on the simulated strategy `five-field`, not on the agent (`my agent`): not checked"),
        "{stderr}"
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("exec.json")).unwrap()).unwrap();
    let result = |n: usize| report["checks"][n]["result"].as_str().unwrap().to_owned();
    assert_eq!(result(2), "N/A");
    assert_eq!(report["checks"][2]["details"][0], "the agent sent no Anthropic request");
    assert_eq!(report["checks"][3]["details"][0], "--json-envelope not given");
    assert_eq!((result(0), result(5), result(7)), ("PASS".into(), "PASS".into(), "PASS".into()));
    assert_eq!(csv_rows(&out.join("summary.csv"))[0]["strategy"], "my agent");
}

#[test]
fn a_gate_exec_cannot_compute_is_bad_input_before_the_agent_runs() {
    let dir = tempfile::tempdir().unwrap();
    let sc = scenario(dir.path(), "[[gates]]\nstrategy = \"*\"\nmetric = \"breaker_trips_per_run\"\nmax = 0\n");
    let marker = dir.path().join("ran");
    tracefault()
        .args(["exec", &sc, "--out"])
        .arg(dir.path().join("o"))
        .args(["--", "touch"])
        .arg(&marker)
        .assert()
        .code(2)
        .stderr(
            predicates::str::contains("breaker_trips_per_run").and(predicates::str::contains("exec cannot compute it")),
        );
    assert!(!marker.exists(), "the agent was not started");
}

/// A request to a host other than the mocks (sent through the proxy variables exec sets) fails
/// check 8 and is listed on the terminal and in report.md; `--allow-elsewhere` lets it pass.
#[test]
fn a_request_to_another_host_fails_the_checklist_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let sc = scenario(dir.path(), "");
    let script = format!(
        "python3 -c \"import urllib.request\ntry: urllib.request.urlopen('http://telemetry.example.test/v1/ping', timeout=5)\n\
         except Exception: pass\" ; exec {}",
        cmd().join(" ")
    );
    let agent = ["sh", "-c", script.as_str()];
    let out = dir.path().join("o");
    let (code, report, stdout) = exec(&sc, &out, &agent, &["--label", "chatty"]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("FAIL 8. every request goes to the mocks"), "{stdout}");
    assert!(stdout.contains("request to another host: run 0: telemetry.example.test"), "{stdout}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("telemetry.example.test"), "{md}");
    assert_eq!(report["checks"][7]["result"], "FAIL");

    let out = dir.path().join("allowed");
    let (code, report, stdout) =
        exec(&sc, &out, &agent, &["--label", "chatty", "--allow-elsewhere", "telemetry.example.test"]);
    assert_eq!(code, 0, "{stdout} {}", report["checks"]);
    assert!(stdout.contains("request to another host: run 0: telemetry.example.test"), "{stdout}");
}

/// A first CI run has no baseline folder yet: a warning, reports written, the exit code from
/// the gates and checks.
#[test]
fn exec_with_a_baseline_that_is_not_there_yet_warns_and_writes_its_reports() {
    let dir = tempfile::tempdir().unwrap();
    let sc = scenario(dir.path(), "[[gates]]\nstrategy = \"*\"\nmetric = \"success_rate\"\nmax_increase = 0.5\n");
    let out = dir.path().join("o");
    let o = tracefault()
        .args(["exec", &sc, "--out"])
        .arg(&out)
        .arg("--baseline")
        .arg(dir.path().join("previous"))
        .arg("--")
        .args(cmd())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("warning: the baseline"), "{stderr}");
    assert!(out.join("summary.csv").is_file());
}
