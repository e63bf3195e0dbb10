//! Integration tests: one binary, one module per feature (`support` holds what they share). CLI
//! tests drive the real binary.

mod baseline;
mod cli;
mod compile;
mod determinism;
mod docs;
mod envelopes;
mod exec_gates;
mod explain;
mod faults;
mod fleet;
mod frameworks;
mod golden;
mod hostile;
mod hostile_inputs;
mod hostile_names;
mod hostile_servers;
mod html;
mod import_agents_sdk;
mod import_claude_code;
mod import_codex;
mod import_inspect_ai;
mod import_mini_swe_agent;
mod import_openhands;
mod import_otel;
mod import_swe_agent;
mod import_tau2;
mod importers;
mod live;
mod mcp;
mod order;
mod predict;
mod replay;
mod resilience;
mod scenarios;
mod support;
mod sweep;
mod trace_schema;
mod traces;
mod validate;
mod wire;

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The repository root (tests run from it, but say so explicitly).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Real traces recorded by other people, copied into the repository with their licences
/// (`tests/fixtures/corpus/README.md` says where each comes from).
pub fn corpus() -> PathBuf {
    root().join("tests/fixtures/corpus")
}

/// The tracefault binary, run from the repository root.
pub fn tracefault() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("tracefault"));
    cmd.current_dir(root()).env_remove("CI");
    cmd
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A minimal valid scenario; tests append to it.
pub const MINIMAL: &str = r#"name = "minimal"
runs = 20
[task]
[[task.steps]]
tool = "search"
args = { q = "x" }
result = { n = 1 }
[[faults]]
target = "search"
at = [1]
http = 503
"#;
