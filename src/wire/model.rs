//! The mock provider's model, one per conversation: it follows the scenario's task and profile
//! and decides each turn by reading the tool results the agent actually sent — an `is_error`
//! flag, Gemini's error channel, five fields, an `ERROR:` prefix, a stack trace, "more may be
//! available" — with the engine's own reading, perception and decision rules.

use crate::provider::{Choice, ToolChoice};
use crate::wire::checks::Check;
use std::collections::BTreeMap;

use serde_json::Value;

use super::conversation::{Slot, Turn};
use super::schema::{args_key, canonical_args, correct};
use super::world::World;
use crate::engine::model::{Action, CallHistory, Perceived, TaintTaken, act, perceive_failure, take_tainted};
use crate::engine::probabilities::{Explaining, Prob, Probabilities};
use crate::engine::rng::fnv1a64;
use crate::envelope::read::read_result;
use crate::fault::ErrorClass;
use crate::provider::Format;
use crate::trace::import::conversation::{FailureRules, Item, judge};
use crate::trace::{Args, Stop, TraceEvent};

/// What a request says besides its conversation.
#[derive(Clone, Debug, Default)]
pub struct Ask {
    /// The tools the request declares, with their schemas (`None`: it declares none).
    pub tools: Option<BTreeMap<String, Value>>,
    /// What the request lets the model do with them (`tool_choice` and its kin).
    pub choice: Choice,
    pub tokens_in: u64,
}

impl Ask {
    /// Whether the model may call `tool` in its answer to this request: the request declares
    /// it and its tool choice allows it.
    fn may_call(&self, tool: &str) -> bool {
        self.tools.as_ref().is_some_and(|t| t.contains_key(tool)) && self.choice.allows(tool)
    }
}

/// Decides conversation `c`'s next turn from the conversation the agent sent.
pub fn next_turn(world: &mut World, c: usize, items: &[Item], ask: &Ask) -> Turn {
    let digest = fnv1a64(format!("{items:?}").as_bytes());
    if let Some((d, turn)) = &world.conversation(c).last
        && *d == digest
    {
        let turn = turn.clone();
        // Asked again after a broken stream: this time the answer is recorded.
        if let Some((held, ended)) = world.conversation(c).undelivered.take() {
            world.model_calls += 1;
            world.conversation(c).ended = ended;
            if world.record_trace {
                world.trace.events.extend(held);
            }
        }
        return turn;
    }
    if let Some((held, _)) = world.conversation(c).undelivered.take() {
        // The agent went on from a broken answer: the calls of it it sends results for were
        // acted on, and are recorded.
        let answered: Vec<&str> = items
            .iter()
            .filter_map(|i| match i {
                Item::Result { id: Some(id), .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        let acted: Vec<TraceEvent> = held
            .into_iter()
            .filter(|e| matches!(e, TraceEvent::ToolCall { call_id, .. } if answered.contains(&call_id.as_str())))
            .collect();
        if !acted.is_empty() {
            world.note(format!("the agent acted on {} call(s) of an answer whose stream broke", acted.len()));
            if world.record_trace {
                world.trace.events.extend(acted);
            }
        }
    }
    let turn = decide(world, c, items, ask);
    let turn = keep_the_tool_choice(world, c, ask, turn);
    let (stop, tokens_out, text) = match &turn {
        Turn::Calls(calls) => {
            let out: u64 = calls.iter().map(|(_, _, a)| a.to_string().len() as u64 / 4 + 8).sum();
            (Stop::ToolCalls, out, None)
        }
        Turn::Final { text } => (Stop::End, text.len() as u64 / 4 + 8, Some(text.clone())),
    };
    let turns = world.conversation(c).turns;
    world.record(TraceEvent::ModelCall {
        turn: turns,
        status: 200,
        tokens_in: ask.tokens_in,
        tokens_out,
        latency_ms: None,
        t_ms: None,
        stop,
        text,
    });
    if let Turn::Calls(calls) = &turn {
        for (id, tool, args) in calls {
            world.record(TraceEvent::ToolCall {
                turn: turns,
                call_id: id.clone(),
                name: tool.clone(),
                args: Args::new(args),
            });
        }
    }
    world.conversation(c).last = Some((digest, turn.clone()));
    turn
}

/// Takes back conversation `c`'s answer, recorded since trace event `mark` (a place in the
/// whole trace, [`World::trace_len`]), and the ending it
/// made: its stream broke on the way, so the agent did not get it whole. The model call is
/// recorded failed (502, its `tokens_in` billed; counted now unless the answer `counted` it);
/// the answer is recorded, and its ending made, when the agent asks again.
pub fn undelivered(world: &mut World, c: usize, mark: usize, tokens_in: u64, counted: bool) {
    if !counted {
        world.model_calls += 1;
    }
    let turn = world.conversation(c).turns;
    // The mark as a place in memory; the answer is never on disk (events go out past thousands
    // recorded, not within one answer), but if it were, nothing is held back.
    let held = match mark.checked_sub(world.spilled()).filter(|_| world.record_trace) {
        Some(mark) => {
            let events = &mut world.trace.events;
            let at = events[mark.min(events.len())..]
                .iter()
                .position(|e| matches!(e, TraceEvent::ModelCall { .. }))
                .map_or(events.len(), |p| mark + p);
            events.split_off(at)
        }
        None => Vec::new(),
    };
    world.record(TraceEvent::ModelCall {
        turn,
        status: crate::fault::BROKEN_STREAM_STATUS,
        tokens_in,
        tokens_out: 0,
        latency_ms: None,
        t_ms: None,
        stop: Stop::Error,
        text: None,
    });
    let conv = world.conversation(c);
    let ended = conv.ended.take();
    conv.undelivered = Some((held, ended));
}

/// The mock model reads every result of its last turn and takes the next one.
fn decide(world: &mut World, c: usize, items: &[Item], ask: &Ask) -> Turn {
    world.model_calls += 1;
    world.conversation(c).turns += 1;
    for v in world.last_failure.values_mut() {
        v.1 = true;
    }
    let format = world.conversation(c).format;
    let profile = world.scenario.profile.clone();
    let turn = u64::from(world.conversation(c).turns);
    // The results that answer the model's last turn (those after its last message: a history
    // without call ids, as Gemini's, repeats earlier ones): (id, tool name, content, mark).
    let last_turn = items.iter().rposition(|i| matches!(i, Item::Model { .. })).map_or(0, |p| p + 1);
    let results: Vec<(Option<&String>, Option<&String>, &String, bool)> = items[last_turn..]
        .iter()
        .filter_map(|i| match i {
            Item::Result { id, name, content, flag } => {
                Some((id.as_ref(), name.as_ref(), content, flag.is_some_and(|f| f.0)))
            }
            _ => None,
        })
        .collect();
    let mut used = vec![false; results.len()];
    let (mut give_up, mut reissue) = (false, false);
    for i in 0..world.conversation(c).slots.len() {
        let slot = world.conversation(c).slots[i].clone();
        if !(slot.active && slot.sent) {
            continue;
        }
        let tool = world.scenario.task.tools[usize::from(world.scenario.task.calls[slot.call as usize].tool)].clone();
        // Its result: by id, else the next unused one of this tool, else the next unused one.
        let pos = results
            .iter()
            .enumerate()
            .rposition(|(k, r)| !used[k] && r.0 == Some(&slot.id))
            .or_else(|| results.iter().enumerate().position(|(k, r)| !used[k] && r.0.is_none() && r.1 == Some(&tool)))
            .or_else(|| results.iter().enumerate().position(|(k, r)| !used[k] && r.0.is_none()));
        let Some(pos) = pos else {
            world.finding(Check::RoundTrip, format!("call {} ({tool}) got no result in the next turn", slot.id));
            world.conversation(c).slots[i].active = false;
            continue;
        };
        used[pos] = true;
        let (_, _, content, mark) = results[pos];
        let truth = truth(world, &tool, &slot.args, content, format, mark);
        let reading = read_result(format, content, mark);
        if reading.stack_trace {
            world.finding(Check::NoRawText, format!("the result of {} shows the model a raw exception", slot.id));
        }
        let failed = truth.is_some_and(ErrorClass::is_failure);
        if format.has_error_flag() && failed && !mark {
            let (name, flag) = (format.name(), format.provider().error_mark());
            world.finding(Check::IsError, format!("failed {name} result {} has no {flag}", slot.id));
        }
        world.record(TraceEvent::ToolResult {
            call_id: slot.id.clone(),
            ok: !failed,
            status: None,
            content: content.clone(),
            error_class: truth.map(|c| c.name().to_owned()),
            latency_ms: None,
            attempts: None,
            evidence: Some("class from the mock tool's own outcome".into()),
            cancelled: false,
            attempt_ms: Vec::new(),
        });
        let draw = (i as u64 * (1 << 24) + turn) * 4;
        let conv = world.conversations.get_mut(&c).expect("a conversation the world holds");
        // The profile's probabilities, each comparison kept for the trace's decision event.
        let mut judge = Explaining::new(&profile);
        let perceived = match truth {
            None => Perceived::Ok,
            Some(ErrorClass::Partial) if reading.more_available => Perceived::Partial,
            Some(ErrorClass::Partial) => Perceived::Ok,
            Some(class) => {
                perceive_failure(&mut judge, reading.signal, class, conv.draws.unit(draw), conv.draws.unit(draw + 1))
            }
        };
        let u = if perceived == Perceived::Ok { 0.0 } else { conv.draws.unit(draw + 2) };
        let fix_draw = conv.draws.unit(draw + 3);
        let s = &mut conv.slots[i];
        s.sent = false;
        let mut action = act(&profile, &mut judge, perceived, &s.hist, u);
        // A result that succeeded with changed content: the simulated model's draw (the
        // slot's fourth) decides whether it notices a wrong value or follows an instruction.
        let spec_tool = world.scenario.task.calls[s.call as usize].tool;
        let taint = world.tainted.get(&(usize::from(spec_tool), args_key(&canonical_args(&s.args)))).copied();
        let mut follow = None;
        if let (Action::Accept, Some(rule)) = (action, taint) {
            let fault = &world.scenario.faults.rules[usize::from(rule)].fault;
            match take_tainted(&profile, &mut judge, fault, &s.hist, fix_draw) {
                TaintTaken::Noticed(a) => action = a,
                TaintTaken::Follows => follow = world.scenario.task.injected_call(rule),
                TaintTaken::WrongAccepted | TaintTaken::Accepted => {}
            }
        }
        let s = &mut world.conversations.get_mut(&c).expect("a conversation the world holds").slots[i];
        match action {
            Action::Accept => s.active = false,
            Action::Repeat => {
                if matches!(perceived, Perceived::Transient | Perceived::Terminal | Perceived::Ok) {
                    s.hist.model_retries += 1;
                }
                reissue = true;
            }
            Action::FixArgs => {
                s.hist.fix_attempts += 1;
                s.variant += 1;
                let spec = &world.scenario.task.calls[s.call as usize];
                let schema = ask.tools.as_ref().and_then(|t| t.get(&tool));
                let old = s.args.clone();
                s.args = if s.variant <= spec.named_fixes {
                    serde_json::from_str(spec.args_for(s.variant)).unwrap_or(Value::Null)
                } else {
                    correct(&old, schema, s.variant)
                };
                // A correction the model did not get right fails like the original.
                let t = spec.tool;
                if truth == Some(ErrorClass::BadArgs) && !judge.below(Prob::FixArgs, fix_draw) {
                    let old_key = (t, args_key(&canonical_args(&old)));
                    if let Some(&rule) = world.bad_args.get(&old_key) {
                        world.bad_args.insert((t, args_key(&canonical_args(&s.args))), rule);
                    }
                }
                reissue = true;
            }
            Action::GiveUp => give_up = true,
        }
        if let Some(call) = follow
            && world.conversation(c).slots.len() < crate::engine::task::MAX_PARALLEL_CALLS
        {
            let args = serde_json::from_str(&world.scenario.task.calls[call as usize].args).unwrap_or(Value::Null);
            let slot = Slot {
                call,
                variant: 0,
                hist: CallHistory::default(),
                args,
                id: String::new(),
                active: true,
                sent: false,
            };
            world.conversation(c).slots.push(slot);
            reissue = true;
        }
        if perceived != Perceived::Ok
            && let Some(class) = truth
        {
            world.record(TraceEvent::Decision {
                call_id: slot.id.clone(),
                signal: reading.signal.name().to_owned(),
                truth: class.name().to_owned(),
                perceived: perceived.name().to_owned(),
                action: action.name().to_owned(),
                draws: judge.take_draws(),
            });
        }
    }
    let conv = world.conversation(c).clone();
    if give_up {
        // The simulated model's draw on the same run: a give-up that claims success says what
        // an answer says.
        let claimed = world.conversation(c).draws.tagged_unit(crate::engine::run::CLAIM_TAG) < profile.p_claim_success;
        world.conversation(c).claimed = claimed;
        let text =
            if claimed { world.scenario.task.final_text.clone() } else { crate::engine::run::GIVE_UP_TEXT.to_owned() };
        return end(world, c, "gave_up", text);
    }
    if conv.turns > world.scenario.policy.max_steps {
        return end(world, c, "step_cap", "Stopping: the step cap is reached.".to_owned());
    }
    if !reissue && !conv.slots.iter().any(|s| s.active) {
        if conv.next_step == world.scenario.task.steps.len() {
            let text = world.scenario.task.final_text.clone();
            return end(world, c, "answer", text);
        }
        let step = world.scenario.task.steps[conv.next_step].clone();
        let slots = step
            .iter()
            .map(|&call| Slot {
                call,
                variant: 0,
                hist: CallHistory::default(),
                args: serde_json::from_str(&world.scenario.task.calls[call as usize].args).unwrap_or(Value::Null),
                id: String::new(),
                active: true,
                sent: false,
            })
            .collect();
        let conv = world.conversation(c);
        conv.slots = slots;
        conv.next_step += 1;
    }
    send(world, c, ask)
}

/// The class a result really had: the mock tool's own outcome for those arguments; when the
/// agent's call and the model's differ, the result judged by the importers' rules, else the
/// tool's last real outcome (both noted).
fn truth(world: &mut World, tool: &str, args: &Value, content: &str, format: Format, mark: bool) -> Option<ErrorClass> {
    if let Some(class) = world.outcomes.get(&(tool.to_owned(), args_key(&canonical_args(args)))) {
        return *class;
    }
    let flag = mark.then_some((true, format.provider().error_mark()));
    let judged = judge(content, flag, &FailureRules::default());
    let class = judged.class.and_then(ErrorClass::parse).filter(|_| !judged.ok || judged.class == Some("partial"));
    let (class, why) = match (class, world.last_outcome.get(tool)) {
        (Some(c), _) => (Some(c), format!("judged by its text ({})", judged.evidence)),
        (None, Some(last)) => (*last, "taken from the tool's last real outcome".to_owned()),
        (None, None) => (None, "no call of the tool reached the mock; read as a success".to_owned()),
    };
    let args = crate::escape::printable(&crate::trace::inspect::one_line(&args.to_string(), 200)).into_owned();
    world.note(format!("the result for {tool} {args} matched no call the mock tool saw: {why}"));
    class
}

/// Sends the calls of the current step that need sending (one, when the agent asked for one
/// call per turn), or ends when the agent did not declare a tool the task needs.
fn send(world: &mut World, c: usize, ask: &Ask) -> Turn {
    let format = world.conversation(c).format;
    let mut calls = Vec::new();
    for i in 0..world.conversation(c).slots.len() {
        let s = &world.conversations[&c].slots[i];
        if !s.active || (ask.choice.one_call_per_turn && !calls.is_empty()) {
            continue;
        }
        let tool = world.scenario.task.tools[usize::from(world.scenario.task.calls[s.call as usize].tool)].clone();
        if let Some(declared) = &ask.tools
            && !declared.contains_key(&tool)
        {
            world.finding(
                Check::RoundTrip,
                format!("the agent did not declare the tool {tool:?}, which the task needs"),
            );
            return end(world, c, "gave_up", format!("I cannot complete the task without the {tool} tool."));
        }
        if !ask.may_call(&tool) {
            // Not now (no tools declared, `none`, another tool named): the call waits for a
            // request that allows it; `keep_the_tool_choice` answers this one.
            continue;
        }
        let id = world.new_id(format.provider().call_id_prefix(), c);
        let s = &mut world.conversation(c).slots[i];
        s.id = id.clone();
        s.sent = true;
        calls.push((id, tool, s.args.clone()));
    }
    Turn::Calls(calls)
}

/// Holds the model's turn to the providers' tool-choice contract. A turn that would call a tool
/// the request does not let it call (none declared, `none`, another tool named) is text that
/// says which call waits, and the conversation goes on; a turn that must call a tool
/// (`required` / `any`, a named tool) and would not is a call: of the named tool, else of a
/// declared tool the task does not know (a framework's final-answer tool, given the answer),
/// else of the first declared tool — with arguments valid under its schema.
fn keep_the_tool_choice(world: &mut World, c: usize, ask: &Ask, turn: Turn) -> Turn {
    match turn {
        Turn::Calls(calls) if calls.is_empty() => {
            let waiting = world.conversations[&c].slots.iter().find(|s| s.active && !s.sent).map(|s| {
                world.scenario.task.tools[usize::from(world.scenario.task.calls[s.call as usize].tool)].clone()
            });
            if ask.choice.forces_a_call()
                && let Some(call) = forced_call(world, c, ask, None)
            {
                return Turn::Calls(vec![call]);
            }
            let text = match waiting {
                Some(tool) => format!("I need to call {tool} next, and this request lets me call no such tool."),
                None => "I have nothing to add.".to_owned(),
            };
            Turn::Final { text }
        }
        Turn::Final { text } if ask.choice.forces_a_call() => match forced_call(world, c, ask, Some(&text)) {
            Some(call) => Turn::Calls(vec![call]),
            None => Turn::Final { text },
        },
        other => other,
    }
}

/// The call a request that forces one gets when the model had none to make: `(id, tool, args)`.
/// `answer` is the text the model would have sent (its final answer, for a final-answer tool).
fn forced_call(world: &mut World, c: usize, ask: &Ask, answer: Option<&str>) -> Option<(String, String, Value)> {
    let declared = ask.tools.as_ref()?;
    let task = &world.scenario.task;
    let tool = match &ask.choice.choice {
        ToolChoice::Named(n) => n.clone(),
        _ => {
            let allowed: Vec<&String> = declared.keys().filter(|t| ask.choice.allows(t)).collect();
            let foreign = allowed.iter().find(|t| !task.tools.contains(t));
            (*foreign.or(allowed.first())?).clone()
        }
    };
    let schema = declared.get(&tool).cloned().unwrap_or(Value::Null);
    let args = match task.tools.iter().position(|t| *t == tool) {
        // A tool of the task: the arguments its first call uses.
        Some(t) => task
            .calls
            .iter()
            .find(|k| usize::from(k.tool) == t)
            .and_then(|k| serde_json::from_str(&k.args).ok())
            .unwrap_or_else(|| crate::wire::schema::valid_args(&schema, answer.unwrap_or_default())),
        None => crate::wire::schema::valid_args(&schema, answer.unwrap_or("Done.")),
    };
    let format = world.conversation(c).format;
    let id = world.new_id(format.provider().call_id_prefix(), c);
    world.note(format!("the request required a tool call (tool_choice); the mock model called {tool} with {args}"));
    Some((id, tool, args))
}

fn end(world: &mut World, c: usize, how: &'static str, text: String) -> Turn {
    world.conversation(c).ended = Some(how);
    Turn::Final { text }
}
