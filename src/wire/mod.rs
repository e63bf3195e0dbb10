//! Wire mode: the mocks behind real HTTP, so a user's own agent, an official SDK or an agent
//! framework talks to them. Mock providers (OpenAI Chat and Responses, Anthropic Messages,
//! Gemini generateContent and its OpenAI-compatible endpoint, streaming or not) play the model;
//! mock tools at `/tools/{name}` inject the scenario's faults. This is the only async code.
//!
//! [`server`] is the HTTP layer (axum on hyper); [`dispatch`] what every transport shares (the
//! mocks' state, a tool call, a reply sent); [`world`] the mocks' state for one run;
//! [`provider`] and [`tools`] the two kinds of endpoint (each provider's shapes, checks,
//! answers and errors are the provider layer's, [`crate::provider`]); [`model`] the mock model's
//! decisions and [`conversation`] what it holds of each conversation; [`schema`] tool schemas
//! and argument matching; [`mcp`] the tools over the Model Context Protocol, [`jsonrpc`] its
//! messages checked, and [`stdio`] its transport over stdin and stdout; [`checks`] the
//! checklist `exec` holds an agent to; [`plain`] tool results handed back as ordinary
//! messages; [`recorded`] what a run's trace keeps of the traffic, and [`spill`] where a long
//! run's oldest events wait on disk; [`upstream`] the real
//! providers behind the provider endpoints in live mode, and [`spending`] its USD limit;
//! [`mcp_upstream`] a real MCP server behind the MCP mocks (`mcp-proxy`); [`stream_break`] a
//! provider's event stream broken on its way to the agent (the `stream_*` faults); [`rewrite`]
//! tool results the agent sends replaced by the scenario's faults before the real model reads
//! them; [`https`] the client all of these reach the user's endpoints with.

pub mod checks;
pub mod conversation;
pub mod dispatch;
pub mod https;
pub mod jsonrpc;
pub mod mcp;
pub mod mcp_upstream;
pub mod mocks;
pub mod model;
pub mod plain;
pub mod provider;
pub mod recorded;
pub mod rewrite;
pub mod schema;
pub mod server;
pub mod spending;
pub mod spill;
pub mod stdio;
pub mod stream_break;
pub mod tools;
pub mod upstream;
pub mod world;

pub use server::WireServer;
