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
    let x = std::fs::read(a.path().join("runs.csv")).unwrap();
    let y = std::fs::read(b.path().join("runs.csv")).unwrap();
    assert_ne!(x, y);
}
