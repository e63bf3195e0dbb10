//! The native trace: JSONL, a header line then events (the book: trace format). Schema:
//! `schema/trace.schema.json`, version [`TRACE_VERSION`].

pub mod compile;
pub mod import;
pub mod inspect;
pub mod record;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
pub use crate::exchange::{Args, ToolDef};

pub const TRACE_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub tracefault_trace: u32,
    pub id: String,
    pub source_format: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default)]
    pub tools: Vec<ToolDef>,
    /// Which agent of a simulated fleet the trace is (absent for a lone agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<u32>,
    /// What an importer could not read from the source and left out (only with `--lenient`;
    /// without it such a source is refused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<String>,
}

impl Header {
    /// A header that declares no tools yet.
    pub fn new(
        id: String,
        source_format: impl Into<String>,
        provider: Option<String>,
        model: Option<String>,
    ) -> Header {
        Header {
            tracefault_trace: TRACE_VERSION,
            id,
            source_format: source_format.into(),
            provider,
            model,
            tools: Vec::new(),
            agent: None,
            gaps: Vec::new(),
        }
    }

    /// The header of a trace tracefault records for a scenario's run.
    pub fn for_scenario(
        sc: &crate::engine::Scenario,
        id: String,
        source_format: &str,
        provider: Option<String>,
        model: String,
    ) -> Header {
        let tools = sc.task.tools.iter().map(|n| ToolDef { name: n.clone(), description: None, parameters: None });
        Header { tools: tools.collect(), ..Header::new(id, source_format, provider, Some(model)) }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    ToolCalls,
    End,
    Error,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinalOutcome {
    Answer,
    GaveUp,
    /// Stopped by a limit: a step, turn, cost or context cap.
    CutOff,
    /// Stopped by the user: an interruption, or a tool use the user rejected.
    Interrupted,
    /// Stopped by an error the agent could not go on from (an API error, a crashed run).
    Error,
}

impl FinalOutcome {
    pub fn name(self) -> &'static str {
        match self {
            FinalOutcome::Answer => "answer",
            FinalOutcome::GaveUp => "gave_up",
            FinalOutcome::CutOff => "cut_off",
            FinalOutcome::Interrupted => "interrupted",
            FinalOutcome::Error => "error",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum TraceEvent {
    ModelCall {
        turn: u32,
        status: u16,
        tokens_in: u64,
        tokens_out: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        latency_ms: Option<u64>,
        /// When the call was sent, in the run's virtual milliseconds (simulated runs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        t_ms: Option<u64>,
        stop: Stop,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    ToolCall {
        turn: u32,
        call_id: String,
        name: String,
        args: Args,
    },
    ToolResult {
        call_id: String,
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_class: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        latency_ms: Option<u64>,
        /// Attempts behind this one result (orchestrator retries included), when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempts: Option<u32>,
        /// Why an importer judged the result a failure (or partial), and its class.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evidence: Option<String>,
        /// The call never ran: the agent cancelled it (a parallel sibling failed first). Not a
        /// failure of the call; `ok` is false and `error_class` absent.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cancelled: bool,
        /// When each attempt behind the result reached the tool, in virtual milliseconds
        /// (simulated runs); attempts an open breaker answered are not among them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attempt_ms: Vec<u64>,
    },
    Final {
        text: String,
        outcome: FinalOutcome,
        /// The source's own word for how the run ended (`submitted`, `max_steps`,
        /// `error_max_turns`, …), when it records one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The source's own verdict on the task (tau2's reward, an eval's score), when it
        /// records one: an answer judged wrong is not a success.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        success: Option<bool>,
        /// When the agent started and ended, in virtual milliseconds (simulated runs): a
        /// fleet's `makespan_ms` is the latest end.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        started_ms: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        t_ms: Option<u64>,
        /// Attempts that reached a tool for calls still waiting for their result when the run
        /// ended (a budget cut it): counted in the run's `tool_calls`, in no result.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        in_flight_attempts: Option<u32>,
    },
    /// A breaker opened (simulated runs): on `tool`, at `t_ms`, for the agent whose trace holds
    /// it (a fleet breaker's trip is in the trace of the agent that tripped it).
    Breaker {
        tool: String,
        t_ms: u64,
    },
    /// The model's reading of one result that was not plainly a success, and what it did about
    /// the call: the signal the result carried (`envelope`, `flag`, `object`, `prefix`, `raw`,
    /// `unmarked`), what the result was (its error class), what the model perceived, its action
    /// (`accept`, `repeat`, `fix_args`, `give_up`), and each seeded comparison with the
    /// profile's probability (`exec`'s traces, `run --explain`). Informative: no count reads it.
    Decision {
        call_id: String,
        signal: String,
        truth: String,
        perceived: String,
        action: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        draws: Vec<crate::engine::probabilities::Draw>,
    },
    /// An MCP JSON-RPC message as it crossed a mock MCP server (`exec`): a `tools/call` request
    /// or its answer (an answer of the endpoint's own under `http_status`), or a notification.
    /// Informative: the conversation is told by the other events.
    Mcp {
        message: serde_json::Value,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    pub header: Header,
    pub events: Vec<TraceEvent>,
}

pub const ERROR_CLASSES: [&str; 5] = ["transient", "rate_limited", "bad_args", "terminal", "partial"];

impl Trace {
    /// Parses native JSONL; errors name the file, the line and what was expected.
    pub fn parse(src: &str, file: &Path) -> Result<Trace> {
        Trace::parse_lines(src.lines().enumerate(), file)
    }

    /// Parses numbered lines (0-based numbers) holding one trace.
    fn parse_lines<'a>(lines: impl Iterator<Item = (usize, &'a str)>, file: &Path) -> Result<Trace> {
        let mut lines = lines.filter(|(_, l)| !l.trim().is_empty());
        let Some((hl, first)) = lines.next() else {
            return Err(Error::invalid(file, Some(1), "header", "a header line {\"tracefault_trace\": 1, …}"));
        };
        let header: Header = serde_json::from_str(first).map_err(|e| Error::Parse {
            file: format!("{}:{}", file.display(), hl + 1),
            message: format!("header: {e}"),
        })?;
        if header.tracefault_trace != TRACE_VERSION {
            return Err(Error::invalid(
                file,
                Some(hl + 1),
                "tracefault_trace",
                format!("version {TRACE_VERSION}, got {}", header.tracefault_trace),
            ));
        }
        let mut events = Vec::new();
        for (i, line) in lines {
            let ev: TraceEvent = serde_json::from_str(line).map_err(|e| Error::Parse {
                file: format!("{}:{}", file.display(), i + 1),
                message: format!("event: {e}"),
            })?;
            if let TraceEvent::ToolResult { error_class: Some(c), .. } = &ev
                && !ERROR_CLASSES.contains(&c.as_str())
            {
                return Err(Error::invalid(
                    file,
                    Some(i + 1),
                    "error_class",
                    format!("one of {ERROR_CLASSES:?}, got {c:?}"),
                ));
            }
            events.push(ev);
        }
        Ok(Trace { header, events })
    }

    pub fn read(path: &Path) -> Result<Trace> {
        let src = crate::input::read_text(path, crate::input::Input::Trace)?;
        Trace::parse(&src, path)
    }

    /// Parses a file of one or more native traces: each header line starts the next trace.
    pub fn parse_many(src: &str, file: &Path) -> Result<Vec<Trace>> {
        let lines: Vec<&str> = src.lines().collect();
        let is_header = |l: &str| l.trim_start().starts_with('{') && l.contains("\"tracefault_trace\"");
        let mut starts: Vec<usize> = (0..lines.len()).filter(|&i| is_header(lines[i])).collect();
        // Anything but blank lines before the first header belongs to a trace without one.
        if starts.first().is_none_or(|&f| lines[..f].iter().any(|l| !l.trim().is_empty())) {
            starts.insert(0, 0);
        }
        let mut out = Vec::with_capacity(starts.len());
        for (k, &s) in starts.iter().enumerate() {
            let e = starts.get(k + 1).copied().unwrap_or(lines.len());
            out.push(Trace::parse_lines((s..e).map(|i| (i, lines[i])), file)?);
        }
        Ok(out)
    }

    /// Native JSONL, one object per line, ending with a newline.
    pub fn to_jsonl(&self) -> String {
        let mut out = Vec::new();
        self.write_jsonl(&mut out).expect("a trace serializes");
        String::from_utf8(out).expect("JSON is UTF-8")
    }

    /// [`Trace::to_jsonl`] written to `w` in chunks of about 64 KiB, never whole in memory.
    /// Lines are serialized into a local buffer, not into `w`: serde writes a line in dozens
    /// of small pieces, each a call through `dyn Write` there and an inlined append here.
    pub fn write_jsonl(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        const CHUNK: usize = 1 << 16;
        let mut buf = Vec::with_capacity(CHUNK + 4096);
        serde_json::to_writer(&mut buf, &self.header)?;
        buf.push(b'\n');
        for ev in &self.events {
            if buf.len() >= CHUNK {
                w.write_all(&buf)?;
                buf.clear();
            }
            serde_json::to_writer(&mut buf, ev)?;
            buf.push(b'\n');
        }
        w.write_all(&buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"{"tracefault_trace":1,"id":"t","source_format":"native","tools":[{"name":"search"}]}
{"type":"model_call","turn":1,"status":200,"tokens_in":10,"tokens_out":5,"stop":"tool_calls"}
{"type":"tool_call","turn":1,"call_id":"c1","name":"search","args":{"q":"x"}}
{"type":"tool_result","call_id":"c1","ok":true,"content":"{\"n\":1}"}
{"type":"final","text":"done","outcome":"answer"}
"#;

    #[test]
    fn round_trips() {
        let t = Trace::parse(SMALL, Path::new("t.jsonl")).unwrap();
        assert_eq!(t.events.len(), 4);
        assert_eq!(Trace::parse(&t.to_jsonl(), Path::new("t.jsonl")).unwrap(), t);
    }

    /// Arguments are written as the `Value` they hold would be, whatever text they were read from.
    #[test]
    fn args_write_as_their_value() {
        for text in [r#"{ "b": [1, 2.5, "x"], "a": {"z": null, "y": true} }"#, r#""plain""#, "[]", "-0.0"] {
            let v: serde_json::Value = serde_json::from_str(text).unwrap();
            let args: Args = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&args).unwrap(), serde_json::to_string(&v).unwrap());
            assert_eq!(args.to_string(), serde_json::to_string(&v).unwrap());
            assert_eq!(args.value(), v);
            assert_eq!(args, Args::new(&v));
        }
        let args: Args = serde_json::from_str(r#"{"q": "x", "n": 2}"#).unwrap();
        assert_ne!(args, Args::new(&serde_json::json!({"q": "y", "n": 2})));
    }

    #[test]
    fn errors_name_the_line() {
        let bad = SMALL.replace(r#""ok":true"#, r#""ok":"yes""#);
        let e = Trace::parse(&bad, Path::new("t.jsonl")).unwrap_err().to_string();
        assert!(e.starts_with("t.jsonl:4: event:"), "{e}");
        let e = Trace::parse("{}", Path::new("t.jsonl")).unwrap_err().to_string();
        assert!(e.contains("t.jsonl:1: header: missing field"), "{e}");
    }
}
