//! Where a field of a TOML scenario file is: its line, from the parser's own spans, so an error
//! points at the key however the lines before it look (multi-line strings included). Looking a
//! field up costs a walk down its path and a binary search, never a scan of the file.

use std::path::Path;

use toml::de::{DeTable, DeValue};

use crate::error::Error;

/// Where errors point: the file, and (for TOML) where each field is in it.
pub struct Ctx<'a> {
    pub file: &'a Path,
    pub locator: Locator<'a>,
}

impl Ctx<'_> {
    /// An error about `field` (`faults[2].http`), at the field's line where the file has lines.
    pub fn err(&self, field: impl Into<String>, expected: impl Into<String>) -> Error {
        let field = field.into();
        Error::invalid(self.file, self.locator.line(&field), field, expected)
    }
}

pub struct Locator<'a> {
    root: Option<toml::Spanned<DeTable<'a>>>,
    /// Byte offset where each line starts.
    line_starts: Vec<usize>,
}

impl<'a> Locator<'a> {
    /// A locator for TOML source; `None` (JSON) finds no lines.
    pub fn new(src: Option<&'a str>) -> Locator<'a> {
        let Some(src) = src else { return Locator { root: None, line_starts: Vec::new() } };
        let line_starts = std::iter::once(0).chain(src.match_indices('\n').map(|(i, _)| i + 1)).collect();
        Locator { root: DeTable::parse(src).ok(), line_starts }
    }

    /// The 1-based line of a byte offset.
    pub fn line_at(&self, offset: usize) -> Option<usize> {
        if self.line_starts.is_empty() {
            return None;
        }
        Some(self.line_starts.partition_point(|&s| s <= offset))
    }

    /// The line of `field` (`faults[2].http`, `policy.retry.max_attempts`), or of the deepest
    /// part of its path that exists.
    pub fn line(&self, field: &str) -> Option<usize> {
        let root = self.root.as_ref()?;
        let mut span = None;
        let mut table: Option<&DeTable> = Some(root.get_ref());
        let mut value: Option<&DeValue> = None;
        for part in path(field) {
            let next = match (part, table, value) {
                (Part::Key(k), Some(t), _) => t.iter().find(|(key, _)| key.get_ref() == k).map(|(_, v)| v),
                (Part::Key(k), None, Some(v)) => v.get(k),
                (Part::Index(i), _, Some(v)) => v.get(i),
                _ => None,
            };
            let Some(next) = next else { break };
            span = Some(next.span().start);
            table = None;
            value = Some(next.get_ref());
        }
        span.and_then(|s| self.line_at(s))
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Part<'f> {
    Key(&'f str),
    Index(usize),
}

/// `faults[2].http` → `faults`, 2, `http`.
fn path(field: &str) -> Vec<Part<'_>> {
    let mut out = Vec::new();
    for seg in field.split('.') {
        let (key, rest) = seg.split_once('[').map_or((seg, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            out.push(Part::Key(key));
        }
        for idx in rest.split('[') {
            if let Ok(i) = idx.trim_end_matches(']').parse() {
                out.push(Part::Index(i));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "name = \"x\"\ndescription = \"\"\"\nruns = 3\n[[faults]]\n\"\"\"\nseed = 1\nruns = 0\n\n[policy]\nretry = { max_attempts = 99 }\n\n[[faults]]\ntarget = \"a\"\n\n[[faults]]\ntarget = \"b\"\nhttp = 418\n";

    #[test]
    fn lines_come_from_spans_not_from_text_that_looks_like_keys() {
        let l = Locator::new(Some(SRC));
        assert_eq!(l.line("runs"), Some(7), "not the `runs = 3` inside the description");
        assert_eq!(l.line("policy.retry.max_attempts"), Some(10));
        assert_eq!(l.line("faults[1].http"), Some(17));
        assert_eq!(l.line("faults[0].target"), Some(13));
        assert_eq!(l.line("faults[1].nope"), l.line("faults[1]"), "the deepest part that exists");
        assert_eq!(l.line("nope"), None);
        assert_eq!(Locator::new(None).line("runs"), None);
    }

    #[test]
    fn paths_parse() {
        assert_eq!(path("a.b[3].c"), [Part::Key("a"), Part::Key("b"), Part::Index(3), Part::Key("c")]);
        assert_eq!(path("gates[0]"), [Part::Key("gates"), Part::Index(0)]);
    }
}
