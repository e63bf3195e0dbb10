//! The deterministic engine: pure, in-process, virtual time. No sockets, no sleeping, no
//! wall clock; every random draw comes from a keyed [`rng::Stream`].

pub mod breaker;
pub mod capacity;
pub mod events;
pub mod fault_plan;
pub mod fleet;
pub mod limits;
pub mod loop_guard;
pub mod model;
pub mod probabilities;
pub mod profile;
mod queue;
pub mod result_cache;
pub mod retry;
pub mod retry_budget;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod strategy;
pub mod task;

pub use scenario::Scenario;
