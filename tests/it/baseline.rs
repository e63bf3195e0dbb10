//! Release gates against a baseline, through the real binary, with expected values derived by
//! hand. Every run of the scenario calls the model, meets a 503 on its first search and succeeds
//! on the second: 4 calls. The "new release" also fails the second attempt: 5 calls in every
//! run, so the paired change in calls is exactly +1 (interval [1, 1]) and success stays 1.

use crate::{tracefault, write};

fn scenario(faults: &str, gates: &str) -> String {
    format!(
        "name = \"release\"\nruns = 10\n[strategies.s]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\n\
         retry = {{ max_attempts = 3, backoff = \"none\" }}\n[task]\n[[task.steps]]\ntool = \"search\"\n\
         [[faults]]\ntarget = \"search\"\nat = {faults}\nhttp = 503\n{gates}"
    )
}

fn run(dir: &std::path::Path, text: &str, out: &str, extra: &[&str]) -> (i32, String) {
    let sc = write(dir, "release.toml", text);
    let o = tracefault().arg("run").arg(&sc).arg("--out").arg(dir.join(out)).args(extra).output().unwrap();
    (o.status.code().unwrap(), String::from_utf8_lossy(&o.stdout).into_owned())
}

fn change(dir: &std::path::Path, out: &str, metric: &str) -> serde_json::Value {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(out).join("comparison.json")).unwrap()).unwrap();
    doc["changes"].as_array().unwrap().iter().find(|c| c["metric"] == metric).unwrap().clone()
}

#[test]
fn a_paired_regression_is_found_and_fails_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("old");
    assert_eq!(run(dir.path(), &scenario("[1]", ""), "old", &[]).0, 0);
    let b = base.to_str().unwrap();
    // Unchanged: every change is exactly 0, nothing regresses.
    let (code, out) = run(dir.path(), &scenario("[1]", ""), "same", &["--baseline", b, "--fail-on-regression"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("**PASS**: 5 change(s) compared, 0 significant regression(s)"), "{out}");
    // One more failed attempt per run: calls 4 -> 5 in every run.
    let (code, out) = run(dir.path(), &scenario("[1, 2]", ""), "new", &["--baseline", b]);
    assert_eq!(code, 0, "a regression alone does not fail without --fail-on-regression: {out}");
    let calls = change(dir.path(), "new", "calls_mean");
    assert_eq!((calls["old"].as_f64(), calls["new"].as_f64()), (Some(4.0), Some(5.0)), "{calls}");
    assert_eq!(
        (calls["change"].as_f64(), calls["lo"].as_f64(), calls["hi"].as_f64()),
        (Some(1.0), Some(1.0), Some(1.0))
    );
    assert_eq!((calls["method"].as_str(), calls["regression"].as_bool()), (Some("paired"), Some(true)));
    let success = change(dir.path(), "new", "success_rate");
    assert_eq!((success["change"].as_f64(), success["regression"].as_bool()), (Some(0.0), Some(false)));
    assert!(
        out.contains("| release | s | calls_mean | 4.0000 | 5.0000 | +1.0000 | [+1.0000, +1.0000] | paired |"),
        "{out}"
    );
    let (code, _) = run(dir.path(), &scenario("[1, 2]", ""), "new2", &["--baseline", b, "--fail-on-regression"]);
    assert_eq!(code, 1);
    // Without runs.csv on the new side the runs cannot be paired: Welch, spreads 0 on both sides.
    let (_, _) = run(dir.path(), &scenario("[1, 2]", ""), "unpaired", &["--baseline", b, "--no-runs-csv"]);
    let calls = change(dir.path(), "unpaired", "calls_mean");
    assert_eq!(
        (calls["method"].as_str(), calls["lo"].as_f64(), calls["regression"].as_bool()),
        (Some("unpaired"), Some(1.0), Some(true))
    );
    // `diff` gives the same comparison for two folders.
    let o =
        tracefault().arg("diff").arg(&base).arg(dir.path().join("new")).arg("--fail-on-regression").output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("1 significant regression(s)"));
}

#[test]
fn change_gates_bound_the_change_and_never_pass_without_a_baseline() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(run(dir.path(), &scenario("[1]", ""), "old", &[]).0, 0);
    let b = dir.path().join("old");
    let gate = |bound: &str| format!("[[gates]]\nstrategy = \"*\"\nmetric = \"calls_mean\"\n{bound}\n");
    // +1 call on 4 is +25%.
    let (code, out) =
        run(dir.path(), &scenario("[1, 2]", &gate("max_increase_pct = 30")), "a", &["--baseline", b.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let (code, out) =
        run(dir.path(), &scenario("[1, 2]", &gate("max_increase = 0.5")), "b", &["--baseline", b.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("| release | s | calls_mean | +1.0000 | ≤ +0.5 | **FAIL** |"), "{out}");
    // No baseline: the change gate is not checked and the exit code is the other gates'; with
    // --require-baseline it fails.
    let (code, out) = run(dir.path(), &scenario("[1]", &gate("max_increase = 0.5")), "c", &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("| no baseline: no --baseline given | ≤ +0.5 | not checked |"), "{out}");
    let (code, out) = run(dir.path(), &scenario("[1]", &gate("max_increase = 0.5")), "d", &["--require-baseline"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("**FAIL**"), "{out}");
}

/// The CI recipe's first run: the baseline folder is not there yet. The reports are written,
/// the change gates say "no baseline", and the exit code comes from the other gates; the second
/// run compares with the first's folder.
#[test]
fn a_first_run_without_its_baseline_writes_reports_and_warns() {
    let dir = tempfile::tempdir().unwrap();
    let gate = "[[gates]]\nstrategy = \"*\"\nmetric = \"calls_mean\"\nmax_increase = 0.5\n";
    let missing = dir.path().join("baseline");
    let src = crate::write(dir.path(), "s.toml", &scenario("[1]", gate));
    let first = dir.path().join("first");
    let out =
        tracefault().arg("run").arg(&src).arg("--out").arg(&first).arg("--baseline").arg(&missing).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stderr.contains("holds no report.json yet (a first run?)"), "{stderr}");
    assert!(stdout.contains("not checked"), "{stdout}");
    for f in ["summary.csv", "runs.csv", "report.json", "junit.xml", "comparison.md"] {
        assert!(first.join(f).exists(), "{f} was not written");
    }
    assert!(
        std::fs::read_to_string(first.join("junit.xml"))
            .unwrap()
            .contains("<skipped message=\"not checked: no baseline")
    );
    // The hard failure, for those who want it.
    let out = tracefault()
        .arg("run")
        .arg(&src)
        .arg("--out")
        .arg(dir.path().join("strict"))
        .args(["--require-baseline", "--baseline"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // The second run: the first run's folder is its baseline, and the gate is checked.
    std::fs::rename(&first, &missing).unwrap();
    let out = tracefault()
        .arg("run")
        .arg(&src)
        .arg("--out")
        .arg(dir.path().join("second"))
        .arg("--baseline")
        .arg(&missing)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("| +0.0000 | ≤ +0.5 | pass |"), "{stdout}");
}

#[test]
fn a_mismatched_baseline_says_so_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(run(dir.path(), &scenario("[1]", ""), "old", &[]).0, 0);
    let b = dir.path().join("old");
    let (code, out) =
        run(dir.path(), &scenario("[1]", ""), "seed", &["--baseline", b.to_str().unwrap(), "--seed", "9"]);
    assert_eq!(code, 1);
    assert!(out.contains("release: the baseline ran seed 1, this run seed 9: not compared"), "{out}");
    // A baseline of other scenarios: the one it has and this run lacks is named.
    let other = scenario("[1]", "").replace("name = \"release\"", "name = \"other\"");
    let (code, out) = run(dir.path(), &other, "other", &["--baseline", b.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(out.contains("other: not in the baseline") && out.contains("release: in the baseline"), "{out}");
    // A baseline from before report.json had a schema_version.
    let report = b.join("report.json");
    let text = std::fs::read_to_string(&report).unwrap().replace("\"schema_version\": 1,", "");
    std::fs::write(&report, text).unwrap();
    let sc = write(dir.path(), "release.toml", &scenario("[1]", ""));
    let o = tracefault()
        .arg("run")
        .arg(&sc)
        .arg("--out")
        .arg(dir.path().join("v"))
        .arg("--baseline")
        .arg(&b)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "an incompatible baseline is bad input: {err}");
    assert!(err.contains("old/report.json: report schema_version none (an older tracefault)"), "{err}");
    // A folder that is not a reports folder at all.
    let o = tracefault().arg("diff").arg(dir.path()).arg(dir.path().join("seed")).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("report.json: not a tracefault reports folder"), "{err}");
}

#[test]
fn github_step_summary_gets_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let gate = "[[gates]]\nstrategy = \"s\"\nmetric = \"calls_mean\"\nmax = 3\n";
    let sc = write(dir.path(), "release.toml", &scenario("[1]", gate));
    let o = tracefault()
        .arg("run")
        .arg(&sc)
        .arg("--out")
        .arg(dir.path().join("out"))
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(text.starts_with("earlier step\n## tracefault: FAIL"), "{text}");
    assert!(text.contains("| release | s | calls_mean | 4 | <= 3 | `tracefault run"), "{text}");
}

/// With a baseline, junit.xml has a `baseline` suite: regressions are failures only under
/// --fail-on-regression (else skipped), a failed change gate is a failure, what could not be
/// compared is an error; report.md carries the comparison.
#[test]
fn junit_keeps_regressions_failures_and_errors_apart() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(run(dir.path(), &scenario("[1]", ""), "old", &[]).0, 0);
    let b = dir.path().join("old");
    let gate = "[[gates]]\nstrategy = \"*\"\nmetric = \"calls_mean\"\nmax_increase = 0.5\n";
    run(dir.path(), &scenario("[1, 2]", gate), "new", &["--baseline", b.to_str().unwrap(), "--fail-on-regression"]);
    let junit = std::fs::read_to_string(dir.path().join("new/junit.xml")).unwrap();
    assert!(junit.contains(r#"<testsuite name="baseline" tests="2" failures="2" errors="0">"#), "{junit}");
    assert!(junit.contains("release / s: calls_mean regression"), "{junit}");
    assert!(junit.contains("calls_mean went from 4.0000 to 5.0000 (+1.0000, 95% [+1.0000, +1.0000], paired)"));
    let md = std::fs::read_to_string(dir.path().join("new/report.md")).unwrap();
    assert!(md.contains("## Against the baseline") && md.contains("### Regressions"), "{md}");
    run(dir.path(), &scenario("[1, 2]", gate), "seed", &["--baseline", b.to_str().unwrap(), "--seed", "3"]);
    let junit = std::fs::read_to_string(dir.path().join("seed/junit.xml")).unwrap();
    assert!(junit.contains(r#"<testsuite name="baseline" tests="2" failures="0" errors="2">"#), "{junit}");
    assert!(junit.contains("<error message=\"release: the baseline ran seed 1, this run seed 3: not compared\"/>"));
}

/// The README's CI recipe, step by step as it is written there: the `run` step on the bundled
/// suite and the `exec` step on an example agent, twice in order — the first time with no
/// baseline folder (the job's first run), the second with the first run's reports as the
/// baseline (the artifact the recipe downloads).
#[test]
fn the_readme_ci_recipe_passes_its_first_run_and_its_second() {
    let Some(py) = crate::wire::sdk_python() else { return };
    let readme = std::fs::read_to_string(crate::root().join("README.md")).unwrap();
    let steps: Vec<Vec<String>> = readme
        .lines()
        .filter_map(|l| l.trim().strip_prefix("run: cargo run --release -- "))
        .map(|cmd| cmd.split_whitespace().map(str::to_owned).collect())
        .collect();
    assert_eq!(steps.len(), 2, "the recipe's run and exec steps: {steps:?}");
    assert_eq!((steps[0][0].as_str(), steps[1][0].as_str()), ("run", "exec"));
    let dir = tempfile::tempdir().unwrap();
    for linked in ["scenarios", "examples"] {
        std::os::unix::fs::symlink(crate::root().join(linked), dir.path().join(linked)).unwrap();
    }
    let step = |args: &[String]| {
        let args: Vec<String> =
            args.iter().map(|a| if a == "python" { py.display().to_string() } else { a.clone() }).collect();
        let o = tracefault().current_dir(dir.path()).args(&args).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        (o.status.code(), text)
    };
    for (i, s) in steps.iter().enumerate() {
        let (code, text) = step(s);
        assert_eq!(code, Some(0), "first run, step {i}: {text}");
        assert!(text.contains("holds no report.json yet (a first run?)"), "first run, step {i}: {text}");
    }
    assert!(dir.path().join("reports/summary.csv").is_file() && dir.path().join("reports/agent/summary.csv").is_file());
    // The artifact of the first run is the second run's baseline.
    std::fs::rename(dir.path().join("reports"), dir.path().join("baseline")).unwrap();
    for (i, s) in steps.iter().enumerate() {
        let (code, text) = step(s);
        assert_eq!(code, Some(0), "second run, step {i}: {text}");
        assert!(!text.contains("a first run?") && text.contains("baseline"), "second run, step {i}: {text}");
    }
}
