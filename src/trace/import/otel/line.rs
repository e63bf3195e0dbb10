//! An OTLP/JSON request (one line of a Collector's file export) read from its text straight
//! into spans: attributes and events are built as they are read, with no `Value` of the whole
//! line, and every span comes out as the whole reading ([`super::span_of`]) makes it.
//!
//! A span that is no object is refused (`None`, and the file goes to the whole reading, which
//! says why).

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::{Attrs, Event, Resource, Span, any_value, flatten, key_values, span_with};
use crate::trace::import::lenient::{List, Loose, Obj};

/// The spans of an OTLP/JSON request, in the order the whole reading lists them; `None` when
/// the line is no request (no `resourceSpans` / `resource_spans`) or a span is no object.
/// A span without an id of its own is not numbered yet ([`Span::numbered`]).
pub(super) fn spans(line: &str) -> Option<Vec<Span>> {
    let request: Request = serde_json::from_str(line).ok()?;
    let resources = request.camel.or(request.snake)?;
    let texts = resources.into_vec().into_iter().filter_map(Obj::into_object).flat_map(Resource::into_spans);
    let mut out = Vec::new();
    for text in texts {
        let Obj::Object(text) = text else { return None };
        out.push(text.into_span());
    }
    Some(out)
}

/// A request's `resourceSpans` and `resource_spans`, each when its key is there.
#[derive(Default)]
struct Request<'a> {
    camel: Option<List<Obj<Resource<Obj<SpanText<'a>>>>>>,
    snake: Option<List<Obj<Resource<Obj<SpanText<'a>>>>>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Request<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Request<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an OTLP/JSON request")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Request<'a>, A::Error> {
                let mut r = Request::default();
                while let Some(key) = map.next_key_seed(Named(&["resourceSpans", "resource_spans"]))? {
                    match key {
                        Name::Known(0) => r.camel = Some(map.next_value()?),
                        Name::Known(_) => r.snake = Some(map.next_value()?),
                        Name::Other(_) => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(r)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// A span as read: the small fields [`span_with`] looks at, its attributes and events.
#[derive(Default)]
struct SpanText<'a> {
    fields: Map<String, Value>,
    attributes: Attributes<'a>,
    events: Option<List<Obj<EventText<'a>>>>,
    /// Flat `attributes.<key>` columns, by key.
    columns: Vec<(Cow<'a, str>, Value)>,
}

/// The fields of a span read here: its attributes and events, then those [`span_with`] reads
/// (dotted ones as keys of their own).
const FIELDS: [&str; 30] = [
    "attributes",
    "events",
    "name",
    "traceId",
    "trace_id",
    "context.trace_id",
    "spanContext.traceId",
    "context",
    "spanContext",
    "spanId",
    "span_id",
    "context.span_id",
    "spanContext.spanId",
    "parentSpanId",
    "parent_span_id",
    "parent_id",
    "parentSpanContext.spanId",
    "parentSpanContext",
    "startTimeUnixNano",
    "start_time_unix_nano",
    "start_time",
    "startTime",
    "status.code",
    "status.status_code",
    "status_code",
    "status",
    "status.message",
    "status.description",
    "status_message",
    "span_kind",
];

const ATTRIBUTES: usize = 0;
const EVENTS: usize = 1;

impl SpanText<'_> {
    /// The span, not numbered yet.
    fn into_span(self) -> Span {
        let events = self.events.map(List::into_vec).unwrap_or_default().into_iter().map(EventText::event).collect();
        let mut attrs = self.attributes.flattened();
        for (k, v) in as_object(self.columns) {
            flatten(k.strip_prefix("attributes.").unwrap_or(&k), v, &mut attrs);
        }
        span_with(&Value::Object(self.fields), attrs, events)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for SpanText<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = SpanText<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a span")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SpanText<'a>, A::Error> {
                let mut s = SpanText::default();
                while let Some(key) = map.next_key_seed(Named(&FIELDS))? {
                    match key {
                        Name::Known(ATTRIBUTES) => s.attributes = map.next_value()?,
                        Name::Known(EVENTS) => s.events = Some(map.next_value()?),
                        Name::Known(i) => {
                            s.fields.insert(FIELDS[i].to_owned(), map.next_value()?);
                        }
                        Name::Other(k) if k.starts_with("attributes.") => {
                            s.columns.push((k, map.next_value()?));
                        }
                        Name::Other(_) => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(s)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// An event: its name and attributes (an event that is no object has neither).
#[derive(Default, Deserialize)]
#[serde(default)]
struct EventText<'a> {
    #[serde(borrow)]
    name: Loose<'a>,
    #[serde(borrow)]
    attributes: Attributes<'a>,
}

impl EventText<'_> {
    fn event(e: Obj<EventText>) -> Event {
        match e {
            Obj::Object(e) => {
                Event { name: e.name.as_str().unwrap_or_default().to_owned(), attrs: e.attributes.flattened() }
            }
            _ => Event { name: String::new(), attrs: Attrs::new() },
        }
    }
}

/// A span's or event's `attributes`: an OTLP list of `{key, value}`, or an object.
#[derive(Default)]
enum Attributes<'a> {
    #[default]
    None,
    List(Vec<Obj<KeyValue<'a>>>),
    Object(Value),
}

impl Attributes<'_> {
    /// Flattened as [`super::attributes`] flattens them: the list as an object (the last of a
    /// key given twice, keys in order), each value as plain JSON.
    fn flattened(self) -> Attrs {
        let mut out = Attrs::new();
        match self {
            Attributes::None => {}
            Attributes::Object(o) => flatten("", o, &mut out),
            Attributes::List(list) => {
                let pairs = list.into_iter().filter_map(|kv| match kv {
                    Obj::Object(KeyValue { key: Loose::Str(k), value }) => Some((k, value.plain())),
                    _ => None,
                });
                let pairs: Vec<(Cow<str>, Value)> = pairs.collect();
                if pairs.iter().all(|(_, v)| !v.is_object() && !v.is_array()) {
                    // Each value is its own key: in file order, the last of a key wins (a
                    // `null` last leaves none), as in an object of them.
                    for (k, v) in pairs {
                        match v {
                            Value::Null => out.remove(k.as_ref()),
                            v => out.insert(k.into_owned(), v),
                        };
                    }
                } else {
                    // A value that spreads over dotted keys may meet another key: in key order.
                    for (k, v) in as_object(pairs) {
                        flatten(&k, v, &mut out);
                    }
                }
            }
        }
        out
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Attributes<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Attributes<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("attributes")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Attributes<'a>, A::Error> {
                Vec::deserialize(SeqAccessDeserializer::new(seq)).map(Attributes::List)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Attributes<'a>, A::Error> {
                Value::deserialize(MapAccessDeserializer::new(map)).map(Attributes::Object)
            }
            fn visit_str<E>(self, _: &str) -> Result<Attributes<'a>, E> {
                Ok(Attributes::None)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Attributes<'a>, E> {
                Ok(Attributes::None)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Attributes<'a>, E> {
                Ok(Attributes::None)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Attributes<'a>, E> {
                Ok(Attributes::None)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Attributes<'a>, E> {
                Ok(Attributes::None)
            }
            fn visit_unit<E>(self) -> Result<Attributes<'a>, E> {
                Ok(Attributes::None)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// Pairs as an object of them holds them: the last value of a key given twice, keys in order.
fn as_object<V>(mut pairs: Vec<(Cow<str>, V)>) -> Vec<(Cow<str>, V)> {
    pairs.reverse();
    pairs.sort_by(|(a, _), (b, _)| a.cmp(b));
    pairs.dedup_by(|(a, _), (b, _)| a == b);
    pairs
}

/// One `{key, value}` of an OTLP attribute list.
#[derive(Default, Deserialize)]
#[serde(default)]
struct KeyValue<'a> {
    #[serde(borrow)]
    key: Loose<'a>,
    value: AnyValue,
}

/// An OTLP `AnyValue` as read: the value of its first kind (in [`KINDS`]' order, as an object
/// lists them) that is not `null`, or a value that is no object.
#[derive(Default)]
enum AnyValue {
    #[default]
    Absent,
    /// No kind, or each `null`.
    Empty,
    Kind(usize, Value),
    Plain(Value),
}

/// An `AnyValue`'s kinds, camelCase and snake_case, in alphabetical order.
const KINDS: [&str; 14] = [
    "arrayValue",
    "array_value",
    "boolValue",
    "bool_value",
    "bytesValue",
    "bytes_value",
    "doubleValue",
    "double_value",
    "intValue",
    "int_value",
    "kvlistValue",
    "kvlist_value",
    "stringValue",
    "string_value",
];

impl AnyValue {
    /// As plain JSON, as [`super::any_value`] makes it.
    fn plain(self) -> Value {
        let (i, x) = match self {
            AnyValue::Absent | AnyValue::Empty => return Value::Null,
            AnyValue::Plain(v) => return v,
            AnyValue::Kind(i, x) => (i, x),
        };
        match KINDS[i] {
            "intValue" | "int_value" => x.as_str().and_then(|s| s.parse::<i64>().ok()).map(Value::from).unwrap_or(x),
            "arrayValue" | "array_value" => {
                let values = x.get("values").and_then(Value::as_array).into_iter().flatten();
                Value::Array(values.map(any_value).collect())
            }
            "kvlistValue" | "kvlist_value" => Value::Object(key_values(x.get("values"))),
            _ => x,
        }
    }
}

impl<'de> Deserialize<'de> for AnyValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = AnyValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an OTLP AnyValue")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AnyValue, A::Error> {
                // Nearly always one kind: the others' table is made only for a second.
                let mut one: Option<(usize, Value)> = None;
                let mut kinds: Option<Box<[Option<Value>; 14]>> = None;
                while let Some(key) = map.next_key_seed(Named(&KINDS))? {
                    let Name::Known(i) = key else {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    };
                    let x = map.next_value()?;
                    match (&mut kinds, one.take()) {
                        (Some(k), _) => k[i] = Some(x),
                        (None, None) => one = Some((i, x)),
                        (None, Some((j, y))) => {
                            let mut k: Box<[Option<Value>; 14]> = Box::default();
                            k[j] = Some(y);
                            k[i] = Some(x);
                            kinds = Some(k);
                        }
                    }
                }
                let first = match kinds {
                    Some(k) => k.into_iter().enumerate().find_map(|(i, x)| Some((i, x.filter(|x| !x.is_null())?))),
                    None => one.filter(|(_, x)| !x.is_null()),
                };
                Ok(first.map_or(AnyValue::Empty, |(i, x)| AnyValue::Kind(i, x)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<AnyValue, A::Error> {
                Value::deserialize(SeqAccessDeserializer::new(seq)).map(AnyValue::Plain)
            }
            fn visit_str<E>(self, s: &str) -> Result<AnyValue, E> {
                Ok(AnyValue::Plain(Value::from(s)))
            }
            fn visit_u64<E>(self, n: u64) -> Result<AnyValue, E> {
                Ok(AnyValue::Plain(Value::from(n)))
            }
            fn visit_i64<E>(self, n: i64) -> Result<AnyValue, E> {
                Ok(AnyValue::Plain(Value::from(n)))
            }
            fn visit_f64<E>(self, n: f64) -> Result<AnyValue, E> {
                Ok(AnyValue::Plain(Value::from(n)))
            }
            fn visit_bool<E>(self, b: bool) -> Result<AnyValue, E> {
                Ok(AnyValue::Plain(Value::from(b)))
            }
            fn visit_unit<E>(self) -> Result<AnyValue, E> {
                Ok(AnyValue::Plain(Value::Null))
            }
        }
        d.deserialize_any(V)
    }
}

/// A key read as its place among `names`, without building it.
struct Named(&'static [&'static str]);

enum Name<'de> {
    Known(usize),
    Other(Cow<'de, str>),
}

impl<'de> DeserializeSeed<'de> for Named {
    type Value = Name<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Name<'de>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Named {
    type Value = Name<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_borrowed_str<E>(self, k: &'de str) -> Result<Name<'de>, E> {
        Ok(self.0.iter().position(|n| *n == k).map_or(Name::Other(Cow::Borrowed(k)), Name::Known))
    }
    fn visit_str<E>(self, k: &str) -> Result<Name<'de>, E> {
        Ok(self.0.iter().position(|n| *n == k).map_or_else(|| Name::Other(Cow::Owned(k.to_owned())), Name::Known))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{otlp_spans, span_of};
    use super::*;

    /// Each span of a request reads as the whole reading reads it, in the corners too: a key
    /// given twice, an `AnyValue` with several kinds or a `null` one, kvlists and lists of
    /// objects flattened, `attributes.<key>` columns, events that are no object, ids as
    /// numbers, scopes under every name, resources and scopes that are no object.
    #[test]
    fn spans_read_as_the_whole_reading_reads_them() {
        let kv = |k: &str, v: Value| json!({"key": k, "value": v});
        let span = json!({
            "traceId": "0xABC", "spanId": 7, "parentSpanId": null, "name": "chat",
            "startTimeUnixNano": "1700000000000000001",
            "status": {"code": "STATUS_CODE_ERROR", "message": "boom"},
            "attributes": [
                kv("b", json!({"stringValue": "first"})),
                kv("a", json!({"intValue": "42"})),
                kv("b", json!({"stringValue": "second"})),
                kv("k", json!({"kvlistValue": {"values": [kv("x", json!({"boolValue": true}))]}})),
                kv("l", json!({"arrayValue": {"values": [{"stringValue": "s"}, {"kvlistValue": {"values": []}}]}})),
                kv("m", json!({"stringValue": null, "doubleValue": 1.5})),
                kv("n", json!({"unknown": 1})),
                kv("p", json!("plain")),
                kv("k.x", json!({"stringValue": "literal"})),
                {"key": 3, "value": {"stringValue": "no key"}},
                "not an object",
            ],
            "attributes.z": {"deep": [{"q": 1}]},
            "attributes.a": "column",
            "events": [{"name": "exception", "attributes": [kv("exception.message", json!({"stringValue": "x"}))]}, 5],
            "span_kind": "llm", "kind": 3, "links": [],
        });
        let plain = json!({"trace_id": "T2", "span_id": "S2", "name": "tool", "start_time": "2026-01-01T00:00:00Z",
            "status_code": "ERROR", "attributes": {"openinference.span.kind": "TOOL", "tool": {"name": "f"}}});
        let request = json!({"resourceSpans": [
            {"scopeSpans": [{"spans": [span]}, 1], "scope_spans": [{"spans": [plain]}], "instrumentationLibrarySpans": []},
            "not a resource",
        ]});
        let mut whole = Vec::new();
        otlp_spans(&request["resourceSpans"], &mut whole);
        let whole: Vec<Span> = whole.iter().enumerate().map(|(n, v)| span_of(v, 3 + n).unwrap()).collect();
        assert_eq!(whole.len(), 2);
        let numbered: Vec<Span> =
            spans(&request.to_string()).unwrap().into_iter().zip(3..).map(|(s, n)| s.numbered(n)).collect();
        assert_eq!(numbered, whole);
        // The corners above did matter: the reading is what the whole reading says.
        let s = &whole[0];
        assert_eq!((s.trace.as_str(), s.id.as_str(), s.kind.as_str()), ("abc", "7", "LLM"));
        assert_eq!(s.str("b"), Some("second"));
        assert_eq!(s.attrs.get("a"), Some(&json!("column")));
        assert_eq!(s.attrs.get("k.x"), Some(&json!("literal")));
        assert_eq!(s.attrs.get("l.0"), Some(&json!("s")));
        assert_eq!(s.attrs.get("m"), Some(&json!(1.5)));
        assert_eq!(s.attrs.get("z.deep.0.q"), Some(&json!(1)));
        assert!(!s.attrs.contains_key("n"));
        assert_eq!(s.events.len(), 2);
        assert_eq!(s.error.as_deref(), Some("boom"));
    }

    /// Scalar attributes take the short way (no sort): the last of a key still wins, and a
    /// `null` last still leaves none, as in the whole reading.
    #[test]
    fn scalar_attributes_read_as_an_object_of_them() {
        let kv = |k: &str, v: Value| json!({"key": k, "value": v});
        let attributes = json!([
            kv("a", json!({"stringValue": "1"})),
            kv("b", json!({"stringValue": "kept"})),
            kv("a", json!({"intValue": "2"})),
            kv("b", json!({"stringValue": null})),
            kv("c", json!(null)),
            kv("d", json!({"boolValue": false})),
        ]);
        let span = json!({"traceId": "t", "spanId": "s", "name": "x", "attributes": attributes});
        let request = json!({"resourceSpans": [{"scopeSpans": [{"spans": [span.clone()]}]}]});
        let line = spans(&request.to_string()).unwrap();
        assert_eq!(line, vec![span_of(&span, 0).unwrap()]);
        let keys: Vec<(&str, &Value)> = line[0].attrs.iter().map(|(k, v)| (k.as_str(), v)).collect();
        assert_eq!(keys, [("a", &json!(2)), ("d", &json!(false))]);
    }

    /// Every key [`span_with`] reads is kept: each dotted key as itself and as its outer key.
    #[test]
    fn fields_hold_every_key_span_with_reads() {
        use super::super::{PARENT_ID, SPAN_ID, START, STATUS_CODE, STATUS_MESSAGE, TRACE_ID};
        let keys = [TRACE_ID, SPAN_ID, PARENT_ID, &START, STATUS_CODE, STATUS_MESSAGE, &["name", "span_kind"]];
        for k in keys.into_iter().flatten() {
            assert!(FIELDS.contains(k), "{k}");
            let outer = k.split_once('.').map_or(*k, |(a, _)| a);
            assert!(FIELDS.contains(&outer), "{outer}");
        }
    }

    /// A span that is no object, and a line that is no request, are left to the whole reading.
    #[test]
    fn what_does_not_fit_is_refused() {
        assert!(spans(r#"{"resourceSpans": [{"scopeSpans": [{"spans": [1]}]}]}"#).is_none());
        assert!(spans(r#"{"name": "x", "traceId": "t", "spanId": "s", "attributes": {}}"#).is_none());
        assert!(spans("[]").is_none());
        assert_eq!(spans(r#"{"resourceSpans": null}"#).map(|s| s.len()), Some(0));
    }
}
