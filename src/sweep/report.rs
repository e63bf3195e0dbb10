//! A sweep written out: `sweep.csv` (every profile's parameters and metrics), `sweep.json`
//! (the analysis) and the `report.md` section, and its `rank_first_share` gates checked.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use super::analysis::{Cut, FLIP_AGREEMENT, FLIP_MIN_PROFILES, Flip};
use super::{Sensitivity, Sweep, SweptScenario};
use crate::calibrate::wilson;
use crate::engine::profile::PROBABILITIES;
use crate::escape::{csv_names, md_text};
use crate::report::html::{self, Chart};
use crate::report::xml_escape;
use crate::scenario::{RANK_FIRST_SHARE, RANKED};
use crate::suite::GateResult;

fn round(v: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (v * f).round() / f
}

fn by_param(values: impl Iterator<Item = f64>) -> Map<String, Value> {
    PROBABILITIES.iter().zip(values).map(|(k, v)| ((*k).to_owned(), json!(round(v, 4)))).collect()
}

impl Flip {
    /// Whether the flip is strong enough to tell in the reports (see [`FLIP_AGREEMENT`]).
    pub fn told(&self) -> bool {
        self.agreement >= FLIP_AGREEMENT && self.wins >= FLIP_MIN_PROFILES
    }

    /// "error-string beats response-object when perception.prefix > 0.940" (and "and
    /// perception.envelope < 0.930" when the region takes two thresholds), the strategies'
    /// names written by `name` (escaped for where the text goes).
    pub fn describe(&self, sc: &SweptScenario, name: impl Fn(&str) -> String) -> String {
        let (a, b) = (name(&sc.strategies[self.a]), name(&sc.strategies[self.b]));
        let mut s = format!("{a} beats {b} when {}", self.cut.describe());
        if let Some(and) = &self.and {
            let _ = write!(s, " and {}", and.describe());
        }
        s
    }
}

impl Cut {
    fn when(&self) -> &'static str {
        if self.above { ">" } else { "<" }
    }

    fn describe(&self) -> String {
        format!("{} {} {:.3}", PROBABILITIES[self.param], self.when(), self.threshold)
    }

    fn to_json(self) -> Value {
        json!({"parameter": PROBABILITIES[self.param], "when": self.when(), "threshold": round(self.threshold, 4)})
    }
}

impl Sweep {
    fn n(&self) -> usize {
        self.plan.samples
    }

    /// `sweep.csv`: one row per evaluated profile, scenario and strategy: the drawn parameters,
    /// then the metrics. Rows 0..N are hypercube A; a Sobol sweep's later rows are B and A_B^(i).
    pub fn csv(&self) -> String {
        let mut out = String::from("scenario,strategy,sample");
        for k in PROBABILITIES {
            let _ = write!(out, ",{k}");
        }
        for (m, _) in RANKED {
            let _ = write!(out, ",{m}");
        }
        out.push('\n');
        for sc in &self.scenarios {
            // `scenario,strategy,` of each strategy's rows, by the csv crate.
            let prefixes: Vec<String> = sc
                .strategies
                .iter()
                .map(|name| String::from_utf8_lossy(&csv_names(&[&sc.name, name])).into_owned())
                .collect();
            for (i, (params, metrics)) in sc.params.iter().zip(&sc.metrics).enumerate() {
                for (s, prefix) in prefixes.iter().enumerate() {
                    let _ = write!(out, "{prefix}{i}");
                    for p in params {
                        let _ = write!(out, ",{p:.4}");
                    }
                    for v in metrics[s] {
                        let _ = write!(out, ",{v:.4}");
                    }
                    out.push('\n');
                }
            }
        }
        out
    }

    /// The `rank_first_share` gates, checked.
    pub fn gates(&self) -> Vec<GateResult> {
        let mut out = Vec::new();
        for sc in &self.scenarios {
            for g in &sc.gates {
                let shares = sc.rank_first(self.n(), g.on);
                for (s, name) in sc.strategies.iter().enumerate() {
                    if g.strategy != "*" && g.strategy != *name {
                        continue;
                    }
                    let value = shares[s];
                    out.push(GateResult {
                        scenario: sc.name.clone(),
                        strategy: name.clone(),
                        metric: format!("{RANK_FIRST_SHARE}({})", RANKED[g.on].0),
                        value,
                        min: g.min,
                        max: g.max,
                        passed: g.min.is_none_or(|m| value >= m) && g.max.is_none_or(|m| value <= m),
                    });
                }
            }
        }
        out
    }

    /// Per scenario and ranked metric, the flips ([`SweptScenario::flips`]): searched once for
    /// every file that tells them.
    pub fn flips(&self) -> Vec<Vec<Vec<Flip>>> {
        let n = self.n();
        self.scenarios.iter().map(|sc| (0..RANKED.len()).map(|m| sc.flips(n, m)).collect()).collect()
    }

    /// `sweep.json`: the design and, per scenario and metric, rank-first shares, pairwise
    /// frequencies with their 95% Wilson intervals, each parameter's sensitivity and the flips
    /// (`flips`, from [`Sweep::flips`]).
    pub fn json(&self, flips: &[Vec<Vec<Flip>>]) -> Value {
        let n = self.n();
        let scenarios: Vec<Value> = self
            .scenarios
            .iter()
            .zip(flips)
            .map(|(sc, flips)| {
                let metrics: Vec<Value> = RANKED
                    .iter()
                    .enumerate()
                    .map(|(m, (name, higher))| {
                        let first = sc.rank_first(n, m);
                        let mut pairs = Vec::new();
                        for a in 0..sc.strategies.len() {
                            for b in (0..sc.strategies.len()).filter(|b| *b != a) {
                                let k = sc.beats(n, m, a, b);
                                pairs.push(json!({"a": sc.strategies[a], "b": sc.strategies[b],
                                    "a_beats_b": round(k as f64 / n as f64, 4), "interval": wilson(k, n as u64)}));
                            }
                        }
                        let sensitivity: Vec<Value> = sc
                            .strategies
                            .iter()
                            .enumerate()
                            .map(|(s, strategy)| {
                                let mut v = json!({"strategy": strategy,
                                    "correlation": by_param(sc.correlations(n, m, s).into_iter())});
                                if let Some(idx) = sc.sobol(self.plan.sensitivity, n, m, s) {
                                    v["first_order"] = Value::Object(by_param(idx.iter().map(|i| i.0)));
                                    v["total"] = Value::Object(by_param(idx.iter().map(|i| i.1)));
                                }
                                v
                            })
                            .collect();
                        let flips: Vec<Value> = flips[m]
                            .iter()
                            .map(|f| {
                                let mut v = f.cut.to_json();
                                v["a"] = json!(sc.strategies[f.a]);
                                v["b"] = json!(sc.strategies[f.b]);
                                v["profiles"] = json!(f.wins);
                                v["a_beats_b"] = json!(round(f.share, 4));
                                if let Some(and) = f.and {
                                    v["and"] = and.to_json();
                                }
                                v["agreement"] = json!(round(f.agreement, 4));
                                v
                            })
                            .collect();
                        json!({"metric": name, "higher_is_better": higher,
                            "rank_first_share": sc.strategies.iter().zip(first).map(|(s, f)| json!({"strategy": s, "share": round(f, 4)})).collect::<Vec<_>>(),
                            "pairwise": pairs, "sensitivity": sensitivity, "flips": flips})
                    })
                    .collect();
                let ranges: Map<String, Value> =
                    PROBABILITIES.iter().zip(&sc.ranges).map(|(k, r)| ((*k).to_owned(), json!(r))).collect();
                json!({"scenario": sc.name, "ranges": ranges, "metrics": metrics})
            })
            .collect();
        let gates: Vec<Value> = self
            .gates()
            .iter()
            .map(|g| {
                json!({"scenario": g.scenario, "strategy": g.strategy, "metric": g.metric,
                "value": round(g.value, 4), "min": g.min, "max": g.max, "passed": g.passed})
            })
            .collect();
        let method = match self.plan.sensitivity {
            Sensitivity::Src => {
                "correlation: Pearson correlation of each parameter with the metric over the N profiles (for a Latin hypercube, whose columns are nearly uncorrelated, the standardised regression coefficient)"
            }
            Sensitivity::Sobol => {
                "correlation as under src, over hypercube A; first_order: S_i = mean(f_B (f_ABi - f_A)) / V (Saltelli et al. 2010); total: S_Ti = mean((f_A - f_ABi)^2) / 2V (Jansen 1999); V the variance over A and B"
            }
        };
        json!({"tracefault_version": env!("CARGO_PKG_VERSION"), "design": "latin hypercube", "seed": self.plan.seed,
            "samples": n, "evaluations": self.plan.evaluations(),
            "sensitivity": method, "flip_rule": format!("the one-parameter threshold that best tells the profiles where a beats b from the rest, by balanced agreement (the mean of the shares of each side it places right); where that agrees with fewer than {FLIP_AGREEMENT} of them, the region on one side of two thresholds ('and': two parameters, or a band of one) if it reaches {FLIP_AGREEMENT}; told in report.md when it agrees with at least {FLIP_AGREEMENT} of them and a beats b in at least {FLIP_MIN_PROFILES}"),
            "scenarios": scenarios, "gates": gates})
    }

    /// The `report.md` section: per scenario, the rank-first shares on each metric, the
    /// parameter that moves each strategy's success most, and the rankings that flip.
    pub fn markdown(&self, flips: &[Vec<Vec<Flip>>]) -> String {
        let n = self.n();
        let moved_by = match self.plan.sensitivity {
            Sensitivity::Src => "success moved most by (correlation)",
            Sensitivity::Sobol => "success moved most by (total Sobol index)",
        };
        let mut out = format!(
            "## Sweep: {n} profiles (Latin hypercube over each probability's range)\n\nShare of profiles in which each strategy ranks first (ties count for each).\n\n",
        );
        for (sc, flips) in self.scenarios.iter().zip(flips) {
            let _ = writeln!(out, "### {}\n", md_text(&sc.name));
            out.push_str("| strategy |");
            for (m, _) in RANKED {
                let _ = write!(out, " {m} |");
            }
            let _ = writeln!(out, " {moved_by} |");
            out.push_str("|---|");
            out.push_str(&"---|".repeat(RANKED.len() + 1));
            out.push('\n');
            let firsts: Vec<Vec<f64>> = (0..RANKED.len()).map(|m| sc.rank_first(n, m)).collect();
            for (s, name) in sc.strategies.iter().enumerate() {
                let _ = write!(out, "| {} |", md_text(name));
                for f in &firsts {
                    let _ = write!(out, " {:.3} |", f[s]);
                }
                let influence: Vec<f64> = match sc.sobol(self.plan.sensitivity, n, 0, s) {
                    Some(idx) => idx.iter().map(|i| i.1).collect(),
                    None => sc.correlations(n, 0, s),
                };
                let (j, v) = influence
                    .iter()
                    .enumerate()
                    .fold((0, 0.0_f64), |b, (j, v)| if v.abs() > b.1.abs() { (j, *v) } else { b });
                if v == 0.0 {
                    out.push_str(" — |\n");
                } else {
                    let _ = writeln!(out, " {} ({v:+.2}) |", PROBABILITIES[j]);
                }
            }
            let flips: Vec<String> = flips[0]
                .iter()
                .filter(|f| f.told())
                .map(|f| {
                    format!(
                        "- {} ({:.0}% of profiles; the rule's balanced agreement {:.0}%)",
                        f.describe(sc, md_text),
                        f.share * 100.0,
                        f.agreement * 100.0
                    )
                })
                .collect();
            if !flips.is_empty() {
                let _ = writeln!(out, "\nWhere success rankings flip:\n\n{}", flips.join("\n"));
            }
            out.push('\n');
        }
        let gates = self.gates();
        if !gates.is_empty() {
            out.push_str(
                "### Gates\n\n| scenario | strategy | metric | value | bound | |\n|---|---|---|---|---|---|\n",
            );
            for g in &gates {
                let bound = crate::report::gate_bounds(g.min, g.max);
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {:.3} | {bound} | {} |",
                    md_text(&g.scenario),
                    md_text(&g.strategy),
                    g.metric,
                    g.value,
                    if g.passed { "pass" } else { "FAIL" }
                );
            }
            out.push('\n');
        }
        out
    }

    /// `report.html`: per scenario, a ranking-frequency chart (each strategy's rank-first share
    /// on each metric) and a tornado chart (each parameter's influence on the success of the
    /// strategy that ranks first most often), the flips and the gates.
    pub fn html(&self, flips: &[Vec<Vec<Flip>>]) -> String {
        let n = self.n();
        let mut h = String::new();
        html::page_start(
            &mut h,
            "tracefault sweep",
            &format!(
                "tracefault {} · {n} profiles, {} evaluated (seed {}). Same files and seed, same bytes.",
                crate::report::VERSION,
                self.plan.evaluations(),
                self.plan.seed
            ),
        );
        let mut k = 0;
        for (sc, flips) in self.scenarios.iter().zip(flips) {
            let _ = writeln!(h, "<h2>{}</h2>\n<div class=\"charts\">", xml_escape(&sc.name));
            k += 1;
            html::chart(&mut h, k, &ranking_chart(sc, n));
            k += 1;
            html::chart(&mut h, k, &self.tornado_chart(sc));
            h.push_str("</div>\n");
            let told: Vec<_> = flips[0].iter().filter(|f| f.told()).collect();
            if !told.is_empty() {
                h.push_str("<h3>Where success rankings flip</h3>\n<ul>\n");
                for f in told {
                    let _ = writeln!(
                        h,
                        "<li>{} ({:.0}% of profiles; balanced agreement {:.0}%)</li>",
                        xml_escape(&f.describe(sc, str::to_owned)),
                        f.share * 100.0,
                        f.agreement * 100.0
                    );
                }
                h.push_str("</ul>\n");
            }
        }
        let gates = self.gates();
        if !gates.is_empty() {
            h.push_str("<h2>Gates</h2>\n<table>\n<tr><th>scenario</th><th>strategy</th><th>metric</th><th>value</th><th></th></tr>\n");
            for g in &gates {
                let verdict =
                    if g.passed { "<span class=\"pass\">pass</span>" } else { "<span class=\"fail\">FAIL</span>" };
                let _ = writeln!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{verdict}</td></tr>",
                    xml_escape(&g.scenario),
                    xml_escape(&g.strategy),
                    g.metric,
                    g.value
                );
            }
            h.push_str("</table>\n");
        }
        html::page_end(&mut h);
        h
    }

    /// Each parameter's influence on the success of the strategy that ranks first on it most
    /// often: signed correlations, or total Sobol indices, largest first.
    fn tornado_chart(&self, sc: &SweptScenario) -> Chart {
        let n = self.n();
        let firsts = sc.rank_first(n, 0);
        let leader = (0..sc.strategies.len()).fold(0, |b, s| if firsts[s] > firsts[b] { s } else { b });
        let (influence, what): (Vec<f64>, &str) = match sc.sobol(self.plan.sensitivity, n, 0, leader) {
            Some(idx) => (idx.iter().map(|i| i.1).collect(), "total Sobol index"),
            None => (sc.correlations(n, 0, leader), "correlation"),
        };
        let mut values: Vec<(&str, f64)> = PROBABILITIES.iter().copied().zip(influence).collect();
        values.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
        let marks = values.len();
        let order: Vec<&str> = values.iter().map(|v| v.0).collect();
        let data: Vec<Value> = values.iter().map(|(p, v)| json!({"parameter": p, "influence": round(*v, 4)})).collect();
        let spec = json!({
            "data": {"values": data},
            "width": 360,
            "height": {"step": 16},
            "mark": "bar",
            "encoding": {
                "y": {"field": "parameter", "type": "nominal", "sort": order, "title": null},
                "x": {"field": "influence", "type": "quantitative", "title": what},
                "color": {"condition": {"test": "datum.influence < 0", "value": "#e45756"}, "value": "#4c78a8"}
            }
        });
        Chart { title: format!("What moves {}'s success", sc.strategies[leader]), spec, marks }
    }
}

/// Each strategy's share of profiles in which it ranks first, on each metric: a bar each.
fn ranking_chart(sc: &SweptScenario, n: usize) -> Chart {
    let mut values = Vec::new();
    for (m, (metric, _)) in RANKED.iter().enumerate() {
        for (strategy, share) in sc.strategies.iter().zip(sc.rank_first(n, m)) {
            values.push(json!({"strategy": strategy, "metric": metric, "share": round(share, 4)}));
        }
    }
    let marks = values.len();
    let metrics: Vec<&str> = RANKED.iter().map(|r| r.0).collect();
    let spec = json!({
        "data": {"values": values},
        "width": 360,
        "height": {"step": 10},
        "mark": "bar",
        "encoding": {
            "y": {"field": "strategy", "type": "nominal", "sort": null, "title": null},
            "yOffset": {"field": "metric", "sort": metrics},
            "x": {"field": "share", "type": "quantitative", "scale": {"domain": [0, 1]},
                "title": "share of profiles ranking first", "axis": {"format": "%"}},
            "color": {"field": "metric", "type": "nominal", "sort": metrics}
        }
    });
    Chart { title: "Ranks first".into(), spec, marks }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flip_of_two_thresholds_is_told_with_both() {
        let sc = SweptScenario {
            name: "s".into(),
            strategies: vec!["x".into(), "y".into()],
            ranges: Vec::new(),
            gates: Vec::new(),
            params: Vec::new(),
            metrics: Vec::new(),
        };
        let cut = Cut { param: 7, above: true, threshold: 0.84941 };
        let and = Cut { param: 6, above: false, threshold: 0.9258 };
        let mut f = Flip { a: 1, b: 0, wins: 99, share: 0.3867, cut, and: None, agreement: 0.936 };
        assert_eq!(f.describe(&sc, str::to_owned), "y beats x when perception.prefix > 0.849");
        f.and = Some(and);
        assert_eq!(
            f.describe(&sc, str::to_owned),
            "y beats x when perception.prefix > 0.849 and perception.object < 0.926"
        );
        assert_eq!(and.to_json(), json!({"parameter": "perception.object", "when": "<", "threshold": 0.9258}));
        assert!(f.told());
        f.agreement = 0.89;
        assert!(!f.told());
    }
}
