//! A small reference agent: an HTTP agent loop over OpenAI Chat or Anthropic Messages that
//! hands tool failures back to the model with one of tracefault's envelope strategies. The
//! integration tests run it against `tracefault serve` / `exec`.
//!
//! Usage: reference_agent [--format openai-chat|anthropic] [--strategy five-field|error-string|
//!        raw-exception|is-error-flag|response-object] [--leave-unanswered]
//! Reads OPENAI_BASE_URL / ANTHROPIC_BASE_URL and TRACEFAULT_TOOLS_URL.

use std::time::Duration;

use serde_json::{Value, json};

struct Opts {
    anthropic: bool,
    strategy: String,
    leave_unanswered: bool,
}

fn opts() -> Opts {
    let args: Vec<String> = std::env::args().collect();
    let get = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    Opts {
        anthropic: get("--format").as_deref() == Some("anthropic"),
        strategy: get("--strategy").unwrap_or_else(|| "five-field".into()),
        leave_unanswered: args.iter().any(|a| a == "--leave-unanswered"),
    }
}

/// POSTs JSON; returns (status, headers we care about, body text) whatever the status.
fn post(url: &str, body: &Value, headers: &[(&str, &str)]) -> Result<(u16, Option<u64>, String), String> {
    let mut req = ureq::post(url).timeout(Duration::from_secs(30));
    for (k, v) in headers {
        req = req.set(k, v);
    }
    match req.send_json(body.clone()) {
        Ok(r) => Ok((r.status(), None, r.into_string().map_err(|e| e.to_string())?)),
        Err(ureq::Error::Status(code, r)) => {
            let ra = r.header("retry-after").and_then(|v| v.parse().ok());
            Ok((code, ra, r.into_string().unwrap_or_default()))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Calls the model, retrying retryable provider failures like the SDKs do (2 retries).
fn call_model(url: &str, body: &Value, headers: &[(&str, &str)]) -> Value {
    for attempt in 0..3 {
        match post(url, body, headers) {
            Ok((200, _, text)) => return serde_json::from_str(&text).expect("the provider sends JSON"),
            Ok((s, ra, _)) if matches!(s, 408 | 409 | 429 | 500..=599) && attempt < 2 => {
                std::thread::sleep(Duration::from_millis(ra.map_or(50, |s| s.min(2) * 1000)));
            }
            Ok((s, _, text)) => {
                eprintln!("provider error {s}: {text}");
                std::process::exit(3);
            }
            Err(e) => {
                eprintln!("transport error: {e}");
                std::process::exit(3);
            }
        }
    }
    unreachable!()
}

fn retryable(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 500 | 502 | 503 | 504 | 529)
}

/// Runs one tool; returns (content for the model, failed).
fn run_tool(tools_url: &str, name: &str, args: &Value, strategy: &str) -> (String, bool) {
    let url = format!("{tools_url}/{name}");
    let attempts = if strategy.starts_with("five-field") { 3 } else { 1 };
    let mut last = (0, None, String::new());
    for attempt in 1..=attempts {
        last = match post(&url, args, &[]) {
            Ok(r) => r,
            Err(e) => (0, None, e),
        };
        let ok = last.0 == 200 && serde_json::from_str::<Value>(&last.2).is_ok();
        if ok {
            return (last.2, false);
        }
        if !(retryable(last.0) || last.0 == 0 || last.0 == 200) || attempt == attempts {
            break;
        }
        std::thread::sleep(Duration::from_millis(last.1.map_or(20, |s| s.min(2) * 1000)));
    }
    let (status, retry_after, body) = last;
    let message = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("the {name} tool failed (HTTP {status})"));
    let content = match strategy {
        "raw-exception" => format!(
            "Traceback (most recent call last):\n  File \"agent.py\", line 12, in run\nrequests.exceptions.HTTPError: {status} Error for url: {url}"
        ),
        "error-string" => format!("ERROR: {message}"),
        "response-object" => json!({"error": message}).to_string(),
        "is-error-flag" => message,
        _ => {
            let code = match status {
                429 => "RATE_LIMITED",
                400 | 422 => "INVALID_ARGS",
                401 | 403 => "UNAUTHORIZED",
                404 => "NOT_FOUND",
                _ => "TRANSPORT",
            };
            json!({"code": code, "message": message, "retryable": retryable(status) || status == 0,
                "details": {"status": status, "tool": name, "retry_after_seconds": retry_after}, "source": "tool"})
            .to_string()
        }
    };
    (content, true)
}

/// The mock tools (`GET TRACEFAULT_TOOLS_URL`): `[{name, description, input_schema}]`, which the
/// agent declares to the model as every provider requires before it calls a tool.
fn list_tools(tools_url: &str) -> Vec<Value> {
    let listed: Value = ureq::get(tools_url)
        .timeout(Duration::from_secs(30))
        .call()
        .ok()
        .and_then(|r| r.into_json().ok())
        .unwrap_or_else(|| json!({"tools": []}));
    listed["tools"].as_array().cloned().unwrap_or_default()
}

fn main() {
    let o = opts();
    let tools_url = std::env::var("TRACEFAULT_TOOLS_URL").expect("TRACEFAULT_TOOLS_URL");
    let tools = list_tools(&tools_url);
    if o.anthropic {
        let base = std::env::var("ANTHROPIC_BASE_URL").expect("ANTHROPIC_BASE_URL");
        let url = format!("{base}/v1/messages");
        let mut messages = vec![json!({"role": "user", "content": "Please do the task."})];
        for _ in 0..60 {
            let declared: Vec<Value> = tools
                .iter()
                .map(|t| json!({"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}))
                .collect();
            let body =
                json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": messages, "tools": declared});
            let resp = call_model(&url, &body, &[("x-api-key", "placeholder"), ("anthropic-version", "2023-06-01")]);
            let content = resp["content"].as_array().cloned().unwrap_or_default();
            messages.push(json!({"role": "assistant", "content": content}));
            let uses: Vec<&Value> = content.iter().filter(|b| b["type"] == "tool_use").collect();
            if uses.is_empty() {
                println!("{}", content.iter().filter_map(|b| b["text"].as_str()).collect::<String>());
                return;
            }
            let mut results = Vec::new();
            for u in uses {
                let (text, failed) =
                    run_tool(&tools_url, u["name"].as_str().unwrap_or_default(), &u["input"], &o.strategy);
                let mut block = json!({"type": "tool_result", "tool_use_id": u["id"], "content": text});
                if failed && (o.strategy == "is-error-flag" || o.strategy.starts_with("five-field")) {
                    block["is_error"] = json!(true);
                }
                results.push(block);
            }
            messages.push(json!({"role": "user", "content": results}));
        }
    } else {
        let base = std::env::var("OPENAI_BASE_URL").expect("OPENAI_BASE_URL");
        let url = format!("{base}/chat/completions");
        let mut messages = vec![json!({"role": "user", "content": "Please do the task."})];
        for _ in 0..60 {
            let declared: Vec<Value> = tools
                .iter()
                .map(|t| json!({"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}))
                .collect();
            let body = json!({"model": "gpt-4o", "messages": messages, "tools": declared});
            let resp = call_model(&url, &body, &[("authorization", "Bearer placeholder")]);
            let msg = resp["choices"][0]["message"].clone();
            messages.push(msg.clone());
            let calls = msg["tool_calls"].as_array().cloned().unwrap_or_default();
            if calls.is_empty() {
                println!("{}", msg["content"].as_str().unwrap_or_default());
                return;
            }
            for (i, c) in calls.iter().enumerate() {
                if o.leave_unanswered && i == 0 {
                    continue;
                }
                let args: Value =
                    serde_json::from_str(c["function"]["arguments"].as_str().unwrap_or("{}")).unwrap_or(json!({}));
                let (text, _) =
                    run_tool(&tools_url, c["function"]["name"].as_str().unwrap_or_default(), &args, &o.strategy);
                messages.push(json!({"role": "tool", "tool_call_id": c["id"], "content": text}));
            }
        }
    }
    eprintln!("gave up after 60 turns");
    std::process::exit(4);
}
