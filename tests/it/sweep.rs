//! `tracefault sweep`: profiles drawn over the probabilities' ranges; checked against `run`,
//! across `--jobs`, and on bad parameters.

use crate::support::csv::{Row, Table};
use crate::{root, tracefault};

/// Every probability pinned at the bundled default (`KEY=V..V`).
fn pinned() -> Vec<String> {
    [
        ("p_continue", 0.93),
        ("p_retry_transient", 0.8),
        ("p_fix_args", 0.7),
        ("p_give_up_terminal", 0.9),
        ("perception.envelope", 0.98),
        ("perception.flag", 0.95),
        ("perception.object", 0.92),
        ("perception.prefix", 0.90),
        ("perception.raw", 0.60),
        ("perception.unmarked", 0.75),
    ]
    .iter()
    .flat_map(|(k, v)| ["--param".to_owned(), format!("{k}={v}..{v}")])
    .collect()
}

#[test]
fn a_sweep_with_every_range_collapsed_is_run_with_that_profile() {
    let dir = tempfile::tempdir().unwrap();
    let sc = root().join("scenarios/01-worked-example.toml");
    tracefault()
        .arg("sweep")
        .arg(&sc)
        .args(["--samples", "3", "--runs", "200", "--out"])
        .arg(dir.path().join("s"))
        .args(pinned())
        .assert()
        .code(0);
    tracefault().arg("run").arg(&sc).args(["--runs", "200", "--out"]).arg(dir.path().join("r")).assert().code(0);
    let summary = Table::read(&dir.path().join("r/summary.csv"));
    let sweep = Table::read(&dir.path().join("s/sweep.csv"));
    for c in &summary.rows {
        let strategy = c["strategy"].as_str();
        if strategy == "recorded" {
            continue; // what the recorded model did is not a strategy: a sweep has no row for it
        }
        let rows: Vec<&Row> = sweep.rows.iter().filter(|r| r["strategy"] == strategy).collect();
        assert_eq!(rows.len(), 3, "{strategy}: one row per sample");
        for r in rows {
            // The metrics after the ten parameters: success, loop rate, calls, wasted retries.
            for m in ["success_rate", "loop_rate", "calls_mean", "wasted_retries_per_run"] {
                let (a, b): (f64, f64) = (r.num(m), c.num(m));
                assert!((a - b).abs() < 1e-3, "{strategy} {m}: sweep {a}, run {b}");
            }
        }
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("s/sweep.json")).unwrap()).unwrap();
    let success = &json["scenarios"][0]["metrics"][0];
    assert_eq!(success["metric"], "success_rate");
    // Nothing varies, so nothing moves anything.
    for s in success["sensitivity"].as_array().unwrap() {
        assert!(s["correlation"].as_object().unwrap().values().all(|v| v == 0.0), "{s}");
    }
}

#[test]
fn a_sweep_is_the_same_whatever_the_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let sc = root().join("scenarios/02-ambiguous-loop.toml");
    for jobs in ["1", "2"] {
        tracefault()
            .arg("sweep")
            .arg(&sc)
            .args(["--samples", "8", "--runs", "100", "--jobs", jobs, "--out"])
            .arg(dir.path().join(jobs))
            .assert()
            .code(0);
    }
    for f in ["sweep.csv", "sweep.json", "report.md"] {
        let a = std::fs::read(dir.path().join("1").join(f)).unwrap();
        assert_eq!(a, std::fs::read(dir.path().join("2").join(f)).unwrap(), "{f}");
    }
    // On the ambiguous loop only five-field states the result complete: it ranks first on
    // loop rate in every profile, and p_continue is what moves the others' success.
    let md = std::fs::read_to_string(dir.path().join("1/report.md")).unwrap();
    assert!(md.contains("| five-field | 1.000 | 1.000 |"), "{md}");
    assert!(md.contains("| error-string | 0.000 | 0.000 | 0.000 | 0.000 | p_continue (-"), "{md}");
}

#[test]
fn bad_sweep_parameters_are_named() {
    let sc = root().join("scenarios/02-ambiguous-loop.toml");
    for (param, expected) in [
        ("p_fix_args=0.9..0.5", "p_fix_args: LO <= HI"),
        ("perception.raw=0.5..1.2", "perception.raw: a probability range within [0, 1]"),
        ("p_fixargs=0.5..0.9", "p_fixargs: one of p_continue"),
    ] {
        let o = tracefault().arg("sweep").arg(&sc).args(["--param", param]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{param}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(expected), "{param}: {err}");
    }
    let o = tracefault().arg("sweep").arg(&sc).args(["--samples", "0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// Scenario 01 (503, 503, then 400: no partial result anywhere) with extra gate lines, in `dir`.
fn worked_example_with(dir: &std::path::Path, gates: &str) -> std::path::PathBuf {
    let src = std::fs::read_to_string(root().join("scenarios/01-worked-example.toml")).unwrap();
    let trace = root().join("traces/search-503-503-400.jsonl");
    let text = src.replace("\"traces/search-503-503-400.jsonl\"", &format!("{:?}", trace.display().to_string()));
    let path = dir.join("gated.toml");
    std::fs::write(&path, text + gates).unwrap();
    path
}

#[test]
fn sobol_indices_of_a_parameter_no_run_reads_are_exactly_zero() {
    let dir = tempfile::tempdir().unwrap();
    let sc = worked_example_with(dir.path(), "");
    tracefault()
        .arg("sweep")
        .arg(&sc)
        .args(["--samples", "8", "--runs", "200", "--sensitivity", "sobol", "--out"])
        .arg(dir.path().join("s"))
        .assert()
        .code(0);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("s/sweep.json")).unwrap()).unwrap();
    assert_eq!(json["evaluations"], 8 * 12, "Saltelli's N·(d + 2)");
    let mut moved = 0;
    for m in json["scenarios"][0]["metrics"].as_array().unwrap() {
        for s in m["sensitivity"].as_array().unwrap() {
            // No fault here leaves a partial result, so the model never decides whether to
            // continue one: p_continue's indices are zero, not noise.
            assert_eq!(s["first_order"]["p_continue"], 0.0, "{}: {s}", m["metric"]);
            assert_eq!(s["total"]["p_continue"], 0.0, "{}: {s}", m["metric"]);
            // Only the raw-exception strategy hands the model a raw exception.
            if s["strategy"] != "raw-exception" {
                assert_eq!(s["total"]["perception.raw"], 0.0, "{}: {s}", m["metric"]);
            }
            moved += usize::from(s["total"].as_object().unwrap().values().any(|v| v.as_f64().unwrap() > 0.0));
        }
    }
    assert!(moved > 0, "some parameter moves some metric");
    // The 503s are retried by the model under raw-exception: its success moves with p_retry_transient.
    let raw = &json["scenarios"][0]["metrics"][0]["sensitivity"][0];
    assert_eq!(raw["strategy"], "raw-exception");
    assert!(raw["total"]["p_retry_transient"].as_f64().unwrap() > 0.05, "{raw}");
}

#[test]
fn a_sharded_sweep_merges_to_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let sc = root().join("scenarios/02-ambiguous-loop.toml");
    let sweep = |extra: &[&str], out: &str| {
        tracefault()
            .arg("sweep")
            .arg(&sc)
            .args(["--samples", "5", "--runs", "50", "--sensitivity", "sobol", "--out"])
            .arg(dir.path().join(out))
            .args(extra)
            .assert()
            .code(0);
    };
    sweep(&[], "whole");
    for k in 1..=3 {
        sweep(&["--shard", &format!("{k}/3")], &format!("part{k}"));
    }
    let part = |k: usize| dir.path().join(format!("part{k}"));
    // Shards in any order.
    tracefault()
        .arg("merge")
        .args([part(3), part(1), part(2)])
        .arg("--out")
        .arg(dir.path().join("merged"))
        .assert()
        .code(0);
    for f in ["sweep.csv", "sweep.json", "report.md"] {
        let whole = std::fs::read(dir.path().join("whole").join(f)).unwrap();
        assert_eq!(whole, std::fs::read(dir.path().join("merged").join(f)).unwrap(), "{f}");
    }
    // A shard missing, or given twice, is named.
    let o =
        tracefault().arg("merge").args([part(1), part(3)]).arg("--out").arg(dir.path().join("m2")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("shard 2/3 is missing"), "{o:?}");
    let o = tracefault()
        .arg("merge")
        .args([part(1), part(1), part(2)])
        .arg("--out")
        .arg(dir.path().join("m3"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    // A run's shard does not mix in.
    let run_shard = dir.path().join("run-shard");
    tracefault().arg("run").arg(&sc).args(["--runs", "20", "--shard", "1/1", "--out"]).arg(&run_shard).assert().code(0);
    let o =
        tracefault().arg("merge").args([part(1), run_shard]).arg("--out").arg(dir.path().join("m5")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a sweep shard"), "{o:?}");
    // A shard of another sweep (another seed) does not mix in.
    sweep(&["--shard", "2/3", "--seed", "9"], "other");
    let o = tracefault()
        .arg("merge")
        .args([part(1), dir.path().join("other"), part(3)])
        .arg("--out")
        .arg(dir.path().join("m4"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("shards of different sweeps"), "{o:?}");
}

#[test]
fn rank_first_share_gates_pass_and_fail_in_a_sweep_and_wait_for_one_in_run() {
    let dir = tempfile::tempdir().unwrap();
    let gates = r#"
[[gates]]
strategy = "five-field"
metric = "rank_first_share"
min = 0.9

[[gates]]
strategy = "error-string"
metric = "rank_first_share"
on = "calls_mean"
min = 0.5
"#;
    let sc = worked_example_with(dir.path(), gates);
    let o = tracefault()
        .arg("sweep")
        .arg(&sc)
        .args(["--samples", "8", "--runs", "200", "--out"])
        .arg(dir.path().join("s"))
        .output()
        .unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    // Five-field succeeds most in every profile; error-string is never the cheapest.
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    // Scenario 01 carries a five-field gate of its own.
    assert!(out.contains("FAIL: 1 of 3 gates failed"), "{out}");
    assert!(err.contains("error-string: rank_first_share(calls_mean) = 0.000 is not >= 0.5"), "{err}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("s/sweep.json")).unwrap()).unwrap();
    let gates = json["gates"].as_array().unwrap();
    assert_eq!(gates.len(), 3);
    for g in gates {
        let five = g["strategy"] == "five-field";
        assert_eq!(g["metric"], if five { "rank_first_share(success_rate)" } else { "rank_first_share(calls_mean)" });
        assert_eq!(g["value"], if five { 1.0 } else { 0.0 }, "{g}");
        assert_eq!(g["passed"], five, "{g}");
    }
    // `run` has one profile, not a range of them: the robustness gates are left to `sweep`.
    let o =
        tracefault().arg("run").arg(&sc).args(["--runs", "200", "--out"]).arg(dir.path().join("r")).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("PASS: 2 gates passed"), "{o:?}");
}

#[test]
fn bad_rank_first_share_gates_are_named() {
    let dir = tempfile::tempdir().unwrap();
    for (gate, expected) in [
        (
            "metric = \"success_rate\"\non = \"loop_rate\"\nmin = 0.5",
            "gates[3].on: expected only with metric = \"rank_first_share\"",
        ),
        (
            "metric = \"rank_first_share\"\non = \"latency\"\nmin = 0.5",
            "gates[3].on: expected one of success_rate, loop_rate",
        ),
        ("metric = \"rank_first_share\"\nmin = 1.5", "gates[3].min: expected a share within [0, 1], got 1.5"),
        (
            "metric = \"rank_first_share\"\nmax_increase = 0.1",
            "gates[3]: expected `min` or `max` with \"rank_first_share\"",
        ),
    ] {
        let sc = worked_example_with(dir.path(), &format!("\n[[gates]]\nstrategy = \"five-field\"\n{gate}\n"));
        let o = tracefault().arg("sweep").arg(&sc).args(["--samples", "2", "--runs", "10"]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{gate}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(expected), "{gate}: {err}");
    }
}
