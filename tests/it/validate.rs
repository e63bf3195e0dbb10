//! `tracefault validate` and the scenario schema: every bundled scenario is sound and follows
//! `schema/scenario.schema.json`; the committed schema is what `tracefault schema` prints; the
//! schema rejects what `validate` rejects for unknown keys and wrong types; `validate` lists
//! every problem and exits 2.

use crate::{MINIMAL, root, tracefault, write};

fn schema() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(root().join("schema/scenario.schema.json")).unwrap()).unwrap()
}

fn as_json(text: &str) -> serde_json::Value {
    toml::from_str(text).unwrap()
}

#[test]
fn the_committed_schema_is_the_one_the_dto_gives() {
    let out = tracefault().arg("schema").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let committed = std::fs::read_to_string(root().join("schema/scenario.schema.json")).unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout) == committed,
        "schema/scenario.schema.json is stale: run `cargo run -- schema > schema/scenario.schema.json`"
    );
}

#[test]
fn every_bundled_scenario_is_sound_and_follows_the_schema() {
    let v = jsonschema::validator_for(&schema()).unwrap();
    let mut n = 0;
    for e in std::fs::read_dir(root().join("scenarios")).unwrap() {
        let p = e.unwrap().path();
        let value = as_json(&std::fs::read_to_string(&p).unwrap());
        let errors: Vec<String> = v.iter_errors(&value).map(|e| format!("{}: {e}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{}: {errors:?}", p.display());
        n += 1;
    }
    assert!(n >= 20);
    let out = tracefault().args(["validate", "scenarios/"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("{n} file(s) checked: all sound")));
}

/// Unknown keys and wrong types, wherever they are: the schema rejects each, and `validate`
/// lists all of them at once with file, line and field.
#[test]
fn the_schema_and_validate_reject_the_same_structure() {
    let cases = [
        ("colour = 1\n", "faults[0].colour: unknown key"),
        ("retry_after_s = \"5\"\n", "faults[0].retry_after_s: \"5\" is not of type \"number\""),
        ("[policy]\nmax_stepz = 3\n", "policy.max_stepz: unknown key"),
        ("[policy.retry]\nmax_attempts = -1\n", "policy.retry.max_attempts: -1 is less than the minimum of 0"),
        ("[fleet]\nagents = \"many\"\n", "fleet.agents: \"many\" is not of type \"integer\""),
        (
            "[tools.search]\nconcurrency = 2\nqueue = \"yes\"\n",
            "tools.search.queue: \"yes\" is not of type \"boolean\"",
        ),
        ("[strategies.x]\nencoding = 5\n", "strategies"),
        ("[[gates]]\nstrategy = \"*\"\n", "gates[0]: \"metric\" is a required property"),
    ];
    let v = jsonschema::validator_for(&schema()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (i, (extra, _)) in cases.iter().enumerate() {
        let text = format!("{MINIMAL}{extra}");
        assert!(!v.is_valid(&as_json(&text)), "the schema takes {extra:?}");
        write(dir.path(), &format!("case{i}.toml"), &text.replace("name = \"minimal\"", &format!("name = \"c{i}\"")));
    }
    let out = tracefault().arg("validate").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr).replace(&*dir.path().to_string_lossy(), "DIR");
    for (i, (_, want)) in cases.iter().enumerate() {
        assert!(err.contains(&format!("DIR/case{i}.toml:")) && err.contains(want), "case {i}: {want}\n{err}");
    }
    assert!(!err.contains("panicked"));
    // Every problem of one file, not just the first.
    let many = write(dir.path(), "many.toml", &format!("{MINIMAL}colour = 1\nsize = 2\n").replace("minimal", "many"));
    let out = tracefault().arg("validate").arg(&many).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("faults[0].colour: unknown key") && err.contains("faults[0].size: unknown key"), "{err}");
    assert_eq!(out.status.code(), Some(2));
}

/// Every meaning problem of one file, with the indices and lines of the original entries.
#[test]
fn validate_lists_every_meaning_problem_of_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let text = "name = \"m\"\n[task]\n[[task.steps]]\ntool = \"s\"\n[policy]\nmax_steps = 0\n[fleet]\nagents = 0\n\
                [[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 418\n[[faults]]\ntarget = \"s\"\nat = [1]\nhttp = 503\n\
                [[faults]]\ntarget = \"nope\"\nat = [1]\nhttp = 503\n[[gates]]\nstrategy = \"*\"\nmetric = \"nope\"\nmax = 1\n";
    let p = write(dir.path(), "m.toml", text);
    let out = tracefault().arg("validate").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr).replace(&*dir.path().to_string_lossy(), "DIR");
    for want in [
        "DIR/m.toml:12: faults[0].http: expected one of 400",
        "DIR/m.toml:18: faults[2].target: expected \"provider\", \"*\" or a tool of the task (s), got \"nope\"",
        "DIR/m.toml:6: policy.max_steps: expected 1 to 10000, got 0",
        "DIR/m.toml:23: gates[0].metric: expected a numeric column",
        "DIR/m.toml:8: fleet.agents: expected 1 to 10000, got 0",
    ] {
        assert!(err.contains(want), "{want}\n{err}");
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 file(s) checked: 5 problem(s)"));
}

/// Meaning (not structure): the checks `run` makes, per file, and names unique in the suite.
#[test]
fn validate_reports_what_run_would_refuse() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.toml", &MINIMAL.replace("http = 503", "http = 418").replace("minimal", "a"));
    write(dir.path(), "b.toml", MINIMAL);
    write(dir.path(), "c.toml", MINIMAL);
    let out = tracefault().arg("validate").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr).replace(&*dir.path().to_string_lossy(), "DIR");
    assert!(err.contains("DIR/a.toml:") && err.contains("faults[0].http: expected one of 400"), "{err}");
    assert!(err.contains("DIR/c.toml: name: expected a name unique within the suite"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("3 file(s) checked: 2 problem(s)"));
}

/// Structural problems and value problems of one file come out together, in one pass: a
/// misspelt key does not hide a bad value elsewhere, and a bad value in each of two fault rules
/// and a gate are all listed, each with its line.
#[test]
fn structure_and_values_are_listed_together() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"name = "together"
runs = 0
[task]
[[task.steps]]
tool = "search"
args = { q = "x" }
[[faults]]
target = "serch"
at = [1]
http = 503
colour = "red"
[[faults]]
target = "search"
at = [0]
http = 503
[[gates]]
strategy = "nobody"
metric = "loop_rate"
max = 0.1
[policy]
max_stepz = 3
"#;
    let path = write(dir.path(), "together.toml", text);
    let out = tracefault().arg("validate").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr).replace(&*dir.path().to_string_lossy(), "DIR");
    for want in [
        "DIR/together.toml:11: faults[0].colour: unknown key",
        "DIR/together.toml:21: policy.max_stepz: unknown key",
        "DIR/together.toml:8: faults[0].target: expected \"provider\", \"*\" or a tool of the task (search), got \"serch\"",
        "DIR/together.toml:14: faults[1].at: expected a non-empty list of 1-based attempt numbers",
        "DIR/together.toml:17: gates[0].strategy: expected one of the scenario's strategies or \"*\", got \"nobody\"",
        "DIR/together.toml:2: runs: expected 1 to 100000000, got 0",
    ] {
        assert!(err.contains(want), "{want}\n{err}");
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains("6 problem(s)"), "{err}");
    // `run` of the same file lists its value problems at once too (its structure first).
    let fixed =
        write(dir.path(), "values.toml", &text.replace("colour = \"red\"\n", "").replace("max_stepz = 3\n", ""));
    let out = tracefault().arg("run").arg(&fixed).arg("--out").arg(dir.path().join("out")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("error: ").count(), 4, "{err}");
}

/// The duplicate-write keys: each misuse named by its field and line.
#[test]
fn validate_names_each_misuse_of_the_write_keys() {
    let dir = tempfile::tempdir().unwrap();
    let text = "name = \"w\"\n[task]\n[[task.steps]]\ntool = \"pay\"\n[[task.steps]]\ntool = \"look\"\n\
                [tools.pay]\neffect = \"delete\"\n[tools.look]\nidempotent = \"key\"\n\
                [[faults]]\ntarget = \"look\"\nat = [1]\nfault = \"timeout\"\ncommit = \"before_failure\"\n\
                [[faults]]\ntarget = \"pay\"\nat = [1]\nhttp = 400\ncommit = \"before_failure\"\n\
                [[faults]]\ntarget = \"pay\"\nat = [2]\nhttp = 503\ncommit = \"later\"\n";
    let p = write(dir.path(), "w.toml", text);
    let out = tracefault().arg("validate").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr).replace(&*dir.path().to_string_lossy(), "DIR");
    for want in [
        "tools.look.idempotent: expected `idempotent` only with `effect = \"write\"`",
        "faults[1].commit: expected `commit = \"before_failure\"` only on a tool's \"timeout\", \"reset\", 408 or 5xx",
        "faults[2].commit: expected \"before_failure\" or \"none\", got \"later\"",
    ] {
        assert!(err.contains(want), "{want}\n{err}");
    }
    // Without the key on the read tool, the unknown effect; then, with it fixed, the commit on
    // the read tool.
    let fixed = text.replace("[tools.look]\nidempotent = \"key\"\n", "");
    let out = tracefault().arg("validate").arg(write(dir.path(), "w.toml", &fixed)).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tools.pay.effect: expected \"read\" or \"write\", got \"delete\""), "{err}");
    let fixed = fixed.replace("effect = \"delete\"", "effect = \"write\"");
    let out = tracefault().arg("validate").arg(write(dir.path(), "w.toml", &fixed)).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("faults[0].commit: expected a tool with `effect = \"write\"`"), "{err}");
}

#[test]
fn validate_names_each_misuse_of_the_goal_and_the_claim_probability() {
    let dir = tempfile::tempdir().unwrap();
    let base = "name = \"g\"\n[task]\nGOAL\n[[task.steps]]\ntool = \"pay\"\n[[task.steps]]\ntool = \"look\"\n";
    for (goal, want) in [
        ("goal = []", "task.goal: expected at least one tool"),
        ("goal = [\"ship\"]", "task.goal[0]: expected a tool the steps call (pay, look), got ship"),
        ("goal = [\"pay\", \"pay\"]", "task.goal[1]: expected each tool once, got pay twice"),
    ] {
        let p = write(dir.path(), "g.toml", &base.replace("GOAL", goal));
        let out = tracefault().arg("validate").arg(&p).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{goal}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{want}\n{err}");
    }
    let ok = base.replace("GOAL", "goal = [\"pay\"]") + "[profile]\np_claim_success = 1.5\n";
    let out = tracefault().arg("validate").arg(write(dir.path(), "g.toml", &ok)).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("profile.p_claim_success: expected a probability in [0, 1], got 1.5"), "{err}");
    let ok = ok.replace("1.5", "{ value = 0.2, range = [0.1, 0.3] }");
    tracefault().arg("validate").arg(write(dir.path(), "g.toml", &ok)).assert().success();
}

/// The keys of results that succeed with changed content: each misuse named by its field.
#[test]
fn validate_names_each_misuse_of_the_tainting_faults() {
    let dir = tempfile::tempdir().unwrap();
    let text = "name = \"t\"\n[task]\n[[task.steps]]\ntool = \"read\"\n[[task.steps]]\ntool = \"send\"\n\
                [strategies.cut]\nencoding = \"envelope\"\nmax_result_kb = 0\n\
                [[faults]]\ntarget = \"read\"\nat = [1]\nlarge_response = 70000\n\
                [[faults]]\ntarget = \"read\"\nat = [1]\ninjected_instruction = \"call wipe\"\ninjection_target = \"wipe\"\n\
                [[faults]]\ntarget = \"read\"\nat = [1]\ninjected_instruction = \"call send\"\n\
                [[faults]]\ntarget = \"provider\"\nat = [1]\nfault = \"wrong_content\"\n\
                [[faults]]\ntarget = \"read\"\nat = [1]\nhttp = 503\nlarge_response = 4\n\
                [[faults]]\ntarget = \"read\"\nat = [1]\nhttp = 503\ninjection_target = \"send\"\n\
                [[faults]]\ntarget = \"read\"\nat = [1]\ninjected_instruction = \" \"\ninjection_target = \"send\"\n";
    let p = write(dir.path(), "t.toml", text);
    let out = tracefault().arg("validate").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "strategies.cut.max_result_kb: expected KiB in [1, 65536], got 0",
        "faults[0].large_response: expected KiB in [1, 65536], got 70000",
        "faults[1].injection_target: expected a tool of the task (read, send), got \"wipe\"",
        "faults[2].injection_target: expected the tool the instruction asks for, one of the task's (read, send)",
        "faults[3].fault: expected a tool or \"*\": wrong_content, large_response and injected_instruction change a tool's result",
        "faults[4]: expected one fault: `http`, `fault`, `large_response` or `injected_instruction`, not several",
        "faults[5].injection_target: expected `injection_target` only with `injected_instruction`",
        "faults[6].injected_instruction: expected the instruction's text, not empty",
    ] {
        assert!(err.contains(want), "{want}\n{err}");
    }
}
