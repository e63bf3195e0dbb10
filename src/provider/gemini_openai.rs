//! Gemini's OpenAI-compatible endpoint (`/v1beta/openai/chat/completions`): the OpenAI Chat
//! Completions format in every respect the mock and the importers see, served under Gemini's
//! path. Its own variant keeps runs and reports apart from OpenAI's.

use serde_json::Value;

use super::openai_chat::OpenAiChat;
use super::{Choice, Provider, Reply, RequestProblem, ResultPart, ResultShape, Shape, Turn, Violation};
use crate::exchange::ToolDef;
use crate::exchange::{ImportError, Item};

pub struct GeminiOpenAi;

impl Provider for GeminiOpenAi {
    /// Chat Completions under `/v1beta/openai`.
    fn serves(&self, version: &str, rest: &str) -> Option<bool> {
        (rest == "/chat/completions" && version == "/v1beta/openai").then_some(false)
    }

    fn conversation_key(&self) -> &'static str {
        OpenAiChat.conversation_key()
    }

    fn items(&self, list: &[Value], path: &str) -> Result<Vec<Item>, ImportError> {
        OpenAiChat.items(list, path)
    }

    fn response(&self, body: &Value) -> Option<Item> {
        OpenAiChat.response(body)
    }

    fn tools(&self, body: &Value) -> Vec<ToolDef> {
        OpenAiChat.tools(body)
    }

    fn result_shape(&self) -> ResultShape {
        OpenAiChat.result_shape()
    }

    fn result_nodes<'a>(&self, list: &'a mut [Value]) -> Vec<(Option<String>, &'a mut Value)> {
        OpenAiChat.result_nodes(list)
    }

    fn result_part<'a>(&self, message: &'a Value) -> Option<ResultPart<'a>> {
        OpenAiChat.result_part(message)
    }

    fn tool_choice(&self, body: &Value) -> Choice {
        OpenAiChat.tool_choice(body)
    }

    fn request_error(&self, problem: RequestProblem<'_>) -> Violation {
        OpenAiChat.request_error(problem)
    }

    fn pairing(&self, body: &Value, request_id: &str) -> Option<Violation> {
        OpenAiChat.pairing(body, request_id)
    }

    fn answer(&self, turn: &Turn, shape: &Shape, n: u32, tokens: (u64, u64)) -> Reply {
        OpenAiChat.answer(turn, shape, n, tokens)
    }

    fn error_body(&self, status: u16, retry_after_real_ms: Option<u64>, request_id: &str) -> Value {
        OpenAiChat.error_body(status, retry_after_real_ms, request_id)
    }
}
