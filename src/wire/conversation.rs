//! One agent conversation as the mock model holds it: the calls of the current step it is
//! waiting on, its draws, the ids it gave out, and its last answer (what the model decides is
//! `model.rs`'s; the world keeps the conversations).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::engine::model::CallHistory;
use crate::engine::rng::LazyStream;
use crate::provider::Format;
pub use crate::provider::Turn;
use crate::trace::TraceEvent;

/// One call of the current step, as the mock model tracks it.
#[derive(Clone, Debug)]
pub(super) struct Slot {
    pub(super) call: u32,
    pub(super) variant: u32,
    pub(super) hist: CallHistory,
    /// The arguments sent last, and the id they were sent with.
    pub(super) args: Value,
    pub(super) id: String,
    pub(super) active: bool,
    /// Sent in the last turn (waiting for its result).
    pub(super) sent: bool,
}

/// The tools frameworks end a run with instead of a text answer: smolagents' `final_answer`,
/// pydantic-ai's output tool `final_result` (`final_result_NAME` for one of several types).
pub fn is_final_answer_tool(name: &str) -> bool {
    name == "final_answer" || name == "final_result" || name.starts_with("final_result_")
}

/// One agent conversation the mock model holds.
#[derive(Clone)]
pub struct Conversation {
    pub index: usize,
    pub format: Format,
    pub(super) draws: LazyStream,
    pub(super) slots: Vec<Slot>,
    pub(super) next_step: usize,
    pub turns: u32,
    pub ended: Option<&'static str>,
    /// The last request answered (a digest of its conversation) and the answer: an SDK that
    /// sends a request again gets the same answer, and the conversation does not move twice.
    pub(super) last: Option<(u64, Turn)>,
    /// The last answer's records (its model call, then its calls) and the ending it made while
    /// the agent has not got it whole (its stream broke): recorded when the agent asks again.
    pub(super) undelivered: Option<(Vec<TraceEvent>, Option<&'static str>)>,
    /// The results rewritten to a fault (live mode), by call id: rewritten the same way each
    /// time the agent sends them.
    pub(super) rewritten: BTreeMap<String, Value>,
    /// Live mode: the calls of the scenario's tools (tool, arguments' key) whose latest result
    /// in it was a failure. A real model that answers while one stands has stopped the task
    /// without completing it: the run ended `gave_up`.
    /// The value is the failure's class, when known.
    pub failing: BTreeMap<(String, u64), Option<crate::fault::ErrorClass>>,
    /// Live mode: the ending an answer makes whose calls were all of a framework's final-answer
    /// tool ([`is_final_answer_tool`]), and the number of the request it answered: the run ends
    /// so when the agent then exits 0 without asking again.
    pub answer_by_tool: Option<(&'static str, u32)>,
    /// Live mode: the requests of it admitted so far (refused ones too).
    pub requests: u32,
    /// The mock model's give-up claimed the task done (its `p_claim_success` draw).
    pub claimed: bool,
    /// The ids it gave out (forgotten with it).
    pub ids: Vec<String>,
    /// The `/agents/K/` prefix its requests came under.
    pub agent: Option<u32>,
    /// Live mode: a digest of the first message its first request sent, which every later
    /// request of it repeats (how a request without call ids finds it among others).
    pub opening: u64,
}

impl Conversation {
    /// A conversation whose model draws from the stream `draws_key` names
    /// ([`World::conversation_key`](super::world::World::conversation_key)).
    pub fn new(draws_key: u64, index: usize, agent: Option<u32>, format: Format) -> Conversation {
        let mut draws = LazyStream::default();
        draws.reset(draws_key);
        Conversation {
            index,
            format,
            draws,
            slots: Vec::new(),
            next_step: 0,
            turns: 0,
            ended: None,
            last: None,
            undelivered: None,
            rewritten: BTreeMap::new(),
            failing: BTreeMap::new(),
            answer_by_tool: None,
            requests: 0,
            claimed: false,
            ids: Vec::new(),
            agent,
            opening: 0,
        }
    }

    /// The ids of the calls it is waiting on.
    pub fn waiting_on(&self) -> impl Iterator<Item = &str> {
        self.slots.iter().filter(|s| s.active && s.sent).map(|s| s.id.as_str())
    }
}
