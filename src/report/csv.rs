//! `summary.csv`: one row per (scenario, strategy), columns as the book's CSV reference lists them.

use super::{Exporter, Report};
use crate::escape::csv_text;
use crate::metrics::summary::SUMMARY_COLUMNS;

pub struct SummaryCsv;

impl Exporter for SummaryCsv {
    fn file_name(&self) -> &'static str {
        "summary.csv"
    }

    fn write(&self, report: &Report<'_>, out: &mut Vec<u8>) -> std::io::Result<()> {
        let mut w = csv::Writer::from_writer(out);
        w.write_record(SUMMARY_COLUMNS)?;
        for r in report.results {
            for row in r.rows.iter().chain(r.recorded.as_ref().map(|x| &x.0)) {
                let mut cells = row.cells();
                // The names: a formula is kept from being one.
                for name in &mut cells[..2] {
                    *name = csv_text(name).into_owned();
                }
                w.write_record(cells)?;
            }
        }
        w.flush()
    }
}

/// The header line of `runs.csv`.
pub fn runs_header() -> Vec<u8> {
    let mut line = crate::metrics::summary::RUNS_COLUMNS.join(",").into_bytes();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::report::testing::{quiet, render, sample};

    /// The CSV text as its header and each row keyed by the header's names.
    fn table(text: &str) -> (Vec<String>, Vec<BTreeMap<String, String>>) {
        let mut r = ::csv::Reader::from_reader(text.as_bytes());
        let header: Vec<String> = r.headers().unwrap().iter().map(str::to_owned).collect();
        let rows = r
            .records()
            .map(|rec| header.iter().cloned().zip(rec.unwrap().iter().map(str::to_owned)).collect())
            .collect();
        (header, rows)
    }

    #[test]
    fn the_header_is_the_column_contract_and_each_strategy_is_a_row() {
        let results = [sample("checkout")];
        let (header, rows) = table(&render(&SummaryCsv, &Report::new(&results)));
        assert_eq!(header.len(), 43);
        assert_eq!(&header[..5], ["scenario", "strategy", "runs", "success_rate", "loop_rate"]);
        assert_eq!(
            &header[36..],
            [
                "cost_usd_mean",
                "cost_usd_total",
                "duplicate_writes",
                "duplicate_writes_per_run",
                "false_success_rate",
                "wrong_accepted_rate",
                "injection_followed_rate"
            ]
        );
        let strategies: Vec<&str> = rows.iter().map(|r| r["strategy"].as_str()).collect();
        assert_eq!(strategies, ["five-field", "error-string"]);
        assert!(rows.iter().all(|r| r["scenario"] == "checkout"));
    }

    #[test]
    fn a_rows_cells_hold_its_strategys_figures() {
        let results = [sample("checkout")];
        let (_, rows) = table(&render(&SummaryCsv, &Report::new(&results)));
        // five-field: 3 of 4 answered, none looped, 1 gave up; calls 4, 3, 3, 3.
        let ff = &rows[0];
        for (column, expected) in [
            ("runs", "4"),
            ("success_rate", "0.7500"),
            ("loop_rate", "0.0000"),
            ("loop_rate_lo", "0.0000"),
            // Wilson's upper end for 0 of 4: (z²/n) / (1 + z²/n) = 0.9604 / 1.9604.
            ("loop_rate_hi", "0.4899"),
            ("gave_up_rate", "0.2500"),
            ("calls_mean", "3.250"),
            ("calls_p50", "3"),
            ("calls_p95", "4"),
            ("calls_max", "4"),
            ("model_calls_mean", "2.000"),
            ("tool_calls_mean", "1.250"),
            ("tokens_mean", "200.0"),
            // The baseline against itself.
            ("calls_delta_vs_baseline", "0.000"),
            ("agents", "1"),
        ] {
            assert_eq!(ff[column], expected, "five-field {column}");
        }
        // error-string: calls 8, 3, 3, 5; paired with five-field's 4, 3, 3, 3.
        let es = &rows[1];
        for (column, expected) in [
            ("success_rate", "0.7500"),
            ("loop_rate", "0.2500"),
            ("gave_up_rate", "0.0000"),
            ("calls_mean", "4.750"),
            ("calls_p50", "3"),
            ("calls_p95", "8"),
            ("calls_max", "8"),
            ("model_calls_mean", "2.750"),
            ("tool_calls_mean", "2.000"),
            ("tokens_mean", "275.0"),
            ("calls_delta_vs_baseline", "1.500"),
        ] {
            assert_eq!(es[column], expected, "error-string {column}");
        }
        // No `[pricing]`: the cost cells are empty, not zero.
        assert_eq!((es["cost_usd_mean"].as_str(), es["cost_usd_total"].as_str()), ("", ""));
    }

    #[test]
    fn a_name_that_looks_like_a_formula_stays_text_in_one_cell() {
        let results = [quiet("=1+2,\"x\"")];
        let text = render(&SummaryCsv, &Report::new(&results));
        let (_, rows) = table(&text);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["scenario"], "'=1+2,\"x\"");
        assert_eq!(rows[0]["strategy"], "five-field");
        assert!(text.contains("\"'=1+2,\"\"x\"\"\",five-field,"), "{text}");
    }

    #[test]
    fn runs_header_is_one_line_of_the_runs_columns() {
        let line = String::from_utf8(runs_header()).unwrap();
        assert!(line.starts_with("scenario,strategy,run,seed,terminated_by,calls,"), "{line}");
        assert!(line.ends_with(",duplicate_writes,false_success,wrong_accepted,injection_followed\n"), "{line}");
        assert_eq!(line.matches(',').count(), 28);
    }
}
