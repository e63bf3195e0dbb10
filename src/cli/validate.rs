//! `tracefault validate` (check scenario files without running them, listing every problem) and
//! `tracefault schema` (print the scenario file's JSON Schema).

use std::path::PathBuf;

use clap::Args;

use crate::error::{Result, exit};
use crate::scenario::load::{check_str, discover};
use crate::scenario::schema::scenario_schema;

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Scenario files or folders (searched for *.toml and *.json).
    #[arg(default_value = "scenarios/")]
    pub paths: Vec<PathBuf>,
}

/// Checks every file in one pass each: all of its structural problems (unknown keys, wrong
/// types, missing keys) and the problems of its values together, then names unique across the
/// files. Exit 0 when all are sound, else 2.
pub fn validate(args: ValidateArgs) -> Result<i32> {
    let files = discover(&args.paths)?;
    let mut problems: Vec<String> = Vec::new();
    let mut names: Vec<(String, PathBuf)> = Vec::new();
    for path in &files {
        let checked = crate::input::read_text(path, crate::input::Input::Config)
            .map_err(|e| vec![e])
            .and_then(|src| check_str(&src, path));
        match checked {
            Ok(sc) => {
                if let Some((_, other)) = names.iter().find(|(n, _)| *n == sc.name) {
                    problems.push(format!(
                        "{}: name: expected a name unique within the suite; {:?} is also used by {}",
                        path.display(),
                        sc.name,
                        other.display()
                    ));
                }
                names.push((sc.scenario.name, path.clone()));
            }
            Err(found) => problems.extend(found.iter().map(ToString::to_string)),
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
