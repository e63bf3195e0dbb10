//! Files of OpenAI Chat conversations read fast: a wrapped conversation (tau-bench's `traj`)
//! read straight into typed, borrowed messages. What a Chat message means is the provider
//! layer's ([`crate::provider::openai_chat`]); this reading gives the same items or steps aside.

use std::borrow::Cow;

use serde::de::DeserializeSeed;

use serde_json::Value;
use serde_json::value::RawValue;

use super::conversation::{CallItem, Item, TraceBuilder, parse_args, text_of};
use crate::provider::openai_chat::error_flag;

/// The trace of a wrapped conversation (`traj`, `conversation` or `trajectory`, the first
/// present as [`super::container_inner`] picks), its messages read straight into typed
/// messages that borrow from `element` and handed on one by one: no `Value` tree, and the
/// text of system and developer messages (in tau-bench the policy prompt, a third of the
/// bytes) is skipped unread. `None` when the
/// element holds anything this reading does not take exactly as the provider layer's reading would (another
/// shape, a missing role, an unknown role, a duplicate key, an empty list, several lists): the
/// caller then reads it as a `Value`, which gives the same trace or the error. `objects` (the
/// JSON objects the element opens, an upper bound on its events) sizes the trace once.
pub fn wrapped_trace(element: &[u8], objects: usize) -> Option<TraceBuilder> {
    wrapped_trace_with::<&RawValue, _>(serde_json::Deserializer::from_slice(element), objects, element.len())
}

/// [`wrapped_trace`] read from `reader` (`len` bytes): each message becomes its events as it is
/// read, so memory holds the events and one message, never the element's bytes nor its items.
pub fn wrapped_trace_from(reader: impl std::io::Read, objects: usize, len: usize) -> Option<TraceBuilder> {
    wrapped_trace_with::<Box<RawValue>, _>(serde_json::Deserializer::from_reader(reader), objects, len)
}

fn wrapped_trace_with<'de, C, R>(
    mut de: serde_json::Deserializer<R>,
    objects: usize,
    len: usize,
) -> Option<TraceBuilder>
where
    C: serde::Deserialize<'de> + std::ops::Deref<Target = RawValue>,
    R: serde_json::de::Read<'de>,
{
    // Every event but the last comes from an object (a message, a tool call); the bound is
    // capped so that a file of nested objects cannot reserve far more than it could fill.
    let mut trace = TraceBuilder::new(Vec::new(), objects.min(len / 16) + 1);
    Wrapped { trace: &mut trace, content: std::marker::PhantomData::<C> }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(trace)
}

/// A wrapped conversation: an object whose one list of messages (under a key of
/// [`super::WRAPPER_KEYS`]) is turned into events as it is read, every other value skipped;
/// `C` holds a message's raw `content` (borrowed from the bytes, or boxed when read from a
/// reader).
struct Wrapped<'t, C> {
    trace: &'t mut TraceBuilder,
    content: std::marker::PhantomData<C>,
}

impl<'de, C: serde::Deserialize<'de> + std::ops::Deref<Target = RawValue>> serde::de::DeserializeSeed<'de>
    for Wrapped<'_, C>
{
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, C: serde::Deserialize<'de> + std::ops::Deref<Target = RawValue>> serde::de::Visitor<'de> for Wrapped<'_, C> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object with one list of messages")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        use serde::de::Error;
        let mut lists = 0;
        while let Some(WrapperKey(is_list)) = map.next_key()? {
            if !is_list {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            }
            lists += 1;
            // Several lists (or one key twice) are the `Value` reading's: it picks by key order.
            if lists > 1 {
                return Err(A::Error::custom("several lists of messages"));
            }
            let messages = map.next_value_seed(Messages { trace: &mut *self.trace, content: self.content })?;
            if messages == 0 {
                return Err(A::Error::custom("an empty list of messages"));
            }
        }
        if lists == 0 {
            return Err(A::Error::custom("no list of messages"));
        }
        Ok(())
    }
}

/// Whether an object key is one of [`super::WRAPPER_KEYS`].
struct WrapperKey(bool);

impl<'de> serde::Deserialize<'de> for WrapperKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = WrapperKey;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, k: &str) -> Result<WrapperKey, E> {
                Ok(WrapperKey(super::WRAPPER_KEYS.contains(&k)))
            }
        }
        d.deserialize_str(Visit)
    }
}

/// A list of messages, each pushed into the trace as it is read; its value is how many
/// messages the list held.
struct Messages<'t, C> {
    trace: &'t mut TraceBuilder,
    content: std::marker::PhantomData<C>,
}

impl<'de, C: serde::Deserialize<'de> + std::ops::Deref<Target = RawValue>> serde::de::DeserializeSeed<'de>
    for Messages<'_, C>
{
    type Value = usize;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, C: serde::Deserialize<'de> + std::ops::Deref<Target = RawValue>> serde::de::Visitor<'de> for Messages<'_, C> {
    type Value = usize;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of messages")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let mut messages = 0;
        while let Some(Object(m)) = seq.next_element::<Object<Message<'de, C>>>()? {
            messages += 1;
            if let Some(item) = m.item().ok_or_else(|| serde::de::Error::custom("not read typed"))? {
                self.trace.push(item);
            }
        }
        Ok(messages)
    }
}

impl<C: std::ops::Deref<Target = RawValue>> Message<'_, C> {
    /// The message's item (`None` inside for the prompts that are skipped), or `None` when
    /// the provider layer's reading might take it differently.
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
                flag: error_flag(self.error.as_ref()),
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

/// One Chat Completions message as [`wrapped_trace`] reads it; `content` is kept raw and read
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
    /// A harness's own failure field on a tool message.
    #[serde(default)]
    error: Option<Value>,
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

    use super::super::conversation::{Conversation, FailureRules, to_trace};
    use crate::provider::Provider;
    use crate::provider::openai_chat::OpenAiChat;
    use crate::trace::{Header, Trace};

    fn header() -> Header {
        Header::new("c".into(), "openai-chat", None, None)
    }

    /// The trace the provider layer's reading gives for a wrapped element read as a `Value`.
    fn by_value(element: &str) -> Option<Trace> {
        let v: Value = serde_json::from_str(element).unwrap();
        let list = super::super::WRAPPER_KEYS.iter().find_map(|k| v.get(*k))?.as_array()?;
        let h = header();
        let conv = Conversation {
            id: h.id,
            source_format: h.source_format,
            items: OpenAiChat.items(list, "").ok()?,
            ..Conversation::default()
        };
        Some(to_trace(conv, &FailureRules::default()))
    }

    fn typed(element: &[u8], objects: usize) -> Option<Trace> {
        wrapped_trace(element, objects).map(|b| b.finish(header(), &FailureRules::default()))
    }

    fn typed_from(element: &[u8], objects: usize) -> Option<Trace> {
        wrapped_trace_from(element, objects, element.len()).map(|b| b.finish(header(), &FailureRules::default()))
    }

    #[test]
    fn typed_reading_equals_value_reading_on_the_corpus() {
        let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus");
        let text = std::fs::read_to_string(corpus.join("tau-bench_gpt-4o-airline.json")).unwrap();
        let elements: Vec<Value> = serde_json::from_str(&text).unwrap();
        for e in &elements {
            let s = e.to_string();
            let trace = typed(s.as_bytes(), 0).expect("tau-bench reads typed");
            assert_eq!(typed_from(s.as_bytes(), 0).as_ref(), Some(&trace), "from a reader");
            assert_eq!(Some(trace), by_value(&s));
        }
    }

    /// The splitter's count of objects sizes a conversation's events once: they never grow.
    #[test]
    fn events_are_sized_once_by_the_objects_the_element_opens() {
        use super::super::elements::{Elements, Layout};
        let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus");
        let file = std::fs::File::open(corpus.join("tau-bench_gpt-4o-airline.json")).unwrap();
        let mut elements = Elements::new(file, Layout::Array, 1 << 30);
        let mut checked = 0;
        while let Some(e) = elements.next() {
            let e = e.unwrap();
            let sized = e.objects.min(e.bytes.len() / 16) + 1;
            for trace in [typed(e.bytes, e.objects), typed_from(e.bytes, e.objects)] {
                let events = trace.expect("tau-bench reads typed").events;
                assert_eq!(events.capacity(), sized, "element {}: {} events", e.index, events.len());
            }
            checked += 1;
        }
        assert!(checked > 10, "{checked} elements");
    }

    /// A tool message's `error` field is its structural flag, both ways, in both readings.
    #[test]
    fn a_tool_messages_error_field_is_its_flag() {
        let case = r#"{"traj": [{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f"}}, {"id": "b", "function": {"name": "f"}}, {"id": "c", "function": {"name": "f"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "fine", "error": true},
            {"role": "tool", "tool_call_id": "b", "content": "Error: x", "error": false},
            {"role": "tool", "tool_call_id": "c", "content": "", "error": {"type": "parsing", "message": "bad"}}]}"#;
        let trace = typed(case.as_bytes(), 0).expect("reads typed");
        let ok: Vec<bool> = trace
            .events
            .iter()
            .filter_map(|e| match e {
                crate::trace::TraceEvent::ToolResult { ok, .. } => Some(*ok),
                _ => None,
            })
            .collect();
        assert_eq!(ok, [false, true, false]);
        assert_eq!(Some(trace), by_value(case));
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
            r#"{"traj": [{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f"}}, {"id": "b", "function": {"name": "f"}}, {"id": "c", "function": {"name": "f"}}]},
               {"role": "tool", "tool_call_id": "a", "content": "fine", "error": true},
               {"role": "tool", "tool_call_id": "b", "content": "Error: x", "error": false},
               {"role": "tool", "tool_call_id": "c", "content": "", "error": {"type": "parsing", "message": "bad"}}]}"#,
        ];
        for case in cases {
            let trace = typed(case.as_bytes(), 0).expect("reads typed");
            assert_eq!(typed_from(case.as_bytes(), 0).as_ref(), Some(&trace), "from a reader: {case}");
            assert_eq!(Some(trace), by_value(case), "{case}");
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
            assert_eq!(typed(case.as_bytes(), 0), None, "{case}");
            assert_eq!(typed_from(case.as_bytes(), 0), None, "from a reader: {case}");
        }
    }
}
