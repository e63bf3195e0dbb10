//! What a request lets the model do with its tools, in each provider's words: OpenAI Chat's and
//! Responses' `tool_choice` (and the legacy `function_call`), Anthropic's `tool_choice`
//! (`auto`, `any`, `tool`, `none`, `disable_parallel_tool_use`) and Gemini's
//! `toolConfig.functionCallingConfig` (`mode`, `allowedFunctionNames`).

use serde_json::Value;

use crate::envelope::Format;

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

fn mode(s: &str) -> ToolChoice {
    match s.to_ascii_lowercase().as_str() {
        "none" => ToolChoice::None,
        "required" | "any" => ToolChoice::Required,
        _ => ToolChoice::Auto,
    }
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

/// The request's tool choice in its provider's words.
pub fn choice_of(format: Format, body: &Value) -> Choice {
    let parallel_off = body.get("parallel_tool_calls") == Some(&Value::Bool(false));
    match format {
        Format::OpenAiChat | Format::GeminiOpenAi => {
            let choice = match body.get("tool_choice").or_else(|| body.get("function_call")) {
                Some(Value::String(s)) => mode(s),
                Some(o @ Value::Object(_)) => match str_at(o, "/function/name").or_else(|| str_at(o, "/name")) {
                    Some(n) => ToolChoice::Named(n.to_owned()),
                    None => ToolChoice::Auto,
                },
                _ => ToolChoice::Auto,
            };
            Choice { choice, allowed: None, one_call_per_turn: parallel_off }
        }
        Format::OpenAiResponses => {
            let tc = body.get("tool_choice");
            let (choice, allowed) = match tc {
                Some(Value::String(s)) => (mode(s), None),
                Some(o @ Value::Object(_)) => match str_at(o, "/type") {
                    Some("allowed_tools") => {
                        let names = o
                            .get("tools")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
                            .collect();
                        (mode(str_at(o, "/mode").unwrap_or("auto")), Some(names))
                    }
                    Some("function" | "custom") => match str_at(o, "/name") {
                        Some(n) => (ToolChoice::Named(n.to_owned()), None),
                        None => (ToolChoice::Auto, None),
                    },
                    _ => (ToolChoice::Auto, None),
                },
                _ => (ToolChoice::Auto, None),
            };
            Choice { choice, allowed, one_call_per_turn: parallel_off }
        }
        Format::Anthropic => {
            let tc = body.get("tool_choice");
            let choice = match tc.and_then(|t| str_at(t, "/type")) {
                Some("none") => ToolChoice::None,
                Some("any") => ToolChoice::Required,
                Some("tool") => match tc.and_then(|t| str_at(t, "/name")) {
                    Some(n) => ToolChoice::Named(n.to_owned()),
                    None => ToolChoice::Auto,
                },
                _ => ToolChoice::Auto,
            };
            let one = tc.and_then(|t| t.get("disable_parallel_tool_use")) == Some(&Value::Bool(true));
            Choice { choice, allowed: None, one_call_per_turn: one }
        }
        Format::Gemini => {
            let config = ["/toolConfig/functionCallingConfig", "/tool_config/function_calling_config"]
                .iter()
                .find_map(|p| body.pointer(p));
            let choice = config.and_then(|c| str_at(c, "/mode")).map_or(ToolChoice::Auto, mode);
            let allowed = config
                .and_then(|c| c.get("allowedFunctionNames").or_else(|| c.get("allowed_function_names")))
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect::<Vec<_>>());
            // One allowed name under ANY is a named call.
            let choice = match (&choice, allowed.as_deref()) {
                (ToolChoice::Required, Some([one])) => ToolChoice::Named(one.clone()),
                _ => choice,
            };
            Choice { choice, allowed, one_call_per_turn: false }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chat(tc: Value) -> ToolChoice {
        choice_of(Format::OpenAiChat, &json!({ "tool_choice": tc })).choice
    }

    #[test]
    fn each_providers_words() {
        assert_eq!(chat(json!("none")), ToolChoice::None);
        assert_eq!(chat(json!("required")), ToolChoice::Required);
        assert_eq!(chat(json!("auto")), ToolChoice::Auto);
        assert_eq!(chat(json!({"type": "function", "function": {"name": "f"}})), ToolChoice::Named("f".into()));
        let legacy = choice_of(Format::OpenAiChat, &json!({"function_call": {"name": "g"}}));
        assert_eq!(legacy.choice, ToolChoice::Named("g".into()));
        let r = |tc: Value| choice_of(Format::OpenAiResponses, &json!({ "tool_choice": tc }));
        assert_eq!(r(json!({"type": "function", "name": "f"})).choice, ToolChoice::Named("f".into()));
        let allowed =
            r(json!({"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "a"}]}));
        assert_eq!((allowed.choice.clone(), allowed.allowed.clone()), (ToolChoice::Required, Some(vec!["a".into()])));
        assert!(allowed.allows("a") && !allowed.allows("b"));
        let a = |tc: Value| choice_of(Format::Anthropic, &json!({ "tool_choice": tc }));
        assert_eq!(a(json!({"type": "any"})).choice, ToolChoice::Required);
        assert_eq!(a(json!({"type": "none"})).choice, ToolChoice::None);
        assert_eq!(a(json!({"type": "tool", "name": "f"})).choice, ToolChoice::Named("f".into()));
        assert!(a(json!({"type": "auto", "disable_parallel_tool_use": true})).one_call_per_turn);
        let g = |c: Value| choice_of(Format::Gemini, &json!({"toolConfig": {"functionCallingConfig": c}}));
        assert_eq!(g(json!({"mode": "NONE"})).choice, ToolChoice::None);
        assert_eq!(g(json!({"mode": "ANY"})).choice, ToolChoice::Required);
        assert_eq!(g(json!({"mode": "ANY", "allowedFunctionNames": ["f"]})).choice, ToolChoice::Named("f".into()));
        let two = g(json!({"mode": "ANY", "allowedFunctionNames": ["f", "h"]}));
        assert!(two.allows("h") && !two.allows("x") && two.forces_a_call());
        assert!(!Choice { choice: ToolChoice::None, ..Choice::default() }.allows("f"));
    }
}
