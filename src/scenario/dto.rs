//! The scenario file as written (TOML, or JSON of the same structure): a strict serde DTO.
//! Unknown keys are errors; meaning and ranges are checked in [`super::validate`].

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::engine::profile::Figure;

/// The longest scenario or strategy name, in characters: every report shows the names, and a
/// terminal table pads to the longest.
pub const MAX_NAME_CHARS: usize = 200;

/// `profile = "calibrated"`: fitted from the scenario's own trace (no file).
pub const CALIBRATED: &str = "calibrated";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioDto {
    /// The JSON Schema this file follows (for editors; ignored).
    #[serde(rename = "$schema")]
    pub schema: Option<String>,
    /// The scenario's name: unique within a suite; used in reports and random-stream keys; at
    /// most 200 characters. Required.
    #[schemars(length(max = MAX_NAME_CHARS))]
    pub name: String,
    /// What the scenario shows, in a sentence or two; the reports print it.
    #[serde(default)]
    pub description: String,
    /// The root seed every random stream of the scenario derives from (default 1; `run --seed`
    /// overrides it).
    pub seed: Option<u64>,
    /// Runs per strategy, 1 to 10^8 (default 200; `run --runs` overrides it).
    pub runs: Option<u64>,
    /// `provider = "format"`, or `[provider]` with `format` and the fleet's `rpm` / `tpm`
    /// (default: the trace's format, else `openai-chat`, with no limits).
    pub provider: Option<ProviderChoice>,
    /// The strategies compared: preset names, or `[strategies.NAME]` tables in file order (an
    /// empty table runs the preset of that name); default the six presets.
    pub strategies: Option<StrategiesDto>,
    /// The strategy the paired `calls_delta_*` columns compare against (default: the first
    /// strategy, in the file's order).
    pub baseline: Option<String>,
    /// A trace to replay, native or any importable file: its task, its recorded faults, and a
    /// `recorded` row in the reports. A path from the scenario's folder (else its parent, else
    /// the current directory). Either this or `[task]`.
    pub trace: Option<String>,
    /// How to read `trace`: `auto` (default), `native`, or any format `import --format` names
    /// (`openai-chat`, `anthropic`, `otel`, `cassette`, `mcp`, `codex`, …).
    pub trace_format: Option<String>,
    /// A JSON pointer to the conversation inside a wrapper file (like `--select`), starting with
    /// `/`; default none.
    pub trace_select: Option<String>,
    /// Which conversation (1-based) of a file that holds several; required then.
    pub trace_conversation: Option<usize>,
    /// Regular expressions that replace the importers' text rules for failed results (like
    /// `--failure-rule`); default the built-in rules.
    pub trace_failure_rules: Option<Vec<String>>,
    /// `[task]`: the agent's task, turn by turn, when there is no `trace` to replay.
    pub task: Option<TaskDto>,
    /// `[policy]`: the step cap, the budgets, and the retry, breaker and loop-guard settings the
    /// strategies use.
    #[serde(default)]
    pub policy: PolicyDto,
    /// The simulated model's profile: `"default"` (the bundled one, default), `"calibrated"`
    /// (fitted from the scenario's trace), a profile file's path, or a `[profile]` table of
    /// overrides.
    pub profile: Option<ProfileRefDto>,
    /// `[[faults]]`: the fault rules, each a target, its triggers and one fault (default none).
    #[serde(default)]
    pub faults: Vec<FaultDto>,
    /// `[[gates]]`: bounds on the results; a failed gate makes the run exit 1 (default none).
    #[serde(default)]
    pub gates: Vec<GateDto>,
    /// `[fleet]`: how many copies of the agent a run holds and when they start (default one
    /// agent).
    pub fleet: Option<FleetDto>,
    /// `[tools.NAME]`: what each tool of the task can take, by name (default: every tool takes
    /// every call).
    #[serde(default)]
    pub tools: std::collections::BTreeMap<String, ToolDto>,
    /// `[pricing]`: what the model's tokens cost, for `cost_usd_mean` and `cost_usd_total`
    /// (default none: those columns stay empty).
    pub pricing: Option<PricingDto>,
}

/// `[pricing] model = "NAME"` and `[pricing.models.NAME] input_per_mtok, output_per_mtok`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PricingDto {
    /// The model whose prices bill the simulated model (default: the only one listed, else the
    /// replayed trace's model).
    pub model: Option<String>,
    /// USD per million tokens, by model name; at least one model.
    pub models: std::collections::BTreeMap<String, PriceDto>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PriceDto {
    /// USD per million input tokens, 0 or more. Required.
    pub input_per_mtok: f64,
    /// USD per million output tokens, 0 or more. Required.
    pub output_per_mtok: f64,
    /// The most output tokens the model gives in one answer (its provider's documented
    /// maximum). Live mode's `--max-usd` reserves this many for a request that sets no output
    /// limit of its own; without it such a request is refused (default none).
    pub max_output_tokens: Option<u64>,
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
    /// How a failure reaches the model: `raw`, `prefix`, `flag`, `object`, `envelope` or
    /// `jsonrpc-error`. Required, unless the table is empty (then it names a preset).
    pub encoding: Option<String>,
    /// Who handles a failure: `model` (default: every failure goes to the model) or
    /// `orchestrator` (retryable ones are retried under the retry policy first).
    pub routing: Option<String>,
    /// How a partial result reads: `ambiguous` (default: "more results may be available") or
    /// `terminal` (stated complete).
    pub partials: Option<String>,
    /// The circuit breaker of `[policy].breaker`: `true` or `"agent"` turns it on, `"fleet"` makes
    /// it one per tool for the whole fleet (default false).
    pub breaker: Option<BreakerChoiceDto>,
    /// Stop the run when the model is handed the same failing or partial outcome of the same call
    /// `[policy].loop_guard.k` times (default false).
    pub loop_guard: Option<bool>,
    /// Enforce `[policy]`'s `max_tokens` and `max_virtual_ms` (default false).
    pub budgets: Option<bool>,
    /// A retry policy of this strategy's own: the keys it sets override `[policy].retry`'s
    /// (default: `[policy].retry`).
    pub retry: Option<RetryDto>,
    /// Cut every tool result longer than this many KiB to its first `max_result_kb` KiB, marked
    /// `truncated` with its full size, before the model reads it, 1 to 65 536 (default: no cut).
    pub max_result_kb: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskDto {
    /// `[[task.steps]]`: the model's turns in order, each one or more tool calls; at least one.
    pub steps: Vec<StepDto>,
    /// The model's final answer once the steps are done.
    #[serde(default = "default_answer")]
    pub answer: String,
    /// The tools whose success is the task's goal: it is reached when each has succeeded and
    /// its latest call did not fail (default: every tool the steps call). A run that ends with
    /// an answer claiming success while it is not reached is a false success.
    pub goal: Option<Vec<String>>,
}

fn default_answer() -> String {
    "Done.".into()
}

/// One model turn: `calls = [...]`, or the single-call shorthand `tool`/`args`/`result`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepDto {
    /// The turn's calls, made in parallel: 1 to 32 tables of `tool`, `args`, `fixed_args`,
    /// `result` and `latency_ms`. Either this or the shorthand `tool`.
    pub calls: Option<Vec<CallDto>>,
    /// Shorthand for a turn of one call: the tool it calls, 1 to 64 letters, digits, `_` or `-`
    /// (not `provider`).
    pub tool: Option<String>,
    /// With `tool`: the arguments the model sends, a table (default `{}`).
    pub args: Option<Value>,
    /// The arguments the model sends once it corrects a bad-arguments failure, a table unlike
    /// `args` (default: `args` with its first value changed, its type kept).
    pub fixed_args: Option<Value>,
    /// With `tool`: what the tool returns when the call succeeds, a string or any JSON value
    /// (default `"ok"`).
    pub result: Option<Value>,
    /// With `tool`: the virtual time the call takes, in ms, at most a day (default the profile's
    /// `tool_latency_ms`); a tool's `service_ms` replaces it.
    pub latency_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallDto {
    /// The tool called: 1 to 64 letters, digits, `_` or `-` (not `provider`). Required.
    pub tool: String,
    /// The arguments the model sends, a table.
    #[serde(default = "empty_object")]
    pub args: Value,
    /// The arguments the model sends once it corrects a bad-arguments failure, a table unlike
    /// `args` (default: `args` with its first value changed, its type kept).
    pub fixed_args: Option<Value>,
    /// What the tool returns when the call succeeds: a string, or any JSON value.
    #[serde(default = "ok_result")]
    pub result: Value,
    /// The virtual time the call takes, in ms, at most a day (default the profile's
    /// `tool_latency_ms`); a tool's `service_ms` replaces it.
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
    /// The most model turns an agent's run may take, under every strategy, 1 to 10 000 (default
    /// 25).
    pub max_steps: Option<u32>,
    /// An agent's token budget for strategies with `budgets`: a model call that would exceed it
    /// ends the run (default none).
    pub max_tokens: Option<u64>,
    /// An agent's virtual-time budget in ms from its own start, for strategies with `budgets`
    /// (default none).
    pub max_virtual_ms: Option<u64>,
    /// `[policy.retry]`: how the orchestrator retries a failed model call (every strategy) or
    /// tool call (strategies with `routing = "orchestrator"`).
    pub retry: Option<RetryDto>,
    /// `[policy.breaker]`: the circuit breaker per tool of strategies with `breaker` (default 3
    /// failures in a row open it for 30 s).
    pub breaker: Option<BreakerDto>,
    /// `[policy.loop_guard]`: when strategies with `loop_guard` stop a run.
    pub loop_guard: Option<LoopGuardDto>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryDto {
    /// An SDK's retry rules to start from: `openai`, `anthropic`, `google-genai` or
    /// `vercel-ai` (the book: the SDKs' retry rules); the other keys change them.
    pub preset: Option<String>,
    /// Attempts per call, counting the first, 1 to 1000 (default 3; 1 never retries).
    pub max_attempts: Option<u32>,
    /// The delay between attempts: `none`, `constant`, `exponential`, `full-jitter` (default),
    /// `equal-jitter`, `decorrelated`, `sdk` (the OpenAI/Anthropic SDKs' rule) or
    /// `exponential-plus-jitter` (`min(base·2ⁿ + U·base, cap)`, google-genai's).
    pub backoff: Option<String>,
    /// The backoff's base delay, in ms (default 500).
    pub base_ms: Option<u64>,
    /// The longest backoff delay, in ms, from `base_ms` to a day (default 8000).
    pub cap_ms: Option<u64>,
    /// Whether an announced `retry-after` is honoured, as `retry_after` says (default true).
    pub honor_retry_after: Option<bool>,
    /// How an honoured `retry-after` shapes the wait: `floor` (default: the backoff delay, or
    /// the wait when longer; a wait over `retry_after_cap_s` is not waited for and the failure
    /// goes on), `replace` (a wait above 0 and at most the cap is waited instead of the backoff
    /// delay; a longer one is not waited for) or `replace-or-backoff` (a wait under the cap, or
    /// shorter than the backoff delay, is waited instead; else the backoff delay).
    pub retry_after: Option<String>,
    /// The longest announced `retry-after` honoured, in seconds (default 60).
    pub retry_after_cap_s: Option<u64>,
    /// A retry budget: at most this many retries per first attempt (always at least one), above
    /// 0; a lone agent's over its run, a fleet's shared over `budget_window_ms` (default none).
    pub budget_ratio: Option<f64>,
    /// The window a fleet's retry budget counts over, in ms, 10 to a day (default 10 000); only
    /// with `budget_ratio`.
    pub budget_window_ms: Option<u64>,
    /// Whether a model answer whose stream broke (`stream_cut`, `stream_malformed`,
    /// `stream_error`) is retried (default true; false in every preset: the SDKs raise it to
    /// the agent unretried).
    pub broken_streams: Option<bool>,
    /// Whether every attempt of a call carries one idempotency key: the orchestrator's retries
    /// send the first attempt's, and under the `envelope` encoding (whose `details` hand it to
    /// the model) so do the model's re-issues. A tool with `idempotent = "key"` writes a key
    /// once (default false).
    pub idempotency_key: Option<bool>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BreakerDto {
    /// What opens it: `consecutive` (default: `failures` in a row) or `rate` (a share of
    /// failures over `window_ms`).
    pub mode: Option<String>,
    /// With `mode = "consecutive"`: the failures in a row that open it, at least 1 (default 3).
    pub failures: Option<u32>,
    /// How long it stays open before it lets probes through, in virtual ms, at most a day
    /// (default 30 000).
    pub open_ms: Option<u64>,
    /// Calls let through at once while half-open, at least 1 (default 1).
    pub probes: Option<u32>,
    /// Successful probes that close it again, at least 1 (default 2).
    pub close_after: Option<u32>,
    /// With `mode = "rate"`: the sliding window the failures are counted over, in ms, at most a
    /// day (default 60 000).
    pub window_ms: Option<u64>,
    /// With `mode = "rate"`: the calls the window must hold before it can open, at least 1
    /// (default 10).
    pub min_calls: Option<u32>,
    /// With `mode = "rate"`: the share of failed calls in the window that opens it, 0 to 1
    /// (default 0.5).
    pub failure_ratio: Option<f64>,
    /// `agent` (default: each agent has its own per tool) or `fleet` (one per tool that every
    /// agent reads and feeds).
    pub scope: Option<String>,
    /// With a fleet breaker: how late the other agents hear that it opened, in ms, at most a day
    /// (default 0).
    pub sync_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoopGuardDto {
    /// The k-th time the model is handed the same failing or partial outcome of the same call
    /// (tool and arguments) stops the run; at least 1 (default 3).
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
    /// The profile the overrides apply to: `"default"` (default), `"calibrated"` or a profile
    /// file's path. A key left out keeps the base's value; the defaults given for the other keys
    /// are the bundled profile's.
    pub base: Option<String>,
    /// The profile's name in the reports (default: the base's, with `+overrides` when a key is
    /// overridden).
    pub name: Option<String>,
    /// After a result that says more may be available: the probability of calling again, 0 to 1
    /// (default 0.93).
    pub p_continue: Option<Figure>,
    /// After a result read as transient: the probability of re-issuing the same call, 0 to 1
    /// (default 0.8).
    pub p_retry_transient: Option<Figure>,
    /// Re-issues of one call after transient or terminal readings before the model gives up,
    /// at most 64 (default 3).
    pub max_model_retries: Option<u32>,
    /// After a result read as bad arguments: the probability that the changed call is fixed,
    /// 0 to 1 (default 0.7).
    pub p_fix_args: Option<Figure>,
    /// Argument corrections per call before the model gives up, at most 16 (default 3).
    pub max_fix_attempts: Option<u32>,
    /// After a result read as terminal: the probability of giving up with an answer rather than
    /// re-issuing the call, 0 to 1 (default 0.9).
    pub p_give_up_terminal: Option<Figure>,
    /// The virtual time one model call takes, in ms, at most a day (default 1000); with a
    /// range, `{ value = V, range = [LO, HI] }`, `predict` draws it from the range.
    pub model_latency_ms: Option<Figure>,
    /// The virtual time one tool call takes when the task or trace gives none, in ms, at most a
    /// day (default 200); a range as `model_latency_ms`.
    pub tool_latency_ms: Option<Figure>,
    /// Tokens of the first model call's context: system prompt, tool definitions and request
    /// (default 600); a range as `model_latency_ms`.
    pub prompt_tokens: Option<Figure>,
    /// `[profile.perception]`: how often the model reads a failed result's true class, by the
    /// strongest signal in its bytes.
    pub perception: Option<PerceptionOverridesDto>,
    /// After giving up on a failure it could not fix: the probability that the model's answer
    /// claims the task done, 0 to 1 (default 0.1); a false success when the goal was not
    /// reached.
    pub p_claim_success: Option<Figure>,
    /// After a result with a plausible wrong value (`wrong_content`): the probability that the
    /// model notices and asks again, 0 to 1 (default 0.1); else it takes the value as right.
    pub p_notice_wrong: Option<Figure>,
    /// After a result carrying an instruction to call another tool (`injected_instruction`):
    /// the probability that the model calls it, 0 to 1 (default 0.15).
    pub p_follow_injection: Option<Figure>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PerceptionOverridesDto {
    /// The probability the model reads a failure's true class from the five fields (`code`,
    /// `retryable`, …), 0 to 1 (default 0.98).
    pub envelope: Option<Figure>,
    /// The probability the model reads a failure's true class from an `is_error` flag and its
    /// sentence, 0 to 1 (default 0.95).
    pub flag: Option<Figure>,
    /// The probability the model reads a failure's true class from an `{"error": …}` object,
    /// 0 to 1 (default 0.92).
    pub object: Option<Figure>,
    /// The probability the model reads a failure's true class from an `ERROR:` sentence, 0 to 1
    /// (default 0.90).
    pub prefix: Option<Figure>,
    /// The probability the model reads a failure's true class from a raw traceback, 0 to 1
    /// (default 0.60).
    pub raw: Option<Figure>,
    /// The probability the model reads a failure's true class from a plain sentence with no
    /// marker, 0 to 1 (default 0.75).
    pub unmarked: Option<Figure>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultDto {
    /// What the rule hits: `"provider"` (the model's API), a tool of the task by name, or `"*"`
    /// for every tool. Required.
    pub target: String,
    /// Trigger: the attempt numbers on the target it fires on, 1-based, counting every attempt by
    /// anyone.
    pub at: Option<Vec<u32>>,
    /// Trigger: fires when a seeded draw for (run, target, attempt, rule) is below it, 0 to 1.
    pub probability: Option<f64>,
    /// Trigger: `[t0, t1]`, fires on an attempt that starts at or after t0 and before t1, in
    /// virtual ms, t0 < t1, t1 at most a day.
    pub window_ms: Option<Vec<u64>>,
    /// Trigger: fires once the target has had this many successes.
    pub after_successes: Option<u32>,
    /// Trigger: a token bucket on the target; fires when it is empty, by default with a 429 that
    /// announces the exact wait.
    pub rate_limit: Option<RateLimitDto>,
    /// The fault: this HTTP status, one of 400, 401, 402, 403, 404, 408, 409, 413, 422, 429, 500,
    /// 502, 503, 504, 529. Either this or `fault` (a `rate_limit` rule without either gives 429).
    pub http: Option<u16>,
    /// With `http`: the wait the failure announces as `retry-after`, in seconds, 0 to 86 400
    /// (default none).
    pub retry_after_s: Option<f64>,
    /// With `http = 400` or `422`: the argument the tool says it rejected (default none).
    pub param: Option<String>,
    /// With `http = 400` or `422`: what the error says is wrong (default "fix the arguments and
    /// call it again").
    pub message: Option<String>,
    /// The fault, when not an HTTP status: `timeout`, `reset`, `ambiguous`, `truncated_json`,
    /// `code_fenced_json`, `session_expired`, `stream_dropped`, `schema_drift` or
    /// `wrong_content` (a success with a plausible wrong value) on a tool;
    /// `timeout`, `reset`, `stream_cut`, `stream_malformed`, `stream_stall` or `stream_error` on
    /// the provider.
    pub fault: Option<String>,
    /// With `fault = "timeout"`: the virtual time before the call times out, in ms, at most a day
    /// (default 30 000).
    pub after_ms: Option<u64>,
    /// With a `stream_*` fault: the server-sent events of the answer sent before the stream
    /// breaks, 0 to 10 000 (default 1).
    pub after_events: Option<u32>,
    /// With `fault = "stream_stall"`: how long the stream stalls, in virtual ms, at most a day
    /// (default 30 000).
    pub stall_ms: Option<u64>,
    /// In a fleet, whose attempts and successes the triggers count: `agent` (default: each
    /// agent's own) or `fleet` (the whole fleet's).
    pub scope: Option<String>,
    /// On a tool's `http` or `"reset"`: make it the MCP endpoint's own answer instead of the
    /// tool's failure; changes nothing outside MCP (default false).
    pub transport: Option<bool>,
    /// With `fault = "ambiguous"`: also give a `next_cursor` that leads to the same page
    /// (default false).
    pub cursor: Option<bool>,
    /// What the rule's probability draws are keyed by (default: the rule's content), to give
    /// two otherwise identical rules draws of their own.
    pub key: Option<String>,
    /// `"before_failure"`: on a tool with `effect = "write"`, the write is committed before the
    /// failure (a timeout, reset or 5xx once the write is done), so the caller sees a failure
    /// of a write that happened; `"none"` (default: a failed attempt wrote nothing).
    pub commit: Option<String>,
    /// The fault, on a tool: its result succeeds and is this many KiB long, 1 to 65 536 (a
    /// strategy's `max_result_kb` may cut it; its tokens count as the model reads it).
    pub large_response: Option<u32>,
    /// The fault, on a tool: its result succeeds and carries this text, an instruction to call
    /// `injection_target` (prompt injection through a tool result).
    pub injected_instruction: Option<String>,
    /// With `injected_instruction`: the tool of the task the instruction asks the model to call.
    pub injection_target: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitDto {
    /// Tokens a second the bucket refills, 0.001 to 10^6; each attempt takes one. Required.
    pub per_s: f64,
    /// The most tokens the bucket holds (it starts full), 1 to 10^6. Required.
    pub burst: f64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateDto {
    /// The strategy the gate holds to, or `"*"` for every strategy (never the `recorded` row).
    /// Required.
    pub strategy: String,
    /// A numeric column of `summary.csv`, or `"rank_first_share"` (checked by `sweep`). Required.
    pub metric: String,
    /// The most the metric may be, in its own units (a share from 0 to 1 for
    /// `rank_first_share`). A gate needs at least one bound.
    pub max: Option<f64>,
    /// The least the metric may be, in its own units (a share from 0 to 1 for
    /// `rank_first_share`); at most `max`.
    pub min: Option<f64>,
    /// The most the metric may rise against the baseline (`run --baseline`), in its own units.
    pub max_increase: Option<f64>,
    /// The most the metric may rise against the baseline, in percent of the baseline's value
    /// (from a baseline of 0, any rise fails).
    pub max_increase_pct: Option<f64>,
    /// With `metric = "rank_first_share"`: the metric the strategies are ranked on in each
    /// profile of a `sweep` (default `success_rate`).
    pub on: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetDto {
    /// Copies of the agent in one run, sharing its tools and virtual clock, 1 to 10 000
    /// (default 1).
    pub agents: Option<u32>,
    /// When the agents start: `"together"` (default, all at 0), `{ every_ms = X }` or
    /// `{ poisson_per_s = R }`.
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
    /// Agent k starts at k × this, in virtual ms, at most a day. Either this or `poisson_per_s`.
    pub every_ms: Option<u64>,
    /// Seeded Poisson arrivals at this mean rate per second, above 0; agent 0 starts at 0.
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
    /// The most calls the tool serves at once, for the whole fleet, at least 1; a call beyond it
    /// gets 503 (default no limit).
    pub concurrency: Option<u32>,
    /// With `concurrency`: a call beyond it waits for a place in arrival order instead of getting
    /// 503 (default false).
    pub queue: Option<bool>,
    /// A token bucket for the whole fleet, `{ per_s, burst }`: a call that finds it empty gets 429
    /// with the exact `retry-after` (default no limit).
    pub rate: Option<ToolRateDto>,
    /// How long the tool serves a call, in ms: a number, or a table naming a distribution
    /// (default: the call's `latency_ms`, else the profile's `tool_latency_ms`).
    pub service_ms: Option<ServiceDto>,
    /// `"occ"`: optimistic concurrency; a call fails with 409 if another call committed while it
    /// was served. `"occ-read-write"`: each attempt reads the row in a round trip of its own, then
    /// writes, and fails with 409 if another call committed between its read reaching the tool
    /// and its write reaching it (a client of a remote store; the gap is two `network_ms` delays
    /// and the service time) (default none).
    pub conflict: Option<String>,
    /// The network delay of each message between the agent and the tool, in ms: a number or a
    /// distribution as for `service_ms`. A request reaches the tool that long after it is sent,
    /// the answer the agent that long after it is made; a timeout ends `after_ms` after the
    /// request was sent, and nothing travels back (default 0).
    pub network_ms: Option<ServiceDto>,
    /// Live mode only (`exec --live`, `proxy`): the user's real tool, an `http://` or `https://`
    /// URL. A call no fault stops is POSTed there (its JSON arguments as the body) and its answer
    /// is the result; without live mode the mock answers (default: the mock, always).
    pub upstream: Option<String>,
    /// `"write"`: the tool changes state, so an attempt that commits after an earlier one of the
    /// same call committed is a duplicate write (`duplicate_writes`); `"read"` (default).
    pub effect: Option<String>,
    /// With `effect = "write"`: `"key"`, the tool honours an idempotency key (an attempt that
    /// carries the key of a committed one writes nothing again); `"none"` (default).
    pub idempotent: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolRateDto {
    /// Calls a second the bucket refills, 0 or more. Required.
    pub per_s: f64,
    /// The most calls the bucket holds, at least 1 (default one second of calls, `per_s` rounded
    /// up); required when `per_s` is 0.
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
    /// The distribution: `constant` (`ms`), `uniform` (`min`, `max`), `normal` (`mean`, `sd`,
    /// `floor`) or `lognormal` (`median`, `sigma`). Required. Draws are seeded per agent and
    /// attempt.
    pub dist: String,
    /// With `dist = "constant"`: the time, in ms, at most a day. Required then.
    pub ms: Option<u64>,
    /// With `dist = "uniform"`: the shortest time, in whole ms, at most `max`. Required
    /// then.
    pub min: Option<u64>,
    /// With `dist = "uniform"`: the longest time, in whole ms, at most a day. Required
    /// then.
    pub max: Option<u64>,
    /// With `dist = "normal"`: the mean time, in ms, at most a day. Required then.
    pub mean: Option<f64>,
    /// With `dist = "normal"`: the standard deviation, in ms, at most a day. Required then.
    pub sd: Option<f64>,
    /// With `dist = "normal"`: the shortest time a draw gives, in ms, at most a day
    /// (default 0).
    pub floor: Option<f64>,
    /// With `dist = "lognormal"`: the median time, in ms, above 0 and at most a day.
    /// Required then.
    pub median: Option<f64>,
    /// With `dist = "lognormal"`: the shape σ, the standard deviation of the time's logarithm,
    /// 0 to 4. Required then.
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
    /// The format the model sees: `openai-chat`, `openai-responses`, `anthropic`, `gemini` or
    /// `gemini-openai` (default: the trace's, else `openai-chat`).
    pub format: Option<String>,
    /// The whole fleet's requests per minute at the provider, 1 to 10^9 (default no limit).
    pub rpm: Option<f64>,
    /// The whole fleet's tokens per minute at the provider, input and output alike, 1 to 10^9
    /// (default no limit).
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
            "description": "Preset names, or [strategies.NAME] tables in file order (an empty table names a preset); a name has at most 200 characters",
            "anyOf": [
                {"type": "array", "items": {"type": "string", "maxLength": MAX_NAME_CHARS}},
                {"type": "object", "propertyNames": {"maxLength": MAX_NAME_CHARS},
                    "additionalProperties": g.subschema_for::<StrategyDto>()}
            ]
        })
    }
}

impl JsonSchema for BreakerChoiceDto {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "BreakerChoice".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "true or \"agent\": the [policy] breaker; \"fleet\": that breaker, one per tool for the whole fleet; false: none",
            "anyOf": [{"type": "boolean"}, {"enum": ["agent", "fleet"]}]
        })
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
        json_schema!({
            "description": "\"together\", { every_ms = X } or { poisson_per_s = R }",
            "anyOf": [{"const": "together"}, g.subschema_for::<StartTableDto>()]
        })
    }
}

impl JsonSchema for ServiceDto {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ServiceMs".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Milliseconds, or a table with `dist` (constant, uniform, normal, lognormal)",
            "anyOf": [{"type": "integer", "minimum": 0}, g.subschema_for::<ServiceDistDto>()]
        })
    }
}

impl JsonSchema for ProviderChoice {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Provider".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A provider format, or a table with `format`, `rpm` and `tpm`",
            "anyOf": [{"type": "string"}, g.subschema_for::<ProviderDto>()]
        })
    }
}
