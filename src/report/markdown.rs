//! `report.md`: the summary as readable tables, with the repro line of each strategy's worst run.

use std::fmt::Write as _;

use super::escape::{md_code, md_text};
use super::{Exporter, Report, VERSION, gate_bounds};

pub struct ReportMd;

/// A summary column of `row` as written in `summary.csv`.
fn cell(row: &crate::metrics::summary::SummaryRow, metric: &str) -> String {
    let i = crate::metrics::summary::SUMMARY_COLUMNS[2..].iter().position(|c| *c == metric).unwrap_or(0);
    row.formatted(i)
}

impl Exporter for ReportMd {
    fn file_name(&self) -> &'static str {
        "report.md"
    }

    fn write(&self, report: &Report<'_>, out: &mut Vec<u8>) -> std::io::Result<()> {
        let mut s = String::new();
        let _ = writeln!(s, "# tracefault report\n");
        let _ = writeln!(s, "tracefault {VERSION}. Every figure is reproducible: same files, same seed, same bytes.\n");
        let overall = if report.passed() { "all gates passed" } else { "**FAILED**" };
        let _ = writeln!(s, "Result: {overall}.\n");
        if let Some(c) = report.checks {
            checklist(&mut s, c);
        }
        for r in report.results {
            let sc = &r.scenario;
            let _ = writeln!(s, "## {}\n", md_text(&sc.name));
            if !sc.description.is_empty() {
                let _ = writeln!(s, "{}\n", sc.description);
            }
            let _ = writeln!(
                s,
                "Seed {} · {} runs per strategy · provider format `{}` · profile {} · baseline {}\n",
                r.seed,
                r.runs,
                sc.format.name(),
                md_code(&sc.profile.name),
                md_code(&sc.strategies[sc.baseline].name)
            );
            let _ = writeln!(
                s,
                "| strategy | success | loop rate (95% CI) | gave up | calls mean | calls p95 | wasted retries / run | breaker trips / run | Δ calls vs baseline (95% CI) |"
            );
            let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
            for row in r.rows.iter().chain(r.recorded.as_ref().map(|x| &x.0)) {
                let f = |m: &str| cell(row, m);
                let _ = writeln!(
                    s,
                    "| {} | {} | {} ({} – {}) | {} | {} | {} | {} | {} | {} ({} – {}) |",
                    md_text(&row.strategy),
                    f("success_rate"),
                    f("loop_rate"),
                    f("loop_rate_lo"),
                    f("loop_rate_hi"),
                    f("gave_up_rate"),
                    f("calls_mean"),
                    f("calls_p95"),
                    f("wasted_retries_per_run"),
                    f("breaker_trips_per_run"),
                    f("calls_delta_vs_baseline"),
                    f("calls_delta_lo"),
                    f("calls_delta_hi"),
                );
            }
            if let Some((model, input, output)) = &sc.pricing {
                let _ = writeln!(
                    s,
                    "\nCost at {} prices (USD {input} / {output} per million input / output tokens; a model call answered with an error is not billed):\n\n| strategy | USD per run | USD in all runs |\n|---|---:|---:|",
                    md_code(model)
                );
                for row in r.rows.iter().chain(r.recorded.as_ref().map(|x| &x.0)) {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} |",
                        md_text(&row.strategy),
                        cell(row, "cost_usd_mean"),
                        cell(row, "cost_usd_total")
                    );
                }
            }
            if sc.fleet.agents > 1 || sc.loaded {
                let _ = writeln!(
                    s,
                    "\nFleet: {} agent{} per run.\n\n| strategy | agents answered | makespan ms | agent ms p50 | agent ms p99 | peak in flight | calls ÷ first attempts | load refusals / run |",
                    sc.fleet.agents,
                    if sc.fleet.agents == 1 { "" } else { "s" }
                );
                let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|");
                for row in &r.rows {
                    let f = |m: &str| cell(row, m);
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {} | {} | {} | {} | {} |",
                        md_text(&row.strategy),
                        f("agents_succeeded_rate"),
                        f("makespan_ms_mean"),
                        f("agent_ms_p50"),
                        f("agent_ms_p99"),
                        f("peak_in_flight"),
                        f("retry_amplification"),
                        f("load_rejections_per_run"),
                    );
                }
            }
            if r.recorded.is_some() {
                let _ = writeln!(
                    s,
                    "\n`recorded` is what the recorded model did in the trace (one run, by the same definitions): \
                     shown for comparison, not a strategy; every strategy above runs the same simulated model."
                );
            }
            let _ = writeln!(s, "\nFault rules (times each trigger fired, all strategies):\n");
            if r.rules_fired.is_empty() {
                let _ = writeln!(s, "- none");
            }
            for (label, n) in &r.rules_fired {
                let _ = writeln!(s, "- {}: {n}", md_code(label));
            }
            if !r.warnings.is_empty() {
                let _ = writeln!(s, "\nWarnings:\n");
                for w in &r.warnings {
                    let _ = writeln!(s, "- ⚠ {}", md_text(w));
                }
            }
            let _ = writeln!(s, "\nWorst run of each strategy (most calls), to reproduce:\n");
            for i in 0..r.rows.len() {
                if let (Some(line), Some((calls, _))) = (r.repro_line(i), r.aggregates[i].worst) {
                    let _ = writeln!(s, "- {} ({} calls): {}", md_text(&r.rows[i].strategy), calls, md_code(&line));
                }
            }
            if !r.gates.is_empty() {
                let _ = writeln!(s, "\n| gate | value | bound | result |\n|---|---:|---|---|");
                for g in &r.gates {
                    let _ = writeln!(
                        s,
                        "| {} `{}` | {} | {} | {} |",
                        md_text(&g.strategy),
                        g.metric,
                        g.value,
                        gate_bounds(g.min, g.max),
                        if g.passed { "pass" } else { "**FAIL**" }
                    );
                }
            }
            s.push('\n');
        }
        if let Some(c) = report.comparison {
            // The comparison's own headings, one level down.
            let _ = writeln!(
                s,
                "{}",
                crate::baseline::markdown(c, report.fail_on_regression)
                    .replace("\n## ", "\n### ")
                    .replacen("# ", "## ", 1)
            );
        }
        out.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// `exec`'s part: the agent, the outcome line, the checks, requests that went elsewhere, notes.
pub fn checklist(s: &mut String, c: &super::checks::Checklist) {
    let _ = writeln!(s, "## Agent\n\n{}\n\nOutcome: {}\n", md_code(&c.agent), md_text(&c.outcome));
    let _ = writeln!(s, "| check | result |\n|---|---|");
    for row in &c.checks {
        let details = row.status.details();
        let result = match details.is_empty() {
            true => row.status.word().to_owned(),
            false => format!("{}: {}", row.status.word(), md_text(&details.join("; "))),
        };
        let result =
            if matches!(row.status, super::checks::CheckStatus::Fail(_)) { format!("**{result}**") } else { result };
        let _ = writeln!(s, "| {} | {result} |", row.title);
    }
    if !c.elsewhere.is_empty() {
        let _ = writeln!(s, "\nRequests to hosts other than the mocks (refused by the mock proxy):\n");
        for e in &c.elsewhere {
            let _ = writeln!(s, "- {}", md_code(e));
        }
    }
    if !c.notes.is_empty() {
        let _ = writeln!(s, "\nNotes:\n");
        for n in &c.notes {
            let _ = writeln!(s, "- {}", md_text(n));
        }
    }
    s.push('\n');
}
