//! The simulated model's two decisions per tool result: what it perceives, then what it does.

use super::probabilities::{Prob, Probabilities};
use super::profile::Profile;
use crate::envelope::read::Signal;
use crate::fault::{ErrorClass, Fault};

/// What the model believes a result was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Perceived {
    Ok,
    Partial,
    Transient,
    BadArgs,
    Terminal,
}

/// What the model does about one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The call is done; move on.
    Accept,
    /// Issue the identical call again.
    Repeat,
    /// Issue the call with changed arguments.
    FixArgs,
    /// Stop the task with an answer that does not complete it.
    GiveUp,
}

impl Perceived {
    pub fn name(self) -> &'static str {
        match self {
            Perceived::Ok => "ok",
            Perceived::Partial => "partial",
            Perceived::Transient => "transient",
            Perceived::BadArgs => "bad_args",
            Perceived::Terminal => "terminal",
        }
    }
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Accept => "accept",
            Action::Repeat => "repeat",
            Action::FixArgs => "fix_args",
            Action::GiveUp => "give_up",
        }
    }
}

/// Reads a failed result: right with the signal's accuracy; a misread goes to transient or
/// terminal, whichever is not the truth (50/50 for bad arguments). `u` and `v` are uniform draws.
pub fn perceive_failure(
    probs: &mut impl Probabilities,
    signal: Signal,
    truth: ErrorClass,
    u: f64,
    v: f64,
) -> Perceived {
    let right = match truth {
        ErrorClass::Transient | ErrorClass::RateLimited => Perceived::Transient,
        ErrorClass::BadArgs => Perceived::BadArgs,
        ErrorClass::Terminal => Perceived::Terminal,
        ErrorClass::Partial => return Perceived::Partial,
    };
    if probs.below(Prob::Perception(signal), u) {
        return right;
    }
    match right {
        Perceived::Transient => Perceived::Terminal,
        Perceived::Terminal => Perceived::Transient,
        _ if v < 0.5 => Perceived::Transient,
        _ => Perceived::Terminal,
    }
}

/// Per-call memory the decision needs.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallHistory {
    /// Identical re-issues after transient or terminal readings.
    pub model_retries: u32,
    pub fix_attempts: u32,
}

/// Decides what to do after perceiving `p`; `u` is a uniform draw. The caps come from
/// `profile`, the probabilities from `probs`.
pub fn act(profile: &Profile, probs: &mut impl Probabilities, p: Perceived, h: &CallHistory, u: f64) -> Action {
    match p {
        Perceived::Ok => Action::Accept,
        Perceived::Partial => {
            if probs.below(Prob::Continue, u) {
                Action::Repeat
            } else {
                Action::Accept
            }
        }
        Perceived::Transient => {
            if h.model_retries < profile.max_model_retries && probs.below(Prob::RetryTransient, u) {
                Action::Repeat
            } else {
                Action::GiveUp
            }
        }
        Perceived::BadArgs => {
            if h.fix_attempts < profile.max_fix_attempts {
                Action::FixArgs
            } else {
                Action::GiveUp
            }
        }
        Perceived::Terminal => {
            if h.model_retries < profile.max_model_retries && !probs.below(Prob::GiveUpTerminal, u) {
                Action::Repeat
            } else {
                Action::GiveUp
            }
        }
    }
}

/// What the model does with a result that succeeded with content `fault` changed, once it
/// would accept it; `u` is a uniform draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaintTaken {
    /// It noticed a wrong value: it asks again, or gives up once its re-issues are spent.
    Noticed(Action),
    /// It took a wrong value as right.
    WrongAccepted,
    /// It calls the tool the result's instruction asked for.
    Follows,
    /// Nothing to it (a large result, or an instruction it did not follow).
    Accepted,
}

/// Decides [`TaintTaken`] with the profile's `p_notice_wrong` and `p_follow_injection` (the
/// comparison kept by an explaining `probs`).
pub fn take_tainted(
    profile: &Profile,
    probs: &mut impl Probabilities,
    fault: &Fault,
    h: &CallHistory,
    u: f64,
) -> TaintTaken {
    let mut below = |key: &str, p: f64| {
        probs.keep(key, p, u, u < p);
        u < p
    };
    match fault {
        Fault::WrongContent if below("p_notice_wrong", profile.p_notice_wrong) => {
            TaintTaken::Noticed(if h.model_retries < profile.max_model_retries {
                Action::Repeat
            } else {
                Action::GiveUp
            })
        }
        Fault::WrongContent => TaintTaken::WrongAccepted,
        Fault::InjectedInstruction { .. } if below("p_follow_injection", profile.p_follow_injection) => {
            TaintTaken::Follows
        }
        _ => TaintTaken::Accepted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accurate_reads_and_misreads() {
        let p = Profile::bundled_default();
        assert_eq!(perceive_failure(&mut &p, Signal::Envelope, ErrorClass::BadArgs, 0.5, 0.0), Perceived::BadArgs);
        assert_eq!(perceive_failure(&mut &p, Signal::Raw, ErrorClass::BadArgs, 0.7, 0.2), Perceived::Transient);
        assert_eq!(perceive_failure(&mut &p, Signal::Raw, ErrorClass::BadArgs, 0.7, 0.8), Perceived::Terminal);
        assert_eq!(perceive_failure(&mut &p, Signal::Raw, ErrorClass::RateLimited, 0.7, 0.0), Perceived::Terminal);
        assert_eq!(perceive_failure(&mut &p, Signal::Raw, ErrorClass::Terminal, 0.7, 0.0), Perceived::Transient);
    }

    #[test]
    fn a_tainted_result_is_noticed_or_followed_below_its_probability() {
        let mut p = Profile::bundled_default();
        (p.p_notice_wrong, p.p_follow_injection) = (0.1, 0.15);
        let fresh = CallHistory::default();
        let spent = CallHistory { model_retries: p.max_model_retries, fix_attempts: 0 };
        let inject = Fault::InjectedInstruction { text: "t".into(), tool: "x".into() };
        assert_eq!(take_tainted(&p, &mut &p, &Fault::WrongContent, &fresh, 0.09), TaintTaken::Noticed(Action::Repeat));
        assert_eq!(take_tainted(&p, &mut &p, &Fault::WrongContent, &spent, 0.09), TaintTaken::Noticed(Action::GiveUp));
        assert_eq!(take_tainted(&p, &mut &p, &Fault::WrongContent, &fresh, 0.1), TaintTaken::WrongAccepted);
        assert_eq!(take_tainted(&p, &mut &p, &inject, &fresh, 0.14), TaintTaken::Follows);
        assert_eq!(take_tainted(&p, &mut &p, &inject, &fresh, 0.15), TaintTaken::Accepted);
        // An explanation keeps the comparison, with the probability by its key.
        let mut explaining = crate::engine::probabilities::Explaining::new(&p);
        take_tainted(&p, &mut explaining, &inject, &fresh, 0.14);
        take_tainted(&p, &mut explaining, &Fault::WrongContent, &fresh, 0.5);
        let kept: Vec<_> = explaining.take_draws().into_iter().map(|d| (d.probability, d.p, d.draw, d.below)).collect();
        assert_eq!(
            kept,
            [("p_follow_injection".to_owned(), 0.15, 0.14, true), ("p_notice_wrong".to_owned(), 0.1, 0.5, false)]
        );
        assert_eq!(take_tainted(&p, &mut &p, &Fault::LargeResponse { kb: 9 }, &fresh, 0.0), TaintTaken::Accepted);
    }

    #[test]
    fn caps_bound_model_retries_and_fixes() {
        let p = Profile::bundled_default();
        let spent = CallHistory { model_retries: p.max_model_retries, fix_attempts: p.max_fix_attempts };
        assert_eq!(act(&p, &mut &p, Perceived::Transient, &spent, 0.0), Action::GiveUp);
        assert_eq!(act(&p, &mut &p, Perceived::BadArgs, &spent, 0.0), Action::GiveUp);
        assert_eq!(act(&p, &mut &p, Perceived::BadArgs, &CallHistory::default(), 0.99), Action::FixArgs);
        assert_eq!(
            act(&p, &mut &p, Perceived::Partial, &spent, 0.5),
            Action::Repeat,
            "partials are not capped by the model"
        );
    }
}
