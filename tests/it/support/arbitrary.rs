//! Random scenarios for the properties: a task over three tools with random fault rules, policy
//! and strategies, and random fleets over the same tools; the scenario text loaded as the
//! binary would load it.

use std::path::Path;

use proptest::prelude::*;
use tracefault::scenario::Loaded;
use tracefault::scenario::load::load_str;

pub const TOOLS: [&str; 3] = ["alpha", "beta", "gamma"];
const STATUSES: [u16; 15] = [400, 401, 402, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 504, 529];
const OTHER_FAULTS: [&str; 5] = ["timeout", "reset", "ambiguous", "truncated_json", "code_fenced_json"];

fn trigger() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(1u32..8, 1..4).prop_map(|at| format!("at = {at:?}")),
        (0.05f64..1.0).prop_map(|p| format!("probability = {p}")),
        (0u64..20_000, 1u64..60_000).prop_map(|(a, d)| format!("window_ms = [{a}, {}]", a + d)),
        (0u32..4).prop_map(|n| format!("after_successes = {n}")),
        (0.1f64..3.0, 1.0f64..4.0).prop_map(|(r, b)| format!("rate_limit = {{ per_s = {r}, burst = {b} }}")),
    ]
}

fn fault(provider: bool) -> impl Strategy<Value = String> {
    let http = (0..STATUSES.len(), prop::option::of(0u32..5)).prop_map(|(i, ra)| {
        let s = STATUSES[i];
        match ra {
            Some(r) if s == 429 || s == 503 => format!("http = {s}\nretry_after_s = {r}"),
            _ => format!("http = {s}"),
        }
    });
    let other = (0..OTHER_FAULTS.len()).prop_map(move |i| {
        let f = if provider { OTHER_FAULTS[i % 2] } else { OTHER_FAULTS[i] };
        if f == "timeout" { "fault = \"timeout\"\nafter_ms = 5000".to_owned() } else { format!("fault = \"{f}\"") }
    });
    prop_oneof![3 => http, 1 => other]
}

pub fn rule() -> impl Strategy<Value = String> {
    (0usize..5).prop_flat_map(|t| {
        let target = match t {
            0..=2 => TOOLS[t].to_owned(),
            3 => "*".to_owned(),
            _ => "provider".to_owned(),
        };
        (trigger(), fault(t == 4)).prop_map(move |(tr, f)| format!("[[faults]]\ntarget = \"{target}\"\n{tr}\n{f}\n"))
    })
}

/// A random scenario: 1–4 steps of 1–3 parallel calls, 1–4 fault rules, random policy, every
/// preset plus one random custom strategy.
pub fn scenario() -> impl Strategy<Value = String> {
    let steps = prop::collection::vec(prop::collection::vec((0usize..3, 0u32..3), 1..4), 1..5);
    let rules = prop::collection::vec(rule(), 1..5);
    let custom = (0usize..5, any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>());
    let policy = (1u32..6, 0usize..7, any::<bool>(), 1u32..5, 1u32..4, 5u32..40);
    let budgets = (300u64..8000, 500u64..200_000);
    (steps, rules, custom, policy, budgets, any::<u64>()).prop_map(|(steps, rules, custom, policy, budget, seed)| {
        let (max_tokens, max_virtual_ms) = budget;
        let (max_attempts, backoff, honor, failures, k, max_steps) = policy;
        let backoffs = ["none", "constant", "exponential", "full-jitter", "equal-jitter", "decorrelated", "sdk"];
        let encodings = ["raw", "prefix", "flag", "object", "envelope"];
        let (enc, orch, term, breaker, guard, budgets) = custom;
        let mut s = format!(
            "name = \"prop\"\nseed = {seed}\nruns = 1\nprovider = \"anthropic\"\n\
             [strategies.raw-exception]\n[strategies.error-string]\n[strategies.is-error-flag]\n\
             [strategies.response-object]\n[strategies.five-field]\n[strategies.five-field-guarded]\n\
             [strategies.custom]\nencoding = \"{}\"\nrouting = \"{}\"\npartials = \"{}\"\nbreaker = {breaker}\nloop_guard = {guard}\nbudgets = {budgets}\n\
             [policy]\nmax_steps = {max_steps}\nmax_tokens = {max_tokens}\nmax_virtual_ms = {max_virtual_ms}\n\
             retry = {{ max_attempts = {max_attempts}, backoff = \"{}\", base_ms = 100, cap_ms = 4000, honor_retry_after = {honor} }}\n\
             breaker = {{ failures = {failures}, open_ms = 10000 }}\nloop_guard = {{ k = {k} }}\n[task]\n",
            encodings[enc],
            if orch { "orchestrator" } else { "model" },
            if term { "terminal" } else { "ambiguous" },
            backoffs[backoff],
        );
        // A first parallel step with every tool, so every fault target is a tool of the task.
        s.push_str("[[task.steps]]\ncalls = [{ tool = \"alpha\" }, { tool = \"beta\" }, { tool = \"gamma\" }]\n");
        for calls in &steps {
            s.push_str("[[task.steps]]\ncalls = [\n");
            for (tool, arg) in calls {
                s.push_str(&format!("  {{ tool = \"{}\", args = {{ n = {arg} }}, result = {{ ok = {arg} }} }},\n", TOOLS[*tool]));
            }
            s.push_str("]\n");
        }
        for r in rules {
            s.push_str(&r);
        }
        s
    })
}

/// A random fleet: 2–24 agents under one start rule, on a task over the three tools where
/// `alpha` has random limits (concurrency, queue, rate, service time, write conflicts of
/// either kind, network delays), with
/// random fault rules on top. Returns the source, alpha's concurrency and its rate.
pub fn fleet_scenario() -> impl Strategy<Value = (String, Option<u32>, Option<(f64, u32)>)> {
    let start = prop_oneof![
        Just("\"together\"".to_owned()),
        (0u64..300).prop_map(|ms| format!("{{ every_ms = {ms} }}")),
        (0.5f64..80.0).prop_map(|r| format!("{{ poisson_per_s = {r} }}")),
    ];
    let service = prop_oneof![
        (0u64..60).prop_map(|ms| ms.to_string()),
        (0u64..30, 0u64..30).prop_map(|(a, b)| format!("{{ dist = \"uniform\", min = {a}, max = {} }}", a + b)),
        (1.0f64..40.0, 0.0f64..10.0).prop_map(|(m, sd)| format!("{{ dist = \"normal\", mean = {m}, sd = {sd} }}")),
        (1.0f64..40.0, 0.0f64..1.5).prop_map(|(m, s)| format!("{{ dist = \"lognormal\", median = {m}, sigma = {s} }}")),
    ];
    let network = prop::option::of(prop_oneof![
        (0u64..20).prop_map(|ms| ms.to_string()),
        (1.0f64..20.0, 0.0f64..5.0).prop_map(|(m, sd)| format!("{{ dist = \"normal\", mean = {m}, sd = {sd} }}")),
    ]);
    let limits = (
        prop::option::of(1u32..5),
        any::<bool>(),
        prop::option::of((1u32..400, 1u32..5)),
        service,
        prop::option::of(prop_oneof![Just("occ"), Just("occ-read-write")]),
        network,
    );
    let rules = prop::collection::vec(rule(), 0..3);
    (2u32..25, start, limits, rules, any::<u64>(), (1u32..6, 50u64..3000)).prop_map(|(agents, start, limits, rules, seed, policy)| {
        let (attempts, max_virtual_ms) = policy;
        let (concurrency, queue, rate, service, conflict, network) = limits;
        let rate = rate.map(|(per_decis, burst)| (f64::from(per_decis) / 10.0, burst));
        let mut s = format!(
            "name = \"fleet\"\nseed = {seed}\nruns = 1\n\
             [strategies.five-field]\n[strategies.five-field-guarded]\n[strategies.error-string]\n\
             [strategies.budgeted]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\nbudgets = true\n\
             [strategies.retrying]\nencoding = \"envelope\"\nrouting = \"orchestrator\"\n\
             [policy]\nmax_virtual_ms = {max_virtual_ms}\nretry = {{ max_attempts = {attempts}, backoff = \"full-jitter\", base_ms = 20, cap_ms = 400 }}\n\
             [fleet]\nagents = {agents}\nstart = {start}\n[tools.alpha]\nservice_ms = {service}\n"
        );
        if let Some((per_s, burst)) = rate {
            s.push_str(&format!("rate = {{ per_s = {per_s}, burst = {burst} }}\n"));
        }
        if let Some(c) = conflict {
            s.push_str(&format!("conflict = \"{c}\"\n"));
        }
        if let Some(n) = network {
            s.push_str(&format!("network_ms = {n}\n"));
        }
        // The same concurrency at every tool (the peak in flight is the most at any one tool).
        if let Some(c) = concurrency {
            s.push_str(&format!("concurrency = {c}\nqueue = {queue}\n"));
            for t in ["beta", "gamma"] {
                s.push_str(&format!("[tools.{t}]\nconcurrency = {c}\nqueue = {queue}\n"));
            }
        }
        s.push_str("[task]\n[[task.steps]]\ncalls = [{ tool = \"alpha\" }, { tool = \"beta\" }, { tool = \"gamma\" }]\n");
        s.push_str("[[task.steps]]\ncalls = [{ tool = \"alpha\", args = { n = 2 } }, { tool = \"alpha\", args = { n = 3 } }]\n");
        for r in rules {
            s.push_str(&r);
        }
        (s, concurrency, rate)
    })
}

/// `src` as a scenario; a failure names the text.
pub fn load(src: &str) -> Loaded {
    load_str(src, Path::new("prop.toml")).unwrap_or_else(|e| panic!("{e}\n{src}"))
}
