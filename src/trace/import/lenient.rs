//! Typed reading of JSON that is as forgiving as a lookup in a `Value`: a field of the wrong
//! kind reads as "not a string", "not an object", never as an error, so a reader can
//! deserialize its records straight from the text (strings borrowed where they have no
//! escapes, what it does not read skipped unbuilt) and get what `get(…).and_then(as_str)`
//! would have given it.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Any JSON value, kept when it is a string, a non-negative integer or a boolean.
#[derive(Debug, Default, Clone, PartialEq)]
pub enum Loose<'a> {
    /// The key is not there.
    #[default]
    Absent,
    Null,
    Str(Cow<'a, str>),
    U64(u64),
    Bool(bool),
    /// Another number, an array or an object (skipped).
    Other,
}

impl<'a> Loose<'a> {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Loose::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Loose::U64(n) => Some(*n),
            _ => None,
        }
    }

    /// The key is there (with any value, `null` too).
    pub fn is_present(&self) -> bool {
        !matches!(self, Loose::Absent)
    }

    /// The key is there with a value other than `null`.
    pub fn is_set(&self) -> bool {
        !matches!(self, Loose::Absent | Loose::Null)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Loose<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Loose<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Loose<'a>, E> {
                Ok(Loose::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Loose<'a>, E> {
                Ok(Loose::Str(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Loose<'a>, E> {
                Ok(Loose::Str(Cow::Owned(s)))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Loose<'a>, E> {
                Ok(Loose::U64(n))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Loose<'a>, E> {
                Ok(u64::try_from(n).map_or(Loose::Other, Loose::U64))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Loose<'a>, E> {
                Ok(Loose::Other)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Loose<'a>, E> {
                Ok(Loose::Bool(b))
            }
            fn visit_unit<E>(self) -> Result<Loose<'a>, E> {
                Ok(Loose::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Loose<'a>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Loose::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Loose<'a>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Loose::Other)
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A value read as `T` when it is an object.
#[derive(Debug, Default, Clone, PartialEq)]
pub enum Obj<T> {
    #[default]
    Absent,
    Null,
    Object(T),
    /// A string, number, boolean or array (skipped).
    Other,
}

impl<T> Obj<T> {
    pub fn object(&self) -> Option<&T> {
        match self {
            Obj::Object(t) => Some(t),
            _ => None,
        }
    }

    pub fn into_object(self) -> Option<T> {
        match self {
            Obj::Object(t) => Some(t),
            _ => None,
        }
    }

    /// The key is there with a value other than `null`.
    pub fn is_set(&self) -> bool {
        !matches!(self, Obj::Absent | Obj::Null)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ObjVisitor(PhantomData))
    }
}

struct ObjVisitor<T>(PhantomData<T>);

macro_rules! other_scalars {
    ($out:ty) => {
        fn visit_str<Er>(self, _: &str) -> Result<$out, Er> {
            Ok(Self::Value::other())
        }
        fn visit_u64<Er>(self, _: u64) -> Result<$out, Er> {
            Ok(Self::Value::other())
        }
        fn visit_i64<Er>(self, _: i64) -> Result<$out, Er> {
            Ok(Self::Value::other())
        }
        fn visit_f64<Er>(self, _: f64) -> Result<$out, Er> {
            Ok(Self::Value::other())
        }
        fn visit_bool<Er>(self, _: bool) -> Result<$out, Er> {
            Ok(Self::Value::other())
        }
    };
}

impl<T> Obj<T> {
    fn other() -> Self {
        Obj::Other
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
    type Value = Obj<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(Obj::Object)
    }
    fn visit_unit<E>(self) -> Result<Obj<T>, E> {
        Ok(Obj::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Obj<T>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Obj::Other)
    }
    other_scalars!(Obj<T>);
}

/// A value read as a list of `E` when it is an array.
#[derive(Debug, Default, Clone, PartialEq)]
pub enum List<E> {
    /// Absent, `null`, or not an array (skipped).
    #[default]
    NotList,
    List(Vec<E>),
}

impl<E> List<E> {
    fn other() -> Self {
        List::NotList
    }

    pub fn list(&self) -> Option<&[E]> {
        match self {
            List::List(l) => Some(l),
            List::NotList => None,
        }
    }

    /// The elements (none when it is no list).
    pub fn into_vec(self) -> Vec<E> {
        match self {
            List::List(l) => l,
            List::NotList => Vec::new(),
        }
    }
}

impl<'de, E: Deserialize<'de>> Deserialize<'de> for List<E> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<E>(PhantomData<E>);
        impl<'de, E: Deserialize<'de>> Visitor<'de> for V<E> {
            type Value = List<E>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<List<E>, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(e) = seq.next_element()? {
                    out.push(e);
                }
                Ok(List::List(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<List<E>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(List::NotList)
            }
            fn visit_unit<E2>(self) -> Result<List<E>, E2> {
                Ok(List::NotList)
            }
            other_scalars!(List<E>);
        }
        d.deserialize_any(V(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[derive(serde::Deserialize, Default, Debug, PartialEq)]
    #[serde(default)]
    struct Rec<'a> {
        #[serde(borrow)]
        s: Loose<'a>,
        #[serde(borrow)]
        o: Obj<Box<Rec<'a>>>,
        #[serde(borrow)]
        l: List<Loose<'a>>,
    }

    /// Each kind of value reads as a `Value` lookup would see it, from text and from a `Value`
    /// alike; strings without escapes are borrowed from the text.
    #[test]
    fn reads_as_a_value_lookup_would() {
        let text = r#"{"s": "plain", "o": {"s": "a\nb", "o": [1], "l": {"x": 1}}, "l": [1, -2, 2.5, true, null, "x", [], {}], "z": {"deep": [1]}}"#;
        let from_value: Value = serde_json::from_str(text).unwrap();
        for r in [serde_json::from_str::<Rec>(text).unwrap(), Rec::deserialize(&from_value).unwrap()] {
            assert!(matches!(r.s, Loose::Str(Cow::Borrowed("plain"))));
            let inner = r.o.object().unwrap();
            assert_eq!(inner.s.as_str(), Some("a\nb"));
            assert_eq!(inner.o, Obj::Other);
            assert_eq!(inner.l, List::NotList);
            assert_eq!(
                r.l.list().unwrap(),
                &[
                    Loose::U64(1),
                    Loose::Other,
                    Loose::Other,
                    Loose::Bool(true),
                    Loose::Null,
                    Loose::Str("x".into()),
                    Loose::Other,
                    Loose::Other
                ]
            );
        }
        let nulls = json!({"s": null, "o": null});
        let r = Rec::deserialize(&nulls).unwrap();
        assert!(r.s.is_present() && !r.s.is_set());
        assert_eq!(r.o, Obj::Null);
        let r: Rec = serde_json::from_str("{}").unwrap();
        assert!(!r.s.is_present());
        assert!(!r.o.is_set());
    }
}
