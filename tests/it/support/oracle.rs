//! Single runs checked against values derived by hand from the metric definitions,
//! never copied from output: what the feature files' oracle cases share. Every case runs the
//! real binary on a one-run scenario with a deterministic profile (the model reads every signal
//! right, retries transient failures, gives up on terminal ones, fixes arguments, never re-asks
//! after a partial unless told), so each row of `runs.csv` follows from the events alone. The
//! comment above each case walks the run in virtual time; `tokens` follow the estimate: a model
//! call's input is the context so far (prompt + every earlier output + every delivered result,
//! at 4 bytes a token), its output is `args/4 + 8` per call it asks for, or `text/4 + 8` for the
//! final message.

use super::csv::Table;
use crate::{tracefault, write};

/// The deterministic profile; `over` replaces lines by key.
pub fn profile(over: &[(&str, &str)]) -> String {
    let mut lines = vec![
        ("p_retry_transient", "1.0"),
        ("max_model_retries", "3"),
        ("p_give_up_terminal", "1.0"),
        ("p_fix_args", "1.0"),
        ("max_fix_attempts", "3"),
        ("p_continue", "0.0"),
        ("model_latency_ms", "1000"),
        ("tool_latency_ms", "100"),
        ("prompt_tokens", "100"),
    ];
    let mut perception = [
        ("envelope", "1.0"),
        ("flag", "1.0"),
        ("object", "1.0"),
        ("prefix", "1.0"),
        ("raw", "1.0"),
        ("unmarked", "1.0"),
    ];
    for (k, v) in over {
        if let Some(p) = k.strip_prefix("perception.") {
            perception.iter_mut().filter(|l| l.0 == p).for_each(|l| l.1 = v);
        } else {
            lines.iter_mut().filter(|l| l.0 == *k).for_each(|l| l.1 = v);
        }
    }
    let mut s = String::from("[profile]\n");
    lines.iter().for_each(|(k, v)| s.push_str(&format!("{k} = {v}\n")));
    s.push_str("[profile.perception]\n");
    perception.iter().for_each(|(k, v)| s.push_str(&format!("{k} = {v}\n")));
    s
}

/// One tool `s`, no arguments, result "ok", answer "Done.".
pub const ONE_CALL: &str = "[task]\n[[task.steps]]\ntool = \"s\"\nresult = \"ok\"\n";

/// The columns of `runs.csv` a case sets, from `terminated_by` on (`calls` is checked as
/// their sum of model and tool calls).
pub const COLUMNS: [&str; 11] = [
    "model_calls",
    "tool_calls",
    "wasted_retries",
    "orchestrator_retries",
    "model_transient_roundtrips",
    "breaker_trips",
    "faults_injected",
    "tokens",
    "virtual_ms",
    "protocol_violations",
    "raw_leaks",
];

/// One oracle case: run 0 of a one-run scenario under `strategy`, and its row of `runs.csv`
/// as derived by hand, by column name.
pub struct Case<'a> {
    /// The scenario after its name and run count: strategies, task, policy, profile, faults.
    pub scenario: String,
    pub strategy: &'a str,
    /// The row's `terminated_by`.
    pub ends: &'a str,
    /// Every column of [`COLUMNS`], in its order, with its value.
    pub expect: [(&'a str, u64); 11],
}

impl Case<'_> {
    /// Runs the case through the binary and checks its row of `runs.csv`, `calls` included.
    pub fn check(&self) {
        let names: Vec<&str> = self.expect.iter().map(|(c, _)| *c).collect();
        assert_eq!(names, COLUMNS, "a case names every column, in order");
        let dir = tempfile::tempdir().unwrap();
        let src = format!("name = \"oracle\"\nruns = 1\n{}", self.scenario);
        let sc = write(dir.path(), "s.toml", &src);
        let out = dir.path().join("out");
        let o =
            tracefault().arg("run").arg(&sc).args(["--strategy", self.strategy, "--out"]).arg(&out).output().unwrap();
        assert!(matches!(o.status.code(), Some(0 | 1)), "{}\n{src}", String::from_utf8_lossy(&o.stderr));
        let runs = Table::read(&out.join("runs.csv"));
        let row = runs.row(&[("scenario", "oracle"), ("strategy", self.strategy), ("run", "0")]);
        let got: Vec<(&str, u64)> = COLUMNS.iter().map(|c| (*c, row.num(c))).collect();
        assert_eq!((row["terminated_by"].as_str(), got), (self.ends, self.expect.to_vec()), "{}\n{src}", self.strategy);
        let expect = |c: &str| self.expect.iter().find(|e| e.0 == c).map_or(0, |e| e.1);
        assert_eq!(
            row.num::<u64>("calls"),
            expect("model_calls") + expect("tool_calls"),
            "calls = model_calls + tool_calls"
        );
    }
}

/// Tokens of an OpenAI Chat tool message holding `content`: its bytes / 4.
pub fn chat(id: u32, content: &str) -> u64 {
    let msg = format!(
        r#"{{"role":"tool","tool_call_id":"call_{id}","content":{}}}"#,
        serde_json::to_string(content).unwrap()
    );
    msg.len() as u64 / 4
}

/// Tokens of the five-field envelope for a failure of tool `s`, as a Chat tool message.
pub fn five(id: u32, code: &str, message: &str, retryable: bool, details: &str, source: &str) -> u64 {
    chat(
        id,
        &format!(
            r#"{{"code":"{code}","message":"{message}","retryable":{retryable},"details":{{{details}}},"source":"{source}"}}"#
        ),
    )
}

pub const OK: &str = "ok";
pub const DONE_OUT: u64 = 5 / 4 + 8; // "Done."
pub const GIVE_UP_OUT: u64 = 30 / 4 + 8; // "I could not complete the task."
/// `{}`: 2 bytes, 0 tokens, plus 8.
pub const EMPTY_ARGS_OUT: u64 = 8;
pub const S503: &str =
    "The s tool is temporarily unavailable (HTTP 503 Service Unavailable); the same call may succeed later.";

pub fn policy_no_backoff() -> &'static str {
    "[policy]\nretry = { backoff = \"none\" }\n"
}

/// A partial result that says more may be available, without and with a cursor.
pub const PARTIAL_NOTE: &str = r#"{"data":"ok","note":"More results may be available."}"#;
pub const PARTIAL_CURSOR: &str = r#"{"data":"ok","note":"More results may be available.","next_cursor":"page-2"}"#;
