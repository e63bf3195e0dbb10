//! `report.json`: everything, plus the seed, profile and tracefault version.

use serde_json::{Map, Value, json};

use super::{Exporter, Report, VERSION};
use crate::engine::events::TerminatedBy;
use crate::metrics::summary::SUMMARY_COLUMNS;

pub struct ReportJson;

/// The version of `report.json`'s layout: a baseline with another version is not compared.
pub const SCHEMA_VERSION: u64 = 1;

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
