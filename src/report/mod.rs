//! Reports (the book: reports and CI): one small [`Exporter`] per file, all reading the same suite results,
//! each producing bytes in a fixed order with fixed precision, written atomically.

pub mod checks;
pub mod csv;
pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
#[cfg(test)]
mod testing;

pub use crate::escape::xml_escape;

use crate::baseline::Comparison;
use crate::suite::ScenarioResult;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Everything a report needs.
pub struct Report<'a> {
    pub results: &'a [ScenarioResult],
    /// The comparison with `--baseline` (or the change gates that had none), and whether a
    /// significant regression fails.
    pub comparison: Option<&'a Comparison>,
    pub fail_on_regression: bool,
    /// `exec`'s checklist of the user's agent; `None` for simulated runs.
    pub checks: Option<&'a checks::Checklist>,
}

impl<'a> Report<'a> {
    pub fn new(results: &'a [ScenarioResult]) -> Report<'a> {
        Report { results, comparison: None, fail_on_regression: false, checks: None }
    }

    pub fn gates_passed(&self) -> bool {
        self.results.iter().all(|r| r.gates.iter().all(|g| g.passed))
    }

    /// Scenarios where no fault fired: flagged as failed checks.
    pub fn silent_scenarios(&self) -> Vec<&str> {
        self.results.iter().filter(|r| self.is_silent(r)).map(|r| r.scenario.name.as_str()).collect()
    }

    /// A simulated scenario that tested nothing: no fault fired in any run. For an agent's run
    /// (`exec`) it is a warning, not a failure: whether a fault fires there depends on what the
    /// agent did (a fault on a third attempt meets only an agent that retries), and a run with
    /// no fault still tests the round trip the checklist holds it to.
    pub fn is_silent(&self, r: &ScenarioResult) -> bool {
        !r.any_fault_fired() && self.checks.is_none()
    }

    pub fn passed(&self) -> bool {
        self.gates_passed()
            && self.silent_scenarios().is_empty()
            && self.comparison.is_none_or(|c| c.passed(self.fail_on_regression))
            && self.checks.is_none_or(checks::Checklist::passed)
    }
}

pub trait Exporter {
    fn file_name(&self) -> &'static str;
    fn write(&self, report: &Report<'_>, out: &mut Vec<u8>) -> std::io::Result<()>;
}

/// The exporters behind `summary.csv`, `report.json`, `report.md`, `junit.xml` and
/// `report.html` (`runs.csv` is streamed separately).
pub fn exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(csv::SummaryCsv),
        Box::new(json::ReportJson),
        Box::new(markdown::ReportMd),
        Box::new(junit::Junit),
        Box::new(html::ReportHtml),
    ]
}

/// Renders every exporter's bytes, and with a comparison `comparison.md` and `comparison.json`.
pub fn render_all(report: &Report<'_>) -> std::io::Result<Vec<(&'static str, Vec<u8>)>> {
    let mut files = exporters()
        .iter()
        .map(|e| {
            let mut buf = Vec::new();
            e.write(report, &mut buf)?;
            Ok((e.file_name(), buf))
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    if let Some(c) = report.comparison {
        files.push(("comparison.md", crate::baseline::markdown(c, report.fail_on_regression).into_bytes()));
        let mut json = serde_json::to_vec_pretty(&crate::baseline::json(c, report.fail_on_regression))?;
        json.push(b'\n');
        files.push(("comparison.json", json));
    }
    Ok(files)
}

/// A gate's bound as text: `<= 0.01`, `>= 0.9`, or both.
pub fn gate_bounds(min: Option<f64>, max: Option<f64>) -> String {
    match (min, max) {
        (Some(lo), Some(hi)) => format!("in [{lo}, {hi}]"),
        (Some(lo), None) => format!(">= {lo}"),
        (None, Some(hi)) => format!("<= {hi}"),
        (None, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing::{checklist, quiet, sample};

    #[test]
    fn a_failed_gate_or_a_silent_scenario_fails_the_report() {
        let failing = [sample("checkout")];
        let r = Report::new(&failing);
        assert!(!r.gates_passed() && r.silent_scenarios().is_empty() && !r.passed());
        let silent = [quiet("quiet")];
        let r = Report::new(&silent);
        assert!(r.gates_passed(), "success 1 >= 0.5, loops 0 <= 0.1");
        assert_eq!(r.silent_scenarios(), ["quiet"]);
        assert!(!r.passed());
    }

    #[test]
    fn with_a_checklist_a_run_without_faults_is_not_silent_and_the_checks_decide() {
        let silent = [quiet("quiet")];
        let mut c = checklist();
        let r = Report { checks: Some(&c), ..Report::new(&silent) };
        assert!(r.silent_scenarios().is_empty());
        assert!(!r.passed(), "a check failed");
        c.checks.retain(|row| !matches!(row.status, checks::CheckStatus::Fail(_)));
        let r = Report { checks: Some(&c), ..Report::new(&silent) };
        assert!(r.passed());
    }

    #[test]
    fn gate_bounds_read_as_written() {
        assert_eq!(gate_bounds(Some(0.5), None), ">= 0.5");
        assert_eq!(gate_bounds(None, Some(0.01)), "<= 0.01");
        assert_eq!(gate_bounds(Some(1.0), Some(2.5)), "in [1, 2.5]");
        assert_eq!(gate_bounds(None, None), "");
    }

    #[test]
    fn render_all_writes_each_exporters_file_once_in_order() {
        let results = [sample("checkout")];
        let files = render_all(&Report::new(&results)).unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.0).collect();
        assert_eq!(names, ["summary.csv", "report.json", "report.md", "junit.xml", "report.html"]);
        assert!(files.iter().all(|f| !f.1.is_empty()));
    }
}
