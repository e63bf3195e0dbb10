//! tracefault: a deterministic trace-replay and chaos-testing harness for LLM agents.
//!
//! # Overview
//! The pipeline reads left to right, and so do the modules:
//! - [`trace`] — the native JSONL trace, and its compilation into a task + fault schedule.
//! - [`scenario`] — scenario files (TOML/JSON), strictly parsed, validated into [`scenario::Scenario`].
//! - [`envelope`] — the one internal `ToolError`, a serializer per provider format, and the
//!   simulated model's reading of the serialized bytes.
//! - [`engine`] — the discrete-event run loop over virtual time: fault injector, orchestrator
//!   (retry, breaker, budgets, loop guard) and simulated model. Pure: no I/O, no wall clock.
//! - [`metrics`] — events folded into per-run metrics and exact per-strategy aggregates.
//! - [`suite`] — every scenario × strategy × run, in parallel, merged in a fixed order.
//! - [`report`] — `summary.csv`, `runs.csv`, `report.json`, `report.md`, `junit.xml`.
//! - [`sweep`] — the suite over many plausible profiles: which conclusions hold.
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
pub mod fault;
pub mod input;
pub mod interrupt;
pub mod metrics;
pub mod output;
pub mod replay;
pub mod report;
pub mod scenario;
pub mod shard;
pub mod shrink;
pub mod suite;
pub mod sweep;
pub mod trace;
pub mod wire;
