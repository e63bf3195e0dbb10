//! Same inputs and seed ⇒ the same bytes, whatever `--jobs` is; every strategy meets the same
//! faults at the same attempts (common random numbers); cached readings give the numbers of
//! rendering every result.

use std::collections::BTreeMap;

use proptest::prelude::*;
use tracefault::engine::events::{Event, Observer};
use tracefault::suite::run_one;

use crate::golden::REPORTS;
use crate::support::arbitrary::{TOOLS, load, scenario};
use crate::support::csv::Table;
use crate::support::invariants::Invariants;
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
    let without_seed = |text: String| -> Vec<BTreeMap<String, String>> {
        let mut rows: Vec<_> = Table::parse(&text).rows.iter().map(|r| r.cells().clone()).collect();
        rows.iter_mut().for_each(|r| assert!(r.remove("seed").is_some()));
        rows
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Common random numbers: with history-free triggers and faults without memory, the n-th
    /// attempt on a tool meets the same rule under every strategy.
    #[test]
    fn every_strategy_meets_the_same_fault_at_the_same_attempt(
        seed in any::<u64>(),
        run in 0u64..1000,
        rules in prop::collection::vec((0usize..3, prop_oneof![
            prop::collection::vec(1u32..6, 1..3).prop_map(|a| format!("at = {a:?}")),
            (0.05f64..0.6).prop_map(|p| format!("probability = {p}")),
        ], prop_oneof![Just("http = 503"), Just("http = 429"), Just("fault = \"reset\""), Just("http = 502")]), 1..4),
    ) {
        let mut src = format!("name = \"crn\"\nseed = {seed}\nruns = 1\n[task]\n");
        for t in TOOLS {
            src.push_str(&format!("[[task.steps]]\ntool = \"{t}\"\n"));
        }
        for (t, trig, f) in &rules {
            src.push_str(&format!("[[faults]]\ntarget = \"{}\"\n{trig}\n{f}\n", TOOLS[*t]));
        }
        let sc = load(&src);
        struct Seen(BTreeMap<(u16, u32), Option<u16>>);
        impl Observer for Seen {
            fn event(&mut self, e: &Event<'_>) {
                if let Event::Attempt { tool, attempt, rule, .. } = *e {
                    self.0.insert((tool, attempt), rule);
                }
            }
        }
        let maps: Vec<_> = (0..sc.strategies.len()).map(|i| {
            let mut seen = Seen(BTreeMap::new());
            run_one(&sc, i, run, &mut seen);
            seen.0
        }).collect();
        for a in &maps {
            for b in &maps {
                for (k, r) in a {
                    if let Some(r2) = b.get(k) {
                        prop_assert_eq!(r, r2, "attempt {:?}", k);
                    }
                }
            }
        }
    }

    /// The metrics skip rendering and read results from a cache kept across a scenario's runs;
    /// an observer that reads content makes the engine render and read every result. Both must
    /// give the same numbers.
    #[test]
    fn cached_readings_give_the_numbers_of_rendering_every_result(src in scenario()) {
        use tracefault::engine::run::{Workspace, simulate};
        use tracefault::metrics::run::RunMetrics;
        let sc = load(&src);
        let mut ws = Workspace::default();
        ws.caching_for(&sc, |ws| {
            for run in 0..12 {
                for (i, s) in sc.strategies.iter().enumerate() {
                    let mut cached = RunMetrics::default();
                    cached.reset(sc.faults.rules.len());
                    simulate(&sc, s, run, sc.seed, ws, &mut cached);
                    let rendered = run_one(&sc, i, run, &mut Invariants::default());
                    prop_assert_eq!(&cached, &rendered, "{} run {}\n{}", s.name, run, src);
                }
            }
            Ok(())
        })?;
    }
}
