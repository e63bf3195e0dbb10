//! The mock tools at `POST /tools/{name}`: JSON arguments in, JSON result out, with the
//! scenario's faults as real status codes, `retry-after` headers, delays and damaged bodies.

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::{Request, ResponseTemplate};

use super::state::WireState;
use crate::engine::task::canonical_json;
use crate::envelope::render::sentence;
use crate::envelope::{ErrorKind, ToolError};
use crate::fault::{ErrorClass, Fault};

/// At most this long a mock tool delays a timeout (real time: it is a wire test).
pub const MAX_DELAY_MS: u64 = 30_000;

fn json_response(status: u16, body: &Value) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body.to_string().into_bytes(), "application/json")
}

pub fn respond(state: &mut WireState, tool: &str, req: &Request) -> ResponseTemplate {
    let Some(tool_idx) = state.scenario.task.tools.iter().position(|t| t == tool) else {
        return json_response(
            404,
            &json!({"error": {"code": 404, "message": format!("no tool named {tool:?} in this scenario")}}),
        );
    };
    let args: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => {
            return json_response(
                400,
                &json!({"error": {"code": 400, "message": format!("the body is not JSON arguments: {e}")}}),
            );
        }
    };
    let canon = canonical_json(&args);
    state.tool_calls += 1;
    // An identical call right after a non-retryable failure, with no model turn between: the
    // agent's own retry of something retrying cannot fix.
    if let Some((class, false)) = state.last_failure.get(&(tool.to_owned(), canon.clone()))
        && !class.retryable()
    {
        state.findings.push((
            2,
            format!("{tool} {canon}: retried after a non-retryable {} failure without asking the model", class.name()),
        ));
        state.wasted_retries += 1;
    }
    let call = state.call_for(tool, &args);
    let latency = call
        .and_then(|(c, _)| state.scenario.task.calls[c as usize].latency_ms)
        .unwrap_or(state.scenario.profile.tool_latency_ms);
    let key = (tool_idx as u16, canon.clone());
    let rule = if let Some(r) = state.terminal[tool_idx] {
        state.attempts[tool_idx] += 1;
        Some(r)
    } else if let Some(&r) = state.bad_args.get(&key) {
        state.attempts[tool_idx] += 1;
        Some(r)
    } else if let Some(&r) = state.partial.get(&key) {
        state.attempts[tool_idx] += 1;
        Some(r)
    } else if call.is_some_and(|(c, v)| state.still_bad.contains(&(c, v))) {
        // A changed call the model did not actually fix: it fails like the original.
        state.attempts[tool_idx] += 1;
        state.bad_args.iter().find(|((t, _), _)| usize::from(*t) == tool_idx).map(|(_, r)| *r)
    } else {
        let fired = state.decide(tool_idx, latency);
        if let Some(f) = fired {
            let c = state.fault(f.rule).class();
            match c {
                ErrorClass::Terminal => state.terminal[tool_idx] = Some(f.rule),
                ErrorClass::BadArgs => {
                    state.bad_args.insert(key.clone(), f.rule);
                }
                ErrorClass::Partial => {
                    state.partial.insert(key.clone(), f.rule);
                }
                _ => {}
            }
        }
        fired.map(|f| f.rule)
    };
    let result = call.map_or_else(
        || json!({"result": "ok"}),
        |(c, _)| serde_json::from_str(&state.scenario.task.calls[c as usize].result_json).unwrap_or(Value::Null),
    );
    let (class, template) = match rule.map(|r| (r, state.fault(r).clone())) {
        None => {
            state.successes[tool_idx] += 1;
            (None, json_response(200, &result))
        }
        Some((r, fault)) => {
            state.faults_injected += 1;
            let class = fault.class();
            let retry_after_ms = state.scenario.faults.rules[usize::from(r)].fault.retry_after_ms();
            let body = result.to_string();
            let err =
                ToolError { kind: ErrorKind::Fault(&fault), class, tool, attempts: 1, retry_after_ms, body: &body };
            let mut message = String::new();
            sentence(&mut message, &mut itoa::Buffer::new(), &err);
            match &fault {
                Fault::Http { status, param, .. } => {
                    let mut body = json!({"error": {"code": status, "message": message}});
                    if let Some(p) = param {
                        body["error"]["param"] = json!(p);
                    }
                    let mut t = json_response(*status, &body);
                    if let Some(ms) = retry_after_ms {
                        t = t.insert_header("retry-after", ms.div_ceil(1000).to_string());
                    }
                    (Some(class), t)
                }
                Fault::Timeout { after_ms } => {
                    let body = json!({"error": {"code": 504, "message": message}});
                    let t = json_response(504, &body).set_delay(Duration::from_millis((*after_ms).min(MAX_DELAY_MS)));
                    (Some(class), t)
                }
                // A reset cannot be expressed through wiremock: the nearest thing it can send
                // is an empty 502 that closes the connection.
                Fault::Reset => (Some(class), ResponseTemplate::new(502).insert_header("connection", "close")),
                Fault::TruncatedJson => {
                    let full = result.to_string();
                    let cut = full.as_bytes()[..full.len() / 2].to_vec();
                    (Some(class), ResponseTemplate::new(200).set_body_raw(cut, "application/json"))
                }
                Fault::CodeFencedJson => {
                    let fenced = format!("```json\n{result}\n```");
                    (Some(class), ResponseTemplate::new(200).set_body_raw(fenced.into_bytes(), "application/json"))
                }
                Fault::Ambiguous => {
                    let body = json!({"data": result, "note": crate::envelope::render::MORE_AVAILABLE});
                    (Some(class), json_response(200, &body))
                }
            }
        }
    };
    if let Some(c) = class.filter(|c| c.is_failure()) {
        state.last_failure.insert((tool.to_owned(), canon.clone()), (c, false));
    } else {
        state.last_failure.remove(&(tool.to_owned(), canon.clone()));
    }
    state.outcomes.insert((tool.to_owned(), canon), class);
    template
}
