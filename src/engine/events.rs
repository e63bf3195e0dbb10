//! What a run emits. Metrics, the trace writer and tests consume these events; adding a kind
//! fails to compile until every consumer decides what to do with it.

use super::model::{Action, Perceived};
use super::probabilities::Draw;
use crate::envelope::read::Signal;
use crate::fault::ErrorClass;

/// How a result that succeeded misled the model (the book: metrics, `wrong_accepted` and
/// `injection_followed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Misled {
    /// It took a plausible wrong value (`wrong_content`) as right.
    WrongAccepted,
    /// It called the tool an injected instruction asked for.
    InjectionFollowed,
}

/// How a run ended (the book: metrics, `terminated_by`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TerminatedBy {
    Answer,
    GaveUp,
    StepCap,
    LoopGuard,
    TokenBudget,
    TimeBudget,
    BreakerAbort,
    ProtocolError,
}

impl TerminatedBy {
    pub const ALL: [TerminatedBy; 8] = [
        TerminatedBy::Answer,
        TerminatedBy::GaveUp,
        TerminatedBy::StepCap,
        TerminatedBy::LoopGuard,
        TerminatedBy::TokenBudget,
        TerminatedBy::TimeBudget,
        TerminatedBy::BreakerAbort,
        TerminatedBy::ProtocolError,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TerminatedBy::Answer => "answer",
            TerminatedBy::GaveUp => "gave_up",
            TerminatedBy::StepCap => "step_cap",
            TerminatedBy::LoopGuard => "loop_guard",
            TerminatedBy::TokenBudget => "token_budget",
            TerminatedBy::TimeBudget => "time_budget",
            TerminatedBy::BreakerAbort => "breaker_abort",
            TerminatedBy::ProtocolError => "protocol_error",
        }
    }

    /// `loop` = terminated by the step cap or the loop guard.
    pub fn is_loop(self) -> bool {
        matches!(self, TerminatedBy::StepCap | TerminatedBy::LoopGuard)
    }
}

/// Who sent an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// The model's first issue of this call.
    Model,
    /// The orchestrator retrying a failed attempt.
    Orchestrator,
    /// The model issuing the call again (identical or with changed arguments).
    ModelReissue,
}

#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    /// One attempt at the model (provider). `status` 200 or the injected fault's status.
    ModelCall {
        turn: u32,
        t_ms: u64,
        status: u16,
        tokens_in: u64,
        tokens_out: u64,
        retry: bool,
        /// The fault rule behind a failed attempt, and whether its trigger fired now (not a
        /// refusal that repeats an earlier answer).
        rule: Option<u16>,
        fired: bool,
        /// A retry refused because it came before the provider's announced wait.
        wasted: bool,
        /// A 429 from the fleet's `rpm` / `tpm` rather than a rule.
        load: bool,
        ends: bool,
    },
    /// The model asks for a tool call.
    ToolCall {
        turn: u32,
        call_id: u32,
        tool: &'a str,
        args: &'a str,
        variant: u32,
    },
    /// One attempt that reached the tool.
    Attempt {
        call_id: u32,
        tool: u16,
        attempt: u32,
        by: By,
        t_ms: u64,
        class: Option<ErrorClass>,
        status: Option<u16>,
        /// The fault rule behind it, and whether its trigger fired now (not a sticky repeat).
        rule: Option<u16>,
        fired: bool,
        wasted: bool,
        /// The tool refused it under load (its rate or concurrency limit, or a write conflict),
        /// apart from any scheduled fault.
        load: bool,
        /// A write tool committed it though an earlier attempt of the same call had committed,
        /// under a key the tool does not recognise (`effect = "write"`).
        duplicate: bool,
    },
    /// An open breaker answered instead of the tool.
    Rejected {
        call_id: u32,
        tool: u16,
    },
    BreakerTrip {
        tool: u16,
        t_ms: u64,
    },
    /// The one result the model gets for a call; `content` is the rendered message when the
    /// observer reads content, else empty.
    ToolResult {
        call_id: u32,
        class: Option<ErrorClass>,
        content: &'a str,
        raw_leak: bool,
        latency_ms: u64,
    },
    /// The model read a result that was not plainly a success and decided about its call (said
    /// only to observers that ask, [`Observer::EXPLAINS`]): the signal the result carried, what
    /// it really was, what the model perceived, what it did, and each seeded comparison with its
    /// probability (when the source of probabilities keeps them).
    Decision {
        call_id: u32,
        signal: Signal,
        truth: ErrorClass,
        perceived: Perceived,
        action: Action,
        draws: &'a [Draw],
    },
    /// A model turn started while a call of the previous turn lacked exactly one result.
    ProtocolViolation {
        call_id: u32,
    },
    /// The model was misled by the result of call `call_id`, which succeeded: it took a wrong
    /// value as right, or it followed the instruction the result carried (its call of the tool
    /// asked for is issued next).
    Misled {
        call_id: u32,
        how: Misled,
    },
    /// An agent's run ends (one per agent).
    End {
        by: TerminatedBy,
        t_ms: u64,
        /// When the agent started.
        started_ms: u64,
        text: &'a str,
        /// The ending claims the task done while its goal was not reached.
        false_success: bool,
    },
    /// The run is over for every agent of a fleet (or of a run with tool limits): the most calls
    /// each tool (by index) served at once. A lone agent's run, which tracks no tool, has none.
    Done {
        peaks: &'a [u32],
    },
}

/// A consumer of run events.
pub trait Observer {
    /// Whether this observer reads `ToolResult::content`. Those that do not (the metrics) let
    /// the engine skip rendering: it then hands over an empty `content` and takes what the
    /// model reads, and the result's length, from a cache.
    const READS_CONTENT: bool = true;

    /// Whether this observer wants [`Event::Decision`]s (an explanation of the run). Those that
    /// do not (the metrics) cost the engine nothing for them.
    const EXPLAINS: bool = false;

    fn event(&mut self, e: &Event<'_>);

    /// The events that follow are agent `agent`'s (said only in a fleet of several; a lone
    /// agent is agent 0).
    #[inline]
    fn agent(&mut self, _agent: u32) {}
}

impl Observer for () {
    const READS_CONTENT: bool = false;

    #[inline]
    fn event(&mut self, _: &Event<'_>) {}
}

impl<A: Observer, B: Observer> Observer for (A, B) {
    const READS_CONTENT: bool = A::READS_CONTENT || B::READS_CONTENT;
    const EXPLAINS: bool = A::EXPLAINS || B::EXPLAINS;

    #[inline]
    fn event(&mut self, e: &Event<'_>) {
        self.0.event(e);
        self.1.event(e);
    }

    #[inline]
    fn agent(&mut self, agent: u32) {
        self.0.agent(agent);
        self.1.agent(agent);
    }
}

impl<T: Observer + ?Sized> Observer for &mut T {
    const READS_CONTENT: bool = T::READS_CONTENT;
    const EXPLAINS: bool = T::EXPLAINS;

    #[inline]
    fn event(&mut self, e: &Event<'_>) {
        (**self).event(e);
    }

    #[inline]
    fn agent(&mut self, agent: u32) {
        (**self).agent(agent);
    }
}
