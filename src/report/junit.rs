//! `junit.xml`: one test case per gate, plus one per scenario checking that its faults fired;
//! with a baseline, a `baseline` suite: a case per change gate and per significant regression
//! (failures), and per mismatch (errors: what could not be compared is not a test result).

use std::fmt::Write as _;

use super::{Exporter, Report, gate_bounds, xml_escape};
use crate::baseline::Comparison;

pub struct Junit;

impl Exporter for Junit {
    fn file_name(&self) -> &'static str {
        "junit.xml"
    }

    fn write(&self, report: &Report<'_>, out: &mut Vec<u8>) -> std::io::Result<()> {
        let mut body = String::new();
        let (mut total, mut failures) = (0, 0);
        for r in report.results {
            let name = xml_escape(&r.scenario.name);
            let cases = r.gates.len() + 1;
            let failed = r.gates.iter().filter(|g| !g.passed).count() + usize::from(!r.any_fault_fired());
            total += cases;
            failures += failed;
            let _ = writeln!(body, r#"  <testsuite name="{name}" tests="{cases}" failures="{failed}">"#);
            let _ = writeln!(
                body,
                "    <properties>\n      <property name=\"seed\" value=\"{}\"/>\n      <property name=\"runs\" value=\"{}\"/>\n      <property name=\"profile\" value=\"{}\"/>\n    </properties>",
                r.seed,
                r.runs,
                xml_escape(&r.scenario.profile.name)
            );
            let _ = write!(body, r#"    <testcase classname="tracefault.{name}" name="faults fired""#);
            if !report.is_silent(r) {
                body.push_str("/>\n");
            } else {
                let _ = writeln!(
                    body,
                    ">\n      <failure message=\"no fault fired in any run: the scenario tested nothing\"/>\n    </testcase>"
                );
            }
            for g in &r.gates {
                let case = xml_escape(&format!("{}: {} {}", g.strategy, g.metric, gate_bounds(g.min, g.max)));
                let _ = write!(body, r#"    <testcase classname="tracefault.{name}" name="{case}""#);
                if g.passed {
                    body.push_str("/>\n");
                } else {
                    let msg = xml_escape(&format!("{} = {} is not {}", g.metric, g.value, gate_bounds(g.min, g.max)));
                    let _ = writeln!(body, ">\n      <failure message=\"{msg}\"/>\n    </testcase>");
                }
            }
            body.push_str("  </testsuite>\n");
        }
        if let Some(c) = report.checks {
            let failed = c.checks.iter().filter(|r| matches!(r.status, super::checks::CheckStatus::Fail(_))).count();
            total += c.checks.len();
            failures += failed;
            let _ = writeln!(body, r#"  <testsuite name="checks" tests="{}" failures="{failed}">"#, c.checks.len());
            for row in &c.checks {
                let _ = write!(body, r#"    <testcase classname="tracefault.checks" name="{}""#, xml_escape(row.title));
                match &row.status {
                    super::checks::CheckStatus::Pass => body.push_str("/>\n"),
                    super::checks::CheckStatus::Fail(d) => {
                        let _ = writeln!(
                            body,
                            ">\n      <failure message=\"{}\"/>\n    </testcase>",
                            xml_escape(&d.join("; "))
                        );
                    }
                    super::checks::CheckStatus::NotApplicable(why) => {
                        let _ = writeln!(body, ">\n      <skipped message=\"{}\"/>\n    </testcase>", xml_escape(why));
                    }
                }
            }
            body.push_str("  </testsuite>\n");
        }
        let mut errors = 0;
        if let Some(c) = report.comparison {
            let (t, f, e) = baseline_suite(&mut body, c, report.fail_on_regression);
            (total, failures, errors) = (total + t, failures + f, e);
        }
        let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ =
            writeln!(s, r#"<testsuites name="tracefault" tests="{total}" failures="{failures}" errors="{errors}">"#);
        s.push_str(&body);
        s.push_str("</testsuites>\n");
        out.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// The `baseline` test suite; returns (cases, failures, errors).
fn baseline_suite(body: &mut String, c: &Comparison, fail_on_regression: bool) -> (usize, usize, usize) {
    let mut cases = String::new();
    let (mut n, mut failures, mut errors) = (0, 0, 0);
    let mut case = |name: &str, outcome: Option<(&str, String)>| {
        n += 1;
        let _ = write!(cases, r#"    <testcase classname="tracefault.baseline" name="{}""#, xml_escape(name));
        match outcome {
            None => cases.push_str("/>\n"),
            Some((kind, message)) => {
                match kind {
                    "failure" => failures += 1,
                    "error" => errors += 1,
                    _ => {}
                }
                let _ = writeln!(cases, ">\n      <{kind} message=\"{}\"/>\n    </testcase>", xml_escape(&message));
            }
        }
    };
    for m in &c.mismatches {
        case(&format!("matches the baseline: {m}"), Some(("error", m.clone())));
    }
    for g in &c.gates {
        let name = format!("{} / {}: {} change", g.scenario, g.strategy, g.metric);
        let outcome = match (&g.delta, g.passed) {
            (Err(why), true) => Some(("skipped", format!("not checked: {why}"))),
            (Err(why), false) => Some(("error", format!("no change to check: {why}"))),
            (Ok(_), true) => None,
            (Ok(d), false) => Some(("failure", format!("{} rose by {d:+.4}, over its bound", g.metric))),
        };
        case(&name, outcome);
    }
    for r in c.regressions() {
        let name = format!("{} / {}: {} regression", r.scenario, r.strategy, r.metric);
        let message = format!(
            "{} went from {:.4} to {:.4} ({:+.4}, 95% [{:+.4}, {:+.4}], {})",
            r.metric,
            r.old,
            r.new,
            r.delta,
            r.lo,
            r.hi,
            r.method.name()
        );
        case(&name, Some((if fail_on_regression { "failure" } else { "skipped" }, message)));
    }
    let _ = writeln!(body, r#"  <testsuite name="baseline" tests="{n}" failures="{failures}" errors="{errors}">"#);
    let _ = writeln!(
        body,
        "    <properties>\n      <property name=\"baseline\" value=\"{}\"/>\n    </properties>",
        xml_escape(&c.baseline.display().to_string())
    );
    body.push_str(&cases);
    body.push_str("  </testsuite>\n");
    (n, failures, errors)
}
