//! The rows of `summary.csv` and `runs.csv`: column names (a contract), values, fixed precision.

use super::aggregate::Aggregate;
use super::stats::{paired_mean_ci, wilson};
use crate::engine::events::TerminatedBy;

pub const SUMMARY_COLUMNS: [&str; 43] = [
    "scenario",
    "strategy",
    "runs",
    "success_rate",
    "loop_rate",
    "loop_rate_lo",
    "loop_rate_hi",
    "gave_up_rate",
    "unnecessary_failure_rate",
    "calls_mean",
    "calls_p50",
    "calls_p95",
    "calls_max",
    "model_calls_mean",
    "tool_calls_mean",
    "wasted_retries",
    "wasted_retries_per_run",
    "orchestrator_retries",
    "model_transient_roundtrips",
    "breaker_trips",
    "breaker_trips_per_run",
    "tokens_mean",
    "virtual_ms_mean",
    "protocol_violations",
    "raw_leaks",
    "calls_delta_vs_baseline",
    "calls_delta_lo",
    "calls_delta_hi",
    "agents",
    "agents_succeeded_rate",
    "makespan_ms_mean",
    "agent_ms_p50",
    "agent_ms_p99",
    "peak_in_flight",
    "retry_amplification",
    "load_rejections_per_run",
    "cost_usd_mean",
    "cost_usd_total",
    "duplicate_writes",
    "duplicate_writes_per_run",
    "false_success_rate",
    "wrong_accepted_rate",
    "injection_followed_rate",
];

/// What each column of `summary.csv` holds (the book's reference; the metrics' definitions in
/// full are in the book's metrics page).
pub const SUMMARY_COLUMN_DOCS: [&str; 43] = [
    "the scenario's name",
    "the strategy's name (an `exec` run: the agent's label; a replayed trace: `recorded`)",
    "runs of this strategy",
    "share of runs that ended with an answer",
    "share of runs that ended in a loop (`step_cap` or `loop_guard`)",
    "lower end of the loop rate's Wilson 95% interval",
    "upper end of the loop rate's Wilson 95% interval",
    "share of runs that ended `gave_up`",
    "share of runs that gave up though every fault they met was retryable",
    "mean calls per run (model calls and tool calls, retries included)",
    "median calls per run (exact, nearest rank)",
    "95th percentile of calls per run (exact, nearest rank)",
    "the most calls of any run",
    "mean model calls per run (attempts at the provider, retries included)",
    "mean tool calls per run (attempts that reached a tool, retries included)",
    "wasted retries over all runs: attempts that repeat a call repeating could not fix",
    "wasted retries per run",
    "orchestrator retries over all runs (tool and provider)",
    "model turns that followed a transient or rate-limited failure, over all runs",
    "breaker trips (closed to open) over all runs",
    "breaker trips per run",
    "mean tokens per run",
    "mean virtual milliseconds per run",
    "model turns started while a call of the previous turn lacked exactly one result, over all runs",
    "failed results the model saw that contain a stack trace, over all runs",
    "mean paired difference in calls against the baseline strategy on the same runs",
    "lower end of that difference's 95% normal interval",
    "upper end of that difference's 95% normal interval",
    "agents per run (1 unless the scenario has a fleet)",
    "agents that answered ÷ agents",
    "mean time until the last agent ended (virtual ms)",
    "mean over runs of each run's median agent time (virtual ms)",
    "mean over runs of each run's 99th percentile agent time (virtual ms)",
    "the most calls any one tool served at once in any run (where something is shared)",
    "all calls ÷ all first attempts",
    "429, 503 and 409 a tool gave under load, per run",
    "mean cost per run in USD under `[pricing]` (empty without it)",
    "cost of all runs of the strategy in USD under `[pricing]` (empty without it)",
    "duplicate writes over all runs: attempts of a write tool's call that committed after one of the same call had, with no idempotency key the tool honoured",
    "duplicate writes per run",
    "share of runs whose ending claimed the task done while its goal (`[task] goal`) was not reached: an answer, or a give-up that claimed success",
    "share of runs in which the model took a wrong value (`wrong_content`) as right",
    "share of runs in which the model followed an instruction a tool result carried (`injected_instruction`)",
];

/// Decimal places of each numeric column of `summary.csv` (index = column − 2).
const PRECISION: [usize; 41] = [
    0, 4, 4, 4, 4, 4, 4, 3, 0, 0, 0, 3, 3, 0, 4, 0, 0, 0, 4, 1, 1, 0, 0, 3, 3, 3, 0, 4, 1, 1, 1, 0, 3, 3, 6, 4, 0, 4,
    4, 4, 4,
];

/// Where the cost columns sit among the numeric columns (filled by [`SummaryRow::with_cost`]).
const COST_COLUMNS: [usize; 2] = [34, 35];

/// Where the paired difference against the baseline sits among the numeric columns.
const DELTA_COLUMNS: std::ops::Range<usize> = 23..26;

pub const RUNS_COLUMNS: [&str; 29] = [
    "scenario",
    "strategy",
    "run",
    "seed",
    "terminated_by",
    "calls",
    "model_calls",
    "tool_calls",
    "wasted_retries",
    "orchestrator_retries",
    "model_transient_roundtrips",
    "breaker_trips",
    "faults_injected",
    "tokens",
    "virtual_ms",
    "protocol_violations",
    "raw_leaks",
    "agents",
    "agents_succeeded",
    "makespan_ms",
    "agent_ms_p50",
    "agent_ms_p99",
    "peak_in_flight",
    "retry_amplification",
    "load_rejections",
    "duplicate_writes",
    "false_success",
    "wrong_accepted",
    "injection_followed",
];

/// What each column of `runs.csv` holds.
pub const RUNS_COLUMN_DOCS: [&str; 29] = [
    "the scenario's name",
    "the strategy's name",
    "the run's number (0-based); with the seed it reproduces the run",
    "the scenario's root seed",
    "how the run ended: `answer`, `gave_up`, `step_cap`, `loop_guard`, `token_budget`, `time_budget`, `breaker_abort` or `protocol_error`",
    "model calls and tool calls",
    "attempts at the provider, retries included",
    "attempts that reached a tool, retries included (not calls an open breaker rejected)",
    "attempts that repeat a call whose previous attempt repeating could not fix",
    "retries the orchestrator sent (tool and provider)",
    "model turns that followed a delivery of a transient or rate-limited failure",
    "breaker transitions from closed to open",
    "faults the injector fired",
    "tokens used",
    "virtual milliseconds from start to end",
    "model turns started while a call of the previous turn lacked exactly one result",
    "failed results the model saw that contain a stack trace",
    "agents in the run",
    "agents that ended with an answer",
    "when the last agent ended (virtual ms)",
    "median of the agents' times from start to end (virtual ms, nearest rank)",
    "99th percentile of the agents' times (virtual ms, nearest rank)",
    "the most calls any one tool served at once (where something is shared; else 0)",
    "calls ÷ first attempts",
    "429, 503 and 409 a tool gave under load (apart from `faults_injected`)",
    "attempts of a write tool's call that committed after one of the same call had, with no idempotency key the tool honoured",
    "agents whose ending claimed the task done while its goal was not reached (0 or 1 for a lone agent)",
    "wrong values (`wrong_content`) the model took as right",
    "instructions carried in tool results (`injected_instruction`) the model followed: it called the tool one asked for",
];

/// One row of `summary.csv`.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRow {
    pub scenario: String,
    pub strategy: String,
    /// The numeric columns, in `SUMMARY_COLUMNS[2..]` order.
    pub values: [f64; 41],
}

impl SummaryRow {
    pub fn new(scenario: &str, strategy: &str, a: &Aggregate) -> SummaryRow {
        let n = a.runs.max(1) as f64;
        let rate = |k: u64| k as f64 / n;
        let (loop_lo, loop_hi) = wilson(a.loops(), a.runs);
        let (delta, delta_lo, delta_hi) = paired_mean_ci(a.delta_sum, a.delta_sq_sum, a.runs);
        let values = [
            a.runs as f64,
            rate(a.count(TerminatedBy::Answer)),
            rate(a.loops()),
            loop_lo,
            loop_hi,
            rate(a.count(TerminatedBy::GaveUp)),
            rate(a.unnecessary_failures),
            a.calls_sum as f64 / n,
            a.calls_percentile(0.5) as f64,
            a.calls_percentile(0.95) as f64,
            a.calls_max() as f64,
            a.model_calls_sum as f64 / n,
            a.tool_calls_sum as f64 / n,
            a.wasted_retries as f64,
            a.wasted_retries as f64 / n,
            a.orchestrator_retries as f64,
            a.model_transient_roundtrips as f64,
            a.breaker_trips as f64,
            a.breaker_trips as f64 / n,
            a.tokens_sum as f64 / n,
            a.virtual_ms_sum as f64 / n,
            a.protocol_violations as f64,
            a.raw_leaks as f64,
            delta,
            delta_lo,
            delta_hi,
            a.agents as f64 / n,
            a.agents_succeeded as f64 / a.agents.max(1) as f64,
            a.virtual_ms_sum as f64 / n,
            a.agent_ms_p50_sum as f64 / n,
            a.agent_ms_p99_sum as f64 / n,
            a.peak_in_flight as f64,
            a.calls_sum as f64 / a.first_attempts.max(1) as f64,
            a.load_rejections as f64 / n,
            // The cost, once `with_cost` prices the tokens; empty without `[pricing]`.
            f64::NAN,
            f64::NAN,
            a.duplicate_writes as f64,
            a.duplicate_writes as f64 / n,
            a.false_success_runs as f64 / n,
            a.wrong_accepted_runs as f64 / n,
            a.injection_followed_runs as f64 / n,
        ];
        SummaryRow { scenario: scenario.to_owned(), strategy: strategy.to_owned(), values }
    }

    /// Prices the row's tokens (USD per million input and output tokens): the mean cost of a
    /// run and the total over the runs.
    pub fn with_cost(mut self, a: &Aggregate, price: Option<(f64, f64)>) -> SummaryRow {
        if let Some((input, output)) = price {
            let total = (a.tokens_in_sum as f64 * input + a.tokens_out_sum as f64 * output) / 1e6;
            self.values[COST_COLUMNS[0]] = total / a.runs.max(1) as f64;
            self.values[COST_COLUMNS[1]] = total;
        }
        self
    }

    /// The value of a numeric column by name.
    pub fn get(&self, metric: &str) -> Option<f64> {
        SUMMARY_COLUMNS[2..].iter().position(|c| *c == metric).map(|i| self.values[i])
    }

    /// A column's value as written: fixed precision, never `-0`; empty where it has none.
    pub fn formatted(&self, i: usize) -> String {
        if self.values[i].is_nan() { String::new() } else { fixed(self.values[i], PRECISION[i]) }
    }

    /// The row of a run that is not paired with the baseline (the `recorded` row): its
    /// `calls_delta_*` columns are empty.
    pub fn without_paired_difference(mut self) -> SummaryRow {
        self.values[DELTA_COLUMNS].fill(f64::NAN);
        self
    }

    pub fn cells(&self) -> Vec<String> {
        let mut out = vec![self.scenario.clone(), self.strategy.clone()];
        out.extend((0..self.values.len()).map(|i| self.formatted(i)));
        out
    }
}

/// Fixed-precision decimal text, the same on every machine; `-0.000` is written `0.000`.
pub fn fixed(v: f64, precision: usize) -> String {
    let s = format!("{v:.precision$}");
    if s.starts_with('-') && s[1..].bytes().all(|b| b == b'0' || b == b'.') { s[1..].to_owned() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_never_writes_negative_zero() {
        assert_eq!(fixed(-0.0001, 3), "0.000");
        assert_eq!(fixed(-0.5, 1), "-0.5");
        assert_eq!(fixed(2.0, 0), "2");
    }

    #[test]
    fn columns_and_precision_line_up() {
        assert_eq!(SUMMARY_COLUMNS.len() - 2, PRECISION.len());
        let row = SummaryRow::new("s", "t", &Aggregate::default());
        assert_eq!(row.cells().len(), SUMMARY_COLUMNS.len());
        assert_eq!(row.get("loop_rate"), Some(0.0));
        assert_eq!(row.get("nope"), None);
        assert_eq!(
            &SUMMARY_COLUMNS[2 + DELTA_COLUMNS.start..2 + DELTA_COLUMNS.end],
            ["calls_delta_vs_baseline", "calls_delta_lo", "calls_delta_hi"]
        );
    }
}
