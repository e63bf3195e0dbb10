//! Same inputs and seed ⇒ the same bytes, whatever `--jobs` is.

use crate::golden::REPORTS;
use crate::tracefault;

#[test]
fn jobs_never_change_a_byte() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    // More runs than the bundled default, so work is split into many units across threads.
    for (dir, jobs) in [(&a, "1"), (&b, "3")] {
        tracefault()
            .args(["run", "scenarios/", "--runs", "700", "--jobs", jobs, "--out"])
            .arg(dir.path())
            .assert()
            .code(0);
    }
    for f in REPORTS {
        let x = std::fs::read(a.path().join(f)).unwrap();
        let y = std::fs::read(b.path().join(f)).unwrap();
        assert!(x == y, "{f} differs between --jobs 1 and --jobs 3");
    }
}

#[test]
fn check_determinism_flag_passes_on_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    tracefault()
        .args(["run", "scenarios/", "--check-determinism", "--jobs", "2", "--out"])
        .arg(dir.path())
        .assert()
        .code(0)
        .stdout(predicates::str::contains("determinism check: identical bytes with --jobs 2 and --jobs 1"));
}

#[test]
fn a_different_seed_changes_the_numbers() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    tracefault().args(["run", "scenarios/08-realistic-mix.toml", "--out"]).arg(a.path()).assert().code(0);
    // Another seed may fail a gate (exit 1); only the bytes matter here.
    tracefault()
        .args(["run", "scenarios/08-realistic-mix.toml", "--seed", "24", "--out"])
        .arg(b.path())
        .output()
        .unwrap();
    // summary.csv holds no seed: it differs only if the draws do. So does runs.csv with its
    // seed column taken out.
    let read = |d: &std::path::Path, f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    assert_ne!(read(a.path(), "summary.csv"), read(b.path(), "summary.csv"));
    let without_seed = |text: String| -> Vec<String> {
        text.lines().map(|l| l.split(',').enumerate().filter(|(i, _)| *i != 3).map(|(_, c)| c).collect()).collect()
    };
    assert_ne!(without_seed(read(a.path(), "runs.csv")), without_seed(read(b.path(), "runs.csv")));
}

/// Design 8: shards merged give the bytes of one unsharded run, whatever order they are given in.
#[test]
fn shards_merge_into_the_unsharded_reports() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tracefault().args(["run", "scenarios/", "--runs", "120", "--out"]).arg(d.join("whole")).assert().code(0);
    for k in 1..=3 {
        tracefault()
            .args(["run", "scenarios/", "--runs", "120", "--jobs", "1", "--shard", &format!("{k}/3"), "--out"])
            .arg(d.join(format!("s{k}")))
            .assert()
            .code(0)
            .stdout(predicates::str::contains(format!("shard {k}/3: ")));
    }
    tracefault()
        .arg("merge")
        .args([d.join("s2"), d.join("s3"), d.join("s1")])
        .arg("--out")
        .arg(d.join("merged"))
        .assert()
        .code(0);
    for f in REPORTS {
        let x = std::fs::read(d.join("whole").join(f)).unwrap();
        let y = std::fs::read(d.join("merged").join(f)).unwrap();
        assert!(x == y, "{f} differs between the merged shards and one run");
    }
    tracefault()
        .arg("merge")
        .args([d.join("s1"), d.join("s2")])
        .arg("--out")
        .arg(d.join("m"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("merge needs shards 1 to 3 exactly once each; got [1, 2]"));
    tracefault()
        .args(["run", "scenarios/", "--runs", "121", "--shard", "3/3", "--out"])
        .arg(d.join("other"))
        .assert()
        .code(0);
    tracefault()
        .arg("merge")
        .args([d.join("s1"), d.join("s2"), d.join("other")])
        .arg("--out")
        .arg(d.join("m"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("this shard ran another suite"));
    tracefault().args(["run", "scenarios/", "--shard", "4/3"]).assert().code(2);
}
