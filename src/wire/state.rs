//! The mock world of one run in wire mode: the same seeded fault injector as the engine (time is
//! virtual: each model call and tool call advances it, so real timing never decides a fault),
//! the simulated model's memory, and a record of all traffic as a native trace.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::engine::faults::{Fired, Injector};
use crate::engine::model::CallHistory;
use crate::engine::rng::{LazyStream, domain, key};
use crate::engine::task::canonical_json;
use crate::fault::{ErrorClass, Fault};
use crate::scenario::Scenario;
use crate::trace::{Header, TRACE_VERSION, ToolDef, Trace};

/// The key arguments carry when the simulated model changed them (`"_fix": N`).
pub const FIX_KEY: &str = "_fix";

/// One call of the current step, as the mock model tracks it.
#[derive(Clone, Debug)]
pub struct WireSlot {
    pub call: u32,
    pub variant: u32,
    pub hist: CallHistory,
    /// The id the mock gave this call in its last response.
    pub id: String,
    pub active: bool,
}

pub struct WireState {
    pub scenario: Scenario,
    pub run: u64,
    pub injector: Injector,
    pub model_stream: LazyStream,
    pub virtual_ms: u64,
    /// Attempts and successes per target (tools, then the provider).
    pub attempts: Vec<u32>,
    pub successes: Vec<u32>,
    pub terminal: Vec<Option<u16>>,
    /// Arguments (tool, canonical) that stick to a bad-arguments fault, and partial results.
    pub bad_args: BTreeMap<(u16, String), u16>,
    pub partial: BTreeMap<(u16, String), u16>,
    /// Variants of a call the model changed without fixing (`(call, variant)`).
    pub still_bad: Vec<(u32, u32)>,
    /// What each tool call (by tool and exact arguments) last returned: its class, `None` for success.
    pub outcomes: BTreeMap<(String, String), Option<ErrorClass>>,
    pub slots: Vec<WireSlot>,
    pub next_step: usize,
    pub turns: u32,
    pub next_id: u32,
    pub ended: Option<&'static str>,
    pub trace: Trace,
    /// Seen problems for the checklist: (item, detail).
    pub findings: Vec<(u8, String)>,
    pub tool_calls: u64,
    pub model_calls: u64,
    pub faults_injected: u64,
    pub wasted_retries: u64,
    /// Last tool failure per (tool, args): its class, and whether a model turn has passed since.
    pub last_failure: BTreeMap<(String, String), (ErrorClass, bool)>,
}

impl WireState {
    pub fn new(scenario: Scenario, run: u64) -> WireState {
        let targets = scenario.task.tools.len() + 1;
        let mut injector = Injector::default();
        scenario.faults.reset(&mut injector, scenario.seed, scenario.name_hash, run, &scenario.target_hashes);
        let mut model_stream = LazyStream::default();
        model_stream.reset(key(&[scenario.seed, scenario.name_hash, run, domain::MODEL]));
        let header = Header {
            tracefault_trace: TRACE_VERSION,
            id: format!("{}/exec/run{run}", scenario.name),
            source_format: "tracefault-wire".into(),
            provider: None,
            model: Some(format!("mock:{}", scenario.profile.name)),
            tools: scenario
                .task
                .tools
                .iter()
                .map(|n| ToolDef { name: n.clone(), description: None, parameters: None })
                .collect(),
        };
        WireState {
            run,
            injector,
            model_stream,
            virtual_ms: 0,
            attempts: vec![0; targets],
            successes: vec![0; targets],
            terminal: vec![None; targets],
            bad_args: BTreeMap::new(),
            partial: BTreeMap::new(),
            still_bad: Vec::new(),
            outcomes: BTreeMap::new(),
            slots: Vec::new(),
            next_step: 0,
            turns: 0,
            next_id: 1,
            ended: None,
            trace: Trace { header, events: Vec::new() },
            findings: Vec::new(),
            tool_calls: 0,
            model_calls: 0,
            faults_injected: 0,
            wasted_retries: 0,
            last_failure: BTreeMap::new(),
            scenario,
        }
    }

    pub fn provider_target(&self) -> usize {
        self.scenario.task.tools.len()
    }

    /// Decides the fault for the next attempt on `target`, advancing virtual time.
    pub fn decide(&mut self, target: usize, latency_ms: u64) -> Option<Fired> {
        self.attempts[target] += 1;
        let a = self.attempts[target];
        let fired = self.scenario.faults.decide(&mut self.injector, target, a, self.virtual_ms, self.successes[target]);
        self.virtual_ms += latency_ms;
        fired
    }

    pub fn fault(&self, rule: u16) -> &Fault {
        &self.scenario.faults.rules[usize::from(rule)].fault
    }

    /// The task call a tool request stands for: same tool, same arguments once `_fix` is removed.
    pub fn call_for(&self, tool: &str, args: &Value) -> Option<(u32, u32)> {
        let mut plain = args.clone();
        let variant = match &mut plain {
            Value::Object(m) => m.remove(FIX_KEY).and_then(|v| v.as_u64()).unwrap_or(0) as u32,
            _ => 0,
        };
        let canon = canonical_json(&plain);
        let t = self.scenario.task.tools.iter().position(|n| n == tool)? as u16;
        self.scenario.task.calls.iter().position(|c| c.tool == t && c.args == canon).map(|i| (i as u32, variant))
    }
}
