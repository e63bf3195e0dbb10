//! `calibrate` → `predict` on a foreign model: a scripted Chat Completions server
//! (tests/fixtures/foreign-model/foreign_model.py) whose rules are not the simulated model's.
//! It reads a failure by its text alone, ignores retry-after, and re-sends a failed call K times
//! in a row, then gives up. The reference agent talks to it through `exec --live`; the
//! scenario's tool fails with a 503 half the time; the agent hands each failure to the model as
//! `ERROR: …` (error-string, one attempt).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::support::csv::Table;
use crate::{tracefault, write};

/// The foreign model, killed when dropped.
struct Foreign {
    child: Child,
    url: String,
}

impl Foreign {
    fn start(resends: u32) -> Foreign {
        let script = crate::root().join("tests/fixtures/foreign-model/foreign_model.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args(["--resends", &resends.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the foreign model");
        let mut port = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut port).unwrap();
        Foreign { child, url: format!("openai=http://127.0.0.1:{}/v1", port.trim()) }
    }
}

impl Drop for Foreign {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn scenario(dir: &Path, file: &str, seed: u64) -> PathBuf {
    write(
        dir,
        file,
        &format!(
            "name = \"foreign\"\nseed = {seed}\nstrategies = [\"error-string\"]\n[task]\n[[task.steps]]\n\
             tool = \"search\"\nargs = {{ query = \"Paris\" }}\nresult = {{ temp_c = 18 }}\n\
             [[faults]]\ntarget = \"search\"\nprobability = 0.5\nhttp = 503\n"
        ),
    )
}

/// 30 live runs of the scenario against `model`, into `out`.
fn live_runs(scenario: &Path, model: &Foreign, out: &Path) -> Table {
    let agent = crate::wire::reference_agent();
    let (code, report, stdout) = crate::wire::exec(
        scenario.to_str().unwrap(),
        out,
        &[agent.to_str().unwrap(), "--format", "openai-chat", "--strategy", "error-string"],
        &["--runs", "30", "--live", "--upstream", &model.url],
    );
    assert!(matches!(code, 0 | 1), "{stdout}");
    assert_eq!(report["model"]["answered_by"], "the providers (live)", "{report}");
    Table::read(&out.join("runs.csv"))
}

fn predict(scenario: &Path, profile: &Path, live: &Path, out: &Path) -> (i32, String, Table) {
    let o = tracefault()
        .arg("predict")
        .arg(scenario)
        .arg("--profile")
        .arg(profile)
        .arg("--live")
        .arg(live)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    (o.status.code().unwrap_or(-1), stdout, Table::read(&out.join("predict.csv")))
}

/// `tracefault predict SCENARIO --profile PROFILE --live DIR… EXTRA…`.
fn predict_with(scenario: &Path, profile: &Path, live: &[&Path], extra: &[&str]) -> std::process::Output {
    let mut cmd = tracefault();
    cmd.arg("predict").arg(scenario).arg("--profile").arg(profile);
    for dir in live {
        cmd.arg("--live").arg(dir);
    }
    cmd.args(extra).output().unwrap()
}

/// Each figure of runs.csv by its definition, by hand: answers, loops, give-ups, mean calls.
fn observed(t: &Table) -> [f64; 4] {
    let n = t.rows.len() as f64;
    let share =
        |ending: &[&str]| t.rows.iter().filter(|r| ending.contains(&&r["terminated_by"][..])).count() as f64 / n;
    let calls: f64 = t.rows.iter().map(|r| r["calls"].parse::<f64>().unwrap()).sum();
    [share(&["answer"]), share(&["step_cap", "loop_guard"]), share(&["gave_up"]), calls / n]
}

#[test]
fn a_profile_fitted_on_a_foreign_model_predicts_its_held_out_runs_and_fails_on_another_model() {
    let dir = tempfile::tempdir().unwrap();
    let (fit_on, held_out) = (scenario(dir.path(), "a.toml", 1), scenario(dir.path(), "b.toml", 2));
    let resends_2 = Foreign::start(2);
    let fitted_runs = live_runs(&fit_on, &resends_2, &dir.path().join("A"));
    // The live runs by the foreign rules, by hand: f failures before the first success cost
    // 2f + 3 calls (a model call and a tool call per failure, then the call, its success and
    // the answer); three failures in a row end it with 4 model calls and 3 tool calls, and an
    // answer while the last result is a failure is a give-up.
    for r in &fitted_runs.rows {
        let f: u64 = r["faults_injected"].parse().unwrap();
        let calls: u64 = r["calls"].parse().unwrap();
        match &r["terminated_by"][..] {
            "answer" => assert!(f <= 2 && calls == 2 * f + 3, "{:?}", r.cells()),
            "gave_up" => assert!(f == 3 && calls == 7 && r["model_calls"] == "4", "{:?}", r.cells()),
            other => panic!("{other}: {:?}", r.cells()),
        }
    }
    let first = std::fs::read_to_string(dir.path().join("A/traces/run-0.jsonl")).unwrap();
    let header: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_eq!(header["model"], "live:gpt-4o", "the model the agent asked for, not the mock: {header}");
    let traces: Vec<PathBuf> =
        std::fs::read_dir(dir.path().join("A/traces")).unwrap().map(|e| e.unwrap().path()).collect();
    let profile = dir.path().join("fitted.toml");
    let o = tracefault()
        .arg("calibrate")
        .args(&traces)
        .args(["--encoding", "prefix", "-o"])
        .arg(&profile)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let toml = std::fs::read_to_string(&profile).unwrap();
    // Every failure below its cap of two re-sends was re-sent: p = 1; the longest run is 2.
    let failures_below_cap: usize =
        fitted_runs.rows.iter().map(|r| r["faults_injected"].parse::<usize>().unwrap().min(2)).sum();
    assert!(
        toml.contains(&format!(
            "p_retry_transient = {{ value = 1.0, range = [{}, 1.0] }} # {failures_below_cap} of {failures_below_cap}",
            crate_wilson_lo(failures_below_cap as u64)
        )),
        "{toml}"
    );
    assert!(toml.contains("max_model_retries = 2 # longest run observed"), "{toml}");
    assert!(toml.contains("prefix = { value = 1.0, range = [1.0, 1.0] }"), "{toml}");

    // Held-out runs of the same model (another seed: other faults) lie inside every interval.
    let held = live_runs(&held_out, &resends_2, &dir.path().join("B"));
    let (code, stdout, table) = predict(&fit_on, &profile, &dir.path().join("B"), &dir.path().join("PB"));
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("All four figures of the 30 live runs lie inside"), "{stdout}");
    let by_hand = observed(&held);
    for (row, want) in table.rows.iter().zip(by_hand) {
        assert_eq!(row["observed"], format!("{want:.4}"), "{:?}", row.cells());
        assert_eq!(row["inside"], "true", "{:?}", row.cells());
        assert_eq!(row["live_runs"], "30");
    }

    // Another model (it never re-sends) is not this profile's: the check fails and says where.
    let resends_0 = Foreign::start(0);
    let other = live_runs(&held_out, &resends_0, &dir.path().join("C"));
    let (code, stdout, table) = predict(&fit_on, &profile, &dir.path().join("C"), &dir.path().join("PC"));
    assert_eq!(code, 1, "{stdout}");
    let flagged: Vec<&str> = table.rows.iter().filter(|r| r["inside"] == "false").map(|r| &r["figure"][..]).collect();
    assert_eq!(flagged, ["success_rate", "gave_up_rate", "calls_mean"], "{stdout}");
    assert!(stdout.contains("do not rely on the simulator's figures"), "{stdout}");
    // It gives up at the first failure: its success rate is the share of first attempts that
    // succeeded, and every run costs 3 calls.
    let first_ok = other.rows.iter().filter(|r| r["faults_injected"] == "0").count() as f64 / 30.0;
    assert_eq!(observed(&other)[0], first_ok);
    assert_eq!(observed(&other)[3], 3.0);
}

/// The lower end of the Wilson interval of n successes in n trials, widened to three decimals
/// (as calibrate writes it): (n + z²/2 − z·sqrt(z²/4)) / (n + z²) = n / (n + z²).
fn crate_wilson_lo(n: u64) -> String {
    let z2 = 1.959_963_984_540_054_f64.powi(2);
    let lo = n as f64 / (n as f64 + z2);
    format!("{:?}", (lo * 1000.0).floor() / 1000.0)
}

#[test]
fn predict_refuses_folders_that_are_no_live_runs_and_unknown_strategies() {
    let dir = tempfile::tempdir().unwrap();
    let sc = scenario(dir.path(), "a.toml", 1);
    let profile = crate::root().join("profiles/default.toml");
    let run = |extra: &[&str], live: &Path| {
        let o = predict_with(&sc, &profile, &[live], extra);
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, err) = run(&[], dir.path());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no exec.json there"), "{err}");
    // A folder of runs against the mock model.
    let mock = dir.path().join("mock");
    let agent = crate::wire::reference_agent();
    crate::wire::exec(
        sc.to_str().unwrap(),
        &mock,
        &[agent.to_str().unwrap(), "--format", "openai-chat", "--strategy", "error-string"],
        &["--runs", "2"],
    );
    let (code, err) = run(&[], &mock);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/model/answered_by: expected \"the providers (live)\""), "{err}");
    assert!(err.contains("exec.json"), "{err}");
    // A folder as exec --live writes it, by hand: a run the model ended, one cut off.
    let live = dir.path().join("live");
    std::fs::create_dir(&live).unwrap();
    let exec_json =
        |runs: &str| format!("{{\"model\": {{\"answered_by\": \"the providers (live)\"}}, \"runs\": {runs}}}");
    write(&live, "exec.json", &exec_json(r#"[{"ended": "answer"}, {"ended": "cut_off"}]"#));
    write(
        &live,
        "runs.csv",
        "scenario,strategy,run,seed,terminated_by,calls\nforeign,agent,0,1,answer,3\nforeign,agent,1,1,step_cap,1\n",
    );
    let (code, err) = run(&["--strategy", "no-such"], &live);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--strategy \"no-such\": not a strategy of"), "{err}");
    // A preset the scenario does not list is simulated as well (as `--rewrite` takes one).
    let (code, err) = run(&["--strategy", "five-field", "--draws", "160"], &live);
    assert!(matches!(code, Some(0 | 1)), "{err}");
    let (code, err) = run(&["--draws", "160"], &live);
    assert!(matches!(code, Some(0 | 1)), "{err}");
    assert!(err.contains("1 live runs left out: they ended cut off"), "{err}");
    write(&live, "runs.csv", "scenario,strategy,run,seed,terminated_by,calls\nother,agent,0,1,answer,3\n");
    let (code, err) = run(&[], &live);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("runs.csv") && err.contains("line 2: a run of scenario \"other\", not of \"foreign\""),
        "{err}"
    );
    write(&live, "exec.json", &exec_json(r#"[{"agents": [], "ended": "answer"}]"#));
    let (code, err) = run(&[], &live);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/runs/0/agents: expected the run's agents"), "{err}");
    write(
        &live,
        "exec.json",
        &exec_json(r#"[{"agents": [{"ended": "answer"}, {"ended": "answer"}]}, {"agents": [{"ended": "answer"}]}]"#),
    );
    let (code, err) = run(&[], &live);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/runs/1: 1 agent, where run 0 has 2: predict simulates one fleet size"), "{err}");
    // The two files of one exec describe the same runs.
    write(&live, "exec.json", &exec_json(r#"[{"ended": "answer"}]"#));
    write(
        &live,
        "runs.csv",
        "scenario,strategy,run,seed,terminated_by,calls\nforeign,agent,0,1,answer,3\nforeign,agent,1,1,answer,3\n",
    );
    let (code, err) = run(&[], &live);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("2 runs, where") && err.contains("describes 1"), "{err}");
}

/// A fleet's live runs (`exec --agents 2`) are set beside a simulated fleet of as many agents
/// started at once, whatever the scenario's own `[fleet]` says; a lone agent's beside a lone
/// agent. By hand, a scenario without faults: each agent calls the model, the tool, the model
/// again and answers, 3 calls, so a run of two agents answers with 6 calls in every draw and a
/// lone agent's with 3; a fleet's run with one agent cut off is left out.
#[test]
fn predict_simulates_the_live_runs_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let body = "name = \"calm\"\nseed = 4\nstrategies = [\"error-string\"]\n[task]\n[[task.steps]]\ntool = \"search\"\n\
                args = { query = \"Paris\" }\nresult = { temp_c = 18 }\n";
    let sc = write(dir.path(), "calm.toml", &format!("{body}[fleet]\nagents = 4\nstart = \"together\"\n"));
    let profile = crate::root().join("profiles/default.toml");
    let exec_json =
        |runs: &str| format!("{{\"model\": {{\"answered_by\": \"the providers (live)\"}}, \"runs\": {runs}}}");
    let predicted = |live: &Path| {
        let out = live.join("predicted");
        let o = predict_with(&sc, &profile, &[live], &["--draws", "200", "--out", out.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        (o.status.code(), stderr, Table::read(&out.join("predict.csv")))
    };
    let fleet = dir.path().join("fleet");
    std::fs::create_dir(&fleet).unwrap();
    write(
        &fleet,
        "exec.json",
        &exec_json(
            r#"[{"agents": [{"ended": "answer"}, {"ended": "answer"}]}, {"agents": [{"ended": "answer"}, {"ended": "cut_off"}]},
                {"agents": [{"ended": "answer"}, {"ended": "answer"}]}]"#,
        ),
    );
    write(
        &fleet,
        "runs.csv",
        "scenario,strategy,run,seed,terminated_by,calls\ncalm,agent,0,4,answer,6\ncalm,agent,1,4,answer,4\n\
         calm,agent,2,4,answer,6\n",
    );
    let (code, err, t) = predicted(&fleet);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("1 live runs left out"), "{err}");
    assert!(
        err.contains("simulating 2 agents a run started at once, as the live runs had, not the scenario's [fleet] (4 agents started at once)"),
        "{err}"
    );
    let row = |t: &Table, figure: &str| t.rows.iter().find(|r| r["figure"] == figure).unwrap().clone();
    for (figure, value) in [("success_rate", "1.0000"), ("loop_rate", "0.0000"), ("calls_mean", "6.0000")] {
        let r = row(&t, figure);
        assert_eq!((&r["observed"][..], &r["predicted"][..], &r["lo"][..], &r["hi"][..]), (value, value, value, value));
        assert_eq!((&r["live_runs"][..], &r["agents"][..]), ("2", "2"), "{r:?}");
    }
    let lone = dir.path().join("lone");
    std::fs::create_dir(&lone).unwrap();
    write(&lone, "exec.json", &exec_json(r#"[{"ended": "answer"}, {"ended": "answer"}]"#));
    write(
        &lone,
        "runs.csv",
        "scenario,strategy,run,seed,terminated_by,calls\ncalm,agent,0,4,answer,3\ncalm,agent,1,4,answer,3\n",
    );
    let (code, err, t) = predicted(&lone);
    assert_eq!(code, Some(0), "{err}");
    let r = row(&t, "calls_mean");
    assert_eq!(
        (&r["predicted"][..], &r["lo"][..], &r["hi"][..], &r["agents"][..]),
        ("3.0000", "3.0000", "3.0000", "1")
    );
    // Folders of other fleet sizes are not predicted together.
    let o = predict_with(&sc, &profile, &[&fleet, &lone], &[]);
    let (code, err) = (o.status.code(), String::from_utf8_lossy(&o.stderr));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("its runs are of 1 agent, the other folders' of 2 agents"), "{err}");
    let refused = |scenario: &Path, live: &Path| {
        let o = predict_with(scenario, &profile, &[live], &[]);
        assert_eq!(o.status.code(), Some(2), "{o:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    // A fault rule counted fleet-wide, as exec's mocks count it: the fleet's second search fails
    // with 503, whichever agent makes it. That agent's model gives up (3 calls, 6 for the run) or
    // calls again, the fleet's third search, which succeeds (5 calls, 8 for the run). Scoped to
    // each agent, the rule never fires: 6 in every draw.
    for (scope, lo, hi) in [("fleet", "6.0000", "8.0000"), ("agent", "6.0000", "6.0000")] {
        let rule = format!("[[faults]]\ntarget = \"search\"\nat = [2]\nhttp = 503\nscope = \"{scope}\"\n");
        let scoped = write(dir.path(), &format!("{scope}.toml"), &format!("{body}{rule}"));
        let out = dir.path().join(format!("{scope}-predicted"));
        let o = predict_with(&scoped, &profile, &[&fleet], &["--draws", "200", "--out", out.to_str().unwrap()]);
        assert_ne!(o.status.code(), Some(2), "{o:?}");
        let r = row(&Table::read(&out.join("predict.csv")), "calls_mean");
        assert_eq!((&r["lo"][..], &r["hi"][..]), (lo, hi), "scope = {scope}: {r:?}");
        let mean: f64 = r["predicted"].parse().unwrap();
        assert!((6.0..=8.0).contains(&mean) && (scope == "agent") == (mean == 6.0), "scope = {scope}: {r:?}");
    }
    // A fleet's traffic through `proxy`, scored as one run: no start times, no order of endings.
    let proxied = dir.path().join("proxied");
    std::fs::create_dir(&proxied).unwrap();
    write(
        &proxied,
        "exec.json",
        r#"{"agent": ["tracefault proxy"], "model": {"answered_by": "the providers (live)"},
            "runs": [{"agents": [{"ended": "answer"}, {"ended": "answer"}]}]}"#,
    );
    write(&proxied, "runs.csv", "scenario,strategy,run,seed,terminated_by,calls\ncalm,agent,0,4,answer,6\n");
    let err = refused(&sc, &proxied);
    assert!(err.contains("/runs/0/agents: the traffic of 2 agents through `proxy`"), "{err}");
    // More agents than exec runs.
    let many = vec![r#"{"ended": "answer"}"#; 1001].join(",");
    write(&proxied, "exec.json", &exec_json(&format!("[{{\"agents\": [{many}]}}]")));
    let err = refused(&sc, &proxied);
    assert!(err.contains("/runs/0/agents: expected the run's agents, a list of 1 to 1000"), "{err}");
}
