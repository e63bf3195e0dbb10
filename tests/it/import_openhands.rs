//! The openhands importer on real files: counts derived by hand from the files' own fields
//! (`tests/fixtures/openhands/README.md`).

use std::path::PathBuf;

use serde_json::Value;

use crate::tracefault;

fn fixture(name: &str) -> PathBuf {
    crate::traces::fixture("openhands", name)
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

#[test]
fn a_real_saved_trajectory() {
    // 8 events: 4 actions with tool_call_metadata (read, run, read, finish), each with its own
    // model_response.id; the run observation's extras.metadata.exit_code is 0; the last event is
    // the finish action (id 9).
    let (v, stderr) = inspect("openhands_trajs_wrong_initial_state.json");
    assert!(stderr.contains("read as openhands"), "{stderr}");
    assert_eq!(v.len(), 1);
    assert_eq!(counts(&v[0]), (4, 4, 0, "answer", Some("finish")));
}

#[test]
fn exit_codes_error_observations_a_malformed_call_and_finish() {
    // model_response ids resp-1 (two parallel runs), resp-2, resp-4, plus the error observation
    // id 7 with no cause: 4 model calls. Tool calls: toolu_1, toolu_2, toolu_3, finish. Failed:
    // id 4 (exit_code 1) and id 6 (observation "error"). finish has task_completed "true".
    let (v, _) = inspect("openhands-events-errors-finish.json");
    assert_eq!(counts(&v[0]), (4, 4, 2, "answer", Some("finish")));
    let out = tracefault().arg("inspect").arg(fixture("openhands-events-errors-finish.json")).output().unwrap();
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains("failed: extras.metadata.exit_code not 0"), "{t}");
    assert!(t.contains("failed: observation: error"), "{t}");
    assert!(t.contains("ended: answer (finish), judged a success by the source"), "{t}");
}

#[test]
fn eval_output_one_conversation_a_line() {
    // Line 1: 2 responses, 2 runs, the second exit_code 2, error "…maximum iteration…".
    // Line 2: 1 response, 1 run (exit_code 0), error "litellm.APIError: …".
    let (v, _) = inspect("openhands-eval-output.jsonl");
    assert_eq!(v.len(), 2);
    assert_eq!(v[0]["id"], "openhands-eval-output#1");
    let max = "RuntimeError: Agent reached maximum iteration in headless mode. Current iteration: 2, max iteration: 2";
    assert_eq!(counts(&v[0]), (2, 2, 1, "cut_off", Some(max)));
    assert_eq!(
        counts(&v[1]),
        (1, 1, 0, "error", Some("litellm.APIError: APIError: OpenAIException - Connection error."))
    );
}

/// The calls' arguments are the model's (`function.arguments` in the metadata's response), not
/// the action's `args` OpenHands rewrote from them.
#[test]
fn a_real_trajectory_with_the_models_own_arguments() {
    let (v, _) = inspect("openhands_trajs_basic.json");
    assert_eq!(counts(&v[0]), (2, 2, 0, "answer", Some("finish")));
    let events = crate::traces::imported(&fixture("openhands_trajs_basic.json")).remove(0);
    let call = events.iter().find(|e| e["type"] == "tool_call").unwrap();
    assert_eq!(call["name"], "str_replace_editor");
    let args = &call["args"];
    assert_eq!((args["command"].as_str(), args["path"].as_str()), (Some("create"), Some("/workspace/game_2048.py")));
    assert!(args.get("impl_source").is_none(), "{args}");
}

/// A command with no new output for 30 s (exit code -1): the model read the output and the
/// suffix saying so; a timeout, not bad arguments.
#[test]
fn a_real_trajectory_with_a_command_still_running() {
    let (v, _) = inspect("openhands_trajs_basic_gui_mode.json");
    assert_eq!(counts(&v[0]), (5, 4, 1, "answer", Some("agent_state: awaiting_user_input")));
    let failure = &v[0]["failures"][0];
    assert_eq!((failure["call"].as_u64(), failure["outcome"].as_str()), (Some(4), Some("transient")));
    assert!(failure["evidence"].as_str().unwrap().contains("no new output after"), "{failure}");
}
