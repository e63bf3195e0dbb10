//! The otel importer on span exports written by the real producers (OpenInference, Phoenix,
//! OpenLLMetry 0.54 and 0.62, Logfire, pydantic-ai), offline against a mock OpenAI server:
//! counts derived by hand from the files' own fields (`tests/fixtures/otel/README.md`).
//!
//! Every fixture holds the same scripted runs: (1) "weather in Paris and in Atlantis?" → a
//! call with 2 parallel `get_weather` calls (usage 61/38), Paris answers, Atlantis fails → a
//! second call answers (usage 142/24, finish `stop`); (2) "RATE-LIMIT please" → HTTP 429.

use std::path::PathBuf;

use serde_json::Value;

use crate::root;

fn fixture(name: &str) -> PathBuf {
    crate::traces::fixture("otel", name)
}

/// The `inspect --json` lines of a file, and what it said on stderr.
fn inspect(name: &str) -> (Vec<Value>, String) {
    crate::traces::inspect_json(&fixture(name), &[])
}

/// The `inspect` table of a file.
fn table(name: &str) -> String {
    crate::traces::inspect_table(&fixture(name))
}

/// (model calls, tool calls, failures, ended, reason)
fn counts(v: &Value) -> (u64, u64, u64, &str, Option<&str>) {
    (
        v["model_calls"].as_u64().unwrap(),
        v["tool_calls"].as_u64().unwrap(),
        v["tool_failures"].as_u64().unwrap(),
        v["ended"].as_str().unwrap(),
        v["ended_reason"].as_str(),
    )
}

/// The native traces `import` writes for a file, each as its event lines.
fn imported(name: &str) -> Vec<Vec<Value>> {
    crate::traces::imported(&fixture(name))
}

/// (model call statuses, Σ tokens_in, Σ tokens_out) of one native trace.
fn model_calls(events: &[Value]) -> (Vec<u64>, u64, u64) {
    let calls: Vec<&Value> = events.iter().filter(|e| e["type"] == "model_call").collect();
    let sum = |k: &str| calls.iter().map(|c| c[k].as_u64().unwrap()).sum();
    (calls.iter().map(|c| c["status"].as_u64().unwrap()).collect(), sum("tokens_in"), sum("tokens_out"))
}

/// Run 1 of an OpenInference export: 2 LLM spans, 2 TOOL spans (no call id; the Atlantis one
/// status ERROR "ValueError: city not found: Atlantis"), `llm.finish_reason` stop. Run 2: the
/// AGENT root and its LLM span ERROR, exception `openai.RateLimitError` "Error code: 429 …".
fn assert_openinference_runs(name: &str) {
    let (v, stderr) = inspect(name);
    assert!(stderr.contains("read as otel (2 conversation(s))"), "{name}: {stderr}");
    assert_eq!(counts(&v[0]), (2, 2, 1, "answer", Some("stop")), "{name}");
    assert_eq!(counts(&v[1]), (1, 0, 0, "error", Some("openai.RateLimitError")), "{name}");
    let t = table(name);
    assert!(t.contains("failed: OpenInference TOOL span status ERROR"), "{name}: {t}");
    let traces = imported(name);
    assert_eq!(model_calls(&traces[0]), (vec![200, 200], 61 + 142, 38 + 24), "{name}");
    assert_eq!(model_calls(&traces[1]), (vec![429], 0, 0), "{name}");
}

#[test]
fn openinference_in_otlp_json_and_the_sdk_span_list() {
    assert_openinference_runs("openinference-openai.otlp.json");
    assert_openinference_runs("openinference-openai.spans.json");
}

#[test]
fn a_span_with_both_dialects_counts_once() {
    // OPENINFERENCE_ENABLE_GENAI_SEMCONV=true: every span also carries gen_ai.* (chat,
    // execute_tool, invoke_agent); counted by both dialects there would be 4 tool calls.
    assert_openinference_runs("openinference-openai-genai.otlp.json");
}

#[test]
fn phoenix_exports_of_the_same_runs() {
    // The OpenInference runs ingested by Phoenix and read back: get_spans (flat attributes,
    // span_kind, status_code), /spans/otlpv1 (snake_case OTLP under `data`, newest first) and
    // the DataFrame as JSONL (attributes.* columns, half-nested messages, 61.0 floats).
    for name in ["phoenix-get_spans.json", "phoenix-otlpv1.json", "phoenix-spans_dataframe.jsonl"] {
        assert_openinference_runs(name);
    }
}

#[test]
fn openllmetry_legacy_one_trace_per_call_is_chained() {
    // 0.54 alone: 3 root spans in 3 traces. Trace 2's prompt (gen_ai.prompt.0-4) starts with
    // trace 1's prompt and completion (2 tool_calls): one conversation; its prompt.4 is the
    // tool message "Error: city not found: Atlantis" (text rule). Trace 3: status ERROR,
    // exception openai.RateLimitError, no completion.
    let name = "openllmetry-0.54-openai.spans.json";
    let (v, _) = inspect(name);
    assert_eq!(v.len(), 2);
    assert_eq!(counts(&v[0]), (2, 2, 1, "answer", Some("stop")));
    assert_eq!(counts(&v[1]), (1, 0, 0, "error", Some("openai.RateLimitError")));
    assert!(table(name).contains("failed: text rule"));
    let traces = imported(name);
    assert_eq!(model_calls(&traces[0]), (vec![200, 200], 203, 62));
    assert_eq!(model_calls(&traces[1]).0, [429]);
}

#[test]
fn traceloop_tool_spans_pair_by_name_and_arguments() {
    // 0.62 + traceloop-sdk: get_weather.tool spans (traceloop.span.kind tool, no call id,
    // entity.input kwargs {"city": …}); the Atlantis one status ERROR. Run 2: the workflow
    // span ERROR, exception openai.RateLimitError.
    let name = "openllmetry-0.62-openai.otlp.json";
    let (v, _) = inspect(name);
    assert_eq!(counts(&v[0]), (2, 2, 1, "answer", Some("stop")));
    assert_eq!(counts(&v[1]), (1, 0, 0, "error", Some("openai.RateLimitError")));
    let t = table(name);
    let atlantis = t.lines().position(|l| l.contains(r#"{"city":"Atlantis"}"#)).unwrap();
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[atlantis].contains("terminal"), "{t}");
    assert!(lines[atlantis + 2].contains("failed: traceloop tool span status ERROR"), "{t}");
}

#[test]
fn logfire_openai_request_and_response_data_and_messages() {
    // version=1: request_data / response_data (tool_calls in response_data.message); version=2:
    // gen_ai.input/output.messages. No tool spans: Atlantis fails by its text. Run 2: the root
    // logfire span stays UNSET, the chat span is ERROR with openai.RateLimitError.
    for name in ["logfire-openai-v1.otlp.json", "logfire-openai-v2.spans.json"] {
        let (v, _) = inspect(name);
        assert_eq!(counts(&v[0]), (2, 2, 1, "answer", Some("stop")), "{name}");
        assert_eq!(counts(&v[1]), (1, 0, 0, "error", Some("openai.RateLimitError")), "{name}");
        let traces = imported(name);
        assert_eq!(model_calls(&traces[0]), (vec![200, 200], 203, 62), "{name}");
        assert_eq!(model_calls(&traces[1]).0, [429], "{name}");
    }
}

#[test]
fn pydantic_ai_retry_and_a_crashed_tool() {
    // Run 1: execute_tool (v5) / running tool (v2) for call_atlantis_2 ERROR with ToolRetryError;
    // its result message (tool_call_response `result`) is flagged by the span. Run 2: the tool
    // raises RuntimeError: its span ERROR, no result message anywhere, the agent span ERROR
    // "RuntimeError: weather backend crashed for Atlantis"; the Paris span's result is its
    // gen_ai.tool.call.result / tool_response.
    for name in ["logfire-pydantic-ai-v5.otlp.json", "logfire-pydantic-ai-v2.spans.json"] {
        let (v, _) = inspect(name);
        assert_eq!(counts(&v[0]), (2, 2, 1, "answer", Some("stop")), "{name}");
        assert_eq!(counts(&v[1]), (1, 2, 1, "error", Some("RuntimeError")), "{name}");
        let t = table(name);
        assert!(t.contains("failed: execute_tool span status ERROR"), "{name}: {t}");
        assert!(t.contains("weather backend crashed for Atlantis"), "{name}: {t}");
        let traces = imported(name);
        let results: Vec<(&str, bool)> = traces[1]
            .iter()
            .filter(|e| e["type"] == "tool_result")
            .map(|e| (e["call_id"].as_str().unwrap(), e["ok"].as_bool().unwrap()))
            .collect();
        assert_eq!(results, [("call_paris_1", true), ("call_atlantis_2", false)], "{name}");
        let pydantic_retry = traces[0].iter().find(|e| e["call_id"] == "call_atlantis_2" && e["type"] == "tool_result");
        assert!(pydantic_retry.unwrap()["content"].as_str().unwrap().contains("city not found: Atlantis"), "{name}");
    }
}

/// No file of another format's fixtures reads as spans.
#[test]
fn other_formats_are_not_spans() {
    use tracefault::trace::import::otel::looks_like;
    let mut checked = 0;
    for dir in std::fs::read_dir(root().join("tests/fixtures")).unwrap() {
        let dir = dir.unwrap().path();
        if dir.file_name().is_some_and(|n| n == "otel") || !dir.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            let Ok(text) = std::fs::read_to_string(&f) else { continue };
            let v: Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(_) => match text.lines().filter(|l| !l.trim().is_empty()).map(serde_json::from_str).collect() {
                    Ok(lines) => Value::Array(lines),
                    Err(_) => continue,
                },
            };
            let otel = f.file_name().is_some_and(|n| n.to_string_lossy().starts_with("otel-genai-spans"));
            assert_eq!(looks_like(&v), otel, "{}", f.display());
            checked += 1;
        }
    }
    assert!(checked > 20, "{checked}");
}

/// The Vercel AI SDK 6 with `experimental_telemetry`, run by `vercel-ai/make-vercel-ai.mjs`
/// against the same mock. Run 1 is one trace: the `ai.generateText` root, two
/// `ai.generateText.doGenerate` spans (the first's `ai.response.toolCalls` holds call_paris_1
/// and call_atlantis_2, usage 61/38, finish `tool-calls`; the second 142/24, finish `stop`) and
/// two `ai.toolCall` spans, call_atlantis_2's with status code 2 "city not found: Atlantis".
/// Run 2: the doGenerate span's status code 2 "Rate limit reached…", exception AI_APICallError.
#[test]
fn vercel_ai_sdk_spans_in_the_js_sdk_layout() {
    let name = "vercel-ai/ai-sdk-6-openai-chat.spans.json";
    let (v, stderr) = inspect(name);
    assert!(stderr.contains("read as otel (2 conversation(s))"), "{stderr}");
    assert_eq!(counts(&v[0]), (2, 2, 1, "answer", Some("stop")));
    assert_eq!(counts(&v[1]), (1, 0, 0, "error", Some("AI_APICallError")));
    let t = imported(name);
    assert_eq!(model_calls(&t[0]), (vec![200, 200], 61 + 142, 38 + 24));
    // The provider's message says rate limit; the AI SDK's error carries no status.
    assert_eq!(model_calls(&t[1]), (vec![429], 0, 0));
    let results: Vec<(&str, bool)> = t[0]
        .iter()
        .filter(|e| e["type"] == "tool_result")
        .map(|e| (e["call_id"].as_str().unwrap(), e["ok"].as_bool().unwrap()))
        .collect();
    assert_eq!(results, [("call_paris_1", true), ("call_atlantis_2", false)]);
    let last = t[0].last().unwrap();
    assert_eq!(
        last["text"],
        "Paris is sunny at 21 C. I could not get the weather for Atlantis: the city was not found."
    );
}

/// A Grafana Tempo trace answer (`batches` of `instrumentationLibrarySpans`) from a kagent
/// helm agent on Google ADK with OpenLLMetry's OpenAI instrumentation: each model call is an
/// ADK `generate_content gpt-4.1-mini` span with OpenLLMetry's `openai.chat` span below it.
/// Counted by hand from the file: 2 `openai.chat` spans (usage 2256/13, finish tool_calls;
/// 2392/116, stop), 1 `execute_tool helm_list_releases`, no span with status code 2 (ERROR):
/// 2 / 1 / 0 / answer (stop), each call once, not once per instrumentation.
#[test]
fn a_model_span_wrapping_another_is_one_call() {
    let name = "tempo-kagent-adk-openllmetry.json";
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let spans: Vec<&Value> = doc["batches"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["instrumentationLibrarySpans"].as_array().unwrap())
        .flat_map(|s| s["spans"].as_array().unwrap())
        .collect();
    let named = |prefix: &str| spans.iter().filter(|s| s["name"].as_str().unwrap().starts_with(prefix)).count();
    assert_eq!((named("openai.chat"), named("generate_content "), named("execute_tool ")), (2, 2, 1));
    let (v, stderr) = inspect(name);
    assert!(stderr.contains("read as otel (1 conversation(s))"), "{stderr}");
    assert_eq!(counts(&v[0]), (2, 1, 0, "answer", Some("stop")));
    let traces = imported(name);
    assert_eq!(model_calls(&traces[0]), (vec![200, 200], 2256 + 2392, 13 + 116));
}

/// A Jaeger trace answer (`data` of `{traceID, spans}`: `operationName`, `references`, `tags`,
/// `logs`, times in µs) from a kagent helm agent with OpenLLMetry's OpenAI instrumentation.
/// Counted by hand from the file: 2 `openai.chat` spans (tags `gen_ai.usage.prompt_tokens`
/// 1820 / `completion_tokens` 13, finish tool_calls; 1956 / 117, stop), 1 `execute_tool
/// helm_list_releases`, no `otel.status_code` ERROR on them: 2 / 1 / 0 / answer (stop).
#[test]
fn a_jaeger_trace_answer_reads_as_its_spans() {
    let name = "jaeger-kagent-openllmetry.json";
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap();
    let spans: Vec<&Value> =
        doc["data"].as_array().unwrap().iter().flat_map(|t| t["spans"].as_array().unwrap()).collect();
    let tag =
        |s: &Value, k: &str| s["tags"].as_array().unwrap().iter().find(|t| t["key"] == k).map(|t| t["value"].clone());
    let chats: Vec<&&Value> = spans.iter().filter(|s| s["operationName"] == "openai.chat").collect();
    let usage: Vec<(Value, Value)> = chats
        .iter()
        .map(|s| (tag(s, "gen_ai.usage.prompt_tokens").unwrap(), tag(s, "gen_ai.usage.completion_tokens").unwrap()))
        .collect();
    assert_eq!(usage, [(1820.into(), 13.into()), (1956.into(), 117.into())]);
    assert_eq!(spans.iter().filter(|s| s["operationName"] == "execute_tool helm_list_releases").count(), 1);
    let (v, stderr) = inspect(name);
    assert!(stderr.contains("read as otel (1 conversation(s))"), "{stderr}");
    assert_eq!(counts(&v[0]), (2, 1, 0, "answer", Some("stop")));
    assert_eq!(model_calls(&imported(name)[0]), (vec![200, 200], 1820 + 1956, 13 + 117));
}
