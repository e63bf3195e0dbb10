//! The provider layer: one module per provider format, each holding everything that format
//! means, behind one trait ([`Provider`]) and one enum ([`Format`]):
//! - reading a conversation (a request's messages, a response, the declared tools) into the
//!   neutral [`Item`]s the importers and the wire mock share;
//! - rendering a tool result (the shape the engine's renderer fills) and reading one back;
//! - the mock provider: the request's tool choice, request validation with the provider's
//!   status and error bodies, the model's turn as a response (JSON or SSE), provider errors.
//!
//! Adding a provider is a module here and a variant of [`Format`]. The engine's renderer, the
//! importers and `wire/` all reach a format through [`Format::provider`].

pub mod anthropic;
pub mod choice;
pub mod gemini;
pub mod gemini_openai;
pub mod openai_chat;
pub mod openai_responses;
pub mod reply;

use serde_json::{Value, json};

pub use self::choice::{Choice, ToolChoice};
pub use self::reply::Reply;
use crate::exchange::ToolDef;
use crate::exchange::{ImportError, Item};

/// The wire format the model sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    OpenAiChat,
    OpenAiResponses,
    Anthropic,
    Gemini,
    GeminiOpenAi,
}

impl Format {
    pub const ALL: [Format; 5] =
        [Format::OpenAiChat, Format::OpenAiResponses, Format::Anthropic, Format::Gemini, Format::GeminiOpenAi];

    pub fn name(self) -> &'static str {
        match self {
            Format::OpenAiChat => "openai-chat",
            Format::OpenAiResponses => "openai-responses",
            Format::Anthropic => "anthropic",
            Format::Gemini => "gemini",
            Format::GeminiOpenAi => "gemini-openai",
        }
    }

    pub fn parse(s: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == s)
    }

    /// Everything the format means.
    pub fn provider(self) -> &'static dyn Provider {
        match self {
            Format::OpenAiChat => &openai_chat::OpenAiChat,
            Format::OpenAiResponses => &openai_responses::OpenAiResponses,
            Format::Anthropic => &anthropic::Anthropic,
            Format::Gemini => &gemini::Gemini,
            Format::GeminiOpenAi => &gemini_openai::GeminiOpenAi,
        }
    }

    /// Whether the format has a structural error flag (only Anthropic's `is_error`).
    pub fn has_error_flag(self) -> bool {
        matches!(self.provider().result_shape(), ResultShape::Content { error_flag: true, .. })
    }

    /// The conversation a request carries (lenient: what does not read is left out; a plain
    /// string input is one user message).
    pub fn request_items(self, body: &Value) -> Vec<Item> {
        let p = self.provider();
        let key = p.conversation_key();
        let list = match body.get(key) {
            Some(Value::Array(a)) => a.clone(),
            Some(Value::String(s)) => vec![json!({"role": "user", "content": s})],
            _ => Vec::new(),
        };
        p.items(&list, &format!("/{key}")).unwrap_or_default()
    }

    /// A request checked as the real API checks it: its own shape first (an object with the
    /// conversation list the API requires, made of objects), then the provider's rules for
    /// tool calls and results. A violation gets the provider's 400 and never a model turn.
    pub fn validate(self, body: &Value, request_id: &str) -> Option<Violation> {
        let p = self.provider();
        let key = p.conversation_key();
        let Some(obj) = body.as_object() else {
            return Some(p.request_error(RequestProblem::NotAnObject(kind(body))));
        };
        let problem = match obj.get(key) {
            None if p.conversation_required(body) => Some(RequestProblem::Missing(key)),
            None => None,
            Some(Value::String(_)) if p.takes_text_input() => None,
            Some(Value::Array(a)) => a.iter().position(|m| !m.is_object()).map(|i| RequestProblem::NotAnObjectAt {
                key,
                index: i,
                value: &a[i],
            }),
            Some(other) => Some(RequestProblem::NotAList { key, value: other }),
        };
        match problem {
            Some(problem) => Some(p.request_error(problem)),
            None => p.pairing(body, request_id),
        }
    }

    /// A body that is not JSON, in the provider's words.
    pub fn not_json(self, err: &str) -> Violation {
        self.provider().request_error(RequestProblem::NotJson(err))
    }

    /// The model's turn as the provider sends it. `n` numbers the response (ids); `tokens`
    /// is (in, out).
    pub fn answer(self, turn: &Turn, shape: &Shape, n: u32, tokens: (u64, u64)) -> Reply {
        let id = request_id(n);
        self.provider().answer(turn, shape, n, tokens).header("x-request-id", id.clone()).header("request-id", id)
    }

    /// The tool results of a request `body`, in order, each with its call id (none: Gemini's
    /// may have none).
    pub fn result_nodes(self, body: &mut Value) -> Vec<(Option<String>, &mut Value)> {
        match body.get_mut(self.provider().conversation_key()) {
            Some(Value::Array(list)) => self.provider().result_nodes(list),
            _ => Vec::new(),
        }
    }

    /// Puts what the model reads of `rendered` (a result as the renderer gives it in this
    /// format) into the result `node` of a request, keeping the node's ids: the content and
    /// the error flag, or Gemini's `response`.
    pub fn replace_result(self, node: &mut Value, rendered: &Value) {
        match self.provider().result_shape() {
            ResultShape::Content { content_key, error_flag, .. } => {
                let key = content_key.trim_matches(|c| c == '"' || c == ':');
                node[key] = rendered[key].clone();
                if error_flag && let Some(o) = node.as_object_mut() {
                    match rendered.get("is_error") {
                        Some(flag) => o.insert("is_error".into(), flag.clone()),
                        None => o.remove("is_error"),
                    };
                }
            }
            ResultShape::FunctionResponse { .. } => {
                let response = rendered["functionResponse"]["response"].clone();
                let key = if node.get("functionResponse").is_some() { "functionResponse" } else { "function_response" };
                if let Some(part) = node.get_mut(key) {
                    part["response"] = response;
                }
            }
        }
    }

    /// The provider's own error event mid-stream, for response `n`.
    pub fn stream_error_event(self, n: u32) -> String {
        self.provider().stream_error_event(&request_id(n))
    }

    /// A provider failure with the status and body that provider really sends, and
    /// `retry-after` headers (a real wait) when known.
    pub fn error(self, status: u16, retry_after_real_ms: Option<u64>, n: u32) -> Reply {
        let p = self.provider();
        let status = p.status(status);
        let id = request_id(n);
        let r = Reply::json(status, &p.error_body(status, retry_after_real_ms, &id))
            .header("x-request-id", id.clone())
            .header("request-id", id);
        match retry_after_real_ms {
            Some(ms) => r.retry_after(ms),
            None => r,
        }
    }
}

/// The request id the mock gives response `n`.
pub fn request_id(n: u32) -> String {
    format!("req_tracefault_{n:06}")
}

/// What the mock model answers.
#[derive(Clone, Debug, PartialEq)]
pub enum Turn {
    /// Tool calls: (id, tool, arguments).
    Calls(Vec<(String, String, Value)>),
    Final {
        text: String,
    },
}

/// What a request asked of the answer's shape.
#[derive(Clone, Debug, Default)]
pub struct Shape {
    pub model: String,
    pub stream: bool,
    /// Chat Completions `stream_options.include_usage`: the usage chunk only when asked.
    pub include_usage: bool,
    /// Responses echo the request's `tools`, `tool_choice` and `parallel_tool_calls`.
    pub tools: Value,
    pub tool_choice: Value,
    pub parallel_tool_calls: bool,
    /// The Responses object's id (`resp_…`), which `previous_response_id` will name.
    pub response_id: String,
}

/// A rejected request: the provider's error body (always HTTP 400 here).
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    pub body: Value,
}

/// What is wrong with a request's own shape, for the provider to say in its words.
#[derive(Clone, Copy, Debug)]
pub enum RequestProblem<'a> {
    /// The body is not JSON (the parser's message).
    NotJson(&'a str),
    /// The body is JSON but not an object (what it is instead, e.g. "an array").
    NotAnObject(&'static str),
    /// The conversation list is missing.
    Missing(&'static str),
    /// The conversation is not a list.
    NotAList { key: &'static str, value: &'a Value },
    /// An element of the conversation is not an object.
    NotAnObjectAt { key: &'static str, index: usize, value: &'a Value },
}

/// How a tool result is laid out, for the engine's renderer to fill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultShape {
    /// A string content field: `prefix`, the call number, `","`, `content_key`, the content as
    /// a JSON string, `,"is_error":true` when failed and `error_flag`, `}`.
    Content { prefix: &'static str, content_key: &'static str, error_flag: bool },
    /// Gemini's `functionResponse` part: `prefix`, the call number, the tool's name, then a
    /// `response` object whose `output` is a success and `error` a failure.
    FunctionResponse { prefix: &'static str },
}

/// Where a rendered tool result keeps what the model reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ResultPart<'a> {
    /// A content field (a string or text parts), and the structural error flag beside it.
    Content { content: &'a Value, flag: bool },
    /// Gemini's `response` object: `error` the error channel, anything else the output.
    Response(&'a Value),
}

/// Everything one provider format means. Implemented once per module of this layer.
pub trait Provider: Sync {
    /// Whether the mock serves this provider at a path: `version` is the path's version prefix
    /// (`/v1`, `/v1beta`, `/v1beta/openai` or none) and `rest` what follows it. `Some(true)`
    /// when the path itself asks for a stream (Gemini's `streamGenerateContent`).
    fn serves(&self, version: &str, rest: &str) -> Option<bool>;

    /// The request key holding the conversation (`messages`, `input`, `contents`).
    fn conversation_key(&self) -> &'static str;

    /// A conversation list (`conversation_key`'s) as neutral items; `path` is its JSON pointer.
    fn items(&self, list: &[Value], path: &str) -> Result<Vec<Item>, ImportError>;

    /// The model turn a response body holds, with its usage.
    fn response(&self, body: &Value) -> Option<Item>;

    /// The tools a request declares.
    fn tools(&self, body: &Value) -> Vec<ToolDef>;

    /// How a tool result is laid out.
    fn result_shape(&self) -> ResultShape;

    /// The whole message an API receives for one rendered tool result (a block or part that
    /// sits in a user turn is wrapped in one).
    fn wrap_message(&self, item: &str) -> String {
        item.to_owned()
    }

    /// The tool results in a request's conversation (its `conversation_key` list), in order,
    /// each with its call id: the nodes [`Format::replace_result`] rewrites.
    fn result_nodes<'a>(&self, list: &'a mut [Value]) -> Vec<(Option<String>, &'a mut Value)>;

    /// Where a rendered tool result (or the message holding it) keeps what the model reads.
    fn result_part<'a>(&self, message: &'a Value) -> Option<ResultPart<'a>>;

    /// The evidence a structural error mark gives, as the importers name it.
    fn error_mark(&self) -> &'static str {
        "is_error: true"
    }

    /// The prefix of the call ids the mock model gives out.
    fn call_id_prefix(&self) -> &'static str {
        "call_"
    }

    /// The request's tool choice in the provider's words.
    fn tool_choice(&self, body: &Value) -> Choice;

    /// Whether the request must carry the conversation list.
    fn conversation_required(&self, _body: &Value) -> bool {
        true
    }

    /// Whether the conversation may be a plain string (one user message).
    fn takes_text_input(&self) -> bool {
        false
    }

    /// The earlier response a request continues instead of carrying the conversation
    /// (Responses' `previous_response_id`).
    fn continues<'a>(&self, _body: &'a Value) -> Option<&'a str> {
        None
    }

    /// Puts the conversation of response `id` (`None`: the mock never gave it) before the
    /// request's own, or says why not in the provider's words.
    fn with_history(&self, _body: &mut Value, _id: &str, _history: Option<Vec<Value>>) -> Result<(), Violation> {
        Ok(())
    }

    /// Whether a response has an id a later request may continue from.
    fn remembers_responses(&self) -> bool {
        false
    }

    /// What a later request continuing this response continues: the request's conversation
    /// and the model's turn, as that request's items would hold them.
    fn history(&self, _body: &Value, _turn: &Turn, _n: u32) -> Option<Vec<Value>> {
        None
    }

    /// A request's shape problem in the provider's words.
    fn request_error(&self, problem: RequestProblem<'_>) -> Violation;

    /// The provider's rules for pairing tool calls and results, on a well-shaped request.
    fn pairing(&self, body: &Value, request_id: &str) -> Option<Violation>;

    /// The model's turn as a response (JSON, or SSE when `shape.stream`).
    fn answer(&self, turn: &Turn, shape: &Shape, n: u32, tokens: (u64, u64)) -> Reply;

    /// The status the provider really sends for a fault's status: 529 is Anthropic's overload;
    /// the others answer an overload with 503.
    fn status(&self, status: u16) -> u16 {
        if status == 529 { 503 } else { status }
    }

    /// The error body the provider sends with `status`.
    fn error_body(&self, status: u16, retry_after_real_ms: Option<u64>, request_id: &str) -> Value;

    /// The event a stream of the provider's carries when the provider fails mid-answer
    /// (overloaded), blank line included. Chat's and Gemini's: a `data:` chunk holding the
    /// error body, which their SDKs raise.
    fn stream_error_event(&self, request_id: &str) -> String {
        format!("data: {}\n\n", self.error_body(self.status(503), None, request_id))
    }
}

/// A fixed creation time: responses are reproducible, and no SDK checks it.
const CREATED: u64 = 1_700_000_000;

/// A server-sent event stream: each event's optional name and data, then `tail`.
fn sse(events: Vec<(Option<&str>, Value)>, tail: &str) -> Reply {
    let mut out = String::new();
    for (name, data) in events {
        if let Some(n) = name {
            out.push_str("event: ");
            out.push_str(n);
            out.push('\n');
        }
        out.push_str("data: ");
        out.push_str(&data.to_string());
        out.push_str("\n\n");
    }
    out.push_str(tail);
    Reply::sse(out)
}

/// What a JSON value is, in the words the providers' errors use.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a decimal",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A content list's first element with `type == kind`.
fn first_of_type<'a>(list: &'a Value, kind: &str) -> Option<&'a Value> {
    list.as_array()?.iter().find(|p| p["type"] == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_requests_get_the_providers_400() {
        let v = Format::OpenAiChat.validate(&json!({"model": "m", "messages": 5}), "r").unwrap();
        assert_eq!(
            v.body["error"]["message"],
            "Invalid type for 'messages': expected an array of objects, but got an integer instead."
        );
        let v = Format::Anthropic.validate(&json!([]), "r").unwrap();
        assert_eq!(v.body["error"]["type"], "invalid_request_error");
        assert_eq!(v.body["error"]["message"], "Input should be a valid dictionary, got an array");
        let v = Format::Anthropic.validate(&json!({"model": "m"}), "r").unwrap();
        assert_eq!(v.body["error"]["message"], "messages: Field required");
        assert!(Format::Gemini.validate(&json!({"contents": "x"}), "r").is_some());
        assert!(Format::OpenAiResponses.validate(&json!({"model": "m", "input": "hello"}), "r").is_none());
        assert!(Format::OpenAiResponses.validate(&json!({"model": "m", "previous_response_id": "r1"}), "r").is_none());
        assert!(Format::OpenAiResponses.validate(&json!({"model": "m"}), "r").is_some());
        let v = Format::OpenAiChat.validate(&json!({"model": "m", "messages": [1]}), "r").unwrap();
        assert_eq!(v.body["error"]["param"], "messages[0]");
        assert_eq!(v.body["error"]["code"], "invalid_type");
        let v = Format::GeminiOpenAi.not_json("EOF");
        assert!(v.body["error"]["message"].as_str().unwrap().starts_with("We could not parse the JSON body"));
    }

    #[test]
    fn every_format_has_its_provider() {
        for f in Format::ALL {
            assert_eq!(Format::parse(f.name()), Some(f));
            // A provider reads back the item it renders: the mock's answer is a response.
            let turn = Turn::Calls(vec![("c1".into(), "search".into(), json!({"q": "x"}))]);
            let reply = f.answer(&turn, &Shape { model: "m".into(), ..Shape::default() }, 1, (3, 4));
            let body: Value = serde_json::from_str(&reply.body_text()).unwrap();
            let Some(Item::Model { calls, tokens_in, tokens_out, .. }) = f.provider().response(&body) else {
                panic!("{}: no model turn in {body}", f.name())
            };
            assert_eq!(
                (calls.len(), calls[0].name.as_str(), tokens_in, tokens_out),
                (1, "search", 3, 4),
                "{}",
                f.name()
            );
            assert_eq!(calls[0].args.as_json(), r#"{"q":"x"}"#, "{}", f.name());
        }
        assert!(Format::Anthropic.has_error_flag());
        assert!(Format::ALL.iter().filter(|f| f.has_error_flag()).count() == 1);
    }

    #[test]
    fn errors_carry_the_providers_status_and_request_id() {
        let r = Format::Anthropic.error(529, Some(1500), 7);
        assert_eq!(r.status, 529);
        assert!(r.headers.contains(&("request-id", "req_tracefault_000007".to_owned())));
        assert!(r.headers.contains(&("retry-after", "2".to_owned())));
        assert_eq!(Format::OpenAiChat.error(529, None, 1).status, 503);
        assert_eq!(Format::Gemini.error(529, None, 1).status, 503);
    }
}
