//! `tracefault run`: exit codes, outputs, and the error messages users see for broken files.

use predicates::prelude::*;

use crate::support::csv::Table;
use crate::{MINIMAL, tracefault, write};

#[test]
fn good_suite_exits_zero_and_writes_every_report() {
    let dir = tempfile::tempdir().unwrap();
    let sc = write(
        dir.path(),
        "s.toml",
        &format!("{MINIMAL}[[gates]]\nstrategy = \"five-field\"\nmetric = \"success_rate\"\nmin = 0.5\n"),
    );
    let out = dir.path().join("out");
    tracefault()
        .args(["run"])
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("minimal (seed 1, 20 runs)"))
        .stdout(predicate::str::contains("PASS: 1 gates passed"));
    for f in ["summary.csv", "runs.csv", "report.json", "report.md", "junit.xml", "report.html"] {
        let meta = std::fs::metadata(out.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(meta.len() > 0, "{f} is empty");
    }
    let leftovers: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left behind: {leftovers:?}");
    let runs = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert_eq!(runs.lines().count(), 1 + 20 * 6, "header + runs × strategies");
}

#[test]
fn failing_gate_exits_one_and_junit_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let sc = write(
        dir.path(),
        "s.toml",
        &format!("{MINIMAL}[[gates]]\nstrategy = \"raw-exception\"\nmetric = \"calls_mean\"\nmax = 1\n"),
    );
    let out = dir.path().join("out");
    tracefault()
        .arg("run")
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("GATE FAILED minimal / raw-exception: calls_mean"))
        .stdout(predicate::str::contains("  worst run of raw-exception: tracefault run "));
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(junit.contains(r#"<testsuites name="tracefault" tests="2" failures="1" errors="0">"#), "{junit}");
    assert!(junit.contains("raw-exception: calls_mean &lt;= 1"), "{junit}");
    assert!(junit.contains(r#"<property name="seed" value="1"/>"#), "{junit}");
}

#[test]
fn a_scenario_where_no_fault_fires_fails_loudly() {
    let dir = tempfile::tempdir().unwrap();
    let silent = MINIMAL.replace("at = [1]", "at = [99]");
    let sc = write(dir.path(), "s.toml", &silent);
    tracefault()
        .arg("run")
        .arg(&sc)
        .arg("--out")
        .arg(dir.path().join("out"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "warning: minimal: fault rule `search at [99]: http 503` never fired in any run",
        ))
        .stderr(predicate::str::contains("no fault fired at all"))
        .stdout(predicate::str::contains("CHECK FAILED minimal: no fault fired in any run"));
}

/// A strategy that sends an idempotency key where no tool honours one is told the key changes
/// nothing; with a tool that honours it, nothing is said.
#[test]
fn an_idempotency_key_no_tool_honours_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let keyed = format!(
        "{MINIMAL}[strategies.keyed]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\n\
         retry = {{ idempotency_key = true }}\n[strategies.five-field]\n"
    );
    let warning = "warning: minimal: strategy `keyed` sends an idempotency key, but no tool honours one";
    for (text, said) in
        [(keyed.clone(), true), (format!("{keyed}[tools.search]\neffect = \"write\"\nidempotent = \"key\"\n"), false)]
    {
        let sc = write(dir.path(), "s.toml", &text);
        let out = tracefault().arg("run").arg(&sc).arg("--out").arg(dir.path().join("out")).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.contains(warning), said, "{err}");
        assert!(!err.contains("strategy `five-field`"), "{err}");
    }
}

/// Runs a broken scenario and returns stderr; asserts exit code 2.
pub fn broken(name: &str, text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let sc = write(dir.path(), name, text);
    let out = tracefault().arg("run").arg(&sc).arg("--out").arg(dir.path().join("out")).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "stdout: {}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr).replace(&*dir.path().to_string_lossy(), "DIR");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn unknown_key_names_file_line_and_key() {
    // `colour` lands in the last [[faults]] table, on line 12.
    let err = broken("s.toml", &format!("{MINIMAL}colour = \"red\"\n"));
    assert!(err.contains("DIR/s.toml:12: faults[0].colour: unknown field `colour`"), "{err}");
}

#[test]
fn bad_status_names_the_rule_line_and_the_allowed_values() {
    let err = broken("s.toml", &MINIMAL.replace("http = 503", "http = 418"));
    // The line of the key itself (`http = 418`), not of its table.
    assert!(err.contains("error: DIR/s.toml:11: faults[0].http: expected one of 400, 401"), "{err}");
    assert!(err.contains("got 418"), "{err}");
}

#[test]
fn unknown_target_lists_the_tools() {
    let err = broken("s.toml", &MINIMAL.replace("target = \"search\"", "target = \"serch\""));
    assert!(
        err.contains("faults[0].target: expected \"provider\", \"*\" or a tool of the task (search), got \"serch\""),
        "{err}"
    );
}

#[test]
fn unknown_strategy_and_metric_are_named() {
    let err = broken("s.toml", &format!("strategies = [\"five-feld\"]\n{MINIMAL}"));
    assert!(err.contains("strategies: expected preset names (raw-exception, error-string"), "{err}");
    let err =
        broken("s.toml", &format!("{MINIMAL}[[gates]]\nstrategy = \"five-field\"\nmetric = \"loops\"\nmax = 0\n"));
    assert!(err.contains("s.toml:14: gates[0].metric: expected a numeric column of summary.csv"), "{err}");
}

#[test]
fn missing_trace_and_missing_task_are_explained() {
    // The scenario file, the key, and every path tried.
    let err = broken("s.toml", "name = \"t\"\ntrace = \"nowhere.jsonl\"\n");
    assert!(
        err.contains("DIR/s.toml:2: trace: expected an existing file; \"nowhere.jsonl\" was not found at DIR/nowhere.jsonl, DIR/../nowhere.jsonl, nowhere.jsonl"),
        "{err}"
    );
    let err = broken("s.toml", &format!("profile = \"nowhere.toml\"\n{MINIMAL}"));
    assert!(
        err.contains("DIR/s.toml:1: profile: expected an existing file; \"nowhere.toml\" was not found at"),
        "{err}"
    );
    let err = broken("s.toml", "name = \"t\"\n");
    assert!(err.contains("task: expected a `[task]` with steps, or `trace = \"…\"`"), "{err}");
}

#[test]
fn json_scenarios_are_accepted_and_checked_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let json = r#"{"name": "j", "runs": 5, "task": {"steps": [{"tool": "t"}]},
        "faults": [{"target": "t", "at": [1], "http": 429, "retry_after_s": 1}]}"#;
    let sc = write(dir.path(), "j.json", json);
    tracefault().arg("run").arg(&sc).arg("--out").arg(dir.path().join("o")).assert().code(0);
    let err = broken("j.json", &json.replace("\"runs\"", "\"rnus\""));
    assert!(err.contains("DIR/j.json:1: rnus: unknown field `rnus`"), "{err}");
    // A wrong type deep inside names the field, like TOML.
    let err = broken("j.json", &json.replace("\"http\": 429", "\"http\": \"x\""));
    assert!(err.contains("DIR/j.json:2: faults[0].http: invalid type: string \"x\", expected u16"), "{err}");
}

#[test]
fn duplicate_names_and_bad_usage_exit_two() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.toml", MINIMAL);
    write(dir.path(), "b.toml", MINIMAL);
    tracefault()
        .arg("run")
        .arg(dir.path())
        .arg("--out")
        .arg(dir.path().join("o"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("name: expected a name unique within the suite"));
    tracefault().args(["run", "--jobs", "0"]).assert().code(2);
    tracefault().args(["run", "no/such/dir"]).assert().code(2).stderr(predicate::str::contains("no/such/dir"));
    tracefault().args(["frobnicate"]).assert().code(2);
}

#[test]
fn repro_line_reproduces_the_run_and_writes_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("run.jsonl");
    let assert = tracefault()
        .args([
            "run",
            "scenarios/01-worked-example.toml",
            "--strategy",
            "five-field",
            "--run",
            "3",
            "--seed",
            "7",
            "--trace-out",
        ])
        .arg(&trace)
        .assert()
        .code(0);
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(
        stdout.starts_with("worked-example-503-503-400 / five-field run 3 (seed 7): answer after 7 calls"),
        "{stdout}"
    );
    // The same run, as runs.csv reports it.
    let runs = Table::read(&crate::root().join("reports/runs.csv"));
    let row = runs.row(&[
        ("scenario", "worked-example-503-503-400"),
        ("strategy", "five-field"),
        ("run", "3"),
        ("seed", "7"),
    ]);
    let calls: u64 = row.num("calls");
    assert!(stdout.contains(&format!("after {calls} calls")), "{stdout} vs {row:?}");
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.lines().next().unwrap().contains(r#""id":"worked-example-503-503-400/five-field/run3""#));
}

#[test]
fn trace_out_needs_one_strategy() {
    tracefault()
        .args(["run", "scenarios/01-worked-example.toml", "--run", "1", "--trace-out", "/tmp/x.jsonl"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--trace-out needs exactly one scenario and one strategy"));
}

#[test]
fn no_progress_bar_when_piped() {
    let dir = tempfile::tempdir().unwrap();
    let sc = write(dir.path(), "s.toml", MINIMAL);
    let out = tracefault().arg("run").arg(&sc).arg("--out").arg(dir.path().join("o")).output().unwrap();
    assert!(out.stderr.is_empty(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn strategy_filter_keeps_only_named_strategies() {
    let dir = tempfile::tempdir().unwrap();
    let sc = write(dir.path(), "s.toml", MINIMAL);
    let out = dir.path().join("o");
    tracefault()
        .arg("run")
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .args(["--strategy", "five-field", "--runs", "7"])
        .assert()
        .code(0);
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert_eq!(summary.lines().count(), 2);
    assert!(summary.lines().nth(1).unwrap().starts_with("minimal,five-field,7,"));
    tracefault().arg("run").arg(&sc).arg("--out").arg(&out).args(["--strategy", "nope"]).assert().code(2);
}

#[test]
fn absurd_durations_and_rates_are_refused_not_overflowed() {
    let err = broken("s.toml", &MINIMAL.replace("http = 503", "fault = \"timeout\"\nafter_ms = 18446744073709551615"));
    assert!(err.contains("faults[0].after_ms: expected at most 86400000 ms (a day)"), "{err}");
    let err = broken("s.toml", &MINIMAL.replace("at = [1]", "rate_limit = { per_s = 1e-300, burst = 1 }"));
    assert!(err.contains("faults[0].rate_limit: expected per_s in [0.001, 1e6]"), "{err}");
    let err = broken("s.toml", &format!("{MINIMAL}[profile]\nmodel_latency_ms = 99999999999\n"));
    assert!(err.contains("profile.model_latency_ms: expected at most 86400000 ms"), "{err}");
}

#[test]
fn shrink_prints_the_smallest_schedule_that_still_loops() {
    let dir = tempfile::tempdir().unwrap();
    let base = r#"name = "loops"
runs = 5
strategies = ["error-string"]
[policy]
max_steps = 8
[profile]
p_continue = 1.0
[task]
[[task.steps]]
tool = "a"
[[task.steps]]
tool = "b"
"#;
    let sc = write(
        dir.path(),
        "s.toml",
        &format!(
            "{base}[[faults]]\ntarget = \"a\"\nat = [1]\nhttp = 503\n[[faults]]\ntarget = \"b\"\nprobability = 1.0\nfault = \"ambiguous\"\n"
        ),
    );
    let out = tracefault().arg("shrink").arg(&sc).args(["--strategy", "error-string", "--run", "2"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("ends step_cap: 1 of the 2 faults it met still make it loop"), "{text}");
    let schedule: String = text.lines().filter(|l| !l.starts_with('#')).map(|l| format!("{l}\n")).collect();
    assert_eq!(schedule, "[[faults]]\ntarget = \"b\"\nat = [1]\nfault = \"ambiguous\"\n");
    // The printed schedule, pasted into the scenario, reproduces the loop.
    let small = write(dir.path(), "small.toml", &format!("{base}{schedule}"));
    let o = tracefault().arg("run").arg(&small).args(["--strategy", "error-string", "--run", "2"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("step_cap"));
    // A run that does not loop has nothing to shrink.
    let calm = write(
        dir.path(),
        "calm.toml",
        &format!(
            "{}[[faults]]\ntarget = \"a\"\nat = [1]\nhttp = 503\n",
            base.replace("p_continue = 1.0", "p_continue = 0.0")
        ),
    );
    tracefault().arg("shrink").arg(&calm).args(["--strategy", "error-string", "--run", "0"]).assert().code(1);
    tracefault().arg("shrink").arg(&calm).args(["--strategy", "nope", "--run", "0"]).assert().code(2);
}

/// `[pricing]`: with the same price for input and output tokens the mean cost of a run is
/// `tokens_mean × price / 10^6` and the total is that × runs; priced only on output tokens it is
/// less; without `[pricing]` the cost columns are empty. Bad pricing is exit 2 naming the key.
#[test]
fn pricing_gives_the_cost_of_every_strategy() {
    let dir = tempfile::tempdir().unwrap();
    let priced = |p: &str| format!("{MINIMAL}[pricing]\n[pricing.models.m]\n{p}\n");
    let summary = |name: &str, text: &str| -> Vec<std::collections::BTreeMap<String, String>> {
        let sc = crate::write(dir.path(), &format!("{name}.toml"), text);
        let out = dir.path().join(name);
        tracefault().arg("run").arg(&sc).arg("--out").arg(&out).assert().code(0);
        let mut r = csv::Reader::from_path(out.join("summary.csv")).unwrap();
        let head: Vec<String> = r.headers().unwrap().iter().map(str::to_owned).collect();
        r.records().map(|rec| head.iter().cloned().zip(rec.unwrap().iter().map(str::to_owned)).collect()).collect()
    };
    let both = summary("both", &priced("input_per_mtok = 2.0\noutput_per_mtok = 2.0"));
    let out_only = summary("out", &priced("input_per_mtok = 0.0\noutput_per_mtok = 2.0"));
    let none = summary("none", MINIMAL);
    for ((b, o), n) in both.iter().zip(&out_only).zip(&none) {
        let f = |row: &std::collections::BTreeMap<String, String>, k: &str| row[k].parse::<f64>().unwrap();
        let want = f(b, "tokens_mean") * 2.0 / 1e6;
        assert!((f(b, "cost_usd_mean") - want).abs() < 1e-6, "{b:?}");
        assert!((f(b, "cost_usd_total") - want * f(b, "runs")).abs() < 1e-3, "{b:?}");
        assert!(f(o, "cost_usd_mean") < f(b, "cost_usd_mean") && f(o, "cost_usd_mean") > 0.0);
        assert_eq!((n["cost_usd_mean"].as_str(), n["cost_usd_total"].as_str()), ("", ""));
    }
    for (text, want) in [
        (
            priced("input_per_mtok = -1\noutput_per_mtok = 2"),
            "pricing.models.m.input_per_mtok: expected USD per million tokens",
        ),
        (
            format!("{MINIMAL}[pricing]\nmodel = \"x\"\n[pricing.models.m]\ninput_per_mtok = 1\noutput_per_mtok = 2\n"),
            "pricing.model: expected one of the models priced (\"m\"), got \"x\"",
        ),
        (format!("{MINIMAL}[pricing]\nmodels = {{}}\n"), "pricing.models: expected at least one model's prices"),
    ] {
        let err = broken("p.toml", &text);
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn mcp_fault_keys_are_checked() {
    let err = broken("s.toml", &MINIMAL.replace("http = 503", "fault = \"ambiguous\"\ntransport = true"));
    assert!(err.contains("faults[0].transport: expected `transport = true` only on a tool's http status"), "{err}");
    let err = broken("s.toml", &MINIMAL.replace("http = 503", "fault = \"timeout\"\ncursor = true"));
    assert!(err.contains("faults[0].cursor: expected `cursor` only with fault = \"ambiguous\""), "{err}");
    let dir = tempfile::tempdir().unwrap();
    for fault in ["session_expired", "stream_dropped", "schema_drift", "ambiguous\"\ncursor = true\n#\""] {
        let ok = MINIMAL.replace("http = 503", &format!("fault = \"{fault}\""));
        let sc = write(dir.path(), "s.toml", &ok);
        tracefault().arg("validate").arg(&sc).assert().code(0);
    }
    tracefault().args(["serve", "s.toml", "--mcp-strategy", "mcp-yaml"]).current_dir(dir.path()).assert().code(2);
    tracefault().args(["mcp", "s.toml"]).current_dir(dir.path()).assert().code(2);
}

#[test]
fn profile_ranges_are_checked_and_named() {
    let with =
        |line: &str| broken("s.toml", &MINIMAL.replace("runs = 20\n", &format!("runs = 20\n[profile]\n{line}\n")));
    let err = with("p_fix_args = { value = 0.7, range = [0.9, 0.5] }");
    assert!(
        err.contains("s.toml:4: profile.p_fix_args: expected a range [LO, HI] with LO <= HI, got [0.9, 0.5]"),
        "{err}"
    );
    let err = with("perception = { raw = { value = 0.6, range = [0.5, 1.2] } }");
    assert!(err.contains("profile.perception.raw: expected a range within [0, 1], got [0.5, 1.2]"), "{err}");
    let err = with("p_continue = { value = 0.5, range = [0.8, 0.97] }");
    assert!(err.contains("profile.p_continue: expected a value within its range [0.8, 0.97], got 0.5"), "{err}");
    let err = with("p_fix_args = { value = 0.7, rang = [0.5, 0.9] }");
    assert!(err.contains("profile.p_fix_args.rang: unknown field `rang`, expected `value` or `range`"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let ok = MINIMAL.replace("runs = 20\n", "runs = 20\n[profile]\np_fix_args = { value = 0.7, range = [0.5, 0.9] }\n");
    tracefault().arg("validate").arg(write(dir.path(), "s.toml", &ok)).assert().code(0);
}

#[test]
fn stream_fault_keys_are_checked() {
    let on_provider = |fault: &str| {
        MINIMAL
            .replace("target = \"search\"", "target = \"provider\"")
            .replace("http = 503", &format!("fault = {fault}"))
    };
    for (text, want) in [
        (
            MINIMAL.replace("http = 503", "fault = \"stream_cut\""),
            "faults[0].fault: expected a stream_* fault only on the provider (a tool's event stream breaks with \"stream_dropped\")",
        ),
        (
            on_provider("\"ambiguous\""),
            "faults[0].fault: expected an http status, \"timeout\", \"reset\" or a stream_* fault",
        ),
        (
            on_provider("\"stream_cut\"\nafter_events = 10001"),
            "faults[0].after_events: expected events in [0, 10000], got 10001",
        ),
        (
            on_provider("\"reset\"\nafter_events = 2"),
            "faults[0].after_events: expected `after_events` only with a stream_* fault",
        ),
        (
            on_provider("\"stream_cut\"\nstall_ms = 2"),
            "faults[0].stall_ms: expected `stall_ms` only with fault = \"stream_stall\"",
        ),
        (on_provider("\"stream_stall\"\nstall_ms = 86400001"), "faults[0].stall_ms"),
        (
            on_provider("\"stream_broke\""),
            "stream_cut, stream_malformed, stream_stall, stream_error, got \"stream_broke\"",
        ),
        (
            on_provider("\"stream_cut\"\nrate_limit = { per_s = 1, burst = 1 }"),
            "faults[0].rate_limit: expected a rate limit's refusal (an http status), not a stream fault",
        ),
    ] {
        let err = broken("s.toml", &text);
        assert!(err.contains(want), "{want}\n{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    for fault in [
        "\"stream_cut\"",
        "\"stream_malformed\"\nafter_events = 0",
        "\"stream_stall\"\nstall_ms = 10",
        "\"stream_error\"",
    ] {
        let sc = write(dir.path(), "s.toml", &on_provider(fault));
        tracefault().arg("validate").arg(&sc).assert().code(0);
    }
}
