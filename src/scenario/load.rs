//! Reading scenario files (TOML or JSON) and finding the files of a suite.

use std::path::{Path, PathBuf};

use super::Scenario;
use super::dto::ScenarioDto;
use super::locate::Locator;
use super::validate::validate;
use crate::error::{Error, Result};

/// Reads and validates one scenario file.
pub fn load_file(path: &Path) -> Result<Scenario> {
    let src = crate::input::read_text(path, crate::input::Input::Config)?;
    load_str(&src, path)
}

/// Parses and validates scenario text; `path` names it in errors and picks TOML or JSON
/// (by a `.json` extension), and relative paths inside resolve against it.
pub fn load_str(src: &str, path: &Path) -> Result<Scenario> {
    let is_json = path.extension().is_some_and(|e| e == "json");
    let dto: ScenarioDto = if is_json { parse_json(src, path)? } else { parse_toml(src, path)? };
    validate(dto, path, if is_json { None } else { Some(src) })
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
pub fn load_suite(paths: &[PathBuf]) -> Result<Vec<Scenario>> {
    let mut suite: Vec<Scenario> = Vec::new();
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
