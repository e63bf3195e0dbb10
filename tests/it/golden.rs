//! The committed `reports/` is the output of `tracefault run scenarios/`: running the suite
//! again must give the same bytes. When behaviour changes on purpose, regenerate reports/
//! (`cargo run --release -- run scenarios/`) and say why in the commit.

use crate::{root, tracefault};

pub const REPORTS: [&str; 6] = ["summary.csv", "runs.csv", "report.json", "report.md", "junit.xml", "report.html"];

#[test]
fn committed_reports_match_a_fresh_run() {
    let dir = tempfile::tempdir().unwrap();
    tracefault().args(["run", "scenarios/", "--out"]).arg(dir.path()).assert().code(0);
    for f in REPORTS {
        let committed = std::fs::read(root().join("reports").join(f)).unwrap_or_else(|e| panic!("reports/{f}: {e}"));
        let fresh = std::fs::read(dir.path().join(f)).unwrap();
        assert!(
            committed == fresh,
            "reports/{f} differs from a fresh run: regenerate it and explain why in the commit"
        );
    }
}

#[test]
fn summary_columns_are_the_contract() {
    let summary = std::fs::read_to_string(root().join("reports/summary.csv")).unwrap();
    assert_eq!(
        summary.lines().next().unwrap(),
        "scenario,strategy,runs,success_rate,loop_rate,loop_rate_lo,loop_rate_hi,gave_up_rate,\
unnecessary_failure_rate,calls_mean,calls_p50,calls_p95,calls_max,model_calls_mean,\
tool_calls_mean,wasted_retries,wasted_retries_per_run,orchestrator_retries,\
model_transient_roundtrips,breaker_trips,breaker_trips_per_run,tokens_mean,virtual_ms_mean,\
protocol_violations,raw_leaks,calls_delta_vs_baseline,calls_delta_lo,calls_delta_hi,\
agents,agents_succeeded_rate,makespan_ms_mean,agent_ms_p50,agent_ms_p99,peak_in_flight,\
retry_amplification,load_rejections_per_run,cost_usd_mean,cost_usd_total,duplicate_writes,\
duplicate_writes_per_run,false_success_rate,wrong_accepted_rate,injection_followed_rate"
    );
    let runs = std::fs::read_to_string(root().join("reports/runs.csv")).unwrap();
    assert_eq!(
        runs.lines().next().unwrap(),
        "scenario,strategy,run,seed,terminated_by,calls,model_calls,tool_calls,wasted_retries,\
orchestrator_retries,model_transient_roundtrips,breaker_trips,faults_injected,tokens,virtual_ms,\
protocol_violations,raw_leaks,agents,agents_succeeded,makespan_ms,agent_ms_p50,agent_ms_p99,\
peak_in_flight,retry_amplification,load_rejections,duplicate_writes,false_success,wrong_accepted,\
injection_followed"
    );
}

#[test]
fn bundled_suite_is_what_the_issue_asks_for() {
    let mut n = 0;
    for entry in std::fs::read_dir(root().join("scenarios")).unwrap() {
        let path = entry.unwrap().path();
        let sc = tracefault::scenario::load::load_file(&path).unwrap();
        assert!(!sc.description.is_empty(), "{} has no description", path.display());
        assert!(!sc.gates.is_empty(), "{} has no gates", path.display());
        n += 1;
    }
    assert!(n >= 8, "at least 8 bundled scenarios, found {n}");
}

#[test]
fn a_false_success_is_always_a_give_up_that_claimed_success() {
    // A simulated answer comes only after every call was accepted, so its goal is reached
    // unless a wrong value was taken as right; a recorded answer judged a failure counts as a
    // give-up. So no row's false success rate exceeds its give-up rate plus its wrong-accepted
    // rate (replays of traces whose headers list tools never called included: those tools are
    // no part of the default goal).
    let summary = std::fs::read_to_string(root().join("reports/summary.csv")).unwrap();
    let mut lines = summary.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let (gave, fs, wrong) = (col("gave_up_rate"), col("false_success_rate"), col("wrong_accepted_rate"));
    let mut some = 0;
    for l in lines {
        let c: Vec<&str> = l.split(',').collect();
        let (g, f, w): (f64, f64, f64) = (c[gave].parse().unwrap(), c[fs].parse().unwrap(), c[wrong].parse().unwrap());
        assert!(f <= g + w + 1e-9, "{l}");
        some += usize::from(f > 0.0);
    }
    assert!(some > 10, "the bundled suite's give-ups claim success at the profile's rate");
}
