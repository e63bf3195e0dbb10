//! Hostile input, round two, on what a user hands tracefault: credentials on an agent's command
//! line, shards to merge, report folders written over, baselines and imports that are not what
//! they claim. Each test failed before its fix.

use std::path::Path;

use crate::{tracefault, write};

/// A scenario whose one tool answers; the agent is `true`, which calls nothing and exits 0.
fn quiet_scenario(dir: &Path) -> String {
    let text =
        "name = \"quiet\"\n[task]\n[[task.steps]]\ntool = \"search\"\nargs = { q = \"x\" }\nresult = { n = 1 }\n";
    write(dir, "quiet.toml", text).display().to_string()
}

/// Credentials on the agent's command line, in every form a command line carries them, reach
/// no report, no `exec.json` and not the terminal.
#[test]
fn credentials_in_the_agents_argv_reach_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let sc = quiet_scenario(dir.path());
    let out = dir.path().join("out");
    let secrets = ["sk-X1234567", "YSECRETY", "ZSECRETZ", "PASSWORDP", "BSECRETB", "TSECRETT"];
    let o = tracefault()
        .args(["exec", &sc, "--runs", "1", "--out"])
        .arg(&out)
        .args(["--", "true", "-H", "Authorization: Bearer sk-X1234567", "-H", "x-api-key: YSECRETY"])
        .args(["--header=x-goog-api-key: ZSECRETZ", "https://u:PASSWORDP@h", "--bearer", "BSECRETB"])
        .args(["--access-token=TSECRETT"])
        .output()
        .unwrap();
    let mut seen = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    for f in std::fs::read_dir(&out).unwrap().flatten().filter(|f| f.path().is_file()) {
        seen += &std::fs::read_to_string(f.path()).unwrap_or_default();
    }
    assert!(seen.contains("x-api-key: [redacted]"), "{seen}");
    for s in secrets {
        assert!(!seen.contains(s), "{s} reached the output:\n{seen}");
    }
}

/// Two shards of one scenario with rows, in `dir/s1`, `dir/s2`.
fn shards(dir: &Path) -> [std::path::PathBuf; 2] {
    [1, 2].map(|k| {
        let out = dir.join(format!("s{k}"));
        tracefault()
            .args(["run", "scenarios/01-worked-example.toml", "--runs", "80", "--shard", &format!("{k}/2"), "--out"])
            .arg(&out)
            .assert()
            .success();
        out
    })
}

/// `merge` of the two shards after `edit` changed the first: refused (exit 2) with `why`, and
/// no report written.
fn refused_after(edit: impl Fn(&Path), why: &str) {
    let dir = tempfile::tempdir().unwrap();
    let [s1, s2] = shards(dir.path());
    edit(&s1);
    let out = dir.path().join("merged");
    let o = tracefault().arg("merge").arg(&s1).arg(&s2).arg("--out").arg(&out).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{why}: {stderr}");
    assert!(stderr.contains(why), "expected {why:?} in: {stderr}");
    assert!(!out.join("summary.csv").exists(), "{why}: reports were written");
}

/// Rewrites `shard.json` in `dir` through `f`.
fn manifest(dir: &Path, f: impl Fn(&mut serde_json::Value)) {
    let path = dir.join("shard.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&path, v.to_string()).unwrap();
}

/// `merge` trusts nothing it reads: an inflated count, a unit without aggregates, a number
/// past any sum, another version's shard, a rows file that is a device or noise, a length of
/// 2^63 — each is refused with the shard named, never merged into a report.
#[test]
fn merge_refuses_shards_whose_figures_do_not_add_up() {
    let changed = "changed after it was written";
    refused_after(
        |d| manifest(d, |m| m["units"][0]["aggregates"][0]["terminated"][0] = 1_000_000_000_000_000_000u64.into()),
        changed,
    );
    refused_after(|d| manifest(d, |m| m["units"][0]["aggregates"] = serde_json::json!([])), changed);
    refused_after(|d| manifest(d, |m| m["units"][0]["len"] = (1u64 << 63).into()), changed);
    refused_after(|d| manifest(d, |m| m["tracefault_version"] = "0.0.1".into()), "written by tracefault 0.0.1");
    refused_after(
        |d| {
            std::fs::remove_file(d.join("runs.part")).unwrap();
            std::os::unix::fs::symlink("/dev/zero", d.join("runs.part")).unwrap();
        },
        "runs.part is not the",
    );
    refused_after(
        |d| {
            let len = std::fs::metadata(d.join("runs.part")).unwrap().len() as usize;
            std::fs::write(d.join("runs.part"), vec![b'7'; len]).unwrap();
        },
        changed,
    );
    // A consistent edit (checksum recomputed by hand) still has to add up.
    refused_after(
        |d| {
            manifest(d, |m| {
                m["units"][0]["aggregates"][0]["terminated"][0] = 1_000_000_000_000_000_000u64.into();
                let crc = crc32fast::hash(m["units"].to_string().as_bytes());
                m["units_crc"] = crc.into();
            })
        },
        "its counts do not match its",
    );
}

/// Reports written over reports: a run without `--baseline` into a folder that had a
/// comparison leaves no `comparison.*` beside its reports; a sweep into a run's folder leaves
/// none of the run's files beside its own.
#[test]
fn a_report_folder_holds_one_set_only() {
    let dir = tempfile::tempdir().unwrap();
    let (base, out) = (dir.path().join("base"), dir.path().join("out"));
    let run = |extra: &[&str], out: &Path| {
        tracefault()
            .args(["run", "scenarios/01-worked-example.toml", "--runs", "20", "--out"])
            .arg(out)
            .args(extra)
            .assert()
            .success();
    };
    run(&[], &base);
    run(&["--baseline", base.to_str().unwrap()], &out);
    assert!(out.join("comparison.md").exists());
    run(&[], &out);
    for stale in ["comparison.md", "comparison.json"] {
        assert!(!out.join(stale).exists(), "{stale} of the earlier run stayed beside the new reports");
    }
    tracefault()
        .args(["sweep", "scenarios/01-worked-example.toml", "--runs", "10", "--samples", "2", "--out"])
        .arg(&out)
        .assert()
        .success();
    let mut names: Vec<String> =
        std::fs::read_dir(&out).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["report.html", "report.md", "sweep.csv", "sweep.json"]);
}

/// An import of 5 conversations to numbered files where an earlier import wrote 200 leaves
/// the 5, not 195 files of the earlier import beside them.
#[test]
fn an_import_leaves_no_files_of_an_earlier_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    for source in ["tau-bench_gpt-4o-airline.json", "tau-bench_gpt-4o-airline.subset5.json"] {
        tracefault()
            .arg("import")
            .arg(crate::root().join("tests/fixtures/corpus").join(source))
            .arg("-o")
            .arg(&out)
            .assert()
            .success();
    }
    let n = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(n, 5, "files: {n}");
    assert!(dir.path().join("t-5.jsonl").exists() && !dir.path().join("t-6.jsonl").exists());
}

/// A baseline folder whose `report.json` or `runs.csv` is a device that never ends: `diff`
/// refuses it (exit 2) naming the file, rather than reading until memory runs out.
#[test]
fn a_baseline_that_never_ends_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for out in [&a, &b] {
        tracefault()
            .args(["run", "scenarios/01-worked-example.toml", "--runs", "20", "--out"])
            .arg(out)
            .assert()
            .success();
    }
    for file in ["runs.csv", "report.json"] {
        let saved = std::fs::read(a.join(file)).unwrap();
        std::fs::remove_file(a.join(file)).unwrap();
        std::os::unix::fs::symlink("/dev/zero", a.join(file)).unwrap();
        let o = tracefault().arg("diff").arg(&a).arg(&b).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{file}: {err}");
        assert!(err.contains(file), "{file}: {err}");
        std::fs::remove_file(a.join(file)).unwrap();
        std::fs::write(a.join(file), saved).unwrap();
    }
}
