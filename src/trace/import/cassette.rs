//! vcrpy-style YAML cassettes: `interactions` of HTTP exchanges with any provider, bodies as
//! `parsed_body`, `body: {string: …}` or a JSON string. Headers are never read. Several
//! conversations in one cassette are told apart by [`super::chain`].

use serde_json::Value;

use super::conversation::Conversation;
use super::{ImportError, SourceFormat, chain, detect, exchange};
use crate::provider::Format;

/// The body of a request or response, whichever way the cassette stores it.
fn body(side: &Value) -> Option<Value> {
    if let Some(p) = side.get("parsed_body") {
        return Some(p.clone());
    }
    match side.get("body")? {
        Value::String(s) => serde_json::from_str(s).ok(),
        Value::Object(o) => match o.get("string") {
            Some(Value::String(s)) => serde_json::from_str(s).ok(),
            _ => Some(Value::Object(o.clone())),
        },
        _ => None,
    }
}

fn provider_of(uri: &str, body: &Value) -> Option<SourceFormat> {
    if uri.contains("/chat/completions") {
        Some(SourceFormat::Provider(Format::OpenAiChat))
    } else if uri.contains("/responses") {
        Some(SourceFormat::Provider(Format::OpenAiResponses))
    } else if uri.contains("/messages") {
        Some(SourceFormat::Provider(Format::Anthropic))
    } else if uri.contains("generateContent") {
        Some(SourceFormat::Provider(Format::Gemini))
    } else {
        detect(body)
    }
}

pub fn conversations(v: &Value, id: &str) -> Result<Vec<Conversation>, ImportError> {
    let interactions = v
        .get("interactions")
        .and_then(Value::as_array)
        .ok_or_else(|| ImportError::at("/interactions", "a list of interactions"))?;
    let mut exchanges = Vec::new();
    let mut format = None;
    for (i, it) in interactions.iter().enumerate() {
        let at = format!("/interactions/{i}");
        let req = it.get("request").ok_or_else(|| ImportError::at(&at, "a `request`"))?;
        let Some(req_body) = body(req) else { continue };
        let uri = req.get("uri").and_then(Value::as_str).unwrap_or_default();
        let Some(f) = provider_of(uri, &req_body) else { continue };
        format.get_or_insert(f);
        let resp = it.get("response");
        let status = match resp.and_then(|r| r.get("status")).and_then(|s| s.get("code")) {
            None => 200,
            Some(code) => code.as_u64().filter(|c| (100..=599).contains(c)).ok_or_else(|| {
                ImportError::at(format!("{at}/response/status/code"), "an HTTP status from 100 to 599")
            })? as u16,
        };
        let resp_body = resp.and_then(body);
        exchanges.push(exchange(
            f,
            &req_body,
            resp_body.as_ref().or(resp.filter(|_| status != 200)),
            status,
            &format!("{at}/request/body"),
        )?);
    }
    let provider = format.and_then(SourceFormat::provider);
    let mut convs = chain(exchanges, SourceFormat::Cassette, id, provider);
    for c in &mut convs {
        c.source_format = format!("cassette:{}", format.map_or("unknown", SourceFormat::name));
    }
    Ok(convs)
}
