//! The tau2 importer on results written by hand from tau2-bench's pydantic models (the package
//! is not on PyPI, so no run could make them): counts derived by hand from the files' own
//! fields (`tests/fixtures/tau2/README.md`).

use std::path::PathBuf;

use serde_json::Value;

use crate::{corpus, tracefault};

fn fixture(name: &str) -> PathBuf {
    crate::traces::fixture("tau2", name)
}

/// The `inspect --json` lines of a file, and what it said on stderr.
fn inspect(path: &std::path::Path, extra: &[&str]) -> (Vec<Value>, String) {
    crate::traces::inspect_json(path, extra)
}

/// (id, model calls, tool calls, failures, ended, reason, success)
fn counts(v: &Value) -> (&str, u64, u64, u64, &str, Option<&str>, Option<bool>) {
    (
        v["id"].as_str().unwrap(),
        v["model_calls"].as_u64().unwrap(),
        v["tool_calls"].as_u64().unwrap(),
        v["tool_failures"].as_u64().unwrap(),
        v["ended"].as_str().unwrap(),
        v["ended_reason"].as_str(),
        v["success"].as_bool(),
    )
}

#[test]
fn a_results_file_with_two_simulations() {
    // By hand (README): sim-0001 has 3 assistant messages, the first the canned greeting (no
    // usage, no raw_data): 2 model calls; its 2 tool calls sit in one message; 1 tool message
    // has `error: true`; termination_reason user_stop, reward_info.reward 0.0.
    // sim-0002: 3 assistant messages less the greeting = 2; 1 tool call, `error: false`;
    // user_stop, reward 1.0.
    let (v, stderr) = inspect(&fixture("airline_two_sims.json"), &[]);
    assert!(stderr.contains("read as tau2 (2 conversation(s))"), "{stderr}");
    assert_eq!(
        v.iter().map(counts).collect::<Vec<_>>(),
        [
            ("airline_two_sims#1", 2, 2, 1, "answer", Some("user_stop"), Some(false)),
            ("airline_two_sims#2", 2, 1, 0, "answer", Some("user_stop"), Some(true)),
        ]
    );
    let table = tracefault().arg("inspect").arg(fixture("airline_two_sims.json")).output().unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(table.contains("Error: User emma_kim_995 not found"), "{table}");
    assert!(table.contains("failed: tool message `error: true`"), "{table}");
    assert!(table.contains("ended: answer (user_stop), judged a failure by the source"), "{table}");
    assert!(table.contains("ended: answer (user_stop), judged a success by the source"), "{table}");
}

#[test]
fn a_bare_simulation_with_user_simulator_tools_cut_off_at_max_steps() {
    // By hand (README): 4 assistant messages less the greeting = 3 model calls; agent tool
    // calls call_c1, call_c2, call_c3 (3); the user simulator's toggle_airplane_mode
    // (`requestor: "user"`) and its `error: true` result are not the agent's; call_c3 has
    // `error: true`: 1 failure; termination_reason max_steps, reward 0.0.
    let (v, _) = inspect(&fixture("telecom_bare_simulation.json"), &[]);
    assert_eq!(
        v.iter().map(counts).collect::<Vec<_>>(),
        [("telecom_bare_simulation", 3, 3, 1, "cut_off", Some("max_steps"), Some(false))]
    );
    let table = tracefault().arg("inspect").arg(fixture("telecom_bare_simulation.json")).output().unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(!table.contains("toggle_airplane_mode"), "{table}");
    assert!(table.contains("refuel_data"), "{table}");
}

#[test]
fn tau_bench_v1_results_are_not_tau2() {
    // tau-bench (v1) results: a list of `{task_id, reward, info, traj, trial}`, OpenAI chat inside.
    let file = corpus().join("tau-bench_gpt-4o-airline.subset5.json");
    let (v, stderr) = inspect(&file, &[]);
    assert!(stderr.contains("read as openai-chat"), "{stderr}");
    assert_eq!(v.len(), 5);
    // Asked for as tau2, one element of it (the whole list goes the streaming way, which does not
    // ask the reader) is refused where it differs: no `termination_reason`.
    let out = tracefault().arg("inspect").arg(&file).args(["--format", "tau2", "--select", "/0"]).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("termination_reason"), "{stderr}");
}

/// A real results file (WhissleAI's retail run): counts from the file's own fields
/// (tests/fixtures/tau2/README.md), the reward deciding each verdict.
#[test]
fn a_real_results_file() {
    let (v, stderr) = inspect(&fixture("whissle-hd-retail-n5.json"), &[]);
    assert!(stderr.contains("read as tau2 (5 conversation(s))"), "{stderr}");
    let id = |k: usize| format!("whissle-hd-retail-n5#{k}");
    let got: Vec<_> = v.iter().map(counts).collect();
    let want = [
        (id(1), 6, 2, 1, "answer", Some("user_stop"), Some(false)),
        (id(2), 12, 5, 1, "answer", Some("user_stop"), Some(true)),
        (id(3), 6, 2, 1, "answer", Some("user_stop"), Some(false)),
        (id(4), 16, 10, 1, "answer", Some("user_stop"), Some(false)),
        (id(5), 9, 4, 1, "answer", Some("user_stop"), Some(false)),
    ];
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((g.0, g.1, g.2, g.3, g.4, g.5, g.6), (w.0.as_str(), w.1, w.2, w.3, w.4, w.5, w.6));
    }
}

/// The `recorded` row's false success rate of conversation `n` of the two-simulation file,
/// replayed as a scenario.
fn recorded_false_success(n: usize) -> String {
    let dir = tempfile::tempdir().unwrap();
    let sc = dir.path().join("tau2.toml");
    let trace = fixture("airline_two_sims.json");
    std::fs::write(
        &sc,
        format!(
            "name = \"tau2\"\nseed = 1\nruns = 2\ntrace = {:?}\ntrace_conversation = {n}\n",
            trace.display().to_string()
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let run = tracefault().arg("run").arg(&sc).arg("--out").arg(&out).output().unwrap();
    // 1 when no fault fired (simulation 2 met none): the reports are written all the same.
    assert!(matches!(run.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&run.stderr));
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    let header: Vec<&str> = summary.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|c| *c == "false_success_rate").unwrap();
    let row = summary.lines().find(|l| l.split(',').nth(1) == Some("recorded")).expect("a recorded row");
    row.split(',').nth(col).unwrap().to_owned()
}

#[test]
fn an_answer_the_source_judged_wrong_is_a_recorded_false_success() {
    // Simulation 1 (task 0) ends `user_stop` after the agent's answer, with reward 0.0: the
    // answer claimed a success the source says was not. Simulation 2 (task 1): reward 1.0.
    assert_eq!(recorded_false_success(1), "1.0000");
    assert_eq!(recorded_false_success(2), "0.0000");
}
