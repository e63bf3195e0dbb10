//! Suite results built in memory for the exporters' unit tests: a scenario from TOML text, and
//! per strategy the runs as the engine would have counted them, folded by the suite's own code
//! ([`finish_scenario`]) into what every exporter reads. Expected values in the tests are
//! derived by hand from the runs written here.

use std::path::Path;

use super::Report;
use super::checks::{CheckRow, CheckStatus, Checklist};
use crate::engine::events::TerminatedBy;
use crate::metrics::aggregate::Aggregate;
use crate::metrics::run::RunMetrics;
use crate::scenario::Loaded;
use crate::scenario::load::load_str;
use crate::suite::{ScenarioResult, finish_scenario};

/// Where the test scenarios claim to live (it shows in repro lines).
pub const PATH: &str = "scenarios/checkout.toml";

/// A name every output must keep as text: an ordered-list start and emphasis for Markdown, a
/// cell separator, markup, an entity start and quotes for XML and HTML.
pub const HOSTILE: &str = r#"1. *a* | <b> & "q""#;

/// One run as the engine would count it: how it ended, its model and tool calls, and how many
/// faults rule 0 fired in it. A lone agent; 100 tokens per model call; 1000 ms per model call
/// and 100 ms per tool call.
pub fn run(end: TerminatedBy, model_calls: u64, tool_calls: u64, fired: u64) -> RunMetrics {
    let mut m = RunMetrics::default();
    m.reset(1);
    m.terminated_by = Some(end);
    m.model_calls = model_calls;
    m.tool_calls = tool_calls;
    m.faults_injected = fired;
    m.rule_fired = vec![fired];
    m.tokens = 100 * model_calls;
    m.virtual_ms = 1000 * model_calls + 100 * tool_calls;
    m.agents = 1;
    m.agents_succeeded = u64::from(end == TerminatedBy::Answer);
    m
}

/// A scenario named `name`: 4 runs, seed 7, strategies `five-field` (the baseline) and
/// `error-string`, one tool `search` with one rule (a 503 on its first attempt), and two gates:
/// five-field's success rate at least 0.5, error-string's loop rate at most 0.1.
pub fn scenario(name: &str) -> Loaded {
    let name = serde_json::to_string(name).expect("a string");
    let src = format!(
        "name = {name}\nseed = 7\nruns = 4\nstrategies = [\"five-field\", \"error-string\"]\nbaseline = \"five-field\"\n\
         [task]\n[[task.steps]]\ntool = \"search\"\n\
         [[faults]]\ntarget = \"search\"\nat = [1]\nhttp = 503\n\
         [[gates]]\nstrategy = \"five-field\"\nmetric = \"success_rate\"\nmin = 0.5\n\
         [[gates]]\nstrategy = \"error-string\"\nmetric = \"loop_rate\"\nmax = 0.1\n"
    );
    load_str(&src, Path::new(PATH)).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

/// `sc`'s result from its runs, one list per strategy, the baseline's runs paired with each
/// strategy's by index (as the suite pairs runs of the same number).
pub fn result(sc: &Loaded, runs: &[Vec<RunMetrics>]) -> ScenarioResult {
    assert_eq!(runs.len(), sc.strategies.len(), "one list of runs per strategy");
    let base: Vec<u64> = runs[sc.baseline].iter().map(RunMetrics::calls).collect();
    let aggregates = runs
        .iter()
        .map(|rs| {
            let mut a = Aggregate::default();
            for (i, m) in rs.iter().enumerate() {
                a.add(m, i as u64);
                a.add_delta(m.calls() as i64 - base[i] as i64);
            }
            a
        })
        .collect();
    finish_scenario(sc, aggregates)
}

/// The sample every exporter's test reads, scenario `name`:
///
/// | run | five-field (model, tool, fired) | error-string (model, tool, fired) |
/// |---|---|---|
/// | 0 | answer 2, 2, 1 (4 calls) | step_cap 4, 4, 1 (8 calls) |
/// | 1 | answer 2, 1, 0 (3 calls) | answer 2, 1, 0 (3 calls) |
/// | 2 | answer 2, 1, 0 (3 calls) | answer 2, 1, 0 (3 calls) |
/// | 3 | gave_up 2, 1, 1 (3 calls) | answer 3, 2, 1 (5 calls) |
///
/// By hand: five-field success 3/4, loop 0/4, gave up 1/4, calls 13/4 = 3.25 (p50 3, p95 4,
/// max 4), worst run 0 (4 calls), tokens 200 a run; error-string success 3/4, loop 1/4,
/// calls 19/4 = 4.75 (p50 3, p95 8, max 8), Δ calls against five-field (4 + 0 + 0 + 2)/4 = 1.5,
/// worst run 0 (8 calls), tokens (400 + 200 + 200 + 300)/4 = 275 a run. Rule 0 fired
/// 1 + 1 + 1 + 1 = 4 times over both strategies. Gate 1 (five-field success ≥ 0.5) passes
/// with 0.75; gate 2 (error-string loop rate ≤ 0.1) fails with 0.25.
pub fn sample(name: &str) -> ScenarioResult {
    use TerminatedBy::{Answer, GaveUp, StepCap};
    let sc = scenario(name);
    result(
        &sc,
        &[
            vec![run(Answer, 2, 2, 1), run(Answer, 2, 1, 0), run(Answer, 2, 1, 0), run(GaveUp, 2, 1, 1)],
            vec![run(StepCap, 4, 4, 1), run(Answer, 2, 1, 0), run(Answer, 2, 1, 0), run(Answer, 3, 2, 1)],
        ],
    )
}

/// A scenario where no fault fired: every run of both strategies answers in 2 model calls and
/// 1 tool call.
pub fn quiet(name: &str) -> ScenarioResult {
    let sc = scenario(name);
    let ok = || (0..4).map(|_| run(TerminatedBy::Answer, 2, 1, 0)).collect::<Vec<_>>();
    result(&sc, &[ok(), ok()])
}

/// An `exec` checklist: one check passed, one failed with two findings, one that did not apply.
pub fn checklist() -> Checklist {
    Checklist {
        agent: "python agent.py --key [REDACTED]".into(),
        outcome: "answered 3/4 · gave up 1".into(),
        checks: vec![
            CheckRow { title: "every tool call got one result", status: CheckStatus::Pass },
            CheckRow {
                title: "retries honour retry-after",
                status: CheckStatus::Fail(vec![
                    "run 2: retried after 1 s < 5 s".into(),
                    "run 3: <again> & \"again\"".into(),
                ]),
            },
            CheckRow {
                title: "streams end cleanly",
                status: CheckStatus::NotApplicable("the agent never streams".into()),
            },
        ],
        notes: vec!["a *note*".into()],
        elsewhere: vec!["api.example.com /v1/x".into()],
    }
}

/// One exporter's bytes for `report`, as text.
pub fn render(exporter: &dyn super::Exporter, report: &Report<'_>) -> String {
    let mut out = Vec::new();
    exporter.write(report, &mut out).expect("writing to memory");
    String::from_utf8(out).expect("UTF-8")
}
