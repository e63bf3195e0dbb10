//! Tool schemas in wire mode: the input schema each mock tool publishes (from the task's own
//! arguments, so typed agents can declare it), the tools a request declares, arguments compared
//! as JSON values (a Python `42.0` is the task's `42`), and corrections that stay valid under
//! the schema the agent sent.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::engine::task::{Task, canonical_json, fixed_args};
use crate::provider::Format;

/// The key the mocks remember a call's arguments by: a digest of their canonical JSON, so a
/// megabyte of arguments costs eight bytes of memory however many calls carry it.
pub fn args_key(canon: &str) -> u64 {
    crate::engine::rng::fnv1a64(canon.as_bytes())
}

/// The key of a recorded call's arguments, as the mock tools remember them ([`args_key`] of
/// their [`canonical_args`]).
pub fn recorded_args_key(args: &crate::exchange::Args) -> u64 {
    let value: Value = serde_json::from_str(args.as_json()).unwrap_or(Value::Null);
    args_key(&canonical_args(&value))
}

/// Canonical JSON of arguments compared by value: numbers with an integral value are written
/// as integers, object keys are sorted.
pub fn canonical_args(v: &Value) -> String {
    fn norm(v: &Value) -> Value {
        match v {
            Value::Number(n) => match n.as_f64() {
                Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
                _ => v.clone(),
            },
            Value::Array(a) => Value::Array(a.iter().map(norm).collect()),
            Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), norm(v))).collect()),
            _ => v.clone(),
        }
    }
    canonical_json(&norm(v))
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

/// The input schema of `tool`, from the arguments the task's calls of it use: every key any
/// call uses, typed by its values, required when every call uses it; nothing else allowed.
pub fn input_schema(task: &Task, tool: &str) -> Value {
    let Some(t) = task.tools.iter().position(|n| n == tool) else { return json!({"type": "object"}) };
    let calls: Vec<Value> = task
        .calls
        .iter()
        .enumerate()
        // The calls injected instructions ask for are no part of the tool's schema.
        .filter(|(i, c)| usize::from(c.tool) == t && !task.injected.iter().any(|&(_, call)| call as usize == *i))
        .filter_map(|(_, c)| serde_json::from_str(&c.args).ok())
        .collect();
    let mut props: BTreeMap<String, &'static str> = BTreeMap::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for c in &calls {
        for (k, v) in c.as_object().into_iter().flatten() {
            let ty = props.entry(k.clone()).or_insert(type_of(v));
            if *ty == "integer" && type_of(v) == "number" {
                *ty = "number";
            }
            *seen.entry(k.clone()).or_default() += 1;
        }
    }
    let properties: Map<String, Value> = props
        .iter()
        .map(|(k, ty)| {
            let s = match *ty {
                "array" => json!({"type": "array", "items": {}}),
                "object" => json!({"type": "object"}),
                t => json!({"type": t}),
            };
            (k.clone(), s)
        })
        .collect();
    let required: Vec<&String> = seen.iter().filter(|(_, n)| **n == calls.len()).map(|(k, _)| k).collect();
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// `GET /tools`: every tool of the task with its description and input schema; a tool whose
/// schema changed (`revisions[i]` > 0, from a `schema_drift` fault) says its revision in both.
pub fn tool_list(task: &Task, revisions: &[u32]) -> Value {
    let tools: Vec<Value> = task
        .tools
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut description = format!("The scenario's {name} tool (a tracefault mock).");
            let mut schema = input_schema(task, name);
            if let Some(&r) = revisions.get(i).filter(|&&r| r > 0) {
                description.push_str(&format!(" Input schema revision {r}."));
                schema["$comment"] = json!(format!("revision {r}"));
            }
            json!({"name": name, "description": description, "input_schema": schema})
        })
        .collect();
    json!({ "tools": tools })
}

/// The tools a request declares, by name, with their parameter schemas (JSON Schema, type names
/// lower-cased where Gemini writes them upper-case). `None` when the request declares none.
pub fn declared_tools(format: Format, body: &Value) -> Option<BTreeMap<String, Value>> {
    let defs = format.provider().tools(body);
    if defs.is_empty() {
        return None;
    }
    Some(defs.into_iter().map(|d| (d.name, d.parameters.as_ref().map(lower_types).unwrap_or(Value::Null))).collect())
}

fn lower_types(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("type", Value::String(t)) => (k.clone(), Value::String(t.to_ascii_lowercase())),
                    _ => (k.clone(), lower_types(v)),
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(lower_types).collect()),
        _ => v.clone(),
    }
}

/// Arguments valid under `schema` for a call the model is made to send: each required
/// property (every declared one when none is marked) of its type — strings carry `text` (a
/// final-answer tool gets the answer), an `enum`'s first value, numbers their minimum or 0,
/// booleans false, arrays and objects empty.
pub fn valid_args(schema: &Value, text: &str) -> Value {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return json!({}) };
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut out = Map::new();
    for (k, p) in props.iter().filter(|(k, _)| required.is_empty() || required.contains(&k.as_str())) {
        let v = if let Some(first) = p.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
            first.clone()
        } else {
            match p.get("type").and_then(Value::as_str).unwrap_or("string") {
                "integer" => json!(p.get("minimum").and_then(Value::as_i64).unwrap_or(0)),
                "number" => json!(p.get("minimum").and_then(Value::as_f64).unwrap_or(0.0)),
                "boolean" => json!(false),
                "array" => json!([]),
                "object" => valid_args(p, text),
                "null" => Value::Null,
                _ => json!(text),
            }
        };
        out.insert(k.clone(), v);
    }
    Value::Object(out)
}

/// A correction of `args` that stays valid under `schema`: it changes the value of one declared
/// property (required ones first) in a way its schema allows — another `enum` value, a string
/// with ` (corrected N)` appended, a number one step within its bounds, a flipped boolean.
/// Without a schema, or with nothing it may change, the task's own made-up correction.
pub fn correct(args: &Value, schema: Option<&Value>, n: u32) -> Value {
    let Some(props) = schema.and_then(|s| s.get("properties")).and_then(Value::as_object) else {
        return fixed_args(args, n);
    };
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut order: Vec<&String> = props.keys().filter(|k| required.contains(&k.as_str())).collect();
    order.extend(props.keys().filter(|k| !required.contains(&k.as_str())));
    let mut out = args.clone();
    for key in order {
        let Some(current) = out.get(key) else { continue };
        if let Some(changed) = change(current, &props[key], n) {
            out[key.as_str()] = changed;
            return out;
        }
    }
    fixed_args(args, n)
}

/// One value changed within its schema, or `None` if the schema leaves no other value.
fn change(current: &Value, schema: &Value, n: u32) -> Option<Value> {
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        return options.iter().find(|o| *o != current).cloned();
    }
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or_else(|| type_of(current));
    match (ty, current) {
        ("string", Value::String(s)) => {
            if schema.get("pattern").is_some() || schema.get("format").is_some() {
                return None;
            }
            let base = s.split(" (corrected").next().unwrap_or_default();
            let fixed = format!("{base} (corrected {n})");
            let max = schema.get("maxLength").and_then(Value::as_u64).unwrap_or(u64::MAX);
            (fixed.chars().count() as u64 <= max).then_some(Value::String(fixed))
        }
        ("integer" | "number", Value::Number(x)) => {
            let v = x.as_f64()?;
            let lo = schema.get("minimum").and_then(Value::as_f64).unwrap_or(f64::MIN);
            let hi = schema.get("maximum").and_then(Value::as_f64).unwrap_or(f64::MAX);
            let step = if v + 1.0 <= hi { 1.0 } else { -1.0 };
            let next = v + step;
            if next < lo || next > hi {
                return None;
            }
            Some(if ty == "integer" || x.is_i64() { Value::from(next as i64) } else { Value::from(next) })
        }
        ("boolean", Value::Bool(b)) => Some(Value::Bool(!b)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_compare_by_value() {
        assert_eq!(canonical_args(&json!({"amount_eur": 42.0, "b": [1.0, 2.5]})), r#"{"amount_eur":42,"b":[1,2.5]}"#);
        assert_eq!(canonical_args(&json!({"amount_eur": 42})), canonical_args(&json!({"amount_eur": 42.0})));
    }

    #[test]
    fn corrections_respect_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "unit": {"type": "string", "enum": ["c", "f"]},
            "city": {"type": "string"},
            "days": {"type": "integer", "minimum": 1, "maximum": 3}},
            "required": ["city", "days"], "additionalProperties": false});
        let args = json!({"city": "weather Paris", "days": 3, "unit": "c"});
        let fixed = correct(&args, Some(&schema), 1);
        assert_eq!(fixed, json!({"city": "weather Paris (corrected 1)", "days": 3, "unit": "c"}), "required first");
        let only_days = json!({"type": "object", "properties": {"days": {"type": "integer", "maximum": 3}}});
        assert_eq!(correct(&json!({"days": 3}), Some(&only_days), 1), json!({"days": 2}), "within the bounds");
        let only_enum = json!({"type": "object", "properties": {"unit": {"type": "string", "enum": ["c", "f"]}}});
        assert_eq!(correct(&json!({"unit": "c"}), Some(&only_enum), 1), json!({"unit": "f"}));
        // Never an undeclared key.
        assert!(
            correct(&args, Some(&schema), 2).as_object().unwrap().keys().all(|k| schema["properties"].get(k).is_some())
        );
    }

    #[test]
    fn forced_arguments_are_valid_under_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "answer": {"type": "string"}, "n": {"type": "integer", "minimum": 2}, "unit": {"enum": ["c", "f"]},
            "sub": {"type": "object", "properties": {"ok": {"type": "boolean"}}}, "note": {"type": "string"}},
            "required": ["answer", "n", "unit", "sub"]});
        assert_eq!(valid_args(&schema, "Done."), json!({"answer": "Done.", "n": 2, "unit": "c", "sub": {"ok": false}}));
        assert_eq!(valid_args(&Value::Null, "x"), json!({}));
    }

    #[test]
    fn the_published_schema_comes_from_the_task() {
        let mut t = Task::default();
        t.push_call("search", &json!({"query": "x", "limit": 3}), &[], &json!(1), None);
        t.push_call("search", &json!({"query": "y"}), &[], &json!(1), None);
        let s = input_schema(&t, "search");
        assert_eq!(s["properties"]["query"]["type"], "string");
        assert_eq!(s["properties"]["limit"]["type"], "integer");
        assert_eq!(s["required"], json!(["query"]));
        assert_eq!(s["additionalProperties"], false);
    }
}
