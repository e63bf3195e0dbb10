//! The book's reference pages, generated from the code so they cannot drift: the command line
//! from the clap definitions, the scenario keys from the scenario's JSON Schema (the DTO's doc
//! comments and defaults), the CSV columns from their declarations, the native trace format from
//! its JSON Schema (`schema/trace.schema.json`, which every trace tracefault writes is tested
//! against). A test keeps the committed
//! pages (`docs/src/reference/`) equal to what this writes.

use std::fmt::Write as _;

use clap::CommandFactory;
use serde_json::Value;

use crate::metrics::summary::{RUNS_COLUMN_DOCS, RUNS_COLUMNS, SUMMARY_COLUMN_DOCS, SUMMARY_COLUMNS};

/// Each generated page: its path under `docs/src/reference/` and its Markdown.
pub fn pages() -> Vec<(&'static str, String)> {
    vec![
        ("cli.md", cli()),
        ("scenario-keys.md", scenario_keys()),
        ("csv-columns.md", csv_columns()),
        ("trace-format.md", trace_format()),
    ]
}

const GENERATED: &str = "<!-- Generated from the code; do not edit. `TRACEFAULT_BLESS=1 cargo test --test it reference` rewrites it. -->\n\n";

/// Text for a Markdown table cell: one line, `|` escaped.
fn cell(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

/// Every command, its usage and its options, from the clap definitions.
fn cli() -> String {
    let mut cmd = super::Cli::command();
    cmd.build();
    let mut out = format!("# Command line\n\n{GENERATED}");
    let _ = writeln!(out, "{}\n", cmd.get_about().map(|a| a.to_string()).unwrap_or_default());
    out.push_str("Exit codes: `0` success, `1` a gate or check failed, `2` bad input or usage.\n\n");
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        let _ = writeln!(out, "## `tracefault {}`\n", sub.get_name());
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            let _ = writeln!(out, "{about}\n");
        }
        let usage = sub.clone().bin_name(format!("tracefault {}", sub.get_name())).render_usage().to_string();
        let _ = writeln!(out, "```text\n{}\n```\n", usage.trim_start_matches("Usage: "));
        let args: Vec<_> = sub.get_arguments().filter(|a| !a.is_hide_set() && a.get_id() != "help").collect();
        if args.is_empty() {
            continue;
        }
        out.push_str("| argument | default | what it does |\n|---|---|---|\n");
        for a in args {
            let values: Vec<String> = a.get_value_names().unwrap_or_default().iter().map(|v| v.to_string()).collect();
            let name = match (a.get_long(), a.get_short()) {
                _ if a.is_positional() => values.join(" "),
                (Some(l), Some(s)) => format!("-{s}, --{l}"),
                (Some(l), None) => format!("--{l}"),
                (None, Some(s)) => format!("-{s}"),
                (None, None) => a.get_id().to_string(),
            };
            let takes = a.get_num_args().is_some_and(|n| n.takes_values()) && !a.is_positional();
            let value = if takes {
                let v = if values.is_empty() { a.get_id().to_string().to_uppercase() } else { values.join(" ") };
                format!(" {v}")
            } else {
                String::new()
            };
            let default: Vec<String> =
                a.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
            // A flag's `false` says nothing.
            let default = if default.is_empty() || !(takes || a.is_positional()) {
                String::new()
            } else {
                format!("`{}`", default.join(" "))
            };
            let help = a.get_long_help().or(a.get_help()).map(|h| h.to_string()).unwrap_or_default();
            let _ = writeln!(out, "| `{name}{value}` | {default} | {} |", cell(&help));
        }
        out.push('\n');
    }
    out
}

/// Every key of a scenario file, dotted, with its type, default and doc, from the schema.
fn scenario_keys() -> String {
    let schema = crate::scenario::schema::scenario_schema();
    let mut out = format!("# Scenario keys\n\n{GENERATED}");
    out.push_str(
        "Every key of a scenario file (TOML, or JSON of the same structure), from \
         `schema/scenario.schema.json`; `[]` marks a list of tables (`[[faults]]`). Meaning and \
         ranges are checked by `tracefault validate`; the guides say what each part is for.\n\n",
    );
    out.push_str("| key | type | default | what it is |\n|---|---|---|---|\n");
    let defs = schema.get("definitions").cloned().unwrap_or(Value::Null);
    keys(&schema, &defs, "", &mut out, 0);
    out
}

/// The definition a `$ref` (or a one-element `allOf` around one) points at; else `v`.
fn resolve<'a>(v: &'a Value, defs: &'a Value) -> &'a Value {
    let target = v.get("allOf").and_then(|a| a.get(0)).unwrap_or(v);
    let name = target
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/definitions/").or_else(|| r.strip_prefix("#/$defs/")));
    match name {
        Some(name) => defs.get(name).unwrap_or(v),
        None => v,
    }
}

/// A schema's type, as a reader would say it.
fn type_of(v: &Value, defs: &Value) -> String {
    let v = resolve(v, defs);
    if let Some(e) = v.get("enum").and_then(Value::as_array) {
        return e.iter().map(|x| format!("`{x}`")).collect::<Vec<_>>().join(", ");
    }
    let ty = |t: &Value| match t.as_str() {
        Some("object") if v.get("properties").is_some() => "table".to_owned(),
        Some("array") => match v.get("items") {
            Some(items) => format!("list of {}", type_of(items, defs)),
            None => "list".to_owned(),
        },
        Some(s) => s.to_owned(),
        None => String::new(),
    };
    match v.get("type") {
        Some(Value::Array(ts)) => ts.iter().map(ty).collect::<Vec<_>>().join(" or "),
        Some(t) => ty(t),
        None => match v.get("anyOf").or(v.get("oneOf")).and_then(Value::as_array) {
            Some(alts) => alts.iter().map(|a| type_of(a, defs)).collect::<Vec<_>>().join(" or "),
            None => "any".to_owned(),
        },
    }
}

fn keys(schema: &Value, defs: &Value, prefix: &str, out: &mut String, depth: usize) {
    let Some(props) = resolve(schema, defs).get("properties").and_then(Value::as_object) else { return };
    for (k, v) in props {
        if k == "$schema" {
            continue;
        }
        let key = format!("{prefix}{k}");
        let target = resolve(v, defs);
        let doc = v.get("description").or(target.get("description")).and_then(Value::as_str).unwrap_or("");
        let default = v.get("default").map(|d| format!("`{d}`")).unwrap_or_default();
        let _ = writeln!(out, "| `{key}` | {} | {} | {} |", cell(&type_of(v, defs)), cell(&default), cell(doc));
        if depth < 4 {
            fn table<'a>(v: Option<&'a Value>, defs: &'a Value) -> Option<&'a Value> {
                v.map(|v| resolve(v, defs)).filter(|v| v.get("properties").is_some())
            }
            if target.get("properties").is_some() {
                keys(target, defs, &format!("{key}."), out, depth + 1);
            } else if let Some(items) = table(target.get("items"), defs) {
                keys(items, defs, &format!("{key}[]."), out, depth + 1);
            } else if let Some(each) = table(target.get("additionalProperties"), defs) {
                keys(each, defs, &format!("{key}.NAME."), out, depth + 1);
            } else if let Some(alts) = target.get("anyOf").or(target.get("oneOf")).and_then(Value::as_array) {
                // A key of several forms (a list of names, or tables by name): the tables' keys.
                for alt in alts.iter().map(|a| resolve(a, defs)) {
                    if let Some(each) = table(alt.get("additionalProperties"), defs) {
                        keys(each, defs, &format!("{key}.NAME."), out, depth + 1);
                    } else if alt.get("properties").is_some() {
                        keys(alt, defs, &format!("{key}."), out, depth + 1);
                    }
                }
            }
        }
    }
}

/// The columns of `summary.csv` and `runs.csv`, in order, with their meaning.
fn csv_columns() -> String {
    let mut out = format!("# CSV columns\n\n{GENERATED}");
    out.push_str(
        "Column names and their order are a contract: new columns are added at the end. \
         Definitions in full: [metrics](../concepts/metrics.md).\n\n",
    );
    for (file, names, docs) in [
        ("summary.csv", &SUMMARY_COLUMNS[..], &SUMMARY_COLUMN_DOCS[..]),
        ("runs.csv", &RUNS_COLUMNS[..], &RUNS_COLUMN_DOCS[..]),
    ] {
        let _ = writeln!(out, "## `{file}`\n\n| # | column | what it is |\n|---|---|---|");
        for (i, (name, doc)) in names.iter().zip(docs).enumerate() {
            let _ = writeln!(out, "| {} | `{name}` | {} |", i + 1, cell(doc));
        }
        out.push('\n');
    }
    out
}

/// The native trace format: each kind of line and its fields, from the trace's JSON Schema.
fn trace_format() -> String {
    let schema: Value =
        serde_json::from_str(include_str!("../../schema/trace.schema.json")).expect("schema/trace.schema.json is JSON");
    let mut out = format!("# Trace format\n\n{GENERATED}");
    let _ = writeln!(
        out,
        "{} {} The schema: `schema/trace.schema.json`.\n",
        schema["title"].as_str().unwrap_or_default(),
        schema["description"].as_str().unwrap_or_default()
    );
    let defs = &schema["$defs"];
    for kind in schema["oneOf"].as_array().into_iter().flatten() {
        let Some(name) = kind["$ref"].as_str().and_then(|r| r.strip_prefix("#/$defs/")) else { continue };
        let def = &defs[name];
        let _ = writeln!(out, "## `{name}`\n");
        if let Some(d) = def["description"].as_str() {
            let _ = writeln!(out, "{d}\n");
        }
        let required: Vec<&str> = def["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        out.push_str("| field | type | required | what it is |\n|---|---|---|---|\n");
        for (k, v) in def["properties"].as_object().into_iter().flatten() {
            let ty = match (&v["const"], &v["enum"]) {
                (Value::Null, Value::Array(e)) => e.iter().map(|x| format!("`{x}`")).collect::<Vec<_>>().join(", "),
                (Value::Null, _) => type_of(v, defs),
                (c, _) => format!("`{c}`"),
            };
            let req = if required.contains(&k.as_str()) { "yes" } else { "" };
            let doc = v["description"].as_str().unwrap_or_default();
            let _ = writeln!(out, "| `{k}` | {} | {req} | {} |", cell(&ty), cell(doc));
        }
        out.push('\n');
    }
    out
}
