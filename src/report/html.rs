//! `report.html`: one self-contained page to look at (no CDN, no network: Vega and Vega-Lite are
//! inlined from `assets/vega/`). Per scenario: success and loop rate per strategy with their
//! intervals, the distribution of calls to termination, the change in calls against the
//! baseline strategy as a forest plot, and with `--baseline` every metric's change against the
//! previous reports, regressions marked; a sortable summary table; each worst run's repro line.
//! The charts are Vega-Lite specs built here; each chart says how many marks it must draw.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{Exporter, Report, VERSION, xml_escape};
use crate::engine::events::TerminatedBy;
use crate::escape::script_json;
use crate::metrics::stats::wilson;
use crate::suite::ScenarioResult;

const VEGA: &str = include_str!("../../assets/vega/vega.min.js");
const VEGA_LITE: &str = include_str!("../../assets/vega/vega-lite.min.js");

pub struct ReportHtml;

/// A chart: its Vega-Lite spec and the number of data marks (bars, rules, points) it draws.
pub struct Chart {
    pub title: String,
    pub spec: Value,
    pub marks: usize,
}

/// The page's head, its `<h1>` and the error box; `intro` is HTML.
pub fn page_start(h: &mut String, title: &str, intro: &str) {
    let title = xml_escape(title);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n<p>{intro}</p>\n<pre id=\"errors\"></pre>\n"
    );
}

/// Chart number `n` of the page: its box and its spec (JSON no name in it can break out of).
pub fn chart(h: &mut String, n: usize, chart: &Chart) {
    let spec = script_json(&chart.spec.to_string());
    let _ = writeln!(
        h,
        "<div><h3>{}</h3><div class=\"chart\" id=\"chart-{n}\" data-spec=\"spec-{n}\" data-expected-marks=\"{}\"></div>\n<script type=\"application/json\" id=\"spec-{n}\">{spec}</script></div>",
        xml_escape(&chart.title),
        chart.marks
    );
}

/// The inlined Vega, Vega-Lite and the drawing script, and the page's end.
pub fn page_end(h: &mut String) {
    let _ = write!(
        h,
        "<script>{VEGA}</script>\n<script>{VEGA_LITE}</script>\n<script>{SCRIPT}</script>\n</body>\n</html>\n"
    );
}

/// Success and loop rate per strategy, each with its 95% interval: a bar and a rule per rate.
fn rates_chart(r: &ScenarioResult) -> Chart {
    let mut values = Vec::new();
    for (row, agg) in r.rows.iter().zip(&r.aggregates) {
        let (lo, hi) = wilson(agg.count(TerminatedBy::Answer), agg.runs);
        let get = |m: &str| row.get(m).unwrap_or(0.0);
        values.push(
            json!({"strategy": row.strategy, "rate": "success", "value": get("success_rate"), "lo": lo, "hi": hi}),
        );
        values.push(json!({"strategy": row.strategy, "rate": "loop", "value": get("loop_rate"),
            "lo": get("loop_rate_lo"), "hi": get("loop_rate_hi")}));
    }
    let marks = values.len() * 2;
    let spec = json!({
        "data": {"values": values},
        "width": 420,
        "height": {"step": 14},
        "encoding": {
            "y": {"field": "strategy", "type": "nominal", "sort": null, "title": null},
            "yOffset": {"field": "rate", "sort": ["success", "loop"]},
            "color": {"field": "rate", "type": "nominal", "sort": ["success", "loop"],
                "scale": {"range": ["#4c78a8", "#e45756"]}}
        },
        "layer": [
            {"mark": "bar", "encoding": {"x": {"field": "value", "type": "quantitative",
                "scale": {"domain": [0, 1]}, "title": "rate (95% interval)"}}},
            {"mark": {"type": "rule", "color": "black"}, "encoding": {"x": {"field": "lo", "type": "quantitative"},
                "x2": {"field": "hi"}}}
        ]
    });
    Chart { title: "Success and loop rate".into(), spec, marks }
}

/// The names of `Object.prototype`'s properties. Vega groups a facet's rows in a plain object
/// keyed by the value: a row named like one of these fails the chart or merges into another.
const PROTOTYPE_KEYS: [&str; 12] = [
    "__proto__",
    "__defineGetter__",
    "__defineSetter__",
    "__lookupGetter__",
    "__lookupSetter__",
    "constructor",
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "toLocaleString",
    "toString",
    "valueOf",
];

/// How many calls each strategy's runs took to terminate: a bar per (strategy, calls) seen,
/// a row per strategy, keyed and ordered by name. Vega-Lite writes that order into a Vega
/// expression, and Vega keys the rows in a plain object: a name that breaks either (one of
/// [`PROTOTYPE_KEYS`], or holding U+2028 or U+2029, which end an expression's string) has
/// every row keyed by `#` and its name instead, ordered by a number, labelled without the `#`.
fn calls_chart(r: &ScenarioResult) -> Chart {
    let names: Vec<&str> = r.rows.iter().map(|row| row.strategy.as_str()).collect();
    let rekeyed = names.iter().any(|n| PROTOTYPE_KEYS.contains(n) || n.contains(['\u{2028}', '\u{2029}']));
    let mut values = Vec::new();
    for (i, (name, agg)) in names.iter().zip(&r.aggregates).enumerate() {
        for (calls, &runs) in agg.calls_hist.iter().enumerate().filter(|(_, n)| **n > 0) {
            let share = runs as f64 / agg.runs.max(1) as f64;
            values.push(if rekeyed {
                json!({"strategy": format!("#{name}"), "order": i, "calls": calls, "share": share})
            } else {
                json!({"strategy": name, "calls": calls, "share": share})
            });
        }
    }
    let marks = values.len();
    let mut header = json!({"labelAngle": 0, "labelAlign": "left"});
    let order = if rekeyed {
        header["labelExpr"] = Value::from("slice(datum.value, 1)");
        json!({"field": "order", "op": "min"})
    } else {
        json!(names)
    };
    let spec = json!({
        "data": {"values": values},
        "facet": {"row": {"field": "strategy", "type": "nominal", "sort": order, "title": null, "header": header}},
        "spec": {
            "width": 420,
            "height": 40,
            "mark": "bar",
            "encoding": {
                "x": {"field": "calls", "type": "quantitative", "title": "calls to termination"},
                "y": {"field": "share", "type": "quantitative", "title": "runs", "axis": {"format": "%", "tickCount": 2}}
            }
        }
    });
    Chart { title: "Calls to termination".into(), spec, marks }
}

/// Δ calls against the scenario's baseline strategy (paired over the same runs): a point and
/// an interval per strategy, and the zero line.
fn delta_chart(r: &ScenarioResult) -> Chart {
    let values: Vec<Value> = r
        .rows
        .iter()
        .map(|row| {
            let get = |m: &str| row.get(m).unwrap_or(0.0);
            json!({"strategy": row.strategy, "delta": get("calls_delta_vs_baseline"),
                "lo": get("calls_delta_lo"), "hi": get("calls_delta_hi")})
        })
        .collect();
    let marks = values.len() * 2 + 1;
    let baseline = &r.scenario.strategies[r.scenario.baseline].name;
    let spec = json!({
        "width": 420,
        "height": {"step": 18},
        "layer": [
            {"data": {"values": values}, "mark": {"type": "rule", "color": "black"},
                "encoding": {"y": {"field": "strategy", "type": "nominal", "sort": null, "title": null},
                    "x": {"field": "lo", "type": "quantitative", "title": format!("Δ calls vs {baseline} (95% interval)")},
                    "x2": {"field": "hi"}}},
            {"data": {"values": values}, "mark": {"type": "point", "filled": true, "size": 50},
                "encoding": {"y": {"field": "strategy", "type": "nominal", "sort": null},
                    "x": {"field": "delta", "type": "quantitative"}}},
            {"data": {"values": [{}]}, "mark": {"type": "rule", "strokeDash": [4, 3], "color": "gray"},
                "encoding": {"x": {"datum": 0}}}
        ]
    });
    Chart { title: format!("Calls against {baseline}"), spec, marks }
}

/// With a baseline: each compared metric's change per strategy, regressions in red.
fn baseline_chart(report: &Report<'_>, scenario: &str) -> Option<Chart> {
    let c = report.comparison?;
    let values: Vec<Value> = c
        .changes
        .iter()
        .filter(|ch| ch.scenario == scenario)
        .map(|ch| {
            json!({"strategy": ch.strategy, "metric": ch.metric, "change": ch.delta, "lo": ch.lo, "hi": ch.hi,
                "old": ch.old, "new": ch.new, "verdict": if ch.regression { "regression" } else { "no significant regression" }})
        })
        .collect();
    if values.is_empty() {
        return None;
    }
    let marks = values.len() * 2;
    let spec = json!({
        "data": {"values": values},
        "facet": {"column": {"field": "metric", "type": "nominal", "title": null, "sort": null}},
        "resolve": {"scale": {"x": "independent"}},
        "spec": {
            "width": 150,
            "height": {"step": 16},
            "encoding": {
                "y": {"field": "strategy", "type": "nominal", "sort": null, "title": null},
                "color": {"field": "verdict", "type": "nominal",
                    "scale": {"domain": ["regression", "no significant regression"], "range": ["#d62728", "#4c78a8"]}},
                "tooltip": [{"field": "old"}, {"field": "new"}, {"field": "change"}]
            },
            "layer": [
                {"mark": "rule", "encoding": {"x": {"field": "lo", "type": "quantitative", "title": "new − old"}, "x2": {"field": "hi"}}},
                {"mark": {"type": "point", "filled": true}, "encoding": {"x": {"field": "change", "type": "quantitative"}}}
            ]
        }
    });
    Some(Chart { title: "Against the baseline (new − old, 95% interval)".into(), spec, marks })
}

/// Old and new side by side for one scenario, regressions marked.
fn old_vs_new(h: &mut String, c: &crate::baseline::Comparison, scenario: &str) {
    let changes: Vec<_> = c.changes.iter().filter(|ch| ch.scenario == scenario).collect();
    if changes.is_empty() {
        return;
    }
    h.push_str("<h3>Old and new</h3>\n<table class=\"sortable\">\n<thead><tr><th>strategy</th><th>metric</th><th>old</th><th>new</th><th>change</th><th>95% interval</th><th>method</th></tr></thead>\n<tbody>\n");
    for ch in changes {
        let mark = if ch.regression { " class=\"fail\"" } else { "" };
        let _ = writeln!(
            h,
            "<tr{mark}><td>{}</td><td>{}</td><td data-v=\"{:.4}\">{:.4}</td><td data-v=\"{:.4}\">{:.4}</td><td data-v=\"{:.4}\">{:+.4}{}</td><td>[{:+.4}, {:+.4}]</td><td>{}</td></tr>",
            xml_escape(&ch.strategy),
            ch.metric,
            ch.old,
            ch.old,
            ch.new,
            ch.new,
            ch.delta,
            ch.delta,
            if ch.regression { " regression" } else { "" },
            ch.lo,
            ch.hi,
            ch.method.name()
        );
    }
    h.push_str("</tbody>\n</table>\n");
}

/// The columns of the sortable summary table.
const TABLE: [(&str, &str); 9] = [
    ("runs", "runs"),
    ("success_rate", "success"),
    ("loop_rate", "loops"),
    ("calls_mean", "calls"),
    ("wasted_retries_per_run", "wasted / run"),
    ("breaker_trips_per_run", "trips / run"),
    ("tokens_mean", "tokens"),
    ("calls_delta_vs_baseline", "Δ calls"),
    ("cost_usd_mean", "USD / run"),
];

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0}th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}\
th{cursor:pointer;background:#f4f4f4}td:first-child,td:nth-child(2),th:first-child,th:nth-child(2){text-align:left}\
.fail{color:#b00020;font-weight:600}.pass{color:#1b7f3b;font-weight:600}code{font-size:12px}\
.chart{margin:.5em 0 1.5em}.charts{display:flex;flex-wrap:wrap;gap:2em}h3{font-size:15px;margin:.5em 0}";

/// Draws every chart, counts each one's data marks, sorts tables; any error shows on the page.
const SCRIPT: &str = r#"
(function () {
  var errors = document.getElementById('errors');
  function fail(e) { errors.textContent += String(e) + '\n'; console.error(e); }
  window.addEventListener('error', function (e) { fail(e.message); });
  var charts = document.querySelectorAll('.chart');
  var pending = charts.length;
  charts.forEach(function (el) {
    try {
      var spec = JSON.parse(document.getElementById(el.dataset.spec).textContent);
      var compiled = vegaLite.compile(spec).spec;
      new vega.View(vega.parse(compiled), { renderer: 'svg', container: el, hover: true })
        .runAsync()
        .then(function () {
          el.dataset.marks = el.querySelectorAll(
            'g.mark-rect.role-mark > path, g.mark-rule.role-mark > line, g.mark-symbol.role-mark > path').length;
          if (--pending === 0) { document.body.dataset.rendered = String(charts.length); }
        })
        .catch(fail);
    } catch (e) { fail(e); }
  });
  if (charts.length === 0) { document.body.dataset.rendered = '0'; }
  document.querySelectorAll('table.sortable th').forEach(function (th) {
    th.addEventListener('click', function () {
      var i = th.cellIndex;
      var body = th.closest('table').tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var up = th.dataset.dir !== 'up';
      th.dataset.dir = up ? 'up' : 'down';
      rows.sort(function (a, b) {
        var x = a.cells[i].dataset.v, y = b.cells[i].dataset.v;
        var d = (x !== undefined && y !== undefined) ? x - y : a.cells[i].textContent.localeCompare(b.cells[i].textContent);
        return up ? d : -d;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
})();
"#;

impl Exporter for ReportHtml {
    fn file_name(&self) -> &'static str {
        "report.html"
    }

    fn write(&self, report: &Report<'_>, out: &mut Vec<u8>) -> std::io::Result<()> {
        let mut h = String::new();
        let verdict =
            if report.passed() { "<span class=\"pass\">PASS</span>" } else { "<span class=\"fail\">FAIL</span>" };
        page_start(
            &mut h,
            "tracefault report",
            &format!(
                "{verdict} · tracefault {VERSION} · {} scenario(s). Every figure is reproducible: same files, same seed, same bytes.",
                report.results.len()
            ),
        );
        if let Some(c) = report.checks {
            let _ = writeln!(
                h,
                "<h2>Agent</h2>\n<p><code>{}</code></p>\n<p>Outcome: {}</p>\n<table>\n<tr><th>check</th><th>result</th></tr>",
                xml_escape(&c.agent),
                xml_escape(&c.outcome)
            );
            for row in &c.checks {
                let class = match row.status {
                    super::checks::CheckStatus::Fail(_) => "fail",
                    _ => "pass",
                };
                let _ = writeln!(
                    h,
                    "<tr><td>{}</td><td><span class=\"{class}\">{}</span> {}</td></tr>",
                    xml_escape(row.title),
                    row.status.word(),
                    xml_escape(&row.status.details().join("; "))
                );
            }
            h.push_str("</table>\n");
            for e in &c.elsewhere {
                let _ = writeln!(h, "<p>Request to another host: <code>{}</code></p>", xml_escape(e));
            }
        }
        // The sortable summary.
        let rows: usize = report.results.iter().map(|r| r.rows.len()).sum();
        let _ = write!(
            h,
            "<details><summary><b>Summary table</b> ({rows} rows; click a column to sort)</summary>\n<table class=\"sortable\">\n<thead><tr><th>scenario</th><th>strategy</th>"
        );
        for (_, label) in TABLE {
            let _ = write!(h, "<th>{label}</th>");
        }
        h.push_str("</tr></thead>\n<tbody>\n");
        for r in report.results {
            for row in &r.rows {
                let _ =
                    write!(h, "<tr><td>{}</td><td>{}</td>", xml_escape(&r.scenario.name), xml_escape(&row.strategy));
                for (col, _) in TABLE {
                    let i = crate::metrics::summary::SUMMARY_COLUMNS[2..].iter().position(|c| *c == col).unwrap_or(0);
                    let text = row.formatted(i);
                    let _ = write!(h, "<td data-v=\"{text}\">{text}</td>");
                }
                h.push_str("</tr>\n");
            }
        }
        h.push_str("</tbody>\n</table>\n</details>\n");
        let mut n = 0;
        for r in report.results {
            let sc = &r.scenario;
            let _ = writeln!(h, "<h2>{}</h2>", xml_escape(&sc.name));
            if !sc.description.is_empty() {
                let _ = writeln!(h, "<p>{}</p>", xml_escape(&sc.description));
            }
            let _ = writeln!(h, "<p>seed {} · {} runs per strategy</p>\n<div class=\"charts\">", r.seed, r.runs);
            let charts =
                [Some(rates_chart(r)), Some(calls_chart(r)), Some(delta_chart(r)), baseline_chart(report, &sc.name)];
            for c in charts.into_iter().flatten() {
                n += 1;
                chart(&mut h, n, &c);
            }
            h.push_str("</div>\n");
            if let Some(c) = report.comparison {
                old_vs_new(&mut h, c, &sc.name);
            }
            h.push_str("<h3>Worst runs</h3>\n<ul>\n");
            for (i, s) in sc.strategies.iter().enumerate() {
                if let Some(line) = r.repro_line(i) {
                    let _ = writeln!(h, "<li>{}: <code>{}</code></li>", xml_escape(&s.name), xml_escape(&line));
                }
            }
            h.push_str("</ul>\n");
        }
        if let Some(c) = report.comparison {
            let _ = writeln!(
                h,
                "<h2>Against the baseline</h2>\n<pre>{}</pre>",
                xml_escape(&crate::baseline::markdown(c, report.fail_on_regression))
            );
        }
        page_end(&mut h);
        out.extend_from_slice(h.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testing::{HOSTILE, checklist, render, sample};

    /// The `data-expected-marks` of each chart box, in page order.
    fn expected_marks(html: &str) -> Vec<usize> {
        html.split("data-expected-marks=\"").skip(1).map(|s| s[..s.find('"').unwrap()].parse().unwrap()).collect()
    }

    #[test]
    fn the_page_has_each_section_in_order() {
        let results = [sample("checkout")];
        let html = render(&ReportHtml, &Report::new(&results));
        assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">\n"), "{}", &html[..200]);
        assert!(html.ends_with("</body>\n</html>\n"));
        let sections = [
            "<title>tracefault report</title>",
            "<h1>tracefault report</h1>",
            "<span class=\"fail\">FAIL</span> · tracefault ",
            "<pre id=\"errors\"></pre>",
            "<details><summary><b>Summary table</b> (2 rows; click a column to sort)</summary>",
            "<h2>checkout</h2>",
            "<p>seed 7 · 4 runs per strategy</p>",
            "<div class=\"charts\">",
            "<h3>Success and loop rate</h3>",
            "<h3>Calls to termination</h3>",
            "<h3>Calls against five-field</h3>",
            "<h3>Worst runs</h3>",
            "<script>",
        ];
        let mut at = 0;
        for s in sections {
            let found = html[at..].find(s).unwrap_or_else(|| panic!("{s:?} after byte {at}"));
            at += found + s.len();
        }
        // Without a checklist or a baseline, neither of their sections.
        assert!(!html.contains("<h2>Agent</h2>"));
        assert!(!html.contains("Against the baseline"));
    }

    #[test]
    fn the_summary_table_holds_each_strategys_figures() {
        let results = [sample("checkout")];
        let html = render(&ReportHtml, &Report::new(&results));
        assert!(
            html.contains(
                "<th>scenario</th><th>strategy</th><th>runs</th><th>success</th><th>loops</th><th>calls</th>"
            )
        );
        // error-string: 4 runs, 3/4 answered, 1/4 looped, 19/4 calls, 275 tokens a run, Δ +1.5.
        let row = html.lines().find(|l| l.starts_with("<tr><td>checkout</td><td>error-string</td>")).unwrap();
        for cell in ["4", "0.7500", "0.2500", "4.750", "275.0", "1.500"] {
            assert!(row.contains(&format!("<td data-v=\"{cell}\">{cell}</td>")), "{cell} in {row}");
        }
    }

    #[test]
    fn each_chart_says_how_many_marks_it_draws() {
        let results = [sample("checkout")];
        let html = render(&ReportHtml, &Report::new(&results));
        // Rates: 2 strategies × 2 rates × (bar + rule) = 8. Calls: a bar per (strategy, calls)
        // seen: five-field 3 and 4, error-string 3, 5 and 8 = 5. Δ: 2 × (rule + point) + zero = 5.
        assert_eq!(expected_marks(&html), [8, 5, 5]);
        for n in 1..=3 {
            assert!(html.contains(&format!("id=\"chart-{n}\" data-spec=\"spec-{n}\"")), "chart {n}");
            assert!(html.contains(&format!("<script type=\"application/json\" id=\"spec-{n}\">")), "spec {n}");
        }
    }

    #[test]
    fn a_hostile_name_is_text_in_the_page_and_data_in_the_specs() {
        let results = [sample(HOSTILE)];
        let html = render(&ReportHtml, &Report::new(&results));
        let escaped = "1. *a* | &lt;b&gt; &amp; &quot;q&quot;";
        assert!(html.contains(&format!("<h2>{escaped}</h2>")), "heading");
        assert!(html.contains(&format!("<tr><td>{escaped}</td><td>five-field</td>")), "table cell");
        assert!(!html.contains("<b> &"), "the raw name is nowhere in the page");
        // The repro line in the worst runs names the scenario's file, escaped as text.
        assert!(html.contains(
            "<li>error-string: <code>tracefault run scenarios/checkout.toml --strategy error-string --run 0 --seed 7</code></li>"
        ));
    }

    #[test]
    fn a_checklist_gets_its_agent_section_escaped() {
        let results = [sample("checkout")];
        let c = checklist();
        let html = render(&ReportHtml, &Report { checks: Some(&c), ..Report::new(&results) });
        assert!(html.contains("<h2>Agent</h2>\n<p><code>python agent.py --key [REDACTED]</code></p>"));
        assert!(html.contains(
            "<tr><td>retries honour retry-after</td><td><span class=\"fail\">FAIL</span> run 2: retried after 1 s &lt; 5 s; run 3: &lt;again&gt; &amp; &quot;again&quot;</td></tr>"
        ));
        assert!(html.contains(
            "<tr><td>streams end cleanly</td><td><span class=\"pass\">N/A</span> the agent never streams</td></tr>"
        ));
        assert!(html.contains("<p>Request to another host: <code>api.example.com /v1/x</code></p>"));
    }
}
