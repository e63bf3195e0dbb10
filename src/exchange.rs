//! The neutral parts of a model exchange that every provider format and every importer reads
//! into: a tool's declaration, a call's canonical arguments, a tool call, one step of a
//! conversation, and the error that says where an input did not fit.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Error;

/// JSON with object keys sorted and no insignificant whitespace (serde_json's map is a
/// BTreeMap without the `preserve_order` feature, so keys come out sorted).
pub fn canonical_json(v: &Value) -> String {
    serde_json::to_string(v).expect("a Value always serializes")
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// A tool call's arguments as canonical JSON text (compact, keys in a `Value`'s order): a few
/// bytes where a `Value` map takes hundreds, written out as the JSON it holds.
#[derive(Clone, Debug)]
pub struct Args(Box<serde_json::value::RawValue>);

impl Args {
    pub fn new(v: &Value) -> Args {
        let text = canonical_json(v);
        Args(serde_json::value::RawValue::from_string(text).expect("a Value writes valid JSON"))
    }

    /// The canonical JSON text.
    pub fn as_json(&self) -> &str {
        self.0.get()
    }

    pub fn value(&self) -> Value {
        serde_json::from_str(self.as_json()).expect("canonical JSON parses")
    }
}

impl PartialEq for Args {
    fn eq(&self, other: &Args) -> bool {
        self.as_json() == other.as_json()
    }
}

impl std::fmt::Display for Args {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.as_json())
    }
}

impl Serialize for Args {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Args {
    /// Any JSON, written back canonically.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Args, D::Error> {
        Value::deserialize(d).map(|v| Args::new(&v))
    }
}

impl From<Value> for Args {
    fn from(v: Value) -> Args {
        Args::new(&v)
    }
}

/// One tool call the model asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct CallItem {
    pub id: Option<String>,
    pub name: String,
    pub args: Args,
}

/// One step of a conversation, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// Text from the user (or the user simulator).
    User(String),
    /// One model call: its text, its tool calls, its usage and HTTP status.
    Model { text: Option<String>, calls: Vec<CallItem>, tokens_in: u64, tokens_out: u64, status: u16 },
    /// One tool result. `flag` is a structural error signal (Anthropic `is_error`, Gemini
    /// `response.error`, an OTel `execute_tool` span with status ERROR); `None` where the
    /// format has none and text rules decide.
    Result { id: Option<String>, name: Option<String>, content: String, flag: Option<(bool, &'static str)> },
    /// A call the agent cancelled before it ran (a parallel sibling failed first): its text,
    /// and the rule that recognised it.
    Cancelled { id: Option<String>, content: String, why: &'static str },
}

impl Item {
    pub fn model(text: Option<String>, calls: Vec<CallItem>) -> Item {
        let text = text.filter(|t| !t.trim().is_empty());
        Item::Model { text, calls, tokens_in: 0, tokens_out: 0, status: 200 }
    }
}

/// A problem at a JSON path inside the input.
#[derive(Debug)]
pub struct ImportError {
    pub at: String,
    pub expected: String,
}

impl ImportError {
    pub fn at(at: impl Into<String>, expected: impl Into<String>) -> ImportError {
        ImportError { at: at.into(), expected: expected.into() }
    }

    pub(crate) fn into_error(self, file: &Path) -> Error {
        Error::Invalid { file: file.display().to_string(), line: None, field: self.at, expected: self.expected }
    }
}

/// Sets a model item's token usage from a usage object's `in_key` and `out_key`.
pub fn with_usage(mut item: Item, usage: Option<&Value>, in_key: &str, out_key: &str) -> Item {
    if let (Item::Model { tokens_in, tokens_out, .. }, Some(u)) = (&mut item, usage) {
        *tokens_in = u.get(in_key).and_then(Value::as_u64).unwrap_or(0);
        *tokens_out = u.get(out_key).and_then(Value::as_u64).unwrap_or(0);
    }
    item
}

/// Tool definitions from a list of flat `{name, description, <params_key>}` objects.
pub fn tool_defs(list: Option<&Value>, params_key: &str) -> Vec<ToolDef> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| {
            Some(ToolDef {
                name: t.get("name")?.as_str()?.to_owned(),
                description: t.get("description").and_then(Value::as_str).filter(|d| !d.is_empty()).map(str::to_owned),
                parameters: t.get(params_key).cloned(),
            })
        })
        .collect()
}

/// Parses a JSON-encoded arguments string, keeping it as a string when it is not JSON.
pub fn parse_args(s: &str) -> Args {
    Args::new(&serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_owned())))
}

/// The text of a content value: a string, or the `text` of each part joined.
pub fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").or_else(|| p.get("content")).and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
