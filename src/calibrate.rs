//! Fits the simulated model's profile from real traces (`tracefault calibrate`): after each
//! outcome class, how often the recorded model re-issued the identical call, changed its
//! arguments, moved on, or gave up. Each fitted probability carries its 95% Wilson interval
//! as its range; figures resting on too few observations keep the default and its plausible
//! range. The times and the first prompt's size are the medians of what the traces recorded,
//! each with the median's 95% interval (by order statistics) as its range.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::engine::profile::{Figure, Profile, plausible};
use crate::trace::inspect::{Next, follow_up, stats};
use crate::trace::{FinalOutcome, Trace, TraceEvent};

/// Observations a figure needs before it replaces the default (`--min-observations`).
pub const DEFAULT_MIN_OBSERVATIONS: u64 = 5;

#[derive(Clone, Debug, Default)]
pub struct Fit {
    pub conversations: u64,
    /// (outcome class, next action) → count.
    pub counts: BTreeMap<(String, Next), u64>,
    /// After a bad-arguments failure, changed calls that then succeeded, of all changed calls.
    pub fixes: (u64, u64),
    /// Longest run of argument changes after bad arguments, and of identical re-issues after
    /// transient or terminal failures.
    pub longest_fix_run: u32,
    pub longest_retry_run: u32,
    /// Transient and terminal failures by (class, identical re-issues of the call just before,
    /// next action): a failure met with the re-issues at the cap says nothing of the
    /// probability (the simulated model stops there whatever it draws).
    pub at: BTreeMap<(String, u32, Next), u64>,
    /// Conversations their source judged failed (a verdict of failure) after a tool failure,
    /// that ended with an answer, of those that ended with an answer or a give-up.
    pub claims: (u64, u64),
    /// As recorded: the latency of each answered model call and of each successful tool
    /// result, and the input tokens of each trace's first answered model call (when it
    /// records usage).
    pub model_ms: Vec<u64>,
    pub tool_ms: Vec<u64>,
    pub first_prompt: Vec<u64>,
}

/// The 95% Wilson score interval of `k` successes in `n` trials, widened outwards to three
/// decimals (so the rounded estimate stays inside).
pub fn wilson(k: u64, n: u64) -> [f64; 2] {
    if n == 0 {
        return [0.0, 1.0];
    }
    let (lo, hi) = crate::metrics::stats::wilson(k, n);
    [(lo * 1000.0).floor() / 1000.0, (hi * 1000.0).ceil() / 1000.0]
}

/// The lower quartile, the median and the upper quartile of sorted `v` (nearest rank), `None`
/// when there are none.
fn quartiles(v: &[u64]) -> Option<[u64; 3]> {
    let at = |q: usize| v[((v.len() * q).div_ceil(4)).saturating_sub(1)];
    (!v.is_empty()).then(|| [at(1), at(2), at(3)])
}

/// The 95% interval of the median of `n` sorted observations by order statistics, as the
/// 1-based ranks `[j, k]` of its ends: `j = n/2 − 1.96·√n/2` and `k = 1 + n/2 + 1.96·√n/2`,
/// each rounded to the nearest whole rank (the normal approximation to the Binomial(n, ½)
/// count of observations below the median, as Campbell and Gardner give it), kept within
/// 1..=n (a few observations give their whole span).
fn median_interval_ranks(n: usize) -> [usize; 2] {
    let half = n as f64 / 2.0;
    let spread = 0.98 * (n as f64).sqrt();
    let j = (half - spread).round().max(1.0) as usize;
    let k = ((1.0 + half + spread).round() as usize).clamp(1, n.max(1));
    [j.min(k), k]
}

/// `key = { value = V, range = [LO, HI] }`.
fn ranged(key: &str, value: f64, [lo, hi]: [f64; 2]) -> String {
    format!("{key} = {{ value = {value:?}, range = [{lo:?}, {hi:?}] }}")
}

/// `key = { value = V, range = [LO, HI] }` of whole numbers.
fn ranged_whole(key: &str, value: u64, [lo, hi]: [u64; 2]) -> String {
    format!("{key} = {{ value = {value}, range = [{lo}, {hi}] }}")
}

/// The class a row's outcome counts under.
fn class_of(outcome: &str) -> Option<&'static str> {
    Some(match outcome {
        "ok" => "ok",
        "partial" => "partial",
        "transient" | "rate_limited" => "transient",
        "bad_args" | "failed" => "bad_args",
        "terminal" => "terminal",
        _ => return None,
    })
}

pub fn observe(trace: &Trace, fit: &mut Fit) {
    let s = stats(trace);
    fit.conversations += 1;
    let mut first = true;
    for e in &trace.events {
        match e {
            TraceEvent::ModelCall { status: 200, latency_ms, tokens_in, .. } => {
                fit.model_ms.extend(*latency_ms);
                // A source that records no usage writes 0: no observation of the prompt.
                if std::mem::take(&mut first) && *tokens_in > 0 {
                    fit.first_prompt.push(*tokens_in);
                }
            }
            TraceEvent::ToolResult { ok: true, latency_ms, .. } => fit.tool_ms.extend(*latency_ms),
            _ => {}
        }
    }
    let rows = &s.rows;
    // A verdict of failure after a failure the model met: did its ending claim success?
    let failed_tool = rows.iter().any(|r| matches!(class_of(r.outcome), Some("transient" | "bad_args" | "terminal")));
    let verdict = trace.events.iter().rev().find_map(|e| match e {
        TraceEvent::Final { outcome, success, .. } => Some((*outcome, *success)),
        _ => None,
    });
    if let (true, Some((outcome @ (FinalOutcome::Answer | FinalOutcome::GaveUp), Some(false)))) = (failed_tool, verdict)
    {
        fit.claims.0 += u64::from(outcome == FinalOutcome::Answer);
        fit.claims.1 += 1;
    }
    let mut fix_run = 0;
    // Identical re-issues so far, per call (tool and arguments), as the simulated model counts
    // them: a parallel call of another tool does not end a call's run.
    let mut retry_runs: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        let Some(class) = class_of(r.outcome) else { continue };
        let action = follow_up(&s, i);
        let next_turn = rows[i + 1..].iter().map(|x| x.turn).find(|t| *t > r.turn);
        let next: Vec<_> = rows.iter().filter(|x| Some(x.turn) == next_turn).collect();
        *fit.counts.entry((class.to_owned(), action)).or_insert(0) += 1;
        if class == "bad_args" && action == Next::ChangedArgs {
            fix_run += 1;
            fit.longest_fix_run = fit.longest_fix_run.max(fix_run);
            let fixed = next.iter().any(|x| x.tool == r.tool && x.args != r.args && x.outcome == "ok");
            fit.fixes.0 += u64::from(fixed);
            fit.fixes.1 += 1;
        } else if class == "bad_args" {
            fix_run = 0;
        }
        let call = (r.tool, r.args);
        let retry_run = retry_runs.get(&call).copied().unwrap_or(0);
        if matches!(class, "transient" | "terminal") {
            *fit.at.entry((class.to_owned(), retry_run, action)).or_insert(0) += 1;
        }
        // A run of identical re-issues is one call's: anything else that call meets ends it.
        if matches!(class, "transient" | "terminal") && action == Next::RetryIdentical {
            retry_runs.insert(call, retry_run + 1);
            fit.longest_retry_run = fit.longest_retry_run.max(retry_run + 1);
        } else {
            retry_runs.remove(&call);
        }
    }
}

impl Fit {
    fn n(&self, class: &str) -> u64 {
        self.counts.iter().filter(|((c, _), _)| c == class).map(|(_, n)| n).sum()
    }

    fn k(&self, class: &str, actions: &[Next]) -> u64 {
        actions.iter().map(|a| self.counts.get(&(class.to_owned(), *a)).copied().unwrap_or(0)).sum()
    }

    /// Failures of `class` met with fewer than `cap` identical re-issues before them, and of
    /// those, the ones followed by one of `actions`.
    fn below_cap(&self, class: &str, cap: u32, actions: &[Next]) -> (u64, u64) {
        let mut kn = (0, 0);
        for ((c, at, next), count) in &self.at {
            if c == class && *at < cap {
                kn.1 += count;
                if actions.contains(next) {
                    kn.0 += count;
                }
            }
        }
        kn
    }

    /// The fitted profile as TOML with a comment per figure, and the profile itself. With
    /// `encoding` (a perception key: the one encoding the traces' failures were all shown in),
    /// that encoding's reading is folded into the fitted reactions: its accuracy is 1.
    pub fn profile(&self, min_obs: u64, encoding: Option<&str>) -> (Profile, String) {
        // A fraction needs at least one observation, whatever `--min-observations` says.
        let min_obs = min_obs.max(1);
        let mut p = Profile::bundled_default();
        p.name = "calibrated".into();
        let mut lines = Vec::new();
        let ints = |lines: &mut Vec<String>, key: &str, observed: u32, n: u64, default: u32| -> u32 {
            if n >= min_obs && observed > 0 {
                lines.push(format!("{key} = {observed} # longest run observed over {n} observations"));
                observed
            } else if observed == 0 && n >= min_obs {
                lines.push(format!(
                    "{key} = {default} # default kept: no run observed in {n} observations (0 would forbid it)"
                ));
                default
            } else {
                lines.push(format!("{key} = {default} # default kept: {n} observations (need {min_obs})"));
                default
            }
        };
        let mut caps = Vec::new();
        p.max_fix_attempts =
            ints(&mut caps, "max_fix_attempts", self.longest_fix_run, self.fixes.1, p.max_fix_attempts);
        let retry_obs = self.n("transient") + self.n("terminal");
        p.max_model_retries =
            ints(&mut caps, "max_model_retries", self.longest_retry_run, retry_obs, p.max_model_retries);
        let cap = p.max_model_retries;
        let mut fit = |key: &str, k: u64, n: u64, default: f64, what: &str| -> Figure {
            if n >= min_obs {
                let value = (k as f64 / n as f64 * 1000.0).round() / 1000.0;
                let range = wilson(k, n);
                lines
                    .push(format!("{} # {k} of {n} {what}; range: the 95% Wilson interval", ranged(key, value, range)));
                Figure::Ranged { value, range }
            } else {
                let range = plausible(key).unwrap_or([default, default]);
                lines.push(format!(
                    "{} # default kept: {n} observations of {what} (need {min_obs}); range: plausible (the book: the simulated model)",
                    ranged(key, default, range)
                ));
                Figure::Ranged { value: default, range }
            }
        };
        let figure = fit(
            "p_continue",
            self.k("partial", &[Next::RetryIdentical]),
            self.n("partial"),
            p.p_continue,
            "partial results were followed by the identical call",
        );
        p.set("p_continue", figure);
        let (k, n) = self.below_cap("transient", cap, &[Next::RetryIdentical]);
        let figure = fit(
            "p_retry_transient",
            k,
            n,
            p.p_retry_transient,
            "transient failures below the re-issue cap were retried identically by the model",
        );
        p.set("p_retry_transient", figure);
        let figure = fit(
            "p_fix_args",
            self.fixes.0,
            self.fixes.1,
            p.p_fix_args,
            "argument changes after bad arguments succeeded",
        );
        p.set("p_fix_args", figure);
        let (k, n) = self.below_cap("terminal", cap, &[Next::GaveUp, Next::MovedOn]);
        let figure = fit(
            "p_give_up_terminal",
            k,
            n,
            p.p_give_up_terminal,
            "terminal failures below the re-issue cap were abandoned",
        );
        p.set("p_give_up_terminal", figure);
        let figure = fit(
            "p_claim_success",
            self.claims.0,
            self.claims.1,
            p.p_claim_success,
            "conversations their source judged failed after a tool failure ended with an answer (not a give-up)",
        );
        p.set("p_claim_success", figure);
        lines.extend(caps);
        let mut toml = String::new();
        let _ = writeln!(
            toml,
            "# Simulated-model profile fitted by `tracefault calibrate` from {} conversation(s).",
            self.conversations
        );
        let _ =
            writeln!(toml, "# Each figure names the observations behind it; figures with too few keep the default.");
        let _ = writeln!(toml, "# Observed follow-ups (outcome class: action = count):");
        for ((c, a), n) in &self.counts {
            let _ = writeln!(toml, "#   {c}: {} = {n}", a.name());
        }
        let _ = writeln!(toml, "name = \"calibrated\"");
        for l in &lines {
            let _ = writeln!(toml, "{l}");
        }
        // A median (or an end of its interval) past what a profile may hold (a day of virtual
        // time; a u32 of tokens) is written at that bound, and the comment says so.
        let mut median = |key: &str, observed: &[u64], what: &str| -> Figure {
            let default = p.measure(key).unwrap_or_default();
            let most = crate::engine::profile::measure_bound(key);
            let n = observed.len() as u64;
            let mut sorted = observed.to_vec();
            sorted.sort_unstable();
            let Some([q1, mid, q3]) = quartiles(&sorted).filter(|_| n >= min_obs) else {
                let _ = writeln!(toml, "{key} = {default} # default kept: {n} {what} recorded (need {min_obs})");
                return Figure::Value(default as f64);
            };
            let [j, k] = median_interval_ranks(sorted.len());
            let top = sorted[k - 1];
            let [value, lo, hi] = [mid, sorted[j - 1], top].map(|v| v.min(most));
            let bound = if value < mid {
                format!("; {mid} is past the most a profile holds")
            } else if hi < top {
                format!("; the interval's end {top} is past the most a profile holds")
            } else {
                String::new()
            };
            // So few observations that their whole span covers less than 95%: say how much.
            let coverage = 1.0 - 0.5f64.powi(i32::try_from(n).unwrap_or(i32::MAX).saturating_sub(1));
            let few = if [j, k] == [1, sorted.len()] && coverage < 0.95 {
                format!(
                    " (so few that it is their whole span, which holds the median {:.1}% of the time)",
                    coverage * 100.0
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                toml,
                "{} # the median of {n} {what} recorded (middle half: {q1}–{q3}); range: the median's 95% interval \
                 by order statistics, ranks {j} and {k} of {n}{few}{bound}",
                ranged_whole(key, value, [lo, hi])
            );
            Figure::Ranged { value: value as f64, range: [lo as f64, hi as f64] }
        };
        let fitted = [
            median("model_latency_ms", &self.model_ms, "answered model calls' latencies (ms)"),
            median("tool_latency_ms", &self.tool_ms, "successful tool results' latencies (ms)"),
            median("prompt_tokens", &self.first_prompt, "traces' first answered model calls' input tokens"),
        ];
        for (key, figure) in crate::engine::profile::MEASURES.into_iter().zip(fitted) {
            p.set(key, figure);
        }
        let _ = writeln!(toml, "\n[perception] # not observable in traces: defaults kept, with their plausible ranges");
        for key in ["envelope", "flag", "object", "prefix", "raw", "unmarked"] {
            let full = format!("perception.{key}");
            if encoding == Some(key) {
                p.set(&full, Figure::Ranged { value: 1.0, range: [1.0, 1.0] });
                let _ = writeln!(
                    toml,
                    "{} # --encoding {key}: the failures were shown in it, so the reactions above include its misreadings",
                    ranged(key, 1.0, [1.0, 1.0])
                );
                continue;
            }
            let value = p.probability(&full).unwrap_or_default();
            let range = plausible(&full).unwrap_or([value, value]);
            p.set(&full, Figure::Ranged { value, range });
            let _ = writeln!(toml, "{}", ranged(key, value, range));
        }
        (p, toml)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_intervals_match_the_formula_widened_to_three_decimals() {
        // By hand from p ± z·sqrt(p(1-p)/n + z²/4n²), centred at (p + z²/2n), over 1 + z²/n:
        // 12/13 → [0.66686, 0.98629]; 0/10 → [0, 0.27753]; 7/10 → [0.39678, 0.89221]; 5/5 → [0.56552, 1].
        assert_eq!(wilson(12, 13), [0.666, 0.987]);
        assert_eq!(wilson(0, 10), [0.0, 0.278]);
        assert_eq!(wilson(7, 10), [0.396, 0.893]);
        assert_eq!(wilson(5, 5), [0.565, 1.0]);
        assert_eq!(wilson(0, 0), [0.0, 1.0], "no observations: anything");
    }

    #[test]
    fn failures_at_the_reissue_cap_say_nothing_of_the_retry_probability() {
        // By hand: a model that re-sends a transient failure twice, then gives up. Two calls
        // fail three times (positions 0, 1 retried; position 2 at the cap, given up), one fails
        // once and then succeeds (position 0 retried). Below the cap of 2: 5 of 5 retried.
        let mut fit = Fit::default();
        for (at, next, count) in [(0, Next::RetryIdentical, 3), (1, Next::RetryIdentical, 2), (2, Next::GaveUp, 2)] {
            fit.at.insert(("transient".into(), at, next), count);
            *fit.counts.entry(("transient".into(), next)).or_insert(0) += count;
        }
        fit.longest_retry_run = 2;
        let (p, toml) = fit.profile(5, Some("prefix"));
        assert_eq!(p.p_retry_transient, 1.0, "{toml}");
        assert_eq!(p.max_model_retries, 2);
        assert_eq!(p.ranges["p_retry_transient"], wilson(5, 5));
        assert_eq!(p.probability("perception.prefix"), Some(1.0));
        assert_eq!(p.ranges["perception.prefix"], [1.0, 1.0]);
        assert_eq!(p.probability("perception.envelope"), Some(0.98), "other encodings keep their defaults");
        // Without the cap the give-ups would count: 5 of 7.
        assert!(toml.contains("5 of 5 transient failures below the re-issue cap"), "{toml}");
    }

    /// A native trace of turns, each a model call and its calls (id, tool, arguments as JSON,
    /// failed transiently or not).
    fn native(turns: &[&[(&str, &str, &str, bool)]]) -> Trace {
        let mut jsonl = String::from(
            r#"{"tracefault_trace":1,"id":"t","source_format":"tracefault","tools":[{"name":"t"},{"name":"u"}]}"#,
        );
        for (turn, calls) in turns.iter().enumerate() {
            let turn = turn + 1;
            jsonl.push_str(&format!(
                "\n{{\"type\":\"model_call\",\"turn\":{turn},\"status\":200,\"tokens_in\":1,\"tokens_out\":1,\"latency_ms\":0,\"stop\":\"tool_calls\"}}"
            ));
            for (id, tool, args, failed) in *calls {
                let result = if *failed { r#""ok":false,"error_class":"transient""# } else { r#""ok":true"# };
                jsonl.push_str(&format!(
                    "\n{{\"type\":\"tool_call\",\"turn\":{turn},\"call_id\":\"{id}\",\"name\":\"{tool}\",\"args\":{args}}}\
                     \n{{\"type\":\"tool_result\",\"call_id\":\"{id}\",{result},\"content\":\"x\"}}"
                ));
            }
        }
        Trace::parse(&jsonl, std::path::Path::new("t.jsonl")).unwrap()
    }

    /// Times and the first prompt, by hand: answered model calls' latencies 100, 300, 200, 400
    /// (the 429's 5 is no answer) → sorted 100 200 300 400, median (nearest rank) 200, middle
    /// half 100–300; successful results' 20, 40, 30 (the failure's 999 left out) → 30; first
    /// prompts 50 and 70 (the third conversation records no usage): 2, below 3 observations.
    #[test]
    fn times_and_the_first_prompt_are_the_medians_of_what_was_recorded() {
        let head = r#"{"tracefault_trace":1,"id":"t","source_format":"tracefault","tools":[{"name":"t"}]}"#;
        let model = |turn: u32, status: u16, tokens: u64, ms: u64| {
            format!(
                "\n{{\"type\":\"model_call\",\"turn\":{turn},\"status\":{status},\"tokens_in\":{tokens},\"tokens_out\":1,\"latency_ms\":{ms},\"stop\":\"tool_calls\"}}"
            )
        };
        let call = |turn: u32, id: &str, ok: bool, ms: u64| {
            let result = if ok { r#""ok":true"# } else { r#""ok":false,"error_class":"transient""# };
            format!(
                "\n{{\"type\":\"tool_call\",\"turn\":{turn},\"call_id\":\"{id}\",\"name\":\"t\",\"args\":{{}}}}\
                 \n{{\"type\":\"tool_result\",\"call_id\":\"{id}\",{result},\"content\":\"x\",\"latency_ms\":{ms}}}"
            )
        };
        let traces = [
            format!(
                "{head}{}{}{}{}{}{}",
                model(1, 429, 999, 5),
                model(1, 200, 50, 100),
                call(1, "a", true, 20),
                model(2, 200, 80, 300),
                call(2, "b", false, 999),
                call(2, "c", true, 40)
            ),
            format!("{head}{}{}", model(1, 200, 70, 200), call(1, "d", true, 30)),
            format!("{head}{}", model(1, 200, 0, 400)),
        ];
        let mut fit = Fit::default();
        for t in &traces {
            observe(&Trace::parse(t, std::path::Path::new("t.jsonl")).unwrap(), &mut fit);
        }
        let (p, toml) = fit.profile(3, None);
        assert_eq!((p.model_latency_ms, p.tool_latency_ms), (200, 30), "{toml}");
        assert_eq!(p.prompt_tokens, Profile::bundled_default().prompt_tokens, "{toml}");
        // Ranges: the median's interval. Of 4 (100, 200, 300, 400): ranks 2 − 1.96 = 0.04 → 1
        // and 3 + 1.96 = 4.96 → 4 of 4: 100 to 400. Of 3 (20, 30, 40): the whole span.
        assert!(toml.contains("model_latency_ms = { value = 200, range = [100, 400] } # the median of 4 "), "{toml}");
        assert!(toml.contains("(middle half: 100–300)"), "{toml}");
        assert!(toml.contains("tool_latency_ms = { value = 30, range = [20, 40] } # the median of 3 "), "{toml}");
        assert_eq!(p.ranges["model_latency_ms"], [100.0, 400.0]);
        assert_eq!(p.ranges["tool_latency_ms"], [20.0, 40.0]);
        assert!(!p.ranges.contains_key("prompt_tokens"), "a default kept has no range");
        // What is written reads back as the profile fitted.
        assert_eq!(toml::from_str::<Profile>(&toml).unwrap(), p);
        assert!(toml.contains("prompt_tokens = 600 # default kept: 2 "), "{toml}");
        // A median past a day of virtual time is written at the day, and said.
        let slow = Fit { model_ms: vec![90_000_000; 3], ..Fit::default() };
        let (p, toml) = slow.profile(3, None);
        assert_eq!(p.model_latency_ms, 86_400_000, "{toml}");
        assert_eq!(p.ranges["model_latency_ms"], [86_400_000.0; 2], "{toml}");
        assert!(toml.contains("; 90000000 is past the most a profile holds"), "{toml}");
        // An interval's end past the day is cut there, and said; four observations' whole span
        // holds the median 1 − 2^-3 = 87.5% of the time.
        let slow_end = Fit { model_ms: vec![1000, 1000, 1000, 90_000_000], ..Fit::default() };
        let (p, toml) = slow_end.profile(3, None);
        assert_eq!(p.ranges["model_latency_ms"], [1000.0, 86_400_000.0], "{toml}");
        assert!(toml.contains("; the interval's end 90000000 is past the most a profile holds"), "{toml}");
        assert!(
            toml.contains("ranks 1 and 4 of 4 (so few that it is their whole span, which holds the median 87.5%"),
            "{toml}"
        );
        assert_eq!(fit.profile(2, None).0.prompt_tokens, 50, "of 50 and 70, the lower median");
    }

    /// The ranks of the median's interval, as the published table gives them: of 25, the 8th
    /// and 18th (12.5 − 4.9 = 7.6 and 13.5 + 4.9 = 18.4); of 100, the 40th and 61st (40.2,
    /// 60.8); of 10, the 2nd and 9th (1.9, 9.1); a few observations, all of them.
    #[test]
    fn the_median_interval_ranks_follow_their_formula() {
        assert_eq!(median_interval_ranks(25), [8, 18]);
        assert_eq!(median_interval_ranks(100), [40, 61]);
        assert_eq!(median_interval_ranks(10), [2, 9]);
        assert_eq!(median_interval_ranks(4), [1, 4]);
        assert_eq!(median_interval_ranks(1), [1, 1]);
    }

    #[test]
    fn a_run_of_reissues_ends_at_a_success() {
        // fail, re-issue, ok, then another call fails and is re-issued once: two runs of one,
        // not one of two.
        let (q1, q2) = (r#"{"q":1}"#, r#"{"q":2}"#);
        let trace = native(&[
            &[("a", "t", q1, true)],
            &[("b", "t", q1, false)],
            &[("c", "u", q2, true)],
            &[("d", "u", q2, false)],
        ]);
        let mut fit = Fit::default();
        observe(&trace, &mut fit);
        assert_eq!(fit.longest_retry_run, 1);
        assert_eq!(fit.at.get(&("transient".into(), 0, Next::RetryIdentical)), Some(&2));
        // A parallel call of another tool in the same turn does not end `t`'s run: fail, then
        // (re-issue fails again, `u` ok alongside), then re-issue ok: a run of two.
        let parallel = native(&[
            &[("a", "t", "{}", true), ("b", "u", "{}", false)],
            &[("c", "t", "{}", true), ("d", "u", "{}", false)],
            &[("e", "t", "{}", false)],
        ]);
        let mut fit = Fit::default();
        observe(&parallel, &mut fit);
        assert_eq!(fit.longest_retry_run, 2);
        assert_eq!(fit.at.get(&("transient".into(), 1, Next::RetryIdentical)), Some(&1));
    }

    #[test]
    fn every_probability_of_a_fitted_profile_has_a_range_holding_its_value() {
        let mut fit = Fit::default();
        fit.counts.insert(("partial".into(), Next::RetryIdentical), 12);
        fit.counts.insert(("partial".into(), Next::MovedOn), 1);
        let (p, toml) = fit.profile(5, None);
        assert_eq!(p.p_continue, 0.923);
        assert_eq!(p.ranges["p_continue"], [0.666, 0.987]);
        assert_eq!(p.ranges["p_fix_args"], crate::engine::profile::plausible("p_fix_args").unwrap(), "default kept");
        // Every swept probability, and p_claim_success.
        assert_eq!(p.ranges.len(), crate::engine::profile::PROBABILITIES.len() + 1);
        assert_eq!(p.validate(), Ok(()));
        assert!(toml.contains("p_continue = { value = 0.923, range = [0.666, 0.987] } # 12 of 13"), "{toml}");
        let back: Profile = toml::from_str(&toml).unwrap();
        assert_eq!(back, p, "the written profile reads back the same, ranges included");
    }

    #[test]
    fn claims_of_success_are_fitted_from_verdicts_after_a_tool_failure() {
        // By hand: five conversations. Three judged failed after a transient failure: two end
        // with an answer (claims), one gives up. One judged failed with no tool failure, and
        // one judged successful after a failure: neither says how a model reports a failure
        // it could not fix. So 2 of 3.
        let ending = |outcome: &str, success: bool| {
            let mut jsonl = native(&[&[("a", "t", "{}", true)], &[]]).to_jsonl();
            jsonl.push_str(&format!(
                "{{\"type\":\"final\",\"text\":\"x\",\"outcome\":\"{outcome}\",\"success\":{success}}}\n"
            ));
            Trace::parse(&jsonl, std::path::Path::new("t.jsonl")).unwrap()
        };
        let mut fit = Fit::default();
        for t in [ending("answer", false), ending("answer", false), ending("gave_up", false), ending("answer", true)] {
            observe(&t, &mut fit);
        }
        let mut clean = native(&[&[("a", "t", "{}", false)]]).to_jsonl();
        clean.push_str("{\"type\":\"final\",\"text\":\"x\",\"outcome\":\"answer\",\"success\":false}\n");
        observe(&Trace::parse(&clean, std::path::Path::new("t.jsonl")).unwrap(), &mut fit);
        assert_eq!(fit.claims, (2, 3));
        let (p, toml) = fit.profile(3, None);
        assert_eq!(p.p_claim_success, 0.667, "{toml}");
        assert_eq!(p.ranges["p_claim_success"], wilson(2, 3));
        // Too few: the default and its plausible range.
        let (p, _) = fit.profile(4, None);
        assert_eq!((p.p_claim_success, p.ranges["p_claim_success"]), (0.1, [0.0, 0.25]));
    }
}
