//! Turns a parsed [`ScenarioDto`], with the files it names already read ([`Files`]), into the
//! engine's [`Scenario`] — defaults applied, ranges checked, names resolved — or into every
//! problem it has. Pure: it reads no file. Every problem names the file, the line where it
//! can, the field, and what was expected.

mod fleet;

use serde_json::Value;

use super::dto::*;
use super::files::Files;
use super::locate::Ctx;
use super::{Gate, Loaded, RANK_FIRST_SHARE, RANKED, Scenario};
use crate::engine::breaker::{BreakerConfig, BreakerMode};
use crate::engine::fault_plan::{FaultPlan, FaultRule, RateLimit, Target, Trigger};
use crate::engine::limits::ToolLoad;
use crate::engine::profile::{MEASURES, PROBABILITIES, Profile, check_measure};
use crate::engine::retry::{self, Backoff, MAX_ATTEMPTS_LIMIT, RetryAfter, RetryPolicy};
use crate::engine::rng::fnv1a64;
use crate::engine::scenario::Price;
use crate::engine::strategy::{Partials, Routing, Strategy};
use crate::engine::task::{MAX_PARALLEL_CALLS, Policy, Task};
use crate::envelope::Encoding;
use crate::error::{Error, Result};
use crate::fault::{Fault, HTTP_STATUSES, NON_HTTP_FAULTS, StreamBreak, http_class};
use crate::metrics::recorded::recorded_metrics;
use crate::metrics::summary::SUMMARY_COLUMNS;
use crate::provider::Format;
use crate::trace::Trace;

pub const DEFAULT_SEED: u64 = 1;
pub const DEFAULT_RUNS: u64 = 200;
pub const MAX_RUNS: u64 = 100_000_000;
pub use crate::engine::scenario::MAX_MS;

/// `[pricing]`: the billed model (named, the only one listed, or the trace's) and its prices.
fn pricing_from_dto(
    ctx: &Ctx,
    d: Option<&PricingDto>,
    trace_model: Option<&str>,
) -> Result<Option<(String, f64, f64)>> {
    let Some(d) = d else { return Ok(None) };
    for (name, p) in &d.models {
        for (k, v) in [("input_per_mtok", p.input_per_mtok), ("output_per_mtok", p.output_per_mtok)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ctx
                    .err(format!("pricing.models.{name}.{k}"), format!("USD per million tokens, 0 or more, got {v}")));
            }
        }
    }
    let names = || d.models.keys().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", ");
    let model = match (&d.model, d.models.len()) {
        (_, 0) => return Err(ctx.err("pricing.models", "at least one model's prices")),
        (Some(m), _) if d.models.contains_key(m) => m.clone(),
        (Some(m), _) => {
            return Err(ctx.err("pricing.model", format!("one of the models priced ({}), got {m:?}", names())));
        }
        (None, 1) => d.models.keys().next().cloned().unwrap_or_default(),
        (None, _) => match trace_model.filter(|m| d.models.contains_key(*m)) {
            Some(m) => m.to_owned(),
            None => {
                return Err(ctx.err(
                    "pricing.model",
                    format!("which of the models priced ({}) bills the simulated model", names()),
                ));
            }
        },
    };
    let p = &d.models[&model];
    Ok(Some((model, p.input_per_mtok, p.output_per_mtok)))
}

fn ms(ctx: &Ctx, field: &str, v: Option<u64>) -> Result<Option<u64>> {
    match v {
        Some(v) if v > MAX_MS => Err(ctx.err(field, format!("at most {MAX_MS} ms (a day), got {v}"))),
        v => Ok(v),
    }
}

fn prob(ctx: &Ctx, field: &str, v: f64) -> Result<f64> {
    if (0.0..=1.0).contains(&v) { Ok(v) } else { Err(ctx.err(field, format!("a probability in [0, 1], got {v}"))) }
}

/// Every problem a scenario has, in the order its keys are checked; empty when it is sound.
pub type Problems = Vec<Error>;

/// `r`'s value; its error is set aside in `problems`.
fn keep<T>(problems: &mut Problems, r: Result<T>) -> Option<T> {
    r.map_err(|e| problems.push(e)).ok()
}

/// The scenario a parsed file describes, or every problem it has: each key is checked (a key
/// whose check needs another — a fault's target needs the task's tools, a gate's strategy the
/// strategies — is checked once that one is sound), so a user fixes them in one go.
pub fn validate(dto: ScenarioDto, files: Files, ctx: &Ctx) -> std::result::Result<Loaded, Problems> {
    let file = ctx.file;
    let mut problems = Problems::new();
    let p = &mut problems;
    if dto.name.trim().is_empty() {
        p.push(ctx.err("name", "a non-empty name"));
    } else {
        keep(p, name_length(ctx, "name", &dto.name));
    }

    let replay = match (&dto.trace, &dto.task) {
        (Some(_), Some(_)) => {
            p.push(ctx.err("trace", "either `trace` or `[task]`, not both"));
            None
        }
        (None, None) => {
            p.push(ctx.err("task", "a `[task]` with steps, or `trace = \"…\"`"));
            None
        }
        (Some(_), None) => files.trace.and_then(|read| keep(p, read)),
        (None, Some(_)) => None,
    };
    let task_and_rules = match (&replay, &dto.task) {
        (Some(r), _) => Some((r.compiled.task.clone(), r.compiled.rules.clone(), r.trace.header.provider.clone())),
        (None, Some(t)) if dto.trace.is_none() => keep(p, task_from_dto(ctx, t)).map(|t| (t, Vec::new(), None)),
        _ => None,
    };
    let (task, recorded_rules, trace_format) = match task_and_rules {
        Some((task, _, _)) if task.steps.is_empty() => {
            p.push(ctx.err("task.steps", "at least one step"));
            (None, Vec::new(), None)
        }
        Some((task, rules, format)) => (Some(task), rules, format),
        None => (None, Vec::new(), None),
    };

    let provider = dto.provider.as_ref().map(|p| &p.0);
    let provider_load = keep(p, fleet::provider_from_dto(ctx, provider));
    let format = match provider.and_then(|p| p.format.as_deref()).or(trace_format.as_deref()) {
        None => Some(Format::OpenAiChat),
        Some(name) => keep(
            p,
            Format::parse(name).ok_or_else(|| ctx.err("provider", format!("one of {}, got {name:?}", format_names()))),
        ),
    };

    // A fault's target is one of the task's tools: checked when the task is sound.
    let mut rules = recorded_rules;
    let effects = task.as_ref().and_then(|task| keep(p, fleet::effects_from_dto(ctx, &dto.tools, &task.tools)));
    if let Some(task) = &task {
        for (i, f) in dto.faults.iter().enumerate() {
            let rule = keep(p, fault_rule(ctx, i, f, task));
            let writes = |t: Target| match t {
                Target::Tool(t) => effects.as_ref().is_none_or(|e| e[usize::from(t)].write),
                _ => effects.as_ref().is_none_or(|e| e.iter().any(|e| e.write)),
            };
            if let Some(r) = &rule
                && r.commits
                && !writes(r.target)
            {
                p.push(ctx.err(
                    format!("faults[{i}].commit"),
                    "a tool with `effect = \"write\"` in its `[tools.NAME]` table (only a write commits)",
                ));
            }
            rules.extend(rule);
        }
        if rules.len() > usize::from(u16::MAX) {
            p.push(ctx.err("faults", "at most 65535 rules"));
        }
    }

    let policy = keep(p, policy_from_dto(ctx, &dto.policy));
    let profile =
        keep(p, profile_from_dto(ctx, dto.profile.as_ref(), replay.as_ref().map(|r| &r.trace), files.profile));
    // Strategies inherit the policy's retry: checked when the policy is sound.
    let strategies =
        policy.as_ref().and_then(|policy| keep(p, strategies_from_dto(ctx, dto.strategies, &policy.retry)));
    let baseline = match (&dto.baseline, &strategies) {
        (None, _) => Some(0),
        (Some(b), Some(strategies)) => keep(
            p,
            strategies
                .iter()
                .position(|s| &s.name == b)
                .ok_or_else(|| ctx.err("baseline", format!("one of the scenario's strategies, got {b:?}"))),
        ),
        (Some(_), None) => None,
    };
    let mut gates = Vec::new();
    for (i, g) in dto.gates.iter().enumerate() {
        gates.extend(keep(p, gate(ctx, i, g, strategies.as_deref())));
    }
    let runs = dto.runs.unwrap_or(DEFAULT_RUNS);
    if !(1..=MAX_RUNS).contains(&runs) {
        p.push(ctx.err("runs", format!("1 to {MAX_RUNS}, got {runs}")));
    }
    if let (Some(policy), Some(strategies)) = (&policy, &strategies)
        && policy.breaker.sync_ms > 0
        && !policy.breaker.fleet
        && !strategies.iter().any(|s| s.breaker && s.fleet_breaker)
    {
        p.push(ctx.err(
            "policy.breaker.sync_ms",
            "a fleet breaker (`scope = \"fleet\"`, or a strategy with `breaker = \"fleet\"`)",
        ));
    }
    let pricing = keep(
        p,
        pricing_from_dto(ctx, dto.pricing.as_ref(), replay.as_ref().and_then(|r| r.trace.header.model.as_deref())),
    );
    let prices = dto.pricing.as_ref().map(|d| {
        let price = |p: &PriceDto| Price {
            input_per_mtok: p.input_per_mtok,
            output_per_mtok: p.output_per_mtok,
            max_output_tokens: p.max_output_tokens,
        };
        d.models.iter().map(|(name, p)| (name.clone(), price(p))).collect()
    });
    let fleet = keep(p, fleet::fleet_from_dto(ctx, dto.fleet.as_ref()));
    let loads = task.as_ref().and_then(|task| keep(p, fleet::loads_from_dto(ctx, &dto.tools, &task.tools)));
    let upstreams = task.as_ref().and_then(|task| keep(p, fleet::upstreams_from_dto(ctx, &dto.tools, &task.tools)));

    // The call each injected instruction asks for (a tool of the task), once the rules stand.
    let task = task.map(|mut task| {
        for (r, rule) in rules.iter().enumerate() {
            if let Fault::InjectedInstruction { tool, .. } = &rule.fault {
                task.push_injected(r as u16, tool);
            }
        }
        task
    });
    let (
        Some(task),
        Some(provider_load),
        Some(format),
        Some(policy),
        Some(profile),
        Some(strategies),
        Some(baseline),
        Some(pricing),
        Some(fleet),
        Some(loads),
        Some(tool_upstreams),
        Some(effects),
    ) = (task, provider_load, format, policy, profile, strategies, baseline, pricing, fleet, loads, upstreams, effects)
    else {
        return Err(problems);
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut target_hashes: Vec<u64> = task.tools.iter().map(|t| fnv1a64(t.as_bytes())).collect();
    target_hashes.push(fnv1a64(b"provider"));
    let recorded = replay.map(|r| recorded_metrics(&r.trace, &r.compiled));
    let scenario = Scenario {
        loaded: provider_load.is_limited() || loads.iter().any(|l| *l != ToolLoad::default()),
        loads,
        tool_upstreams,
        effects,
        provider_load,
        pricing,
        prices: prices.unwrap_or_default(),
        fleet,
        name_hash: fnv1a64(dto.name.as_bytes()),
        name: dto.name,
        description: dto.description.trim().to_owned(),
        path: file.to_owned(),
        seed: dto.seed.unwrap_or(DEFAULT_SEED),
        runs,
        format,
        strategies,
        baseline,
        faults: FaultPlan::new(rules, task.tools.len()),
        task,
        policy,
        profile,
        gates,
        target_hashes,
    };
    Ok(Loaded { scenario, recorded })
}

/// Gate `i`; its strategy is checked against the scenario's when they are sound.
fn gate(ctx: &Ctx, i: usize, g: &GateDto, strategies: Option<&[Strategy]>) -> Result<Gate> {
    if let Some(strategies) = strategies
        && g.strategy != "*"
        && !strategies.iter().any(|s| s.name == g.strategy)
    {
        return Err(ctx.err(
            format!("gates[{i}].strategy"),
            format!("one of the scenario's strategies or \"*\", got {:?}", g.strategy),
        ));
    }
    let robustness = g.metric == RANK_FIRST_SHARE;
    if !robustness && !SUMMARY_COLUMNS[2..].contains(&g.metric.as_str()) {
        return Err(ctx.err(
            format!("gates[{i}].metric"),
            format!(
                "a numeric column of summary.csv ({}) or {RANK_FIRST_SHARE:?}, got {:?}",
                SUMMARY_COLUMNS[2..].join(", "),
                g.metric
            ),
        ));
    }
    let ranked: Vec<&str> = RANKED.iter().map(|(m, _)| *m).collect();
    match &g.on {
        Some(_) if !robustness => {
            return Err(ctx.err(format!("gates[{i}].on"), format!("only with metric = {RANK_FIRST_SHARE:?}")));
        }
        Some(on) if !ranked.contains(&on.as_str()) => {
            return Err(ctx.err(format!("gates[{i}].on"), format!("one of {}, got {on:?}", ranked.join(", "))));
        }
        _ => {}
    }
    if robustness && (g.max_increase.is_some() || g.max_increase_pct.is_some()) {
        return Err(ctx.err(
            format!("gates[{i}]"),
            format!("`min` or `max` with {RANK_FIRST_SHARE:?} (a share of profiles, not compared with a baseline)"),
        ));
    }
    for (k, v) in [("min", g.min), ("max", g.max)] {
        if let Some(v) = v
            && robustness
            && !(0.0..=1.0).contains(&v)
        {
            return Err(ctx.err(format!("gates[{i}].{k}"), format!("a share within [0, 1], got {v}")));
        }
    }
    if [g.min, g.max, g.max_increase, g.max_increase_pct].iter().all(Option::is_none) {
        return Err(ctx.err(format!("gates[{i}]"), "`min`, `max`, `max_increase` or `max_increase_pct`"));
    }
    for (k, v) in
        [("min", g.min), ("max", g.max), ("max_increase", g.max_increase), ("max_increase_pct", g.max_increase_pct)]
    {
        if v.is_some_and(|v| !v.is_finite()) {
            return Err(ctx.err(format!("gates[{i}].{k}"), format!("a finite number, got {}", v.unwrap_or(0.0))));
        }
    }
    if let (Some(lo), Some(hi)) = (g.min, g.max)
        && lo > hi
    {
        return Err(ctx.err(format!("gates[{i}].min"), format!("at most `max` ({hi}), got {lo}")));
    }
    Ok(Gate {
        strategy: g.strategy.clone(),
        metric: g.metric.clone(),
        min: g.min,
        max: g.max,
        max_increase: g.max_increase,
        max_increase_pct: g.max_increase_pct,
        on: robustness.then(|| g.on.clone().unwrap_or_else(|| RANKED[0].0.to_owned())),
    })
}

fn format_names() -> String {
    Format::ALL.map(Format::name).join(", ")
}

fn task_from_dto(ctx: &Ctx, t: &TaskDto) -> Result<Task> {
    let mut task = Task::default();
    task.final_text.clone_from(&t.answer);
    for (i, step) in t.steps.iter().enumerate() {
        let field = format!("task.steps[{i}]");
        let mut idx = Vec::new();
        match (&step.calls, &step.tool) {
            (Some(_), Some(_)) => {
                return Err(ctx.err(field, "either `calls = [...]` or `tool = \"…\"`, not both"));
            }
            (None, None) => return Err(ctx.err(field, "`calls = [...]` or the shorthand `tool = \"…\"`")),
            (Some(calls), None) => {
                if step.args.is_some()
                    || step.result.is_some()
                    || step.latency_ms.is_some()
                    || step.fixed_args.is_some()
                {
                    return Err(
                        ctx.err(field, "`args`, `fixed_args`, `result` and `latency_ms` inside each call of `calls`")
                    );
                }
                if calls.is_empty() || calls.len() > MAX_PARALLEL_CALLS {
                    return Err(ctx.err(format!("{field}.calls"), format!("1 to {MAX_PARALLEL_CALLS} calls")));
                }
                for c in calls {
                    check_tool_name(ctx, &field, &c.tool)?;
                    ms(ctx, &format!("{field}.latency_ms"), c.latency_ms)?;
                    let fixes = fixed_args(ctx, &field, &c.args, c.fixed_args.as_ref())?;
                    idx.push(task.push_call(&c.tool, &c.args, &fixes, &c.result, c.latency_ms));
                }
            }
            (None, Some(tool)) => {
                check_tool_name(ctx, &field, tool)?;
                ms(ctx, &format!("{field}.latency_ms"), step.latency_ms)?;
                let args = step.args.clone().unwrap_or_else(empty_object);
                let result = step.result.clone().unwrap_or_else(ok_result);
                let fixes = fixed_args(ctx, &field, &args, step.fixed_args.as_ref())?;
                idx.push(task.push_call(tool, &args, &fixes, &result, step.latency_ms));
            }
        }
        task.steps.push(idx);
    }
    if let Some(goal) = &t.goal {
        if goal.is_empty() {
            return Err(ctx.err("task.goal", "at least one tool (leave `goal` out for every tool the steps call)"));
        }
        for (i, name) in goal.iter().enumerate() {
            let Some(at) = task.tools.iter().position(|t| t == name) else {
                return Err(ctx.err(
                    format!("task.goal[{i}]"),
                    format!(
                        "a tool the steps call ({}), got {}",
                        task.tools.join(", "),
                        crate::escape::printable(name)
                    ),
                ));
            };
            if task.goal.contains(&(at as u16)) {
                return Err(ctx.err(format!("task.goal[{i}]"), format!("each tool once, got {} twice", name)));
            }
            task.goal.push(at as u16);
        }
    }
    Ok(task)
}

/// A step's `fixed_args`: the arguments the model sends once it corrects them. They must be an
/// object that differs from `args`.
fn fixed_args(ctx: &Ctx, field: &str, args: &Value, fixed: Option<&Value>) -> Result<Vec<Value>> {
    let Some(f) = fixed else { return Ok(Vec::new()) };
    if !f.is_object() || !args.is_object() || f == args {
        return Err(ctx.err(
            format!("{field}.fixed_args"),
            "an object of corrected arguments that differs from `args` (and `args` an object)",
        ));
    }
    Ok(vec![f.clone()])
}

fn check_tool_name(ctx: &Ctx, field: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && name != "provider";
    if ok {
        Ok(())
    } else {
        Err(ctx.err(
            format!("{field}.tool"),
            format!("a tool name of 1-64 letters, digits, '_' or '-' (not \"provider\"), got {name:?}"),
        ))
    }
}

fn fault_rule(ctx: &Ctx, i: usize, f: &FaultDto, task: &Task) -> Result<FaultRule> {
    let field = |k: &str| format!("faults[{i}].{k}");
    let target = match f.target.as_str() {
        "provider" => Target::Provider,
        "*" => Target::AnyTool,
        name => match task.tools.iter().position(|t| t == name) {
            Some(t) => Target::Tool(t as u16),
            None => {
                return Err(ctx.err(
                    field("target"),
                    format!("\"provider\", \"*\" or a tool of the task ({}), got {name:?}", task.tools.join(", ")),
                ));
            }
        },
    };
    let mut trigger = Trigger::default();
    if let Some(at) = &f.at {
        if at.is_empty() || at.contains(&0) {
            return Err(ctx.err(field("at"), "a non-empty list of 1-based attempt numbers"));
        }
        let mut at = at.clone();
        at.sort_unstable();
        at.dedup();
        trigger.at = Some(at);
    }
    if let Some(p) = f.probability {
        trigger.probability = Some(prob(ctx, &field("probability"), p)?);
    }
    if let Some(w) = &f.window_ms {
        let &[t0, t1] = w.as_slice() else {
            return Err(ctx.err(field("window_ms"), format!("[t0, t1]: exactly two numbers, got {}", w.len())));
        };
        if t0 >= t1 {
            return Err(ctx.err(field("window_ms"), format!("[t0, t1] with t0 < t1, got [{t0}, {t1}]")));
        }
        ms(ctx, &field("window_ms"), Some(t1))?;
        trigger.window_ms = Some((t0, t1));
    }
    trigger.after_successes = f.after_successes;
    if let Some(rl) = &f.rate_limit {
        if !((0.001..=1e6).contains(&rl.per_s) && (1.0..=1e6).contains(&rl.burst)) {
            return Err(ctx.err(field("rate_limit"), "per_s in [0.001, 1e6] and burst in [1, 1e6]"));
        }
        trigger.rate_limit = Some(RateLimit { per_s: rl.per_s, burst: rl.burst });
    }
    if trigger == Trigger::default() {
        return Err(
            ctx.err(format!("faults[{i}]"), "a trigger: at, probability, window_ms, after_successes or rate_limit")
        );
    }
    let retry_after_ms = match f.retry_after_s {
        Some(s) if !(0.0..=86_400.0).contains(&s) => {
            return Err(ctx.err(field("retry_after_s"), format!("seconds in [0, 86400], got {s}")));
        }
        s => s.map(|s| (s * 1000.0).round() as u64),
    };
    let kinds = [f.http.is_some(), f.fault.is_some(), f.large_response.is_some(), f.injected_instruction.is_some()];
    if kinds.into_iter().filter(|&k| k).count() > 1 {
        return Err(ctx.err(
            format!("faults[{i}]"),
            "one fault: `http`, `fault`, `large_response` or `injected_instruction`, not several",
        ));
    }
    if f.injection_target.is_some() && f.injected_instruction.is_none() {
        return Err(ctx.err(field("injection_target"), "`injection_target` only with `injected_instruction`"));
    }
    let fault = match (f.http, f.fault.as_deref()) {
        _ if f.large_response.is_some() || f.injected_instruction.is_some() => tainting(ctx, i, f, task)?,
        (Some(_), Some(_)) => return Err(ctx.err(format!("faults[{i}]"), "either `http` or `fault`, not both")),
        (None, None) if trigger.rate_limit.is_some() => {
            Fault::Http { status: 429, retry_after_ms, param: None, message: None }
        }
        (None, None) => {
            return Err(ctx.err(format!("faults[{i}]"), "a fault: `http = STATUS` or `fault = \"…\"`"));
        }
        (Some(status), None) => {
            let Some(class) = http_class(status) else {
                return Err(ctx.err(
                    field("http"),
                    format!("one of {}, got {status}", HTTP_STATUSES.map(|s| s.to_string()).join(", ")),
                ));
            };
            if (f.param.is_some() || f.message.is_some()) && class != crate::fault::ErrorClass::BadArgs {
                return Err(ctx.err(field("param"), "`param` and `message` only with http = 400 or 422"));
            }
            Fault::Http { status, retry_after_ms, param: f.param.clone(), message: f.message.clone() }
        }
        (None, Some(kind)) => {
            if f.param.is_some() || f.message.is_some() || f.retry_after_s.is_some() {
                return Err(ctx.err(format!("faults[{i}]"), "`param`, `message` and `retry_after_s` only with `http`"));
            }
            match kind {
                "timeout" => Fault::Timeout { after_ms: ms(ctx, &field("after_ms"), f.after_ms)?.unwrap_or(30_000) },
                "reset" => Fault::Reset,
                "stream_dropped" => Fault::StreamDropped,
                "session_expired" => Fault::SessionExpired,
                "schema_drift" => Fault::SchemaDrift,
                "ambiguous" => Fault::Ambiguous { cursor: f.cursor.unwrap_or(false) },
                "truncated_json" => Fault::TruncatedJson,
                "code_fenced_json" => Fault::CodeFencedJson,
                "wrong_content" => Fault::WrongContent,
                "stream_cut" | "stream_malformed" | "stream_stall" | "stream_error" => {
                    let after_events = match f.after_events {
                        Some(n) if n > 10_000 => {
                            return Err(ctx.err(field("after_events"), format!("events in [0, 10000], got {n}")));
                        }
                        n => n.unwrap_or(1),
                    };
                    let how = match kind {
                        "stream_cut" => StreamBreak::Cut,
                        "stream_malformed" => StreamBreak::Malformed,
                        "stream_error" => StreamBreak::Error,
                        _ => StreamBreak::Stall { ms: ms(ctx, &field("stall_ms"), f.stall_ms)?.unwrap_or(30_000) },
                    };
                    Fault::Stream { after_events, how }
                }
                "no_progress" => {
                    return Err(ctx.err(field("fault"),
                        "one of timeout, reset, ambiguous, truncated_json, code_fenced_json: \"no_progress\" was removed \
                         (a 200 with unchanged data and no \"more may be available\" reads the same under every \
                         envelope, so it measured nothing; use \"ambiguous\" for a result that never says it is complete)",
                    ));
                }
                other => {
                    return Err(
                        ctx.err(field("fault"), format!("one of {}, got {other:?}", NON_HTTP_FAULTS.join(", ")))
                    );
                }
            }
        }
    };
    if f.cursor.is_some() && !matches!(fault, Fault::Ambiguous { .. }) {
        return Err(ctx.err(field("cursor"), "`cursor` only with fault = \"ambiguous\""));
    }
    if f.after_ms.is_some() && !matches!(fault, Fault::Timeout { .. }) {
        return Err(ctx.err(field("after_ms"), "`after_ms` only with fault = \"timeout\""));
    }
    if trigger.rate_limit.is_some() && matches!(fault, Fault::Stream { .. }) {
        return Err(ctx.err(field("rate_limit"), "a rate limit's refusal (an http status), not a stream fault"));
    }
    if f.after_events.is_some() && !matches!(fault, Fault::Stream { .. }) {
        return Err(ctx.err(field("after_events"), "`after_events` only with a stream_* fault"));
    }
    if f.stall_ms.is_some() && !matches!(fault, Fault::Stream { how: StreamBreak::Stall { .. }, .. }) {
        return Err(ctx.err(field("stall_ms"), "`stall_ms` only with fault = \"stream_stall\""));
    }
    if target == Target::Provider && fault.taints() {
        return Err(ctx.err(
            field(if f.fault.is_some() { "fault" } else { "target" }),
            "a tool or \"*\": wrong_content, large_response and injected_instruction change a tool's result",
        ));
    }
    if fault.taints() && (trigger.rate_limit.is_some() || f.transport.is_some_and(|t| t)) {
        return Err(ctx.err(
            format!("faults[{i}]"),
            "no `rate_limit` or `transport` with a tool result that succeeds (wrong_content, large_response, \
             injected_instruction)",
        ));
    }
    if target == Target::Provider
        && !matches!(fault, Fault::Http { .. } | Fault::Timeout { .. } | Fault::Reset | Fault::Stream { .. })
    {
        return Err(ctx.err(
            field("fault"),
            "an http status, \"timeout\", \"reset\" or a stream_* fault (stream_cut, stream_malformed, \
             stream_stall, stream_error) on the provider",
        ));
    }
    if target != Target::Provider && matches!(fault, Fault::Stream { .. }) {
        return Err(ctx.err(
            field("fault"),
            "a stream_* fault only on the provider (a tool's event stream breaks with \"stream_dropped\")",
        ));
    }
    let label = format!("{} {}: {}", f.target, trigger_label(&trigger), fault.label());
    let fleet = match f.scope.as_deref().unwrap_or("agent") {
        "agent" => false,
        "fleet" => true,
        s => return Err(ctx.err(format!("faults[{i}].scope"), format!("\"agent\" or \"fleet\", got {s:?}"))),
    };
    let label = if fleet { format!("{label} (fleet)") } else { label };
    let transport = f.transport.unwrap_or(false);
    if transport && (target == Target::Provider || !matches!(fault, Fault::Http { .. } | Fault::Reset)) {
        return Err(ctx.err(field("transport"), "`transport = true` only on a tool's http status or \"reset\""));
    }
    let key = match &f.key {
        Some(k) if k.trim().is_empty() => return Err(ctx.err(field("key"), "a non-empty name for the rule's draws")),
        Some(_) if trigger.probability.is_none() => {
            return Err(ctx.err(field("key"), "`key` only with `probability` (it names the rule's draws)"));
        }
        k => k.clone(),
    };
    let commits = match f.commit.as_deref() {
        None | Some("none") => false,
        Some("before_failure") => true,
        Some(c) => {
            return Err(ctx.err(field("commit"), format!("\"before_failure\" or \"none\", got {c:?}")));
        }
    };
    let fails_after_the_work = match &fault {
        Fault::Timeout { .. } | Fault::Reset => true,
        Fault::Http { status, .. } => *status >= 500 || *status == 408,
        _ => false,
    };
    if commits && (target == Target::Provider || !fails_after_the_work) {
        return Err(ctx.err(
            field("commit"),
            "`commit = \"before_failure\"` only on a tool's \"timeout\", \"reset\", 408 or 5xx (a failure that can \
             come after the work is done)",
        ));
    }
    let label = if commits { format!("{label} after committing") } else { label };
    Ok(FaultRule { target, trigger, fault, label, fleet, transport, key, commits })
}

/// A fault that changes a tool's result: `large_response = KB`, or `injected_instruction` with
/// its `injection_target` (a tool of the task).
fn tainting(ctx: &Ctx, i: usize, f: &FaultDto, task: &Task) -> Result<Fault> {
    let field = |k: &str| format!("faults[{i}].{k}");
    if f.param.is_some() || f.message.is_some() || f.retry_after_s.is_some() {
        return Err(ctx.err(format!("faults[{i}]"), "`param`, `message` and `retry_after_s` only with `http`"));
    }
    if let Some(kb) = f.large_response {
        if !(1..=MAX_RESULT_KB).contains(&kb) {
            return Err(ctx.err(field("large_response"), format!("KiB in [1, {MAX_RESULT_KB}], got {kb}")));
        }
        return Ok(Fault::LargeResponse { kb });
    }
    let text = f.injected_instruction.as_deref().unwrap_or_default();
    if text.trim().is_empty() {
        return Err(ctx.err(field("injected_instruction"), "the instruction's text, not empty"));
    }
    let Some(tool) = &f.injection_target else {
        return Err(ctx.err(
            field("injection_target"),
            format!("the tool the instruction asks for, one of the task's ({})", task.tools.join(", ")),
        ));
    };
    if !task.tools.contains(tool) {
        return Err(ctx.err(
            field("injection_target"),
            format!("a tool of the task ({}), got {:?}", task.tools.join(", "), crate::escape::printable(tool)),
        ));
    }
    Ok(Fault::InjectedInstruction { text: text.to_owned(), tool: tool.clone() })
}

/// The largest result a `large_response` or a strategy's `max_result_kb` names, in KiB.
pub const MAX_RESULT_KB: u32 = 65_536;

fn trigger_label(t: &Trigger) -> String {
    let mut parts = Vec::new();
    if let Some(at) = &t.at {
        parts.push(format!("at {at:?}"));
    }
    if let Some(p) = t.probability {
        parts.push(format!("p={p}"));
    }
    if let Some((a, b)) = t.window_ms {
        parts.push(format!("window [{a}, {b}) ms"));
    }
    if let Some(n) = t.after_successes {
        parts.push(format!("after {n} successes"));
    }
    if let Some(rl) = t.rate_limit {
        parts.push(format!("rate {}/s burst {}", rl.per_s, rl.burst));
    }
    parts.join(", ")
}

fn retry_from_dto(ctx: &Ctx, field: &str, base: &RetryPolicy, r: &RetryDto) -> Result<RetryPolicy> {
    let mut p = match &r.preset {
        Some(name) => RetryPolicy::preset(name).ok_or_else(|| {
            ctx.err(format!("{field}.preset"), format!("one of {}, got {name:?}", retry::PRESETS.join(", ")))
        })?,
        None => base.clone(),
    };
    if let Some(n) = r.max_attempts {
        if !(1..=MAX_ATTEMPTS_LIMIT).contains(&n) {
            return Err(ctx.err(format!("{field}.max_attempts"), format!("1 to {MAX_ATTEMPTS_LIMIT}, got {n}")));
        }
        p.max_attempts = n;
    }
    if let Some(b) = &r.backoff {
        p.backoff = Backoff::parse(b).ok_or_else(|| {
            ctx.err(format!("{field}.backoff"), format!("one of {}, got {b:?}", Backoff::NAMES.join(", ")))
        })?;
    }
    p.base_ms = r.base_ms.unwrap_or(p.base_ms);
    p.cap_ms = r.cap_ms.unwrap_or(p.cap_ms);
    if p.cap_ms > MAX_MS {
        return Err(ctx.err(format!("{field}.cap_ms"), format!("at most {MAX_MS} ms, got {}", p.cap_ms)));
    }
    p.honor_retry_after = r.honor_retry_after.unwrap_or(p.honor_retry_after);
    p.broken_streams = r.broken_streams.unwrap_or(p.broken_streams);
    p.idempotency_key = r.idempotency_key.unwrap_or(p.idempotency_key);
    if let Some(rule) = &r.retry_after {
        p.retry_after = RetryAfter::parse(rule).ok_or_else(|| {
            ctx.err(format!("{field}.retry_after"), format!("one of {}, got {rule:?}", RetryAfter::NAMES.join(", ")))
        })?;
    }
    p.retry_after_cap_s = r.retry_after_cap_s.unwrap_or(p.retry_after_cap_s);
    if let Some(ratio) = r.budget_ratio {
        if !(ratio > 0.0 && ratio.is_finite()) {
            return Err(ctx.err(format!("{field}.budget_ratio"), format!("a ratio > 0, got {ratio}")));
        }
        p.budget_ratio = Some(ratio);
    }
    if let Some(w) = r.budget_window_ms {
        if p.budget_ratio.is_none() {
            return Err(ctx.err(format!("{field}.budget_window_ms"), "a `budget_ratio` whose window it is"));
        }
        if !(10..=MAX_MS).contains(&w) {
            return Err(ctx.err(format!("{field}.budget_window_ms"), format!("10 to {MAX_MS} ms, got {w}")));
        }
        p.budget_window_ms = w;
    }
    if p.cap_ms < p.base_ms {
        return Err(ctx.err(format!("{field}.cap_ms"), "cap_ms >= base_ms"));
    }
    Ok(p)
}

fn policy_from_dto(ctx: &Ctx, d: &PolicyDto) -> Result<Policy> {
    let mut p = Policy::default();
    if let Some(n) = d.max_steps {
        if !(1..=10_000).contains(&n) {
            return Err(ctx.err("policy.max_steps", format!("1 to 10000, got {n}")));
        }
        p.max_steps = n;
    }
    p.max_tokens = d.max_tokens;
    p.max_virtual_ms = d.max_virtual_ms;
    if let Some(r) = &d.retry {
        p.retry = retry_from_dto(ctx, "policy.retry", &p.retry, r)?;
    }
    if let Some(b) = &d.breaker {
        let mut cfg = BreakerConfig::default();
        cfg.open_ms = ms(ctx, "policy.breaker.open_ms", b.open_ms)?.unwrap_or(cfg.open_ms);
        ms(ctx, "policy.breaker.window_ms", b.window_ms)?;
        cfg.probes = b.probes.unwrap_or(cfg.probes).max(1);
        cfg.close_after = b.close_after.unwrap_or(cfg.close_after).max(1);
        cfg.mode = match b.mode.as_deref().unwrap_or("consecutive") {
            "consecutive" => {
                if b.window_ms.is_some() || b.min_calls.is_some() || b.failure_ratio.is_some() {
                    return Err(
                        ctx.err("policy.breaker", "window_ms, min_calls and failure_ratio only with mode = \"rate\"")
                    );
                }
                BreakerMode::Consecutive { failures: b.failures.unwrap_or(3).max(1) }
            }
            "rate" => {
                if b.failures.is_some() {
                    return Err(ctx.err("policy.breaker.failures", "`failures` only with mode = \"consecutive\""));
                }
                let ratio = prob(ctx, "policy.breaker.failure_ratio", b.failure_ratio.unwrap_or(0.5))?;
                BreakerMode::Rate {
                    window_ms: b.window_ms.unwrap_or(60_000),
                    min_calls: b.min_calls.unwrap_or(10).max(1),
                    failure_ratio: ratio,
                }
            }
            m => return Err(ctx.err("policy.breaker.mode", format!("\"consecutive\" or \"rate\", got {m:?}"))),
        };
        cfg.fleet = match b.scope.as_deref().unwrap_or("agent") {
            "agent" => false,
            "fleet" => true,
            s => return Err(ctx.err("policy.breaker.scope", format!("\"agent\" or \"fleet\", got {s:?}"))),
        };
        cfg.sync_ms = ms(ctx, "policy.breaker.sync_ms", b.sync_ms)?.unwrap_or(0);
        p.breaker = cfg;
    }
    if let Some(lg) = &d.loop_guard {
        let k = lg.k.unwrap_or(3);
        if k == 0 {
            return Err(ctx.err("policy.loop_guard.k", "k >= 1"));
        }
        p.loop_guard_k = k;
    }
    Ok(p)
}

/// The profile a scenario names: the bundled `default`, `calibrated` (fitted from the
/// scenario's own trace), a file, or a `[profile]` table of overrides on one of those.
fn profile_from_dto(
    ctx: &Ctx,
    d: Option<&ProfileRefDto>,
    trace: Option<&Trace>,
    mut file: Option<Result<Profile>>,
) -> Result<Profile> {
    let mut read_base = |name: &str| -> Result<Profile> {
        if name == "default" {
            return Ok(Profile::bundled_default());
        }
        if name == CALIBRATED {
            let Some(trace) = trace else {
                return Err(
                    ctx.err("profile", "\"calibrated\" only in a scenario with `trace = …` (it is fitted from it)")
                );
            };
            let mut fit = crate::calibrate::Fit::default();
            crate::calibrate::observe(trace, &mut fit);
            return Ok(fit.profile(crate::calibrate::DEFAULT_MIN_OBSERVATIONS, None).0);
        }
        // A profile file, read with the scenario's other files.
        match file.take() {
            Some(read) => read,
            None => Err(ctx.err("profile", "a profile file read with the scenario")),
        }
    };
    let p = match d {
        None => Profile::bundled_default(),
        Some(ProfileRefDto::Path(path)) => read_base(path)?,
        Some(ProfileRefDto::Overrides(o)) => {
            let mut p = read_base(o.base.as_deref().unwrap_or("default"))?;
            let base_name = p.name.clone();
            let mut changed = false;
            macro_rules! set {
                ($($k:ident).+ <- $v:expr) => {
                    if let Some(v) = $v {
                        p.$($k).+ = v;
                        changed = true;
                    }
                };
            }
            set!(max_model_retries <- o.max_model_retries);
            set!(max_fix_attempts <- o.max_fix_attempts);
            let measures = [o.model_latency_ms, o.tool_latency_ms, o.prompt_tokens];
            for (key, figure) in MEASURES.into_iter().zip(measures) {
                if let Some(f) = figure {
                    check_measure(key, f).map_err(|e| ctx.err(format!("profile.{key}"), e))?;
                    p.set(key, f);
                    changed = true;
                }
            }
            let per = o.perception.as_ref();
            let figures = [
                o.p_continue,
                o.p_retry_transient,
                o.p_fix_args,
                o.p_give_up_terminal,
                per.and_then(|p| p.envelope),
                per.and_then(|p| p.flag),
                per.and_then(|p| p.object),
                per.and_then(|p| p.prefix),
                per.and_then(|p| p.raw),
                per.and_then(|p| p.unmarked),
            ];
            let ending = [
                ("p_claim_success", o.p_claim_success),
                ("p_notice_wrong", o.p_notice_wrong),
                ("p_follow_injection", o.p_follow_injection),
            ];
            for (key, figure) in PROBABILITIES.into_iter().zip(figures).chain(ending) {
                if let Some(f) = figure {
                    p.set(key, f);
                    changed = true;
                }
            }
            p.name = match &o.name {
                Some(n) => n.clone(),
                None if changed => format!("{base_name}+overrides"),
                None => base_name,
            };
            p
        }
    };
    p.validate().map_err(|(k, exp)| ctx.err(format!("profile.{k}"), exp))?;
    Ok(p)
}

fn strategies_from_dto(ctx: &Ctx, d: Option<StrategiesDto>, retry: &RetryPolicy) -> Result<Vec<Strategy>> {
    let presets = || Strategy::named().into_iter().map(|s| s.name).collect::<Vec<_>>().join(", ");
    let names: Vec<&str> = match &d {
        None => Vec::new(),
        Some(StrategiesDto::Names(names)) => names.iter().map(String::as_str).collect(),
        Some(StrategiesDto::Defined(defs)) => defs.iter().map(|d| d.0.as_str()).collect(),
    };
    for name in names {
        name_length(ctx, "strategies", name)?;
    }
    let out: Vec<Strategy> = match d {
        None => Strategy::presets(),
        Some(StrategiesDto::Names(names)) => names
            .iter()
            .map(|n| {
                Strategy::preset_named(n).ok_or_else(|| {
                    ctx.err(
                        "strategies",
                        format!("preset names ({}) or [strategies.NAME] tables, got {n:?}", presets()),
                    )
                })
            })
            .collect::<Result<_>>()?,
        Some(StrategiesDto::Defined(defs)) => defs
            .into_iter()
            .map(|(name, s)| custom_strategy(ctx, &name, s, &presets(), retry))
            .collect::<Result<_>>()?,
    };
    if out.is_empty() {
        return Err(ctx.err("strategies", "at least one strategy"));
    }
    for (i, s) in out.iter().enumerate() {
        if out[..i].iter().any(|o| o.name == s.name) {
            return Err(ctx.err("strategies", format!("unique names; {:?} appears twice", s.name)));
        }
    }
    Ok(out)
}

/// A scenario's or strategy's name is at most [`MAX_NAME_CHARS`] characters; the error shows
/// only the name's start.
fn name_length(ctx: &Ctx, field: &str, name: &str) -> Result<()> {
    let n = name.chars().count();
    if n <= MAX_NAME_CHARS {
        return Ok(());
    }
    let start: String = name.chars().take(24).collect();
    Err(ctx.err(field, format!("names of at most {MAX_NAME_CHARS} characters; {start:?}… has {n}")))
}

/// The encodings' names, for errors.
fn encodings() -> String {
    Encoding::ALL.iter().map(|e| e.name()).collect::<Vec<_>>().join(", ")
}

fn custom_strategy(ctx: &Ctx, name: &str, s: StrategyDto, presets: &str, base_retry: &RetryPolicy) -> Result<Strategy> {
    let field = |k: &str| format!("strategies.{name}.{k}");
    let is_empty = s.encoding.is_none()
        && s.routing.is_none()
        && s.partials.is_none()
        && s.breaker.is_none()
        && s.loop_guard.is_none()
        && s.budgets.is_none()
        && s.retry.is_none()
        && s.max_result_kb.is_none();
    if is_empty {
        return Strategy::preset_named(name).ok_or_else(|| {
            ctx.err(format!("strategies.{name}"), format!("a preset name ({presets}) or a definition with `encoding`"))
        });
    }
    let Some(enc) = s.encoding.as_deref() else {
        return Err(ctx.err(field("encoding"), format!("an encoding: {}", encodings())));
    };
    let encoding =
        Encoding::parse(enc).ok_or_else(|| ctx.err(field("encoding"), format!("{}, got {enc:?}", encodings())))?;
    let routing = match s.routing.as_deref().unwrap_or("model") {
        "model" => Routing::Model,
        "orchestrator" => Routing::Orchestrator,
        r => return Err(ctx.err(field("routing"), format!("\"model\" or \"orchestrator\", got {r:?}"))),
    };
    let partials = match s.partials.as_deref().unwrap_or("ambiguous") {
        "ambiguous" => Partials::Ambiguous,
        "terminal" => Partials::Terminal,
        p => return Err(ctx.err(field("partials"), format!("\"ambiguous\" or \"terminal\", got {p:?}"))),
    };
    let retry = match &s.retry {
        None => None,
        Some(r) => Some(retry_from_dto(ctx, &field("retry"), base_retry, r)?),
    };
    if let Some(kb) = s.max_result_kb
        && !(1..=MAX_RESULT_KB).contains(&kb)
    {
        return Err(ctx.err(field("max_result_kb"), format!("KiB in [1, {MAX_RESULT_KB}], got {kb}")));
    }
    Ok(Strategy {
        name: name.to_owned(),
        encoding,
        routing,
        partials,
        breaker: !matches!(s.breaker, None | Some(BreakerChoiceDto::On(false))),
        fleet_breaker: match &s.breaker {
            Some(BreakerChoiceDto::Scope(scope)) => match scope.as_str() {
                "agent" => false,
                "fleet" => true,
                other => {
                    return Err(
                        ctx.err(field("breaker"), format!("true, false, \"agent\" or \"fleet\", got {other:?}"))
                    );
                }
            },
            _ => false,
        },
        budgets: s.budgets.unwrap_or(false),
        loop_guard: s.loop_guard.unwrap_or(false),
        retry,
        max_result_kb: s.max_result_kb,
    })
}
