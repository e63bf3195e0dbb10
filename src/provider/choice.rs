//! What a request lets the model do with its tools, as every provider's words come to mean it
//! (each provider module reads its own: OpenAI's `tool_choice`, Anthropic's `tool_choice`,
//! Gemini's `toolConfig.functionCallingConfig`).

use serde_json::Value;

/// Whether and which tool the model may (or must) call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool call: text only.
    None,
    /// At least one tool call (OpenAI `required`, Anthropic `any`, Gemini `ANY`).
    Required,
    /// A call of this tool.
    Named(String),
}

/// The tool choice of a request, the tools it may choose among (`None`: all declared), and
/// whether it asks for one call per turn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Choice {
    pub choice: ToolChoice,
    pub allowed: Option<Vec<String>>,
    pub one_call_per_turn: bool,
}

impl Choice {
    /// Whether `tool` may be called under this choice.
    pub fn allows(&self, tool: &str) -> bool {
        match &self.choice {
            ToolChoice::None => false,
            ToolChoice::Named(n) => n == tool,
            _ => self.allowed.as_ref().is_none_or(|a| a.iter().any(|t| t == tool)),
        }
    }

    /// Whether the model must call a tool.
    pub fn forces_a_call(&self) -> bool {
        matches!(self.choice, ToolChoice::Required | ToolChoice::Named(_))
    }
}

/// A mode word (`none`, `required`/`any`, else auto), any case.
pub(super) fn mode(s: &str) -> ToolChoice {
    match s.to_ascii_lowercase().as_str() {
        "none" => ToolChoice::None,
        "required" | "any" => ToolChoice::Required,
        _ => ToolChoice::Auto,
    }
}

pub(super) fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Provider;
    use serde_json::json;

    fn chat(tc: Value) -> ToolChoice {
        crate::provider::openai_chat::OpenAiChat.tool_choice(&json!({ "tool_choice": tc })).choice
    }

    #[test]
    fn each_providers_words() {
        assert_eq!(chat(json!("none")), ToolChoice::None);
        assert_eq!(chat(json!("required")), ToolChoice::Required);
        assert_eq!(chat(json!("auto")), ToolChoice::Auto);
        assert_eq!(chat(json!({"type": "function", "function": {"name": "f"}})), ToolChoice::Named("f".into()));
        let legacy = crate::provider::openai_chat::OpenAiChat.tool_choice(&json!({"function_call": {"name": "g"}}));
        assert_eq!(legacy.choice, ToolChoice::Named("g".into()));
        let r =
            |tc: Value| crate::provider::openai_responses::OpenAiResponses.tool_choice(&json!({ "tool_choice": tc }));
        assert_eq!(r(json!({"type": "function", "name": "f"})).choice, ToolChoice::Named("f".into()));
        let allowed =
            r(json!({"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "a"}]}));
        assert_eq!((allowed.choice.clone(), allowed.allowed.clone()), (ToolChoice::Required, Some(vec!["a".into()])));
        assert!(allowed.allows("a") && !allowed.allows("b"));
        let a = |tc: Value| crate::provider::anthropic::Anthropic.tool_choice(&json!({ "tool_choice": tc }));
        assert_eq!(a(json!({"type": "any"})).choice, ToolChoice::Required);
        assert_eq!(a(json!({"type": "none"})).choice, ToolChoice::None);
        assert_eq!(a(json!({"type": "tool", "name": "f"})).choice, ToolChoice::Named("f".into()));
        assert!(a(json!({"type": "auto", "disable_parallel_tool_use": true})).one_call_per_turn);
        let g = |c: Value| {
            crate::provider::gemini::Gemini.tool_choice(&json!({"toolConfig": {"functionCallingConfig": c}}))
        };
        assert_eq!(g(json!({"mode": "NONE"})).choice, ToolChoice::None);
        assert_eq!(g(json!({"mode": "ANY"})).choice, ToolChoice::Required);
        assert_eq!(g(json!({"mode": "ANY", "allowedFunctionNames": ["f"]})).choice, ToolChoice::Named("f".into()));
        let two = g(json!({"mode": "ANY", "allowedFunctionNames": ["f", "h"]}));
        assert!(two.allows("h") && !two.allows("x") && two.forces_a_call());
        assert!(!Choice { choice: ToolChoice::None, ..Choice::default() }.allows("f"));
    }
}
