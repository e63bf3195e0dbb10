//! Careless and hostile input: every case gets a clear error naming the file, the key and the
//! fix, with exit code 2, or is handled; nothing panics, runs away, or damages what it writes to.

use std::path::Path;
use std::time::Duration;

use predicates::prelude::*;
use proptest::prelude::*;
use tracefault::scenario::load::load_str;

use crate::{MINIMAL, corpus, tracefault, write};

/// Runs tracefault with `args` in `dir`; returns (exit code, stdout, stderr).
fn run_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    run_within(dir, args, Duration::from_secs(600))
}

/// The same, killed after `bound` (exit code -1 then).
fn run_within(dir: &Path, args: &[&str], bound: Duration) -> (i32, String, String) {
    let o = tracefault().current_dir(dir).args(args).timeout(bound).output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(!err.contains("panicked"), "{err}");
    (o.status.code().unwrap_or(-1), out, err)
}

#[test]
fn a_five_field_429_in_a_responses_output_imports_as_rate_limited() {
    let dir = tempfile::tempdir().unwrap();
    let body = r#"{"input": [
        {"role": "user", "content": "quote AAPL"},
        {"type": "function_call", "call_id": "call_1", "name": "get_quote", "arguments": "{\"symbol\":\"AAPL\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "{\"code\":\"RATE_LIMITED\",\"message\":\"slow down\",\"retryable\":true,\"details\":{\"status\":429,\"retry_after_seconds\":3},\"source\":\"tool\"}"}
    ]}"#;
    write(dir.path(), "r.json", body);
    let (code, _, err) = run_in(dir.path(), &["import", "r.json", "--format", "openai-responses", "-o", "t.jsonl"]);
    assert_eq!(code, 0, "{err}");
    let t = std::fs::read_to_string(dir.path().join("t.jsonl")).unwrap();
    let result = t.lines().find(|l| l.contains("\"tool_result\"")).unwrap();
    let v: serde_json::Value = serde_json::from_str(result).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["error_class"], "rate_limited");
    assert_eq!(v["status"], 429);
    assert!(v["evidence"].as_str().unwrap().contains("five-field envelope"), "{v}");
}

#[test]
fn scenario_errors_name_the_key_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tau = corpus().join("tau-bench_gpt-4o-airline.subset5.json");
    let tau = tau.display();
    // A JSON pointer without its leading slash blames the scenario's key, not a flag.
    write(d, "a.toml", &format!("name = \"a\"\ntrace = \"{tau}\"\ntrace_select = \"0/traj\"\n"));
    let (code, _, err) = run_in(d, &["run", "a.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("a.toml:3: trace_select: expected a JSON pointer, which starts with `/`"), "{err}");
    assert!(!err.contains("--select"), "{err}");
    write(d, "b.toml", &format!("name = \"b\"\ntrace = \"{tau}\"\ntrace_select = \"/9/traj\"\n"));
    let (_, _, err) = run_in(d, &["run", "b.toml"]);
    assert!(
        err.contains("b.toml:3: trace_select: expected a JSON pointer into the file; \"/9/traj\" is no such path"),
        "{err}"
    );
    // An error inside [profile] names the key.
    write(d, "c.toml", &format!("{MINIMAL}[profile]\np_fix_args = \"high\"\n"));
    let (_, _, err) = run_in(d, &["run", "c.toml"]);
    assert!(
        err.contains("c.toml:13: profile.p_fix_args: invalid type: string \"high\", expected a number, or { value = V, range = [LO, HI] }"),
        "{err}"
    );
    write(d, "c2.toml", &format!("{MINIMAL}[profile]\np_fx_args = 0.5\n"));
    let (_, _, err) = run_in(d, &["run", "c2.toml"]);
    assert!(err.contains("c2.toml:13: profile.p_fx_args: unknown field `p_fx_args`"), "{err}");
    // Lines point at the key even after a description that spans lines and mentions it.
    write(
        d,
        "e.toml",
        "name = \"e\"\ndescription = \"\"\"\nruns = 3 is what\nwe want\n\"\"\"\nseed = 1\nruns = 0\n[task]\n[[task.steps]]\ntool = \"a\"\n",
    );
    let (_, _, err) = run_in(d, &["run", "e.toml"]);
    assert!(err.contains("e.toml:7: runs: expected 1 to 100000000, got 0"), "{err}");
}

#[test]
fn gate_bounds_and_windows_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (name, gate, want) in [
        ("nan.toml", "min = nan", "gates[0].min: expected a finite number, got NaN"),
        ("order.toml", "min = 0.9\nmax = 0.1", "gates[0].min: expected at most `max` (0.1), got 0.9"),
    ] {
        write(d, name, &format!("{MINIMAL}[[gates]]\nstrategy = \"*\"\nmetric = \"success_rate\"\n{gate}\n"));
        let (code, _, err) = run_in(d, &["run", name]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(want), "{err}");
    }
    write(d, "w.toml", &MINIMAL.replace("at = [1]", "window_ms = [0, 10, 20]"));
    let (code, _, err) = run_in(d, &["run", "w.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("faults[0].window_ms: expected [t0, t1]: exactly two numbers, got 3"), "{err}");
}

#[test]
fn bad_numbers_from_the_command_line_and_calibration() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "s.toml", MINIMAL);
    let (code, _, err) = run_in(d, &["run", "s.toml", "--runs", "18446744073709551615"]);
    assert_eq!(code, 2);
    assert!(err.contains("is not in 1..=100000000"), "{err}");
    let trace = crate::root().join("traces/ambiguous-search.jsonl");
    let (code, out, _) = run_in(d, &["calibrate", trace.to_str().unwrap(), "--min-observations", "0", "-o", "p.toml"]);
    assert_eq!(code, 0);
    assert!(!out.to_lowercase().contains("nan"), "{out}");
    tracefault().current_dir(d).args(["run", "s.toml"]).arg("--out").arg("o").assert().code(0);
}

#[test]
fn importers_refuse_what_they_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cassette = "interactions:\n- request:\n    uri: https://api.openai.com/v1/chat/completions\n    parsed_body: {model: gpt-4o, messages: [{role: user, content: hi}]}\n  response:\n    status: {code: 999}\n    parsed_body: {choices: []}\n";
    write(d, "c.yaml", cassette);
    let (code, _, err) = run_in(d, &["inspect", "c.yaml"]);
    assert_eq!(code, 2);
    assert!(err.contains("/interactions/0/response/status/code: expected an HTTP status from 100 to 599"), "{err}");
    // A format that finds nothing in the file is an error, not an empty trace.
    let gemini = crate::root().join("traces/gemini_model-retry.cassette.yaml");
    let (code, _, err) =
        run_in(d, &["import", gemini.to_str().unwrap(), "--format", "openai-responses", "-o", "x.jsonl"]);
    assert_eq!(code, 2);
    assert!(err.contains("nothing in the file reads as a message"), "{err}");
    assert!(!d.join("x.jsonl").exists());
}

#[test]
fn inputs_have_size_caps() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "z.toml", "name = \"z\"\ntrace = \"/dev/zero\"\n");
    let o = tracefault().current_dir(d).env("TRACEFAULT_MAX_INPUT_MB", "2").args(["run", "z.toml"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/dev/zero: larger than the 2 MiB cap for traces (set TRACEFAULT_MAX_INPUT_MB=N"), "{err}");
}

/// Inputs that took minutes (quadratic paths) or gigabytes before: each must now finish well
/// inside the bound (a guard against a complexity regression, not a speed figure).
#[test]
fn large_inputs_take_near_linear_time() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bound = Duration::from_secs(60);
    // 20 000 fault rules (a line lookup per rule rescanned the file).
    let mut s = String::from("name = \"many\"\nruns = 1\n[task]\n[[task.steps]]\ntool = \"s\"\n");
    for i in 0..20_000 {
        s.push_str(&format!("[[faults]]\ntarget = \"s\"\nat = [{}]\nhttp = 503\n", i + 1));
    }
    write(d, "faults.toml", &s);
    let (code, _, _) = run_within(d, &["run", "faults.toml", "--out", "o"], bound);
    assert_eq!(code, 0);
    // 100 000-deep YAML (the parser is quadratic in nesting): refused before parsing.
    write(d, "deep.yaml", &format!("interactions: {}{}\n", "[".repeat(100_000), "]".repeat(100_000)));
    let (code, _, err) = run_within(d, &["inspect", "deep.yaml"], bound);
    assert_eq!(code, 2);
    assert!(err.contains("nested deeper than 128 levels"), "{err}");
    // 40 000 parallel calls in one turn, a third failing: inspect, and replay as recorded.
    let mut t_s = String::from(
        "{\"tracefault_trace\":1,\"id\":\"wide\",\"source_format\":\"native\",\"tools\":[{\"name\":\"s\"}]}\n\
         {\"type\":\"model_call\",\"turn\":1,\"status\":200,\"tokens_in\":1,\"tokens_out\":1,\"stop\":\"tool_calls\"}\n",
    );
    for i in 0..40_000 {
        t_s.push_str(&format!(
            "{{\"type\":\"tool_call\",\"turn\":1,\"call_id\":\"c{i}\",\"name\":\"s\",\"args\":{{\"i\":{i}}}}}\n"
        ));
    }
    for i in 0..40_000 {
        let failed = if i % 3 == 0 { ",\"error_class\":\"transient\"" } else { "" };
        t_s.push_str(&format!(
            "{{\"type\":\"tool_result\",\"call_id\":\"c{i}\",\"ok\":{},\"content\":\"x\"{failed}}}\n",
            i % 3 != 0
        ));
    }
    t_s.push_str("{\"type\":\"model_call\",\"turn\":2,\"status\":200,\"tokens_in\":1,\"tokens_out\":1,\"stop\":\"end\"}\n{\"type\":\"final\",\"text\":\"\",\"outcome\":\"answer\"}\n");
    write(d, "wide.jsonl", &t_s);
    let (code, out, _) = run_within(d, &["inspect", "wide.jsonl", "--json"], bound);
    assert_eq!(code, 0);
    assert!(out.contains("\"tool_failures\":13334"), "{out}");
    let (code, out, _) = run_within(d, &["replay", "wide.jsonl", "--as-recorded-only"], bound);
    assert_eq!(code, 0, "{out}");
    // 8 000 tools, each failing once, replayed under every preset.
    let tools: Vec<String> = (0..8_000).map(|i| format!("{{\"name\":\"t{i}\"}}")).collect();
    let mut m = format!(
        "{{\"tracefault_trace\":1,\"id\":\"tools\",\"source_format\":\"native\",\"tools\":[{}]}}\n",
        tools.join(",")
    );
    for i in 0..8_000 {
        m.push_str(&format!(
            "{{\"type\":\"model_call\",\"turn\":{},\"status\":200,\"tokens_in\":1,\"tokens_out\":1,\"stop\":\"tool_calls\"}}\n\
             {{\"type\":\"tool_call\",\"turn\":{},\"call_id\":\"c{i}\",\"name\":\"t{i}\",\"args\":{{}}}}\n\
             {{\"type\":\"tool_result\",\"call_id\":\"c{i}\",\"ok\":false,\"status\":503,\"content\":\"down\",\"error_class\":\"transient\"}}\n",
            i + 1,
            i + 1
        ));
    }
    write(d, "tools.jsonl", &m);
    let (code, _, err) = run_within(d, &["replay", "tools.jsonl", "--runs", "5", "--out", "r"], bound);
    assert!(code == 0 || code == 1, "exit {code} (-1: killed after {bound:?}): {err}");
}

#[test]
fn terminal_control_characters_from_a_trace_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let t = "{\"tracefault_trace\":1,\"id\":\"x\\u001b]0;pwned\\u0007\",\"source_format\":\"native\",\"tools\":[]}\n\
             {\"type\":\"model_call\",\"turn\":1,\"status\":200,\"tokens_in\":1,\"tokens_out\":1,\"stop\":\"tool_calls\"}\n\
             {\"type\":\"tool_call\",\"turn\":1,\"call_id\":\"a\",\"name\":\"evil\\u001b[2J\",\"args\":{}}\n\
             {\"type\":\"tool_result\",\"call_id\":\"a\",\"ok\":true,\"content\":\"x\"}\n";
    write(d, "t.jsonl", t);
    let (code, out, _) = run_in(d, &["inspect", "t.jsonl"]);
    assert_eq!(code, 0);
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    assert!(out.contains("evil\\u{1b}[2J"), "{out}");
}

#[test]
fn outputs_are_written_through_links_and_devices_never_replacing_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let trace = crate::root().join("traces/search-503-503-400.jsonl");
    let trace = trace.to_str().unwrap();
    // -o through a symlink: the link stays, its target gets the trace.
    std::os::unix::fs::symlink(d.join("target.jsonl"), d.join("link.jsonl")).unwrap();
    let (code, _, _) = run_in(d, &["import", trace, "-o", "link.jsonl"]);
    assert_eq!(code, 0);
    assert!(std::fs::symlink_metadata(d.join("link.jsonl")).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(d.join("target.jsonl")).unwrap().starts_with("{\"tracefault_trace\""));
    // -o into a device: written through; a full device is an error, and stays a device.
    let (code, _, _) = run_in(d, &["import", trace, "-o", "/dev/null"]);
    assert_eq!(code, 0);
    if Path::new("/dev/full").exists() {
        let (code, _, err) = run_in(d, &["import", trace, "-o", "/dev/full"]);
        assert_eq!(code, 2, "{err}");
        assert!(!std::fs::metadata("/dev/full").unwrap().is_file());
    }
    // --out through a symlinked folder: the link stays a link.
    std::fs::create_dir(d.join("real")).unwrap();
    std::os::unix::fs::symlink(d.join("real"), d.join("reports-link")).unwrap();
    write(d, "s.toml", MINIMAL);
    let (code, _, _) = run_in(d, &["run", "s.toml", "--out", "reports-link"]);
    assert_eq!(code, 0);
    assert!(std::fs::symlink_metadata(d.join("reports-link")).unwrap().file_type().is_symlink());
    assert!(d.join("real/summary.csv").exists());
}

#[test]
fn a_report_folder_never_mixes_two_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "s.toml", MINIMAL);
    assert_eq!(run_in(d, &["run", "s.toml", "--out", "o"]).0, 0);
    assert!(d.join("o/runs.csv").exists());
    // --no-runs-csv: the old runs.csv must not stay beside the new reports.
    assert_eq!(run_in(d, &["run", "s.toml", "--out", "o", "--no-runs-csv"]).0, 0);
    assert!(!d.join("o/runs.csv").exists());
    // An interrupted run leaves neither a half set nor temporaries.
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("tracefault"))
        .current_dir(d)
        .args(["run", "s.toml", "--runs", "5000000", "--out", "o"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    rustix::process::kill_process(rustix::process::Pid::from_child(&child), rustix::process::Signal::TERM).unwrap();
    child.wait().unwrap();
    let names = |p: &Path| -> Vec<String> {
        let mut v: Vec<String> =
            std::fs::read_dir(p).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    };
    assert_eq!(
        names(&d.join("o")),
        ["junit.xml", "report.html", "report.json", "report.md", "summary.csv"],
        "the old set, whole"
    );
    assert!(names(d).iter().all(|n| !n.contains("tracefault-")), "{:?}", names(d));
}

#[test]
fn stale_temporaries_of_killed_runs_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "s.toml", MINIMAL);
    // What a `kill -9` leaves: a staging folder of a process that is gone (pid 0 never runs).
    std::fs::create_dir(d.join(".o.tracefault-0-0")).unwrap();
    std::fs::write(d.join(".o.tracefault-0-0/runs.csv"), "half").unwrap();
    tracefault()
        .current_dir(d)
        .args(["run", "s.toml", "--out", "o"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("reports written"));
    assert!(!d.join(".o.tracefault-0-0").exists());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn scenario_and_trace_parsers_never_panic(text in "[ -~\n]{0,200}") {
        let _ = load_str(&text, Path::new("x.toml"));
        let _ = load_str(&text, Path::new("x.json"));
        let _ = tracefault::trace::Trace::parse_many(&text, Path::new("x.jsonl"));
    }
}
