//! What the engine runs: a scenario resolved and validated, as plain data — everything a run
//! needs and nothing that can be invalid. It is built by `scenario::validate` from a file (or by
//! `replay` from a trace); the engine owns the type and reads no file.

use std::path::PathBuf;

/// Any duration a scenario names (latencies, timeouts, waits, windows) is at most a day of
/// virtual time, so virtual-time arithmetic cannot overflow.
pub const MAX_MS: u64 = 86_400_000;

use super::fault_plan::FaultPlan;
use super::fleet::Fleet;
use super::limits::{ProviderLoad, ToolLoad};
use super::profile::Profile;
use super::strategy::Strategy;
use super::task::{Policy, Task};
use crate::provider::Format;

/// A gate: `metric` of `strategy` (or `*`, every strategy) must stay within `[min, max]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Gate {
    pub strategy: String,
    pub metric: String,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Bounds on the change against a baseline (`run --baseline`): new − old, and the same in
    /// percent of old.
    pub max_increase: Option<f64>,
    pub max_increase_pct: Option<f64>,
    /// For a [`RANK_FIRST_SHARE`] gate: the metric ranked on (one of [`RANKED`]).
    pub on: Option<String>,
}

/// The gate metric checked by `sweep`: the share of profiles in which the strategy ranks
/// first on the gate's `on` metric.
pub const RANK_FIRST_SHARE: &str = "rank_first_share";

/// The metrics a sweep ranks strategies on, and whether higher is better.
pub const RANKED: [(&str, bool); 4] =
    [("success_rate", true), ("loop_rate", false), ("calls_mean", false), ("wasted_retries_per_run", false)];

impl Gate {
    /// Whether this gate is checked across a sweep's profiles rather than on one run.
    pub fn is_robustness(&self) -> bool {
        self.metric == RANK_FIRST_SHARE
    }
}

/// A model's prices, `[pricing.models.NAME]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Price {
    /// USD per million input tokens.
    pub input_per_mtok: f64,
    /// USD per million output tokens.
    pub output_per_mtok: f64,
    /// The most output tokens the model gives in one answer, when the scenario says.
    pub max_output_tokens: Option<u64>,
}

/// What a tool's call does beyond answering (`[tools.NAME] effect`, `idempotent`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Effect {
    /// It changes state: a second committed attempt of one call is a duplicate write.
    pub write: bool,
    /// It writes an idempotency key once: an attempt carrying a committed key writes nothing.
    pub honours_key: bool,
}

/// A validated scenario: everything the engine needs, nothing that can be invalid.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    /// FNV-1a of the name: the scenario's part of every random-stream key.
    pub name_hash: u64,
    pub description: String,
    pub path: PathBuf,
    pub seed: u64,
    pub runs: u64,
    pub format: Format,
    pub strategies: Vec<Strategy>,
    /// Index into `strategies` of the baseline for paired differences.
    pub baseline: usize,
    pub task: Task,
    pub faults: FaultPlan,
    pub policy: Policy,
    pub profile: Profile,
    pub gates: Vec<Gate>,
    /// The agents of each run (one, unless `[fleet]` says otherwise).
    pub fleet: Fleet,
    /// What each tool can take (`[tools.NAME]`), by tool index; `loaded` when any says more
    /// than "everything".
    pub loads: Vec<ToolLoad>,
    pub loaded: bool,
    /// `[tools.NAME] upstream`, by tool index: the user's real tool, called in live mode alone.
    pub tool_upstreams: Vec<Option<String>>,
    /// `[tools.NAME] effect` and `idempotent`, by tool index.
    pub effects: Vec<Effect>,
    /// `[provider] rpm`, `tpm`: the fleet's limits at the provider.
    pub provider_load: ProviderLoad,
    /// `[pricing]`: the billed model and its USD per million input and output tokens.
    pub pricing: Option<(String, f64, f64)>,
    /// `[pricing.models]`: every model priced, by name (live mode's `--max-usd` prices each
    /// request by the model it names).
    pub prices: std::collections::BTreeMap<String, Price>,
    /// FNV-1a of each tool name, then of "provider": targets' parts of fault-stream keys.
    pub target_hashes: Vec<u64>,
}

impl Scenario {
    /// The strategy called `name`: the scenario's own, else the preset of that name.
    pub fn strategy_or_preset(&self, name: &str) -> Option<Strategy> {
        self.strategies.iter().find(|s| s.name == name).cloned().or_else(|| Strategy::preset_named(name))
    }
}
