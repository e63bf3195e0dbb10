//! What happened in one trace: calls, failures, identical repeats of failing calls, and where a
//! loop guard would have stopped it (`tracefault inspect`).

use serde::Serialize;

use super::{FinalOutcome, Trace, TraceEvent};
use crate::engine::task::canonical_json;

/// One tool call and its outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub turn: u32,
    pub tool: String,
    pub args: String,
    /// `ok`, `partial`, a failure class, or `unanswered`.
    pub outcome: String,
    /// Identical (tool, canonical arguments) to an earlier call of this trace that failed.
    pub failing_repeat: bool,
    /// The result the model was given, and why an importer judged it as it did.
    #[serde(skip)]
    pub content: String,
    #[serde(skip)]
    pub evidence: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stats {
    pub id: String,
    pub source_format: String,
    pub model_calls: u64,
    pub tool_calls: u64,
    pub tool_failures: u64,
    pub failing_repeats: u64,
    pub longest_failing_streak: u64,
    /// The 1-based tool call at which a loop guard with K = 3 would have stopped the run.
    pub loop_guard_at: Option<u64>,
    pub ended: String,
    pub rows: Vec<Row>,
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
    } else if next_turn.is_some() || s.ended == "answer" {
        Next::MovedOn
    } else {
        Next::GaveUp
    }
}

pub fn ended_name(o: FinalOutcome) -> &'static str {
    match o {
        FinalOutcome::Answer => "answer",
        FinalOutcome::GaveUp => "gave_up",
        FinalOutcome::CutOff => "cut_off",
    }
}

pub fn stats(trace: &Trace) -> Stats {
    let mut rows: Vec<Row> = Vec::new();
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut index_of: Vec<(String, usize)> = Vec::new();
    let mut model_calls = 0;
    let mut ended = "cut_off";
    for ev in &trace.events {
        match ev {
            TraceEvent::ModelCall { .. } => model_calls += 1,
            TraceEvent::ToolCall { turn, call_id, name, args } => {
                index_of.push((call_id.clone(), rows.len()));
                keys.push((name.clone(), canonical_json(args)));
                rows.push(Row {
                    turn: *turn,
                    tool: name.clone(),
                    args: canonical_json(args),
                    outcome: "unanswered".into(),
                    failing_repeat: false,
                    content: String::new(),
                    evidence: None,
                });
            }
            TraceEvent::ToolResult { call_id, ok, error_class, content, evidence, .. } => {
                if let Some(&(_, i)) = index_of.iter().rev().find(|(id, _)| id == call_id) {
                    rows[i].content.clone_from(content);
                    rows[i].evidence.clone_from(evidence);
                    rows[i].outcome = match (ok, error_class.as_deref()) {
                        (_, Some(c)) => c.to_owned(),
                        (true, None) => "ok".to_owned(),
                        (false, None) => "failed".to_owned(),
                    };
                }
            }
            TraceEvent::Final { outcome, .. } => ended = ended_name(*outcome),
        }
    }
    let failed = |r: &Row| !matches!(r.outcome.as_str(), "ok" | "partial" | "unanswered");
    let mut failing_repeats = 0;
    let mut streak = 0;
    let mut longest = 0;
    let mut guard: Vec<((String, String, String), u32)> = Vec::new();
    let mut loop_guard_at = None;
    for i in 0..rows.len() {
        let repeat = (0..i).any(|j| keys[j] == keys[i] && failed(&rows[j]));
        rows[i].failing_repeat = repeat;
        failing_repeats += u64::from(repeat);
        streak = if failed(&rows[i]) && i > 0 && keys[i - 1] == keys[i] && failed(&rows[i - 1]) {
            streak + 1
        } else {
            u64::from(failed(&rows[i]))
        };
        longest = longest.max(streak);
        if failed(&rows[i]) || rows[i].outcome == "partial" {
            let k = (keys[i].0.clone(), keys[i].1.clone(), rows[i].outcome.clone());
            let n = match guard.iter_mut().find(|g| g.0 == k) {
                Some(g) => {
                    g.1 += 1;
                    g.1
                }
                None => {
                    guard.push((k, 1));
                    1
                }
            };
            if n >= LOOP_GUARD_K && loop_guard_at.is_none() {
                loop_guard_at = Some(i as u64 + 1);
            }
        }
    }
    Stats {
        id: trace.header.id.clone(),
        source_format: trace.header.source_format.clone(),
        model_calls,
        tool_calls: rows.len() as u64,
        tool_failures: rows.iter().filter(|r| failed(r)).count() as u64,
        failing_repeats,
        longest_failing_streak: longest,
        loop_guard_at,
        ended: ended.to_owned(),
        rows,
    }
}

/// The table `inspect` prints.
pub fn table(s: &Stats) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "{} ({})", s.id, s.source_format);
    let _ = writeln!(out, "  {:>4}  {:>4}  {:<28} {:<44} outcome", "#", "turn", "tool", "arguments");
    for (i, r) in s.rows.iter().enumerate() {
        let args: String = if r.args.chars().count() > 44 {
            r.args.chars().take(43).collect::<String>() + "…"
        } else {
            r.args.clone()
        };
        let tool: String = r.tool.chars().take(28).collect();
        let flag = if r.failing_repeat { "REPEAT of a failed call" } else { "" };
        let _ = writeln!(out, "  {:>4}  {:>4}  {:<28} {:<44} {:<12} {}", i + 1, r.turn, tool, args, r.outcome, flag);
    }
    let _ = writeln!(
        out,
        "  model calls {}, tool calls {}, failures {}, identical repeats of failing calls {}, longest failing streak {}, loop guard (K={LOOP_GUARD_K}) would stop at {}, ended: {}",
        s.model_calls,
        s.tool_calls,
        s.tool_failures,
        s.failing_repeats,
        s.longest_failing_streak,
        s.loop_guard_at.map_or("never".to_owned(), |n| format!("tool call {n}")),
        s.ended
    );
    out
}
