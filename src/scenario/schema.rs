//! The scenario file's JSON Schema, derived from the DTO so the two cannot drift (printed by
//! `tracefault schema`, committed as `schema/scenario.schema.json` for editors), and the check
//! of a file against it that finds every structural problem at once (`tracefault validate`).

use std::path::Path;

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use super::dto::ScenarioDto;
use super::locate::Locator;

/// The schema (JSON Schema draft-07, which the TOML and JSON editors read).
pub fn scenario_schema() -> Value {
    let generator = schemars::generate::SchemaSettings::draft07().into_generator();
    let mut schema = generator.into_root_schema_for::<ScenarioDto>().to_value();
    drop_null(&mut schema);
    schema["title"] = "tracefault scenario".into();
    schema["description"] =
        "A tracefault scenario file (TOML, or JSON of the same structure). Meaning and ranges are checked by \
         `tracefault validate`."
            .into();
    schema
}

/// An absent key is how a file leaves an optional value out (TOML has no null): optional values
/// are described as themselves, so a problem inside one is named where it is, not as "matches
/// none of two schemas".
fn drop_null(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if let [one] = types.as_slice() {
                    let one = one.clone();
                    map.insert("type".into(), one);
                }
            }
            let null = serde_json::json!({"type": "null"});
            if let Some(Value::Array(any)) = map.get_mut("anyOf")
                && any.contains(&null)
            {
                any.retain(|s| *s != null);
                if let [one] = any.as_slice() {
                    let one = one.clone();
                    map.remove("anyOf");
                    map.insert("allOf".into(), Value::Array(vec![one]));
                }
            }
            map.values_mut().for_each(drop_null);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null),
        _ => {}
    }
}

/// One structural problem: the field (`faults[2].http`), its line where known, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub field: String,
    pub line: Option<usize>,
    pub message: String,
}

/// Every place where the file's text breaks the schema (unknown keys, wrong types, missing
/// keys), in document order; `src` is the TOML text for line numbers (`None` for JSON).
pub fn structural_problems(value: &Value, src: Option<&str>) -> Vec<Problem> {
    static VALIDATOR: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    let validator = VALIDATOR.get_or_init(|| match jsonschema::draft7::new(&scenario_schema()) {
        Ok(v) => v,
        Err(e) => unreachable!("the derived schema compiles: {e}"),
    });
    let locator = Locator::new(src);
    let mut out = Vec::new();
    let mut found = Vec::new();
    for e in validator.iter_errors(value) {
        problems_of(&e, &mut found);
    }
    for (field, message) in found {
        let line = locator.line(&field);
        out.push(Problem { field, line, message });
    }
    out.sort_by(|a, b| (a.line, &a.field).cmp(&(b.line, &b.field)));
    out.dedup();
    out
}

/// The (field, message) pairs one schema error stands for. A value that matches none of a
/// field's alternatives (`p_fix_args = { value = 0.7, rang = … }`) is told by the alternative it
/// came closest to, the one whose problems lie deepest (a wrong type counting least), so the
/// message names the key inside it rather than "not valid under any of the schemas".
fn problems_of(e: &jsonschema::ValidationError<'_>, out: &mut Vec<(String, String)>) {
    let at = field_of(e.instance_path().as_str());
    match e.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            for key in unexpected {
                let field = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
                out.push((field, "unknown key".to_owned()));
            }
        }
        ValidationErrorKind::AnyOf { context } => {
            let depth = |e: &jsonschema::ValidationError<'_>| {
                let extra = match e.kind() {
                    ValidationErrorKind::Type { .. } => 0,
                    ValidationErrorKind::AdditionalProperties { .. } => 2,
                    _ => 1,
                };
                2 * e.instance_path().as_str().matches('/').count() + extra
            };
            let own = 2 * e.instance_path().as_str().matches('/').count();
            let best = context.iter().filter(|b| !b.is_empty()).max_by_key(|b| b.iter().map(depth).max().unwrap_or(0));
            match best {
                Some(branch) if branch.iter().map(depth).max().unwrap_or(0) > own => {
                    branch.iter().for_each(|e| problems_of(e, out));
                }
                _ => out.push((at, e.to_string())),
            }
        }
        _ => out.push((at, e.to_string())),
    }
}

/// `/faults/2/http` → `faults[2].http`.
fn field_of(pointer: &str) -> String {
    let mut out = String::new();
    for part in pointer.split('/').skip(1) {
        let part = part.replace("~1", "/").replace("~0", "~");
        if part.parse::<usize>().is_ok() && !out.is_empty() {
            out.push_str(&format!("[{part}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&part);
        }
    }
    out
}

/// The file's text as a JSON value (TOML read through serde), or the parser's message.
pub fn as_value(src: &str, path: &Path) -> Result<Value, String> {
    if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(src).map_err(|e| e.to_string())
    } else {
        toml::from_str(src).map_err(|e: toml::de::Error| e.message().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_structural_problem_is_found_with_its_field() {
        let src = "name = \"x\"\nrunz = 5\n[task]\n[[task.steps]]\ntool = 3\n[[faults]]\ntarget = \"s\"\nhttp = \"503\"\ncolour = 1\n";
        let value = as_value(src, Path::new("x.toml")).unwrap();
        let problems = structural_problems(&value, Some(src));
        let fields: Vec<(&str, Option<usize>)> = problems.iter().map(|p| (p.field.as_str(), p.line)).collect();
        assert_eq!(
            fields,
            [
                ("runz", Some(2)),
                ("task.steps[0].tool", Some(5)),
                ("faults[0].http", Some(8)),
                ("faults[0].colour", Some(9))
            ]
        );
        assert_eq!(problems[0].message, "unknown key");
    }

    #[test]
    fn pointers_read_as_fields() {
        assert_eq!(field_of(""), "");
        assert_eq!(field_of("/policy/retry/max_attempts"), "policy.retry.max_attempts");
        assert_eq!(field_of("/faults/12/at/0"), "faults[12].at[0]");
    }
}
