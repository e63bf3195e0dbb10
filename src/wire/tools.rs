//! The mock tools at `POST /tools/{name}`: JSON arguments in, JSON result out, with the
//! scenario's faults as real status codes, `retry-after` headers (the rate limiter's exact wait
//! included), slow answers, dropped connections and damaged bodies. `GET /tools` lists them
//! with input schemas, so a typed agent can declare them.

use crate::wire::checks::Check;
use serde_json::{Value, json};

use super::schema::{args_key, canonical_args, tool_list};
use super::world::{AttemptNo, World};
use crate::engine::limits::LoadFault;
use crate::envelope::render::{partial_text, sentence, truncated};
use crate::envelope::{ErrorKind, ToolError};
use crate::fault::{ErrorClass, Fault};
use crate::provider::Reply;

/// At most this long a mock tool delays a timeout (real time: it is a wire test).
pub const MAX_DELAY_MS: u64 = 30_000;

/// `GET /tools` (the caller sees every schema change so far).
pub fn list(world: &mut World) -> Reply {
    world.listed();
    Reply::json(200, &tool_list(&world.scenario.task, &world.revisions))
}

/// The index of a tool of the scenario.
pub fn index(world: &World, tool: &str) -> Option<usize> {
    world.scenario.task.tools.iter().position(|t| t == tool)
}

/// A call the fleet's shared limits refused at the tool's door: 429 with the bucket's wait,
/// 503 past the concurrency limit, 409 for a write that conflicted. A call sent before the
/// wait this agent was last told is a wasted retry. A write's conflict comes after the call
/// was `served` ([`invoke`]'s answer, whose success is taken back) and names the key the call
/// carried; a refusal at the door never reached the tool. The call's outcome is the refusal.
pub fn refused(
    world: &mut World,
    (tool, args): (&str, &Value),
    load: LoadFault,
    wait_ms: Option<u64>,
    served: Option<&Called>,
) -> Reply {
    let key = served.and_then(|c| c.idempotency_key.as_deref());
    if let Some(i) = index(world, tool) {
        if let Some(called) = served {
            world.unsucceeded(i, called.counted);
        }
        failed(world, (i, tool), args, load.fault(), served.is_some());
        if let Some(w) = wait_ms {
            world.load_until[i] = world.clock.now_ms().saturating_add(w);
        }
    }
    world.load_rejections += 1;
    with_key(fault_reply(world, tool, load.fault(), wait_ms, &Value::Null, key), key)
}

/// Counts a call that reached `tool` through the mock tools, and as a wasted retry one that
/// comes before the wait its shared rate limit announced to this agent (refused again by
/// construction).
pub fn arrive(world: &mut World, tool: usize) {
    world.tool_calls += 1;
    world.arrived[tool] = true;
    if world.clock.now_ms() < world.load_until[tool] {
        world.wasted_retries += 1;
    }
}

/// What a call at a mock tool came to, before it is put on a wire (HTTP or MCP): the tool's
/// result, and the fault that shapes the answer instead, if one fired.
#[derive(Clone, Debug, Default)]
pub struct Called {
    pub tool: String,
    pub result: Value,
    pub fault: Option<Fault>,
    /// The wait the answer announces, in virtual ms.
    pub retry_after_ms: Option<u64>,
    /// The fault is the MCP endpoint's own (`transport = true`), not the tool's.
    pub transport: bool,
    /// The tool's schema changed with this call (`schema_drift` fired): MCP says
    /// `notifications/tools/list_changed`.
    pub list_changed: bool,
    /// The fault came after the write was done (`commit = "before_failure"`).
    pub commits: bool,
    /// The key of the call's canonical arguments.
    pub args_key: u64,
    /// The fault that changed the result, which succeeded (`result` is the changed one; a
    /// user's real tool's answer is changed by it too).
    pub taint: Option<Fault>,
    /// The idempotency key a write tool's call carried: its answer hands it back (the
    /// `Idempotency-Key` header, and in a failure's body or five-field envelope).
    pub idempotency_key: Option<String>,
    /// The result counted as returned for the task's goal ([`World::returned`]): taken back
    /// with it when the call fails after all.
    pub counted: bool,
}

/// A request body as a tool's arguments: a JSON object, or the 400 that says why not.
pub fn arguments(body: &[u8]) -> Result<Value, Reply> {
    match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => {
            let body = json!({"error": {"code": 400, "message": "the body must be a JSON object of arguments"}});
            Err(Reply::json(400, &body))
        }
        Err(e) => {
            let body = json!({"error": {"code": 400, "message": format!("the body is not JSON arguments: {e}")}});
            Err(Reply::json(400, &body))
        }
    }
}

/// The 404 for a tool the scenario does not have.
pub fn unknown(world: &World, tool: &str) -> Reply {
    let known = world.scenario.task.tools.join(", ");
    let body =
        json!({"error": {"code": 404, "message": format!("no tool named {tool:?} in this scenario (it has {known})")}});
    Reply::json(404, &body)
}

/// The answer of a known tool to `args`, with the faults' memory and the findings kept.
pub fn invoke(world: &mut World, tool: &str, args: &Value, at: AttemptNo) -> Called {
    let Some(tool_idx) = index(world, tool) else {
        return Called { tool: tool.to_owned(), ..Called::default() };
    };
    let canon = canonical_args(args);
    let call_key = (tool.to_owned(), args_key(&canon));
    // An identical call right after a non-retryable failure, with no model turn between: the
    // agent's own retry of something retrying cannot fix.
    if let Some((class, false)) = world.last_failure.get(&call_key)
        && !class.retryable()
    {
        let shown = crate::trace::inspect::one_line(&canon, 200);
        let detail =
            format!("{tool} {shown}: retried after a non-retryable {} failure without asking the model", class.name());
        world.finding(Check::NoBlindRetry, detail);
        world.wasted_retries += 1;
    }
    let key = (tool_idx as u16, call_key.1);
    // Memory first (a schema change sticks to the tool until it is listed again, bad arguments
    // to them, a partial result to the call), then the world's decision (refusals, a terminal
    // tool, the injector).
    let remembered =
        world.drift[tool_idx].or_else(|| world.bad_args.get(&key).or_else(|| world.partial.get(&key)).copied());
    let decision = match remembered {
        Some(rule) => Some(super::world::Decision { rule, retry_after_ms: None, refused: false }),
        None => world.decide_at(tool_idx, at),
    };
    // A tainting fault changes a result that succeeds (wrong, large, injected): no failure.
    let taint = decision.filter(|d| world.fault(d.rule).taints());
    let decision = decision.filter(|d| !world.fault(d.rule).taints());
    let mut list_changed = false;
    if let Some(d) = decision {
        if d.refused && world.outcomes.contains_key(&call_key) {
            world.wasted_retries += 1;
        }
        // A schema change sticks to the tool (above), not to the arguments; it is announced once.
        let drift = *world.fault(d.rule) == Fault::SchemaDrift;
        match world.fault(d.rule).class() {
            _ if drift => {
                list_changed = remembered.is_none();
                if list_changed {
                    world.drift[tool_idx] = Some(d.rule);
                    world.revisions[tool_idx] += 1;
                }
            }
            ErrorClass::BadArgs => {
                world.bad_args.insert(key, d.rule);
            }
            ErrorClass::Partial => {
                world.partial.insert(key, d.rule);
            }
            _ => {}
        }
    }
    let spec = world
        .scenario
        .task
        .calls
        .iter()
        .find(|c| usize::from(c.tool) == tool_idx && (c.args == canon || c.corrections.contains(&canon)))
        .or_else(|| world.scenario.task.calls.iter().find(|c| usize::from(c.tool) == tool_idx));
    // A call of a tool an injected instruction asked for, with arguments no call of the task
    // has: the agent followed the instruction.
    let task = &world.scenario.task;
    let own_call = task.calls.iter().enumerate().any(|(i, c)| {
        usize::from(c.tool) == tool_idx
            && (c.args == canon || c.corrections.contains(&canon))
            && !task.injected.iter().any(|&(_, call)| call as usize == i)
    });
    if !own_call && let Some(at) = world.injections_pending.iter().position(|&t| t == tool_idx) {
        world.injections_pending.remove(at);
        world.injection_followed += 1;
    }
    let mut result: Value =
        spec.map_or_else(|| json!({"result": "ok"}), |c| serde_json::from_str(&c.result_json).unwrap_or(Value::Null));
    // The latest result of each call: a wrong value asked for again no longer stands.
    match taint {
        Some(d) => world.tainted.insert((tool_idx, call_key.1), d.rule),
        None => world.tainted.remove(&(tool_idx, call_key.1)),
    };
    if let Some(d) = taint {
        world.faults_injected += 1;
        let fault = world.fault(d.rule).clone();
        result = crate::taint::tainted(&fault, &result).unwrap_or(result);
        if let Fault::InjectedInstruction { tool, .. } = fault
            && let Some(t) = index(world, &tool)
        {
            world.injections_pending.push(t);
        }
    }
    let class = decision.map(|d| world.fault(d.rule).class());
    let counted = world.returned(tool_idx, decision.or(taint).map(|d| d.rule));
    let (fault, retry_after_ms, transport, commits) = match decision {
        None => (None, None, false, false),
        Some(d) => {
            world.faults_injected += 1;
            let rule = &world.scenario.faults.rules[usize::from(d.rule)];
            let transport = rule.transport || matches!(rule.fault, Fault::SessionExpired | Fault::StreamDropped);
            // A refusal repeating an announced wait wrote nothing.
            (Some(world.fault(d.rule).clone()), d.retry_after_ms, transport, rule.commits && !d.refused)
        }
    };
    match class.filter(|c| c.is_failure()) {
        Some(c) => {
            world.last_failure.insert(call_key.clone(), (c, false));
        }
        None => {
            world.last_failure.remove(&call_key);
        }
    }
    let args_key = call_key.1;
    world.outcomes.insert(call_key, class);
    world.last_outcome.insert(tool.to_owned(), class);
    world.bound_memory();
    Called {
        tool: tool.to_owned(),
        result,
        fault,
        retry_after_ms,
        transport,
        list_changed,
        commits,
        args_key,
        taint: taint.map(|d| world.fault(d.rule).clone()),
        idempotency_key: None,
        counted,
    }
}

/// Whether a call of a write tool that ended so committed its write: it succeeded (or gave a
/// result that is no failure), or failed after committing.
pub fn committed(called: &Called) -> bool {
    match &called.fault {
        None => true,
        Some(f) => !f.class().is_failure() || called.commits,
    }
}

/// A call [`invoke`] let through that failed after all: the user's real tool failed it (live
/// mode), or a write lost its conflict. The world remembers the failure as it would a fault
/// of its own (the success [`invoke`] counted taken back, and the returned result when it was
/// `counted`; the call's outcome its class).
pub fn failed_after_all(world: &mut World, (tool, args): (&str, &Value), fault: &Fault, counted: bool) {
    if let Some(tool_idx) = index(world, tool) {
        world.unsucceeded(tool_idx, counted);
        failed(world, (tool_idx, tool), args, fault, true);
    }
}

/// Records how call `tool` with `args` failed (or ended) without a fault of the scenario's
/// decided for it: its outcome, the failure the mock model and the checks read, no taint.
/// A call that never `reached` the tool (refused at its door) leaves a failure retrying cannot
/// fix standing for its arguments (the check for blind retries reads it when they come back).
fn failed(world: &mut World, (tool_idx, tool): (usize, &str), args: &Value, fault: &Fault, reached: bool) {
    let call_key = (tool.to_owned(), args_key(&canonical_args(args)));
    // What failed holds no wrong value and carries no instruction.
    world.tainted.remove(&(tool_idx, call_key.1));
    let class = fault.class();
    world.outcome_of(tool_idx, class.is_failure());
    let standing = world.last_failure.get(&call_key).is_some_and(|(c, _)| !c.retryable());
    if class.is_failure() && (reached || !standing) {
        world.last_failure.insert(call_key.clone(), (class, false));
    }
    world.outcomes.insert(call_key, Some(class));
    world.last_outcome.insert(tool.to_owned(), Some(class));
    world.bound_memory();
}

/// A call the mocks let through that the host cancelled while the user's real tool served it
/// (live mode): its outcome there is unknown, so the success [`invoke`] counted (and the
/// result, when it was `counted`) is taken back.
pub fn cancelled_for_real(world: &mut World, tool: &str, counted: bool) {
    if let Some(tool_idx) = index(world, tool) {
        world.unsucceeded(tool_idx, counted);
    }
}

/// A call's answer as an HTTP tool sends it (a timeout's delay is the server's to apply).
pub fn http_reply(world: &World, called: &Called) -> Reply {
    let key = called.idempotency_key.as_deref();
    let reply = match &called.fault {
        None => Reply::json(200, &called.result),
        Some(f) => fault_reply(world, &called.tool, f, called.retry_after_ms, &called.result, key),
    };
    with_key(reply, key)
}

/// The reply with the key a write's call carried in its header, as the key's draft standard
/// and the payment APIs send it back (only a key that is a valid header value, as one read
/// from a header is).
fn with_key(reply: Reply, key: Option<&str>) -> Reply {
    match key.filter(|k| k.bytes().all(|b| (0x20..0x7f).contains(&b))) {
        Some(k) => reply.header("idempotency-key", k),
        None => reply,
    }
}

/// The one sentence a failure is told in.
pub fn message(tool: &str, fault: &Fault, retry_after_ms: Option<u64>, body: &str) -> String {
    let err = ToolError {
        kind: ErrorKind::Fault(fault),
        class: fault.class(),
        tool,
        attempts: 1,
        retry_after_ms,
        body,
        idempotency_key: None,
    };
    let mut message = String::new();
    sentence(&mut message, &mut itoa::Buffer::new(), &err);
    message
}

/// The bearer challenge a 401 or 403 carries (RFC 6750 §3): the token expired, or it lacks
/// the scope. An MCP client with OAuth reads it to know that it must authorise again.
fn challenge(status: u16) -> Option<&'static str> {
    match status {
        401 => Some(r#"Bearer error="invalid_token", error_description="The access token expired""#),
        403 => Some(
            r#"Bearer error="insufficient_scope", error_description="The access token lacks the scope this tool needs""#,
        ),
        _ => None,
    }
}

/// A failure the way a real HTTP tool sends it; a write's error names the idempotency key
/// its call carried.
fn fault_reply(
    world: &World,
    tool: &str,
    fault: &Fault,
    retry_after_ms: Option<u64>,
    result: &Value,
    key: Option<&str>,
) -> Reply {
    let body = result.to_string();
    let message = message(tool, fault, retry_after_ms, &body);
    let error = |code: u16| {
        let mut e = json!({"code": code, "message": message});
        if let Some(k) = key {
            e["idempotency_key"] = json!(k);
        }
        json!({ "error": e })
    };
    match fault {
        Fault::Http { status, param, .. } => {
            let mut b = error(*status);
            if let Some(p) = param {
                b["error"]["param"] = json!(p);
            }
            let r = match challenge(*status) {
                Some(c) => Reply::json(*status, &b).header("www-authenticate", c),
                None => Reply::json(*status, &b),
            };
            match retry_after_ms {
                Some(ms) => r.retry_after(world.clock.real_ms(ms)),
                None => r,
            }
        }
        Fault::Timeout { .. } => Reply::json(504, &error(504)),
        Fault::Reset | Fault::StreamDropped | Fault::Stream { .. } => Reply::reset(),
        Fault::SessionExpired => Reply::json(404, &error(404)),
        Fault::SchemaDrift => Reply::json(400, &error(400)),
        Fault::TruncatedJson => Reply::raw(200, truncated(&body).as_bytes().to_vec(), "application/json"),
        Fault::CodeFencedJson => Reply::raw(200, format!("```json\n{body}\n```").into_bytes(), "application/json"),
        Fault::Ambiguous { cursor } => {
            Reply::raw(200, partial_text(&body, false, *cursor).into_bytes(), "application/json")
        }
        // (`invoke` serves these as the success they are, with the changed result.)
        Fault::WrongContent | Fault::LargeResponse { .. } | Fault::InjectedInstruction { .. } => {
            Reply::json(200, result)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call refused at the door, after a success, is the tool's latest outcome: the goal is
    /// no longer reached and the call reads as failed; a write that lost its conflict takes its
    /// success back.
    #[test]
    fn a_refusal_is_the_calls_outcome() {
        let mut w = crate::wire::world::one_search();
        let args = json!({"q": 1});
        let at = w.attempt(0);
        let called = invoke(&mut w, "search", &args, at);
        assert!(called.fault.is_none() && w.goal_reached(false));
        let key = ("search".to_owned(), args_key(&canonical_args(&args)));
        assert_eq!(w.outcomes.get(&key), Some(&None));
        let _ = refused(&mut w, ("search", &args), LoadFault::RateLimited, Some(1000), None);
        assert!(!w.goal_reached(false), "the latest call was refused");
        assert_eq!(w.outcomes.get(&key), Some(&Some(ErrorClass::RateLimited)));
        // Served again, then its write lost the conflict: no success is left of it.
        let at = w.attempt(0);
        let called = invoke(&mut w, "search", &args, at);
        assert!(w.goal_reached(false));
        let _ = refused(&mut w, ("search", &args), LoadFault::Conflict, None, Some(&called));
        assert!(!w.goal_reached(false), "a lost conflict is a failure");
        assert_eq!(w.outcomes.get(&key), Some(&Some(ErrorClass::Transient)));
    }

    /// Two calls of one tool served at once: the first's wrong value, the second's good one.
    /// When the client then cancels the first, what is taken back is the first's (no result
    /// counted for the goal), not the latest outcome's: the goal stays reached by the second.
    #[test]
    fn a_call_taken_back_is_that_calls_own() {
        let mut w =
            crate::wire::world::search_with("[[faults]]\ntarget = \"search\"\nat = [1]\nfault = \"wrong_content\"\n");
        let (first, second) = (json!({"q": 1}), json!({"q": 2}));
        let at = w.attempt(0);
        let a = invoke(&mut w, "search", &first, at);
        assert!(a.taint.is_some() && !a.counted, "the first call's value is wrong");
        let at = w.attempt(0);
        let b = invoke(&mut w, "search", &second, at);
        assert!(b.taint.is_none() && b.counted && w.goal_reached(false));
        cancelled_for_real(&mut w, "search", a.counted);
        assert!(w.goal_reached(false), "the second call's good result still stands");
        // The second, failed by the real tool after all, takes its own result back.
        failed_after_all(&mut w, ("search", &second), &Fault::http(500), b.counted);
        assert!(!w.goal_reached(false));
    }

    /// A call that failed for its arguments, sent again unchanged and refused at the door, is
    /// still a blind retry when it comes back: the refusal hides no failure retrying cannot fix.
    #[test]
    fn a_refusal_at_the_door_hides_no_blind_retry() {
        let mut w = crate::wire::world::search_with("[[faults]]\ntarget = \"search\"\nat = [1]\nhttp = 400\n");
        let args = json!({"q": 2});
        let blind = |w: &World| w.findings.iter().filter(|f| f.check == Some(Check::NoBlindRetry)).count();
        let at = w.attempt(0);
        assert_eq!(invoke(&mut w, "search", &args, at).fault.map(|f| f.class()), Some(ErrorClass::BadArgs));
        let _ = refused(&mut w, ("search", &args), LoadFault::RateLimited, Some(10), None);
        assert_eq!(blind(&w), 0);
        let at = w.attempt(0);
        invoke(&mut w, "search", &args, at);
        assert_eq!(blind(&w), 1, "the same arguments again, with no model turn between");
    }
}
