//! Runs a suite: every scenario × strategy × run, in parallel over work units of
//! (scenario, chunk of runs), merged in a fixed order into exact aggregates. Each unit runs all
//! strategies of a run back to back, so paired differences against the baseline need no
//! memory beyond the unit. `--jobs` changes speed, never bytes.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use crate::engine::Scenario;
use crate::engine::events::Observer;
use crate::engine::run::{Workspace, simulate};
use crate::metrics::aggregate::Aggregate;
use crate::metrics::recorded::RECORDED;
use crate::metrics::run::RunMetrics;
use crate::metrics::summary::SummaryRow;
use crate::scenario::Loaded;

/// How a suite is run; none of it changes results except `seed`, `runs` and `strategies`.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub jobs: usize,
    /// Overrides every scenario's seed.
    pub seed: Option<u64>,
    /// Overrides every scenario's run count.
    pub runs: Option<u64>,
    /// Keep only these strategies (empty: all of each scenario's).
    pub strategies: Vec<String>,
}

/// Where `runs.csv` rows go, already CSV-encoded, in their final order: by scenario, then
/// run, then strategy (the strategies' rows for one run, which met the same faults, together).
pub trait RunsSink {
    fn rows(&mut self, bytes: &[u8]) -> std::io::Result<()>;
}

impl<W: Write> RunsSink for W {
    fn rows(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.write_all(bytes)
    }
}

/// The result of one gate.
#[derive(Clone, Debug, PartialEq)]
pub struct GateResult {
    pub scenario: String,
    pub strategy: String,
    pub metric: String,
    pub value: f64,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub passed: bool,
}

/// One scenario's results.
#[derive(Clone, Debug)]
pub struct ScenarioResult {
    pub scenario: Scenario,
    pub seed: u64,
    pub runs: u64,
    pub rows: Vec<SummaryRow>,
    pub aggregates: Vec<Aggregate>,
    /// What the recorded model did, for a scenario that replays a trace: one run, shown beside
    /// the strategies and never part of their numbers or their gates.
    pub recorded: Option<(SummaryRow, Aggregate)>,
    /// Per fault rule: its label and how often its trigger fired, over all strategies.
    pub rules_fired: Vec<(String, u64)>,
    pub warnings: Vec<String>,
    pub gates: Vec<GateResult>,
}

impl ScenarioResult {
    /// Whether any fault fired at all (a rule, or a tool refusing under load); a chaos
    /// scenario where none did tested nothing.
    pub fn any_fault_fired(&self) -> bool {
        self.rules_fired.iter().any(|r| r.1 > 0) || self.aggregates.iter().any(|a| a.load_rejections > 0)
    }

    /// The command that runs the worst run of `strategy` again, quoted for a POSIX shell.
    pub fn repro_line(&self, strategy: usize) -> Option<String> {
        let (_, run) = self.aggregates[strategy].worst?;
        let path = self.scenario.path.to_string_lossy();
        let (run, seed) = (run.to_string(), self.seed.to_string());
        let name = &self.scenario.strategies[strategy].name;
        Some(crate::escape::shell_line([
            "tracefault",
            "run",
            &path,
            "--strategy",
            name,
            "--run",
            &run,
            "--seed",
            &seed,
        ]))
    }
}

/// Applies the command-line overrides to a loaded suite.
pub fn apply_overrides(suite: &mut [Loaded], opts: &RunOptions) -> crate::error::Result<()> {
    for sc in suite.iter_mut() {
        if let Some(r) = opts.runs {
            sc.runs = r;
        }
        if let Some(s) = opts.seed {
            sc.seed = s;
        }
        if !opts.strategies.is_empty() {
            let baseline_name = sc.strategies[sc.baseline].name.clone();
            sc.strategies.retain(|s| opts.strategies.contains(&s.name));
            sc.baseline = sc.strategies.iter().position(|s| s.name == baseline_name).unwrap_or(0);
        }
    }
    if !opts.strategies.is_empty() {
        for name in &opts.strategies {
            if !suite.iter().any(|sc| sc.strategies.iter().any(|s| &s.name == name)) {
                return Err(crate::error::Error::Usage(format!(
                    "--strategy {name}: no scenario of the suite has this strategy"
                )));
            }
        }
    }
    Ok(())
}

/// A work unit: runs `first..last` of scenario `scenario` (its `chunk`-th slice), under every
/// strategy. Units are independent; their order is fixed by the suite alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    pub scenario: usize,
    pub chunk: usize,
    pub first: u64,
    pub last: u64,
}

/// What one work unit produced.
pub struct UnitResult {
    pub unit: usize,
    pub aggregates: Vec<Aggregate>,
    pub rows: Vec<u8>,
}

/// The suite's work units, in their fixed order.
pub fn units(suite: &[Loaded]) -> Vec<Unit> {
    suite
        .iter()
        .enumerate()
        .flat_map(|(si, sc)| {
            let size = chunk_size(sc.runs);
            (0..sc.runs.div_ceil(size)).map(move |c| Unit {
                scenario: si,
                chunk: c as usize,
                first: c * size,
                last: ((c + 1) * size).min(sc.runs),
            })
        })
        .collect()
}

/// Runs of one scenario per work unit: small enough to spread 200-run scenarios over two
/// cores, large enough that scheduling costs nothing.
fn chunk_size(runs: u64) -> u64 {
    (runs / 16).clamp(32, 4096)
}

/// Runs runs `first..last` of `sc` under every strategy.
fn run_unit(
    sc: &Loaded,
    first: u64,
    last: u64,
    with_rows: bool,
    ws: &mut Workspace,
    m: &mut Vec<RunMetrics>,
    mut rows: Vec<u8>,
) -> (Vec<Aggregate>, Vec<u8>) {
    let n = sc.strategies.len();
    let mut aggs = vec![Aggregate::default(); n];
    rows.clear();
    m.resize_with(n, RunMetrics::default);
    let prefixes: Vec<Vec<u8>> = sc.strategies.iter().map(|s| csv_prefix(&sc.name, &s.name)).collect();
    let recorded = sc.recorded.as_ref().filter(|_| with_rows && first == 0);
    ws.caching_for(sc, |ws| {
        for run in first..last {
            for (s, strat) in sc.strategies.iter().enumerate() {
                m[s].reset(sc.faults.rules.len());
                simulate(sc, strat, run, sc.seed, ws, &mut m[s]);
            }
            let base_calls = m[sc.baseline].calls() as i64;
            for s in 0..n {
                aggs[s].add(&m[s], run);
                aggs[s].add_delta(m[s].calls() as i64 - base_calls);
                if with_rows {
                    push_run_row(&mut rows, &prefixes[s], run, sc.seed, &m[s]);
                }
            }
            if let (0, Some(r)) = (run, recorded) {
                push_run_row(&mut rows, &csv_prefix(&sc.name, RECORDED), 0, sc.seed, r);
            }
        }
    });
    (aggs, rows)
}

/// Runs the units `selected` (indices into [`units`]) on `jobs` threads and hands each
/// result to `on_result` in the order of `selected`, whatever order they finish in. Row
/// buffers go back to the workers once handed on, so a long run allocates (and the kernel
/// zeroes) only the few that are in flight.
pub fn run_units(
    suite: &[Loaded],
    jobs: usize,
    selected: &[usize],
    with_rows: bool,
    progress: &(dyn Fn(u64) + Sync),
    on_result: &mut dyn FnMut(&mut UnitResult) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let all = units(suite);
    let (spare_tx, spare_rx) = mpsc::channel::<Vec<u8>>();
    let spare_rx = std::sync::Mutex::new(spare_rx);
    let work = |(ws, m): &mut (Workspace, Vec<RunMetrics>), k: usize| {
        let unit = selected[k];
        let u = all[unit];
        let sc = &suite[u.scenario];
        let spare = spare_rx.lock().ok().and_then(|r| r.try_recv().ok()).unwrap_or_default();
        let (aggregates, rows) = run_unit(sc, u.first, u.last, with_rows, ws, m, spare);
        progress((u.last - u.first) * sc.strategies.len() as u64);
        UnitResult { unit, aggregates, rows }
    };
    // Handed on in the order of `selected`: a unit that finishes early waits for those before it.
    let mut pending = std::collections::BTreeMap::new();
    let mut expect = 0usize;
    let mut io_result = Ok(());
    in_parallel(jobs, selected.len(), &work, &mut |k, r| {
        pending.insert(k, r);
        while let Some(mut r) = pending.remove(&expect) {
            expect += 1;
            if io_result.is_ok() {
                io_result = on_result(&mut r);
            }
            let _ = spare_tx.send(r.rows);
        }
    });
    io_result
}

/// Runs `work(state, k)` for every `k` in `0..count` on `jobs` threads, each with its own
/// `state`, and hands each result with its `k` to `on_result` as it finishes.
pub fn in_parallel<W: Default, R: Send>(
    jobs: usize,
    count: usize,
    work: &(dyn Fn(&mut W, usize) -> R + Sync),
    on_result: &mut dyn FnMut(usize, R),
) {
    let jobs = jobs.max(1).min(count.max(1));
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::sync_channel::<(usize, R)>(jobs * 4);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let tx = tx.clone();
            let next = &next;
            scope.spawn(move || {
                let mut state = W::default();
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= count || tx.send((k, work(&mut state, k))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (k, r) in rx {
            on_result(k, r);
        }
    });
}

/// Folds unit results, in unit order, into finished scenarios.
pub struct Merger<'a> {
    suite: &'a [Loaded],
    units: Vec<Unit>,
    partial: Vec<(Vec<Aggregate>, u64)>,
    pub done: Vec<ScenarioResult>,
}

impl<'a> Merger<'a> {
    pub fn new(suite: &'a [Loaded]) -> Merger<'a> {
        Merger {
            suite,
            units: units(suite),
            partial: suite.iter().map(|sc| (vec![Aggregate::default(); sc.strategies.len()], 0)).collect(),
            done: Vec::with_capacity(suite.len()),
        }
    }

    pub fn add(&mut self, unit: usize, aggregates: &[Aggregate]) {
        let si = self.units[unit].scenario;
        let (aggs, seen) = &mut self.partial[si];
        for (a, b) in aggs.iter_mut().zip(aggregates) {
            a.merge(b);
        }
        *seen += 1;
        let sc = &self.suite[si];
        if *seen == sc.runs.div_ceil(chunk_size(sc.runs)) {
            self.done.push(finish_scenario(sc, std::mem::take(aggs)));
        }
    }
}

/// Runs the whole suite. `progress` is told of each finished unit (runs × strategies).
pub fn run_suite(
    suite: &[Loaded],
    opts: &RunOptions,
    sink: &mut dyn RunsSink,
    with_rows: bool,
    progress: &(dyn Fn(u64) + Sync),
) -> std::io::Result<Vec<ScenarioResult>> {
    let all: Vec<usize> = (0..units(suite).len()).collect();
    let mut merger = Merger::new(suite);
    run_units(suite, opts.jobs, &all, with_rows, progress, &mut |r| {
        merger.add(r.unit, &r.aggregates);
        sink.rows(&r.rows)
    })?;
    Ok(merger.done)
}

/// One `summary.csv` row per strategy of `sc`, from its aggregate.
pub fn summary_rows(sc: &Scenario, aggregates: &[Aggregate]) -> Vec<SummaryRow> {
    let price = price_of(sc);
    sc.strategies
        .iter()
        .zip(aggregates)
        .map(|(s, a)| SummaryRow::new(&sc.name, &s.name, a).with_cost(a, price))
        .collect()
}

/// The scenario's `[pricing]` per input and output token, if any.
fn price_of(sc: &Scenario) -> Option<(f64, f64)> {
    sc.pricing.as_ref().map(|(_, input, output)| (*input, *output))
}

/// A scenario's result from its strategies' aggregates: summary rows, rules fired, warnings
/// and the gates on values.
pub fn finish_scenario(sc: &Loaded, aggregates: Vec<Aggregate>) -> ScenarioResult {
    let rows = summary_rows(sc, &aggregates);
    let price = price_of(sc);
    let rules_fired: Vec<(String, u64)> = sc
        .faults
        .rules
        .iter()
        .enumerate()
        .map(|(i, r)| (r.label.clone(), aggregates.iter().map(|a| a.rule_fired.get(i).copied().unwrap_or(0)).sum()))
        .collect();
    let mut warnings = Vec::new();
    for (label, fired) in &rules_fired {
        if *fired == 0 {
            warnings.push(format!("fault rule `{label}` never fired in any run"));
        }
    }
    if !rules_fired.iter().any(|r| r.1 > 0) && aggregates.iter().all(|a| a.load_rejections == 0) {
        warnings.push("no fault fired at all: this scenario tested nothing".to_owned());
    }
    // An idempotency key only spares a write at a tool that honours it.
    if !sc.effects.iter().any(|e| e.write && e.honours_key) {
        for s in sc.strategies.iter().filter(|s| s.retry.as_ref().unwrap_or(&sc.policy.retry).idempotency_key) {
            warnings.push(format!(
                "strategy `{}` sends an idempotency key, but no tool honours one (`effect = \"write\"` with \
                 `idempotent = \"key\"`): the key changes nothing",
                s.name
            ));
        }
    }
    let mut gates = Vec::new();
    // Gates on the value; those on the change against a baseline are checked by `baseline`,
    // those on robustness across profiles by `sweep`.
    for g in sc.gates.iter().filter(|g| !g.is_robustness() && (g.min.is_some() || g.max.is_some())) {
        for (s, row) in sc.strategies.iter().zip(&rows) {
            if g.strategy != "*" && g.strategy != s.name {
                continue;
            }
            let value = row.get(&g.metric).unwrap_or(f64::NAN);
            let passed = g.min.is_none_or(|m| value >= m) && g.max.is_none_or(|m| value <= m);
            gates.push(GateResult {
                scenario: sc.name.clone(),
                strategy: s.name.clone(),
                metric: g.metric.clone(),
                value,
                min: g.min,
                max: g.max,
                passed,
            });
        }
    }
    let recorded = sc.recorded.as_ref().map(|m| {
        let mut agg = Aggregate::default();
        agg.add(m, 0);
        (SummaryRow::new(&sc.name, RECORDED, &agg).without_paired_difference().with_cost(&agg, price), agg)
    });
    ScenarioResult {
        scenario: sc.scenario.clone(),
        seed: sc.seed,
        runs: sc.runs,
        rows,
        aggregates,
        recorded,
        rules_fired,
        warnings,
        gates,
    }
}

/// `scenario,strategy,` as CSV (quoted where needed, a formula kept from being one):
/// computed once per scenario and strategy.
pub fn csv_prefix(scenario: &str, strategy: &str) -> Vec<u8> {
    crate::escape::csv_names(&[scenario, strategy])
}

/// Appends one `runs.csv` row without allocating.
pub fn push_run_row(buf: &mut Vec<u8>, prefix: &[u8], run: u64, seed: u64, m: &RunMetrics) {
    let mut num = itoa::Buffer::new();
    buf.extend_from_slice(prefix);
    let mut field = |buf: &mut Vec<u8>, v: u64| {
        buf.extend_from_slice(num.format(v).as_bytes());
        buf.push(b',');
    };
    field(buf, run);
    field(buf, seed);
    buf.extend_from_slice(m.terminated_by().name().as_bytes());
    buf.push(b',');
    for v in [
        m.calls(),
        m.model_calls,
        m.tool_calls,
        m.wasted_retries,
        m.orchestrator_retries,
        m.model_transient_roundtrips,
        m.breaker_trips,
        m.faults_injected,
        m.tokens,
        m.virtual_ms,
        m.protocol_violations,
    ] {
        field(buf, v);
    }
    field(buf, m.raw_leaks);
    for v in [
        m.agents,
        m.agents_succeeded,
        m.virtual_ms,
        m.agent_ms_percentile(0.5),
        m.agent_ms_percentile(0.99),
        m.peak_in_flight,
    ] {
        field(buf, v);
    }
    // Attempts per first attempt with three decimals, from integers.
    let amp = m.retry_amplification_milli();
    buf.extend_from_slice(num.format(amp / 1000).as_bytes());
    buf.push(b'.');
    buf.extend_from_slice(&[b'0' + (amp / 100 % 10) as u8, b'0' + (amp / 10 % 10) as u8, b'0' + (amp % 10) as u8]);
    buf.push(b',');
    buf.extend_from_slice(num.format(m.load_rejections).as_bytes());
    buf.push(b',');
    buf.extend_from_slice(num.format(m.duplicate_writes).as_bytes());
    buf.push(b',');
    buf.extend_from_slice(num.format(m.false_successes).as_bytes());
    buf.push(b',');
    buf.extend_from_slice(num.format(m.wrong_accepted).as_bytes());
    buf.push(b',');
    buf.extend_from_slice(num.format(m.injection_followed).as_bytes());
    buf.push(b'\n');
}

/// Runs one run of one strategy with extra observers (for `--run` and `--trace-out`).
pub fn run_one<O: Observer>(sc: &Scenario, strategy: usize, run: u64, obs: &mut O) -> RunMetrics {
    run_one_with(sc, strategy, run, obs, &mut &sc.profile)
}

/// [`run_one`] with the model's probabilities read from `probs` (an explaining one keeps the
/// draws it answers).
pub fn run_one_with<O: Observer, J: crate::engine::probabilities::Probabilities>(
    sc: &Scenario,
    strategy: usize,
    run: u64,
    obs: &mut O,
    probs: &mut J,
) -> RunMetrics {
    let mut m = RunMetrics::default();
    m.reset(sc.faults.rules.len());
    let mut ws = Workspace::default();
    crate::engine::run::simulate_with(sc, &sc.strategies[strategy], run, sc.seed, &mut ws, &mut (&mut m, obs), probs);
    m
}
