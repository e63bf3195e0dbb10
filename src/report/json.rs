//! `report.json`: everything, plus the seed, profile and tracefault version.

use serde_json::{Map, Value, json};

use super::{Exporter, Report, VERSION};
use crate::engine::events::TerminatedBy;
use crate::metrics::summary::SUMMARY_COLUMNS;

pub struct ReportJson;

pub use crate::baseline::SCHEMA_VERSION;

/// A spread, to 4 decimals, as JSON.
fn fixed(v: f64) -> Value {
    number(&crate::metrics::summary::fixed(v, 4))
}

/// A number as written in the CSV (fixed precision), as JSON.
fn number(text: &str) -> Value {
    text.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map_or(Value::Null, Value::Number)
}

impl Exporter for ReportJson {
    fn file_name(&self) -> &'static str {
        "report.json"
    }

    fn write(&self, report: &Report<'_>, out: &mut Vec<u8>) -> std::io::Result<()> {
        let scenarios: Vec<Value> = report
            .results
            .iter()
            .map(|r| {
                let sc = &r.scenario;
                let summary_of = |row: &crate::metrics::summary::SummaryRow| -> Map<String, Value> {
                    SUMMARY_COLUMNS[2..]
                        .iter()
                        .enumerate()
                        .map(|(c, name)| ((*name).to_owned(), number(&row.formatted(c))))
                        .collect()
                };
                let terminated_of = |agg: &crate::metrics::aggregate::Aggregate| -> Map<String, Value> {
                    TerminatedBy::ALL.iter().map(|t| (t.name().to_owned(), json!(agg.count(*t)))).collect()
                };
                let strategies: Vec<Value> = r
                    .rows
                    .iter()
                    .zip(&r.aggregates)
                    .enumerate()
                    .map(|(i, (row, agg))| {
                        let s = &sc.strategies[i];
                        let mut v = json!({
                            "strategy": s.name,
                            "encoding": s.encoding.name(),
                            "routing": format!("{:?}", s.routing).to_lowercase(),
                            "partials": format!("{:?}", s.partials).to_lowercase(),
                            "breaker": s.breaker,
                            "budgets": s.budgets,
                            "loop_guard": s.loop_guard,
                            "summary": summary_of(row),
                            "terminated_by": terminated_of(agg),
                            "breaker_rejections": agg.breaker_rejections,
                            "faults_injected": agg.faults_injected,
                            "sd_per_run": {
                                "calls": fixed(agg.spreads()[0]),
                                "wasted_retries": fixed(agg.spreads()[1]),
                                "breaker_trips": fixed(agg.spreads()[2]),
                            },
                            "worst_run": agg.worst.map(|(calls, run)| json!({
                                "run": run, "calls": calls, "repro": r.repro_line(i),
                            })),
                        });
                        // Where tools were tracked (fleets, tool limits): each one's peak.
                        if !agg.peak_by_tool.is_empty() {
                            let peaks: Map<String, Value> =
                                sc.task.tools.iter().zip(&agg.peak_by_tool).map(|(t, p)| (t.clone(), json!(p))).collect();
                            v["peak_in_flight_by_tool"] = Value::Object(peaks);
                        }
                        v
                    })
                    .collect();
                json!({
                    "name": sc.name,
                    "description": sc.description,
                    "file": sc.path.display().to_string(),
                    "seed": r.seed,
                    "runs": r.runs,
                    "provider": sc.format.name(),
                    "baseline": sc.strategies[sc.baseline].name,
                    "profile": sc.profile,
                    "fault_rules": r.rules_fired.iter().map(|(l, n)| json!({"rule": l, "fired": n})).collect::<Vec<_>>(),
                    "warnings": r.warnings,
                    "strategies": strategies,
                    "recorded": r.recorded.as_ref().map(|(row, agg)| json!({
                        "what": "the recorded model's own run, by the same metric definitions; not a strategy",
                        "summary": summary_of(row),
                        "terminated_by": terminated_of(agg),
                    })),
                })
            })
            .collect();
        let gates: Vec<Value> = report
            .results
            .iter()
            .flat_map(|r| &r.gates)
            .map(|g| {
                json!({
                    "scenario": g.scenario, "strategy": g.strategy, "metric": g.metric,
                    "value": g.value, "min": g.min, "max": g.max, "passed": g.passed,
                })
            })
            .collect();
        let doc = json!({
            "schema_version": SCHEMA_VERSION,
            "tracefault_version": VERSION,
            "passed": report.passed(),
            "scenarios": scenarios,
            "gates": gates,
            "silent_scenarios": report.silent_scenarios(),
        });
        let mut doc = doc;
        if let Some(c) = report.checks {
            let checks: Vec<Value> = c
                .checks
                .iter()
                .map(|r| json!({"check": r.title, "result": r.status.word(), "details": r.status.details()}))
                .collect();
            doc["agent"] = json!({"command": c.agent, "outcome": c.outcome, "checks": checks,
                "requests_elsewhere": c.elsewhere, "notes": c.notes});
        }
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        out.push(b'\n');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::report::testing::{checklist, quiet, render, sample};

    fn doc(report: &Report<'_>) -> Value {
        let text = render(&ReportJson, report);
        assert!(text.ends_with("}\n"), "one document and a line end");
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn the_top_level_keys_and_the_verdict() {
        let results = [sample("checkout")];
        let v = doc(&Report::new(&results));
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        for k in ["schema_version", "tracefault_version", "passed", "scenarios", "gates", "silent_scenarios"] {
            assert!(keys.contains(&k), "{k} in {keys:?}");
        }
        assert!(!keys.contains(&"agent"), "no `agent` without a checklist");
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["tracefault_version"], env!("CARGO_PKG_VERSION"));
        // error-string's loop-rate gate fails: 0.25 > 0.1.
        assert_eq!(v["passed"], false);
        assert_eq!(v["silent_scenarios"], serde_json::json!([]));
    }

    #[test]
    fn a_scenario_holds_its_settings_strategies_and_rules() {
        let results = [sample("checkout")];
        let v = doc(&Report::new(&results));
        let sc = &v["scenarios"][0];
        assert_eq!(sc["name"], "checkout");
        assert_eq!(sc["file"], "scenarios/checkout.toml");
        assert_eq!(sc["seed"], 7);
        assert_eq!(sc["runs"], 4);
        assert_eq!(sc["baseline"], "five-field");
        assert_eq!(sc["fault_rules"], serde_json::json!([{"rule": "search at [1]: http 503", "fired": 4}]));
        assert_eq!(sc["recorded"], Value::Null);
        let names: Vec<&str> =
            sc["strategies"].as_array().unwrap().iter().map(|s| s["strategy"].as_str().unwrap()).collect();
        assert_eq!(names, ["five-field", "error-string"]);
        let es = &sc["strategies"][1];
        // Summary values are numbers at the CSV's precision; all 41 numeric columns are there.
        assert_eq!(es["summary"].as_object().unwrap().len(), 41);
        assert_eq!(es["summary"]["success_rate"], 0.75);
        assert_eq!(es["summary"]["loop_rate"], 0.25);
        assert_eq!(es["summary"]["calls_mean"], 4.75);
        assert_eq!(es["summary"]["calls_delta_vs_baseline"], 1.5);
        // No pricing: the cost is null, not 0.
        assert_eq!(es["summary"]["cost_usd_mean"], Value::Null);
        assert_eq!(es["terminated_by"]["answer"], 3);
        assert_eq!(es["terminated_by"]["step_cap"], 1);
        assert_eq!(es["terminated_by"]["gave_up"], 0);
        assert_eq!(es["terminated_by"].as_object().unwrap().len(), 8);
        assert_eq!(es["faults_injected"], 2);
        assert_eq!(es["worst_run"]["run"], 0);
        assert_eq!(es["worst_run"]["calls"], 8);
        assert_eq!(
            es["worst_run"]["repro"],
            "tracefault run scenarios/checkout.toml --strategy error-string --run 0 --seed 7"
        );
    }

    #[test]
    fn gates_list_value_bounds_and_result() {
        let results = [sample("checkout")];
        let v = doc(&Report::new(&results));
        assert_eq!(
            v["gates"],
            serde_json::json!([
                {"scenario": "checkout", "strategy": "five-field", "metric": "success_rate",
                 "value": 0.75, "min": 0.5, "max": null, "passed": true},
                {"scenario": "checkout", "strategy": "error-string", "metric": "loop_rate",
                 "value": 0.25, "min": null, "max": 0.1, "passed": false},
            ])
        );
    }

    #[test]
    fn a_scenario_where_no_fault_fired_is_listed_as_silent() {
        let results = [quiet("quiet")];
        let v = doc(&Report::new(&results));
        assert_eq!(v["silent_scenarios"], serde_json::json!(["quiet"]));
        assert_eq!(v["passed"], false);
    }

    #[test]
    fn an_exec_checklist_adds_the_agent() {
        let results = [quiet("quiet")];
        let c = checklist();
        let v = doc(&Report { checks: Some(&c), ..Report::new(&results) });
        let agent = &v["agent"];
        assert_eq!(agent["command"], "python agent.py --key [REDACTED]");
        assert_eq!(agent["outcome"], "answered 3/4 · gave up 1");
        let results: Vec<&str> =
            agent["checks"].as_array().unwrap().iter().map(|c| c["result"].as_str().unwrap()).collect();
        assert_eq!(results, ["PASS", "FAIL", "N/A"]);
        assert_eq!(agent["checks"][1]["details"][1], "run 3: <again> & \"again\"");
        assert_eq!(agent["checks"][2]["details"], serde_json::json!(["the agent never streams"]));
        assert_eq!(agent["requests_elsewhere"], serde_json::json!(["api.example.com /v1/x"]));
        // With a checklist a run where no fault fired is not silent.
        assert_eq!(v["silent_scenarios"], serde_json::json!([]));
    }
}
