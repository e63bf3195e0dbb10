//! Tool results an agent hands back as ordinary messages: an assistant text that names the calls
//! the mock model made (smolagents writes `Calling tools:\n[{'id': 'call_000001', 'type':
//! 'function', 'function': {'name': 'search', …}}]`), followed by a user turn with what the tools
//! said (`Observation:\n…`, or `Call id: …\nError:\n…`). Only call ids this mock gave out are
//! read, so no other text is taken for a call.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::trace::Args;
use crate::trace::import::conversation::{CallItem, Item};

/// `'id': 'call_000001', 'type': 'function', 'function': {'name': 'search'` in Python's or
/// JSON's quotes.
static CALL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?s)['"]id['"]\s*:\s*['"]([^'"]+)['"].*?['"]name['"]\s*:\s*['"]([^'"]+)['"]"#).expect("valid")
});

/// The observation's own text, without the agent's label.
fn observation(text: &str) -> &str {
    let t = text.trim_start();
    let t = t.strip_prefix("Observation:").unwrap_or(t);
    t.trim_start_matches(['\n', ' '])
}

/// Reads plain-message results: each assistant text naming calls of this mock (`owned` holds
/// the ids it gave out) becomes a model turn with those calls, and the user turn after it their
/// results (one per call, each with the turn's text). Returns whether it read any.
pub fn read_plain_results(items: &mut Vec<Item>, owned: &BTreeMap<String, usize>) -> bool {
    let mut read = false;
    let mut out = Vec::with_capacity(items.len());
    let mut it = std::mem::take(items).into_iter().peekable();
    while let Some(item) = it.next() {
        let named: Vec<(String, String)> = match &item {
            Item::Model { text: Some(t), calls, .. } if calls.is_empty() => CALL
                .captures_iter(t)
                .filter(|c| owned.contains_key(&c[1]))
                .map(|c| (c[1].to_owned(), c[2].to_owned()))
                .collect(),
            _ => Vec::new(),
        };
        let Some(Item::User(_)) = it.peek() else {
            out.push(item);
            continue;
        };
        if named.is_empty() {
            out.push(item);
            continue;
        }
        let Some(Item::User(said)) = it.next() else { unreachable!("peeked a user turn") };
        let calls = named
            .iter()
            .map(|(id, name)| CallItem {
                id: Some(id.clone()),
                name: name.clone(),
                args: Args::new(&serde_json::json!({})),
            })
            .collect();
        out.push(Item::model(None, calls));
        for (id, name) in named {
            let content = observation(&said).to_owned();
            out.push(Item::Result { id: Some(id), name: Some(name), content, flag: None });
        }
        read = true;
    }
    *items = out;
    read
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smolagents_messages_become_calls_and_results() {
        let owned: BTreeMap<String, usize> = [("call_000001".to_owned(), 0)].into();
        let calling = "Calling tools:\n[{'id': 'call_000001', 'type': 'function', 'function': {'name': 'search', 'arguments': {'query': 'Paris'}}}]";
        let mut items = vec![
            Item::User("task".into()),
            Item::model(Some(calling.into()), Vec::new()),
            Item::User("Observation:\n{\"temp_c\": 18}".into()),
        ];
        assert!(read_plain_results(&mut items, &owned));
        assert!(
            matches!(&items[1], Item::Model { calls, .. } if calls[0].id.as_deref() == Some("call_000001") && calls[0].name == "search")
        );
        assert!(
            matches!(&items[2], Item::Result { id: Some(i), content, .. } if i == "call_000001" && content == "{\"temp_c\": 18}")
        );
        // Ids this mock never gave out are text, not calls.
        let mut other = vec![Item::model(Some(calling.replace("000001", "999")), Vec::new()), Item::User("x".into())];
        assert!(!read_plain_results(&mut other, &owned));
        assert!(matches!(&other[0], Item::Model { calls, .. } if calls.is_empty()));
    }
}
