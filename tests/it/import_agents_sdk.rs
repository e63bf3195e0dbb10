//! The agents-sdk importer on real files: counts derived by hand from the files' own fields.
//! The files were written by the real `openai-agents` SDK (0.24.0 and 0.2.11) running offline
//! against a mock of the OpenAI API (`tests/fixtures/agents-sdk/README.md`).

use std::path::PathBuf;

use serde_json::Value;

use crate::tracefault;

fn fixture(name: &str) -> PathBuf {
    crate::traces::fixture("agents-sdk", name)
}

/// The `inspect --json` lines of a file, and what it said on stderr.
fn inspect(name: &str) -> (Vec<Value>, String) {
    crate::traces::inspect_json(&fixture(name), &[])
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

/// The native events `import --all` writes for a file.
fn import(name: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    tracefault().arg("import").arg(fixture(name)).arg("--all").arg("-o").arg(&out).assert().success();
    std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Tool calls here = `function` spans + `handoff` spans (a handoff is the model's
/// `transfer_to_weather_agent` call, answered by the SDK); model calls = `generation` or
/// `response` spans; failures = function spans with `error` set.
#[test]
fn sdk_0_24_every_ending() {
    let (v, stderr) = inspect("agents-sdk-spans.jsonl");
    assert!(stderr.contains("read as agents-sdk (6 conversation(s))"), "{stderr}");
    let ids: Vec<&str> = v.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "agents-sdk-spans#1",
            "agents-sdk-spans#2",
            "agents-sdk-spans#3",
            "agents-sdk-spans#4",
            "agents-sdk-spans#5",
            "agents-sdk-spans#6"
        ]
    );
    // 1 (Chat): 3 generation spans; 2 function spans (get_forecast's error "Error running tool
    // (non-fatal)") + 1 handoff span; no error on any span, the last generation's output is
    // text with tool_calls null.
    assert_eq!(counts(&v[0]), (3, 3, 1, "answer", None));
    // 2 (Responses): 3 response spans, the same tools and handoff.
    assert_eq!(counts(&v[1]), (3, 3, 1, "answer", None));
    // 3: 3 generations, get_weather ×2 + handoff; the Weather agent span's error "Max turns exceeded".
    assert_eq!(counts(&v[2]), (3, 3, 0, "cut_off", Some("Max turns exceeded")));
    // 4: no model span; guardrail span triggered: true, turn span "Guardrail tripwire triggered".
    assert_eq!(counts(&v[3]), (0, 0, 0, "gave_up", Some("Guardrail tripwire triggered")));
    // 5: one generation with error "Error getting response" (Error code: 400); agent span
    // "Error in agent run".
    assert_eq!(counts(&v[4]), (1, 0, 0, "error", Some("Error in agent run")));
    // 6: 2 generations; handoff + explode (error "Error running tool", output null); agent span
    // "Error in agent run".
    assert_eq!(counts(&v[5]), (2, 2, 1, "error", Some("Error in agent run")));
    let table = tracefault().arg("inspect").arg(fixture("agents-sdk-spans.jsonl")).output().unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(table.contains("failed: function span error: Error running tool (non-fatal)"), "{table}");
    assert!(table.contains("Error running tool: explode tool failed: test"), "{table}");
}

#[test]
fn a_single_batch_body_with_call_ids_tokens_and_the_answer() {
    // The first POST body alone: run 1. Generation usage (sanitised: {input_tokens,
    // output_tokens, details}) 34/12, 48/24, 69/15; the generations' tool_calls give the ids
    // call_0001 (transfer_to_weather_agent), call_0004 (get_weather), call_0005 (get_forecast).
    let events = import("agents-sdk-batch-chat.json");
    let header = &events[0];
    assert_eq!(header["source_format"], "agents-sdk");
    assert_eq!(header["model"], "gpt-4o-mini");
    let models: Vec<(u64, u64)> = events
        .iter()
        .filter(|e| e["type"] == "model_call")
        .map(|e| (e["tokens_in"].as_u64().unwrap(), e["tokens_out"].as_u64().unwrap()))
        .collect();
    assert_eq!(models, [(34, 12), (48, 24), (69, 15)]);
    let calls: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["type"] == "tool_call")
        .map(|e| (e["call_id"].as_str().unwrap(), e["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        calls,
        [("call_0001", "transfer_to_weather_agent"), ("call_0004", "get_weather"), ("call_0005", "get_forecast")]
    );
    let failed: Vec<&str> =
        events.iter().filter(|e| e["ok"] == false).map(|e| e["call_id"].as_str().unwrap()).collect();
    assert_eq!(failed, ["call_0005"]);
    let last = events.last().unwrap();
    assert_eq!(last["outcome"], "answer");
    assert_eq!(last["text"], "Paris is sunny, 21 C. I could not get a forecast for Atlantis.");
}

#[test]
fn sensitive_data_off_still_counts_from_the_spans() {
    // 0.24 runs 7 (Chat) and 8 (Responses, response_id null): generation input/output null,
    // function input/output null; 2 function spans (get_forecast with error) + 1 handoff each.
    let (v, _) = inspect("agents-sdk-spans-redacted.jsonl");
    assert_eq!(v.len(), 2);
    assert_eq!(counts(&v[0]), (3, 3, 1, "answer", None));
    assert_eq!(counts(&v[1]), (3, 3, 1, "answer", None));
    // 0.2.11, the same two runs: response spans with only `response_id: null`.
    let (v, _) = inspect("agents-sdk-v0.2.11-spans-redacted.jsonl");
    assert_eq!(v.iter().map(counts).collect::<Vec<_>>(), [(3, 3, 1, "answer", None), (3, 3, 1, "answer", None)]);
}

#[test]
fn sdk_0_2_11_batches_split_traces_and_unmarked_failures() {
    let (v, _) = inspect("agents-sdk-v0.2.11-batches.jsonl");
    assert_eq!(v.len(), 6, "6 trace ids, in the order the traces first appear");
    assert_eq!(counts(&v[0]), (3, 3, 1, "answer", None));
    assert_eq!(counts(&v[1]), (3, 3, 1, "answer", None));
    // Agent span error "Max turns exceeded"; 3 generations, get_weather ×2 + handoff.
    assert_eq!(counts(&v[2]), (3, 3, 0, "cut_off", Some("Max turns exceeded")));
    // Guardrail: the agent span's error is in body 4; its generation and handoff spans, which
    // ran at the same time, came late in body 5 (trace_id …5697ce): 1 model call, 1 handoff.
    assert_eq!(counts(&v[3]), (1, 1, 0, "gave_up", Some("Guardrail tripwire triggered")));
    // 0.2.11 marks a failed Chat call nowhere: the generation has its input, output null and
    // usage null, and no span has an error.
    assert_eq!(counts(&v[4]), (1, 0, 0, "error", Some("generation span without output or usage")));
    // The fatal "Error running tool" on explode is the only signal (no agent error in 0.2.11).
    assert_eq!(counts(&v[5]), (2, 2, 1, "error", Some("Error running tool")));
    let events = import("agents-sdk-v0.2.11-batches.jsonl");
    let statuses: Vec<u64> = events
        .iter()
        .filter(|e| e["type"] == "model_call")
        .map(|e| e["status"].as_u64().unwrap())
        .filter(|s| *s != 200)
        .collect();
    assert_eq!(statuses, [500], "one failed model call in the file");
}

#[test]
fn a_file_of_another_format_is_not_read_as_agents_sdk() {
    let dir = tempfile::tempdir().unwrap();
    let file = crate::write(dir.path(), "list.json", r#"{"object": "list", "data": [{"id": "x", "object": "model"}]}"#);
    let out = tracefault().args(["inspect", "--format", "agents-sdk"]).arg(&file).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/object"), "{stderr}");
}
