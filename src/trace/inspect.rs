//! What happened in one trace: calls, failures, identical repeats of failing calls, and where a
//! loop guard would have stopped it (`tracefault inspect`).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::{FinalOutcome, Trace, TraceEvent};
use crate::escape::printable;

/// One tool call and its outcome, borrowed from the trace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row<'a> {
    pub turn: u32,
    pub tool: &'a str,
    /// Canonical JSON.
    pub args: &'a str,
    /// `ok`, `partial`, a failure class, or `unanswered`.
    pub outcome: &'a str,
    /// Identical (tool, canonical arguments) to an earlier call of this trace that failed.
    pub failing_repeat: bool,
    /// Why the importer judged the result as it did (the field or rule, and the class's source).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<&'a str>,
    /// A failed or cancelled result's text, cut to one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How the model read the result and what it did, with its seeded draws (traces that
    /// explain: `exec`'s, `run --explain`'s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stats<'a> {
    pub id: &'a str,
    pub source_format: &'a str,
    pub model_calls: u64,
    /// Model calls the provider failed (a status other than 200).
    pub failed_model_calls: u64,
    pub tool_calls: u64,
    pub tool_failures: u64,
    pub failing_repeats: u64,
    pub longest_failing_streak: u64,
    /// The 1-based tool call at which a loop guard with K = 3 would have stopped the run.
    pub loop_guard_at: Option<u64>,
    pub ended: &'static str,
    /// The source's own word for the ending, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_reason: Option<&'a str>,
    /// The source's own verdict on the task, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success: Option<bool>,
    /// Calls that never ran (cancelled by the agent): neither failures nor successes.
    pub cancelled: u64,
    /// What the importer left out (`--lenient`).
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub gaps: &'a [String],
    pub rows: Vec<Row<'a>>,
}

/// The first line of `text`, at most `n` characters.
pub fn one_line(text: &str, n: usize) -> String {
    let line = text.trim().lines().next().unwrap_or("");
    let cut: String = line.chars().take(n).collect();
    let more = cut.len() < line.len() || text.trim().lines().nth(1).is_some();
    if more { format!("{cut}…") } else { cut }
}

/// A decision event as one line: `read as raw (truth transient): perceived terminal —
/// perception.raw 0.60, draw 0.712 → misread; p_give_up_terminal 0.20, draw 0.130 → yes; give_up`.
pub fn decision_line(ev: &TraceEvent) -> Option<String> {
    let TraceEvent::Decision { signal, truth, perceived, action, draws, .. } = ev else { return None };
    let mut line = format!("read as {signal} (truth {truth}): perceived {perceived}");
    let shown: Vec<String> = draws
        .iter()
        .map(|d| {
            let verdict = match (d.probability.starts_with("perception."), d.below) {
                (true, true) => "read right",
                (true, false) => "misread",
                (false, true) => "yes",
                (false, false) => "no",
            };
            format!("{} {:.2}, draw {:.3} → {verdict}", d.probability, d.p, d.draw)
        })
        .collect();
    if !shown.is_empty() {
        line.push_str(" — ");
        line.push_str(&shown.join("; "));
    }
    line.push_str(&format!("; {action}"));
    Some(line)
}

pub const LOOP_GUARD_K: u32 = 3;

/// What the model did after a result, with respect to that call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Next {
    RetryIdentical,
    ChangedArgs,
    MovedOn,
    GaveUp,
}

impl Next {
    pub fn name(self) -> &'static str {
        match self {
            Next::RetryIdentical => "retried identically",
            Next::ChangedArgs => "changed the arguments",
            Next::MovedOn => "moved on",
            Next::GaveUp => "gave up",
        }
    }
}

/// What the recorded model did after the result of tool call `i`: in its next turn with tool
/// calls, the identical call, the same tool with other arguments, or neither; with no further
/// turn, it moved on if the conversation ended with an answer, else it gave up.
pub fn follow_up(s: &Stats, i: usize) -> Next {
    let rows = &s.rows;
    let r = &rows[i];
    let next_turn = rows[i + 1..].iter().map(|x| x.turn).find(|t| *t > r.turn);
    let next = || rows.iter().filter(move |x| Some(x.turn) == next_turn);
    if next().any(|x| x.tool == r.tool && x.args == r.args) {
        Next::RetryIdentical
    } else if next().any(|x| x.tool == r.tool) {
        Next::ChangedArgs
    } else if next_turn.is_some() || (s.ended == "answer" && s.success != Some(false)) {
        // An answer judged a failure after this one did not move on from it: it gave up
        // (and claimed otherwise).
        Next::MovedOn
    } else {
        Next::GaveUp
    }
}

pub fn ended_name(o: FinalOutcome) -> &'static str {
    o.name()
}

pub fn stats(trace: &Trace) -> Stats<'_> {
    // Sized once: a conversation can hold tens of thousands of calls (doubling would leave up
    // to half of each table unused while the trace is held).
    let calls = trace.events.iter().filter(|e| matches!(e, TraceEvent::ToolCall { .. })).count();
    let mut rows: Vec<Row> = Vec::with_capacity(calls);
    // The latest call with each id: results pair with it.
    let mut index_of: HashMap<&str, usize> = HashMap::with_capacity(calls);
    let (mut model_calls, mut failed_model_calls) = (0, 0);
    let mut ended = "cut_off";
    let (mut ended_reason, mut verdict) = (None, None);
    for ev in &trace.events {
        match ev {
            TraceEvent::ModelCall { status, .. } => {
                model_calls += 1;
                failed_model_calls += u64::from(*status != 200);
            }
            TraceEvent::ToolCall { turn, call_id, name, args } => {
                index_of.insert(call_id, rows.len());
                rows.push(Row {
                    turn: *turn,
                    tool: name,
                    args: args.as_json(),
                    outcome: "unanswered",
                    failing_repeat: false,
                    evidence: None,
                    error: None,
                    decision: None,
                });
            }
            TraceEvent::ToolResult { call_id, error_class, ok, cancelled, evidence, content, .. } => {
                if let Some(&i) = index_of.get(call_id.as_str()) {
                    let row = &mut rows[i];
                    row.outcome = match (ok, error_class.as_deref()) {
                        _ if *cancelled => "cancelled",
                        (_, Some(c)) => c,
                        (true, None) => "ok",
                        (false, None) => "failed",
                    };
                    row.evidence = evidence.as_deref();
                    if !*ok || *cancelled {
                        row.error = Some(one_line(content, 100));
                    }
                }
            }
            TraceEvent::Final { outcome, reason, success, .. } => {
                ended = ended_name(*outcome);
                ended_reason = reason.as_deref();
                verdict = *success;
            }
            TraceEvent::Decision { call_id, .. } => {
                if let Some(&i) = index_of.get(call_id.as_str()) {
                    rows[i].decision = decision_line(ev);
                }
            }
            TraceEvent::Mcp { .. } | TraceEvent::Breaker { .. } => {}
        }
    }
    drop(index_of);
    let failed = |r: &Row| !matches!(r.outcome, "ok" | "partial" | "unanswered" | "cancelled");
    let mut failing_repeats = 0;
    let mut streak = 0;
    let mut longest = 0;
    // (tool, args) of calls that failed so far, and deliveries per (tool, args, outcome).
    let mut failed_keys: HashSet<(&str, &str)> = HashSet::new();
    let mut guard: HashMap<(&str, &str, &str), u32> = HashMap::new();
    let mut loop_guard_at = None;
    let mut repeat_flags = Vec::with_capacity(rows.len());
    for i in 0..rows.len() {
        let (r, key) = (&rows[i], (rows[i].tool, rows[i].args));
        let repeat = failed_keys.contains(&key);
        failing_repeats += u64::from(repeat);
        let same_as_previous = i > 0 && rows[i - 1].tool == r.tool && rows[i - 1].args == r.args;
        streak = if failed(r) && same_as_previous && failed(&rows[i - 1]) { streak + 1 } else { u64::from(failed(r)) };
        longest = longest.max(streak);
        if failed(r) || r.outcome == "partial" {
            let n = guard.entry((key.0, key.1, r.outcome)).or_insert(0);
            *n += 1;
            if *n >= LOOP_GUARD_K && loop_guard_at.is_none() {
                loop_guard_at = Some(i as u64 + 1);
            }
        }
        if failed(r) {
            failed_keys.insert(key);
        }
        repeat_flags.push(repeat);
    }
    drop((failed_keys, guard));
    for (r, repeat) in rows.iter_mut().zip(repeat_flags) {
        r.failing_repeat = repeat;
    }
    Stats {
        id: &trace.header.id,
        source_format: &trace.header.source_format,
        model_calls,
        failed_model_calls,
        tool_calls: rows.len() as u64,
        tool_failures: rows.iter().filter(|r| failed(r)).count() as u64,
        failing_repeats,
        longest_failing_streak: longest,
        loop_guard_at,
        ended,
        ended_reason,
        success: verdict,
        cancelled: rows.iter().filter(|r| r.outcome == "cancelled").count() as u64,
        gaps: &trace.header.gaps,
        rows,
    }
}

/// The table `inspect` prints.
pub fn table(s: &Stats) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "{} ({})", printable(s.id), printable(s.source_format));
    let _ = writeln!(out, "  {:>4}  {:>4}  {:<28} {:<44} outcome", "#", "turn", "tool", "arguments");
    for (i, r) in s.rows.iter().enumerate() {
        let args = printable(r.args);
        let args: String = if args.chars().count() > 44 {
            args.chars().take(43).collect::<String>() + "…"
        } else {
            args.into_owned()
        };
        let tool: String = printable(r.tool).chars().take(28).collect();
        let flag = if r.failing_repeat { "REPEAT of a failed call" } else { "" };
        let outcome = printable(r.outcome);
        let _ = writeln!(out, "  {:>4}  {:>4}  {:<28} {:<44} {:<12} {}", i + 1, r.turn, tool, args, outcome, flag);
        if let Some(error) = &r.error {
            let _ = writeln!(out, "  {:>10}  {}", "", printable(error));
            if let Some(e) = r.evidence {
                let _ = writeln!(out, "  {:>10}  ({})", "", printable(e));
            }
        }
        if let Some(d) = &r.decision {
            let _ = writeln!(out, "  {:>10}  model: {}", "", printable(d));
        }
    }
    let cancelled = if s.cancelled > 0 { format!(", cancelled {}", s.cancelled) } else { String::new() };
    let failed_models =
        if s.failed_model_calls > 0 { format!(" ({} failed)", s.failed_model_calls) } else { String::new() };
    let mut ended = s.ended.to_owned();
    if let Some(r) = s.ended_reason {
        ended = format!("{ended} ({})", printable(r));
    }
    match s.success {
        Some(true) => ended.push_str(", judged a success by the source"),
        Some(false) => ended.push_str(", judged a failure by the source"),
        None => {}
    }
    let _ = writeln!(
        out,
        "  model calls {}{failed_models}, tool calls {}, failures {}{cancelled}, identical repeats of failing calls {}, longest failing streak {}, loop guard (K={LOOP_GUARD_K}) would stop at {}, ended: {}",
        s.model_calls,
        s.tool_calls,
        s.tool_failures,
        s.failing_repeats,
        s.longest_failing_streak,
        s.loop_guard_at.map_or("never".to_owned(), |n| format!("tool call {n}")),
        ended
    );
    for gap in s.gaps {
        let _ = writeln!(out, "  gap (read with --lenient): {}", printable(gap));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Args, Header, Stop};

    /// A trace of one model turn per call: (tool, argument, outcome), where the outcome is an
    /// error class, `ok`, `partial`, or `None` for a call left unanswered.
    fn trace(calls: &[(&str, u64, Option<&str>)]) -> Trace {
        let mut events = Vec::new();
        for (i, &(tool, arg, outcome)) in calls.iter().enumerate() {
            let (turn, call_id) = (i as u32 + 1, format!("c{i}"));
            events.push(TraceEvent::ModelCall {
                turn,
                status: 200,
                tokens_in: 0,
                tokens_out: 0,
                latency_ms: None,
                t_ms: None,
                stop: Stop::ToolCalls,
                text: None,
            });
            let args = Args::new(&serde_json::json!({ "q": arg }));
            events.push(TraceEvent::ToolCall { turn, call_id: call_id.clone(), name: tool.into(), args });
            let Some(outcome) = outcome else { continue };
            events.push(TraceEvent::ToolResult {
                call_id,
                ok: outcome != "http_503",
                status: None,
                content: String::new(),
                error_class: (outcome != "ok").then(|| outcome.to_owned()),
                latency_ms: None,
                attempts: None,
                evidence: None,
                cancelled: false,
                attempt_ms: Vec::new(),
            });
        }
        events.push(TraceEvent::Final {
            text: String::new(),
            outcome: FinalOutcome::GaveUp,
            reason: None,
            success: None,
            started_ms: None,
            t_ms: None,
            in_flight_attempts: None,
        });
        let header = Header::new("t".into(), "native", None, None);
        Trace { header, events }
    }

    #[test]
    fn repeats_streaks_and_the_loop_guard_are_counted_by_their_definitions() {
        let (fail, ok, partial) = (Some("http_503"), Some("ok"), Some("partial"));
        let t = trace(&[
            ("search", 1, fail),   // 1: a failure
            ("search", 1, fail),   // 2: repeats a failed call, right after it: streak 2
            ("search", 1, ok),     // 3: repeats a failed call (and succeeds): the streak ends
            ("fetch", 1, partial), // 4: partials are not failures, but a loop guard counts them
            ("fetch", 1, partial), // 5
            ("fetch", 1, partial), // 6: the third identical (call, outcome): the guard stops here
            ("fetch", 1, partial), // 7
            ("search", 1, fail),   // 8: repeats a failed call, not right after it: streak 1
            ("search", 3, fail),   // 9: same tool, other arguments: the streak starts again
            ("search", 4, fail),   // 10
            ("search", 4, fail),   // 11: repeats the call before it: streak 2
            ("fetch", 4, fail),    // 12: same arguments, other tool: the streak starts again
            ("lookup", 4, fail),   // 13
            ("fetch", 2, None),    // 14: unanswered
        ]);
        let s = stats(&t);
        assert_eq!((s.model_calls, s.tool_calls, s.tool_failures), (14, 14, 8));
        assert_eq!(s.failing_repeats, 4);
        assert_eq!(s.longest_failing_streak, 2);
        assert_eq!(s.loop_guard_at, Some(6));
        assert_eq!(s.ended, "gave_up");
        let outcomes: Vec<&str> = s.rows.iter().map(|r| r.outcome).collect();
        let mut want = ["http_503"; 14];
        want[2] = "ok";
        want[3..7].fill("partial");
        want[13] = "unanswered";
        assert_eq!(outcomes, want);
        let repeats: Vec<usize> =
            s.rows.iter().enumerate().filter(|(_, r)| r.failing_repeat).map(|(i, _)| i + 1).collect();
        assert_eq!(repeats, [2, 3, 8, 11]);
    }
}
