//! Validates what a fleet shares: `[fleet]` (how many agents, how they start) and
//! `[tools.NAME]` (concurrency, rate, service time, write conflicts) and the provider's
//! `rpm` / `tpm`.

use std::collections::BTreeMap;

use super::{Ctx, MAX_MS, ms};
use crate::engine::fleet::{Fleet, MAX_AGENTS, Start};
use crate::engine::limits::{ProviderLoad, Service, ToolLoad};
use crate::engine::scenario::Effect;
use crate::error::Result;
use crate::scenario::dto::{FleetDto, ProviderDto, ServiceDistDto, ServiceDto, StartDto, ToolDto};

pub(super) fn fleet_from_dto(ctx: &Ctx, d: Option<&FleetDto>) -> Result<Fleet> {
    let Some(d) = d else { return Ok(Fleet::default()) };
    let agents = d.agents.unwrap_or(1);
    if !(1..=MAX_AGENTS).contains(&agents) {
        return Err(ctx.err("fleet.agents", format!("1 to {MAX_AGENTS}, got {agents}")));
    }
    let start = match &d.start {
        None => Start::Together,
        Some(StartDto::Named(s)) if s == "together" => Start::Together,
        Some(StartDto::Named(s)) => {
            return Err(ctx.err(
                "fleet.start",
                format!("\"together\", {{ every_ms = X }} or {{ poisson_per_s = R }}, got {s:?}"),
            ));
        }
        Some(StartDto::Table(t)) => match (t.every_ms, t.poisson_per_s) {
            (Some(every), None) => Start::Every { ms: ms(ctx, "fleet.start.every_ms", Some(every))?.unwrap_or(0) },
            (None, Some(r)) if r.is_finite() && r > 0.0 => Start::Poisson { per_s: r },
            (None, Some(r)) => {
                return Err(ctx.err("fleet.start.poisson_per_s", format!("a rate above 0 per second, got {r}")));
            }
            _ => return Err(ctx.err("fleet.start", "exactly one of `every_ms` and `poisson_per_s`")),
        },
    };
    Ok(Fleet { agents, start })
}

/// `[provider] rpm`, `tpm`: limits per minute above 0 (a zero limit would never answer).
pub(super) fn provider_from_dto(ctx: &Ctx, d: Option<&ProviderDto>) -> Result<ProviderLoad> {
    let Some(d) = d else { return Ok(ProviderLoad::default()) };
    if d.conflict.is_some() {
        return Err(ctx.err("provider.conflict", "no write conflicts at the provider (`conflict` is a tool's key)"));
    }
    let per_minute = |key: &str, v: Option<f64>| match v {
        Some(v) if !(v.is_finite() && (1.0..=1e9).contains(&v)) => {
            Err(ctx.err(format!("provider.{key}"), format!("a limit per minute from 1 to 1e9, got {v}")))
        }
        v => Ok(v),
    };
    Ok(ProviderLoad { rpm: per_minute("rpm", d.rpm)?, tpm: per_minute("tpm", d.tpm)? })
}

/// `[tools.NAME]` by the task's tool index (tools it does not name take everything).
pub(super) fn loads_from_dto(ctx: &Ctx, d: &BTreeMap<String, ToolDto>, tools: &[String]) -> Result<Vec<ToolLoad>> {
    let mut loads = vec![ToolLoad::default(); tools.len()];
    for (name, t) in d {
        let field = |k: &str| format!("tools.{name}.{k}");
        let Some(i) = tools.iter().position(|x| x == name) else {
            let known = tools.iter().map(|t| format!("{t:?}")).collect::<Vec<_>>().join(", ");
            return Err(ctx.err(format!("tools.{name}"), format!("a tool the task calls ({known}), got {name:?}")));
        };
        if t.concurrency == Some(0) {
            return Err(ctx.err(field("concurrency"), "at least 1 call in flight, got 0"));
        }
        if t.queue.is_some() && t.concurrency.is_none() {
            return Err(ctx.err(field("queue"), "a `concurrency` limit to queue behind"));
        }
        let rate = match &t.rate {
            None => None,
            Some(r) if !r.per_s.is_finite() || r.per_s < 0.0 => {
                return Err(ctx.err(field("rate.per_s"), format!("a rate of 0 or more per second, got {}", r.per_s)));
            }
            Some(r) if r.burst == Some(0) => return Err(ctx.err(field("rate.burst"), "at least 1, got 0")),
            Some(r) if r.per_s == 0.0 && r.burst.is_none() => {
                return Err(ctx.err(field("rate"), "a `burst` when `per_s` is 0 (else the tool never answers)"));
            }
            // Without a burst, the bucket holds one second of calls.
            Some(r) => Some((r.per_s, r.burst.unwrap_or_else(|| r.per_s.ceil().max(1.0) as u32))),
        };
        let (occ, reads_first) = match t.conflict.as_deref() {
            None => (false, false),
            Some("occ") => (true, false),
            Some("occ-read-write") => (true, true),
            Some(c) => return Err(ctx.err(field("conflict"), format!("\"occ\" or \"occ-read-write\", got {c:?}"))),
        };
        let network = t.network_ms.as_ref().map(|s| service(ctx, &field("network_ms"), s)).transpose()?;
        let service = t.service_ms.as_ref().map(|s| service(ctx, &field("service_ms"), s)).transpose()?;
        loads[i] = ToolLoad {
            concurrency: t.concurrency,
            queue: t.queue.unwrap_or(false),
            rate,
            service,
            occ,
            reads_first,
            network,
        };
    }
    Ok(loads)
}

/// `[tools.NAME] upstream` by the task's tool index: the user's real tool, for live mode.
/// (`loads_from_dto` has checked the names.)
pub(super) fn upstreams_from_dto(
    ctx: &Ctx,
    d: &BTreeMap<String, ToolDto>,
    tools: &[String],
) -> Result<Vec<Option<String>>> {
    let mut out = vec![None; tools.len()];
    for (name, t) in d {
        let (Some(url), Some(i)) = (&t.upstream, tools.iter().position(|x| x == name)) else { continue };
        let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
        let host = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or_default());
        let fits = host.is_some_and(|h| !h.is_empty() && !h.contains('@'))
            && !url.chars().any(|c| c.is_whitespace() || c.is_control());
        if !fits {
            return Err(ctx.err(
                format!("tools.{name}.upstream"),
                "an http:// or https:// URL with a host and no user or password (the value is not shown: it may hold a key)",
            ));
        }
        out[i] = Some(url.clone());
    }
    Ok(out)
}

/// `[tools.NAME] effect` and `idempotent`, by tool index (an unknown tool is
/// [`loads_from_dto`]'s to refuse).
pub(super) fn effects_from_dto(ctx: &Ctx, d: &BTreeMap<String, ToolDto>, tools: &[String]) -> Result<Vec<Effect>> {
    let mut out = vec![Effect::default(); tools.len()];
    for (name, t) in d {
        let Some(i) = tools.iter().position(|x| x == name) else { continue };
        let write = match t.effect.as_deref() {
            None | Some("read") => false,
            Some("write") => true,
            Some(e) => {
                return Err(ctx.err(format!("tools.{name}.effect"), format!("\"read\" or \"write\", got {e:?}")));
            }
        };
        let honours_key = match t.idempotent.as_deref() {
            None | Some("none") => false,
            Some("key") if write => true,
            Some("key") => {
                return Err(ctx.err(format!("tools.{name}.idempotent"), "`idempotent` only with `effect = \"write\"`"));
            }
            Some(k) => {
                return Err(ctx.err(format!("tools.{name}.idempotent"), format!("\"key\" or \"none\", got {k:?}")));
            }
        };
        out[i] = Effect { write, honours_key };
    }
    Ok(out)
}

fn service(ctx: &Ctx, field: &str, s: &ServiceDto) -> Result<Service> {
    let d = match s {
        ServiceDto::Constant(v) => return Ok(Service::Constant(ms(ctx, field, Some(*v))?.unwrap_or(0))),
        ServiceDto::Dist(d) => d,
    };
    let keys: &[&str] = match d.dist.as_str() {
        "constant" => &["ms"],
        "uniform" => &["min", "max"],
        "normal" => &["mean", "sd", "floor"],
        "lognormal" => &["median", "sigma"],
        other => {
            return Err(
                ctx.err(format!("{field}.dist"), format!("constant, uniform, normal or lognormal, got {other:?}"))
            );
        }
    };
    let given = given_keys(d);
    if let Some(k) = given.iter().find(|k| !keys.contains(k)) {
        return Err(ctx.err(format!("{field}.{k}"), format!("only {} for dist = {:?}", keys.join(", "), d.dist)));
    }
    let millis = |k: &str, v: Option<f64>, required: bool| -> Result<f64> {
        match v {
            None if required => Err(ctx.err(format!("{field}.{k}"), format!("a value for dist = {:?}", d.dist))),
            None => Ok(0.0),
            Some(v) if v.is_finite() && (0.0..=MAX_MS as f64).contains(&v) => Ok(v),
            Some(v) => Err(ctx.err(format!("{field}.{k}"), format!("0 to {MAX_MS} ms, got {v}"))),
        }
    };
    Ok(match d.dist.as_str() {
        "constant" => Service::Constant(millis("ms", d.ms.map(|v| v as f64), true)? as u64),
        "uniform" => {
            let (min, max) =
                (millis("min", d.min.map(|v| v as f64), true)?, millis("max", d.max.map(|v| v as f64), true)?);
            if min > max {
                return Err(ctx.err(format!("{field}.min"), format!("at most `max` ({max}), got {min}")));
            }
            Service::Uniform { min: min as u64, max: max as u64 }
        }
        "normal" => Service::Normal {
            mean: millis("mean", d.mean, true)?,
            sd: millis("sd", d.sd, true)?,
            floor: millis("floor", d.floor, false)?,
        },
        _ => {
            let median = millis("median", d.median, true)?;
            if median == 0.0 {
                return Err(ctx.err(format!("{field}.median"), "above 0 ms, got 0"));
            }
            let sigma = d.sigma.unwrap_or(f64::NAN);
            if !(0.0..=4.0).contains(&sigma) {
                return Err(ctx.err(format!("{field}.sigma"), format!("a shape from 0 to 4, got {sigma}")));
            }
            Service::LogNormal { median, sigma }
        }
    })
}

fn given_keys(d: &ServiceDistDto) -> Vec<&'static str> {
    let f = [
        ("ms", d.ms.is_some()),
        ("min", d.min.is_some()),
        ("max", d.max.is_some()),
        ("mean", d.mean.is_some()),
        ("sd", d.sd.is_some()),
        ("floor", d.floor.is_some()),
        ("median", d.median.is_some()),
        ("sigma", d.sigma.is_some()),
    ];
    f.iter().filter(|(_, on)| *on).map(|(k, _)| *k).collect()
}
