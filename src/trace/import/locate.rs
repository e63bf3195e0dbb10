//! Where a JSON pointer points in the text it was parsed from: the 1-based line and column of
//! the value, so an error can name a place a user can open, not only a path. A JSONL file is a
//! list of its non-blank lines: `/N/…` is inside line N+1's object.

use std::path::Path;

use serde_json::Value;

use super::{ImportError, SourceFormat, provider_misfits, readers};
use crate::error::Error;

/// The file an importer read, to place its errors.
pub struct Place<'a> {
    pub path: &'a Path,
    pub text: &'a str,
    pub jsonl: bool,
    /// YAML text, where JSON positions cannot be found: errors name the pointer alone.
    pub yaml: bool,
    /// The `--select` pointer the importer's paths are relative to.
    pub select: &'a str,
}

impl Place<'_> {
    /// `FILE:LINE:COLUMN` of a pointer relative to the selected value (`FILE` when it cannot
    /// be found in the text).
    fn at(&self, pointer: &str) -> String {
        let whole = format!("{}{pointer}", self.select);
        match locate(self.text, &whole, self.jsonl).filter(|_| !self.yaml) {
            Some((line, column)) => format!("{}:{line}:{column}", self.path.display()),
            None => self.path.display().to_string(),
        }
    }

    fn pointer(&self, at: &str) -> String {
        let p = format!("{}{at}", self.select);
        if p.is_empty() { "/".to_owned() } else { p }
    }

    /// An importer's error, at its line and column.
    pub fn error(&self, e: ImportError) -> Error {
        Error::Invalid { file: self.at(&e.at), line: None, field: self.pointer(&e.at), expected: e.expected }
    }

    /// A file that is not the `format` asked for: where it did not fit, and the format it
    /// reads as, if any.
    pub fn misfit(&self, e: ImportError, format: SourceFormat, v: &Value) -> Error {
        let other = readers::detect(v).map(|r| r.format).or_else(|| super::detect(v)).filter(|f| *f != format);
        let hint = match other {
            Some(f) => format!(" (the file reads as {0}: pass --format {0} or auto)", f.name()),
            None => String::new(),
        };
        Error::Invalid {
            file: self.at(&e.at),
            line: None,
            field: self.pointer(&e.at),
            expected: format!("{} ({}){hint}", e.expected, format.name()),
        }
    }

    /// No format fits: each one tried, with the first thing that did not fit.
    pub fn nothing_fits(&self, v: &Value) -> Error {
        use std::fmt::Write as _;
        let mut message =
            String::from("no supported format fits; each format tried, and the first thing that did not fit:");
        let tried =
            readers::READERS.iter().filter_map(|r| (r.fits)(v).err().map(|e| (r.format, e))).chain(provider_misfits(v));
        for (format, e) in tried {
            let place = match locate(self.text, &format!("{}{}", self.select, e.at), self.jsonl).filter(|_| !self.yaml)
            {
                Some((line, column)) => format!("line {line}, column {column}"),
                None => "the file".to_owned(),
            };
            let _ =
                write!(message, "\n  {}: {place} ({}): expected {}", format.name(), self.pointer(&e.at), e.expected);
        }
        message
            .push_str("\n(pass --format to read it as one of them, --select to pick a conversation inside a wrapper)");
        Error::Parse { file: self.path.display().to_string(), message }
    }
}

/// The line and column (both 1-based, the column in characters) of the value at `pointer` in
/// `text`, read as JSON, or as JSONL when `jsonl`, or else of the nearest value above it (a
/// missing key is placed at the object that lacks it); `None` when not even the top is found.
pub fn locate(text: &str, pointer: &str, jsonl: bool) -> Option<(usize, usize)> {
    let mut p = pointer;
    loop {
        if let Some(found) = locate_exactly(text, p, jsonl) {
            return Some(found);
        }
        p = &p[..p.rfind('/')?];
    }
}

fn locate_exactly(text: &str, pointer: &str, jsonl: bool) -> Option<(usize, usize)> {
    let tokens: Vec<String> = match pointer {
        "" | "/" => Vec::new(),
        p => p.strip_prefix('/')?.split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect(),
    };
    let bytes = text.as_bytes();
    let offset = if jsonl {
        let Some((first, rest)) = tokens.split_first() else { return Some((1, 1)) };
        let n: usize = first.parse().ok()?;
        let mut start = 0;
        let mut seen = 0;
        let mut found = None;
        for line in text.split_inclusive('\n') {
            if !line.trim().is_empty() {
                if seen == n {
                    found = Some(start);
                    break;
                }
                seen += 1;
            }
            start += line.len();
        }
        let line_start = found?;
        find(bytes, skip_ws(bytes, line_start), rest)?
    } else {
        find(bytes, skip_ws(bytes, 0), &tokens)?
    };
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Some((line, column))
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The offset of the value reached by `tokens` from the value starting at `i`.
fn find(b: &[u8], i: usize, tokens: &[String]) -> Option<usize> {
    let Some((token, rest)) = tokens.split_first() else { return Some(i) };
    match b.get(i)? {
        b'{' => {
            let mut j = skip_ws(b, i + 1);
            while b.get(j)? != &b'}' {
                let key_end = string_end(b, j)?;
                let key: String = serde_json::from_slice(&b[j..key_end]).ok()?;
                j = skip_ws(b, key_end);
                if b.get(j)? != &b':' {
                    return None;
                }
                let value = skip_ws(b, j + 1);
                if &key == token {
                    return find(b, value, rest);
                }
                j = skip_ws(b, value_end(b, value)?);
                if b.get(j) == Some(&b',') {
                    j = skip_ws(b, j + 1);
                }
            }
            None
        }
        b'[' => {
            let want: usize = token.parse().ok()?;
            let mut j = skip_ws(b, i + 1);
            let mut k = 0;
            while b.get(j)? != &b']' {
                if k == want {
                    return find(b, j, rest);
                }
                j = skip_ws(b, value_end(b, j)?);
                if b.get(j) == Some(&b',') {
                    j = skip_ws(b, j + 1);
                }
                k += 1;
            }
            None
        }
        _ => None,
    }
}

/// The offset just past the string starting at `i`.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i)? != &b'"' {
        return None;
    }
    let mut j = i + 1;
    loop {
        match b.get(j)? {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
}

/// The offset just past the value starting at `i`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']') && !b[j].is_ascii_whitespace() {
                j += 1;
            }
            Some(j)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_at_values_in_json_and_jsonl() {
        let json = "{\n  \"a\": [1, {\"b\\\"x\": \"y\"}],\n  \"c\": {\"d\": true}\n}";
        assert_eq!(locate(json, "", false), Some((1, 1)));
        assert_eq!(locate(json, "/a", false), Some((2, 8)));
        assert_eq!(locate(json, "/a/1", false), Some((2, 12)));
        assert_eq!(locate(json, "/a/1/b\"x", false), Some((2, 21)));
        assert_eq!(locate(json, "/c/d", false), Some((3, 14)));
        assert_eq!(locate_exactly(json, "/c/e", false), None);
        assert_eq!(locate(json, "/c/e", false), Some((3, 8)), "the object without the key");
        assert_eq!(locate_exactly(json, "/a/2", false), None);
        let jsonl = "{\"t\": 1}\n\n{\"t\": 2, \"m\": {\"r\": \"é\", \"s\": 3}}\n";
        assert_eq!(locate(jsonl, "/0", true), Some((1, 1)));
        assert_eq!(locate(jsonl, "/1/m/s", true), Some((3, 31)));
        assert_eq!(locate(jsonl, "/2", true), Some((1, 1)), "no third line: the file");
    }
}
