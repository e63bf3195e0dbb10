//! Why a run ended: `run --explain --run N` and `exec`'s traces record each reading of the model
//! (the signal, what it perceived, its action) with every seeded draw and the profile's
//! probability. Checked against the decision rules by hand, and the mock model of `exec`
//! against the simulated model on the same run.

use std::path::Path;

use serde_json::Value;

use crate::tracefault;

fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().skip(1).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The decision lines of a trace without their call ids (the simulated model numbers calls
/// `call_N`, the mock `call_00000N`).
fn decisions(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "decision")
        .map(|e| {
            let draws: Vec<String> = e["draws"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| format!("{} {} {} {}", d["probability"], d["p"], d["draw"], d["below"]))
                .collect();
            format!("{} {} {} {} [{}]", e["signal"], e["truth"], e["perceived"], e["action"], draws.join(", "))
        })
        .collect()
}

/// The worked example under `error-string`, runs 0 to 3: each failure is a 503 read as an
/// `ERROR:` prefix. By the decision rules, a perception draw below `perception.prefix` reads it
/// right (transient); then a draw below `p_retry_transient` repeats the call, one above it gives
/// up. The run ends `gave_up` exactly when its last decision says so; the metrics are those of the
/// run without `--explain`.
#[test]
fn run_explain_records_each_reading_and_draw_by_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let mut gave_up = 0;
    for run in 0..4 {
        let run = run.to_string();
        let base = ["run", "scenarios/01-worked-example.toml", "--strategy", "error-string", "--run", &run];
        let plain = tracefault().args(base).output().unwrap();
        let out = dir.path().join(format!("{run}.jsonl"));
        let explained = tracefault().args(base).args(["--explain", "--trace-out"]).arg(&out).output().unwrap();
        let (plain, explained) =
            (String::from_utf8_lossy(&plain.stdout), String::from_utf8_lossy(&explained.stdout).into_owned());
        assert_eq!(plain.lines().next(), explained.lines().next(), "the same run, the same metrics");
        assert!(explained.contains("model: read as prefix (truth transient)"), "{explained}");
        let ev = events(&out);
        let decided: Vec<&Value> = ev.iter().filter(|e| e["type"] == "decision").collect();
        assert!(!decided.is_empty(), "run {run}: every run meets the 503");
        for d in &decided {
            assert_eq!(d["signal"], "prefix", "{d}");
            let draws = d["draws"].as_array().unwrap();
            for x in draws {
                assert_eq!(
                    x["below"].as_bool().unwrap(),
                    x["draw"].as_f64().unwrap() < x["p"].as_f64().unwrap(),
                    "{x}"
                );
            }
            assert_eq!(draws[0]["probability"], "perception.prefix");
            let read_right = draws[0]["below"].as_bool().unwrap();
            match d["truth"].as_str().unwrap() {
                // The 503s: read right as transient, then retried while p_retry_transient says so.
                "transient" if read_right => {
                    assert_eq!(d["perceived"], "transient", "{d}");
                    assert_eq!(draws[1]["probability"], "p_retry_transient", "{d}");
                    let repeat = draws[1]["below"].as_bool().unwrap();
                    assert_eq!(d["action"], if repeat { "repeat" } else { "give_up" }, "{d}");
                }
                "transient" => assert_eq!(d["perceived"], "terminal", "a misread 503: {d}"),
                // The 400: read right as bad arguments, the model fixes them; whether the fix is
                // right is the p_fix_args draw.
                "bad_args" if read_right => {
                    assert_eq!((d["perceived"].as_str(), d["action"].as_str()), (Some("bad_args"), Some("fix_args")));
                    assert_eq!(draws[1]["probability"], "p_fix_args", "{d}");
                }
                "bad_args" => assert!(matches!(d["perceived"].as_str(), Some("transient" | "terminal")), "{d}"),
                other => panic!("the worked example fails with 503s and a 400, not {other}"),
            }
        }
        let last = decided.last().unwrap();
        let ended = ev.iter().find(|e| e["type"] == "final").unwrap();
        // A give-up ends `gave_up`, or, when it claimed success (`p_claim_success`) without
        // the goal, as an answer judged a failure.
        let gave = ended["outcome"] == "gave_up" || ended["success"] == false;
        assert_eq!(gave, last["action"] == "give_up", "run {run}: {ended}");
        gave_up += usize::from(gave);
    }
    assert!(gave_up > 0, "some of the four runs give up");
}

/// The same draws in `exec`: the reference agent hands failures back as `ERROR:` text, as the
/// `error-string` strategy does, and the mock model reads and decides as the simulated model
/// does on the same run — the same readings, probabilities and draws, in the same order.
#[test]
fn exec_decisions_are_the_simulated_models_on_the_same_run() {
    let agent = crate::wire::reference_agent();
    let dir = tempfile::tempdir().unwrap();
    let (_, report, stdout) = crate::wire::exec(
        "scenarios/01-worked-example.toml",
        &dir.path().join("exec"),
        &[agent.to_str().unwrap(), "--strategy", "error-string"],
        &["--runs", "4"],
    );
    for run in 0..4 {
        let wire = events(&dir.path().join(format!("exec/traces/run-{run}.jsonl")));
        let out = dir.path().join(format!("sim-{run}.jsonl"));
        let args = ["run", "scenarios/01-worked-example.toml", "--strategy", "error-string", "--explain"];
        tracefault().args(args).args(["--run", &run.to_string(), "--trace-out"]).arg(&out).assert().code(0);
        assert_eq!(decisions(&wire), decisions(&events(&out)), "run {run}: {stdout}");
        let ended = &report["runs"][run]["ended"];
        if ended == "gave_up" {
            let why = report["checks"][5]["details"].to_string();
            assert!(
                why.contains(&format!("run {run}: the mock model gave up")) && why.contains("→ no; give_up"),
                "{why}"
            );
        }
    }
}

/// `(terminated_by, false_success)` of each run of `runs.csv` in `dir` for `strategy`.
fn endings(dir: &std::path::Path, strategy: &str) -> Vec<(String, String)> {
    let mut r = csv::Reader::from_path(dir.join("runs.csv")).unwrap();
    let head: Vec<String> = r.headers().unwrap().iter().map(str::to_owned).collect();
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    let (s, t, f) = (col("strategy"), col("terminated_by"), col("false_success"));
    r.records().map(|r| r.unwrap()).filter(|r| &r[s] == strategy).map(|r| (r[t].to_owned(), r[f].to_owned())).collect()
}

/// The mock model claims success after giving up as the simulated model does on the same run
/// (its `p_claim_success` draw at the same slot), and exec finds the false success from the
/// mock tools' outcomes: its runs.csv rows say what run's say for the same strategy.
#[test]
fn exec_finds_the_false_successes_the_simulated_model_makes_on_the_same_runs() {
    let agent = crate::wire::reference_agent();
    let dir = tempfile::tempdir().unwrap();
    // The bundled scenario with a model that claims success after most give-ups.
    let text = std::fs::read_to_string(crate::root().join("scenarios/25-false-success.toml")).unwrap();
    let path = dir.path().join("claims.toml");
    std::fs::write(&path, text.replace("p_claim_success = 0.2", "p_claim_success = 0.6")).unwrap();
    let sc = path.to_str().unwrap();
    let (_, report, stdout) = crate::wire::exec(
        sc,
        &dir.path().join("exec"),
        &[agent.to_str().unwrap(), "--strategy", "error-string"],
        &["--runs", "16", "--time-scale", "0.001"],
    );
    let sim_run = tracefault()
        .args(["run", sc, "--runs", "16", "--strategy", "error-string", "--out"])
        .arg(dir.path().join("sim"))
        .output()
        .unwrap();
    assert!(matches!(sim_run.status.code(), Some(0 | 1)), "{sim_run:?}");
    let sim = endings(&dir.path().join("sim"), "error-string");
    let wire = endings(&dir.path().join("exec"), report["agent"].as_str().unwrap_or("reference_agent"));
    assert_eq!(sim.len(), 16);
    assert!(sim.iter().any(|(_, f)| f == "1"), "the 16 runs hold a false success: {sim:?}");
    assert!(sim.iter().any(|(t, f)| t == "gave_up" && f == "0"), "and an honest give-up: {sim:?}");
    assert_eq!(wire, sim, "{stdout}");
    let counted: Vec<u64> =
        report["runs"].as_array().unwrap().iter().map(|r| r["counted"]["false_success"].as_u64().unwrap()).collect();
    let want: Vec<u64> = sim.iter().map(|(_, f)| f.parse().unwrap()).collect();
    assert_eq!(counted, want);
}

/// A tool that only ever answers "more may be available" returned data: an answer after it
/// reached its goal over the wire as in the simulator (a partial result is no failure).
#[test]
fn exec_counts_a_partial_result_toward_the_goal() {
    let agent = crate::wire::reference_agent();
    let dir = tempfile::tempdir().unwrap();
    let (_, report, stdout) = crate::wire::exec(
        "scenarios/02-ambiguous-loop.toml",
        &dir.path().join("exec"),
        &[agent.to_str().unwrap()],
        &["--runs", "4", "--time-scale", "0.001"],
    );
    let rows = endings(&dir.path().join("exec"), report["agent"].as_str().unwrap_or("reference_agent"));
    assert!(rows.iter().any(|(t, _)| t == "answer"), "{rows:?} {stdout}");
    assert!(rows.iter().all(|(_, f)| f == "0"), "{rows:?}");
}
