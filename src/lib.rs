//! tracefault: a deterministic trace-replay and chaos-testing harness for LLM agents.
//!
//! # Overview
//! Every top-level module and its one job, from the ground up (a module imports only modules
//! listed before it):
//! - [`error`] — typed errors and the exit codes (0 success, 1 a failed gate, 2 bad input).
//! - [`fault`] — the fault vocabulary every layer shares (error classes, fault kinds).
//! - [`escape`] — names the user controls made safe for each output (shell, CSV, Markdown,
//!   XML, HTML, terminal).
//! - [`exchange`] — the neutral parts of a model exchange (tool declarations, canonical
//!   arguments, tool calls, conversation steps) every provider format reads into.
//! - [`input`] — reading input files under a size cap.
//! - [`interrupt`] — what to undo on Ctrl-C, SIGTERM or SIGHUP.
//! - [`output`] — writing every output file atomically, report sets as one.
//! - [`provider`] — one module per provider format (OpenAI Chat and Responses, Anthropic,
//!   Gemini, Gemini's OpenAI endpoint) behind one trait: reading a conversation, a result's
//!   shape, the mock's validation, answers and errors.
//! - [`envelope`] — the one internal `ToolError`, its serializer into each format's result
//!   shape, and the simulated model's reading of the serialized bytes.
//! - [`engine`] — the discrete-event run loop over virtual time: the [`engine::Scenario`] it
//!   runs, fault injector, orchestrator (retry, breaker, budgets, loop guard) and simulated
//!   model. Pure: no I/O, no wall clock.
//! - [`trace`] — the native JSONL trace, the importers of the formats agents are recorded in,
//!   `inspect`, and a trace's compilation into a task and fault schedule.
//! - [`metrics`] — events folded into per-run metrics and exact per-strategy aggregates.
//! - [`calibrate`] — the simulated model's profile fitted from real traces.
//! - [`scenario`] — scenario files (TOML/JSON): read, with the files they name, and validated
//!   into the engine's scenario or every problem at once.
//! - [`suite`] — every scenario × strategy × run, in parallel, merged in a fixed order.
//! - [`replay`] — reproducing a captured trace: as recorded, then what-if under each strategy.
//! - [`shrink`] — the smallest fault schedule under which a looping run still loops.
//! - [`wire`] — the mocks behind real HTTP and MCP, for a real agent, SDK or framework.
//! - [`baseline`] — comparing results with an earlier report folder.
//! - [`report`] — `summary.csv`, `runs.csv`, `report.json`, `report.md`, `junit.xml`,
//!   `report.html`, one exporter each.
//! - [`shard`] — `run --shard K/N` and merging the shards.
//! - [`sweep`] — the suite over many plausible profiles: which conclusions hold.
//! - [`predict`] — a fitted profile's predictions set beside held-out live runs.
//! - [`cli`] — the command line: one file per subcommand, wiring only.
//!
//! # Determinism contract
//! Every random draw comes from a ChaCha8 stream keyed by a fixed hash of (root seed,
//! scenario, run, target/step, attempt/purpose); the strategy is never part of a key, so all
//! strategies meet the same faults at the same attempts. Aggregates are exact integer sums,
//! so `--jobs` changes speed, never bytes.

pub mod baseline;
pub mod calibrate;
pub mod cli;
pub mod engine;
pub mod envelope;
pub mod error;
pub mod escape;
pub mod exchange;
pub mod fault;
pub mod input;
pub mod interrupt;
pub mod metrics;
pub mod output;
pub mod predict;
pub mod provider;
pub mod replay;
pub mod report;
pub mod scenario;
pub mod shard;
pub mod shrink;
pub mod suite;
pub mod sweep;
pub mod taint;
pub mod trace;
pub mod wire;
