//! Fleets through the real binary: a fleet of one is today's run byte for byte, the AWS backoff
//! experiment comes out in the orders the post reports, and fleet keys that make no sense are
//! exit 2 naming the file and key. Properties over random fleets: every agent keeps the engine's
//! invariants and every limit holds, agents that share nothing keep their own draws, a fleet
//! breaker opens for everyone, a fleet retry budget bounds the whole fleet, and a recorded trace
//! re-adds to its run.

use std::collections::BTreeMap;

use proptest::prelude::*;
use tracefault::engine::events::{By, Event, Observer};
use tracefault::engine::strategy::Routing;
use tracefault::suite::run_one;

use crate::cli::broken;
use crate::support::arbitrary::{fleet_scenario, load, scenario};
use crate::support::csv::Table;
use crate::support::invariants::Invariants;
use crate::{MINIMAL, root, tracefault, write};

fn run_to(scenarios: &std::path::Path, out: &std::path::Path) {
    tracefault().arg("run").arg(scenarios).arg("--out").arg(out).assert().code(0);
}

#[test]
fn a_fleet_of_one_gives_the_reports_of_a_lone_agent() {
    let dir = tempfile::tempdir().unwrap();
    let fleets = ["", "[fleet]\nagents = 1\n", "[fleet]\nagents = 1\nstart = { every_ms = 250 }\n"];
    // The same folder each time: reports name the scenario files.
    let d = dir.path().join("s");
    std::fs::create_dir_all(&d).unwrap();
    for (k, fleet) in fleets.iter().enumerate() {
        // The scenarios written as tasks (the cassettes' traces sit beside the bundled suite).
        for e in std::fs::read_dir(root().join("scenarios")).unwrap() {
            let p = e.unwrap().path();
            let text = std::fs::read_to_string(&p).unwrap();
            if text.contains("\n[task]") && !text.contains("[fleet]") {
                write(&d, p.file_name().unwrap().to_str().unwrap(), &format!("{text}\n{fleet}"));
            }
        }
        run_to(&d, &dir.path().join(format!("out{k}")));
    }
    for f in ["summary.csv", "runs.csv", "report.json", "report.md", "junit.xml", "report.html"] {
        let read = |k: usize| std::fs::read(dir.path().join(format!("out{k}")).join(f)).unwrap();
        assert!(read(0) == read(1), "{f} differs with agents = 1");
        assert!(read(0) == read(2), "{f} differs with one agent started by every_ms");
    }
}

/// `summary.csv` as (scenario, strategy) → column → value.
fn summary(out: &std::path::Path) -> BTreeMap<(String, String), BTreeMap<String, f64>> {
    Table::read(&out.join("summary.csv")).numbers()
}

/// Brooker (2015), "Exponential Backoff And Jitter": the orders the post reports, at every N of
/// the bundled experiment. Work is the writes (`tool_calls_mean`), time the last client's
/// completion (`makespan_ms_mean`).
#[test]
fn the_aws_backoff_experiment_comes_out_in_the_posts_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("aws");
    std::fs::create_dir_all(&d).unwrap();
    for n in [10, 20, 50, 100] {
        let name = format!("{}-aws-backoff-{n}.toml", 15 + [10, 20, 50, 100].iter().position(|&x| x == n).unwrap() + 1);
        std::fs::copy(root().join("scenarios").join(&name), d.join(&name)).unwrap();
    }
    run_to(&d, &dir.path().join("out"));
    let s = summary(&dir.path().join("out"));
    for n in [10, 20, 50, 100] {
        let sc = format!("aws-backoff-{n}");
        let get = |strategy: &str, col: &str| s[&(sc.clone(), strategy.to_owned())][col];
        let work = |k: &str| get(k, "tool_calls_mean");
        let time = |k: &str| get(k, "makespan_ms_mean");
        for k in ["none", "exponential", "equal-jitter", "full-jitter", "decorrelated"] {
            assert_eq!(get(k, "agents"), n as f64);
            assert_eq!(get(k, "agents_succeeded_rate"), 1.0, "{sc} {k}: every client writes its row");
            assert!(get(k, "load_rejections_per_run") > 0.0, "{sc} {k}: writes conflict");
        }
        // Work: no backoff does the most; exponential backoff without jitter saves little next
        // to any jittered backoff, which saves most.
        for k in ["exponential", "equal-jitter", "full-jitter", "decorrelated"] {
            assert!(work(k) < work("none"), "{sc}: {k} {} vs none {}", work(k), work("none"));
        }
        for k in ["equal-jitter", "full-jitter", "decorrelated"] {
            assert!(work(k) < work("exponential"), "{sc}: {k} {} vs exponential {}", work(k), work("exponential"));
        }
        // Time: exponential without jitter is by far the slowest; equal jitter is slower than
        // full jitter; decorrelated finishes sooner than full jitter.
        for k in ["none", "equal-jitter", "full-jitter", "decorrelated"] {
            assert!(time(k) < time("exponential"), "{sc}: {k} {} vs exponential {}", time(k), time("exponential"));
        }
        assert!(
            time("full-jitter") < time("equal-jitter"),
            "{sc}: full {} vs equal {}",
            time("full-jitter"),
            time("equal-jitter")
        );
        assert!(
            time("decorrelated") < time("full-jitter"),
            "{sc}: decorrelated {} vs full {}",
            time("decorrelated"),
            time("full-jitter")
        );
    }
    // With many clients, full jitter does less work than decorrelated jitter (the post's "Full
    // Jitter uses less work, but slightly more time").
    let work = |k: &str| s[&("aws-backoff-100".to_owned(), k.to_owned())]["tool_calls_mean"];
    assert!(work("full-jitter") < work("decorrelated"));
}

#[test]
fn fleet_keys_that_make_no_sense_are_named() {
    let cases = [
        ("[fleet]\nagents = 0\n", "fleet.agents: expected 1 to 10000, got 0"),
        ("[fleet]\nagents = 20000\n", "fleet.agents: expected 1 to 10000, got 20000"),
        ("[fleet]\nstart = \"staggered\"\n", "fleet.start: expected \"together\""),
        ("[fleet]\nstart = { poisson_per_s = 0 }\n", "fleet.start.poisson_per_s: expected a rate above 0"),
        ("[fleet]\nstart = { every_ms = 5, poisson_per_s = 2 }\n", "fleet.start: expected exactly one of"),
        ("[tools.search]\nrate = { per_s = 0 }\n", "tools.search.rate: expected a `burst` when `per_s` is 0"),
        ("[tools.search]\nconcurrency = 0\n", "tools.search.concurrency: expected at least 1"),
        ("[tools.search]\nqueue = true\n", "tools.search.queue: expected a `concurrency` limit"),
        (
            "[tools.search]\nconflict = \"lww\"\n",
            "tools.search.conflict: expected \"occ\" or \"occ-read-write\", got \"lww\"",
        ),
        ("[tools.provider]\nconflict = \"occ\"\n", "tools.provider: expected a tool the task calls (\"search\")"),
        (
            "[tools.search]\nservice_ms = { dist = \"normal\", mean = 10 }\n",
            "tools.search.service_ms.sd: expected a value",
        ),
        (
            "[tools.search]\nservice_ms = { dist = \"uniform\", min = 9, max = 3 }\n",
            "tools.search.service_ms.min: expected at most",
        ),
        (
            "[tools.search]\nservice_ms = { dist = \"normal\", mean = 10, sd = 2, median = 4 }\n",
            "tools.search.service_ms.median: expected only mean, sd, floor",
        ),
        (
            "[tools.search]\nservice_ms = { dist = \"pareto\" }\n",
            "tools.search.service_ms.dist: expected constant, uniform",
        ),
        ("[policy]\nbreaker = { sync_ms = 50 }\n", "policy.breaker.sync_ms: expected a fleet breaker"),
        ("scope = \"region\"\n", "faults[0].scope: expected \"agent\" or \"fleet\", got \"region\""),
        ("[policy]\nretry = { budget_window_ms = 5000 }\n", "policy.retry.budget_window_ms: expected a `budget_ratio`"),
        ("[policy]\nbreaker = { scope = \"region\" }\n", "policy.breaker.scope: expected \"agent\" or \"fleet\""),
        (
            "[strategies.x]\nencoding = \"envelope\"\nbreaker = \"cluster\"\n",
            "strategies.x.breaker: expected true, false",
        ),
    ];
    for (extra, want) in cases {
        let err = broken("f.toml", &format!("{MINIMAL}{extra}"));
        assert!(err.contains("DIR/f.toml:") && err.contains(want), "{extra}: {err}");
    }
    // Top-level keys go before the file's tables.
    let provider = [
        ("provider = { conflict = \"occ\" }\n", "provider.conflict: expected no write conflicts at the provider"),
        ("provider = { rpm = 0 }\n", "provider.rpm: expected a limit per minute from 1 to 1e9, got 0"),
        ("provider = { tpm = -5 }\n", "provider.tpm: expected a limit per minute from 1 to 1e9, got -5"),
        ("provider = { format = \"cohere\" }\n", "provider: expected one of"),
    ];
    for (first, want) in provider {
        let err = broken("f.toml", &format!("{first}{MINIMAL}"));
        assert!(err.contains("DIR/f.toml:") && err.contains(want), "{first}: {err}");
    }
}

#[test]
fn trace_out_writes_one_trace_per_agent() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    tracefault()
        .args(["run", "scenarios/16-aws-backoff-10.toml", "--strategy", "full-jitter", "--run", "3", "--trace-out"])
        .arg(&out)
        .assert()
        .code(0);
    let text = std::fs::read_to_string(&out).unwrap();
    let headers: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v.get("tracefault_trace").is_some())
        .collect();
    assert_eq!(headers.len(), 10);
    for (k, h) in headers.iter().enumerate() {
        assert_eq!(h["agent"], k);
        assert_eq!(h["id"], format!("aws-backoff-10/full-jitter/run3/agent{k}"));
    }
    // Every agent's trace reads back: ten conversations, each answered.
    let inspected = tracefault().arg("inspect").arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&inspected.stdout);
    assert_eq!(stdout.matches("ended: answer").count(), 10, "{stdout}");
}

/// `at` counts the agent's attempts on the target, or with `scope = "fleet"` the fleet's: the
/// first attempt of each of 8 agents meets the agent rule, only the fleet's first meets the
/// fleet rule; a lone agent meets both scopes alike.
#[test]
fn a_fleet_rule_counts_the_fleets_attempts() {
    use tracefault::scenario::load::load_str;
    use tracefault::suite::run_one;
    let src = |agents: u32, scope: &str| {
        format!(
            "name = \"scopes\"\nruns = 1\nstrategies = [\"five-field\"]\n[fleet]\nagents = {agents}\n\
             [task]\n[[task.steps]]\ntool = \"search\"\n[[task.steps]]\ntool = \"fetch\"\n\
             [[faults]]\ntarget = \"search\"\nat = [1]\nhttp = 503\nscope = \"{scope}\"\n\
             [[faults]]\ntarget = \"fetch\"\nat = [2]\nhttp = 503\nscope = \"fleet\"\n"
        )
    };
    let fired = |agents: u32, scope: &str| {
        let sc = load_str(&src(agents, scope), std::path::Path::new("s.toml")).unwrap();
        run_one(&sc, 0, 0, &mut ()).rule_fired
    };
    // 8 agents: the agent rule fires for each agent's first search; the fleet rule on fetch
    // fires once, on the fleet's second fetch.
    assert_eq!(fired(8, "agent"), [8, 1]);
    assert_eq!(fired(8, "fleet"), [1, 1]);
    // One agent: its attempts are the fleet's. The fetch rule never fires (one fetch, and its
    // retry after no failure never happens).
    assert_eq!(fired(1, "agent"), fired(1, "fleet"));
    assert_eq!(fired(1, "fleet"), [1, 0]);
}

/// The strategies of one run share its arrivals, which a workspace keeps: a workspace that
/// simulated one fleet and then another of the same name, seed and run (a different rate of
/// arrivals, then a different size) gives each the numbers of a fresh workspace.
#[test]
fn a_reused_workspace_draws_each_fleets_own_arrivals() {
    use tracefault::engine::run::{Workspace, simulate};
    use tracefault::metrics::run::RunMetrics;
    use tracefault::scenario::load::load_str;
    use tracefault::suite::run_one;
    let src = |agents: u32, per_s: u32| {
        format!(
            "name = \"arrivals\"\nruns = 1\nstrategies = [\"five-field\", \"error-string\"]\n\
             [fleet]\nagents = {agents}\nstart = {{ poisson_per_s = {per_s} }}\n\
             [task]\n[[task.steps]]\ntool = \"search\"\n\
             [tools.search]\nconcurrency = 1\nservice_ms = 400\n"
        )
    };
    let fleets: Vec<_> = [(6, 2), (6, 50), (9, 50), (6, 2)]
        .map(|(n, r)| load_str(&src(n, r), std::path::Path::new("s.toml")).unwrap())
        .into();
    let mut ws = Workspace::default();
    let mut makespans = Vec::new();
    for sc in &fleets {
        for (i, s) in sc.strategies.iter().enumerate() {
            let mut reused = RunMetrics::default();
            reused.reset(sc.faults.rules.len());
            simulate(sc, s, 0, sc.seed, &mut ws, &mut reused);
            assert_eq!(reused, run_one(sc, i, 0, &mut ()), "{} agents, strategy {}", sc.fleet.agents, s.name);
            makespans.push(reused.virtual_ms);
        }
    }
    // The rates of arrival matter here (one place at the tool), so a stale draw would show.
    assert_ne!(makespans[0], makespans[2], "{makespans:?}");
}

#[test]
fn shrink_says_it_does_not_take_fleets() {
    tracefault()
        .args(["shrink", "scenarios/16-aws-backoff-10.toml", "--strategy", "none", "--run", "0"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("16-aws-backoff-10.toml: shrink replays one agent's fault schedule"));
}

/// `[provider] rpm = 3`: the bucket holds three requests and gains one every 20 s. Three agents
/// start together; each makes a model call (admitted, the bucket is now empty), a search
/// (100 ms) and a second model call at t = 100, refused with the wait to the next request,
/// 19 900 ms. Honouring it, all three come back at t = 20 000: one is admitted, two are refused
/// again (20 000 ms); at 40 000 one more, at 60 000 the last. Rejections 3 + 2 + 1 = 6, none
/// wasted, the last agent done at 60 000. Retrying at once instead (no backoff, `retry-after`
/// ignored, 3 attempts) every retry comes before the announced wait: each agent's two
/// retries are wasted and it gives up.
#[test]
fn the_providers_rpm_is_shared_by_the_fleet() {
    use tracefault::scenario::load::load_str;
    use tracefault::suite::run_one;
    let src = |retry: &str| {
        format!(
            "name = \"rpm\"\nruns = 1\nprovider = {{ format = \"anthropic\", rpm = 3 }}\n\
             [strategies.s]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\nretry = {retry}\n\
             [fleet]\nagents = 3\n[profile]\nmodel_latency_ms = 0\ntool_latency_ms = 100\n\
             [task]\n[[task.steps]]\ntool = \"search\"\n"
        )
    };
    let run = |retry: &str| {
        let sc = load_str(&src(retry), std::path::Path::new("s.toml")).unwrap();
        run_one(&sc, 0, 0, &mut ())
    };
    let honour = run("{ max_attempts = 10, backoff = \"none\" }");
    assert_eq!(
        (honour.load_rejections, honour.wasted_retries, honour.agents_succeeded, honour.virtual_ms),
        (6, 0, 3, 60_000)
    );
    assert_eq!(honour.model_calls, 6 + 6);
    let hammer = run("{ max_attempts = 3, backoff = \"none\", honor_retry_after = false }");
    assert_eq!((hammer.load_rejections, hammer.wasted_retries, hammer.agents_succeeded), (9, 6, 0));
}

/// The AWS post's client, by hand: two agents start together, every message takes 10 ms, the
/// tool serves in 0 ms. Both requests reach the row at 10 and read version 0; their read
/// answers are back at 20 and both writes reach the row at 30: the first (agent 0, queued
/// first) commits, the second conflicts (409). The answers reach the agents at 40; agent 0
/// is done (its model calls take 0 ms), agent 1 retries at once: read at 50, write at 70
/// (commits), answer at 80. Writes 3, conflicts 1, the fleet done at 80. Without the read's
/// round trip (`conflict = "occ"`, the same messages) a call reads when it reaches the row and
/// writes 0 ms later: both reach it at 10 and read before either writes (their arrivals were
/// queued first), so the second conflicts all the same; its answer is back at 20, its retry
/// reaches the row at 30 and commits, the answer is back at 40. And a timeout still ends `after_ms` after the
/// request was sent: a lone agent's first call times out at 100 (its answer never travels),
/// the retry sent then reaches the tool at 110 and its answer the agent at 120.
#[test]
fn a_read_then_write_over_the_network_takes_both_round_trips() {
    use tracefault::scenario::load::load_str;
    let src = |conflict: &str, agents: u32, extra: &str| {
        format!(
            "name = \"occ\"\nruns = 1\n\
             [strategies.s]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\n\
             retry = {{ max_attempts = 5, backoff = \"none\" }}\n\
             [fleet]\nagents = {agents}\n[profile]\nmodel_latency_ms = 0\n\
             [tools.write_row]\nconflict = \"{conflict}\"\nnetwork_ms = 10\nservice_ms = 0\n\
             [task]\n[[task.steps]]\ntool = \"write_row\"\n{extra}"
        )
    };
    let run = |src: String| {
        let sc = load_str(&src, std::path::Path::new("s.toml")).unwrap();
        run_one(&sc, 0, 0, &mut ())
    };
    let m = run(src("occ-read-write", 2, ""));
    assert_eq!((m.tool_calls, m.load_rejections, m.agents_succeeded, m.virtual_ms), (3, 1, 2, 80));
    assert_eq!(m.agent_ms, vec![40, 80]);
    let m = run(src("occ", 2, ""));
    assert_eq!((m.tool_calls, m.load_rejections, m.virtual_ms), (3, 1, 40));
    let timeout = "[[faults]]\ntarget = \"write_row\"\nat = [1]\nfault = \"timeout\"\nafter_ms = 100\n";
    let m = run(src("occ", 1, timeout));
    assert_eq!((m.tool_calls, m.orchestrator_retries, m.virtual_ms), (2, 1, 120));
    // A write that reads first times out at 100 all the same (its read-to-write legs never
    // happen); the retry arrives at 110, writes at 130, and its answer is back at 140.
    let m = run(src("occ-read-write", 1, timeout));
    assert_eq!((m.tool_calls, m.orchestrator_retries, m.virtual_ms), (2, 1, 140));
}

/// `tpm` counts a request's input tokens at the door and its output tokens when answered.
#[test]
fn a_request_larger_than_the_providers_tpm_never_passes() {
    use tracefault::scenario::load::load_str;
    use tracefault::suite::run_one;
    let src = "name = \"tpm\"\nruns = 1\nprovider = { tpm = 100 }\nstrategies = [\"five-field\"]\n\
               [profile]\nprompt_tokens = 500\n[task]\n[[task.steps]]\ntool = \"search\"\n";
    let sc = load_str(src, std::path::Path::new("s.toml")).unwrap();
    let m = run_one(&sc, 0, 0, &mut ());
    assert_eq!((m.agents_succeeded, m.tool_calls), (0, 0));
    assert!(m.load_rejections >= 1);
}

/// `report.json` gives each tool's peak in flight. Five agents call `search` at t = 0: two are
/// served (concurrency 2), three wait; 100 ms later two more, then the last. Each then calls
/// `fetch` (50 ms, no limit) as its search ends: two at a time, at 100, 200 and 300 ms, so its
/// peak is 2 as well, without a limit. (The provider's 503 on each agent's last model call
/// comes after both tools, so the scenario tests something without moving the peaks.)
#[test]
fn report_json_gives_each_tools_peak_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let text = "name = \"peaks\"\nruns = 3\nstrategies = [\"five-field\"]\n[fleet]\nagents = 5\n\
                [profile]\nmodel_latency_ms = 0\n[task]\n[[task.steps]]\ntool = \"search\"\n\
                [[task.steps]]\ntool = \"fetch\"\n[tools.search]\nconcurrency = 2\nqueue = true\n\
                service_ms = 100\n[tools.fetch]\nservice_ms = 50\n\
                [[faults]]\ntarget = \"provider\"\nat = [3]\nhttp = 503\n";
    write(dir.path(), "peaks.toml", text);
    let out = dir.path().join("out");
    run_to(dir.path(), &out);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let s = &report["scenarios"][0]["strategies"][0];
    assert_eq!(s["peak_in_flight_by_tool"], serde_json::json!({"search": 2, "fetch": 2}), "{s}");
    assert_eq!(s["summary"]["peak_in_flight"].as_f64(), Some(2.0));
    // A lone agent with no tool limits tracks no tool.
    let lone = dir.path().join("lone");
    std::fs::create_dir_all(&lone).unwrap();
    let without_load = text.replace("[fleet]\nagents = 5\n", "");
    let (head, faults) = without_load.split_once("[tools.search]").unwrap();
    write(&lone, "l.toml", &format!("{head}{}", &faults[faults.find("[[faults]]").unwrap()..]));
    run_to(&lone, &dir.path().join("lone-out"));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("lone-out/report.json")).unwrap()).unwrap();
    assert!(report["scenarios"][0]["strategies"][0].get("peak_in_flight_by_tool").is_none());
}

/// The seeds' fleet outage under the fleet-wide breaker: every agent's trace re-adds to the
/// run's row in `runs.csv` — model calls, tool calls (the attempts behind each result, plus those
/// still in flight at the end) and breaker trips — and its last agent's end is the makespan.
#[test]
fn a_fleet_breakers_trace_re_adds_to_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let strategy = "five-field-shared-breaker";
    tracefault()
        .args(["run", "scenarios/20-seeds-fleet-outage.toml", "--strategy", strategy, "--run", "3", "--trace-out"])
        .arg(&trace)
        .arg("--out")
        .arg(dir.path().join("out"))
        .assert()
        .code(0);
    let (mut models, mut tools, mut trips, mut end) = (0u64, 0u64, 0u64, 0u64);
    for line in std::fs::read_to_string(&trace).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        match v["type"].as_str() {
            Some("model_call") => models += 1,
            Some("tool_result") => {
                let attempts = v["attempts"].as_u64().unwrap();
                assert_eq!(v["attempt_ms"].as_array().map_or(0, Vec::len) as u64, attempts, "{line}");
                tools += attempts;
            }
            Some("final") => {
                tools += v["in_flight_attempts"].as_u64().unwrap_or(0);
                end = end.max(v["t_ms"].as_u64().unwrap());
            }
            Some("breaker") => trips += 1,
            _ => {}
        }
    }
    // The same run in runs.csv.
    let out = dir.path().join("full");
    tracefault().args(["run", "scenarios/20-seeds-fleet-outage.toml", "--out"]).arg(&out).assert().code(0);
    let runs = Table::read(&out.join("runs.csv"));
    let row = runs.row(&[("strategy", strategy), ("run", "3")]);
    let num = |h: &str| row.num::<u64>(h);
    assert_eq!((models, tools, trips), (num("model_calls"), num("tool_calls"), num("breaker_trips")));
    assert_eq!(end, num("makespan_ms"));
}

/// Every agent's events through its own [`Invariants`]; the times of the attempts the shared
/// rate limit let through at `tool`.
struct FleetWatch {
    agents: Vec<Invariants>,
    agent: usize,
    tool: u16,
    passed_rate: Vec<u64>,
}

impl Observer for FleetWatch {
    fn agent(&mut self, agent: u32) {
        self.agent = agent as usize;
    }

    fn event(&mut self, e: &Event<'_>) {
        if let Event::Attempt { tool, t_ms, load, status, .. } = *e
            && tool == self.tool
            && !(load && status == Some(429))
        {
            self.passed_rate.push(t_ms);
        }
        self.agents[self.agent].event(e);
    }
}

/// Each agent's events, in order, as text.
#[derive(Default)]
struct PerAgent(Vec<Vec<String>>, usize);

impl Observer for PerAgent {
    fn agent(&mut self, agent: u32) {
        self.1 = agent as usize;
    }

    fn event(&mut self, e: &Event<'_>) {
        if matches!(e, Event::Done { .. }) {
            return; // the run's, not an agent's
        }
        if self.0.len() <= self.1 {
            self.0.resize(self.1 + 1, Vec::new());
        }
        self.0[self.1].push(format!("{e:?}"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    /// In a fleet every agent keeps the engine's invariants; no tool ever serves more calls at
    /// once than its concurrency; the shared bucket never lets more than `burst + per_s × t`
    /// through by time t; every agent ends.
    #[test]
    fn a_fleet_keeps_every_agent_and_every_limit(
        (src, concurrency, rate) in fleet_scenario(),
        run in 0u64..20,
    ) {
        let sc = load(&src);
        let alpha = sc.task.tools.iter().position(|t| t == "alpha").unwrap() as u16;
        for (i, s) in sc.strategies.iter().enumerate() {
            let cap = match s.routing {
                Routing::Orchestrator => sc.policy.retry.max_attempts,
                Routing::Model => 1,
            };
            let agents = (0..sc.fleet.agents).map(|_| Invariants { max_attempts: cap, ..Invariants::default() }).collect();
            let mut w = FleetWatch { agents, agent: 0, tool: alpha, passed_rate: Vec::new() };
            let m = run_one(&sc, i, run, &mut w);
            for (k, inv) in w.agents.iter().enumerate() {
                prop_assert!(inv.broken.is_empty(), "{} agent {k}: {:?}\n{}", s.name, inv.broken, src);
            }
            prop_assert_eq!(m.agents, u64::from(sc.fleet.agents));
            if let Some(c) = concurrency {
                prop_assert!(m.peak_in_flight <= u64::from(c), "{}: peak {} > {c}\n{}", s.name, m.peak_in_flight, src);
            }
            if let Some((per_s, burst)) = rate {
                w.passed_rate.sort_unstable();
                for (n, &t) in w.passed_rate.iter().enumerate() {
                    let bound = f64::from(burst) + per_s * t as f64 / 1000.0;
                    prop_assert!((n + 1) as f64 <= bound + 1e-9, "{}: {} through by {t} ms > {bound}\n{}", s.name, n + 1, src);
                }
            }
        }
    }

    /// Agents that share nothing never meet: agent 0 of a fleet runs exactly as a lone agent
    /// does, adding agents changes nothing for the others, and under every strategy agent k
    /// meets the same fault at the same attempt (common random numbers across strategies).
    #[test]
    fn agents_that_share_nothing_keep_their_own_draws(src in scenario(), agents in 2u32..6, run in 0u64..20) {
        let lone = load(&src);
        let fleet = |n: u32| load(&format!("{src}[fleet]\nagents = {n}\nstart = {{ poisson_per_s = 3 }}\n"));
        let (small, large) = (fleet(agents), fleet(agents + 3));
        // Per strategy, per agent: (tool, attempt) → the rule it met.
        type Met = Vec<BTreeMap<(u16, u32), Option<u16>>>;
        let mut firsts: Vec<Met> = Vec::new();
        for i in 0..lone.strategies.len() {
            let mut alone = PerAgent::default();
            run_one(&lone, i, run, &mut alone);
            let (mut a, mut b) = (PerAgent::default(), PerAgent::default());
            run_one(&small, i, run, &mut a);
            run_one(&large, i, run, &mut b);
            prop_assert_eq!(&a.0[0], &alone.0[0], "agent 0 is the lone agent\n{}", src);
            prop_assert_eq!(&a.0[..], &b.0[..agents as usize], "more agents changed the first ones\n{}", src);
            // (tool, attempt) → rule, per agent, for the cross-strategy comparison.
            struct Faults(Vec<BTreeMap<(u16, u32), Option<u16>>>, usize);
            impl Observer for Faults {
                fn agent(&mut self, agent: u32) { self.1 = agent as usize; }
                fn event(&mut self, e: &Event<'_>) {
                    if let Event::Attempt { tool, attempt, rule, .. } = *e {
                        if self.0.len() <= self.1 { self.0.resize(self.1 + 1, BTreeMap::new()); }
                        self.0[self.1].insert((tool, attempt), rule);
                    }
                }
            }
            let mut f = Faults(Vec::new(), 0);
            run_one(&small, i, run, &mut f);
            firsts.push(f.0);
        }
        // Rules with memory (a terminal fault sticks) can differ in what later attempts meet,
        // so compare only the first attempt on each tool of each agent.
        for a in &firsts {
            for b in &firsts {
                for (k, (ma, mb)) in a.iter().zip(b).enumerate() {
                    for (key, r) in ma.iter().filter(|((_, n), _)| *n == 1) {
                        if let Some(r2) = mb.get(key) {
                            prop_assert_eq!(r, r2, "agent {} attempt {:?}", k, key);
                        }
                    }
                }
            }
        }
    }
}

/// Breaker trips (tool, time, agent) and attempts (tool, time, agent) of a fleet's run.
#[derive(Default)]
struct BreakerWatch {
    agent: u32,
    trips: Vec<(u16, u64, u32)>,
    attempts: Vec<(u16, u64, u32)>,
}

impl Observer for BreakerWatch {
    fn agent(&mut self, agent: u32) {
        self.agent = agent;
    }

    fn event(&mut self, e: &Event<'_>) {
        match *e {
            Event::BreakerTrip { tool, t_ms } => self.trips.push((tool, t_ms, self.agent)),
            Event::Attempt { tool, t_ms, .. } => self.attempts.push((tool, t_ms, self.agent)),
            _ => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    /// A fleet breaker opens for every agent at once: after it trips, no agent's call reaches
    /// the tool until it has been open `open_ms`, but for the agents that have not heard yet
    /// (`sync_ms` after the trip, all but the one that tripped it).
    #[test]
    fn a_fleet_breaker_opens_for_everyone(
        agents in 2u32..20,
        sync_ms in prop_oneof![Just(0u64), 0u64..800],
        failures in 1u32..4,
        p in 0.2f64..0.9,
        seed in any::<u64>(),
        run in 0u64..10,
    ) {
        let open_ms = 2000;
        let src = format!(
            "name = \"fb\"\nseed = {seed}\nruns = 1\n[strategies.shared]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\nbreaker = \"fleet\"\n\
             [policy]\nbreaker = {{ failures = {failures}, open_ms = {open_ms}, sync_ms = {sync_ms} }}\n\
             [fleet]\nagents = {agents}\nstart = {{ poisson_per_s = 20 }}\n[tools.search]\nservice_ms = {{ dist = \"uniform\", min = 5, max = 60 }}\n\
             [task]\n[[task.steps]]\ntool = \"search\"\n[[task.steps]]\ntool = \"search\"\nargs = {{ q = 2 }}\n\
             [[faults]]\ntarget = \"search\"\nprobability = {p}\nhttp = 503\n"
        );
        let sc = load(&src);
        let mut w = BreakerWatch::default();
        run_one(&sc, 0, run, &mut w);
        for &(tool, t, by) in &w.trips {
            for &(tool2, t2, agent) in &w.attempts {
                let open = tool2 == tool && t < t2 && t2 < t + open_ms;
                let unheard = agent != by && t2 < t + sync_ms;
                prop_assert!(!open || unheard, "agent {} reached the tool at {} ms, tripped at {} ms by agent {}\n{}", agent, t2, t, by, src);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    /// A fleet's retry budget is the fleet's: over a window longer than the run, the whole
    /// fleet's retries (tools and provider) stay within `ratio` × its calls' first attempts
    /// (or one retry), however many agents fail at once.
    #[test]
    fn a_fleet_retry_budget_bounds_the_whole_fleets_retries(
        agents in 2u32..30,
        ratio_pct in 5u32..80,
        p in 0.2f64..0.95,
        seed in any::<u64>(),
        run in 0u64..10,
    ) {
        let ratio = f64::from(ratio_pct) / 100.0;
        let src = format!(
            "name = \"rb\"\nseed = {seed}\nruns = 1\nstrategies = [\"five-field\"]\n\
             [policy]\nretry = {{ max_attempts = 6, backoff = \"full-jitter\", base_ms = 50, cap_ms = 800, budget_ratio = {ratio}, budget_window_ms = 86400000 }}\n\
             [fleet]\nagents = {agents}\n\
             [task]\n[[task.steps]]\ncalls = [{{ tool = \"search\" }}, {{ tool = \"fetch\" }}]\n[[task.steps]]\ntool = \"search\"\nargs = {{ q = 2 }}\n\
             [[faults]]\ntarget = \"*\"\nprobability = {p}\nhttp = 503\n\
             [[faults]]\ntarget = \"provider\"\nprobability = {}\nhttp = 529\n",
            p / 3.0
        );
        let sc = load(&src);
        #[derive(Default)]
        struct Firsts(u64);
        impl Observer for Firsts {
            fn event(&mut self, e: &Event<'_>) {
                if let Event::Attempt { by: By::Model, .. } = *e {
                    self.0 += 1;
                }
            }
        }
        let mut f = Firsts::default();
        let m = run_one(&sc, 0, run, &mut f);
        let bound = (ratio * f.0 as f64).max(1.0);
        prop_assert!(m.orchestrator_retries as f64 <= bound + 1e-9, "{} retries > {bound} ({} first attempts)\n{}", m.orchestrator_retries, f.0, src);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    /// A recorded trace re-adds to its run's row: over every agent's trace, the model calls and
    /// the attempts behind the results are the run's `model_calls` and `tool_calls`, for every
    /// strategy of a random fleet, a fleet-wide breaker among them (a retry the open breaker
    /// answers keeps the attempts that reached the tool; a call still in flight when a budget
    /// ends the run has its attempts in the `final` event).
    #[test]
    fn a_trace_re_adds_to_its_run(fleet in fleet_scenario(), run in 0u64..5, sync_ms in 0u64..400) {
        use tracefault::trace::TraceEvent;
        use tracefault::trace::record::Recorder;
        let (mut src, _, _) = fleet;
        src.push_str(
            "[strategies.shared-breaker]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\nbreaker = \"fleet\"\n\
             [strategies.own-breaker]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\nbreaker = true\n",
        );
        src = src.replace("[policy]\n", &format!("[policy]\nbreaker = {{ failures = 2, open_ms = 300, sync_ms = {sync_ms} }}\n"));
        let sc = load(&src);
        for (k, strategy) in sc.strategies.iter().enumerate() {
            let mut rec = Recorder::new(&sc, &strategy.name, run);
            let m = run_one(&sc, k, run, &mut rec);
            let (mut models, mut attempts) = (0u64, 0u64);
            for t in &rec.traces {
                for e in &t.events {
                    match e {
                        TraceEvent::ModelCall { .. } => models += 1,
                        TraceEvent::ToolResult { attempts: a, attempt_ms, .. } => {
                            attempts += u64::from(a.unwrap_or(0));
                            prop_assert_eq!(attempt_ms.len() as u32, a.unwrap_or(0));
                        }
                        TraceEvent::Final { in_flight_attempts: a, .. } => attempts += u64::from(a.unwrap_or(0)),
                        _ => {}
                    }
                }
            }
            prop_assert_eq!(models, m.model_calls, "{}: model calls\n{}", strategy.name, src);
            prop_assert_eq!(attempts, m.tool_calls, "{}: tool calls\n{}", strategy.name, src);
        }
    }
}
