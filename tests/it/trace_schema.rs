//! Every trace tracefault writes, and every bundled trace, validates against the JSON Schema.

use crate::{root, tracefault};

fn validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(root().join("schema/trace.schema.json")).unwrap();
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn check(name: &str, text: &str) {
    let v = validator();
    let mut lines = 0;
    for (i, line) in text.lines().enumerate() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        let errors: Vec<String> = v.iter_errors(&value).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{name}:{}: {errors:?}", i + 1);
        lines += 1;
    }
    assert!(lines >= 2, "{name}: a header and events");
}

#[test]
fn bundled_traces_validate() {
    for entry in std::fs::read_dir(root().join("traces")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            check(&path.display().to_string(), &std::fs::read_to_string(&path).unwrap());
        }
    }
}

#[test]
fn imported_traces_validate() {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(crate::corpus()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("tau-bench")
            || name.starts_with("toolbench")
            || name.starts_with("openhands")
            || name.starts_with("swe-agent")
            || !path.is_file()
            || name == "README.md"
        {
            continue;
        }
        let out = dir.path().join(format!("{name}.jsonl"));
        tracefault().arg("import").arg(&path).arg("-o").arg(&out).arg("--all").assert().code(0);
        for trace in tracefault::trace::Trace::parse_many(&std::fs::read_to_string(&out).unwrap(), &out).unwrap() {
            check(&name, &trace.to_jsonl());
        }
    }
}

#[test]
fn written_traces_validate() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("scenarios/01-worked-example.toml", "raw-exception"),
        ("scenarios/02-ambiguous-loop.toml", "error-string"),
        ("scenarios/04-outage-breaker.toml", "five-field-guarded"),
        ("scenarios/06-parallel-one-failing.toml", "five-field"),
        ("scenarios/09-provider-overload.toml", "is-error-flag"),
    ];
    for (i, (sc, strategy)) in cases.iter().enumerate() {
        let out = dir.path().join(format!("{i}.jsonl"));
        tracefault().args(["run", sc, "--strategy", strategy, "--run", "4", "--trace-out"]).arg(&out).assert().code(0);
        let text = std::fs::read_to_string(&out).unwrap();
        check(sc, &text);
        // With the model's decisions recorded.
        let explained = dir.path().join(format!("{i}-explained.jsonl"));
        let args = ["run", sc, "--strategy", strategy, "--run", "4", "--explain", "--trace-out"];
        tracefault().args(args).arg(&explained).assert().code(0);
        let text = std::fs::read_to_string(&explained).unwrap();
        check(sc, &text);
        tracefault::trace::Trace::parse(&text, &explained).unwrap();
        // And it reads back as a native trace.
        tracefault::trace::Trace::parse(&text, &out).unwrap();
    }
}

#[test]
fn the_schema_rejects_what_the_reader_rejects() {
    let v = validator();
    let bad =
        serde_json::json!({"type": "tool_result", "call_id": "c", "ok": true, "content": "x", "error_class": "weird"});
    assert!(!v.is_valid(&bad));
    let bad = serde_json::json!({"tracefault_trace": 2, "id": "x", "source_format": "native"});
    assert!(!v.is_valid(&bad));
}
