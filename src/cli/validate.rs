//! `tracefault validate` (check scenario files without running them, listing every problem) and
//! `tracefault schema` (print the scenario file's JSON Schema).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::Value;

use crate::error::{Error, Result, exit};
use crate::scenario::load::{discover, load_str};
use crate::scenario::locate::Locator;
use crate::scenario::schema::{as_value, scenario_schema, structural_problems};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Scenario files or folders (searched for *.toml and *.json).
    #[arg(default_value = "scenarios/")]
    pub paths: Vec<PathBuf>,
}

/// Checks every file: all of its structural problems (unknown keys, wrong types, missing keys)
/// at once, then, when its structure is sound, the meaning checks `run` makes, and names unique
/// across the files. Exit 0 when all are sound, else 2.
pub fn validate(args: ValidateArgs) -> Result<i32> {
    let files = discover(&args.paths)?;
    let mut problems: Vec<String> = Vec::new();
    let mut names: Vec<(String, PathBuf)> = Vec::new();
    for path in &files {
        let src = match crate::input::read_text(path, crate::input::Input::Config) {
            Ok(s) => s,
            Err(e) => {
                problems.push(e.to_string());
                continue;
            }
        };
        let value = match as_value(&src, path) {
            Ok(v) => v,
            Err(_) => {
                // The loader names the line of a syntax error.
                problems.push(load_str(&src, path).err().map_or_else(String::new, |e| e.to_string()));
                continue;
            }
        };
        let is_json = path.extension().is_some_and(|e| e == "json");
        let found = structural_problems(&value, (!is_json).then_some(src.as_str()));
        if !found.is_empty() {
            for p in found {
                let line = p.line.map(|l| format!(":{l}")).unwrap_or_default();
                let field = if p.field.is_empty() { String::new() } else { format!("{}: ", p.field) };
                problems.push(format!("{}{line}: {field}{}", path.display(), p.message));
            }
            continue;
        }
        let meaning = meaning_problems(&src, path, value);
        if !meaning.is_empty() {
            problems.extend(meaning);
            continue;
        }
        match load_str(&src, path) {
            Ok(sc) => {
                if let Some((_, other)) = names.iter().find(|(n, _)| *n == sc.name) {
                    problems.push(format!(
                        "{}: name: expected a name unique within the suite; {:?} is also used by {}",
                        path.display(),
                        sc.name,
                        other.display()
                    ));
                }
                names.push((sc.name, path.clone()));
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    for p in &problems {
        eprintln!("error: {p}");
    }
    let bad = problems.len();
    println!(
        "{} file(s) checked: {}",
        files.len(),
        if bad == 0 { "all sound".to_owned() } else { format!("{bad} problem(s)") }
    );
    Ok(if bad == 0 { exit::OK } else { exit::BAD_INPUT })
}

/// Every meaning problem of a structurally sound file: the loader stops at the first, so each
/// one found is set aside — a whole `[[faults]]` or `[[gates]]` entry, or the one key elsewhere
/// (its default then applies) — and the rest checked again. A problem inside another list (a
/// task step) ends the search, as setting it aside would only breed more.
fn meaning_problems(src: &str, path: &Path, mut value: Value) -> Vec<String> {
    let locator = Locator::new((path.extension().is_none_or(|e| e != "json")).then_some(src));
    let as_json = path.with_extension("json");
    // Each top-level list's original indices set aside so far.
    let mut aside: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut out = Vec::new();
    for _ in 0..MAX_PROBLEMS {
        let text = serde_json::to_string(&value).expect("serializes");
        let (field, expected) = match load_str(&text, &as_json) {
            Ok(_) => break,
            Err(Error::Invalid { field, expected, .. }) => (field, expected),
            Err(other) => {
                out.push(other.to_string().replace(&as_json.display().to_string(), &path.display().to_string()));
                break;
            }
        };
        let original = original_field(&field, &aside);
        let line = locator.line(&original).map(|l| format!(":{l}")).unwrap_or_default();
        out.push(format!("{}{line}: {original}: expected {expected}", path.display()));
        if !set_aside(&mut value, &field, &mut aside) {
            break;
        }
    }
    out
}

/// At most this many meaning problems are listed per file.
const MAX_PROBLEMS: usize = 100;

/// The lists whose entries are set aside whole.
const LISTS: [&str; 2] = ["faults", "gates"];

/// `faults[1].http` in the reduced file → the field in the original (entries set aside before
/// it shift its index).
fn original_field(field: &str, aside: &BTreeMap<String, Vec<usize>>) -> String {
    for list in LISTS {
        if let Some(rest) = field.strip_prefix(list).and_then(|r| r.strip_prefix('['))
            && let Some((index, tail)) = rest.split_once(']')
            && let Ok(j) = index.parse::<usize>()
        {
            let gone = aside.get(list).map_or(&[][..], Vec::as_slice);
            let original = (0..).filter(|i| !gone.contains(i)).nth(j).unwrap_or(j);
            return format!("{list}[{original}]{tail}");
        }
    }
    field.to_owned()
}

/// Sets aside what `field` names; `false` when nothing can be (the search stops).
fn set_aside(value: &mut Value, field: &str, aside: &mut BTreeMap<String, Vec<usize>>) -> bool {
    for list in LISTS {
        if let Some(rest) = field.strip_prefix(list).and_then(|r| r.strip_prefix('['))
            && let Some((index, _)) = rest.split_once(']')
            && let Ok(j) = index.parse::<usize>()
            && let Some(items) = value.get_mut(list).and_then(Value::as_array_mut)
            && j < items.len()
        {
            let original = original_field(&format!("{list}[{j}]"), aside);
            let i: usize = original[list.len() + 1..original.len() - 1].parse().unwrap_or(j);
            items.remove(j);
            let gone = aside.entry(list.to_owned()).or_default();
            gone.push(i);
            gone.sort_unstable();
            return true;
        }
    }
    if field.contains('[') || field.is_empty() || field == "name" {
        return false;
    }
    let mut parts: Vec<&str> = field.split('.').collect();
    let Some(last) = parts.pop() else { return false };
    let mut node = &mut *value;
    for p in parts {
        match node.get_mut(p) {
            Some(next) => node = next,
            None => return false,
        }
    }
    node.as_object_mut().is_some_and(|o| o.remove(last).is_some())
}

/// Prints the JSON Schema of a scenario file (what `schema/scenario.schema.json` holds).
pub fn schema() -> Result<i32> {
    let mut text = serde_json::to_string_pretty(&scenario_schema()).expect("serializes");
    text.push('\n');
    print!("{text}");
    Ok(exit::OK)
}
