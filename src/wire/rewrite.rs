//! Rewriting, in live mode (`--rewrite STRATEGY`): a tool result in the conversation the agent
//! sends is replaced, before the real model reads it, by the failure the scenario schedules for
//! that call (the tool's faults, decided as for the mock tools), encoded the way the strategy
//! hands a failure to the model. The agent ran the tool; the model reads that it failed. The
//! same result is replaced the same way each time the agent sends its history again, so
//! envelope strategies meet the real model with the agent's code unchanged.

use std::collections::BTreeMap;

use serde_json::Value;

use super::world::World;
use crate::engine::strategy::{Partials, Strategy};
use crate::envelope::render::{Body, Renderer};
use crate::envelope::{ErrorKind, ToolError};
use crate::exchange::Item;
use crate::fault::Fault;
use crate::provider::Format;
use crate::trace::TraceEvent;

/// The start of a rewritten result's `evidence` in the trace.
pub const EVIDENCE: &str = "rewritten by tracefault";

/// Rewrites the tool results of request `body` (of conversation `c`, holding `items`) that the
/// scenario's tool faults fail: new results are decided now, results rewritten before are
/// rewritten again. `unnamed(n)` is the id the `n`th result without one is known by. Returns
/// whether the body changed.
pub fn rewrite(
    w: &mut World,
    c: usize,
    format: Format,
    strategy: &Strategy,
    (body, items): (&mut Value, &[Item]),
    unnamed: impl Fn(usize) -> String,
) -> bool {
    // The tool each call id names, and each result's content, from the request itself.
    let mut tools: BTreeMap<&str, &str> = BTreeMap::new();
    let mut contents: Vec<(Option<&str>, Option<&str>, &str)> = Vec::new();
    for item in items {
        match item {
            Item::Model { calls, .. } => {
                for call in calls {
                    if let Some(id) = &call.id {
                        tools.insert(id, &call.name);
                    }
                }
            }
            Item::Result { id, name, content, .. } => contents.push((id.as_deref(), name.as_deref(), content)),
            _ => {}
        }
    }
    let mut changed = false;
    let mut renderer = Renderer::default();
    let (mut unnamed_seen, mut unnamed_content) = (0, contents.iter().filter(|r| r.0.is_none()));
    for (id, node) in format.result_nodes(body) {
        let (id, name, content) = match id {
            Some(id) => {
                let found = contents.iter().find(|r| r.0 == Some(id.as_str()));
                (id.clone(), found.and_then(|r| r.1), found.map_or("", |r| r.2))
            }
            None => {
                unnamed_seen += 1;
                let found = unnamed_content.next();
                (unnamed(unnamed_seen - 1), found.and_then(|r| r.1), found.map_or("", |r| r.2))
            }
        };
        if let Some(rendered) = w.conversations.get(&c).and_then(|conv| conv.rewritten.get(&id)) {
            format.replace_result(node, rendered);
            changed = true;
            continue;
        }
        let key = format!("result:{id}");
        if w.owner.contains_key(&key) {
            continue;
        }
        let Some(tool) = tools.get(id.as_str()).copied().or(name) else { continue };
        let Some(target) = w.scenario.task.tools.iter().position(|t| t == tool) else { continue };
        let Some(decision) = w.decide(target) else {
            w.succeeded(target);
            continue;
        };
        w.faults_injected += 1;
        let fault = w.fault(decision.rule).clone();
        let class = fault.class();
        // The tool's own answer, as JSON, for the encodings that show it.
        let json = if serde_json::from_str::<Value>(content).is_ok() {
            content.to_owned()
        } else {
            Value::String(content.to_owned()).to_string()
        };
        let shown = if class.is_failure() {
            let err = ToolError {
                kind: ErrorKind::Fault(&fault),
                class,
                tool,
                attempts: 1,
                retry_after_ms: decision.retry_after_ms,
                body: &json,
            };
            Body::Error { err, encoding: strategy.encoding }
        } else {
            Body::Partial {
                json: &json,
                stated_complete: strategy.partials == Partials::Terminal,
                cursor: fault == Fault::Ambiguous { cursor: true },
            }
        };
        let Ok(rendered) = serde_json::from_str::<Value>(renderer.render(format, 1, tool, shown)) else { continue };
        format.replace_result(node, &rendered);
        changed = true;
        let read = format.provider().result_part(&rendered).map(|p| match p {
            crate::provider::ResultPart::Content { content, .. } => content.clone(),
            crate::provider::ResultPart::Response(r) => r.clone(),
        });
        let shown_text = match read {
            Some(Value::String(s)) => s,
            Some(v) => v.to_string(),
            None => String::new(),
        };
        w.record(TraceEvent::ToolResult {
            call_id: id.clone(),
            ok: !class.is_failure(),
            status: fault.status(),
            content: shown_text,
            error_class: Some(class.name().to_owned()),
            latency_ms: None,
            attempts: None,
            evidence: Some(format!("{EVIDENCE} ({}, under {})", fault.label(), strategy.name)),
            cancelled: false,
            attempt_ms: Vec::new(),
        });
        w.rewritten_results += 1;
        if let Some(conv) = w.conversations.get_mut(&c) {
            conv.rewritten.insert(id, rendered);
        }
        w.own(key, c);
    }
    changed
}
