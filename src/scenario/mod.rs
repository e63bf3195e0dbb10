//! Scenario files: the format ([`dto`]), its validation into the engine's [`Scenario`]
//! ([`validate`]), reading and finding the files of a suite ([`load`]), and the file's JSON
//! Schema ([`schema`]).

pub mod dto;
pub mod files;
pub mod load;
pub mod locate;
pub mod schema;
pub mod validate;

use std::ops::{Deref, DerefMut};

pub use crate::engine::scenario::{Gate, RANK_FIRST_SHARE, RANKED, Scenario};
use crate::metrics::run::RunMetrics;

/// A scenario as loaded from its file: the engine's [`Scenario`], and for one that replays a
/// trace, what the recorded model did as one run (the `recorded` row of the reports). It reads
/// as the scenario it holds.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub scenario: Scenario,
    pub recorded: Option<RunMetrics>,
}

impl Deref for Loaded {
    type Target = Scenario;

    fn deref(&self) -> &Scenario {
        &self.scenario
    }
}

impl DerefMut for Loaded {
    fn deref_mut(&mut self) -> &mut Scenario {
        &mut self.scenario
    }
}
