//! The inspect importer on real files: counts derived by hand from the files' own fields.
//! The logs were written by inspect-ai 0.3.285 running the mock provider `mockllm/model`
//! (`tests/fixtures/inspect/README.md`); the hand counts there come from each sample's
//! ModelEvents, ToolEvents, tool messages, `error`, `limit`, `output` and `scores`.

use std::path::PathBuf;

use serde_json::Value;

use crate::tracefault;

fn fixture(name: &str) -> PathBuf {
    crate::traces::fixture("inspect", name)
}

/// The `inspect --json` lines of a file, and what it said on stderr.
fn inspect(name: &str) -> (Vec<Value>, String) {
    crate::traces::inspect_json(&fixture(name), &[])
}

/// (model calls, tool calls, failures, ended, reason, success)
fn counts(v: &Value) -> (u64, u64, u64, &str, Option<&str>, Option<bool>) {
    (
        v["model_calls"].as_u64().unwrap(),
        v["tool_calls"].as_u64().unwrap(),
        v["tool_failures"].as_u64().unwrap(),
        v["ended"].as_str().unwrap(),
        v["ended_reason"].as_str(),
        v["success"].as_bool(),
    )
}

#[test]
fn tool_errors_bad_arguments_and_parallel_calls() {
    // Sample `tools`: 4 ModelEvents; tool_calls call_div0, call_badargs, then call_par_a and
    // call_par_b in one message; the tool messages of the first two carry `error` (type unknown,
    // "division by zero is not allowed"; type parsing, "Found 2 validation errors …"); neither
    // `error` nor `limit`, stop_reason "stop", score "C".
    let (v, stderr) = inspect("tools.json");
    assert!(stderr.contains("read as inspect"), "{stderr}");
    assert_eq!(v.len(), 1);
    assert_eq!(v[0]["id"], "tools", "one sample: the stem alone");
    assert_eq!(counts(&v[0]), (4, 4, 2, "answer", Some("stop"), Some(true)));
    let table = tracefault().arg("inspect").arg(fixture("tools.json")).output().unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(table.contains("division by zero is not allowed"), "{table}");
    assert!(table.contains("failed: error.type: unknown (the tool raised ToolError)"), "{table}");
    assert!(table.contains("failed: error.type: parsing"), "{table}");
}

#[test]
fn a_message_limit_and_a_tool_that_crashed() {
    // Sample `loop`: 5 ModelEvents and 5 ToolEvents (results "K-VALUE"), though `messages` has
    // only 4 tool messages; limit {type: "message"}; score "I".
    let (v, _) = inspect("loop.json");
    assert_eq!(counts(&v[0]), (5, 5, 0, "cut_off", Some("message"), Some(false)));
    // Sample `crash`: 1 ModelEvent calling explode; its ToolEvent has failed: true and no tool
    // message; sample.error.message "RuntimeError('kaboom: unexpected failure inside tool')";
    // scores {}.
    let (v, _) = inspect("crash-cut.json");
    assert_eq!(counts(&v[0]), (1, 1, 1, "error", Some("RuntimeError('kaboom: unexpected failure inside tool')"), None));
    let table = tracefault().arg("inspect").arg(fixture("crash-cut.json")).output().unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(table.contains("failed: ToolEvent failed: true"), "{table}");
}

#[test]
fn eval_zip_logs_zstd_multi_frame_and_deflate() {
    // The .eval log of the same task: samples/crash_epoch_1.json, loop_epoch_1.json and
    // tools_epoch_1.json, numbered in Inspect's order (epoch, then id: crash, loop, tools), each
    // counted as in its .json log above. The same members repacked as DEFLATE and as multi-frame
    // zstd read the same.
    let expected = [
        ("mock-tools#1", (1, 1, 1, "error", Some("RuntimeError('kaboom: unexpected failure inside tool')"), None)),
        ("mock-tools#2", (5, 5, 0, "cut_off", Some("message"), Some(false))),
        ("mock-tools#3", (4, 4, 2, "answer", Some("stop"), Some(true))),
    ];
    for name in ["mock-tools.eval", "mock-tools-deflate.eval", "mock-tools-multiframe.eval"] {
        let (v, stderr) = inspect(name);
        assert!(stderr.contains("read as inspect (3 conversation(s))"), "{name}: {stderr}");
        let stem = name.trim_end_matches(".eval");
        let got: Vec<(String, _)> = v.iter().map(|c| (c["id"].as_str().unwrap().to_owned(), counts(c))).collect();
        let want: Vec<(String, _)> = expected.iter().map(|(id, c)| (id.replace("mock-tools", stem), *c)).collect();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn usage_and_tools_reach_the_native_trace() {
    // Sample `tools`: output.usage.input_tokens 110, 130, 150, 180 and output_tokens 7 each; the
    // ModelEvents declare the tools divide, lookup and explode.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    tracefault().arg("import").arg(fixture("tools.json")).arg("--out").arg(&out).assert().success();
    let lines: Vec<Value> =
        std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let usage: Vec<(u64, u64)> = lines
        .iter()
        .filter(|l| l["type"] == "model_call")
        .map(|l| (l["tokens_in"].as_u64().unwrap(), l["tokens_out"].as_u64().unwrap()))
        .collect();
    assert_eq!(usage, [(110, 7), (130, 7), (150, 7), (180, 7)]);
    let tools: Vec<&str> = lines[0]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(tools, ["divide", "lookup", "explode"]);
}

#[test]
fn a_zip_that_is_no_eval_log_is_refused() {
    // The first 2,000 bytes of a real .eval: a ZIP without its central directory.
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixture("mock-tools.eval")).unwrap();
    let cut = dir.path().join("cut.eval");
    std::fs::write(&cut, &bytes[..2000]).unwrap();
    let out = tracefault().arg("inspect").arg(&cut).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("an Inspect `.eval` log, a ZIP archive"), "{stderr}");
    // Under a 0 MiB cap, no member can be read.
    let out = tracefault()
        .arg("inspect")
        .arg(fixture("mock-tools.eval"))
        .env("TRACEFAULT_MAX_INPUT_MB", "0")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("TRACEFAULT_MAX_INPUT_MB"));
}
