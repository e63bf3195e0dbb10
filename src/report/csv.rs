//! `summary.csv`: one row per (scenario, strategy), columns as the book's CSV reference lists them.

use super::escape::csv_text;
use super::{Exporter, Report};
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
