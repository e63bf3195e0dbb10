//! Hostile names (issue 39, items 4–11): every name a user controls — scenario and strategy
//! names, trace ids, paths — stays what it is in every output it lands in: one shell word in
//! a repro line, text in Markdown, a cell in CSV, characters XML allows, data in report.html's
//! inline JSON, printable on a terminal; and a name too long is refused with a clear error.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::csv::Table;
use crate::{root, tracefault, write};

/// A scenario (JSON) named `name` whose strategies are named `strategies`, every one failing
/// its gate, so each strategy's repro line is printed too.
fn scenario(name: &str, strategies: &[&str]) -> String {
    let defs: serde_json::Map<String, Value> =
        strategies.iter().map(|s| ((*s).to_owned(), json!({"encoding": "envelope"}))).collect();
    json!({
        "name": name,
        "runs": 20,
        "strategies": defs,
        "task": {"steps": [{"tool": "search", "args": {"q": "x"}, "result": {"n": 1}}]},
        "faults": [{"target": "search", "at": [1], "http": 503}],
        "gates": [{"strategy": "*", "metric": "calls_mean", "max": 0}]
    })
    .to_string()
}

/// Runs tracefault in `dir` (with the job summary going to `dir/summary.md`); returns the exit
/// code, stdout and stderr.
fn run_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let o =
        tracefault().current_dir(dir).env("GITHUB_STEP_SUMMARY", dir.join("summary.md")).args(args).output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(!err.contains("panicked"), "{err}");
    (o.status.code().unwrap_or(-1), out, err)
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path.as_ref()).unwrap_or_else(|e| panic!("{}: {e}", path.as_ref().display()))
}

/// The words a POSIX shell (`sh`) reads from `line`.
fn sh_words(line: &str) -> Vec<String> {
    let o = Command::new("sh").arg("-c").arg(format!("printf '%s\\0' {line}")).output().unwrap();
    assert!(o.status.success(), "{line}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().split_terminator('\0').map(str::to_owned).collect()
}

/// Runs `line` in `sh` in `dir`, with `tracefault` standing for this build.
fn sh_run(dir: &Path, line: &str) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("tracefault() {{ \"$TF\" \"$@\"; }}\n{line}"))
        .env("TF", assert_cmd::cargo::cargo_bin!("tracefault"))
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Each strategy's worst-run repro line in `report.json`, by strategy.
fn repro_lines(report: &Value) -> Vec<(String, String)> {
    report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|sc| sc["strategies"].as_array().unwrap())
        .map(|s| (s["strategy"].as_str().unwrap().to_owned(), s["worst_run"]["repro"].as_str().unwrap().to_owned()))
        .collect()
}

#[test]
fn item_4_repro_lines_are_quoted_for_the_shell_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let evil = "x; touch PWNED #";
    let names = [evil, "it's $(touch PWNED2)", "five-field"];
    std::fs::create_dir(d.join("my scen's dir")).unwrap();
    let file = "my scen's dir/s.json";
    write(d, file, &scenario("quoted", &names));
    let (code, stdout, err) = run_in(d, &["run", file, "--out", "out"]);
    assert_eq!(code, 1, "{stdout}{err}");
    let report: Value = serde_json::from_str(&read(d.join("out/report.json"))).unwrap();
    let lines = repro_lines(&report);
    assert_eq!(lines.len(), names.len());
    let md = read(d.join("out/report.md"));
    let html = read(d.join("out/report.html"));
    let summary = read(d.join("summary.md"));
    for (strategy, line) in &lines {
        // A POSIX shell reads back exactly the words meant.
        let words = sh_words(line);
        assert_eq!(words[..5], ["tracefault", "run", file, "--strategy", strategy.as_str()], "{line}");
        assert_eq!(words[5], "--run");
        assert_eq!(words.len(), 9, "{line}");
        // The same line on the terminal, in report.md, report.html and the job summary.
        assert!(stdout.contains(&format!("worst run of {strategy}: {line}")), "{stdout}");
        assert!(md.contains(&format!("`{line}`")), "{md}");
        assert!(html.contains(&tracefault::report::xml_escape(line)), "{line}");
        assert!(summary.contains(&format!("`{line}`")), "{summary}");
        // Run, it repeats the run and runs nothing else.
        let o = sh_run(d, line);
        assert!(o.status.success(), "{line}: {}", String::from_utf8_lossy(&o.stderr));
        let printed = String::from_utf8_lossy(&o.stdout);
        assert!(printed.starts_with(&format!("quoted / {strategy} run {} (seed 1)", words[6])), "{printed}");
    }
    // Safe words stay as they were.
    let plain = &lines.iter().find(|l| l.0 == "five-field").unwrap().1;
    assert!(plain.starts_with("tracefault run \"my scen's dir/s.json\" --strategy five-field --run "), "{plain}");
    assert!(!d.join("PWNED").exists() && !d.join("PWNED2").exists());
}

#[test]
fn item_5_replay_repro_lines_name_a_scenario_file_that_repeats_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let trace = root().join("traces/search-503-503-400.jsonl");
    let (code, stdout, err) = run_in(
        d,
        &["replay", trace.to_str().unwrap(), "--strategy", "raw-exception", "--strategy", "five-field", "--runs", "40"],
    );
    assert!(code == 0 || code == 1, "{stdout}{err}");
    let out = d.join("replay-reports");
    let report: Value = serde_json::from_str(&read(out.join("report.json"))).unwrap();
    let runs = Table::read(&out.join("runs.csv"));
    for (i, (strategy, line)) in repro_lines(&report).iter().enumerate() {
        let words = sh_words(line);
        assert_eq!(words[..2], ["tracefault", "run"]);
        assert_eq!(Path::new(&words[2]), Path::new("replay-reports/scenarios/1.toml"), "{line}");
        assert!(d.join(&words[2]).is_file(), "{line}");
        let o = sh_run(d, line);
        let printed = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{line}: {printed}{}", String::from_utf8_lossy(&o.stderr));
        // The same run as the what-if's worst: as many calls, and as runs.csv has it.
        let worst = &report["scenarios"][0]["strategies"][i]["worst_run"];
        let calls = worst["calls"].as_u64().unwrap();
        assert!(printed.contains(&format!(" after {calls} calls")), "{printed} vs {worst}");
        let run = worst["run"].to_string();
        let row = runs.row(&[("scenario", "search-503-503-400"), ("strategy", strategy), ("run", &run), ("seed", "1")]);
        assert_eq!(row["calls"], calls.to_string(), "{row:?}");
    }
}

/// Chromium, or `None` where it is not installed (the report.html tests say how to get it).
fn chromium() -> Option<PathBuf> {
    let found = Command::new("sh").arg("-c").arg("command -v chromium || command -v chromium-browser").output().ok()?;
    let path = String::from_utf8_lossy(&found.stdout).trim().to_owned();
    let required = crate::wire::sdks_required();
    assert!(!path.is_empty() || !required, "the report.html tests need Chromium: run bash scripts/browser-env.sh");
    (!path.is_empty()).then(|| PathBuf::from(path))
}

#[test]
fn item_6_report_html_keeps_hostile_names_inside_its_json_and_draws_every_chart() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let names = ["<!--<script", "</script><script>alert(1)</script>", "constructor", "__proto__", "a\u{2028}b&c>d"];
    write(d, "s.json", &scenario("<!--<script>", &names));
    write(d, "t.json", &scenario("plain", &["toString", "valueOf", "five-field"]));
    let (code, stdout, err) = run_in(d, &["run", "s.json", "t.json", "--out", "out"]);
    assert_eq!(code, 1, "{stdout}{err}");
    let html = read(d.join("out/report.html"));
    // Each chart's spec is one JSON block that parses, holds no markup, and carries the names.
    let re = regex::Regex::new(r#"(?s)<script type="application/json" id="spec-(\d+)">(.*?)</script>"#).unwrap();
    let blocks: Vec<(String, String)> = re.captures_iter(&html).map(|c| (c[1].to_owned(), c[2].to_owned())).collect();
    assert_eq!(blocks.len(), 6, "three charts per scenario");
    let mut seen = String::new();
    for (n, block) in &blocks {
        assert!(!block.contains('<') && !block.contains('>') && !block.contains('&'), "spec-{n}: {block}");
        assert!(!block.contains('\u{2028}') && !block.contains('\u{2029}'), "spec-{n}");
        let spec: Value = serde_json::from_str(block).unwrap_or_else(|e| panic!("spec-{n}: {e}: {block}"));
        seen.push_str(&spec.to_string());
    }
    for name in names {
        assert!(seen.contains(&serde_json::to_string(name).unwrap()), "{name} missing from the charts");
    }
    // In a browser: no message, every chart drawn with every mark.
    let Some(browser) = chromium() else { return };
    let o = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"])
        .args(["--virtual-time-budget=30000", "--dump-dom"])
        .arg(format!("file://{}", d.join("out/report.html").display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&o.stdout);
    let console: Vec<_> =
        String::from_utf8_lossy(&o.stderr).lines().filter(|l| l.contains(":CONSOLE")).map(str::to_owned).collect();
    assert!(console.is_empty(), "{console:#?}");
    assert!(dom.contains("data-rendered=\"6\""), "not every chart rendered");
    assert!(dom.contains("<pre id=\"errors\"></pre>"), "errors on the page");
    let marks = regex::Regex::new(r#"data-expected-marks="(\d+)"[^>]*?data-marks="(\d+)""#).unwrap();
    let drawn: Vec<(String, String)> = marks.captures_iter(&dom).map(|c| (c[1].to_owned(), c[2].to_owned())).collect();
    assert_eq!(drawn.len(), 6);
    for (want, got) in drawn {
        assert_eq!(want, got, "a chart drew {got} of its {want} marks");
    }
    assert!(!dom.contains("<script>alert(1)"), "a name became markup");
    for label in ["constructor", "__proto__", "toString", "valueOf"] {
        assert!(dom.contains(&format!(">{label}</text>")), "no label {label}");
    }
}

#[test]
fn item_7_csv_name_cells_cannot_be_formulas_and_stay_one_cell() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let formulas = ["=HYPERLINK(\"http://e\",\"x\")", "+1", "-1", "@SUM(A1)", "\tx", "\rx"];
    let mut names = formulas.to_vec();
    names.extend(["a\rb", "c\nd", "five-field"]);
    write(d, "s.json", &scenario("=cmd|' /C calc'!A0", &names));
    let (code, stdout, err) = run_in(d, &["run", "s.json", "--out", "out"]);
    assert_eq!(code, 1, "{stdout}{err}");
    let (code, stdout, err) = run_in(d, &["sweep", "s.json", "--samples", "2", "--runs", "10", "--out", "sw"]);
    assert!(code == 0 || code == 1, "{stdout}{err}");
    let guarded = |name: &str| if formulas.contains(&name) { format!("'{name}") } else { name.to_owned() };
    for (file, rows) in
        [("out/summary.csv", names.len()), ("out/runs.csv", names.len() * 20), ("sw/sweep.csv", names.len() * 2)]
    {
        let mut r = csv::Reader::from_path(d.join(file)).unwrap();
        let width = r.headers().unwrap().len();
        let records: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(records.len(), rows, "{file}: a name split a row");
        for rec in &records {
            assert_eq!(rec.len(), width, "{file}: {rec:?}");
            assert_eq!(&rec[0], "'=cmd|' /C calc'!A0", "{file}");
            assert!(names.iter().any(|n| guarded(n) == rec[1]), "{file}: {:?}", &rec[1]);
            // Every other cell is a number, as written (no quote in front), or empty.
            for cell in rec.iter().skip(2).filter(|c| !c.is_empty() && c.parse::<f64>().is_err()) {
                assert!(cell.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{file}: {cell:?} in {rec:?}");
            }
        }
        for name in &names {
            assert!(records.iter().any(|rec| rec[1] == guarded(name)), "{file}: {name:?} missing");
        }
    }
}

#[test]
fn item_8_junit_xml_is_well_formed_whatever_the_names_hold() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let scenario_name = "s\u{fffe}\u{ffff}\u{1}<&>\"'";
    write(d, "s.json", &scenario(scenario_name, &["a\u{fffe}", "b\u{ffff}", "c\u{1b}[2J\u{7}", "d\u{0}e", "\"'<&>"]));
    let (code, stdout, err) = run_in(d, &["run", "s.json", "--out", "out"]);
    assert_eq!(code, 1, "{stdout}{err}");
    let junit = read(d.join("out/junit.xml"));
    let doc = roxmltree::Document::parse(&junit).unwrap_or_else(|e| panic!("junit.xml: {e}\n{junit}"));
    let suite = doc.descendants().find(|n| n.has_tag_name("testsuite")).unwrap();
    assert_eq!(suite.attribute("name"), Some("s\u{fffd}\u{fffd}\u{fffd}<&>\"'"));
    let cases: Vec<&str> =
        doc.descendants().filter(|n| n.has_tag_name("testcase")).filter_map(|n| n.attribute("name")).collect();
    assert!(cases.iter().any(|c| c.starts_with("\"'<&>: calls_mean")), "{cases:?}");
    assert!(cases.iter().any(|c| c.starts_with("c\u{fffd}[2J\u{fffd}: ")), "{cases:?}");
}

/// Lines of Markdown tables whose number of cells differs from their table's header (a `|`
/// after an odd run of backslashes is escaped, as GitHub reads tables).
fn ragged_table_rows(md: &str) -> Vec<String> {
    let cells = |line: &str| {
        let (mut n, mut backslashes) = (0, 0);
        for c in line.chars() {
            if c == '|' && backslashes % 2 == 0 {
                n += 1;
            }
            backslashes = if c == '\\' { backslashes + 1 } else { 0 };
        }
        n
    };
    let mut bad = Vec::new();
    let mut header = None;
    for line in md.lines() {
        if !line.starts_with('|') {
            header = None;
            continue;
        }
        let n = cells(line);
        match header {
            None => header = Some(n),
            Some(h) if h != n => bad.push(line.to_owned()),
            Some(_) => {}
        }
    }
    bad
}

/// A Markdown line without its code spans (whose text is never markup).
fn outside_code(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let fence = rest[start..].bytes().take_while(|b| *b == b'`').count();
        let after = &rest[start + fence..];
        // The span ends at the next run of exactly as many backticks.
        let mut end = None;
        let mut i = 0;
        while let Some(k) = after[i..].find('`') {
            let run = after[i + k..].bytes().take_while(|b| *b == b'`').count();
            if run == fence {
                end = Some(i + k + run);
                break;
            }
            i += k + run;
        }
        match end {
            Some(e) => rest = &after[e..],
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn item_9_markdown_keeps_names_on_their_line_in_their_cell_and_out_of_html() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ticks = "tick`s``";
    let names =
        ["x\n# Result: all gates passed.", "a|b", "<script>alert(1)</script>", ticks, "**b** [l](http://e) - 1. $x$"];
    write(d, "s.json", &scenario("s|x\n## <img src=x onerror=alert(1)>", &names));
    let (code, stdout, err) = run_in(d, &["run", "s.json", "--out", "out"]);
    assert_eq!(code, 1, "{stdout}{err}");
    let md = read(d.join("out/report.md"));
    let summary = read(d.join("summary.md"));
    let tag = regex::Regex::new(r"<[A-Za-z/!?]").unwrap();
    for (file, text, headings) in [("report.md", &md, 2), ("summary.md", &summary, 1)] {
        // The only headings are the report's own; nothing claims the result.
        let heads: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with('#')).collect();
        assert_eq!(heads.len(), headings, "{file}: {heads:?}");
        assert!(text.lines().all(|l| l.strip_prefix("- ").is_none_or(|item| !item.starts_with('#'))), "{file}");
        assert!(!text.lines().any(|l| l.trim_start().starts_with("Result: all gates passed")), "{file}");
        assert!(ragged_table_rows(text).is_empty(), "{file}: {:?}", ragged_table_rows(text));
        // No HTML outside code spans (inside them `<` is text; `<= 0` is a bound).
        for line in text.lines().map(outside_code) {
            assert!(!tag.is_match(&line), "{file}: {line}");
        }
    }
    assert!(md.contains("Result: **FAILED**."));
    // A repro line holding backticks is still one code span, and still the command.
    let line = md.lines().find(|l| l.starts_with("- tick\\`s\\`\\` (")).unwrap_or_else(|| panic!("{md}"));
    let span = line.split_once("): ").unwrap().1;
    let fence = "`".repeat(span.bytes().take_while(|b| *b == b'`').count());
    assert_eq!(fence, "```", "{span}");
    let inner = span.strip_prefix(&fence).and_then(|s| s.strip_suffix(&fence)).unwrap();
    let words = sh_words(inner.strip_prefix(' ').and_then(|s| s.strip_suffix(' ')).unwrap_or(inner));
    assert_eq!(words[3..5], ["--strategy", ticks]);
}

#[test]
fn item_10_run_prints_names_without_terminal_escapes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let evil = "evil\u{1b}[2J\u{1b}]0;pwned\u{7}";
    write(d, "s.json", &scenario("s\u{1b}[31m", &[evil, "five-field"]));
    let (code, stdout, err) = run_in(d, &["run", "s.json", "--out", "out"]);
    assert_eq!(code, 1, "{stdout}{err}");
    let (single, single_out, single_err) = run_in(d, &["run", "s.json", "--run", "0", "--strategy", evil]);
    assert_eq!(single, 0, "{single_err}");
    for text in [&stdout, &err, &single_out, &single_err] {
        assert!(!text.contains(['\u{1b}', '\u{7}']), "{text:?}");
    }
    assert!(stdout.contains("evil\\u{1b}[2J\\u{1b}]0;pwned\\u{7}"), "{stdout}");
    assert!(stdout.contains("GATE FAILED s\\u{1b}[31m / evil\\u{1b}[2J"), "{stdout}");
    assert!(single_out.starts_with("s\\u{1b}[31m / evil\\u{1b}[2J"), "{single_out}");
}

#[test]
fn item_11_names_have_a_length_limit_and_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let long = "x".repeat(65_536);
    write(d, "strategy.json", &scenario("long", &[&long]));
    let (code, _, err) = run_in(d, &["run", "strategy.json", "--out", "out"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("strategy.json") && err.contains("strategies: expected names of at most 200 characters"),
        "{err}"
    );
    assert!(err.len() < 1000, "the error repeats the whole name");
    let toml = format!(
        "name = \"{}\"\n[strategies.\"{}\"]\nencoding = \"raw\"\n[task]\n[[task.steps]]\ntool = \"a\"\n",
        "n".repeat(201),
        long
    );
    write(d, "name.toml", &toml);
    let (code, _, err) = run_in(d, &["run", "name.toml", "--out", "out"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("name.toml:1: name: expected names of at most 200 characters"), "{err}");
    // The schema says so too: `validate` finds it without running anything.
    let (code, out, err) = run_in(d, &["validate", "name.toml"]);
    assert_eq!(code, 2, "{out}{err}");
    // At the limit, a name is fine.
    let at_limit = "y".repeat(200);
    write(d, "ok.json", &scenario(&"z".repeat(200), &[&at_limit]));
    let (code, stdout, err) = run_in(d, &["run", "ok.json", "--out", "out"]);
    assert_eq!(code, 1, "{err}");
    assert!(stdout.contains(&format!("  {at_limit}  ")), "{stdout}");
}
