//! Strategies are data: how failures are encoded, who retries, how partials read, which
//! guards are on. The six presets are named in the design and are a contract.

use super::retry::RetryPolicy;
use crate::envelope::Encoding;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// Every failure goes to the model.
    Model,
    /// Retryable failures are retried by the orchestrator; only the rest reach the model.
    Orchestrator,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partials {
    /// Passes "more may be available" through.
    Ambiguous,
    /// The result states it is complete.
    Terminal,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Strategy {
    pub name: String,
    pub encoding: Encoding,
    pub routing: Routing,
    pub partials: Partials,
    pub breaker: bool,
    /// The breaker is the fleet's, whatever `[policy].breaker.scope` says (`breaker = "fleet"`).
    pub fleet_breaker: bool,
    /// Token and virtual-time budgets (`max_tokens`, `max_virtual_ms`).
    pub budgets: bool,
    pub loop_guard: bool,
    /// A retry policy of its own instead of the scenario's `[policy].retry`.
    pub retry: Option<RetryPolicy>,
    /// Tool results longer than this many KiB are cut to it before the model reads them
    /// (`max_result_kb`).
    pub max_result_kb: Option<u32>,
}

impl Strategy {
    fn preset(name: &str, encoding: Encoding, routing: Routing, partials: Partials, guarded: bool) -> Strategy {
        Strategy {
            name: name.into(),
            encoding,
            routing,
            partials,
            breaker: guarded,
            fleet_breaker: false,
            budgets: guarded,
            loop_guard: guarded,
            retry: None,
            max_result_kb: None,
        }
    }

    /// The built-in presets, in the design's order.
    pub fn presets() -> Vec<Strategy> {
        use Encoding::*;
        use Partials::*;
        use Routing::*;
        vec![
            Strategy::preset("raw-exception", Raw, Model, Ambiguous, false),
            Strategy::preset("error-string", Prefix, Model, Ambiguous, false),
            Strategy::preset("is-error-flag", Flag, Model, Ambiguous, false),
            Strategy::preset("response-object", Object, Model, Ambiguous, false),
            Strategy::preset("five-field", Envelope, Orchestrator, Terminal, false),
            Strategy::preset("five-field-guarded", Envelope, Orchestrator, Terminal, true),
        ]
    }

    /// The MCP strategies, named in a scenario's `strategies` to compare them (not run by
    /// default): how an MCP server hands a failure back, as a typical host passes it on to the
    /// model. `mcp-text`: `isError` with one sentence (the host shows the text; Anthropic's
    /// `is_error` carries the flag). `mcp-envelope`: `isError` with the five fields as text and
    /// `structuredContent`, partial results stated complete. `jsonrpc-error`: a JSON-RPC error,
    /// which the host turns into its own fixed sentence. MCP hosts do not retry a tool's
    /// failure: every failure goes to the model.
    pub fn mcp_presets() -> Vec<Strategy> {
        use Encoding::*;
        use Partials::*;
        use Routing::*;
        vec![
            Strategy::preset("mcp-text", Flag, Model, Ambiguous, false),
            Strategy::preset("mcp-envelope", Envelope, Model, Terminal, false),
            Strategy::preset("jsonrpc-error", JsonRpcError, Model, Ambiguous, false),
        ]
    }

    /// Every strategy with a name of its own: the presets, then the MCP strategies.
    pub fn named() -> Vec<Strategy> {
        let mut all = Strategy::presets();
        all.extend(Strategy::mcp_presets());
        all
    }

    pub fn preset_named(name: &str) -> Option<Strategy> {
        Strategy::named().into_iter().find(|s| s.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preset_names_are_the_contract() {
        let names: Vec<String> = Strategy::presets().into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            ["raw-exception", "error-string", "is-error-flag", "response-object", "five-field", "five-field-guarded"]
        );
        let g = Strategy::preset_named("five-field-guarded").unwrap();
        assert!(g.breaker && g.budgets && g.loop_guard);
        assert_eq!(g.routing, Routing::Orchestrator);
    }
}
