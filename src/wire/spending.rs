//! Live mode's spending in USD (`--max-usd`): each request priced before it is sent at the most
//! it can cost (the model it names, `[pricing.models]`), that much reserved under the limit,
//! then settled at what the answer's usage says. Amounts are whole picodollars, so a total is
//! the same whatever order the answers came in.
//!
//! The most a request can cost: its body's bytes plus [`OVERHEAD_TOKENS`] as input tokens (a
//! token of text is at least a byte) and the output its own limit allows (`max_tokens`,
//! `max_completion_tokens` × `n`, `max_output_tokens`, Gemini's `maxOutputTokens` ×
//! `candidateCount` plus its thinking budget), else the model's `max_output_tokens` from the
//! scenario. A request whose input the body does not hold (a stored response or conversation
//! it continues, Gemini's cached content, a tool the provider runs itself) cannot be priced and
//! is refused. An image or file
//! linked by URL or id is billed beyond its bytes: the bound then does not hold, and a request
//! that cost more than reserved is said in the run's notes.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::Value;

use crate::engine::scenario::Price;
use crate::provider::Format;

/// Input tokens reserved beyond the body's bytes: what a provider adds to a request (the
/// tool-use system prompt, message framing).
pub const OVERHEAD_TOKENS: u64 = 1024;

/// Picodollars in a USD.
const PICO: f64 = 1e12;

/// The largest `--max-usd`: its picodollars, and sums of them, stay far inside a `u64`.
const MAX_USD: f64 = 1e6;

/// A model's prices in picodollars per token.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Rates {
    input: u64,
    output: u64,
    max_output_tokens: Option<u64>,
}

/// The USD limit of a live process, over every run and agent.
#[derive(Debug)]
pub struct Budget {
    max: u64,
    max_usd: f64,
    rates: BTreeMap<String, Rates>,
    /// Reserved for requests not answered yet, and spent by those answered.
    state: Mutex<Spent>,
}

#[derive(Debug, Default)]
struct Spent {
    reserved: u64,
    spent: u64,
}

/// A request's place under the limit: what it may cost at most, and its model's rates.
#[derive(Clone, Copy, Debug)]
pub struct Reservation {
    pub most: u64,
    rates: Rates,
}

/// An answer's usage, as billed: input (cache reads included), cache writes, output (thinking
/// included).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    pub input: u64,
    pub cache_write: u64,
    pub output: u64,
}

impl Usage {
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }
}

impl Budget {
    /// `--max-usd` over the scenario's prices; `Err` (for `--max-usd`) when nothing is priced.
    pub fn new(max_usd: f64, prices: &BTreeMap<String, Price>) -> Result<Budget, String> {
        if !(max_usd.is_finite() && (0.0..=MAX_USD).contains(&max_usd)) {
            return Err(format!("--max-usd: USD, 0 to {MAX_USD}, got {max_usd}"));
        }
        if prices.is_empty() {
            return Err("--max-usd prices each request by its model: the scenario needs \
                        [pricing.models.NAME] input_per_mtok and output_per_mtok for each model the agent calls"
                .into());
        }
        let per_token = |usd_per_mtok: f64| (usd_per_mtok * 1e6).ceil() as u64;
        let rates = prices
            .iter()
            .map(|(m, p)| {
                let r = Rates {
                    input: per_token(p.input_per_mtok),
                    output: per_token(p.output_per_mtok),
                    max_output_tokens: p.max_output_tokens,
                };
                (m.clone(), r)
            })
            .collect();
        Ok(Budget { max: (max_usd * PICO).floor() as u64, max_usd, rates, state: Mutex::new(Spent::default()) })
    }

    pub fn max_usd(&self) -> f64 {
        self.max_usd
    }

    /// USD spent by the requests answered, and reserved for those on their way.
    pub fn spent_usd(&self) -> f64 {
        let s = self.lock();
        s.spent.saturating_add(s.reserved) as f64 / PICO
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Spent> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The most the request can cost, reserved; `Err(why)` when it cannot be priced or would
    /// pass the limit (nothing reserved then).
    pub fn reserve(&self, format: Format, path: &str, body: &[u8]) -> Result<Reservation, String> {
        let v: Value = serde_json::from_slice(body).map_err(|_| "its body is no JSON, so it cannot be priced")?;
        let model = model_of(format, path, &v).ok_or("it names no model, so it cannot be priced")?;
        let rates = *self.rates.get(&model).ok_or_else(|| {
            format!("the model {model:?} has no price in [pricing.models]; add it to price this request")
        })?;
        if let Some(field) = hidden_input(format, &v) {
            return Err(format!("the provider bills input its body does not hold (`{field}`), so it cannot be priced"));
        }
        let output = output_limit(format, &v).or(rates.max_output_tokens).ok_or_else(|| {
            format!(
                "it sets no output limit (max_tokens or its provider's name for it) and [pricing.models.{model:?}] \
                 gives no max_output_tokens"
            )
        })?;
        let input = (body.len() as u64).saturating_add(OVERHEAD_TOKENS);
        let most = input.saturating_mul(rates.input).saturating_add(output.saturating_mul(rates.output));
        let mut s = self.lock();
        let after = s.spent.saturating_add(s.reserved).saturating_add(most);
        if after > self.max {
            return Err(format!(
                "--max-usd {}: ${:.6} spent or reserved, and this request may cost up to ${:.6}",
                self.max_usd,
                s.spent.saturating_add(s.reserved) as f64 / PICO,
                most as f64 / PICO
            ));
        }
        s.reserved = s.reserved.saturating_add(most);
        Ok(Reservation { most, rates })
    }

    /// Settles a reservation: the answer's usage priced (`None`: what was reserved, the usage
    /// unknown); returns what it cost, in USD.
    pub fn settle(&self, r: Reservation, usage: Option<Usage>) -> f64 {
        let cost = usage.map_or(r.most, |u| cost(r.rates, u));
        let mut s = self.lock();
        s.reserved = s.reserved.saturating_sub(r.most);
        s.spent = s.spent.saturating_add(cost);
        cost as f64 / PICO
    }

    /// Gives a reservation back: the request never reached the provider.
    pub fn release(&self, r: Reservation) {
        let mut s = self.lock();
        s.reserved = s.reserved.saturating_sub(r.most);
    }
}

/// What `u` costs at `rates`: cache writes at twice the input rate (Anthropic's one-hour
/// writes; five-minute ones cost 1.25×), cache reads at the input rate (they cost less).
fn cost(rates: Rates, u: Usage) -> u64 {
    let input = u.input.saturating_add(u.cache_write.saturating_mul(2));
    input.saturating_mul(rates.input).saturating_add(u.output.saturating_mul(rates.output))
}

/// The model a request names: its body's `model`, or Gemini's path (`models/NAME:verb`).
fn model_of(format: Format, path: &str, v: &Value) -> Option<String> {
    if format == Format::Gemini {
        let after = path.split_once("models/")?.1;
        return Some(after.split(':').next()?.to_owned()).filter(|m| !m.is_empty());
    }
    v.get("model").and_then(Value::as_str).map(str::to_owned)
}

/// What makes the provider bill input the body does not hold, when the request has it: input
/// it continues (a stored response or conversation, cached content), or a tool the provider
/// runs itself (a search, a fetch, code execution: their results are billed as input).
fn hidden_input(format: Format, v: &Value) -> Option<String> {
    let set = |k: &str| v.get(k).is_some_and(|x| !x.is_null());
    // Input continued, or run by the provider for the whole request (Anthropic's MCP
    // connector, Chat Completions' web search).
    let continued = match format {
        Format::OpenAiResponses => ["previous_response_id", "conversation", "prompt"].into_iter().find(|k| set(k)),
        Format::Gemini => ["cachedContent", "cached_content"].into_iter().find(|k| set(k)),
        Format::Anthropic => ["mcp_servers"].into_iter().find(|k| set(k)),
        Format::OpenAiChat | Format::GeminiOpenAi => ["web_search_options"].into_iter().find(|k| set(k)),
    };
    if let Some(k) = continued {
        return Some(k.to_owned());
    }
    let server_side = |t: &Value| -> Option<String> {
        let ty = t.get("type").and_then(Value::as_str).unwrap_or_default();
        match format {
            // Anthropic's server tools carry a dated type (`web_search_20250305`); client
            // tools have none, or `custom`.
            Format::Anthropic => ["web_search", "web_fetch", "code_execution", "tool_search", "mcp_toolset"]
                .iter()
                .any(|p| ty.starts_with(p))
                .then(|| format!("tools: {ty}")),
            Format::OpenAiResponses => {
                (!ty.is_empty() && !matches!(ty, "function" | "custom")).then(|| format!("tools: {ty}"))
            }
            // Any tool but function declarations, in either spelling the JSON API takes.
            Format::Gemini => t
                .as_object()
                .into_iter()
                .flat_map(|o| o.keys())
                .find(|k| !matches!(k.as_str(), "functionDeclarations" | "function_declarations"))
                .map(|k| format!("tools: {k}")),
            // Gemini's OpenAI-compatible endpoint takes its own tools beside functions.
            Format::OpenAiChat | Format::GeminiOpenAi => {
                (!ty.is_empty() && ty != "function").then(|| format!("tools: {ty}"))
            }
        }
    };
    v.get("tools").and_then(Value::as_array).into_iter().flatten().find_map(server_side)
}

/// The output tokens a request allows itself, when it says.
fn output_limit(format: Format, v: &Value) -> Option<u64> {
    let n = |x: Option<&Value>| x.and_then(Value::as_u64);
    match format {
        Format::OpenAiChat | Format::GeminiOpenAi => {
            let one = n(v.get("max_completion_tokens")).or(n(v.get("max_tokens")))?;
            Some(one.saturating_mul(n(v.get("n")).unwrap_or(1).max(1)))
        }
        Format::OpenAiResponses => n(v.get("max_output_tokens")),
        Format::Anthropic => n(v.get("max_tokens")),
        Format::Gemini => {
            let g = v.get("generationConfig")?;
            let one = n(g.get("maxOutputTokens"))?;
            let thinking = g.get("thinkingConfig").and_then(|t| t.get("thinkingBudget")).and_then(Value::as_u64);
            let count = n(g.get("candidateCount")).unwrap_or(1).max(1);
            Some(one.saturating_mul(count).saturating_add(thinking.unwrap_or(0)))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn budget(max_usd: f64, max_output_tokens: Option<u64>) -> Budget {
        let price = Price { input_per_mtok: 2.5, output_per_mtok: 10.0, max_output_tokens };
        Budget::new(max_usd, &BTreeMap::from([("gpt-x".to_owned(), price)])).unwrap()
    }

    /// By hand: a body of B bytes with max_tokens 100 may cost (B + 1024) × $2.5/M + 100 × $10/M.
    #[test]
    fn a_request_is_reserved_at_the_most_it_can_cost_and_settled_at_its_usage() {
        let b = budget(1.0, None);
        let body = serde_json::to_vec(&json!({"model": "gpt-x", "max_tokens": 100, "messages": []})).unwrap();
        let r = b.reserve(Format::OpenAiChat, "/v1/chat/completions", &body).unwrap();
        let most = (body.len() as u64 + 1024) * 2_500_000 + 100 * 10_000_000;
        assert_eq!(r.most, most);
        assert_eq!(b.spent_usd(), most as f64 / 1e12);
        // 31 in, 12 out: 31 × 2.5 + 12 × 10 = 197.5 µUSD.
        let usage = Usage { input: 31, cache_write: 0, output: 12 };
        assert_eq!(b.settle(r, Some(usage)), 197.5e-6);
        assert_eq!(b.spent_usd(), 197.5e-6);
        // Usage unknown: the reservation is what it cost.
        let r = b.reserve(Format::OpenAiChat, "/v1/chat/completions", &body).unwrap();
        b.settle(r, None);
        assert_eq!(b.spent_usd(), (197_500_000 + most) as f64 / 1e12);
        let r = b.reserve(Format::OpenAiChat, "/v1/chat/completions", &body).unwrap();
        b.release(r);
        assert_eq!(b.spent_usd(), (197_500_000 + most) as f64 / 1e12);
    }

    /// The limit is never passed: a request that may pass it is refused before it is sent,
    /// reservations included.
    #[test]
    fn the_limit_is_never_passed() {
        let body = serde_json::to_vec(&json!({"model": "gpt-x", "max_tokens": 100})).unwrap();
        let most = (body.len() as u64 + 1024) * 2_500_000 + 100 * 10_000_000;
        let b = budget(2.5 * most as f64 / 1e12, None);
        let first = b.reserve(Format::OpenAiChat, "/", &body).unwrap();
        let second = b.reserve(Format::OpenAiChat, "/", &body).unwrap();
        let e = b.reserve(Format::OpenAiChat, "/", &body).unwrap_err();
        assert!(e.contains("--max-usd") && e.contains("may cost up to"), "{e}");
        b.settle(first, Some(Usage { input: 1, cache_write: 0, output: 0 }));
        b.settle(second, None);
        assert!(b.reserve(Format::OpenAiChat, "/", &body).is_ok(), "the first cost less than reserved");
    }

    /// Each provider's output limit, its model, and what cannot be priced.
    #[test]
    fn each_dialect_is_priced_by_its_own_fields() {
        let v = json!({"max_completion_tokens": 50, "max_tokens": 9, "n": 3});
        assert_eq!(output_limit(Format::OpenAiChat, &v), Some(150));
        assert_eq!(output_limit(Format::OpenAiResponses, &json!({"max_output_tokens": 7})), Some(7));
        assert_eq!(output_limit(Format::Anthropic, &json!({"max_tokens": 1024})), Some(1024));
        let g = json!({"generationConfig": {"maxOutputTokens": 100, "candidateCount": 2, "thinkingConfig": {"thinkingBudget": 64}}});
        assert_eq!(output_limit(Format::Gemini, &g), Some(264));
        assert_eq!(output_limit(Format::OpenAiChat, &json!({})), None);
        let path = "/v1beta/models/gemini-x:streamGenerateContent";
        assert_eq!(model_of(Format::Gemini, path, &json!({})).as_deref(), Some("gemini-x"));
        assert_eq!(
            model_of(Format::Anthropic, "/v1/messages", &json!({"model": "claude-x"})).as_deref(),
            Some("claude-x")
        );
        let b = budget(10.0, None);
        let unpriced = serde_json::to_vec(&json!({"model": "other", "max_tokens": 1})).unwrap();
        assert!(b.reserve(Format::OpenAiChat, "/", &unpriced).unwrap_err().contains("\"other\" has no price"));
        let open = serde_json::to_vec(&json!({"model": "gpt-x"})).unwrap();
        assert!(b.reserve(Format::OpenAiChat, "/", &open).unwrap_err().contains("no max_output_tokens"));
        let b = budget(10.0, Some(16_384));
        assert_eq!(
            b.reserve(Format::OpenAiChat, "/", &open).unwrap().most,
            (open.len() as u64 + 1024) * 2_500_000 + 16_384 * 10_000_000
        );
        let stored =
            serde_json::to_vec(&json!({"model": "gpt-x", "previous_response_id": "resp_1", "max_output_tokens": 5}))
                .unwrap();
        assert!(
            b.reserve(Format::OpenAiResponses, "/v1/responses", &stored).unwrap_err().contains("previous_response_id")
        );
        let searching = serde_json::to_vec(&json!({"model": "gpt-x", "max_tokens": 5,
            "tools": [{"name": "f", "input_schema": {}}, {"type": "web_search_20250305", "name": "web_search"}]}))
        .unwrap();
        assert!(b.reserve(Format::Anthropic, "/v1/messages", &searching).unwrap_err().contains("web_search_20250305"));
        let plain = serde_json::to_vec(&json!({"model": "gpt-x", "max_output_tokens": 5,
            "tools": [{"type": "function", "name": "f"}]}))
        .unwrap();
        assert!(b.reserve(Format::OpenAiResponses, "/v1/responses", &plain).is_ok());
        let grounded = serde_json::to_vec(&json!({"generationConfig": {"maxOutputTokens": 5},
            "tools": [{"functionDeclarations": []}, {"google_search": {}}]}))
        .unwrap();
        let e = b.reserve(Format::Gemini, "/v1beta/models/gpt-x:generateContent", &grounded).unwrap_err();
        assert!(e.contains("google_search"), "{e}");
        let searched =
            serde_json::to_vec(&json!({"model": "gpt-x", "max_tokens": 5, "web_search_options": {}})).unwrap();
        assert!(
            b.reserve(Format::OpenAiChat, "/v1/chat/completions", &searched)
                .unwrap_err()
                .contains("web_search_options")
        );
        assert!(Budget::new(2e6, &BTreeMap::new()).unwrap_err().contains("0 to 1000000"));
    }

    /// Cache writes at twice the input rate, cache reads and thinking as billed.
    #[test]
    fn usage_is_priced_as_billed_or_above() {
        let rates = Rates { input: 3, output: 15, max_output_tokens: None };
        assert_eq!(cost(rates, Usage { input: 10, cache_write: 4, output: 2 }), (10 + 8) * 3 + 2 * 15);
        assert!(Budget::new(1.0, &BTreeMap::new()).unwrap_err().contains("[pricing.models.NAME]"));
        assert!(Budget::new(f64::NAN, &BTreeMap::new()).is_err());
    }
}
