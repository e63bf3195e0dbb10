//! The task an agent must complete (steps of tool calls and a final answer) and the run-wide
//! policy: what the engine simulates, independent of where it came from (TOML or a trace).

use super::breaker::BreakerConfig;
use super::retry::RetryPolicy;

/// One tool call the task needs, with the result a correct call gets.
#[derive(Clone, Debug, PartialEq)]
pub struct CallSpec {
    pub tool: u16,
    /// Canonical JSON of the arguments the model sends first (keys sorted, no insignificant
    /// whitespace).
    pub args: String,
    /// `corrections[v - 1]` is what the model sends after its v-th correction.
    pub corrections: Vec<String>,
    /// How many of the corrections a recording or the scenario named (the rest are made up).
    pub named_fixes: u32,
    /// Interned id of `(tool, args)`: equal ids mean identical calls.
    pub args_id: u32,
    /// The successful result as JSON text.
    pub result_json: String,
    /// The result as tool content (a JSON string result unquoted, else `result_json`) written
    /// as a JSON string literal, escaped once here rather than in every run; `None` when that
    /// is `result_json` itself (a string result).
    result_literal: Option<String>,
    pub latency_ms: Option<u64>,
}

impl CallSpec {
    /// The arguments after `variant` corrections (the last one known beyond that).
    pub fn args_for(&self, variant: u32) -> &str {
        match (variant as usize).min(self.corrections.len()) {
            0 => &self.args,
            v => &self.corrections[v - 1],
        }
    }

    /// The result as tool content, as a JSON string literal.
    pub fn result_literal(&self) -> &str {
        self.result_literal.as_deref().unwrap_or(&self.result_json)
    }

    /// Sets the result to a text, as a recording holds it.
    pub fn set_result_text(&mut self, text: &str) {
        self.result_json = serde_json::to_string(text).expect("a string serializes");
        self.result_literal = None;
    }
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Task {
    /// Tool names; a call's `tool` indexes this.
    pub tools: Vec<String>,
    /// Each step is one model turn: the indices of its calls in `calls`.
    pub steps: Vec<Vec<u32>>,
    pub calls: Vec<CallSpec>,
    pub final_text: String,
    /// Set when the task replays recorded decisions (`as-recorded`).
    pub script: Option<Script>,
    /// The tools (indices into `tools`) whose success is the task's goal (`[task] goal`); empty
    /// for every tool a call uses.
    pub goal: Vec<u16>,
    /// The tools some call uses, in order of first use (a trace's header may list tools it
    /// never called: they are no part of the default goal).
    pub called: Vec<u16>,
    /// `(rule, call)`: the call the model makes when it follows fault rule `rule`'s injected
    /// instruction (no step of the task).
    pub injected: Vec<(u16, u32)>,
    /// `(tool, canonical args)` → interned id, so adding a call never scans the others.
    interned: std::collections::BTreeMap<(u16, String), u32>,
}

/// Corrections a model may make to one call's arguments (the profile's `max_fix_attempts` is
/// at most this).
pub const MAX_FIXES: u32 = 16;

/// Recorded decisions: the model takes exactly the recorded turns (a step may have no calls: a
/// text-only turn), accepts every result, and ends as the recording did. Faults apply exactly at
/// the recorded attempts, without memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Script {
    pub ending: Ending,
    /// The recorded ending claimed the task done although the source judged it failed (an
    /// answer with a verdict of failure): the replay's give-up claims success as it did.
    pub claimed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// A final model call with an answer.
    Answer,
    /// A final model call that gives up.
    GaveUp,
    /// The recording stops after the last step's results, with no final model call.
    CutOff,
}

/// At most this many parallel calls in one step (random slots are laid out for them).
pub const MAX_PARALLEL_CALLS: usize = 32;

impl Task {
    /// Whether the task's goal is reached, `reached` telling it of each tool (by index): every
    /// goal tool, or every tool a call uses when the task names none.
    pub fn goal_reached(&self, reached: impl Fn(usize) -> bool) -> bool {
        let goal = if self.goal.is_empty() { &self.called } else { &self.goal };
        goal.iter().all(|&t| reached(usize::from(t)))
    }

    /// Adds a call, interning its canonical arguments. `fixes` are the corrected arguments a
    /// recording or the scenario names, in order; corrections beyond them are made up by
    /// [`fixed_args`].
    pub fn push_call(
        &mut self,
        tool: &str,
        args: &serde_json::Value,
        fixes: &[serde_json::Value],
        result: &serde_json::Value,
        latency_ms: Option<u64>,
    ) -> u32 {
        let mut corrections = Vec::with_capacity(MAX_FIXES as usize);
        let mut last = args.clone();
        for n in 1..=MAX_FIXES {
            last = match fixes.get(n as usize - 1) {
                Some(f) => f.clone(),
                None => fixed_args(&last, n),
            };
            corrections.push(canonical_json(&last));
        }
        let result_json = canonical_json(result);
        let mut result_literal = String::new();
        let text = match result {
            serde_json::Value::String(s) => s,
            _ => &result_json,
        };
        crate::envelope::render::push_json_str(&mut result_literal, text);
        let call = self.push_spec(tool, canonical_json(args), corrections, latency_ms);
        let spec = &mut self.calls[call as usize];
        spec.named_fixes = (fixes.len() as u32).min(MAX_FIXES);
        spec.result_literal = (result_literal != result_json).then_some(result_literal);
        spec.result_json = result_json;
        call
    }

    /// Adds a call a script replays: its arguments as recorded (canonical JSON), never
    /// corrected, and a `null` result until [`CallSpec::set_result_text`] sets the recorded one.
    pub fn push_recorded_call(&mut self, tool: &str, canon: &str) -> u32 {
        let call = self.push_spec(tool, canon.to_owned(), Vec::new(), None);
        self.calls[call as usize].result_literal = Some(r#""null""#.to_owned());
        call
    }

    /// Adds the call the model makes when it follows rule `rule`'s instruction to call `tool`
    /// (a tool of the task): no part of the default goal.
    pub fn push_injected(&mut self, rule: u16, tool: &str) {
        let called = self.called.clone();
        let args = serde_json::json!({"as_instructed": true});
        let call = self.push_call(tool, &args, &[], &serde_json::json!({"ok": true}), None);
        self.called = called;
        self.injected.push((rule, call));
    }

    /// The call that follows rule `rule`'s injected instruction.
    pub fn injected_call(&self, rule: u16) -> Option<u32> {
        self.injected.iter().find(|&&(r, _)| r == rule).map(|&(_, c)| c)
    }

    fn push_spec(&mut self, tool: &str, canon: String, corrections: Vec<String>, latency_ms: Option<u64>) -> u32 {
        let tool_idx = match self.tools.iter().position(|t| t == tool) {
            Some(i) => i,
            None => {
                self.tools.push(tool.to_owned());
                self.tools.len() - 1
            }
        } as u16;
        if !self.called.contains(&tool_idx) {
            self.called.push(tool_idx);
        }
        let next_id = self.calls.len() as u32;
        let args_id = *self.interned.entry((tool_idx, canon.clone())).or_insert(next_id);
        self.calls.push(CallSpec {
            tool: tool_idx,
            args: canon,
            corrections,
            named_fixes: 0,
            args_id,
            result_json: "null".to_owned(),
            result_literal: None,
            latency_ms,
        });
        next_id
    }
}

/// A made-up correction: the value of the first argument (in key order, depth first) changes
/// and keeps its JSON type — a string gains ` (corrected N)`, a number grows by one, a boolean
/// flips — so the call stays valid under the tool's schema. Arguments with nothing to change
/// (no arguments at all) stay as they are.
pub fn fixed_args(args: &serde_json::Value, n: u32) -> serde_json::Value {
    use serde_json::Value;
    fn change(v: &mut Value, n: u32) -> bool {
        match v {
            Value::String(s) => {
                let base = s.split(" (corrected").next().unwrap_or_default().to_owned();
                *s = format!("{base} (corrected {n})");
                true
            }
            Value::Number(x) => {
                *v = match (x.as_i64(), x.as_f64()) {
                    (Some(i), _) => Value::from(i.saturating_add(1)),
                    (None, Some(f)) => Value::from(f + 1.0),
                    _ => return false,
                };
                true
            }
            Value::Bool(b) => {
                *b = !*b;
                true
            }
            Value::Array(items) => items.iter_mut().any(|i| change(i, n)),
            Value::Object(m) => m.values_mut().any(|i| change(i, n)),
            Value::Null => false,
        }
    }
    let mut out = args.clone();
    change(&mut out, n);
    out
}

pub use crate::exchange::canonical_json;

#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// Model turns allowed (every strategy).
    pub max_steps: u32,
    /// Token budget (strategies with budgets).
    pub max_tokens: Option<u64>,
    /// Virtual-time budget (strategies with budgets).
    pub max_virtual_ms: Option<u64>,
    pub retry: RetryPolicy,
    pub breaker: BreakerConfig,
    /// Deliveries of the same outcome for the same call that stop the run (strategies with a loop guard).
    pub loop_guard_k: u32,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_steps: 25,
            max_tokens: None,
            max_virtual_ms: None,
            retry: RetryPolicy::default(),
            breaker: BreakerConfig::default(),
            loop_guard_k: 3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_args_intern_identical_calls() {
        let mut t = Task::default();
        let a = t.push_call("search", &json!({"b": 1, "a": "x"}), &[], &json!({"ok": true}), None);
        let b = t.push_call("search", &json!({"a": "x", "b": 1}), &[], &json!("done"), None);
        let c = t.push_call("other", &json!({"a": "x", "b": 1}), &[], &json!(1), None);
        assert_eq!(t.calls[a as usize].args, r#"{"a":"x","b":1}"#);
        assert_eq!(t.calls[a as usize].args_id, t.calls[b as usize].args_id);
        assert_ne!(t.calls[a as usize].args_id, t.calls[c as usize].args_id);
        assert_eq!(t.calls[b as usize].result_json, r#""done""#);
        assert_eq!(t.calls[b as usize].result_literal(), r#""done""#);
        assert_eq!(t.calls[a as usize].result_literal(), r#""{\"ok\":true}""#);
    }

    #[test]
    fn a_recorded_call_is_sent_as_recorded_and_answers_with_its_text() {
        let mut t = Task::default();
        let a = t.push_recorded_call("search", r#"{"q":"x"}"#) as usize;
        let b = t.push_recorded_call("search", r#"{"q":"x"}"#) as usize;
        assert_eq!(t.calls[a].args_id, t.calls[b].args_id, "identical calls are interned");
        assert_eq!((t.calls[a].args_for(0), t.calls[a].args_for(5)), (r#"{"q":"x"}"#, r#"{"q":"x"}"#));
        assert_eq!((t.calls[a].result_json.as_str(), t.calls[a].result_literal()), ("null", r#""null""#));
        t.calls[a].set_result_text(r#"say "hi""#);
        assert_eq!(t.calls[a].result_json, r#""say \"hi\"""#);
        assert_eq!(t.calls[a].result_literal(), t.calls[a].result_json);
    }

    #[test]
    fn corrections_keep_types_and_follow_named_fixes() {
        let mut t = Task::default();
        let i = t.push_call(
            "s",
            &json!({"query": "weather Paris", "n": 2}),
            &[json!({"query": "Paris", "n": 2})],
            &json!(1),
            None,
        );
        let c = &t.calls[i as usize];
        assert_eq!(c.args_for(0), r#"{"n":2,"query":"weather Paris"}"#);
        assert_eq!(c.args_for(1), r#"{"n":2,"query":"Paris"}"#, "the named fix first");
        assert_eq!(c.args_for(2), r#"{"n":3,"query":"Paris"}"#, "then made-up ones, first key in order");
        assert_eq!(c.args_for(99), c.args_for(MAX_FIXES));
        assert_eq!(fixed_args(&json!({"q": "x (corrected 1)"}), 2), json!({"q": "x (corrected 2)"}));
        assert_eq!(fixed_args(&json!({"ok": true}), 1), json!({"ok": false}));
        assert_eq!(fixed_args(&json!({}), 1), json!({}));
        assert_eq!(fixed_args(&json!({"a": [1.5]}), 1), json!({"a": [2.5]}));
    }

    #[test]
    fn the_default_goal_is_every_tool_a_call_uses() {
        // A trace's header may list a tool no call uses: it is no part of the default goal.
        let mut task = Task { tools: vec!["listed_only".into()], ..Task::default() };
        task.push_call("search", &serde_json::json!({}), &[], &serde_json::json!({}), None);
        task.push_call("book", &serde_json::json!({}), &[], &serde_json::json!({}), None);
        task.push_call("search", &serde_json::json!({"q": 1}), &[], &serde_json::json!({}), None);
        assert_eq!(task.called, [1, 2]);
        assert!(task.goal_reached(|t| t != 0), "the listed-only tool never succeeds");
        assert!(!task.goal_reached(|t| t != 2));
        task.goal = vec![1];
        assert!(task.goal_reached(|t| t == 1));
    }
}
