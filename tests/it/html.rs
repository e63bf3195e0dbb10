//! `report.html` in a real headless Chromium (Debian's `chromium`, installed by
//! scripts/browser-env.sh): the bundled suite's report loads from disk with no console message
//! at all, draws every chart, and every chart has exactly the marks its data calls for; a
//! report with a baseline draws its comparison too.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{root, tracefault};

/// The browser, or `None` (a skip, said out loud) outside the test script and CI.
fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser"] {
        if let Ok(out) = Command::new("sh").arg("-c").arg(format!("command -v {name}")).output()
            && out.status.success()
        {
            return Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
        }
    }
    let required = crate::wire::sdks_required();
    assert!(!required, "the report.html tests need Chromium: run bash scripts/browser-env.sh");
    eprintln!("skipping: no chromium (run scripts/browser-env.sh)");
    None
}

/// Loads a page; returns the DOM once every script ran, and the console lines.
fn load(browser: &Path, page: &Path) -> (String, Vec<String>) {
    let out = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"])
        .args(["--virtual-time-budget=30000", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let console =
        String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.contains(":CONSOLE")).map(str::to_owned).collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), console)
}

/// (expected, drawn) marks of every chart of a rendered page.
fn marks(dom: &str) -> Vec<(usize, usize)> {
    let re = regex::Regex::new(r#"data-expected-marks="(\d+)"[^>]*?data-marks="(\d+)""#).unwrap();
    re.captures_iter(dom).map(|c| (c[1].parse().unwrap(), c[2].parse().unwrap())).collect()
}

fn check(browser: &Path, page: &Path, charts: usize) {
    let (dom, console) = load(browser, page);
    assert!(console.is_empty(), "{}: console: {console:#?}", page.display());
    assert!(dom.contains(&format!("data-rendered=\"{charts}\"")), "{}: not every chart rendered", page.display());
    assert!(dom.contains("<pre id=\"errors\"></pre>"), "{}: errors on the page", page.display());
    let m = marks(&dom);
    assert_eq!(m.len(), charts, "{}", page.display());
    for (i, (want, drawn)) in m.iter().enumerate() {
        assert_eq!(want, drawn, "{}: chart {} draws {drawn} marks, its data has {want}", page.display(), i + 1);
        assert!(*want > 0);
    }
}

#[test]
fn the_bundled_report_draws_every_chart_with_its_marks() {
    let Some(browser) = chromium() else { return };
    let page = root().join("reports/report.html");
    // Three charts per scenario: rates, calls to termination, calls against the baseline strategy.
    let scenarios = std::fs::read_dir(root().join("scenarios")).unwrap().count();
    check(&browser, &page, 3 * scenarios);
    // It needs nothing but itself: no address beyond the file.
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<script src") && !html.contains("<link"), "report.html loads something from elsewhere");
}

#[test]
fn a_report_with_a_baseline_draws_the_comparison() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = |name: &str, extra: &[&str]| {
        let o = tracefault()
            .arg("run")
            .arg("scenarios/01-worked-example.toml")
            .args(["--runs", "50", "--out"])
            .arg(dir.path().join(name))
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.code().is_some_and(|c| c <= 1), "{}", String::from_utf8_lossy(&o.stderr));
    };
    out("old", &[]);
    out("new", &["--baseline", dir.path().join("old").to_str().unwrap()]);
    // The scenario's three charts and the comparison's.
    check(&browser, &dir.path().join("new/report.html"), 4);
    // A screenshot renders (the README's picture is made the same way).
    let shot = dir.path().join("shot.png");
    let status = Command::new(&browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1100,1400"])
        .args(["--virtual-time-budget=30000"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", dir.path().join("new/report.html").display()))
        .output()
        .unwrap();
    assert!(status.status.success());
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);
}

#[test]
fn a_sweep_report_draws_its_ranking_and_tornado_charts() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    for sensitivity in ["src", "sobol"] {
        let out = dir.path().join(sensitivity);
        tracefault()
            .arg("sweep")
            .args(["scenarios/01-worked-example.toml", "scenarios/02-ambiguous-loop.toml"])
            .args(["--samples", "6", "--runs", "50", "--sensitivity", sensitivity, "--out"])
            .arg(&out)
            .current_dir(root())
            .assert()
            .code(0);
        // Per scenario: ranks first (6 strategies × 4 metrics bars), what moves success (10 bars).
        check(&browser, &out.join("report.html"), 4);
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        assert!(html.contains("data-expected-marks=\"24\""), "{sensitivity}");
        assert!(html.contains("data-expected-marks=\"10\""), "{sensitivity}");
    }
}
