//! Reading scenario files (TOML or JSON) and finding the files of a suite.

use std::path::{Path, PathBuf};

use super::Scenario;
use super::dto::ScenarioDto;
use super::validate::validate;
use crate::error::{Error, Result};

/// Reads and validates one scenario file.
pub fn load_file(path: &Path) -> Result<Scenario> {
    let src = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    load_str(&src, path)
}

/// Parses and validates scenario text; `path` names it in errors and picks TOML or JSON
/// (by a `.json` extension), and relative paths inside resolve against it.
pub fn load_str(src: &str, path: &Path) -> Result<Scenario> {
    let is_json = path.extension().is_some_and(|e| e == "json");
    let dto: ScenarioDto = if is_json {
        serde_json::from_str(src)
            .map_err(|e| Error::Parse { file: path.display().to_string(), message: e.to_string() })?
    } else {
        toml::from_str(src).map_err(|e| Error::Parse {
            file: path.display().to_string(),
            message: e.to_string().trim_end().to_owned(),
        })?
    };
    validate(dto, path, if is_json { None } else { Some(src) })
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
