//! `tracefault shrink`: the smallest fault schedule under which a looping run still loops. The
//! run's faults become an explicit schedule (which attempt of which target failed, and how);
//! faults are then removed one at a time while the run still ends in a loop. Model decisions
//! are keyed by run, not by faults, so the schedule alone decides what changes.

use crate::engine::Scenario;
use crate::engine::events::{Event, Observer, TerminatedBy};
use crate::engine::fault_plan::{FaultPlan, FaultRule, Target, Trigger};
use crate::fault::Fault;
use crate::suite::run_one;

/// One fault the run met: where, at which attempt, what.
#[derive(Clone, Debug, PartialEq)]
pub struct Met {
    pub target: Target,
    pub attempt: u32,
    pub fault: Fault,
    /// The write was committed before the failure (`commit = "before_failure"`).
    pub commits: bool,
}

#[derive(Default)]
struct Collect {
    met: Vec<(Target, u32, u16)>,
    provider_attempts: u32,
}

impl Observer for Collect {
    fn event(&mut self, e: &Event<'_>) {
        match *e {
            Event::ModelCall { rule, .. } => {
                self.provider_attempts += 1;
                if let Some(r) = rule {
                    self.met.push((Target::Provider, self.provider_attempts, r));
                }
            }
            Event::Attempt { tool, attempt, rule: Some(r), fired: true, .. } => {
                self.met.push((Target::Tool(tool), attempt, r))
            }
            _ => {}
        }
    }
}

/// The faults run `run` of strategy `s` met, as fired (faults with memory repeat by themselves).
pub fn faults_met(sc: &Scenario, s: usize, run: u64) -> (TerminatedBy, Vec<Met>) {
    let mut c = Collect::default();
    let m = run_one(sc, s, run, &mut c);
    let met = c
        .met
        .into_iter()
        .map(|(target, attempt, r)| {
            let rule = &sc.faults.rules[usize::from(r)];
            Met { target, attempt, fault: rule.fault.clone(), commits: rule.commits }
        })
        .collect();
    (m.terminated_by(), met)
}

/// `sc` with its fault plan replaced by exactly `schedule`.
pub fn with_schedule(sc: &Scenario, schedule: &[Met]) -> Scenario {
    let rules = schedule
        .iter()
        .map(|m| FaultRule {
            target: m.target,
            trigger: Trigger { at: Some(vec![m.attempt]), ..Trigger::default() },
            fault: m.fault.clone(),
            label: String::new(),
            fleet: false,
            transport: false,
            key: None,
            commits: m.commits,
        })
        .collect();
    // The call each kept injection asks for, under the rule's new number.
    let mut task = sc.task.clone();
    task.injected = schedule
        .iter()
        .enumerate()
        .filter_map(|(j, m)| match &m.fault {
            Fault::InjectedInstruction { tool, .. } => {
                let t = sc.task.tools.iter().position(|n| n == tool)?;
                let call = sc.task.injected.iter().find(|&&(_, c)| usize::from(sc.task.calls[c as usize].tool) == t)?.1;
                Some((j as u16, call))
            }
            _ => None,
        })
        .collect();
    Scenario { faults: FaultPlan::new(rules, sc.task.tools.len()), task, ..sc.clone() }
}

fn ends(sc: &Scenario, s: usize, run: u64, schedule: &[Met]) -> TerminatedBy {
    run_one(&with_schedule(sc, schedule), s, run, &mut ()).terminated_by()
}

/// Removes faults one at a time, keeping each removal under which the run still loops, until
/// no single fault can go. Returns the schedule and how the original run ended.
pub fn shrink(sc: &Scenario, s: usize, run: u64) -> (TerminatedBy, Vec<Met>, Vec<Met>) {
    let (ended, met) = faults_met(sc, s, run);
    if !ended.is_loop() {
        return (ended, met, Vec::new());
    }
    let mut schedule = met.clone();
    // The explicit schedule must reproduce the loop before anything is removed.
    if !ends(sc, s, run, &schedule).is_loop() {
        return (ended, met, schedule);
    }
    loop {
        let removable = (0..schedule.len()).find(|&i| {
            let mut fewer = schedule.clone();
            fewer.remove(i);
            ends(sc, s, run, &fewer).is_loop()
        });
        match removable {
            Some(i) => {
                schedule.remove(i);
            }
            None => break,
        }
    }
    (ended, met, schedule)
}

/// The schedule as `[[faults]]` tables a scenario can take.
pub fn to_toml(sc: &Scenario, schedule: &[Met]) -> String {
    let mut out = String::new();
    for m in schedule {
        let target = match m.target {
            Target::Provider => "provider".to_owned(),
            Target::Tool(t) => sc.task.tools[usize::from(t)].clone(),
            Target::AnyTool => "*".to_owned(),
        };
        out.push_str(&format!("[[faults]]\ntarget = {target:?}\nat = [{}]\n", m.attempt));
        match &m.fault {
            Fault::Http { status, retry_after_ms, param, message } => {
                out.push_str(&format!("http = {status}\n"));
                if let Some(ms) = retry_after_ms {
                    out.push_str(&format!("retry_after_s = {}\n", *ms as f64 / 1000.0));
                }
                if let Some(p) = param {
                    out.push_str(&format!("param = {p:?}\n"));
                }
                if let Some(msg) = message {
                    out.push_str(&format!("message = {msg:?}\n"));
                }
            }
            Fault::Timeout { after_ms } => out.push_str(&format!("fault = \"timeout\"\nafter_ms = {after_ms}\n")),
            Fault::LargeResponse { kb } => out.push_str(&format!("large_response = {kb}\n")),
            Fault::InjectedInstruction { text, tool } => {
                out.push_str(&format!("injected_instruction = {text:?}\ninjection_target = {tool:?}\n"))
            }
            other => out.push_str(&format!("fault = {:?}\n", other.label())),
        }
        if m.commits {
            out.push_str("commit = \"before_failure\"\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::load::load_str;
    use std::path::Path;

    #[test]
    fn shrinks_to_the_fault_that_loops() {
        // The ambiguous result loops (step cap 6); the 503s on the other tool do not matter.
        let src = r#"name = "s"
strategies = ["error-string"]
[policy]
max_steps = 6
[profile]
p_continue = 1.0
p_retry_transient = 1.0
[task]
[[task.steps]]
tool = "other"
[[task.steps]]
tool = "find"
[[faults]]
target = "other"
at = [1, 2]
http = 503
[[faults]]
target = "find"
at = [1]
fault = "ambiguous"
"#;
        let sc = load_str(src, Path::new("s.toml")).unwrap();
        let (ended, met, min) = shrink(&sc, 0, 0);
        assert!(ended.is_loop(), "{ended:?}");
        assert_eq!(met.len(), 3);
        assert_eq!(
            min,
            vec![Met {
                target: Target::Tool(1),
                attempt: 1,
                fault: Fault::Ambiguous { cursor: false },
                commits: false
            }]
        );
        assert_eq!(to_toml(&sc, &min), "[[faults]]\ntarget = \"find\"\nat = [1]\nfault = \"ambiguous\"\n");
        // The printed schedule loads and still loops.
        let again = load_str(
            &format!("{}{}", src.split("[[faults]]").next().unwrap(), to_toml(&sc, &min)),
            Path::new("t.toml"),
        )
        .unwrap();
        assert!(run_one(&again, 0, 0, &mut ()).terminated_by().is_loop());
    }
}
