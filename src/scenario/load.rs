//! Reading scenario files (TOML or JSON) and finding the files of a suite.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Loaded;
use super::dto::ScenarioDto;
use super::files;
use super::locate::{Ctx, Locator};
use super::schema::{as_value, structural_problems};
use super::validate::{Problems, validate};
use crate::error::{Error, Result};

/// Reads and validates one scenario file.
pub fn load_file(path: &Path) -> Result<Loaded> {
    let src = crate::input::read_text(path, crate::input::Input::Config)?;
    load_str(&src, path)
}

/// Parses and validates scenario text; `path` names it in errors and picks TOML or JSON
/// (by a `.json` extension), and relative paths inside resolve against it. A file that does
/// not parse gives its first problem; one that parses, every problem its values have.
pub fn load_str(src: &str, path: &Path) -> Result<Loaded> {
    let is_json = path.extension().is_some_and(|e| e == "json");
    let dto: ScenarioDto = if is_json { parse_json(src, path)? } else { parse_toml(src, path)? };
    let ctx = Ctx { file: path, locator: Locator::new((!is_json).then_some(src)) };
    let files = files::read(&ctx, &dto);
    validate(dto, files, &ctx).map_err(Error::several)
}

/// Every problem of a scenario text in one pass (`tracefault validate`): the places where it
/// breaks the schema (unknown keys, wrong types, missing keys), and the problems of its values
/// — read from the file with each key that breaks the schema left out, so a value check is not
/// hidden behind a misspelt key elsewhere. A value problem about a key that already breaks the
/// schema (or lies inside it) is not said twice.
pub fn check_str(src: &str, path: &Path) -> std::result::Result<Loaded, Problems> {
    let is_json = path.extension().is_some_and(|e| e == "json");
    let Ok(mut value) = as_value(src, path) else {
        // The parser names the line of a syntax error.
        return load_str(src, path).map_err(|e| vec![e]);
    };
    let text = (!is_json).then_some(src);
    let structural = structural_problems(&value, text);
    if structural.is_empty() {
        return load_str(src, path).map_err(Error::flatten);
    }
    for p in &structural {
        remove_field(&mut value, &p.field);
    }
    let mut problems: Problems =
        structural.iter().map(|p| invalid(path, p.line, p.field.clone(), &p.message)).collect();
    let ctx = Ctx { file: path, locator: Locator::new(text) };
    if let Ok(dto) = serde_json::from_value::<ScenarioDto>(value) {
        let read = files::read(&ctx, &dto);
        if let Err(meaning) = validate(dto, read, &ctx) {
            let overlaps = |field: &str| {
                structural.iter().any(|s| {
                    let (a, b) = (s.field.as_str(), field);
                    a.is_empty()
                        || a == b
                        || b.starts_with(&format!("{a}."))
                        || b.starts_with(&format!("{a}["))
                        || a.starts_with(&format!("{b}."))
                        || a.starts_with(&format!("{b}["))
                })
            };
            problems
                .extend(meaning.into_iter().filter(|e| !matches!(e, Error::Invalid { field, .. } if overlaps(field))));
        }
    }
    Err(problems)
}

/// Removes the key `field` names (`faults[2].http`, `policy.retry`) from `value`, if it is there.
fn remove_field(value: &mut Value, field: &str) {
    let mut node = value;
    let mut parts = field.split('.').peekable();
    while let Some(part) = parts.next() {
        let (key, indices) = match part.split_once('[') {
            Some((k, rest)) => (k, Some(rest)),
            None => (part, None),
        };
        let last = parts.peek().is_none() && indices.is_none();
        if last {
            if let Some(o) = node.as_object_mut() {
                o.remove(key);
            }
            return;
        }
        let Some(next) = node.get_mut(key) else { return };
        node = next;
        for index in indices.into_iter().flat_map(|r| r.split('[')) {
            let Some(i) = index.trim_end_matches(']').parse::<usize>().ok() else { return };
            let Some(next) = node.get_mut(i) else { return };
            node = next;
        }
    }
}

/// The field a deserialization error is about, as `faults[2].http` (empty at the top).
fn field_of(p: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    for seg in p.iter() {
        match seg {
            serde_path_to_error::Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            serde_path_to_error::Segment::Map { key } | serde_path_to_error::Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            serde_path_to_error::Segment::Unknown => {}
        }
    }
    out
}

/// Turns a deserialization error into `file:line: field: what went wrong`.
fn invalid(path: &Path, line: Option<usize>, field: String, message: &str) -> Error {
    let file = format!("{}{}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default());
    let message = message.trim_end();
    Error::Parse { file, message: if field.is_empty() { message.to_owned() } else { format!("{field}: {message}") } }
}

fn parse_toml(src: &str, path: &Path) -> Result<ScenarioDto> {
    let syntax = |e: toml::de::Error| {
        let line = e.span().and_then(|s| Locator::new(Some(src)).line_at(s.start));
        Error::Parse {
            file: format!("{}{}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default()),
            message: format!("not valid TOML: {}", e.message()),
        }
    };
    let de = toml::de::Deserializer::parse(src).map_err(syntax)?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = field_of(e.path());
        let inner = e.into_inner();
        let locator = Locator::new(Some(src));
        let line = locator.line(&field).or_else(|| inner.span().and_then(|s| locator.line_at(s.start)));
        invalid(path, line, field, inner.message())
    })
}

fn parse_json(src: &str, path: &Path) -> Result<ScenarioDto> {
    let mut de = serde_json::Deserializer::from_str(src);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = field_of(e.path());
        let inner = e.into_inner();
        let line = (inner.line() > 0).then_some(inner.line());
        // serde_json appends " at line L column C"; the line is already in front.
        let message = inner.to_string();
        let message = message.rsplit_once(" at line ").map_or(message.as_str(), |(m, _)| m).to_owned();
        invalid(path, line, field, &message)
    })
}

/// The scenario files named by `paths`: files as given, folders searched (recursively) for
/// `*.toml` and `*.json`, sorted by path.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| Error::io(p, e))?;
        if meta.is_dir() {
            walk(p, &mut out)?;
        } else {
            out.push(p.clone());
        }
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(Error::Usage(format!("no scenario files (*.toml, *.json) in {}", names.join(", "))));
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "toml" || e == "json") {
            out.push(path);
        }
    }
    Ok(())
}

/// Loads every scenario of a suite; names must be unique.
pub fn load_suite(paths: &[PathBuf]) -> Result<Vec<Loaded>> {
    let mut suite: Vec<Loaded> = Vec::new();
    for path in discover(paths)? {
        let sc = load_file(&path)?;
        if let Some(other) = suite.iter().find(|s| s.name == sc.name) {
            return Err(Error::invalid(
                &path,
                None,
                "name",
                format!("a name unique within the suite; {:?} is also used by {}", sc.name, other.path.display()),
            ));
        }
        suite.push(sc);
    }
    Ok(suite)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A key at the top, in a table, inside a list's entry, and paths that name nothing.
    #[test]
    fn remove_field_takes_out_exactly_the_key_named() {
        let mut v = json!({"a": 1, "p": {"r": {"m": 2, "k": 3}}, "faults": [{"x": 1, "y": 2}, {"x": 3}]});
        for field in ["a", "p.r.m", "faults[1].x", "nope", "p.nope.deeper", "faults[9].x", "faults[0]"] {
            remove_field(&mut v, field);
        }
        assert_eq!(v, json!({"p": {"r": {"k": 3}}, "faults": [{"x": 1, "y": 2}, {}]}));
    }
}
