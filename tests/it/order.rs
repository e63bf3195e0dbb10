//! A cosmetic edit moves no number: the order of `[[faults]]` rules (that do not overlap: where
//! two fire on one attempt the first in the file wins, which is their meaning), `[tools.NAME]`
//! tables and `[strategies.NAME]` tables changes no figure, and the default baseline is the
//! first strategy as the file lists it.

use std::collections::BTreeMap;

use crate::support::csv::{Row, Table};
use crate::{tracefault, write};

/// The rows of `summary.csv`, in file order.
fn summary(dir: &std::path::Path) -> Table {
    Table::read(&dir.join("summary.csv"))
}

fn run(dir: &std::path::Path, scenario: &std::path::Path) {
    tracefault().arg("run").arg(scenario).arg("--out").arg(dir).assert().code(0);
}

const RULES: [&str; 3] = [
    "[[faults]]\ntarget = \"search\"\nprobability = 0.3\nhttp = 503\n",
    "[[faults]]\ntarget = \"book\"\nprobability = 0.2\nhttp = 429\nretry_after_s = 1\n",
    "[[faults]]\ntarget = \"provider\"\nprobability = 0.1\nhttp = 529\n",
];
const TOOLS: [&str; 2] = ["[tools.search]\nconcurrency = 4\n", "[tools.book]\nconcurrency = 2\n"];
const STRATEGIES: [&str; 2] = [
    "[strategies.plain]\nencoding = \"prefix\"\nrouting = \"model\"\n",
    "[strategies.absorbed]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\n",
];

fn scenario(rules: &[usize], tools: &[usize], strategies: &[usize]) -> String {
    let mut s = String::from(
        "name = \"order\"\nruns = 60\nseed = 5\nbaseline = \"plain\"\n[task]\n\
         [[task.steps]]\ntool = \"search\"\nargs = { q = \"x\" }\nresult = { n = 1 }\n\
         [[task.steps]]\ntool = \"book\"\nargs = { id = 1 }\nresult = \"ok\"\n",
    );
    tools.iter().for_each(|&i| s.push_str(TOOLS[i]));
    strategies.iter().for_each(|&i| s.push_str(STRATEGIES[i]));
    rules.iter().for_each(|&i| s.push_str(RULES[i]));
    s
}

#[test]
fn reordering_rules_tools_and_strategies_moves_no_number() {
    let dir = tempfile::tempdir().unwrap();
    let rows = |name: &str, text: String| {
        let out = dir.path().join(name);
        run(&out, &write(dir.path(), &format!("{name}.toml"), &text));
        summary(&out).rows.into_iter().map(|r| (r["strategy"].clone(), r)).collect::<BTreeMap<_, _>>()
    };
    let first = rows("a", scenario(&[0, 1, 2], &[0, 1], &[0, 1]));
    assert_eq!(first.len(), 2);
    assert_eq!(rows("b", scenario(&[2, 1, 0], &[0, 1], &[0, 1])), first, "the rules reversed");
    assert_eq!(rows("c", scenario(&[1, 2, 0], &[1, 0], &[0, 1])), first, "rules rotated, tools swapped");
    assert_eq!(rows("d", scenario(&[0, 1, 2], &[0, 1], &[1, 0])), first, "strategies swapped");
    // The draws are the rule's own: a rule whose probability changes moves the numbers.
    let mut other = scenario(&[0, 1, 2], &[0, 1], &[0, 1]);
    other = other.replace("probability = 0.3", "probability = 0.31");
    assert_ne!(rows("e", other), first);
}

#[test]
fn an_explicit_key_gives_two_identical_rules_draws_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let rule = "[[faults]]\ntarget = \"search\"\nprobability = 0.5\nhttp = 503\n";
    let base = scenario(&[], &[], &[0]);
    let faults_of = |name: &str, text: String| {
        let out = dir.path().join(name);
        run(&out, &write(dir.path(), &format!("{name}.toml"), &text));
        let mut row = summary(&out).rows[0].cells().clone();
        row.remove("scenario");
        row
    };
    let once = faults_of("once", format!("{base}{rule}"));
    // Identical rules draw alike: the second fires only where the first already did, and the
    // first wins, so the plan is the one rule.
    assert_eq!(faults_of("twice", format!("{base}{rule}{rule}")), once);
    // Keyed apart, the second draws on its own and fires where the first did not.
    let keyed = format!("{base}{rule}{}", rule.replace("http = 503", "http = 503\nkey = \"second\""));
    assert_ne!(faults_of("keyed", keyed), once);
    let bad = write(
        dir.path(),
        "bad.toml",
        &format!("{base}[[faults]]\ntarget = \"search\"\nat = [1]\nhttp = 503\nkey = \"k\"\n"),
    );
    tracefault()
        .arg("validate")
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("faults[0].key: expected `key` only with `probability`"));
}

#[test]
fn the_default_baseline_is_the_first_strategy_the_file_lists() {
    // Tables named so that the file's first ("zeta") sorts last by name.
    let text = scenario(&[0], &[], &[])
        .replace("baseline = \"plain\"\n", "")
        .replace("[[faults]]", "[strategies.zeta]\nencoding = \"prefix\"\nrouting = \"model\"\n[strategies.alpha]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\n[[faults]]");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    run(&out, &write(dir.path(), "s.toml", &text));
    let rows = summary(&out).rows;
    let names: Vec<&str> = rows.iter().map(|r| r["strategy"].as_str()).collect();
    assert_eq!(names, ["zeta", "alpha"], "strategies in the file's order");
    let mean = |r: &Row| r.num::<f64>("calls_mean");
    let delta = |r: &Row| r.num::<f64>("calls_delta_vs_baseline");
    // By its definition: the strategy's mean calls minus the baseline's, the baseline "zeta".
    assert_eq!(delta(&rows[0]), 0.0);
    assert!((delta(&rows[1]) - (mean(&rows[1]) - mean(&rows[0]))).abs() < 0.0015, "{rows:?}");
    let report = std::fs::read_to_string(out.join("report.json")).unwrap();
    assert!(report.contains("\"baseline\":\"zeta\"") || report.contains("\"baseline\": \"zeta\""), "{report}");
}
