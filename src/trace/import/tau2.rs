//! tau2-bench results (`tau2 run … --save-to X`): `Results.model_dump_json()`, one object
//! `{timestamp, info, tasks, simulations: [SimulationRun…]}` (the "json" layout), or one bare
//! `SimulationRun` (a `simulations/<id>.json` of the "dir" layout, whose `results.json` holds
//! no simulations and is refused with a pointer to them; third-party harnesses write these too).
//! One conversation per simulation, `{stem}#{k}` 1-based in file order (the stem alone for one).
//! A simulation's `messages` are flat: `assistant` (the agent), `user` (the user simulator, an
//! LLM too), `tool` (`{id, content, requestor, error}`), rarely `system`.
//!
//! - **Model calls.** Each agent `assistant` message is one LLM call, its usage from
//!   `usage.prompt_tokens` / `usage.completion_tokens`; the orchestrator's canned greeting (the
//!   first message, an `assistant` with no `usage`, no `raw_data` and no tool calls, "Hi! How
//!   can I help you today?") is no call and is left out. The user simulator's messages are
//!   user turns (`Item::User`), not model calls of this conversation, although tau2 bills them
//!   as LLM calls (`user_cost`).
//! - **Tool calls.** The agent's: `tool_calls` of `assistant` messages, `{id, name, arguments
//!   (an object), requestor}`. The user simulator can call tools too (telecom; `requestor:
//!   "user"` in a `user` message): those calls and their results (`requestor: "user"`, or the id
//!   of such a call) are the simulated user's actions on its own device, not the agent's, and are
//!   left out of calls and failures. Results pair with calls by `id`; `MultiToolMessage`
//!   (`{role: "tool", tool_messages: […]}`) is read as its parts.
//! - **Failures.** A tool message's `error` (true when the environment's tool raised: content
//!   `Error: …`) is the structural flag, both ways; without one the text rules decide.
//! - **Endings.** `termination_reason`: `agent_stop` / `user_stop` answer, `max_steps`,
//!   `timeout` and `context_window_exceeded` cut off, `too_many_errors` gave up,
//!   `agent_error`, `user_error`, `infrastructure_error` and `unexpected_error` are errors; an
//!   unknown reason is kept, the outcome inferred from the last item. Success is tau2's own
//!   `is_successful`: `reward_info.reward` within 1e-6 of 1 (rewards are 0..1; anything less is
//!   a failed task); none without `reward_info` and for `infrastructure_error`, which tau2
//!   leaves out of its metrics.
//! - **Full duplex** (voice, `mode: "full_duplex"`): `messages` is null (or empty) and the run
//!   is a stream of `ticks`. Only the agent's `agent_tool_calls` (one model call per tick that has some) and
//!   `agent_tool_results` are read, and a gap says so: the realtime agent's model calls are not
//!   recorded one by one.

use serde_json::Value;

use super::ImportError;
use super::conversation::{CallItem, Conversation, Ending, Item, parse_args, with_usage};
use crate::trace::{Args, FinalOutcome};

/// Whether `v` is a tau2 results object or a bare simulation.
pub fn fits(v: &Value) -> Result<(), ImportError> {
    let Some(o) = v.as_object() else {
        return Err(ImportError::at("", "a tau2-bench results object `{timestamp, info, tasks, simulations}`"));
    };
    if o.contains_key("task_id") && !o.contains_key("simulations") {
        return simulation_fits(v, "");
    }
    let info = o.get("info").filter(|i| i.is_object());
    let Some(info) = info else {
        return Err(ImportError::at("/info", "tau2's run `info` object (`git_commit`, `agent_info`, `user_info`, …)"));
    };
    for key in ["agent_info", "user_info"] {
        if !info.get(key).is_some_and(Value::is_object) {
            return Err(ImportError::at(format!("/info/{key}"), format!("tau2's `info.{key}` object")));
        }
    }
    let Some(sims) = o.get("simulations").and_then(Value::as_array) else {
        let expected = "tau2's `simulations` list (a `results.json` of tau2's dir layout has none: \
                        read the files in the `simulations/` folder beside it)";
        return Err(ImportError::at("/simulations", expected));
    };
    match sims.first() {
        Some(s) => simulation_fits(s, "/simulations/0"),
        None => Ok(()),
    }
}

/// Whether `s` (at `at`) is a `SimulationRun`.
fn simulation_fits(s: &Value, at: &str) -> Result<(), ImportError> {
    if !s.get("termination_reason").is_some_and(Value::is_string) {
        return Err(ImportError::at(format!("{at}/termination_reason"), "a tau2 simulation's `termination_reason`"));
    }
    if s.get("messages").is_none() && s.get("ticks").is_none() {
        return Err(ImportError::at(
            format!("{at}/messages"),
            "a tau2 simulation's `messages` (or full-duplex `ticks`)",
        ));
    }
    Ok(())
}

/// The conversations of a results file, one per simulation, or of one bare simulation.
pub fn conversations(v: &Value, id: &str) -> Result<Vec<Conversation>, ImportError> {
    fits(v)?;
    let Some(sims) = v.get("simulations").and_then(Value::as_array) else {
        return Ok(vec![simulation(v, id.to_owned(), None)]);
    };
    let model = v.pointer("/info/agent_info/llm").and_then(Value::as_str);
    let mut out = Vec::with_capacity(sims.len());
    for (k, s) in sims.iter().enumerate() {
        if !s.is_object() {
            return Err(ImportError::at(format!("/simulations/{k}"), "a tau2 simulation object"));
        }
        let cid = if sims.len() == 1 { id.to_owned() } else { format!("{id}#{}", k + 1) };
        out.push(simulation(s, cid, model));
    }
    Ok(out)
}

/// One simulation's conversation.
fn simulation(s: &Value, id: String, model: Option<&str>) -> Conversation {
    let mut conv = Conversation::new(id, "tau2");
    conv.model = model.map(str::to_owned);
    let ticks = s.get("ticks").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    match s.get("messages").and_then(Value::as_array) {
        Some(messages) if !messages.is_empty() || ticks.is_empty() => read_messages(messages, &mut conv),
        _ => read_ticks(ticks, &mut conv),
    }
    conv.ending = ending(s, &conv.items);
    conv
}

/// The non-empty id of a call or result.
fn id_of(v: &Value) -> Option<String> {
    v.get("id").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
}

fn call_of(c: &Value) -> CallItem {
    let args = match c.get("arguments") {
        Some(Value::String(s)) => parse_args(s),
        Some(a) => Args::new(a),
        None => Args::new(&Value::Object(serde_json::Map::new())),
    };
    CallItem { id: id_of(c), name: c.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(), args }
}

/// A tool message's result item: `error` the structural flag.
fn result_of(m: &Value) -> Item {
    let flag = match m.get("error").and_then(Value::as_bool) {
        Some(true) => Some((true, "tool message `error: true`")),
        Some(false) => Some((false, "tool message `error: false`")),
        None => None,
    };
    let content = match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    Item::Result { id: id_of(m), name: None, content, flag }
}

/// A message's text, unless it is audio (base64 bytes).
fn text(m: &Value) -> Option<String> {
    if m.get("is_audio").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    m.get("content").and_then(Value::as_str).map(str::to_owned)
}

fn calls_of(m: &Value) -> &[Value] {
    m.get("tool_calls").and_then(Value::as_array).map_or(&[][..], Vec::as_slice)
}

/// The half-duplex message list.
fn read_messages(messages: &[Value], conv: &mut Conversation) {
    // The ids of the user simulator's tool calls, whose results are left out with them.
    let mut user_calls: Vec<String> = Vec::new();
    let mut first = true;
    for (n, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str);
        match role {
            Some("assistant") => {
                let calls = calls_of(m);
                let canned = first && calls.is_empty() && is_null(m, "usage") && is_null(m, "raw_data");
                first = false;
                if canned {
                    continue;
                }
                let item = Item::model(text(m), calls.iter().map(call_of).collect());
                conv.items.push(with_usage(item, m.get("usage"), "prompt_tokens", "completion_tokens"));
            }
            Some("user") => {
                first = false;
                user_calls.extend(calls_of(m).iter().filter_map(id_of));
                if let Some(t) = text(m).filter(|t| !t.trim().is_empty()) {
                    conv.items.push(Item::User(t));
                }
            }
            Some("tool") => {
                let parts = match m.get("tool_messages").and_then(Value::as_array) {
                    Some(parts) => parts.as_slice(),
                    None => std::slice::from_ref(m),
                };
                for part in parts {
                    let by_user = part.get("requestor").and_then(Value::as_str) == Some("user")
                        || id_of(part).is_some_and(|id| user_calls.contains(&id));
                    if !by_user {
                        conv.items.push(result_of(part));
                    }
                }
            }
            Some("system") => {}
            other => conv.gaps.push(format!(
                "message {n}: role {}, not one tau2 writes (assistant, user, tool, system); not read",
                other.map_or_else(|| "missing".to_owned(), |r| format!("{r:?}"))
            )),
        }
    }
}

fn is_null(m: &Value, key: &str) -> bool {
    m.get(key).is_none_or(Value::is_null)
}

/// A full-duplex run's ticks: the agent's tool calls and results only.
fn read_ticks(ticks: &[Value], conv: &mut Conversation) {
    if ticks.is_empty() {
        return;
    }
    for t in ticks {
        let calls = t.get("agent_tool_calls").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        if !calls.is_empty() {
            conv.items.push(Item::model(None, calls.iter().map(call_of).collect()));
        }
        for r in t.get("agent_tool_results").and_then(Value::as_array).into_iter().flatten() {
            conv.items.push(result_of(r));
        }
    }
    conv.gaps.push(format!(
        "full-duplex simulation: its {} ticks record no model call one by one; only the agent's tool calls \
         (one model call per tick that has some) and results were read",
        ticks.len()
    ));
}

/// The outcome a termination reason names; `None` for one this reader does not know.
fn outcome(reason: &str) -> Option<FinalOutcome> {
    Some(match reason {
        "agent_stop" | "user_stop" => FinalOutcome::Answer,
        "max_steps" | "timeout" | "context_window_exceeded" => FinalOutcome::CutOff,
        "too_many_errors" => FinalOutcome::GaveUp,
        "agent_error" | "user_error" | "infrastructure_error" | "unexpected_error" => FinalOutcome::Error,
        _ => return None,
    })
}

/// How the simulation ended: its `termination_reason`, and its reward as the verdict.
fn ending(s: &Value, items: &[Item]) -> Option<Ending> {
    let reason = s.get("termination_reason").and_then(Value::as_str)?;
    let outcome = outcome(reason).unwrap_or(match items.last() {
        Some(Item::Model { calls, status: 200, .. }) if calls.is_empty() => FinalOutcome::Answer,
        _ => FinalOutcome::CutOff,
    });
    let reward = s.pointer("/reward_info/reward").and_then(Value::as_f64);
    let success = reward.filter(|_| reason != "infrastructure_error").map(|r| (1.0 - 1e-6..=1.0 + 1e-6).contains(&r));
    Some(Ending { success, ..Ending::new(outcome, reason) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sim(messages: Value, reason: &str, reward: Value) -> Value {
        json!({"id": "s", "task_id": "0", "termination_reason": reason,
               "reward_info": {"reward": reward}, "messages": messages})
    }

    fn results(sims: Vec<Value>) -> Value {
        json!({"timestamp": "t", "info": {"git_commit": "abc", "agent_info": {"llm": "gpt-4.1"},
               "user_info": {"llm": "gpt-4.1"}}, "tasks": [], "simulations": sims})
    }

    /// (model calls, agent tool calls, results with their flags)
    fn counts(c: &Conversation) -> (usize, usize, Vec<Option<(bool, &'static str)>>) {
        let models = c.items.iter().filter(|i| matches!(i, Item::Model { .. })).count();
        let calls = c.items.iter().map(|i| if let Item::Model { calls, .. } = i { calls.len() } else { 0 }).sum();
        let flags = c.items.iter().filter_map(|i| if let Item::Result { flag, .. } = i { Some(*flag) } else { None });
        (models, calls, flags.collect())
    }

    #[test]
    fn detection() {
        assert!(fits(&results(vec![sim(json!([]), "user_stop", json!(1.0))])).is_ok());
        assert!(fits(&results(Vec::new())).is_ok(), "an empty run is still a results file");
        assert!(fits(&sim(json!([]), "max_steps", json!(0.0))).is_ok(), "a bare SimulationRun");
        // tau-bench (v1) results: a list of `{task_id, reward, info, traj, trial}`.
        let v1 = json!([{"task_id": 0, "reward": 1.0, "info": {}, "traj": [{"role": "system", "content": "x"}], "trial": 0}]);
        assert_eq!(fits(&v1).unwrap_err().at, "");
        assert_eq!(fits(&v1[0]).unwrap_err().at, "/termination_reason");
        // The dir layout's results.json: no simulations in it.
        let mut dir = results(Vec::new());
        dir.as_object_mut().unwrap().remove("simulations");
        let e = fits(&dir).unwrap_err();
        assert_eq!(e.at, "/simulations");
        assert!(e.expected.contains("simulations/"), "{}", e.expected);
        assert_eq!(fits(&json!({"messages": []})).unwrap_err().at, "/info");
        let e = fits(&results(vec![json!({"id": "s", "messages": []})])).unwrap_err();
        assert_eq!(e.at, "/simulations/0/termination_reason");
    }

    #[test]
    fn greeting_user_simulator_tools_and_error_flags() {
        let messages = json!([
            {"role": "assistant", "content": "Hi! How can I help you today?", "tool_calls": null, "cost": 0.0, "usage": null, "raw_data": null},
            {"role": "user", "content": null, "tool_calls": [{"id": "u1", "name": "toggle_airplane_mode", "arguments": {}, "requestor": "user"}],
             "usage": {"prompt_tokens": 10, "completion_tokens": 2}},
            {"id": "u1", "role": "tool", "content": "Error: no signal", "requestor": "user", "error": true},
            {"role": "user", "content": "My phone has no data", "usage": {"prompt_tokens": 12, "completion_tokens": 5}},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "name": "get_line", "arguments": {"phone": "555"}, "requestor": "assistant"},
                {"id": "c2", "name": "get_bill", "arguments": "{\"id\": 3}", "requestor": "assistant"}],
             "usage": {"prompt_tokens": 300, "completion_tokens": 20}},
            {"role": "tool", "tool_messages": [
                {"id": "c1", "role": "tool", "content": "{}", "requestor": "assistant", "error": false},
                {"id": "c2", "role": "tool", "content": "Error: bill 3 not found", "requestor": "assistant", "error": true}]},
            {"role": "assistant", "content": "Done.", "usage": {"prompt_tokens": 400, "completion_tokens": 3}},
            {"role": "user", "content": "Thanks ###STOP###"}
        ]);
        let v = results(vec![sim(messages, "user_stop", json!(0.0))]);
        let convs = conversations(&v, "run").unwrap();
        let c = &convs[0];
        assert_eq!(c.id, "run", "one simulation keeps the stem");
        assert_eq!(c.model.as_deref(), Some("gpt-4.1"));
        // By hand: 3 assistant messages less the greeting; the user's toggle and its result left out.
        assert_eq!(
            counts(c),
            (2, 2, vec![Some((false, "tool message `error: false`")), Some((true, "tool message `error: true`"))])
        );
        assert!(matches!(&c.items[1], Item::Model { tokens_in: 300, tokens_out: 20, calls, .. } if calls.len() == 2));
        assert!(c.gaps.is_empty());
        let e = c.ending.as_ref().unwrap();
        assert_eq!((e.outcome, e.reason.as_deref(), e.success), (FinalOutcome::Answer, Some("user_stop"), Some(false)));
    }

    #[test]
    fn endings_ids_and_gaps() {
        let answer =
            json!([{"role": "assistant", "content": "ok", "usage": {"prompt_tokens": 1, "completion_tokens": 1}}]);
        let open = json!([{"role": "assistant", "tool_calls": [{"id": "a", "name": "f", "arguments": {}}]}]);
        let sims = vec![
            sim(answer.clone(), "agent_stop", json!(1.0)),
            sim(open.clone(), "max_steps", json!(0.0)),
            sim(open.clone(), "too_many_errors", json!(0.0)),
            sim(json!([]), "infrastructure_error", json!(0.0)),
            sim(answer.clone(), "something_new", json!(0.9999999)),
            sim(open, "timeout", Value::Null),
            sim(json!([{"role": "narrator", "content": "x"}]), "user_stop", json!(1.0)),
        ];
        let convs = conversations(&results(sims), "r").unwrap();
        let got: Vec<(String, FinalOutcome, Option<String>, Option<bool>)> = convs
            .iter()
            .map(|c| {
                let e = c.ending.clone().unwrap();
                (c.id.clone(), e.outcome, e.reason, e.success)
            })
            .collect();
        let want = |k: usize, o, r: &str, s| (format!("r#{k}"), o, Some(r.to_owned()), s);
        assert_eq!(
            got,
            [
                want(1, FinalOutcome::Answer, "agent_stop", Some(true)),
                want(2, FinalOutcome::CutOff, "max_steps", Some(false)),
                want(3, FinalOutcome::GaveUp, "too_many_errors", Some(false)),
                want(4, FinalOutcome::Error, "infrastructure_error", None),
                want(5, FinalOutcome::Answer, "something_new", Some(true)),
                want(6, FinalOutcome::CutOff, "timeout", None),
                want(7, FinalOutcome::Answer, "user_stop", Some(true)),
            ]
        );
        assert!(convs[6].gaps[0].contains("role \"narrator\""), "{:?}", convs[6].gaps);
        assert!(convs[..6].iter().all(|c| c.gaps.is_empty()));
    }

    #[test]
    fn full_duplex_ticks() {
        let s = json!({"id": "v", "task_id": "40", "termination_reason": "user_stop", "mode": "full_duplex", "ticks": [
            {"tick_id": 0, "agent_chunk": {"role": "assistant"}, "user_chunk": {"role": "user"}},
            {"tick_id": 1, "agent_tool_calls": [{"id": "t1", "name": "lookup", "arguments": {}, "requestor": "assistant"}],
             "agent_tool_results": [{"id": "t1", "role": "tool", "content": "Error: nope", "requestor": "assistant", "error": true}],
             "user_tool_calls": [{"id": "t2", "name": "reboot", "arguments": {}, "requestor": "user"}]}]});
        let convs = conversations(&s, "v").unwrap();
        assert_eq!(counts(&convs[0]), (1, 1, vec![Some((true, "tool message `error: true`"))]));
        assert!(convs[0].gaps[0].contains("full-duplex"), "{:?}", convs[0].gaps);
    }
}
