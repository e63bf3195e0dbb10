//! `tracefault validate` (check scenario files without running them, listing every problem) and
//! `tracefault schema` (print the scenario file's JSON Schema).

use std::path::PathBuf;

use clap::Args;

use crate::error::{Result, exit};
use crate::scenario::load::{discover, load_str};
use crate::scenario::schema::{as_value, scenario_schema, structural_problems};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Scenario files or folders (searched for *.toml and *.json).
    #[arg(default_value = "scenarios/")]
    pub paths: Vec<PathBuf>,
}

/// Checks every file: all of its structural problems (unknown keys, wrong types, missing keys)
/// at once, then, when its structure is sound, the meaning checks `run` makes (which stop at a
/// file's first problem), and names unique across the files. Exit 0 when all are sound, else 2.
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

/// Prints the JSON Schema of a scenario file (what `schema/scenario.schema.json` holds).
pub fn schema() -> Result<i32> {
    let mut text = serde_json::to_string_pretty(&scenario_schema()).expect("serializes");
    text.push('\n');
    print!("{text}");
    Ok(exit::OK)
}
