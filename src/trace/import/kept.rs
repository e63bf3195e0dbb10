//! Parses a JSON text into a [`Value`] holding only the object keys a reader reads: the others
//! are skipped as they are scanned, never built, which is most of the cost of a session log's
//! line (timestamps, working directories, versions, copies of tool results).

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Which keys of an object are kept.
pub enum Keep {
    /// The whole value.
    All,
    /// Of an object, the keys of these lists (each kept as said); any other value whole.
    Keys(&'static [&'static [(&'static str, Keep)]]),
    /// Of an array, each element kept as said; any other value whole.
    Each(&'static Keep),
    /// A string, number, boolean or null whole; an array or object empty (its kind is all a
    /// reader asks of it, e.g. whether a model call recorded its input).
    Shallow,
}

/// `text` parsed, keeping what `keep` says; `None` when it is not one JSON value.
pub fn parse(text: &str, keep: &'static Keep) -> Option<Value> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = Kept(keep).deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(v)
}

struct Kept(&'static Keep);

impl<'de> DeserializeSeed<'de> for Kept {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        match self.0 {
            Keep::All => serde::Deserialize::deserialize(d),
            Keep::Keys(keys) => d.deserialize_any(KeysVisitor(keys)),
            Keep::Each(each) => d.deserialize_any(EachVisitor(each)),
            Keep::Shallow => d.deserialize_any(ShallowVisitor),
        }
    }
}

/// An object key, borrowed from the text where it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// The scalar visits every visitor shares: the value itself.
macro_rules! scalars {
    () => {
        fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
            Ok(Value::Bool(b))
        }

        fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
            Ok(Value::from(n))
        }

        fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
            Ok(Value::from(n))
        }

        fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
            Ok(Value::from(n))
        }

        fn visit_str<E>(self, s: &str) -> Result<Value, E> {
            Ok(Value::String(s.to_owned()))
        }

        fn visit_string<E>(self, s: String) -> Result<Value, E> {
            Ok(Value::String(s))
        }

        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
    };
}

struct KeysVisitor(&'static [&'static [(&'static str, Keep)]]);

impl<'de> Visitor<'de> for KeysVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(Key(key)) = map.next_key()? {
            match self.0.iter().flat_map(|keys| keys.iter()).find(|(k, _)| *k == key) {
                Some((_, keep)) => {
                    let v = map.next_value_seed(Kept(keep))?;
                    out.insert(key.into_owned(), v);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(out))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    scalars!();
}

struct EachVisitor(&'static Keep);

impl<'de> Visitor<'de> for EachVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Kept(self.0))? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        serde::Deserialize::deserialize(serde::de::value::MapAccessDeserializer::new(map))
    }

    scalars!();
}

struct ShallowVisitor;

impl<'de> Visitor<'de> for ShallowVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Array(Vec::new()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Value::Object(Map::new()))
    }

    scalars!();
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    static KEEP: Keep = Keep::Keys(&[&[("a", Keep::All)], &[("m", Keep::Keys(&[&[("x", Keep::All)]]))]]);

    /// Listed keys are kept (nested lists too), the others dropped, values of any other kind
    /// kept whole; escaped keys match; the last of a repeated key wins, as in a full parse.
    #[test]
    fn keeps_the_listed_keys() {
        let text = r#"{"a": {"deep": [1, 2.5, null]}, "b": {"big": "x"}, "m": {"x": true, "y": 1}, "\u0061": 7}"#;
        assert_eq!(parse(text, &KEEP), Some(json!({"a": 7, "m": {"x": true}})));
        assert_eq!(parse(r#"{"m": "text"}"#, &KEEP), Some(json!({"m": "text"})));
        assert_eq!(parse(r#"{"m": [1, {"x": 1, "y": 2}]}"#, &KEEP), Some(json!({"m": [1, {"x": 1, "y": 2}]})));
        for scalar in ["-3", "18446744073709551615", "1e3", "\"s\\n\"", "null", "false", "[]"] {
            assert_eq!(parse(scalar, &KEEP), serde_json::from_str(scalar).ok(), "{scalar}");
        }
    }

    static EACH: Keep = Keep::Keys(&[&[("l", Keep::Each(&Keep::Keys(&[&[("x", Keep::All)]]))), ("s", Keep::Shallow)]]);

    /// `Each` keeps each element of a list as said (any other value whole); `Shallow` keeps a
    /// scalar whole and an array or object empty, so only its kind is left.
    #[test]
    fn keeps_each_element_and_shallow_kinds() {
        let text = r#"{"l": [{"x": 1, "y": 2}, 3, [4]], "s": [1, {"a": 2}]}"#;
        assert_eq!(parse(text, &EACH), Some(json!({"l": [{"x": 1}, 3, [4]], "s": []})));
        assert_eq!(parse(r#"{"l": {"y": 1}, "s": {"a": [1]}}"#, &EACH), Some(json!({"l": {"y": 1}, "s": {}})));
        for scalar in ["\"t\"", "1", "null", "true"] {
            let whole: Value = serde_json::from_str(scalar).unwrap();
            assert_eq!(parse(&format!(r#"{{"s": {scalar}}}"#), &EACH), Some(json!({ "s": whole })));
        }
        assert_eq!(parse(r#"{"s": [1,}"#, &EACH), None);
    }

    /// What a full parse refuses, this refuses: broken JSON, trailing text, skipped broken values.
    #[test]
    fn refuses_what_json_refuses() {
        for bad in [r#"{"a": 1"#, r#"{"a": 1} {"#, r#"{"b": [1,}"#, r#"{"b": tru}"#, ""] {
            assert_eq!(parse(bad, &KEEP), None, "{bad}");
        }
    }
}
