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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing::{HOSTILE, checklist, quiet, render, sample};

    /// Each test case of `suite` as (name, the child's tag and message, if any).
    fn cases(doc: &roxmltree::Document<'_>, suite: &str) -> Vec<(String, Option<(String, String)>)> {
        let suite = doc
            .descendants()
            .find(|n| n.has_tag_name("testsuite") && n.attribute("name") == Some(suite))
            .unwrap_or_else(|| panic!("no suite {suite}"));
        suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .map(|c| {
                let child = c.children().find(|n| n.is_element());
                let outcome =
                    child.map(|n| (n.tag_name().name().to_owned(), n.attribute("message").unwrap().to_owned()));
                (c.attribute("name").unwrap().to_owned(), outcome)
            })
            .collect()
    }

    #[test]
    fn a_failed_gate_is_a_failure_and_a_passed_one_a_bare_case() {
        let results = [sample("checkout")];
        let xml = render(&Junit, &Report::new(&results));
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let root = doc.root_element();
        // 2 gates + "faults fired" = 3 cases; only error-string's loop-rate gate fails.
        assert_eq!(root.tag_name().name(), "testsuites");
        assert_eq!(
            (root.attribute("tests"), root.attribute("failures"), root.attribute("errors")),
            (Some("3"), Some("1"), Some("0"))
        );
        let suite = root.children().find(|n| n.has_tag_name("testsuite")).unwrap();
        assert_eq!((suite.attribute("tests"), suite.attribute("failures")), (Some("3"), Some("1")));
        let props: Vec<(&str, &str)> = suite
            .descendants()
            .filter(|n| n.has_tag_name("property"))
            .map(|p| (p.attribute("name").unwrap(), p.attribute("value").unwrap()))
            .collect();
        assert_eq!(props, [("seed", "7"), ("runs", "4"), ("profile", "default")]);
        assert_eq!(
            cases(&doc, "checkout"),
            [
                ("faults fired".to_owned(), None),
                ("five-field: success_rate >= 0.5".to_owned(), None),
                (
                    "error-string: loop_rate <= 0.1".to_owned(),
                    Some(("failure".to_owned(), "loop_rate = 0.25 is not <= 0.1".to_owned()))
                ),
            ]
        );
        assert!(
            suite
                .children()
                .filter(|n| n.has_tag_name("testcase"))
                .all(|c| c.attribute("classname") == Some("tracefault.checkout"))
        );
    }

    #[test]
    fn a_scenario_where_no_fault_fired_fails_its_faults_fired_case() {
        let results = [quiet("quiet")];
        let xml = render(&Junit, &Report::new(&results));
        let doc = roxmltree::Document::parse(&xml).unwrap();
        assert_eq!(doc.root_element().attribute("failures"), Some("1"));
        assert_eq!(
            cases(&doc, "quiet")[0],
            (
                "faults fired".to_owned(),
                Some(("failure".to_owned(), "no fault fired in any run: the scenario tested nothing".to_owned()))
            )
        );
    }

    #[test]
    fn a_hostile_name_is_escaped_and_reads_back_as_itself() {
        let results = [sample(HOSTILE)];
        let xml = render(&Junit, &Report::new(&results));
        assert!(xml.contains(r#"<testsuite name="1. *a* | &lt;b&gt; &amp; &quot;q&quot;" tests="3""#), "{xml}");
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let suite = doc.descendants().find(|n| n.has_tag_name("testsuite")).unwrap();
        assert_eq!(suite.attribute("name"), Some(HOSTILE));
        let classname = format!("tracefault.{HOSTILE}");
        assert!(
            doc.descendants()
                .filter(|n| n.has_tag_name("testcase"))
                .all(|c| c.attribute("classname") == Some(classname.as_str()))
        );
    }

    #[test]
    fn the_checklist_is_a_suite_of_its_own() {
        let results = [sample("checkout")];
        let c = checklist();
        let xml = render(&Junit, &Report { checks: Some(&c), ..Report::new(&results) });
        let doc = roxmltree::Document::parse(&xml).unwrap();
        // 3 scenario cases (1 failure) + 3 checks (1 failure; the one that did not apply is skipped).
        let root = doc.root_element();
        assert_eq!((root.attribute("tests"), root.attribute("failures")), (Some("6"), Some("2")));
        assert_eq!(
            cases(&doc, "checks"),
            [
                ("every tool call got one result".to_owned(), None),
                (
                    "retries honour retry-after".to_owned(),
                    Some((
                        "failure".to_owned(),
                        "run 2: retried after 1 s < 5 s; run 3: <again> & \"again\"".to_owned()
                    ))
                ),
                ("streams end cleanly".to_owned(), Some(("skipped".to_owned(), "the agent never streams".to_owned()))),
            ]
        );
    }
}
