//! Importers: one module per source format, each producing the normalized
//! [`conversation::Conversation`]; [`conversation::to_trace`] turns that into a native trace.
//! `auto` detects the format from the content. Headers of recorded HTTP exchanges are never
//! read, so authorization headers, API keys and cookies cannot reach a trace.

pub mod agents_sdk;
pub mod cassette;
pub mod claude_code;
pub mod codex;
pub mod conversation;
mod cores;
pub mod elements;
mod gaps;
pub mod inspect_ai;
mod kept;
mod lenient;
mod locate;
pub mod mcp;
pub mod mini_swe_agent;
pub mod openai_chat;
pub mod openhands;
pub mod otel;
mod readers;
mod session_lines;
mod stream;
pub mod swe_agent;
pub mod tau2;

use std::path::Path;

use serde_json::Value;

use self::conversation::{Conversation, FailureRules, Item, to_trace};
use self::locate::Place;
use super::Trace;
use crate::error::Error;
use crate::provider::{Format, Provider};
use crate::trace::ToolDef;

/// Source formats (`--format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceFormat {
    Auto,
    Native,
    /// A provider format's own conversations: requests, responses, message lists (the provider
    /// layer reads them).
    Provider(Format),
    Otel,
    Cassette,
    /// MCP JSON-RPC message logs.
    Mcp,
    /// OpenAI Codex CLI rollouts.
    Codex,
    /// Claude Code session transcripts and `claude -p --output-format stream-json` output.
    ClaudeCode,
    /// OpenAI Agents SDK trace exports (traces and spans).
    AgentsSdk,
    /// Inspect AI eval logs (`.json`, `.eval`).
    Inspect,
    /// tau2-bench results.
    Tau2,
    /// SWE-agent trajectories (`.traj`).
    SweAgent,
    /// mini-swe-agent trajectories.
    MiniSweAgent,
    /// OpenHands event streams.
    OpenHands,
}

impl SourceFormat {
    /// Every name `--format` takes, in the order help and errors list them.
    pub const NAMES: [&'static str; 18] = [
        "auto",
        "native",
        "openai-chat",
        "openai-responses",
        "anthropic",
        "gemini",
        "gemini-openai",
        "otel",
        "cassette",
        "mcp",
        "codex",
        "claude-code",
        "agents-sdk",
        "inspect",
        "tau2",
        "swe-agent",
        "mini-swe-agent",
        "openhands",
    ];

    pub fn parse(s: &str) -> Option<SourceFormat> {
        use SourceFormat::*;
        if let Some(f) = Format::parse(s) {
            return Some(Provider(f));
        }
        Some(match s {
            "auto" => Auto,
            "native" => Native,
            "otel" => Otel,
            "cassette" => Cassette,
            "mcp" => Mcp,
            "codex" => Codex,
            "claude-code" => ClaudeCode,
            "agents-sdk" => AgentsSdk,
            "inspect" => Inspect,
            "tau2" => Tau2,
            "swe-agent" => SweAgent,
            "mini-swe-agent" => MiniSweAgent,
            "openhands" => OpenHands,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        use SourceFormat::*;
        match self {
            Auto => "auto",
            Native => "native",
            Provider(f) => f.name(),
            Otel => "otel",
            Cassette => "cassette",
            Mcp => "mcp",
            Codex => "codex",
            ClaudeCode => "claude-code",
            AgentsSdk => "agents-sdk",
            Inspect => "inspect",
            Tau2 => "tau2",
            SweAgent => "swe-agent",
            MiniSweAgent => "mini-swe-agent",
            OpenHands => "openhands",
        }
    }

    /// The provider format a model in this source saw, when it is one.
    pub fn provider_format(self) -> Option<Format> {
        match self {
            SourceFormat::Provider(f) => Some(f),
            _ => None,
        }
    }

    /// The provider format a model in this source saw, by name.
    fn provider(self) -> Option<&'static str> {
        self.provider_format().map(Format::name)
    }

    /// The provider layer's reading of a provider source (OpenAI Chat for the others, whose
    /// request bodies this reads as Chat).
    fn reader(self) -> &'static dyn Provider {
        self.provider_format().unwrap_or(Format::OpenAiChat).provider()
    }
}

pub use crate::exchange::ImportError;

#[derive(Clone, Debug)]
pub struct ImportOptions {
    pub format: SourceFormat,
    /// A JSON pointer into the file (e.g. `/13/traj`).
    pub select: Option<String>,
    /// Where the pointer came from, for errors: `--select` or a scenario's `trace_select`.
    pub select_key: &'static str,
    pub rules: FailureRules,
    /// Import a source that fits its format only in part, listing every gap, instead of
    /// refusing it.
    pub lenient: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            format: SourceFormat::Auto,
            select: None,
            select_key: "--select",
            rules: FailureRules::default(),
            lenient: false,
        }
    }
}

pub struct Imported {
    /// The format read (the detected one under `auto`).
    pub format: SourceFormat,
    pub traces: Vec<Trace>,
}

/// One recorded model exchange: the request's conversation so far, and the response.
pub struct Exchange {
    pub items: Vec<Item>,
    /// The response's model turn (or a failed call with its status); `None` when unreadable.
    pub response: Option<Item>,
    pub tools: Vec<ToolDef>,
    pub model: Option<String>,
}

/// A comparable fingerprint of an item, to tell whether one request extends the last.
fn signature(item: &Item) -> String {
    match item {
        Item::User(t) => format!("u:{}", t.trim()),
        Item::Model { calls, text, .. } if calls.is_empty() => format!("m:{}", text.as_deref().unwrap_or("").trim()),
        Item::Model { calls, .. } => {
            let c: Vec<String> = calls.iter().map(|c| format!("{}{}", c.name, c.args)).collect();
            format!("m:{}", c.join("|"))
        }
        Item::Result { content, .. } | Item::Cancelled { content, .. } => format!("r:{}", content.trim()),
    }
}

/// Groups exchanges into conversations: a request that does not extend the previous request
/// and its response starts a new conversation. Failed provider calls stay where they occurred.
pub fn chain(exchanges: Vec<Exchange>, source: SourceFormat, id: &str, provider: Option<&str>) -> Vec<Conversation> {
    let mut out: Vec<Conversation> = Vec::new();
    // The current conversation, and the signatures of its items without failed calls.
    let mut current: Option<(Conversation, Vec<String>)> = None;
    let count = exchanges.len();
    for (n, ex) in exchanges.into_iter().enumerate() {
        // Signatures compare this request with the last and the next with this: a lone
        // exchange (every wrapped conversation) needs none.
        let compared = current.is_some() || n + 1 < count;
        let sigs: Vec<String> = if compared { ex.items.iter().map(signature).collect() } else { Vec::new() };
        let extends =
            current.as_ref().is_some_and(|(_, prev)| sigs.len() >= prev.len() && sigs[..prev.len()] == prev[..]);
        if !extends {
            if let Some((c, _)) = current.take() {
                out.push(c);
            }
            let conv = Conversation {
                id: String::new(),
                source_format: source.name().to_owned(),
                provider: provider.map(str::to_owned),
                model: ex.model.clone(),
                tools: ex.tools.clone(),
                items: Vec::new(),
                ending: None,
                gaps: Vec::new(),
            };
            current = Some((conv, Vec::new()));
        }
        let (conv, prev) = current.as_mut().expect("set above");
        let done = prev.len();
        let mut rest = ex.items;
        rest.drain(..done);
        if conv.items.is_empty() {
            conv.items = rest; // moved, not copied: a lone exchange can hold a large conversation
        } else {
            conv.items.append(&mut rest);
        }
        prev.extend(sigs.into_iter().skip(done));
        if let Some(resp) = ex.response {
            let ok = matches!(resp, Item::Model { status: 200, .. });
            if ok && n + 1 < count {
                prev.push(signature(&resp));
            }
            conv.items.push(resp);
        }
        for t in ex.tools {
            if !conv.tools.iter().any(|x| x.name == t.name) {
                conv.tools.push(t);
            }
        }
    }
    out.extend(current.map(|c| c.0));
    let n = out.len();
    for (i, c) in out.iter_mut().enumerate() {
        c.id = if n == 1 { id.to_owned() } else { format!("{id}#{}", i + 1) };
    }
    out
}

/// Detects the format of a parsed value.
pub fn detect(v: &Value) -> Option<SourceFormat> {
    use SourceFormat::*;
    let has = |k: &str| v.get(k).is_some();
    if mcp::looks_like(v) {
        return Some(Mcp);
    }
    if let Value::Array(items) = v {
        let first = items.first()?;
        if first.get("role").is_some() || first.get("type").is_some() {
            if items.iter().any(|m| {
                matches!(
                    m.get("type").and_then(Value::as_str),
                    Some("function_call" | "function_call_output" | "custom_tool_call" | "custom_tool_call_output")
                )
            }) {
                return Some(Provider(Format::OpenAiResponses));
            }
            return Some(if items.iter().any(has_blocks) {
                Provider(Format::Anthropic)
            } else {
                Provider(Format::OpenAiChat)
            });
        }
        return detect(container_inner(first).unwrap_or(first));
    }
    if has("interactions") {
        Some(Cassette)
    } else if has("resourceSpans") || otel::looks_like(v) {
        Some(Otel)
    } else if has("contents") || has("candidates") {
        Some(Provider(Format::Gemini))
    } else if has("input") || v.get("output").is_some_and(Value::is_array) {
        Some(Provider(Format::OpenAiResponses))
    } else if let Some(m) = v.get("messages") {
        let anthropic =
            m.as_array().is_some_and(|ms| ms.iter().any(has_blocks)) || has("max_tokens") && !has("choices");
        Some(if anthropic { Provider(Format::Anthropic) } else { Provider(Format::OpenAiChat) })
    } else if let Some(r) = v.get("request") {
        detect(r)
    } else {
        container_inner(v).and_then(detect)
    }
}

/// Why `v` is none of the provider and capture formats [`detect`] knows, one line each: what
/// each expects, and what the file holds instead.
fn provider_misfits(v: &Value) -> Vec<(SourceFormat, ImportError)> {
    use SourceFormat::*;
    let (at, found) = match v {
        Value::Array(items) => match items.first() {
            Some(Value::Object(o)) => ("/0", keys_of(o)),
            Some(_) => ("/0", "a list of scalars".to_owned()),
            None => ("", "an empty list".to_owned()),
        },
        Value::Object(o) => ("", keys_of(o)),
        _ => ("", "a scalar".to_owned()),
    };
    let expect: [(SourceFormat, &str); 7] = [
        (Provider(Format::OpenAiChat), "a message with a `role`, or an object with a `messages` list"),
        (Provider(Format::OpenAiResponses), "an item with a `type`, or an object with `input` or `output` items"),
        (Provider(Format::Anthropic), "a message with a `role` and content blocks, or an object with `messages`"),
        (Provider(Format::Gemini), "an object with `contents` or `candidates`"),
        (
            Otel,
            "an OTLP/JSON object with `resourceSpans`, or a list of spans (`name`, span and trace ids, `attributes`)",
        ),
        (Cassette, "a recorded-HTTP cassette with `interactions`"),
        (Mcp, "MCP JSON-RPC messages (`\"jsonrpc\": \"2.0\"`)"),
    ];
    expect.into_iter().map(|(f, e)| (f, ImportError::at(at, format!("{e}; found {found}")))).collect()
}

fn keys_of(o: &serde_json::Map<String, Value>) -> String {
    let keys: Vec<&str> = o.keys().take(8).map(String::as_str).collect();
    let more = if o.len() > 8 { ", …" } else { "" };
    format!("an object with keys {}{more}", keys.join(", "))
}

/// Whether a message carries Anthropic content blocks.
fn has_blocks(m: &Value) -> bool {
    m.get("content").and_then(Value::as_array).is_some_and(|bs| {
        bs.iter().any(|b| matches!(b.get("type").and_then(Value::as_str), Some("tool_use" | "tool_result")))
    })
}

/// The keys a wrapped conversation's message list sits under (tau-bench's `traj`), in the
/// order they are tried.
const WRAPPER_KEYS: [&str; 3] = ["traj", "conversation", "trajectory"];

/// The conversation inside a wrapper object (tau-bench's `traj`, `conversation`).
fn container_inner(v: &Value) -> Option<&Value> {
    WRAPPER_KEYS.iter().find_map(|k| v.get(*k))
}

/// The request/response exchange a body (or `{request, response}` pair) holds.
pub fn exchange(
    format: SourceFormat,
    body: &Value,
    response: Option<&Value>,
    status: u16,
    path: &str,
) -> Result<Exchange, ImportError> {
    let reader = format.reader();
    let (key, tools) = (reader.conversation_key(), reader.tools(body));
    let list = match body.get(key) {
        Some(Value::Array(l)) => l.clone(),
        Some(Value::String(s)) => vec![serde_json::json!({"role": "user", "content": s})],
        _ => return Err(ImportError::at(format!("{path}/{key}"), format!("the request's `{key}` list"))),
    };
    let items = reader.items(&list, &format!("{path}/{key}"))?;
    let response = match response {
        _ if status != 200 => Some(Item::Model { text: None, calls: Vec::new(), tokens_in: 0, tokens_out: 0, status }),
        Some(r) => reader.response(r),
        None => None,
    };
    let model = body.get("model").and_then(Value::as_str).map(str::to_owned);
    Ok(Exchange { items, response, tools, model })
}

/// Conversations in a provider-format value: a bare list, a body, a pair, a list of bodies or
/// pairs (chained), or a list of wrapped conversations (each its own).
fn provider_conversations(format: SourceFormat, v: &Value, id: &str) -> Result<Vec<Conversation>, ImportError> {
    let provider = format.provider();
    let list_key = format.reader().conversation_key();
    match v {
        Value::Array(items) if items.first().is_some_and(|m| m.get("role").is_some() || m.get("type").is_some()) => {
            let ex =
                Exchange { items: format.reader().items(items, "")?, response: None, tools: Vec::new(), model: None };
            Ok(chain(vec![ex], format, id, provider))
        }
        Value::Array(items) => {
            if items.iter().all(|i| container_inner(i).is_some()) {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let inner = container_inner(item).expect("checked");
                    let mut convs = provider_conversations(format, inner, &format!("{id}#{}", i + 1))
                        .map_err(|e| ImportError::at(format!("/{i}{}", e.at), e.expected))?;
                    out.append(&mut convs);
                }
                return Ok(out);
            }
            let mut exchanges = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let (body, resp) = match item.get("request") {
                    Some(req) => (req, item.get("response")),
                    None => (item, None),
                };
                exchanges.push(exchange(format, body, resp, 200, &format!("/{i}"))?);
            }
            Ok(chain(exchanges, format, id, provider))
        }
        Value::Object(_) => {
            if let Some(inner) = container_inner(v) {
                return provider_conversations(format, inner, id);
            }
            let (body, resp) = match v.get("request") {
                Some(req) => (req, v.get("response")),
                None if v.get(list_key).is_some() => (v, None),
                None => {
                    // A response body alone.
                    let ex = exchange(format, &serde_json::json!({ list_key: [] }), Some(v), 200, "")?;
                    return Ok(chain(vec![ex], format, id, provider));
                }
            };
            Ok(chain(vec![exchange(format, body, resp, 200, "")?], format, id, provider))
        }
        _ => Err(ImportError::at("/", "a JSON object or list")),
    }
}

/// Parses a file's text as JSON (and `false`), or as JSONL (a list of its lines, and `true`).
fn parse_json_or_jsonl(text: &str, file: &Path) -> Result<(Value, bool), Error> {
    let whole = match serde_json::from_str::<Value>(text) {
        Ok(v) => return Ok((v, false)),
        Err(e) => e,
    };
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).map_err(|e| {
            let message = if i == 0 { format!("not JSON or JSONL: {whole}") } else { format!("JSONL: {e}") };
            Error::Parse { file: format!("{}:{}", file.display(), i + 1), message }
        })?;
        lines.push(v);
    }
    Ok((Value::Array(lines), true))
}

/// Nesting a trace never needs; deeper input is refused before parsing (the YAML parser takes
/// quadratic time on deep flow collections). JSON has the same limit inside serde_json.
const MAX_NESTING: usize = 128;

/// The deepest nesting of YAML flow collections (`[`, `{`) outside quoted strings.
fn flow_depth(text: &str) -> usize {
    let (mut depth, mut max, mut quote) = (0usize, 0usize, None);
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        // A quote is taken to end at the line's end: an unbalanced apostrophe in plain text must
        // not hide the brackets after it.
        match (quote, b) {
            (_, b'\n') => quote = None,
            (Some(b'"'), b'\\') => {
                bytes.next();
            }
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(b),
            (None, b'[' | b'{') => {
                depth += 1;
                max = max.max(depth);
            }
            (None, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Imports every conversation in `path`.
pub fn import_path(path: &Path, opts: &ImportOptions) -> Result<Imported, Error> {
    let mut traces = Vec::new();
    let format = import_each(path, opts, &mut |t| {
        traces.push(t);
        Ok(())
    })?;
    Ok(Imported { format, traces })
}

/// Imports every conversation in `path`, handing each trace to `each` as soon as it is read,
/// and returns the format read. A JSON array or a JSONL file of wrapped conversations
/// (tau-bench's `{"traj": […]}` and the like) is read one element at a time, so memory holds
/// one conversation however large the file; every other layout (one conversation, chained
/// exchanges, cassettes, spans, native traces) is read whole, as one unit.
pub fn import_each(
    path: &Path,
    opts: &ImportOptions,
    each: &mut dyn FnMut(Trace) -> Result<(), Error>,
) -> Result<SourceFormat, Error> {
    if matches!(opts.format, SourceFormat::Auto | SourceFormat::Inspect) && is_zip(path) {
        if opts.select.is_some() {
            return Err(Error::Invalid {
                file: path.display().to_string(),
                line: None,
                field: opts.select_key.into(),
                expected:
                    "no JSON pointer: an Inspect `.eval` log is a ZIP, read whole (its samples are its conversations)"
                        .into(),
            });
        }
        // An Inspect AI `.eval` log, read whole by its reader.
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("trace");
        let convs = inspect_ai::eval_zip(path, stem).map_err(|e| e.into_error(path))?;
        for c in convs {
            each(gaps::checked(to_trace(c, &opts.rules), path, opts.lenient)?)?;
        }
        return Ok(SourceFormat::Inspect);
    }
    match stream::wrapped(path, opts, each)? {
        Some(format) => Ok(format),
        None => {
            let text = crate::input::read_text(path, crate::input::Input::Trace)?;
            let imported = import_str(&text, path, opts)?;
            imported.traces.into_iter().try_for_each(each)?;
            Ok(imported.format)
        }
    }
}

/// Whether `path` is a regular file that starts with the ZIP magic `PK\x03\x04`.
fn is_zip(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
        && std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok()
        && magic == *b"PK\x03\x04"
}

/// serde_json's message without its position, which counts from the element, not the file.
fn json_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rsplit_once(" at line ") {
        Some((message, _)) => message.to_owned(),
        None => text,
    }
}

/// Imports every conversation in `text`, the contents of `path`.
pub fn import_str(text: &str, path: &Path, opts: &ImportOptions) -> Result<Imported, Error> {
    let looks_native = text.lines().find(|l| !l.trim().is_empty()).is_some_and(|l| l.contains("\"tracefault_trace\""));
    if opts.format == SourceFormat::Native
        || (opts.format == SourceFormat::Auto && looks_native && opts.select.is_none())
    {
        return Ok(Imported { format: SourceFormat::Native, traces: Trace::parse_many(text, path)? });
    }
    if looks_native || path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
        return import_parsed(text, path, opts);
    }
    session_lines::import(text, path, opts).unwrap_or_else(|| import_parsed(text, path, opts))
}

/// [`import_str`] of a file parsed whole first (as JSON, JSONL or YAML), then read.
fn import_parsed(text: &str, path: &Path, opts: &ImportOptions) -> Result<Imported, Error> {
    let is_yaml = opts.format == SourceFormat::Cassette
        || path.extension().is_some_and(|e| e == "yaml" || e == "yml")
        || text.trim_start().starts_with("interactions:");
    let (root, jsonl): (Value, bool) = if is_yaml {
        if flow_depth(text) > MAX_NESTING {
            return Err(Error::Parse {
                file: path.display().to_string(),
                message: format!("YAML nested deeper than {MAX_NESTING} levels: not a trace"),
            });
        }
        let v = serde_norway::from_str(text)
            .map_err(|e| Error::Parse { file: path.display().to_string(), message: format!("YAML: {e}") })?;
        (v, false)
    } else {
        parse_json_or_jsonl(text, path)?
    };
    let v = match &opts.select {
        None => &root,
        Some(ptr) if !ptr.is_empty() && !ptr.starts_with('/') => {
            return Err(Error::Invalid {
                file: path.display().to_string(),
                line: None,
                field: opts.select_key.into(),
                expected: format!("a JSON pointer, which starts with `/` (e.g. \"/13/traj\"), got {ptr:?}"),
            });
        }
        Some(ptr) => root.pointer(ptr).ok_or_else(|| {
            let top = match &root {
                Value::Array(a) => format!("a list of {}", a.len()),
                Value::Object(o) => {
                    format!("an object with keys {}", o.keys().take(8).cloned().collect::<Vec<_>>().join(", "))
                }
                _ => "a scalar".into(),
            };
            Error::Invalid {
                file: path.display().to_string(),
                line: None,
                field: opts.select_key.into(),
                expected: format!("a JSON pointer into the file; {ptr:?} is no such path (the top level is {top})"),
            }
        })?,
    };
    let place = Place { path, text, jsonl, yaml: is_yaml, select: opts.select.as_deref().unwrap_or("") };
    let reader = match opts.format {
        SourceFormat::Auto => readers::detect(v),
        f => readers::reader(f),
    };
    let format = match (opts.format, reader) {
        (_, Some(r)) => r.format,
        (SourceFormat::Auto, None) => detect(v).ok_or_else(|| place.nothing_fits(v))?,
        (f, None) => f,
    };
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("trace");
    let id = match &opts.select {
        Some(p) => format!("{stem}{p}"),
        None => stem.to_owned(),
    };
    let convs = match (reader, format) {
        (Some(r), _) => (r.fits)(v)
            .map_err(|e| place.misfit(e, format, v))
            .and_then(|()| (r.read)(v, &id).map_err(|e| place.error(e)))?,
        (None, SourceFormat::Cassette) => cassette::conversations(v, &id).map_err(|e| place.error(e))?,
        (None, SourceFormat::Otel) => otel::conversations(v, &id).map_err(|e| place.error(e))?,
        (None, SourceFormat::Mcp) => mcp::conversations(v, &id).map_err(|e| place.error(e))?,
        (None, SourceFormat::Native | SourceFormat::Auto) => unreachable!("handled above"),
        (None, f) => provider_conversations(f, v, &id).map_err(|e| place.error(e))?,
    };
    if convs.is_empty() {
        return Err(Error::Invalid {
            file: path.display().to_string(),
            line: None,
            field: "/".into(),
            expected: "at least one conversation".into(),
        });
    }
    // A file whose parts were all set aside as gaps says so (by the gaps check below), not that
    // nothing in it reads in the format.
    if convs.iter().all(|c| c.items.is_empty() && c.gaps.is_empty()) {
        let hint = match readers::detect(v).map(|r| r.format).or_else(|| detect(v)) {
            Some(d) if d != format => format!("the file reads as {}: pass --format {} or auto", d.name(), d.name()),
            _ => "pass --format auto to see which formats were tried".to_owned(),
        };
        return Err(Error::Invalid {
            file: path.display().to_string(),
            line: None,
            field: "format".into(),
            expected: format!(
                "{} content: nothing in the file reads as a message, model call or tool result in that format ({hint})",
                format.name()
            ),
        });
    }
    let traces = convs
        .into_iter()
        .map(|c| gaps::checked(to_trace(c, &opts.rules), path, opts.lenient))
        .collect::<Result<_, _>>()?;
    Ok(Imported { format, traces })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_and_each_provider_format_is_a_source() {
        for name in SourceFormat::NAMES {
            assert_eq!(SourceFormat::parse(name).map(SourceFormat::name), Some(name));
        }
        for f in Format::ALL {
            assert_eq!(SourceFormat::parse(f.name()), Some(SourceFormat::Provider(f)));
            assert_eq!(SourceFormat::Provider(f).provider_format(), Some(f));
        }
        assert_eq!(SourceFormat::Otel.provider_format(), None);
        // Gemini's OpenAI endpoint is read as Chat, and says so in the header.
        let body = r#"{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]}"#;
        let opts = ImportOptions { format: SourceFormat::Provider(Format::GeminiOpenAi), ..Default::default() };
        let t = &import_str(body, Path::new("g.json"), &opts).unwrap().traces[0];
        assert_eq!(t.header.provider.as_deref(), Some("gemini-openai"));
        assert!(matches!(t.events[0], crate::trace::TraceEvent::ModelCall { status: 200, .. }), "{:?}", t.events);
        assert_eq!(t.events.len(), 2, "one model call, then the answer: {:?}", t.events);
    }

    fn whole_file(path: &Path, text: &str) -> Imported {
        import_str(text, path, &ImportOptions::default()).unwrap()
    }

    /// Reading element by element gives exactly what reading the whole file gives: the
    /// tau-bench array as it is, as JSONL (with and without a last newline), and a file in
    /// Anthropic's wrapped layout.
    #[test]
    fn streamed_files_import_like_whole_files() {
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus");
        let tau = corpus.join("tau-bench_gpt-4o-airline.json");
        let text = std::fs::read_to_string(&tau).unwrap();
        let streamed = import_path(&tau, &ImportOptions::default()).unwrap();
        let whole = whole_file(&tau, &text);
        assert!(streamed.traces.len() > 10);
        assert_eq!((streamed.format, &streamed.traces), (whole.format, &whole.traces));

        let dir = tempfile::tempdir().unwrap();
        let elements: Vec<Value> = serde_json::from_str(&text).unwrap();
        let lines: Vec<String> = elements.iter().map(|e| serde_json::to_string(e).unwrap()).collect();
        for (name, jsonl) in [("t.jsonl", lines.join("\n") + "\n"), ("u.jsonl", lines.join("\n"))] {
            let p = dir.path().join(name);
            std::fs::write(&p, &jsonl).unwrap();
            let streamed = import_path(&p, &ImportOptions::default()).unwrap();
            let whole = whole_file(&p, &jsonl);
            assert_eq!(streamed.traces.len(), elements.len(), "{name}");
            assert_eq!((streamed.format, &streamed.traces), (whole.format, &whole.traces), "{name}");
        }

        let wrapped = r#"[{"conversation": [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "done"}]}]}]"#;
        let p = dir.path().join("anthropic.json");
        std::fs::write(&p, wrapped).unwrap();
        let streamed = import_path(&p, &ImportOptions::default()).unwrap();
        assert_eq!(streamed.format, SourceFormat::Provider(Format::Anthropic));
        assert_eq!(streamed.traces, whole_file(&p, wrapped).traces);
    }
}
