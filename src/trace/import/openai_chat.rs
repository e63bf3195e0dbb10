//! OpenAI Chat Completions: `messages` (with `tool_calls` / `role: "tool"`, or the legacy
//! `function_call` / `role: "function"`), request bodies, and `choices[0].message` responses.

use std::borrow::Cow;

use serde_json::Value;
use serde_json::value::RawValue;

use super::ImportError;
use super::conversation::{CallItem, Item, parse_args, text_of, with_usage};
use crate::trace::ToolDef;

pub fn items(messages: &[Value], path: &str) -> Result<Vec<Item>, ImportError> {
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let at = || format!("{path}/{i}");
        let role =
            m.get("role").and_then(Value::as_str).ok_or_else(|| ImportError::at(at(), "a message with a `role`"))?;
        match role {
            "system" | "developer" => {}
            "user" => out.push(Item::User(text_of(m.get("content").unwrap_or(&Value::Null)))),
            "assistant" => out.push(assistant(m)),
            "tool" => out.push(Item::Result {
                id: m.get("tool_call_id").and_then(Value::as_str).map(str::to_owned),
                name: m.get("name").and_then(Value::as_str).map(str::to_owned),
                content: text_of(m.get("content").unwrap_or(&Value::Null)),
                flag: None,
            }),
            "function" => out.push(Item::Result {
                id: None,
                name: m.get("name").and_then(Value::as_str).map(str::to_owned),
                content: text_of(m.get("content").unwrap_or(&Value::Null)),
                flag: None,
            }),
            other => {
                return Err(ImportError::at(
                    at(),
                    format!("role system, user, assistant, tool or function, got {other:?}"),
                ));
            }
        }
    }
    Ok(out)
}

fn assistant(m: &Value) -> Item {
    let mut calls = Vec::new();
    for c in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let f = c.get("function").unwrap_or(&Value::Null);
        calls.push(CallItem {
            id: c.get("id").and_then(Value::as_str).map(str::to_owned),
            name: f.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
            args: parse_args(f.get("arguments").and_then(Value::as_str).unwrap_or("{}")),
        });
    }
    if let Some(f) = m.get("function_call").filter(|f| f.is_object()) {
        calls.push(CallItem {
            id: None,
            name: f.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
            args: parse_args(f.get("arguments").and_then(Value::as_str).unwrap_or("{}")),
        });
    }
    let text = m.get("content").map(text_of);
    Item::model(text, calls)
}

/// The model turn a response body holds, with its usage.
pub fn response(body: &Value) -> Option<Item> {
    let msg = body.get("choices")?.get(0)?.get("message")?;
    Some(with_usage(assistant(msg), body.get("usage"), "prompt_tokens", "completion_tokens"))
}

pub fn tools(body: &Value) -> Vec<ToolDef> {
    let mut out = Vec::new();
    for t in body.get("tools").and_then(Value::as_array).into_iter().flatten() {
        let f = t.get("function").unwrap_or(t);
        if let Some(name) = f.get("name").and_then(Value::as_str) {
            out.push(ToolDef {
                name: name.to_owned(),
                description: f.get("description").and_then(Value::as_str).filter(|d| !d.is_empty()).map(str::to_owned),
                parameters: f.get("parameters").cloned(),
            });
        }
    }
    for f in body.get("functions").and_then(Value::as_array).into_iter().flatten() {
        if let Some(name) = f.get("name").and_then(Value::as_str) {
            out.push(ToolDef { name: name.to_owned(), description: None, parameters: f.get("parameters").cloned() });
        }
    }
    out
}

/// The items of a wrapped conversation (`traj`, `conversation` or `trajectory`, the first
/// present as [`super::container_inner`] picks), read straight into typed messages that borrow
/// from `element`: no `Value` tree, and the text of system and developer messages (in
/// tau-bench the policy prompt, a third of the bytes) is skipped unread. `None` when the
/// element holds anything this reading does not take exactly as [`items`] would (another
/// shape, a missing role, an unknown role, a duplicate key, an empty list): the caller then
/// reads it as a `Value`, which gives the same items or the error.
pub fn wrapped_items(element: &[u8]) -> Option<Vec<Item>> {
    let Object(w): Object<Wrapped<&RawValue>> = serde_json::from_slice(element).ok()?;
    w.items()
}

/// [`wrapped_items`] read from `reader`: each message becomes its item as it is read, so
/// memory holds the items and one message, never the element's bytes.
pub fn wrapped_items_from(reader: impl std::io::Read) -> Option<Vec<Item>> {
    let Object(w): Object<Wrapped<Box<RawValue>>> = serde_json::from_reader(reader).ok()?;
    w.items()
}

/// A wrapped conversation's message lists, each turned into items as it is read; `C` holds a
/// message's raw `content` (borrowed from the bytes, or boxed when read from a reader).
#[derive(serde::Deserialize)]
#[serde(bound = "C: serde::Deserialize<'de> + std::ops::Deref<Target = RawValue>")]
struct Wrapped<C> {
    #[serde(default, deserialize_with = "present")]
    traj: Option<ItemList<C>>,
    #[serde(default, deserialize_with = "present")]
    conversation: Option<ItemList<C>>,
    #[serde(default, deserialize_with = "present")]
    trajectory: Option<ItemList<C>>,
}

/// A present key must hold a list of messages (`null` is not taken for absent).
fn present<'de, D: serde::Deserializer<'de>, T: serde::Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

impl<C> Wrapped<C> {
    fn items(self) -> Option<Vec<Item>> {
        let list = self.traj.or(self.conversation).or(self.trajectory).filter(|l| l.messages > 0)?;
        Some(list.items)
    }
}

/// The items of a list of messages, and how many messages it held.
struct ItemList<C> {
    items: Vec<Item>,
    messages: usize,
    content: std::marker::PhantomData<C>,
}

impl<'de, C: serde::Deserialize<'de> + std::ops::Deref<Target = RawValue>> serde::Deserialize<'de> for ItemList<C> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<C>(std::marker::PhantomData<C>);
        impl<'de, C: serde::Deserialize<'de> + std::ops::Deref<Target = RawValue>> serde::de::Visitor<'de> for Visit<C> {
            type Value = ItemList<C>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of messages")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<ItemList<C>, A::Error> {
                let mut list = ItemList { items: Vec::new(), messages: 0, content: self.0 };
                while let Some(Object(m)) = seq.next_element::<Object<Message<'de, C>>>()? {
                    list.messages += 1;
                    if let Some(item) = m.item().ok_or_else(|| serde::de::Error::custom("not read typed"))? {
                        list.items.push(item);
                    }
                }
                Ok(list)
            }
        }
        d.deserialize_seq(Visit(std::marker::PhantomData))
    }
}

impl<C: std::ops::Deref<Target = RawValue>> Message<'_, C> {
    /// The message's item (`None` inside for the prompts that are skipped), or `None` when
    /// [`items`] might take it differently.
    fn item(self) -> Option<Option<Item>> {
        let text = |raw: Option<C>| match raw.as_deref().map(RawValue::get) {
            None => Some(String::new()),
            Some(raw) if raw.starts_with('"') => serde_json::from_str(raw).ok(),
            Some(raw) => serde_json::from_str(raw).ok().map(|v: Value| text_of(&v)),
        };
        Some(Some(match &*self.role {
            "system" | "developer" => return Some(None),
            "user" => Item::User(text(self.content)?),
            "assistant" => {
                let mut calls: Vec<CallItem> =
                    self.tool_calls.unwrap_or_default().into_iter().map(|c| c.0.item()).collect();
                calls.extend(self.function_call.map(|f| f.0.item(None)));
                Item::model(text(self.content), calls)
            }
            "tool" => Item::Result {
                id: self.tool_call_id.map(Cow::into_owned),
                name: self.name.map(Cow::into_owned),
                content: text(self.content)?,
                flag: None,
            },
            "function" => Item::Result {
                id: None,
                name: self.name.map(Cow::into_owned),
                content: text(self.content)?,
                flag: None,
            },
            _ => return None,
        }))
    }
}

/// A struct read only from a JSON object: derived structs also take a list, field by position,
/// which the `Value` reading never does.
struct Object<T>(T);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = Object<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Object<T>, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Object)
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
    }
}

/// One Chat Completions message as [`wrapped_items`] reads it; `content` is kept raw and read
/// only for the roles whose text is used.
#[derive(serde::Deserialize)]
#[serde(bound(deserialize = "C: serde::Deserialize<'de>"))]
struct Message<'a, C> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(default)]
    content: Option<C>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<Object<ToolCall<'a>>>>,
    #[serde(borrow, default)]
    function_call: Option<Object<Function<'a>>>,
    #[serde(borrow, default)]
    tool_call_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct ToolCall<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<Object<Function<'a>>>,
}

impl ToolCall<'_> {
    fn item(self) -> CallItem {
        let id = self.id.map(Cow::into_owned);
        match self.function {
            Some(Object(f)) => f.item(id),
            None => CallItem { id, name: String::new(), args: parse_args("{}") },
        }
    }
}

#[derive(serde::Deserialize)]
struct Function<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

impl Function<'_> {
    fn item(self, id: Option<String>) -> CallItem {
        CallItem {
            id,
            name: self.name.map(Cow::into_owned).unwrap_or_default(),
            args: parse_args(self.arguments.as_deref().unwrap_or("{}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The items [`items`] gives for a wrapped element read as a `Value`.
    fn by_value(element: &str) -> Option<Vec<Item>> {
        let v: Value = serde_json::from_str(element).unwrap();
        let list = super::super::WRAPPER_KEYS.iter().find_map(|k| v.get(*k))?.as_array()?;
        items(list, "").ok()
    }

    #[test]
    fn typed_reading_equals_value_reading_on_the_corpus() {
        let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus");
        let text = std::fs::read_to_string(corpus.join("tau-bench_gpt-4o-airline.json")).unwrap();
        let elements: Vec<Value> = serde_json::from_str(&text).unwrap();
        for e in &elements {
            let s = e.to_string();
            let typed = wrapped_items(s.as_bytes()).expect("tau-bench reads typed");
            assert_eq!(wrapped_items_from(s.as_bytes()).as_ref(), Some(&typed), "from a reader");
            assert_eq!(Some(typed), by_value(&s));
        }
    }

    #[test]
    fn typed_reading_takes_every_field_as_the_value_reading_does() {
        let cases = [
            r#"{"traj": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"text": "b"}]},
               {"content": null, "role": "assistant", "function_call": {"name": "f", "arguments": "{\"x\":1}"}},
               {"role": "function", "name": "f", "content": "Error: no"},
               {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "g"}}, {"id": "c2"}]},
               {"role": "tool", "tool_call_id": "c1", "content": 42},
               {"role": "system", "content": {"not": "read"}}, {"role": "developer", "content": "x"},
               {"role": "user"}]}"#,
            r#"{"info": {"x": [1, "two"]}, "conversation": [{"role": "assistant", "content": "  "}]}"#,
            r#"{"traj": [{"role": "system", "content": "only a prompt"}]}"#,
        ];
        for case in cases {
            let typed = wrapped_items(case.as_bytes()).expect("reads typed");
            assert_eq!(wrapped_items_from(case.as_bytes()).as_ref(), Some(&typed), "from a reader: {case}");
            assert_eq!(Some(typed), by_value(case), "{case}");
        }
    }

    /// Whatever the typed reading might take differently, it leaves to the `Value` reading.
    #[test]
    fn typed_reading_declines_what_it_cannot_take_exactly() {
        for case in [
            r#"{"traj": null, "conversation": [{"role": "user", "content": "a"}]}"#,
            r#"{"traj": []}"#,
            r#"{"traj": [{"role": "robot", "content": "a"}]}"#,
            r#"{"traj": [{"role": "user", "role": "tool", "content": "a"}]}"#,
            r#"{"traj": [{"role": "tool", "tool_call_id": 7, "content": "a"}]}"#,
            r#"{"traj": [{"content": "a"}]}"#,
            r#"{"traj": [{"role": "assistant", "tool_calls": "none"}]}"#,
            r#"{"traj": [{"role": "assistant", "function_call": "auto"}]}"#,
            r#"{"traj": ["hello"]}"#,
            r#"{"traj": [["user", "a"]]}"#,
            r#"{"traj": [{"role": "assistant", "tool_calls": [["c1"]]}]}"#,
            r#"{"traj": [{"role": "assistant", "function_call": ["f", "{}"]}]}"#,
            r#"[[{"role": "user", "content": "a"}]]"#,
        ] {
            assert_eq!(wrapped_items(case.as_bytes()), None, "{case}");
            assert_eq!(wrapped_items_from(case.as_bytes()), None, "from a reader: {case}");
        }
    }
}
