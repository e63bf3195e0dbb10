//! `report.md`: the summary as readable tables, with the repro line of each strategy's worst run.

use std::fmt::Write as _;

use super::{Exporter, Report, VERSION, gate_bounds};
use crate::escape::{md_code, md_text};

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
            if sc.effects.iter().any(|e| e.write) {
                let _ = writeln!(
                    s,
                    "\nWrites (tools with `effect = \"write\"`): an attempt that committed after one of the same call \
                     had, under no key the tool honoured, is a duplicate write.\n\n| strategy | duplicate writes | per run |\n|---|---:|---:|"
                );
                for row in &r.rows {
                    let f = |m: &str| cell(row, m);
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} |",
                        md_text(&row.strategy),
                        f("duplicate_writes"),
                        f("duplicate_writes_per_run")
                    );
                }
            }
            let claims =
                |row: &crate::metrics::summary::SummaryRow| row.get("false_success_rate").is_some_and(|v| v > 0.0);
            if !sc.task.goal.is_empty() || r.rows.iter().chain(r.recorded.as_ref().map(|x| &x.0)).any(claims) {
                let _ = writeln!(
                    s,
                    "\nFalse success: a run whose ending claimed the task done (an answer, or a give-up that claimed \
                     success) while its goal was not reached.\n\n| strategy | false success rate |\n|---|---:|"
                );
                for row in r.rows.iter().chain(r.recorded.as_ref().map(|x| &x.0)) {
                    let _ = writeln!(s, "| {} | {} |", md_text(&row.strategy), cell(row, "false_success_rate"));
                }
            }
            if sc.faults.rules.iter().any(|r| r.fault.taints()) {
                let _ = writeln!(
                    s,
                    "\nResults that succeeded with changed content (wrong values, large results, injected \
                     instructions): the share of runs in which the model took a wrong value as right, and followed \
                     an instruction a result carried; tokens per run.\n\n| strategy | wrong accepted | injection \
                     followed | tokens / run |\n|---|---:|---:|---:|"
                );
                for row in &r.rows {
                    let f = |m: &str| cell(row, m);
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {} |",
                        md_text(&row.strategy),
                        f("wrong_accepted_rate"),
                        f("injection_followed_rate"),
                        f("tokens_mean")
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::report::testing::{HOSTILE, checklist, quiet, render, sample};

    /// A Markdown table row's cells, split at every `|` not escaped as `\|`.
    fn cells(line: &str) -> Vec<String> {
        let inner = line.trim().strip_prefix('|').and_then(|l| l.strip_suffix('|')).expect("a table row");
        let (mut out, mut cell, mut escaped) = (Vec::new(), String::new(), false);
        for c in inner.chars() {
            if c == '|' && !escaped {
                out.push(cell.trim().to_owned());
                cell.clear();
            } else {
                cell.push(c);
            }
            escaped = c == '\\' && !escaped;
        }
        out.push(cell.trim().to_owned());
        out
    }

    /// The rows of the table whose header starts with `first`, keyed by the header's names.
    fn table(md: &str, first: &str) -> Vec<BTreeMap<String, String>> {
        let mut lines = md.lines().skip_while(|l| !l.starts_with(&format!("| {first} |")));
        let header = cells(lines.next().expect("the table"));
        assert!(lines.next().is_some_and(|l| l.starts_with("|---")), "the alignment row");
        lines
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let row = cells(l);
                assert_eq!(row.len(), header.len(), "{l}");
                header.iter().cloned().zip(row).collect()
            })
            .collect()
    }

    #[test]
    fn the_summary_table_has_a_row_per_strategy_with_its_figures() {
        let results = [sample("checkout")];
        let md = render(&ReportMd, &Report::new(&results));
        let rows = table(&md, "strategy");
        assert_eq!(rows.len(), 2);
        let ff = &rows[0];
        assert_eq!(ff["strategy"], "five-field");
        assert_eq!(ff["success"], "0.7500");
        // 0 of 4 looped: Wilson's interval [0, 0.9604 / 1.9604].
        assert_eq!(ff["loop rate (95% CI)"], "0.0000 (0.0000 – 0.4899)");
        assert_eq!(ff["gave up"], "0.2500");
        assert_eq!(ff["calls mean"], "3.250");
        assert_eq!(ff["calls p95"], "4");
        let es = &rows[1];
        assert_eq!(es["strategy"], "error-string");
        assert_eq!(es["loop rate (95% CI)"].split(' ').next(), Some("0.2500"));
        assert_eq!(es["calls mean"], "4.750");
        assert_eq!(es["calls p95"], "8");
        assert!(es["Δ calls vs baseline (95% CI)"].starts_with("1.500 ("), "{}", es["Δ calls vs baseline (95% CI)"]);
    }

    #[test]
    fn the_scenario_section_names_its_settings_rules_worst_runs_and_gates() {
        let results = [sample("checkout")];
        let md = render(&ReportMd, &Report::new(&results));
        assert!(md.starts_with("# tracefault report\n"), "{md}");
        assert!(md.contains("Result: **FAILED**."), "{md}");
        assert!(md.contains("## checkout\n"), "{md}");
        assert!(
            md.contains("Seed 7 · 4 runs per strategy · provider format `openai-chat` · profile `default` · baseline `five-field`"),
            "{md}"
        );
        assert!(md.contains("- `search at [1]: http 503`: 4\n"), "{md}");
        assert!(
            md.contains("- error-string (8 calls): `tracefault run scenarios/checkout.toml --strategy error-string --run 0 --seed 7`"),
            "{md}"
        );
        let gates = table(&md, "gate");
        assert_eq!(gates.len(), 2);
        assert_eq!(gates[0]["gate"], "five-field `success_rate`");
        assert_eq!((gates[0]["value"].as_str(), gates[0]["bound"].as_str()), ("0.75", ">= 0.5"));
        assert_eq!(gates[0]["result"], "pass");
        assert_eq!(gates[1]["gate"], "error-string `loop_rate`");
        assert_eq!((gates[1]["value"].as_str(), gates[1]["bound"].as_str()), ("0.25", "<= 0.1"));
        assert_eq!(gates[1]["result"], "**FAIL**");
    }

    #[test]
    fn a_hostile_scenario_name_stays_text_on_its_heading() {
        let results = [sample(HOSTILE)];
        let md = render(&ReportMd, &Report::new(&results));
        // `1.` would start a list, `*` emphasis, `|` a cell; `<b>` would be HTML, `&` an entity.
        assert!(md.contains("\n## 1\\. \\*a\\* \\| &lt;b&gt; &amp; \"q\"\n"), "{md}");
        assert!(!md.contains("<b>"), "{md}");
        // The tables keep their shape: every row has as many cells as its header.
        assert_eq!(table(&md, "strategy").len(), 2);
    }

    #[test]
    fn a_scenario_where_no_fault_fired_warns_and_fails() {
        let results = [quiet("quiet")];
        let md = render(&ReportMd, &Report::new(&results));
        assert!(md.contains("Result: **FAILED**."), "{md}");
        assert!(md.contains("- `search at [1]: http 503`: 0\n"), "{md}");
        // A warning is text: its backticks and brackets are escaped, not code or a link.
        assert!(md.contains("- ⚠ fault rule \\`search at \\[1\\]: http 503\\` never fired in any run\n"), "{md}");
        assert!(md.contains("- ⚠ no fault fired at all: this scenario tested nothing\n"), "{md}");
    }

    #[test]
    fn the_checklist_marks_failures_and_says_why_a_check_did_not_apply() {
        let results = [quiet("quiet")];
        let c = checklist();
        let md = render(&ReportMd, &Report { checks: Some(&c), ..Report::new(&results) });
        assert!(
            md.contains("## Agent\n\n`python agent.py --key [REDACTED]`\n\nOutcome: answered 3/4 · gave up 1\n"),
            "{md}"
        );
        let checks = table(&md, "check");
        let results: Vec<&str> = checks.iter().map(|r| r["result"].as_str()).collect();
        assert_eq!(
            results,
            [
                "PASS",
                "**FAIL: run 2: retried after 1 s &lt; 5 s; run 3: &lt;again&gt; &amp; \"again\"**",
                "N/A: the agent never streams"
            ]
        );
        assert!(md.contains("- `api.example.com /v1/x`\n"), "{md}");
        assert!(md.contains("Notes:\n\n- a \\*note\\*\n"), "{md}");
    }
}
