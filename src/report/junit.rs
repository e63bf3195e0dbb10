//! `junit.xml`: one test case per gate, plus one per scenario checking that its faults fired.

use std::fmt::Write as _;

use super::{Exporter, Report, gate_bounds, xml_escape};

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
            if r.any_fault_fired() {
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
        let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(s, r#"<testsuites name="tracefault" tests="{total}" failures="{failures}">"#);
        s.push_str(&body);
        s.push_str("</testsuites>\n");
        out.extend_from_slice(s.as_bytes());
        Ok(())
    }
}
