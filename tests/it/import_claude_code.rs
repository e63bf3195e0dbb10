//! The claude-code importer on real files: counts derived by hand from the files' own fields
//! (`tests/fixtures/claude-code/README.md`): Claude Code 2.1.100 run offline against a mock
//! (`make-fixtures.sh`), and two 2.0.76 transcripts shipped in the PyPI package fasthooks 0.1.4.

use std::path::PathBuf;

use serde_json::Value;

use crate::{root, tracefault, write};

fn fixture(name: &str) -> PathBuf {
    crate::traces::fixture("claude-code", name)
}

/// The `inspect --json` lines of a file, and what it said on stderr.
fn inspect(name: &str) -> (Vec<Value>, String) {
    crate::traces::inspect_json(&fixture(name), &[])
}

/// The one conversation of a file.
fn one(name: &str) -> Value {
    let (mut v, stderr) = inspect(name);
    assert!(stderr.contains("read as claude-code"), "{stderr}");
    assert_eq!(v.len(), 1, "{name}");
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

/// The native trace `import` writes for a file, one event a line.
fn imported(name: &str) -> Vec<Value> {
    let mut traces = crate::traces::imported(&fixture(name));
    assert_eq!(traces.len(), 1, "{name}");
    traces.remove(0)
}

#[test]
fn parallel_calls_a_sibling_cancelled_and_a_denied_write() {
    // Transcript: 5 assistant lines with 3 distinct message.id (msg_mock000010 ×3 lines,
    // …014, …017); 3 tool_use ids; 3 tool_result with is_error true: Bash "Exit code 2",
    // the sibling "<tool_use_error>Cancelled: parallel tool call Bash(…) errored" (a call that
    // never ran), the Write "Claude requested permissions…". The last assistant line (msg_mock000017,
    // text only) has stop_reason end_turn.
    let v = one("transcript-parallel-sibling-cancel.jsonl");
    assert_eq!(counts(&v), (3, 3, 2, 1, "answer", Some("end_turn")));
    let table = tracefault().arg("inspect").arg(fixture("transcript-parallel-sibling-cancel.jsonl")).output().unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(table.contains("cancelled: Claude Code's `Cancelled: parallel tool call"), "{table}");
    assert!(table.contains("failed: is_error: true"), "{table}");
    // The same run's stream-json: the same calls; the result line: success, is_error false,
    // terminal_reason completed.
    let v = one("stream-json-parallel-sibling-cancel.jsonl");
    assert_eq!(counts(&v), (3, 3, 2, 1, "answer", Some("completed")));
}

#[test]
fn usage_is_taken_once_per_response() {
    // msg_mock000010's three lines each carry usage input_tokens 110, output_tokens 47 (the
    // response's usage repeated on every block line): one call of 110 in, 47 out, not 141.
    let events = imported("transcript-parallel-sibling-cancel.jsonl");
    let calls: Vec<&Value> = events.iter().filter(|e| e["type"] == "model_call").collect();
    assert_eq!(calls.len(), 3);
    assert_eq!((calls[0]["tokens_in"].as_u64(), calls[0]["tokens_out"].as_u64()), (Some(110), Some(47)));
    assert_eq!(calls[0]["text"], "I will run two commands in parallel.");
    assert_eq!(events.iter().filter(|e| e["type"] == "tool_call").count(), 3);
}

#[test]
fn max_turns() {
    // stream-json: 2 message ids (msg_mock000019 with 2 tool_use, …023 with 1), all 3 results
    // is_error false; result subtype error_max_turns, terminal_reason max_turns.
    let v = one("stream-json-max-turns.jsonl");
    assert_eq!(counts(&v), (2, 3, 0, 0, "cut_off", Some("max_turns")));
    // The transcript says nothing of max-turns: it ends on a tool result, so it is cut off with
    // no reason of its own.
    let v = one("transcript-max-turns.jsonl");
    assert_eq!(counts(&v), (2, 3, 0, 0, "cut_off", None));
}

#[test]
fn an_api_error_is_a_failed_request_and_the_ending() {
    // One assistant line, model <synthetic>, text "API Error: 400 {…invalid_request_error…}",
    // isApiErrorMessage true, error "unknown": no answered call, one failed request (the mock's
    // log shows one request, answered HTTP 400).
    let v = one("transcript-api-error.jsonl");
    assert_eq!(counts(&v), (1, 0, 0, 0, "error", Some("api_error: unknown")));
    let events = imported("transcript-api-error.jsonl");
    let call = events.iter().find(|e| e["type"] == "model_call").unwrap();
    assert_eq!((call["status"].as_u64(), call["stop"].as_str()), (Some(400), Some("error")));
    // stream-json: the result line's subtype is success but is_error is true.
    let v = one("stream-json-api-error.jsonl");
    assert_eq!(counts(&v), (1, 0, 0, 0, "error", Some("completed, is_error: true")));
}

#[test]
fn subagents() {
    // stream-json: main lines (parent_tool_use_id null) have 2 message ids and 1 tool_use
    // (Agent); the subagent's lines (parent_tool_use_id toolu_mock000028) 1 message id and 1
    // tool_use (Bash): its final text response is not written to stream-json. Its
    // task_notification has status completed.
    let (v, _) = inspect("stream-json-subagent.jsonl");
    assert_eq!(v.len(), 2);
    assert_eq!(v[0]["id"], "stream-json-subagent#1");
    assert_eq!(counts(&v[0]), (2, 1, 0, 0, "answer", Some("completed")));
    assert_eq!(v[1]["id"], "stream-json-subagent#2");
    assert_eq!(counts(&v[1]), (1, 1, 0, 0, "answer", Some("task_notification: completed")));
    // The transcripts: the parent (2 message ids, Agent) and the subagent's own file (2 message
    // ids, Bash; every line isSidechain true), each ending on an end_turn text line.
    let v = one("transcript-subagent/2ee108fe-cb42-4cf3-9dfe-2c693d3209fd.jsonl");
    assert_eq!(counts(&v), (2, 1, 0, 0, "answer", Some("end_turn")));
    let v = one("transcript-subagent/2ee108fe-cb42-4cf3-9dfe-2c693d3209fd/subagents/agent-a7253d25ea619622d.jsonl");
    assert_eq!(v["id"], "agent-a7253d25ea619622d");
    assert_eq!(counts(&v), (2, 1, 0, 0, "answer", Some("end_turn")));
}

#[test]
fn a_real_2_0_76_session() {
    // 34 lines: 16 assistant lines (thinking + text/tool_use) with 8 distinct message.id, 4
    // tool_use, 1 tool_result with is_error true (Bash `cat nonexistent.txt`, "Exit code 1…");
    // file-history-snapshot and system/stop_hook_summary lines; the last assistant line has
    // stop_reason null, so the ending is inferred (an answer) with no reason.
    let v = one("pypi-fasthooks-0.1.4-main-transcript-first34.jsonl");
    assert_eq!(counts(&v), (8, 4, 1, 0, "answer", None));
    let table = tracefault().arg("inspect").arg(fixture("pypi-fasthooks-0.1.4-main-transcript-first34.jsonl")).output();
    let table = String::from_utf8(table.unwrap().stdout).unwrap();
    assert!(table.contains("Exit code 1…\n") && table.contains("(failed: is_error: true;"), "{table}");
    // The Warmup agent file: one user line, one assistant line (end_turn).
    let v = one("pypi-fasthooks-0.1.4-agent-sidechain.jsonl");
    assert_eq!(counts(&v), (1, 0, 0, 0, "answer", Some("end_turn")));
}

#[test]
fn other_formats_are_not_claude_code() {
    let out = tracefault()
        .args(["inspect", "--format", "claude-code"])
        .arg(root().join("tests/fixtures/codex/codex-tools.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the file reads as codex"), "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let plain = write(
        dir.path(),
        "plain.json",
        r#"[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]"#,
    );
    let out = tracefault().args(["inspect", "--format", "claude-code"]).arg(&plain).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/0/type"), "{stderr}");
    let out = tracefault().arg("inspect").arg(&plain).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("read as openai-chat"));
}

/// A real 2.1.39 subagent transcript whose parallel `Read`s are cancelled by a sibling's
/// failure in the older wording, `Sibling tool call errored`: cancelled, not failures. Counts
/// from the file's own fields (tests/fixtures/claude-code/README.md).
#[test]
fn a_real_2_1_39_subagent_with_siblings_cancelled_in_the_older_wording() {
    let v = one("spotter-2.1.39-subagent-sibling-errored.jsonl");
    let (model, tools, failed, cancelled, ended, _) = counts(&v);
    assert_eq!((model, tools, failed, cancelled, ended), (12, 33, 1, 7, "answer"));
}

/// A real 2.1.39 compaction subagent transcript: one user line (the conversation to sum up)
/// and one assistant line (`msg_01PKUiWZohLj43EHW343WeHF`, text only, no `tool_use`) whose
/// summary quotes a ```` ```bash ```` block. Read as 1 / 0 / 0 / 0 / answer: a fenced block in a
/// Claude Code model's text is text, not an action left unread (the check for those is for
/// sources whose calls could be text; a chat file with the same text is still refused).
#[test]
fn a_quoted_shell_block_in_a_summary_is_no_missed_action() {
    let name = "spotter-2.1.39-compaction-quotes-bash.jsonl";
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let assistant: Vec<&Value> = lines.iter().filter(|l| l["type"] == "assistant").collect();
    assert_eq!(assistant.len(), 1);
    let blocks = assistant[0]["message"]["content"].as_array().unwrap();
    assert!(blocks.iter().all(|b| b["type"] == "text"));
    assert!(blocks.iter().any(|b| b["text"].as_str().unwrap().contains("```bash")));
    let v = one(name);
    let (model, tools, failed, cancelled, ended, _) = counts(&v);
    assert_eq!((model, tools, failed, cancelled, ended), (1, 0, 0, 0, "answer"));
    // The same model text as an OpenAI Chat conversation: refused, a text action unread.
    let said = blocks.iter().map(|b| b["text"].as_str().unwrap()).collect::<String>();
    let dir = tempfile::tempdir().unwrap();
    let chat = dir.path().join("chat.json");
    let body = serde_json::json!([{"messages": [{"role": "user", "content": "sum up"}, {"role": "assistant", "content": said}]}]);
    std::fs::write(&chat, body.to_string()).unwrap();
    let out = crate::tracefault().args(["inspect", chat.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fenced shell block"));
}
