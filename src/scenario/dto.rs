//! The scenario file as written (TOML, or JSON of the same structure): a strict serde DTO.
//! Unknown keys are errors; meaning and ranges are checked in [`super::validate`].

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::engine::profile::Figure;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioDto {
    /// The JSON Schema this file follows (for editors; ignored).
    #[serde(rename = "$schema")]
    pub schema: Option<String>,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub seed: Option<u64>,
    pub runs: Option<u64>,
    /// `provider = "format"`, or `[provider]` with `format` and the fleet's `rpm` / `tpm`.
    pub provider: Option<ProviderChoice>,
    pub strategies: Option<StrategiesDto>,
    pub baseline: Option<String>,
    pub trace: Option<String>,
    pub trace_format: Option<String>,
    /// A JSON pointer to the conversation inside a wrapper file (like `--select`).
    pub trace_select: Option<String>,
    /// Which conversation (1-based) of a file that holds several.
    pub trace_conversation: Option<usize>,
    /// Regular expressions that replace the importers' text rules for failed results.
    pub trace_failure_rules: Option<Vec<String>>,
    pub task: Option<TaskDto>,
    #[serde(default)]
    pub policy: PolicyDto,
    pub profile: Option<ProfileRefDto>,
    #[serde(default)]
    pub faults: Vec<FaultDto>,
    #[serde(default)]
    pub gates: Vec<GateDto>,
    pub fleet: Option<FleetDto>,
    /// `[tools.NAME]`: what each tool can take, by name.
    #[serde(default)]
    pub tools: std::collections::BTreeMap<String, ToolDto>,
    /// `[pricing]`: what the model's tokens cost, for `cost_usd_mean` and `cost_usd_total`.
    pub pricing: Option<PricingDto>,
}

/// `[pricing] model = "NAME"` and `[pricing.models.NAME] input_per_mtok, output_per_mtok`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PricingDto {
    /// The model whose prices bill the simulated model (default: the only one listed, else the
    /// replayed trace's model).
    pub model: Option<String>,
    /// USD per million tokens, by model name.
    pub models: std::collections::BTreeMap<String, PriceDto>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PriceDto {
    /// USD per million input tokens.
    pub input_per_mtok: f64,
    /// USD per million output tokens.
    pub output_per_mtok: f64,
}

/// `strategies = ["preset", …]`, or `[strategies.NAME]` tables in file order (an empty table
/// naming a preset runs that preset). TOML cannot hold both forms in one file.
#[derive(Debug)]
pub enum StrategiesDto {
    Names(Vec<String>),
    Defined(Vec<(String, StrategyDto)>),
}

impl<'de> Deserialize<'de> for StrategiesDto {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrategiesDto;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of strategy names or a table of [strategies.NAME] definitions")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut names = Vec::new();
                while let Some(n) = seq.next_element::<String>()? {
                    names.push(n);
                }
                Ok(StrategiesDto::Names(names))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut defs = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, StrategyDto>()? {
                    defs.push((k, v));
                }
                Ok(StrategiesDto::Defined(defs))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StrategyDto {
    pub encoding: Option<String>,
    pub routing: Option<String>,
    pub partials: Option<String>,
    pub breaker: Option<BreakerChoiceDto>,
    pub loop_guard: Option<bool>,
    pub budgets: Option<bool>,
    pub retry: Option<RetryDto>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskDto {
    pub steps: Vec<StepDto>,
    #[serde(default = "default_answer")]
    pub answer: String,
}

fn default_answer() -> String {
    "Done.".into()
}

/// One model turn: `calls = [...]`, or the single-call shorthand `tool`/`args`/`result`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepDto {
    pub calls: Option<Vec<CallDto>>,
    pub tool: Option<String>,
    pub args: Option<Value>,
    /// The arguments the model sends once it corrects a bad-arguments failure.
    pub fixed_args: Option<Value>,
    pub result: Option<Value>,
    pub latency_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallDto {
    pub tool: String,
    #[serde(default = "empty_object")]
    pub args: Value,
    pub fixed_args: Option<Value>,
    #[serde(default = "ok_result")]
    pub result: Value,
    pub latency_ms: Option<u64>,
}

pub fn empty_object() -> Value {
    Value::Object(Default::default())
}

pub fn ok_result() -> Value {
    Value::String("ok".into())
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyDto {
    pub max_steps: Option<u32>,
    pub max_tokens: Option<u64>,
    pub max_virtual_ms: Option<u64>,
    pub retry: Option<RetryDto>,
    pub breaker: Option<BreakerDto>,
    pub loop_guard: Option<LoopGuardDto>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryDto {
    pub max_attempts: Option<u32>,
    pub backoff: Option<String>,
    pub base_ms: Option<u64>,
    pub cap_ms: Option<u64>,
    pub honor_retry_after: Option<bool>,
    pub retry_after_cap_s: Option<u64>,
    pub budget_ratio: Option<f64>,
    pub budget_window_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BreakerDto {
    pub mode: Option<String>,
    pub failures: Option<u32>,
    pub open_ms: Option<u64>,
    pub probes: Option<u32>,
    pub close_after: Option<u32>,
    pub window_ms: Option<u64>,
    pub min_calls: Option<u32>,
    pub failure_ratio: Option<f64>,
    pub scope: Option<String>,
    pub sync_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoopGuardDto {
    pub k: Option<u32>,
}

/// `profile = "path.toml"` (or `"default"`, `"calibrated"`) or a `[profile]` table of
/// overrides on a `base`. Read by hand rather than `untagged`, so an error inside the table
/// names its key.
#[derive(Debug)]
pub enum ProfileRefDto {
    Path(String),
    Overrides(Box<ProfileOverridesDto>),
}

impl<'de> Deserialize<'de> for ProfileRefDto {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ProfileRefDto;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a profile name or path (\"default\", \"calibrated\", \"file.toml\") or a [profile] table")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(ProfileRefDto::Path(s.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let o = ProfileOverridesDto::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(ProfileRefDto::Overrides(Box::new(o)))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileOverridesDto {
    pub base: Option<String>,
    pub name: Option<String>,
    pub p_continue: Option<Figure>,
    pub p_retry_transient: Option<Figure>,
    pub max_model_retries: Option<u32>,
    pub p_fix_args: Option<Figure>,
    pub max_fix_attempts: Option<u32>,
    pub p_give_up_terminal: Option<Figure>,
    pub model_latency_ms: Option<u64>,
    pub tool_latency_ms: Option<u64>,
    pub prompt_tokens: Option<u32>,
    pub perception: Option<PerceptionOverridesDto>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PerceptionOverridesDto {
    pub envelope: Option<Figure>,
    pub flag: Option<Figure>,
    pub object: Option<Figure>,
    pub prefix: Option<Figure>,
    pub raw: Option<Figure>,
    pub unmarked: Option<Figure>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultDto {
    pub target: String,
    pub at: Option<Vec<u32>>,
    pub probability: Option<f64>,
    pub window_ms: Option<Vec<u64>>,
    pub after_successes: Option<u32>,
    pub rate_limit: Option<RateLimitDto>,
    pub http: Option<u16>,
    pub retry_after_s: Option<f64>,
    pub param: Option<String>,
    pub message: Option<String>,
    pub fault: Option<String>,
    pub after_ms: Option<u64>,
    pub scope: Option<String>,
    pub transport: Option<bool>,
    pub cursor: Option<bool>,
    /// What the rule's probability draws are keyed by (default: the rule's content), to give
    /// two otherwise identical rules draws of their own.
    pub key: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitDto {
    pub per_s: f64,
    pub burst: f64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateDto {
    pub strategy: String,
    pub metric: String,
    pub max: Option<f64>,
    pub min: Option<f64>,
    /// The most the metric may rise against the baseline (`run --baseline`), in its own units.
    pub max_increase: Option<f64>,
    /// The most the metric may rise against the baseline, in percent of the baseline's value.
    pub max_increase_pct: Option<f64>,
    /// With `metric = "rank_first_share"`: the metric the strategies are ranked on in each
    /// profile of a `sweep` (default `success_rate`).
    pub on: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetDto {
    pub agents: Option<u32>,
    pub start: Option<StartDto>,
}

/// `start = "together"` or `{ every_ms = X }` / `{ poisson_per_s = R }`.
#[derive(Debug)]
pub enum StartDto {
    Named(String),
    Table(StartTableDto),
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartTableDto {
    pub every_ms: Option<u64>,
    pub poisson_per_s: Option<f64>,
}

impl<'de> Deserialize<'de> for StartDto {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StartDto;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"together\", { every_ms = X } or { poisson_per_s = R }")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(StartDto::Named(s.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                StartTableDto::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(StartDto::Table)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolDto {
    pub concurrency: Option<u32>,
    pub queue: Option<bool>,
    pub rate: Option<ToolRateDto>,
    pub service_ms: Option<ServiceDto>,
    pub conflict: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolRateDto {
    pub per_s: f64,
    pub burst: Option<u32>,
}

/// `service_ms = 10` or a table naming a distribution: `{ dist = "normal", mean = 10, sd = 2 }`.
#[derive(Debug)]
pub enum ServiceDto {
    Constant(u64),
    Dist(ServiceDistDto),
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServiceDistDto {
    pub dist: String,
    pub ms: Option<u64>,
    pub min: Option<u64>,
    pub max: Option<u64>,
    pub mean: Option<f64>,
    pub sd: Option<f64>,
    pub floor: Option<f64>,
    pub median: Option<f64>,
    pub sigma: Option<f64>,
}

impl<'de> Deserialize<'de> for ServiceDto {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ServiceDto;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("milliseconds, or a table with `dist` (constant, uniform, normal, lognormal)")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(ServiceDto::Constant(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
                u64::try_from(v).map(ServiceDto::Constant).map_err(|_| E::custom(format!("milliseconds, got {v}")))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                ServiceDistDto::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(ServiceDto::Dist)
            }
        }
        d.deserialize_any(V)
    }
}

/// A strategy's `breaker = true | false | "agent" | "fleet"`.
#[derive(Debug, Clone, PartialEq)]
pub enum BreakerChoiceDto {
    On(bool),
    Scope(String),
}

impl<'de> Deserialize<'de> for BreakerChoiceDto {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BreakerChoiceDto;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("true, false, \"agent\" or \"fleet\"")
            }
            fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Self::Value, E> {
                Ok(BreakerChoiceDto::On(b))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(BreakerChoiceDto::Scope(s.to_owned()))
            }
        }
        d.deserialize_any(V)
    }
}

/// `provider = "openai-chat"`, or a table: `[provider] format = "anthropic", rpm = 50, tpm = 40000`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderDto {
    pub format: Option<String>,
    pub rpm: Option<f64>,
    pub tpm: Option<f64>,
    /// Accepted only to be refused with a clear message: conflicts are a tool's.
    pub conflict: Option<String>,
}

impl<'de> Deserialize<'de> for ProviderChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ProviderChoice;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a provider format, or a table with `format`, `rpm` and `tpm`")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(ProviderChoice(ProviderDto { format: Some(s.to_owned()), ..ProviderDto::default() }))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                ProviderDto::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(ProviderChoice)
            }
        }
        d.deserialize_any(V)
    }
}

/// Either form of `provider`, read into the table form.
#[derive(Debug)]
pub struct ProviderChoice(pub ProviderDto);

// The forms read by hand above, described for editors (`schema/scenario.schema.json`).

impl JsonSchema for StrategiesDto {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Strategies".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Preset names, or [strategies.NAME] tables in file order (an empty table names a preset)",
            "anyOf": [
                {"type": "array", "items": {"type": "string"}},
                {"type": "object", "additionalProperties": g.subschema_for::<StrategyDto>()}
            ]
        })
    }
}

impl JsonSchema for BreakerChoiceDto {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "BreakerChoice".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"anyOf": [{"type": "boolean"}, {"enum": ["agent", "fleet"]}]})
    }
}

impl JsonSchema for ProfileRefDto {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ProfileRef".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "\"default\", \"calibrated\", a profile file, or a [profile] table of overrides",
            "anyOf": [{"type": "string"}, g.subschema_for::<ProfileOverridesDto>()]
        })
    }
}

impl JsonSchema for StartDto {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Start".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        json_schema!({"anyOf": [{"const": "together"}, g.subschema_for::<StartTableDto>()]})
    }
}

impl JsonSchema for ServiceDto {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ServiceMs".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        json_schema!({"anyOf": [{"type": "integer", "minimum": 0}, g.subschema_for::<ServiceDistDto>()]})
    }
}

impl JsonSchema for ProviderChoice {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Provider".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        json_schema!({"anyOf": [{"type": "string"}, g.subschema_for::<ProviderDto>()]})
    }
}
