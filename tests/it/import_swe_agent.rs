//! The swe-agent importer on real files: counts derived by hand from the files' own fields
//! (`tests/fixtures/swe-agent/README.md`).

use std::path::PathBuf;

use serde_json::Value;

use crate::tracefault;

fn fixture(name: &str) -> PathBuf {
    crate::traces::fixture("swe-agent", name)
}

/// The `inspect --json` line of a one-conversation file, and what it said on stderr.
fn inspect(name: &str) -> (Value, String) {
    let (mut v, stderr) = crate::traces::inspect_json(&fixture(name), &[]);
    assert_eq!(v.len(), 1, "{name}: {stderr}");
    (v.remove(0), stderr)
}

/// (model calls, tool calls, failures, ended, reason)
fn counts(v: &Value) -> (u64, u64, u64, &str, Option<&str>) {
    (
        v["model_calls"].as_u64().unwrap(),
        v["tool_calls"].as_u64().unwrap(),
        v["tool_failures"].as_u64().unwrap(),
        v["ended"].as_str().unwrap(),
        v["ended_reason"].as_str(),
    )
}

fn table(name: &str) -> String {
    crate::traces::inspect_table(&fixture(name))
}

#[test]
fn a_real_0x_trajectory_pydicom() {
    // info.model_stats.api_calls = 12 = 12 trajectory steps (12 non-demo assistant messages);
    // one action per step, the last `submit`. Failures by text: steps 5, 6, 7 start "Your
    // proposed edit has introduced new syntax error(s)"; step 2 runs reproduce_bug.py and shows
    // "Traceback (most recent call last)" (the general text rule). info.exit_status "submitted".
    let (v, stderr) = inspect("swe-agent_gpt4_pydicom-1458.traj");
    assert!(stderr.contains("read as swe-agent"), "{stderr}");
    assert_eq!(counts(&v), (12, 12, 4, "answer", Some("submitted")));
    let t = table("swe-agent_gpt4_pydicom-1458.traj");
    assert!(t.contains("failed: text rule (SWE-agent): the edit linter rejected the edit"), "{t}");
    assert!(t.contains("failed: text rule /Traceback"), "{t}");
    assert!(t.contains("ended: answer (submitted)"), "{t}");
}

#[test]
fn function_calling_and_the_cost_limit() {
    // 4 steps: 3 ran (their history messages carry tool_calls call_a1..call_a3), the 4th is the
    // error exit (empty action, "Exit due to cost limit"): no model call. api_calls 3. Step 2's
    // observation is "bash: pytets: command not found". exit_status "exit_cost".
    let (v, _) = inspect("swe-agent-fc-exit_cost.traj");
    assert_eq!(counts(&v), (3, 3, 1, "cut_off", Some("exit_cost")));
    let t = table("swe-agent-fc-exit_cost.traj");
    // The name and arguments of call_a1's `tool_calls` entry (the table clips the arguments).
    assert!(t.contains(r#"str_replace_editor           {"command":"view","path":"/repo/tests/missi"#), "{t}");
    assert!(t.contains("failed: text rule (shell): command not found"), "{t}");
}

#[test]
fn format_requeries_and_exit_format() {
    // 5 steps: 1 command (create), 3 FormatError requeries (empty action, a model call each), the
    // exit step (no call); api_calls 5 is one more than the 4 calls the steps show.
    let (v, _) = inspect("swe-agent-text-exit_format.traj");
    assert_eq!(counts(&v), (5, 1, 0, "cut_off", Some("exit_format")));
}

#[test]
fn detected_before_the_wrapped_conversation_reader() {
    // The file's top-level `trajectory` key is also a wrapper key of the provider formats.
    let out = tracefault()
        .args(["inspect", "--format", "auto"])
        .arg(fixture("swe-agent-fc-exit_cost.traj"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("read as swe-agent"));
}

/// A real run whose two edits were refused ("No file open"): failures by SWE-agent's own text.
#[test]
fn a_real_run_whose_edits_never_applied() {
    let (v, _) = inspect("swe-agent-commit0-portalocker-97af1e.traj");
    assert_eq!(counts(&v), (3, 3, 2, "answer", Some("submitted")));
    let evidence: Vec<&str> =
        v["failures"].as_array().unwrap().iter().map(|f| f["evidence"].as_str().unwrap()).collect();
    assert!(evidence.iter().all(|e| e.contains("no file open")), "{evidence:?}");
}

/// Steps that no model made (`api_calls` 0: a demonstration) are not read as model calls
/// silently: refused, or with `--lenient` imported with the gap said.
#[test]
fn a_demonstration_without_model_calls_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.traj");
    let traj = serde_json::json!({
        "environment": "swe_main",
        "trajectory": [
            {"action": "ls\n", "observation": "a.py", "thought": "look", "response": "look\n```\nls\n```"},
            {"action": "submit\n", "observation": "", "thought": "done", "response": "done\n```\nsubmit\n```"}
        ],
        "history": [],
        "info": {"exit_status": "submitted", "submission": "diff", "model_stats": {"api_calls": 0}}
    });
    std::fs::write(&path, traj.to_string()).unwrap();
    let out = tracefault().arg("inspect").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("api_calls` is 0 beside 2 step(s)") && err.contains("--lenient"), "{err}");
    let out = tracefault().args(["inspect", "--lenient", "--json"]).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}
