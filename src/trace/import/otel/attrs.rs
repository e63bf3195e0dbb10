//! A span's attributes, flattened to dotted keys: a vector kept in key order and searched by
//! halves. A span has tens of keys sharing long prefixes (`llm.input_messages.0.message.…`):
//! this compares fewer of them than a B-tree's scan of its nodes, and allocates once.

use serde_json::Value;

/// Keys in order, each once.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Attrs(Vec<(String, Value)>);

impl Attrs {
    pub(super) fn new() -> Attrs {
        Attrs(Vec::new())
    }

    fn find(&self, k: &str) -> Result<usize, usize> {
        // Keys mostly arrive in order (a flattened object's do): the end is tried first.
        match self.0.last() {
            Some((last, _)) if last.as_str() < k => Err(self.0.len()),
            _ => self.0.binary_search_by(|(x, _)| x.as_str().cmp(k)),
        }
    }

    pub(super) fn get(&self, k: &str) -> Option<&Value> {
        self.find(k).ok().map(|i| &self.0[i].1)
    }

    pub(super) fn contains_key(&self, k: &str) -> bool {
        self.find(k).is_ok()
    }

    /// Sets `k` to `v`, returning the value it replaced.
    pub(super) fn insert(&mut self, k: String, v: Value) -> Option<Value> {
        match self.find(&k) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, v)),
            Err(i) => {
                self.0.insert(i, (k, v));
                None
            }
        }
    }

    pub(super) fn remove(&mut self, k: &str) -> Option<Value> {
        self.find(k).ok().map(|i| self.0.remove(i).1)
    }

    #[cfg(test)]
    pub(super) fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The attributes whose keys sort after `k`, in order.
    pub(super) fn after(&self, k: &str) -> impl Iterator<Item = (&String, &Value)> {
        let from = self.0.partition_point(|(x, _)| x.as_str() <= k);
        self.0[from..].iter().map(|(k, v)| (k, v))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    proptest! {
        /// Any sequence of inserts and removes leaves what a `BTreeMap` holds, in its order,
        /// and finds what it finds (the keys share prefixes, as dotted keys do).
        #[test]
        fn holds_what_an_ordered_map_holds(
            ops in prop::collection::vec((any::<bool>(), "(a|a\\.b|a\\.b\\.[0-9]|b|ab)", 0u8..4), 0..40),
            probe in "(a|a\\.b|a\\.b\\.[0-9]|b|ab|)",
        ) {
            let (mut a, mut m) = (Attrs::new(), BTreeMap::new());
            for (insert, k, v) in ops {
                if insert {
                    prop_assert_eq!(a.insert(k.clone(), json!(v)), m.insert(k, json!(v)));
                } else {
                    prop_assert_eq!(a.remove(&k), m.remove(&k));
                }
            }
            prop_assert!(a.iter().eq(m.iter()));
            prop_assert_eq!(a.get(&probe), m.get(&probe));
            prop_assert_eq!(a.contains_key(&probe), m.contains_key(&probe));
            let after = m.range::<str, _>((std::ops::Bound::Excluded(probe.as_str()), std::ops::Bound::Unbounded));
            prop_assert!(a.after(&probe).eq(after));
        }
    }
}
