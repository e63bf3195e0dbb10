//! `tracefault sweep`: profiles drawn over the probabilities' ranges; checked against `run`,
//! across `--jobs`, and on bad parameters.

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
    let summary = std::fs::read_to_string(dir.path().join("r/summary.csv")).unwrap();
    let sweep = std::fs::read_to_string(dir.path().join("s/sweep.csv")).unwrap();
    let head: Vec<&str> = summary.lines().next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|c| *c == name).unwrap();
    for line in summary.lines().skip(1) {
        let c: Vec<&str> = line.split(',').collect();
        let strategy = c[1];
        if strategy == "recorded" {
            continue; // what the recorded model did is not a strategy: a sweep has no row for it
        }
        let rows: Vec<Vec<&str>> =
            sweep.lines().map(|l| l.split(',').collect::<Vec<_>>()).filter(|r| r[1] == strategy).collect();
        assert_eq!(rows.len(), 3, "{strategy}: one row per sample");
        for r in rows {
            // The metrics follow the ten parameters: success, loop rate, calls, wasted retries.
            for (i, m) in ["success_rate", "loop_rate", "calls_mean", "wasted_retries_per_run"].iter().enumerate() {
                let (a, b): (f64, f64) = (r[13 + i].parse().unwrap(), c[col(m)].parse().unwrap());
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
