//! Importers against the corpus of real traces in `tests/fixtures/corpus`: every format imports, and `inspect`
//! gives counts checked by hand (from the raw files, independently of tracefault) for at least
//! one conversation per format; arbitrary JSON and real files with a node replaced at random get
//! an error or a trace, never a panic; a file read a conversation at a time gives what reading
//! it whole gives.

use std::path::Path;

use proptest::prelude::*;
use serde_json::Value;

use crate::{corpus, tracefault, write};

/// `inspect --json` lines of a file.
fn inspect(file: &Path, extra: &[&str]) -> Vec<Value> {
    let out = tracefault().arg("inspect").arg(file).args(extra).arg("--json").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// (model calls, tool calls, failures, failing repeats, ended)
fn counts(v: &Value) -> (u64, u64, u64, u64, String) {
    (
        v["model_calls"].as_u64().unwrap(),
        v["tool_calls"].as_u64().unwrap(),
        v["tool_failures"].as_u64().unwrap(),
        v["failing_repeats"].as_u64().unwrap(),
        v["ended"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn openai_chat_tau_bench_conversation_13() {
    // By hand from the raw file: 58 messages, 28 assistant messages, 14 tool calls, 6 tool
    // messages starting "Error:", 3 attempts identical to an earlier failing call (corpus README).
    let v = inspect(&corpus().join("tau-bench_gpt-4o-airline.subset5.json"), &["--select", "/0/traj"]);
    assert_eq!(v.len(), 1);
    assert_eq!(counts(&v[0]), (28, 14, 6, 3, "answer".into()));
    assert_eq!(v[0]["loop_guard_at"], 11);
    assert_eq!(v[0]["longest_failing_streak"], 2);
}

#[test]
fn openai_chat_whole_tau_bench_file() {
    let v = inspect(&corpus().join("tau-bench_gpt-4o-airline.json"), &[]);
    assert_eq!(v.len(), 200);
    let sum = |k: &str| v.iter().map(|c| c[k].as_u64().unwrap()).sum::<u64>();
    // The corpus README: 1,164 tool calls, 73 tool errors in 36 conversations.
    assert_eq!(sum("tool_calls"), 1164);
    assert_eq!(sum("tool_failures"), 73);
    assert_eq!(v.iter().filter(|c| c["tool_failures"].as_u64().unwrap() > 0).count(), 36);
    assert_eq!(counts(&v[13]), (28, 14, 6, 3, "answer".into()));
}

#[test]
fn openai_chat_legacy_function_call_toolbench() {
    // train_messages[3]: 4 function calls (the last the control tool Finish with
    // give_up_and_restart), one result with a read timeout in its `error` field.
    let v = inspect(
        &corpus().join("toolbench_G2_10_ChatGPT_DFS_woFilter_w2.json"),
        &["--select", "/answer_generation/train_messages/3"],
    );
    assert_eq!(counts(&v[0]), (4, 4, 1, 0, "gave_up".into()));
}

#[test]
fn cassettes_of_every_provider() {
    // From the corpus README and the cassettes themselves.
    let v = inspect(&corpus().join("pydantic-ai_openai-chat_temporal_agent_with_model_retry.yaml"), &[]);
    assert_eq!(counts(&v[0]), (3, 2, 1, 0, "answer".into()));
    let v = inspect(&corpus().join("pydantic-ai_openai-responses_model_retry.yaml"), &[]);
    assert_eq!(counts(&v[0]), (2, 2, 1, 0, "answer".into()));
    let v = inspect(&corpus().join("pydantic-ai_anthropic-messages_tool_search_eval.yaml"), &[]);
    assert_eq!(v.len(), 4, "one cassette, four conversations");
    assert_eq!(v.iter().map(|c| c["model_calls"].as_u64().unwrap()).sum::<u64>(), 11);
    assert_eq!(counts(&v[1]), (4, 3, 1, 0, "answer".into()));
    let v = inspect(&corpus().join("pydantic-ai_gemini_model_retry.yaml"), &[]);
    assert_eq!(counts(&v[0]), (3, 2, 1, 0, "answer".into()));
    let v = inspect(&corpus().join("otel-contrib_openai-chat_tool_calls_with_content.yaml"), &[]);
    assert_eq!(counts(&v[0]), (2, 2, 0, 0, "answer".into()));
}

#[test]
fn otel_spans() {
    let v = inspect(&corpus().join("otel-genai-spans_from_pydantic-ai_retry_cassette.otlp.json"), &[]);
    assert_eq!(counts(&v[0]), (3, 2, 1, 0, "answer".into()));
    let v = inspect(&corpus().join("otel-genai-spans_from_otel-contrib_tool_calls_cassette.otlp.json"), &[]);
    assert_eq!(counts(&v[0]), (2, 2, 0, 0, "answer".into()));
}

/// The OpenAI Chat cassette and the OTel spans made from the same conversation import to the
/// same task: same calls, same arguments, same outcomes.
#[test]
fn cassette_and_otel_spans_of_one_conversation_agree() {
    use tracefault::trace::import::{ImportOptions, import_path};
    use tracefault::trace::inspect::stats;
    let pairs = [
        (
            "otel-contrib_openai-chat_tool_calls_with_content.yaml",
            "otel-genai-spans_from_otel-contrib_tool_calls_cassette.otlp.json",
        ),
        (
            "pydantic-ai_openai-chat_temporal_agent_with_model_retry.yaml",
            "otel-genai-spans_from_pydantic-ai_retry_cassette.otlp.json",
        ),
    ];
    for (a, b) in pairs {
        let ta = &import_path(&corpus().join(a), &ImportOptions::default()).unwrap().traces[0];
        let tb = &import_path(&corpus().join(b), &ImportOptions::default()).unwrap().traces[0];
        let (sa, sb) = (stats(ta), stats(tb));
        let rows = |s: &tracefault::trace::inspect::Stats| {
            s.rows
                .iter()
                .map(|r| (r.turn, r.tool.to_owned(), r.args.to_owned(), r.outcome.to_owned()))
                .collect::<Vec<_>>()
        };
        assert_eq!(rows(&sa), rows(&sb), "{a} vs {b}");
        let ca = tracefault::trace::compile::compile(ta);
        let cb = tracefault::trace::compile::compile(tb);
        assert_eq!(ca.task.steps, cb.task.steps);
        assert_eq!(
            ca.task.calls.iter().map(|c| (&c.args, &c.result_json)).collect::<Vec<_>>(),
            cb.task.calls.iter().map(|c| (&c.args, &c.result_json)).collect::<Vec<_>>()
        );
        assert_eq!(ca.rules.len(), cb.rules.len());
    }
}

/// Secrets never reach a trace: the corpus cassette carries `authorization: Bearer
/// test_openai_api_key`, and this one adds keys and cookies of every kind.
#[test]
fn secrets_never_reach_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    tracefault()
        .arg("import")
        .arg(corpus().join("otel-contrib_openai-chat_tool_calls_with_content.yaml"))
        .arg("-o")
        .arg(&out)
        .assert()
        .code(0);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(!text.contains("test_openai_api_key") && !text.contains("Bearer"), "{text}");
    let cassette = r#"interactions:
- request:
    headers:
      authorization: [Bearer sk-live-SECRET1]
      x-api-key: [sk-ant-SECRET2]
      x-goog-api-key: [AIzaSECRET3]
      cookie: [session=SECRET4]
    method: POST
    uri: https://api.openai.com/v1/chat/completions?api_key=SECRET5
    body: '{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}'
  response:
    headers:
      set-cookie: [__cf_bm=SECRET6]
      openai-organization: [org-SECRET7]
    status: {code: 200, message: OK}
    body: {string: '{"choices": [{"message": {"role": "assistant", "content": "hello"}}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}'}
"#;
    let path = write(dir.path(), "c.yaml", cassette);
    tracefault().arg("import").arg(&path).arg("-o").arg(&out).assert().code(0);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("\"hello\""), "{text}");
    assert!(!text.contains("SECRET"), "a secret leaked: {text}");
}

#[test]
fn bad_input_is_explained_not_panicked() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str], &str); 5] = [
        ("broken.json", "{\"messages\": [", &[], "broken.json:1: not JSON or JSONL"),
        (
            "list.json",
            "[{\"role\": \"user\", \"content\": \"x\"}, {\"content\": \"no role\"}]",
            &[],
            "list.json:1:36: /1: expected a message with a `role`",
        ),
        (
            "list.json",
            "[1, 2]",
            &["--select", "/5"],
            "--select: expected a JSON pointer into the file; \"/5\" is no such path (the top level is a list of 2)",
        ),
        ("what.json", "{\"hello\": 1}", &[], "what.json: no supported format fits"),
        ("c.yaml", "interactions: [{response: {}}]", &[], "c.yaml: /interactions/0: expected a `request`"),
    ];
    for (name, text, extra, expected) in cases {
        let p = write(dir.path(), name, text);
        let out = tracefault().arg("inspect").arg(&p).args(extra).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).replace(&*dir.path().to_string_lossy(), "");
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(expected), "{name}: expected {expected:?} in {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    tracefault().args(["inspect", "x.json", "--format", "csv"]).assert().code(2);
}

/// A large file of wrapped conversations is read one element at a time; a broken element far
/// into it is still named by file and line, and nothing was written for the good ones before it.
#[test]
fn a_broken_conversation_in_a_streamed_file_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = r#"{"traj": [{"role": "user", "content": "a ] } , ["}, {"role": "assistant", "content": "done"}]}"#;
    let bad = r#"{"traj": [{"role": "user", "content": "x"} {"role": "assistant", "content": "y"}]}"#;
    let jsonl = [good, good, "", bad, good].join("\n");
    let array =
        format!("[\n{good},\n{good},\n{{\"traj\": [\n  {{\"role\": \"user\"}}\n  {{\"role\": \"assistant\"}}]}}\n]");
    for (name, text, line) in [("w.jsonl", jsonl, 4), ("w.json", array, 6)] {
        let p = write(dir.path(), name, &text);
        let out = dir.path().join(format!("{name}.out.jsonl"));
        for all in [true, false] {
            let mut import = tracefault();
            import.arg("import").arg(&p).arg("-o").arg(&out);
            if all {
                import.arg("--all");
            }
            let run = import.output().unwrap();
            let err = String::from_utf8_lossy(&run.stderr);
            assert_eq!(run.status.code(), Some(2), "{name}: {err}");
            assert!(
                err.contains(&format!("{name}:{line}: JSON: expected `,`")),
                "{name}: expected line {line} in {err}"
            );
            let left: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|f| f.contains(".out"))
                .collect();
            assert!(left.is_empty(), "{name} (--all {all}): a failed import leaves no output, found {left:?}");
        }
    }
}

#[test]
fn failure_rule_overrides_text_rules() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "m.json",
        r#"[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"t","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"NOPE: it broke"},{"role":"assistant","content":"done"}]"#,
    );
    assert_eq!(inspect(&p, &[])[0]["tool_failures"], 0);
    assert_eq!(inspect(&p, &["--failure-rule", "^NOPE"])[0]["tool_failures"], 1);
}

#[test]
fn several_conversations_import_as_several_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("anth.jsonl");
    tracefault()
        .arg("import")
        .arg(corpus().join("pydantic-ai_anthropic-messages_tool_search_eval.yaml"))
        .arg("-o")
        .arg(&out)
        .assert()
        .code(0);
    for i in 1..=4 {
        assert!(dir.path().join(format!("anth-{i}.jsonl")).exists());
    }
    tracefault()
        .arg("import")
        .arg(corpus().join("pydantic-ai_anthropic-messages_tool_search_eval.yaml"))
        .arg("-o")
        .arg(&out)
        .arg("--all")
        .assert()
        .code(0);
    // Native files with several traces read back as several conversations.
    assert_eq!(inspect(&out, &[]).len(), 4);
}

#[test]
fn scenarios_can_override_the_failure_rules() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "m.json",
        r#"[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"t","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"NOPE: it broke"},{"role":"assistant","content":"done"}]"#,
    );
    let with = |rules: &str| {
        let sc = write(dir.path(), "s.toml", &format!("name = \"r\"\ntrace = \"m.json\"\n{rules}"));
        tracefault::scenario::load::load_file(&sc).map(|s| s.faults.rules.len())
    };
    assert_eq!(with("").unwrap(), 0, "the built-in rules see no failure");
    assert_eq!(with("trace_failure_rules = [\"^NOPE\"]\n").unwrap(), 1, "the scenario's rule does");
    let err = with("trace_failure_rules = [\"(\"]\n").unwrap_err().to_string();
    assert!(err.contains("trace_failure_rules: expected regular expressions"), "{err}");
}

/// A conversation larger than the streaming reader keeps in memory (4 MiB) is read again from
/// the file, first or later in it: its trace is the one the whole-file reader gives, and a
/// syntax error deep inside it is still named by its line.
#[test]
fn a_conversation_too_large_to_keep_reads_as_the_whole_file_reader_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(corpus().join("tau-bench_gpt-4o-airline.json")).unwrap();
    let convs: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let mut big = convs[0].clone();
    let msgs = big["traj"].as_array().unwrap().clone();
    let step = serde_json::to_string(&msgs[2..]).unwrap().len();
    let mut grown = msgs.clone();
    for _ in 0..=(5 << 20) / step {
        grown.extend_from_slice(&msgs[2..]);
    }
    big["traj"] = serde_json::Value::Array(grown);
    let (big, small) = (big.to_string(), convs[1].to_string());
    // The events of a trace file, without its header (ids name the file and the element).
    let events = |path: &Path| -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap();
        text.lines().filter(|l| !l.contains("\"tracefault_trace\"")).map(str::to_owned).collect()
    };
    for (name, elements, at) in [("first.json", [&big, &small], 0), ("later.json", [&small, &big], 1)] {
        let p = write(dir.path(), name, &format!("[{}]", elements.map(String::as_str).join(",\n")));
        let streamed = dir.path().join(format!("{name}.all.jsonl"));
        tracefault().arg("import").arg(&p).arg("--all").arg("-o").arg(&streamed).assert().code(0);
        let whole = dir.path().join(format!("{name}.one.jsonl"));
        let select = format!("/{at}");
        tracefault().arg("import").arg(&p).args(["--select", &select, "-o"]).arg(&whole).assert().code(0);
        let small_events = {
            let q = write(dir.path(), "small.json", &format!("[{small}]"));
            let out = dir.path().join("small.jsonl");
            tracefault().arg("import").arg(&q).args(["--select", "/0", "-o"]).arg(&out).assert().code(0);
            events(&out)
        };
        let all = events(&streamed);
        let big_events = events(&whole);
        assert!(big_events.len() > 10_000, "{name}: the conversation is large");
        let expected: Vec<String> = if at == 0 {
            big_events.iter().chain(&small_events).cloned().collect()
        } else {
            small_events.iter().chain(&big_events).cloned().collect()
        };
        assert!(all == expected, "{name}: the streamed traces differ from the whole-file reader's");
    }
    let broken = big.replacen("\"role\": \"tool\"", "\"role\" \"tool\"", 1);
    let broken = if broken == big { big.replacen("\"role\":\"tool\"", "\"role\" \"tool\"", 1) } else { broken };
    assert_ne!(broken, big);
    let p = write(dir.path(), "broken.json", &format!("[{small},\n{small},\n{broken}]"));
    let out = tracefault().arg("inspect").arg(&p).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("broken.json:3: JSON: expected `:`"), "{err}");
}

/// `--help` names every format `--format` takes, and an unknown one is refused with the list.
#[test]
fn every_format_is_listed_under_format() {
    let help = tracefault().args(["inspect", "--help"]).output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap().replace(['\n', ' '], "");
    for name in tracefault::trace::import::SourceFormat::NAMES {
        assert!(help.contains(name), "--help does not name {name}: {help}");
    }
    let out = tracefault().args(["inspect", "x.json", "--format", "claude"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("claude-code") && err.contains("mini-swe-agent"), "{err}");
}

/// Arbitrary JSON (shaped like the formats, so the importers get past detection).
fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{Value, json};
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z_ {}\":,\\[\\]]{0,12}".prop_map(Value::from),
        prop::sample::select(vec![
            "user",
            "assistant",
            "tool",
            "model",
            "function_call",
            "tool_use",
            "tool_result",
            "Error: x",
            "{}"
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let keys = prop::sample::select(vec![
            "role",
            "content",
            "tool_calls",
            "id",
            "function",
            "name",
            "arguments",
            "messages",
            "type",
            "input",
            "call_id",
            "output",
            "contents",
            "parts",
            "functionCall",
            "functionResponse",
            "response",
            "error",
            "is_error",
            "tool_use_id",
            "interactions",
            "request",
            "response",
            "resourceSpans",
            "traj",
            "choices",
        ]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((keys, inner), 0..5).prop_map(|kv| {
                let mut m = serde_json::Map::new();
                for (k, v) in kv {
                    m.insert(k.to_owned(), v);
                }
                Value::Object(m)
            }),
        ]
    })
    .prop_map(|v| json!(v))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Bad input gets an error, never a panic: every importer, every format, arbitrary JSON.
    #[test]
    fn importers_never_panic(v in arb_json(), format in 0usize..tracefault::trace::import::SourceFormat::NAMES.len()) {
        use tracefault::trace::import::{ImportOptions, SourceFormat, import_str};
        let f = SourceFormat::parse(SourceFormat::NAMES[format]).unwrap();
        let opts = ImportOptions { format: f, ..ImportOptions::default() };
        let text = v.to_string();
        if let Ok(imported) = import_str(&text, Path::new("x.json"), &opts) {
            for t in &imported.traces {
                // And whatever imports can be inspected, compiled and replayed as recorded.
                let _ = tracefault::trace::inspect::stats(t);
                let _ = tracefault::trace::compile::compile(t);
                let _ = tracefault::replay::replay_as_recorded(t.clone());
            }
        }
    }
}

/// Replaces the node reached by `path` (indices taken modulo each level's size) with `with`.
fn mutate(v: &mut serde_json::Value, path: &[usize], with: serde_json::Value) {
    use serde_json::Value;
    let Some((&step, rest)) = path.split_first() else {
        *v = with;
        return;
    };
    match v {
        Value::Array(a) if !a.is_empty() => {
            let n = a.len();
            mutate(&mut a[step % n], rest, with);
        }
        Value::Object(m) if !m.is_empty() => {
            let key = m.keys().nth(step % m.len()).cloned().expect("in range");
            mutate(m.get_mut(&key).expect("present"), rest, with);
        }
        other => *other = with,
    }
}

/// Small real traces of every format, parsed once.
fn corpus_values() -> &'static Vec<(String, serde_json::Value)> {
    static CORPUS: std::sync::OnceLock<Vec<(String, serde_json::Value)>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(|| {
        let dir = crate::root().join("traces");
        let mut out = Vec::new();
        for name in [
            "openai-chat_model-retry.cassette.yaml",
            "openai-responses_model-retry.cassette.yaml",
            "anthropic_tool-search.cassette.yaml",
            "gemini_model-retry.cassette.yaml",
            "otel_model-retry.otlp.json",
            "openai-chat_tau-bench-airline-13.json",
        ] {
            let text = std::fs::read_to_string(dir.join(name)).unwrap();
            let v: serde_json::Value = if name.ends_with(".yaml") {
                serde_norway::from_str(&text).unwrap()
            } else {
                serde_json::from_str(&text).unwrap()
            };
            out.push((name.to_owned(), v));
        }
        out
    })
}

/// The fixtures of the readers of agent tools' own logs, parsed once (a JSONL file as the list of
/// its lines, as the readers get it).
fn session_log_values() -> &'static Vec<(String, serde_json::Value)> {
    static LOGS: std::sync::OnceLock<Vec<(String, serde_json::Value)>> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let mut out = Vec::new();
        for folder in [
            "codex",
            "claude-code",
            "agents-sdk",
            "inspect",
            "tau2",
            "swe-agent",
            "mini-swe-agent",
            "openhands",
            "otel",
        ] {
            let dir = crate::root().join("tests/fixtures").join(folder);
            let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
            names.sort();
            for path in names {
                let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default().to_owned();
                if !["json", "jsonl", "traj"].contains(&ext.as_str()) {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let v = serde_json::from_str(&text).unwrap_or_else(|_| {
                    serde_json::Value::Array(
                        text.lines()
                            .filter(|l| !l.trim().is_empty())
                            .filter_map(|l| serde_json::from_str(l).ok())
                            .collect(),
                    )
                });
                out.push((path.file_name().unwrap().to_string_lossy().into_owned(), v));
            }
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Real traces with one node replaced at random: still an error or a trace, never a panic.
    #[test]
    fn mutated_corpus_traces_never_panic(
        which in 0usize..6,
        path in prop::collection::vec(any::<usize>(), 0..9),
        with in prop_oneof![
            Just(serde_json::Value::Null),
            Just(serde_json::json!(7)),
            Just(serde_json::json!("Error: x")),
            Just(serde_json::json!([])),
            Just(serde_json::json!({})),
            Just(serde_json::json!([{"role": "tool"}])),
        ],
    ) {
        use tracefault::trace::import::{ImportOptions, import_str};
        let (name, v) = &corpus_values()[which];
        let mut v = v.clone();
        mutate(&mut v, &path, with);
        let text = v.to_string();
        let file = if name.ends_with(".yaml") { "x.json" } else { name.as_str() };
        if let Ok(imported) = import_str(&text, Path::new(file), &ImportOptions::default()) {
            for t in &imported.traces {
                let _ = tracefault::trace::compile::compile(t);
                let _ = tracefault::replay::replay_as_recorded(t.clone());
            }
        }
    }

    /// Agent tools' logs with one node replaced at random: still an error or a trace, never a
    /// panic, and whatever imports can be inspected, compiled and replayed as recorded.
    #[test]
    fn mutated_session_logs_never_panic(
        which in any::<prop::sample::Index>(),
        path in prop::collection::vec(any::<usize>(), 0..10),
        with in prop_oneof![
            Just(serde_json::Value::Null),
            Just(serde_json::json!(-1)),
            Just(serde_json::json!("Exit code: 1")),
            Just(serde_json::json!([])),
            Just(serde_json::json!({})),
            Just(serde_json::json!({"type": "tool_result", "is_error": true})),
            Just(serde_json::json!(1e300)),
        ],
    ) {
        use tracefault::trace::import::{ImportOptions, import_str};
        let logs = session_log_values();
        let (name, v) = &logs[which.index(logs.len())];
        let mut v = v.clone();
        mutate(&mut v, &path, with);
        if let Ok(imported) = import_str(&v.to_string(), Path::new(name), &ImportOptions::default()) {
            for t in &imported.traces {
                let _ = tracefault::trace::inspect::stats(t);
                let _ = tracefault::trace::compile::compile(t);
                let _ = tracefault::replay::replay_as_recorded(t.clone());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// A file of wrapped conversations read one element at a time (`import_path`) gives what
    /// reading it whole (`import_str`) gives, whatever the conversations hold: the same traces
    /// when both read it, an error from both when one fails.
    #[test]
    fn streamed_import_equals_whole_file_import(
        conversations in prop::collection::vec(
            (0usize..3, prop::collection::vec(any::<usize>(), 0..5), prop_oneof![
                Just(serde_json::Value::Null),
                Just(serde_json::json!("Error: x ] } \" [")),
                Just(serde_json::json!([])),
                Just(serde_json::json!({"role": "tool", "content": "a\nb"})),
                arb_json(),
            ], any::<bool>()),
            1..4,
        ),
        jsonl in any::<bool>(),
        pretty in any::<bool>(),
    ) {
        use tracefault::trace::import::{ImportOptions, import_path, import_str};
        let (_, tau) = &corpus_values()[5];
        let keys = ["traj", "conversation", "trajectory"];
        let elements: Vec<serde_json::Value> = conversations
            .into_iter()
            .map(|(key, path, with, mutated)| {
                let mut messages = tau.clone();
                if mutated {
                    mutate(&mut messages, &path, with);
                }
                serde_json::json!({ keys[key]: messages, "reward": 1 })
            })
            .collect();
        let text = if jsonl {
            elements.iter().map(|e| e.to_string() + "\n").collect::<String>()
        } else if pretty {
            serde_json::to_string_pretty(&elements).unwrap()
        } else {
            serde_json::Value::Array(elements).to_string()
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(if jsonl { "c.jsonl" } else { "c.json" });
        std::fs::write(&path, &text).unwrap();
        let opts = ImportOptions::default();
        let streamed = import_path(&path, &opts);
        let whole = import_str(&text, &path, &opts);
        match (streamed, whole) {
            (Ok(s), Ok(w)) => {
                prop_assert_eq!(s.format, w.format);
                prop_assert_eq!(s.traces, w.traces);
            }
            (Err(_), Err(_)) => {}
            (s, w) => prop_assert!(false, "streamed {:?} but whole-file {:?}", s.map(|i| i.traces.len()), w.map(|i| i.traces.len())),
        }
    }
}
