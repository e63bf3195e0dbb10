//! Fault rules (target × trigger × fault) and the seeded injector that decides each attempt.
//!
//! A decision depends only on (root seed, scenario, run, target, attempt number) plus the
//! virtual time and the target's history, never on the strategy: strategies meet the same
//! faults at the same attempts. A probability rule draws from a stream of its own, keyed by
//! what the rule says (its target, triggers and fault, or its explicit `key`), never by its
//! place in the file: reordering rules, tools or strategies moves no draw.

use std::collections::HashMap;

use super::fleet::agent_key;
use super::rng::{LazyStream, domain, fnv1a64, key};
use crate::fault::Fault;

/// Which calls a rule applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Provider,
    Tool(u16),
    /// Every tool (not the provider).
    AnyTool,
}

/// A token bucket: `per_s` tokens a second, at most `burst` banked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    pub per_s: f64,
    pub burst: f64,
}

/// When a rule fires; every present trigger must hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trigger {
    /// 1-based attempt numbers on the target, sorted.
    pub at: Option<Vec<u32>>,
    pub probability: Option<f64>,
    /// `[t0, t1)` in virtual milliseconds.
    pub window_ms: Option<(u64, u64)>,
    /// Fires once the target has had this many successes.
    pub after_successes: Option<u32>,
    pub rate_limit: Option<RateLimit>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FaultRule {
    pub target: Target,
    pub trigger: Trigger,
    pub fault: Fault,
    /// A description for reports, e.g. `search at [1, 2]: http 503`.
    pub label: String,
    /// `scope = "fleet"`: its triggers count the whole fleet's attempts and successes on the
    /// target, and a rate limit is the fleet's (a lone agent's are the fleet's).
    pub fleet: bool,
    /// `transport = true`: over MCP's streamable HTTP this HTTP fault is the endpoint's own
    /// answer (a status with `retry-after`, no JSON-RPC), or a dropped connection, rather than
    /// the tool's failure. Elsewhere it changes nothing.
    pub transport: bool,
    /// `key = "…"`: what a probability rule's draws are keyed by, instead of its content (two
    /// otherwise identical rules draw alike unless keyed apart).
    pub key: Option<String>,
    /// `commit = "before_failure"`: on a write tool, the attempt's write is committed before it
    /// fails.
    pub commits: bool,
}

impl FaultRule {
    /// The key of this rule's draws: its explicit `key`, else its content (target, triggers,
    /// fault, scope and transport), never its place in the file.
    pub fn draw_key(&self) -> u64 {
        match &self.key {
            Some(k) => key(&[fnv1a64(b"key"), fnv1a64(k.as_bytes())]),
            None => {
                let content =
                    format!("{:?}|{:?}|{:?}|{}|{}", self.target, self.trigger, self.fault, self.fleet, self.transport);
                fnv1a64(content.as_bytes())
            }
        }
    }
}

/// The fault plan of a scenario, plus its per-run state.
#[derive(Clone, Debug)]
pub struct FaultPlan {
    pub rules: Vec<FaultRule>,
    /// Number of targets: tools, then the provider at index `tools`.
    targets: usize,
    /// For each target, the rules that apply to it: a decision looks at no other rule,
    /// however many the plan holds. A lone agent's decisions read every rule in file order
    /// (its counts are the fleet's); a fleet's read the rules with `scope = "fleet"` on the
    /// fleet's counts, then the agent's own.
    by_target: Vec<TargetRules>,
    by_target_agent: Vec<TargetRules>,
    by_target_fleet: Vec<TargetRules>,
    has_fleet_rules: bool,
    /// For each rule with a rate limit, its place among them (its bucket per target).
    bucket_of: Vec<Option<u32>>,
    rate_rules: usize,
    /// A full bucket of each rate-limited rule: every target's buckets at the start of a run.
    full_buckets: Vec<(f64, u64)>,
    /// For each rule with a probability, its place among them (its stream per target).
    stream_of: Vec<Option<u32>>,
    /// The draw key of each rule with a probability, in that order.
    draw_keys: Vec<u64>,
}

/// The rules of one target, in file order. A target with many rules that fire only at listed
/// attempts (a compiled trace holds one per recorded failure) has those indexed by attempt,
/// so deciding an attempt never walks them all.
#[derive(Clone, Debug, Default)]
struct TargetRules {
    /// Rules to check on every attempt.
    general: Vec<u16>,
    /// `at`-only rules (no rate limit), by attempt number.
    by_attempt: HashMap<u32, Vec<u16>>,
}

/// Past this many `at`-only rules a target indexes them by attempt.
const INDEX_AT_RULES: usize = 16;

impl TargetRules {
    fn new(rules: &[FaultRule], mine: Vec<u16>) -> TargetRules {
        let at_only = |r: &FaultRule| {
            let t = &r.trigger;
            t.at.is_some() && t.rate_limit.is_none() && t.probability.is_none()
        };
        let indexable = mine.iter().filter(|&&i| at_only(&rules[usize::from(i)])).count();
        if indexable <= INDEX_AT_RULES {
            return TargetRules { general: mine, by_attempt: HashMap::new() };
        }
        let mut out = TargetRules::default();
        for i in mine {
            let rule = &rules[usize::from(i)];
            match &rule.trigger.at {
                Some(at) if at_only(rule) => {
                    for &a in at {
                        out.by_attempt.entry(a).or_default().push(i);
                    }
                }
                _ => out.general.push(i),
            }
        }
        out
    }

    /// The rules to check for `attempt`, in file order.
    fn for_attempt(&self, attempt: u32) -> impl Iterator<Item = u16> + '_ {
        let listed = if self.by_attempt.is_empty() {
            &[][..]
        } else {
            self.by_attempt.get(&attempt).map_or(&[][..], Vec::as_slice)
        };
        let (mut a, mut b) = (self.general.iter().copied().peekable(), listed.iter().copied().peekable());
        std::iter::from_fn(move || match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if y < x => b.next(),
            (Some(_), _) => a.next(),
            (None, _) => b.next(),
        })
    }
}

/// One fired rule: which, and for rate limits the wait the server announces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fired {
    pub rule: u16,
    pub retry_after_ms: Option<u64>,
}

/// The injector's per-run memory: rate-limit buckets (one per target and rate-limited rule)
/// and one stream per target and probability rule (read at the attempt's number).
#[derive(Clone, Default)]
pub struct Injector {
    buckets: Vec<(f64, u64)>,
    streams: Vec<LazyStream>,
    /// Probability rules: the streams of target `t` start at `t * drawn`.
    drawn: usize,
    /// (root, scenario, run, agent, targets) the streams are keyed for: the strategies of one
    /// run share them, so only the first computes the keys.
    keyed_for: Option<(u64, u64, u64, u32, usize)>,
}

impl FaultPlan {
    pub fn new(rules: Vec<FaultRule>, tools: usize) -> Self {
        let targets = tools + 1;
        let index = |scope: Option<bool>| {
            let mut mine = vec![Vec::new(); targets];
            for (i, rule) in rules.iter().enumerate().filter(|(_, r)| scope.is_none_or(|f| r.fleet == f)) {
                match rule.target {
                    Target::Provider => mine[tools].push(i as u16),
                    Target::Tool(t) => mine[usize::from(t)].push(i as u16),
                    Target::AnyTool => mine[..tools].iter_mut().for_each(|l| l.push(i as u16)),
                }
            }
            mine.into_iter().map(|m| TargetRules::new(&rules, m)).collect::<Vec<_>>()
        };
        let (by_target, by_target_agent, by_target_fleet) = (index(None), index(Some(false)), index(Some(true)));
        let has_fleet_rules = rules.iter().any(|r| r.fleet);
        let mut rate_rules = 0;
        let bucket_of = rules
            .iter()
            .map(|r| {
                r.trigger.rate_limit.map(|_| {
                    rate_rules += 1;
                    rate_rules - 1
                })
            })
            .collect();
        let full_buckets = rules.iter().filter_map(|r| r.trigger.rate_limit).map(|l| (l.burst, 0)).collect();
        let mut drawn = 0;
        let stream_of = rules
            .iter()
            .map(|r| {
                r.trigger.probability.map(|_| {
                    drawn += 1;
                    drawn - 1
                })
            })
            .collect();
        let draw_keys = rules.iter().filter(|r| r.trigger.probability.is_some()).map(FaultRule::draw_key).collect();
        FaultPlan {
            rules,
            targets,
            by_target,
            by_target_agent,
            by_target_fleet,
            has_fleet_rules,
            bucket_of,
            rate_rules: rate_rules as usize,
            full_buckets,
            stream_of,
            draw_keys,
        }
    }

    /// Whether any rule counts the fleet's attempts (`scope = "fleet"`).
    pub fn has_fleet_rules(&self) -> bool {
        self.has_fleet_rules
    }

    /// [`FaultPlan::decide`] for an agent of a fleet over the rules of one scope: with
    /// `fleet`, the rules with `scope = "fleet"` (`attempt` and `successes` are then the
    /// fleet's on the target, `inj` the fleet's injector), else the agent's own rules.
    pub fn decide_scoped(
        &self,
        fleet: bool,
        inj: &mut Injector,
        target: usize,
        attempt: u32,
        now_ms: u64,
        successes: u32,
    ) -> Option<Fired> {
        let rules = if fleet { &self.by_target_fleet[target] } else { &self.by_target_agent[target] };
        self.decide_by(rules, inj, Attempt { target, attempt, now_ms, successes })
    }

    pub fn provider_target(&self) -> usize {
        self.targets - 1
    }

    /// Readies `inj` for agent `agent` of run `run` (agent 0's streams are a lone agent's).
    #[inline]
    pub fn reset(&self, inj: &mut Injector, root: u64, scenario: u64, run: u64, agent: u32, target_names: &[u64]) {
        inj.drawn = self.draw_keys.len();
        inj.buckets.clear();
        if self.rate_rules > 0 {
            for _ in 0..self.targets {
                inj.buckets.extend_from_slice(&self.full_buckets);
            }
        }
        // A tuple, not an array: an array's comparison is a call to `memcmp`.
        let id = (root, scenario, run, agent, self.targets);
        if inj.keyed_for == Some(id) {
            return;
        }
        inj.keyed_for = Some(id);
        let drawn = self.draw_keys.len();
        inj.streams.resize_with(self.targets * drawn, LazyStream::default);
        for t in 0..self.targets {
            let name = target_names.get(t).copied().unwrap_or(fnv1a64(b"provider"));
            let target_key = key(&[root, scenario, run, domain::FAULT, name]);
            for (stream, rule_key) in inj.streams[t * drawn..(t + 1) * drawn].iter_mut().zip(&self.draw_keys) {
                stream.reset(agent_key(key(&[target_key, *rule_key]), agent));
            }
        }
    }

    /// Decides a lone agent's attempt `attempt` (1-based) on `target` at `now_ms`. Every
    /// rate-limit bucket of a matching rule is charged, as a real server counts every request;
    /// the first rule (in file order) whose triggers all hold wins.
    pub fn decide(
        &self,
        inj: &mut Injector,
        target: usize,
        attempt: u32,
        now_ms: u64,
        successes: u32,
    ) -> Option<Fired> {
        self.decide_by(&self.by_target[target], inj, Attempt { target, attempt, now_ms, successes })
    }

    /// Decides `at` by `rules`, the rules of its target.
    #[inline(always)]
    fn decide_by(&self, rules: &TargetRules, inj: &mut Injector, at: Attempt) -> Option<Fired> {
        let mut fired = None;
        // Plain loops, not a closure that writes `fired`: the answer stays in registers.
        if rules.by_attempt.is_empty() {
            for &i in &rules.general {
                fired = self.check(inj, i, &at, fired);
            }
        } else {
            for i in rules.for_attempt(at.attempt) {
                fired = self.check(inj, i, &at, fired);
            }
        }
        fired
    }

    /// Rule `i` on one attempt: charges its bucket, and fires it unless a rule already has.
    /// Always inlined: called out of line, its 24-byte answer goes through memory in pieces
    /// and the caller's wide read of it stalls.
    #[inline(always)]
    fn check(&self, inj: &mut Injector, i: u16, at: &Attempt, fired: Option<Fired>) -> Option<Fired> {
        let (i, rule) = (usize::from(i), &self.rules[usize::from(i)]);
        let trig = &rule.trigger;
        let mut holds = true;
        let mut retry_after_ms = None;
        if let (Some(rl), Some(b)) = (trig.rate_limit, self.bucket_of[i]) {
            let bucket = &mut inj.buckets[at.target * self.rate_rules + b as usize];
            let elapsed_s = at.now_ms.saturating_sub(bucket.1) as f64 / 1000.0;
            bucket.0 = (bucket.0 + elapsed_s * rl.per_s).min(rl.burst);
            bucket.1 = at.now_ms;
            if bucket.0 >= 1.0 {
                bucket.0 -= 1.0;
                holds = false;
            } else {
                let wait_s = (1.0 - bucket.0) / rl.per_s;
                retry_after_ms = Some((wait_s * 1000.0).ceil() as u64);
            }
        }
        if fired.is_some() {
            return fired;
        }
        if let Some(listed) = &trig.at {
            holds &= listed.binary_search(&at.attempt).is_ok();
        }
        if let Some((t0, t1)) = trig.window_ms {
            holds &= at.now_ms >= t0 && at.now_ms < t1;
        }
        if let Some(n) = trig.after_successes {
            holds &= at.successes >= n;
        }
        if holds && let (Some(p), Some(s)) = (trig.probability, self.stream_of[i]) {
            holds &= inj.streams[at.target * inj.drawn + s as usize].unit(u64::from(at.attempt)) < p;
        }
        if !holds {
            return None;
        }
        let retry_after_ms = match &rule.fault {
            Fault::Http { retry_after_ms: Some(ms), .. } => Some(*ms),
            _ => retry_after_ms,
        };
        Some(Fired { rule: i as u16, retry_after_ms })
    }
}

/// The attempt a decision is about.
struct Attempt {
    target: usize,
    attempt: u32,
    now_ms: u64,
    successes: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(target: Target, trigger: Trigger, fault: Fault) -> FaultRule {
        FaultRule {
            target,
            trigger,
            fault,
            label: String::new(),
            fleet: false,
            transport: false,
            key: None,
            commits: false,
        }
    }

    fn http(status: u16) -> Fault {
        Fault::Http { status, retry_after_ms: None, param: None, message: None }
    }

    #[test]
    fn at_trigger_fires_on_listed_attempts_only() {
        let plan = FaultPlan::new(
            vec![rule(Target::Tool(0), Trigger { at: Some(vec![1, 2]), ..Default::default() }, http(503))],
            1,
        );
        let mut inj = Injector::default();
        plan.reset(&mut inj, 1, 2, 3, 0, &[9]);
        let fired: Vec<bool> = (1..=4).map(|a| plan.decide(&mut inj, 0, a, 0, 0).is_some()).collect();
        assert_eq!(fired, [true, true, false, false]);
        assert!(plan.decide(&mut inj, 1, 1, 0, 0).is_none(), "provider is not a tool target");
    }

    #[test]
    fn probability_is_common_to_all_observers() {
        let plan = FaultPlan::new(
            vec![rule(Target::AnyTool, Trigger { probability: Some(0.5), ..Default::default() }, http(503))],
            2,
        );
        let run = |order: &[u32]| {
            let mut inj = Injector::default();
            plan.reset(&mut inj, 7, 8, 9, 0, &[1, 2]);
            let mut out: Vec<(u32, bool)> =
                order.iter().map(|&a| (a, plan.decide(&mut inj, 0, a, 0, 0).is_some())).collect();
            out.sort();
            out
        };
        assert_eq!(run(&[1, 2, 3, 4, 5, 40]), run(&[40, 5, 4, 3, 2, 1]));
        let fired = (1..=2000).filter(|&a| run(&[a])[0].1).count();
        assert!((900..1100).contains(&fired), "{fired}");
    }

    #[test]
    fn rate_limit_refills_in_virtual_time() {
        let rl = RateLimit { per_s: 2.0, burst: 2.0 };
        let plan = FaultPlan::new(
            vec![rule(Target::Tool(0), Trigger { rate_limit: Some(rl), ..Default::default() }, http(429))],
            1,
        );
        let mut inj = Injector::default();
        plan.reset(&mut inj, 1, 1, 1, 0, &[1]);
        assert!(plan.decide(&mut inj, 0, 1, 0, 0).is_none());
        assert!(plan.decide(&mut inj, 0, 2, 0, 0).is_none());
        let third = plan.decide(&mut inj, 0, 3, 0, 0).expect("bucket empty");
        assert_eq!(third.retry_after_ms, Some(500));
        assert!(plan.decide(&mut inj, 0, 4, 500, 0).is_none(), "one token after 500 ms");
    }

    #[test]
    fn window_and_after_successes() {
        let plan = FaultPlan::new(
            vec![
                rule(Target::Tool(0), Trigger { window_ms: Some((1000, 2000)), ..Default::default() }, http(503)),
                rule(Target::Tool(0), Trigger { after_successes: Some(2), ..Default::default() }, http(401)),
            ],
            1,
        );
        let mut inj = Injector::default();
        plan.reset(&mut inj, 1, 1, 1, 0, &[1]);
        assert_eq!(plan.decide(&mut inj, 0, 1, 999, 0), None);
        assert_eq!(plan.decide(&mut inj, 0, 2, 1000, 0).map(|f| f.rule), Some(0));
        assert_eq!(plan.decide(&mut inj, 0, 3, 2000, 1), None);
        assert_eq!(plan.decide(&mut inj, 0, 4, 2000, 2).map(|f| f.rule), Some(1));
    }

    #[test]
    fn indexed_rules_keep_file_order_against_general_ones() {
        // 17 `at`-only rules are indexed by attempt; rule 17 fires on every attempt. On attempt
        // 3 both rule 2 and rule 17 hold, and the earlier one in the file wins.
        let mut rules: Vec<FaultRule> = (1..=17)
            .map(|a| rule(Target::Tool(0), Trigger { at: Some(vec![a]), ..Default::default() }, http(503)))
            .collect();
        rules.push(rule(Target::Tool(0), Trigger { probability: Some(1.0), ..Default::default() }, http(500)));
        let plan = FaultPlan::new(rules, 1);
        assert!(!plan.by_target[0].by_attempt.is_empty(), "the at-only rules are indexed");
        let mut inj = Injector::default();
        plan.reset(&mut inj, 1, 1, 1, 0, &[1]);
        assert_eq!(plan.decide(&mut inj, 0, 3, 0, 0).map(|f| f.rule), Some(2));
        assert_eq!(plan.decide(&mut inj, 0, 30, 0, 0).map(|f| f.rule), Some(17));
    }

    #[test]
    fn each_target_has_its_own_buckets() {
        // Two rate-limited rules on every tool, one token each: tool 0 spends its tokens, tool 1
        // still has its own.
        let rl = RateLimit { per_s: 0.001, burst: 1.0 };
        let limited =
            |status| rule(Target::AnyTool, Trigger { rate_limit: Some(rl), ..Default::default() }, http(status));
        let plan = FaultPlan::new(vec![limited(429), limited(503)], 2);
        let mut inj = Injector::default();
        plan.reset(&mut inj, 1, 1, 1, 0, &[1, 2]);
        assert_eq!(plan.decide(&mut inj, 0, 1, 0, 0), None);
        assert_eq!(plan.decide(&mut inj, 1, 1, 0, 0), None, "tool 1's buckets are full");
        assert_eq!(plan.decide(&mut inj, 0, 2, 0, 0).map(|f| f.rule), Some(0));
        assert_eq!(plan.decide(&mut inj, 1, 2, 0, 0).map(|f| f.rule), Some(0));
    }
}
