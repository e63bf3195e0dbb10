//! The mini-swe-agent importer on trajectories the real mini-swe-agent 2.4.6 wrote offline:
//! counts derived by hand from the files' own fields (`tests/fixtures/mini-swe-agent/README.md`).

use serde_json::Value;

use crate::traces::{fixture, inspect_json, inspect_table};
use crate::{tracefault, write};

/// The one conversation of a fixture, read by auto-detection as mini-swe-agent.
fn one(name: &str) -> Value {
    let (mut v, stderr) = inspect_json(&fixture("mini-swe-agent", name), &[]);
    assert!(stderr.contains("read as mini-swe-agent"), "{stderr}");
    assert_eq!(v.len(), 1);
    v.remove(0)
}

/// (model calls, tool calls, failures, cancelled, ended, reason)
fn counts(v: &Value) -> (u64, u64, u64, u64, &str, Option<&str>) {
    (
        v["model_calls"].as_u64().unwrap(),
        v["tool_calls"].as_u64().unwrap(),
        v["tool_failures"].as_u64().unwrap(),
        v["cancelled"].as_u64().unwrap(),
        v["ended"].as_str().unwrap(),
        v["ended_reason"].as_str(),
    )
}

#[test]
fn tool_calls_a_format_error_and_the_padded_submit() {
    // 3 assistant messages + the format error at message 4 = api_calls 4; 4 tool calls (two in
    // one response); message 3 returncode 1; message 9's -1 "action was not executed" is the
    // submit itself, after which exit_status is Submitted.
    let v = one("mini-v2-toolcall.traj.json");
    assert_eq!(counts(&v), (4, 4, 1, 0, "answer", Some("Submitted")));
    let table = inspect_table(&fixture("mini-swe-agent", "mini-v2-toolcall.traj.json"));
    assert!(table.contains("failed: returncode not 0"), "{table}");
}

#[test]
fn text_actions_limits_and_repeated_format_errors() {
    // Three ```mswea_bash_command blocks, message 3 returncode 1, Submitted.
    assert_eq!(counts(&one("mini-v2-textbased.traj.json")), (3, 3, 1, 0, "answer", Some("Submitted")));
    // Two calls; the first timed out (returncode -1 with exception_info); the step limit.
    assert_eq!(counts(&one("mini-v2-limits.traj.json")), (2, 2, 1, 0, "cut_off", Some("LimitsExceeded")));
    // Three replies rejected as format errors, no assistant message and no tool call.
    assert_eq!(counts(&one("mini-v2-formaterror.traj.json")), (3, 0, 0, 0, "gave_up", Some("RepeatedFormatError")));
}

#[test]
fn a_chat_list_showing_shell_blocks_but_no_calls_is_refused() {
    // OpenAI Chat messages whose assistant text holds a fenced bash action and no tool call, and
    // no return code in the observations: not mini-swe-agent, and read as chat it would count
    // no tool call, so it is refused with the gap named (and read with --lenient).
    let dir = tempfile::tempdir().unwrap();
    let chat = r#"[{"role": "user", "content": "list files"},
        {"role": "assistant", "content": "```bash\nls\n```"},
        {"role": "user", "content": "a.txt"},
        {"role": "assistant", "content": "done"}]"#;
    let p = write(dir.path(), "chat.json", chat);
    let out = tracefault().arg("inspect").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("shows tool actions") && err.contains("--lenient"), "{err}");
    let out = tracefault().arg("inspect").arg(&p).arg("--lenient").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("gap (read with --lenient): the model's text shows tool actions"), "{table}");
}

/// A real run that stopped on litellm's `Timeout`: the request that raised it is counted in
/// `api_calls` and has no message; it is a failed model call, not a missing one.
#[test]
fn a_real_run_stopped_by_the_models_timeout() {
    let v = one("pr816-deepseek-pvlib-1154-Timeout.traj.json");
    assert_eq!(counts(&v), (1, 0, 0, 0, "error", Some("Timeout")));
    assert_eq!(v["failed_model_calls"].as_u64(), Some(1));
    let events =
        crate::traces::imported(&fixture("mini-swe-agent", "pr816-deepseek-pvlib-1154-Timeout.traj.json")).remove(0);
    let statuses: Vec<u64> =
        events.iter().filter(|e| e["type"] == "model_call").map(|e| e["status"].as_u64().unwrap()).collect();
    assert_eq!(statuses, [504]);
}
