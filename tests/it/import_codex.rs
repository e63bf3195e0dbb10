//! The codex importer on rollouts written by the real Codex CLI (0.21, 0.45, 0.80, 0.171):
//! counts derived by hand from the files' own fields (`tests/fixtures/codex/README.md`).

use std::path::PathBuf;

use serde_json::Value;

use crate::{tracefault, write};

fn fixture(name: &str) -> PathBuf {
    crate::traces::fixture("codex", name)
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

#[test]
fn parallel_calls_custom_tool_calls_and_exit_codes() {
    // 4 distinct token_usage_record.response_id; 2 function_call + 2 custom_tool_call (apply_patch);
    // failed: call_fail_1 ("Process exited with code 1") and call_patch_fail ("apply_patch
    // verification failed"); the last event_msg is task_complete.
    let (v, stderr) = inspect("codex-tools.jsonl");
    assert!(stderr.contains("read as codex"), "{stderr}");
    assert_eq!(counts(&v), (4, 4, 2, "answer", Some("task_complete")));
}

#[test]
fn unknown_tools_bad_arguments_and_a_hosted_search() {
    // 3 response ids; 3 function_call (web_search_call runs at the provider: no call, no
    // output); failed: "unsupported call: shell", "failed to parse function arguments: …",
    // "Process exited with code 3".
    let (v, _) = inspect("codex-misc.jsonl");
    assert_eq!(counts(&v), (3, 3, 3, "answer", Some("task_complete")));
    let table = tracefault().arg("inspect").arg(fixture("codex-misc.jsonl")).output().unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(table.contains("failed to parse function arguments"), "{table}");
    assert!(table.contains("failed: a Codex tool error text"), "{table}");
    assert!(table.contains("failed: shell exit code not 0"), "{table}");
}

#[test]
fn a_failed_model_request_and_an_interruption_are_endings() {
    // One answered response (one call, exit code 0), then task_complete with
    // error.codex_error_info "internal_server_error": a failed second request.
    let (v, _) = inspect("codex-error.jsonl");
    assert_eq!(counts(&v), (2, 1, 0, "error", Some("internal_server_error")));
    // One response, then event_msg turn_aborted with reason "interrupted".
    let (v, _) = inspect("codex-interrupt.jsonl");
    assert_eq!(counts(&v), (1, 1, 0, "interrupted", Some("turn_aborted: interrupted")));
}

#[test]
fn older_rollouts() {
    // 0.80: `Exit code: 1` text and a failed apply_patch; no task_complete is written, and the last
    // response item is an assistant message.
    let (v, _) = inspect("codex0800-tools.jsonl");
    assert_eq!(counts(&v), (4, 4, 2, "answer", None));
    // 0.45: outputs are JSON with metadata.exit_code (1 for call_fail_1).
    let (v, _) = inspect("codex0450-tools.jsonl");
    assert_eq!(counts(&v), (4, 4, 2, "answer", None));
    // 0.21, before the {timestamp, type, payload} wrapper: 4 shell calls, 2 failed
    // (metadata.exit_code 1; "error: Failed to read file"). The file holds no usage, so model
    // calls are runs of output items. Codex 0.21 writes each call's output right after the call,
    // so the two calls the mock sent in one response stand apart and read as two: 5 runs for
    // the 4 requests the mock logged (the README says why).
    let (v, _) = inspect("codex021-tools.jsonl");
    assert_eq!(counts(&v), (5, 4, 2, "answer", None));
}

#[test]
fn the_responses_format_names_the_rollout_and_nothing_fitting_lists_every_format() {
    let out = tracefault()
        .args(["inspect", "--format", "openai-responses"])
        .arg(fixture("codex-tools.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the file reads as codex: pass --format codex or auto"), "{stderr}");

    let dir = tempfile::tempdir().unwrap();
    let odd = write(dir.path(), "odd.jsonl", "{\"kind\": \"x\"}\n\n  {\"kind\": \"y\"}\n");
    let out = tracefault().arg("inspect").arg(&odd).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no supported format fits"), "{stderr}");
    assert!(stderr.contains("codex: line 1, column 1 (/0/type)"), "{stderr}");
    assert!(stderr.contains("openai-chat: line 1, column 1 (/0): expected a message with a `role`"), "{stderr}");
    assert!(stderr.contains("found an object with keys kind"), "{stderr}");
}

#[test]
fn responses_custom_tool_calls_are_calls() {
    // A Responses input list: a function_call and a custom_tool_call in one turn, both answered,
    // the custom one with a failure text.
    let dir = tempfile::tempdir().unwrap();
    let input = r#"{"input": [
        {"type": "message", "role": "user", "content": "patch it"},
        {"type": "function_call", "call_id": "a", "name": "shell", "arguments": "{\"cmd\":\"ls\"}"},
        {"type": "custom_tool_call", "call_id": "b", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "function_call_output", "call_id": "a", "output": "x.txt"},
        {"type": "custom_tool_call_output", "call_id": "b", "output": "Error: patch did not apply"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "failed"}]}
    ]}"#;
    let p = write(dir.path(), "responses.json", input);
    let out = tracefault().arg("inspect").arg(&p).arg("--json").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(counts(&v), (2, 2, 1, "answer", None));
}
