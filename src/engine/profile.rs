//! The simulated model's profile: documented, overridable parameters (design 3.6).

use serde::{Deserialize, Serialize};

use crate::envelope::read::Signal;

/// The bundled default profile, as shipped in `profiles/default.toml`.
pub const DEFAULT_PROFILE_TOML: &str = include_str!("../../profiles/default.toml");

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Perception {
    pub envelope: f64,
    pub flag: f64,
    pub object: f64,
    pub prefix: f64,
    pub raw: f64,
    pub unmarked: f64,
}

impl Perception {
    pub fn accuracy(&self, signal: Signal) -> f64 {
        match signal {
            Signal::Envelope => self.envelope,
            Signal::Flag => self.flag,
            Signal::Object => self.object,
            Signal::Prefix => self.prefix,
            Signal::Raw => self.raw,
            Signal::Unmarked => self.unmarked,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub p_continue: f64,
    pub p_retry_transient: f64,
    pub max_model_retries: u32,
    pub p_fix_args: f64,
    pub max_fix_attempts: u32,
    pub p_give_up_terminal: f64,
    pub model_latency_ms: u64,
    pub tool_latency_ms: u64,
    pub prompt_tokens: u32,
    pub perception: Perception,
}

impl Profile {
    pub fn bundled_default() -> Profile {
        toml::from_str(DEFAULT_PROFILE_TOML).expect("the bundled profile parses")
    }

    /// Checks ranges; returns the first offending key and what was expected.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let probs = [
            ("p_continue", self.p_continue),
            ("p_retry_transient", self.p_retry_transient),
            ("p_fix_args", self.p_fix_args),
            ("p_give_up_terminal", self.p_give_up_terminal),
            ("perception.envelope", self.perception.envelope),
            ("perception.flag", self.perception.flag),
            ("perception.object", self.perception.object),
            ("perception.prefix", self.perception.prefix),
            ("perception.raw", self.perception.raw),
            ("perception.unmarked", self.perception.unmarked),
        ];
        for (k, v) in probs {
            if !(0.0..=1.0).contains(&v) {
                return Err((k.into(), format!("a probability in [0, 1], got {v}")));
            }
        }
        if self.max_fix_attempts > 16 || self.max_model_retries > 64 {
            return Err(("max_fix_attempts / max_model_retries".into(), "at most 16 / 64".into()));
        }
        for (k, v) in [("model_latency_ms", self.model_latency_ms), ("tool_latency_ms", self.tool_latency_ms)] {
            if v > 86_400_000 {
                return Err((k.into(), format!("at most 86400000 ms (a day), got {v}")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_profile_is_valid_and_matches_the_design_defaults() {
        let p = Profile::bundled_default();
        assert_eq!(p.validate(), Ok(()));
        assert_eq!(p.p_continue, 0.93);
        assert_eq!(p.p_retry_transient, 0.8);
        assert_eq!(p.p_fix_args, 0.7);
        assert_eq!(p.max_fix_attempts, 3);
        assert_eq!(p.p_give_up_terminal, 0.9);
        assert!(p.perception.envelope > p.perception.flag);
        assert!(p.perception.flag > p.perception.object);
        assert!(p.perception.object > p.perception.prefix);
        assert!(p.perception.prefix > p.perception.raw);
    }

    #[test]
    fn counts_are_bounded_at_their_limits() {
        let with = |fix: u32, retries: u32| {
            Profile { max_fix_attempts: fix, max_model_retries: retries, ..Profile::bundled_default() }.validate()
        };
        assert_eq!(with(16, 64), Ok(()));
        assert!(with(17, 64).is_err());
        assert!(with(16, 65).is_err());
    }
}
