//! The simulated model's profile: documented, overridable parameters (the book: the simulated model), each
//! probability with an optional plausible range (`p_fix_args = { value = 0.7, range = [0.5,
//! 0.9] }`) for sensitivity sweeps, and each measured quantity (times, tokens) with an
//! optional range too (a fitted median's interval, which `predict` draws from).

use std::collections::BTreeMap;

use schemars::JsonSchema;
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

/// A probability or a measure as a profile file writes it: a number, or a value with its
/// range.
#[derive(Clone, Copy, Debug, PartialEq, JsonSchema)]
#[serde(untagged, deny_unknown_fields)]
pub enum Figure {
    /// The figure with no range of its own (`sweep` draws a probability from its plausible
    /// range; a measure stays fixed).
    Value(f64),
    /// The figure with the range it plausibly takes: `sweep` draws a probability from it
    /// (unless `--param` gives one), `predict` a probability or a measure.
    Ranged {
        /// The figure (a probability 0 to 1, a measure a whole number), within `range`.
        value: f64,
        /// `[LO, HI]`: the range the figure plausibly takes (a probability's within 0 to 1),
        /// LO ≤ HI.
        range: [f64; 2],
    },
}

/// Read by hand rather than `untagged`, so a mistake inside the table names its key.
impl<'de> Deserialize<'de> for Figure {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Figure, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Ranged {
            value: f64,
            // A list, not `[f64; 2]`: an array reads its first two numbers and ignores the rest.
            range: Vec<f64>,
        }
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Figure;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number, or { value = V, range = [LO, HI] }")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Figure, E> {
                Ok(Figure::Value(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Figure, E> {
                Ok(Figure::Value(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Figure, E> {
                Ok(Figure::Value(v as f64))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Figure, A::Error> {
                let r = Ranged::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                let range: [f64; 2] = r.range.as_slice().try_into().map_err(|_| {
                    serde::de::Error::custom(format!("range: expected [LO, HI], two numbers, got {}", r.range.len()))
                })?;
                Ok(Figure::Ranged { value: r.value, range })
            }
        }
        d.deserialize_any(V)
    }
}

impl Figure {
    pub fn value(self) -> f64 {
        match self {
            Figure::Value(v) | Figure::Ranged { value: v, .. } => v,
        }
    }

    pub fn range(self) -> Option<[f64; 2]> {
        match self {
            Figure::Value(_) => None,
            Figure::Ranged { range, .. } => Some(range),
        }
    }
}

/// The probabilities of a profile, by key (`perception.` for the accuracies).
pub const PROBABILITIES: [&str; 10] = [
    "p_continue",
    "p_retry_transient",
    "p_fix_args",
    "p_give_up_terminal",
    "perception.envelope",
    "perception.flag",
    "perception.object",
    "perception.prefix",
    "perception.raw",
    "perception.unmarked",
];

/// The profile's measured quantities, whole numbers: the virtual times of a model call and a
/// tool call (ms) and the first prompt's tokens. Each may carry a range (`calibrate` writes
/// its fitted median's 95% interval) that `predict` draws it from; `sweep` keeps them fixed.
pub const MEASURES: [&str; 3] = ["model_latency_ms", "tool_latency_ms", "prompt_tokens"];

/// The most measure `key` may be: a day of virtual time, or a `u32` of tokens.
pub fn measure_bound(key: &str) -> u64 {
    if key == "prompt_tokens" { u64::from(u32::MAX) } else { super::scenario::MAX_MS }
}

/// Whether `figure` is one measure `key` can take: its value and its range's ends whole
/// numbers from 0 to [`measure_bound`]; else what was expected (the range's order and the
/// value's place in it are [`Profile::validate`]'s to check, as for every figure).
pub fn check_measure(key: &str, figure: Figure) -> Result<(), String> {
    let most = measure_bound(key);
    let unit = if key == "prompt_tokens" { "tokens" } else { "ms" };
    let whole = |v: f64| v.is_finite() && v >= 0.0 && v.fract() == 0.0;
    let ends = figure.range().map_or(Vec::new(), |r| r.to_vec());
    for v in std::iter::once(figure.value()).chain(ends.iter().copied()) {
        if !whole(v) {
            return Err(format!("a whole number of {unit}, 0 or more, got {v}"));
        }
        if v > most as f64 {
            let what = if unit == "ms" { " (a day)" } else { "" };
            return Err(format!("at most {most} {unit}{what}, got {v}"));
        }
    }
    Ok(())
}

/// The range each probability plausibly takes when nothing was measured: the book's table (the
/// simulated model) gives the reasoning per key (all are tracefault's assumptions around the design figures).
pub const PLAUSIBLE: [(&str, [f64; 2]); 13] = [
    ("p_continue", [0.80, 0.97]),
    ("p_retry_transient", [0.50, 0.95]),
    ("p_fix_args", [0.50, 0.90]),
    ("p_give_up_terminal", [0.70, 0.99]),
    ("perception.envelope", [0.90, 1.00]),
    ("perception.flag", [0.85, 0.99]),
    ("perception.object", [0.80, 0.98]),
    ("perception.prefix", [0.75, 0.97]),
    ("perception.raw", [0.40, 0.80]),
    ("perception.unmarked", [0.55, 0.90]),
    ("p_claim_success", [0.0, 0.25]),
    ("p_notice_wrong", [0.0, 0.5]),
    ("p_follow_injection", [0.0, 0.6]),
];

/// The probabilities read once where a result or a run ends, outside the swept
/// [`PROBABILITIES`] (they never split a trajectory a sweep follows), with the value a profile
/// file that does not give one takes (the bundled profile's, `profiles/default.toml`).
pub const ENDING_PROBABILITIES: [(&str, f64); 3] =
    [("p_claim_success", DEFAULT_P_CLAIM_SUCCESS), ("p_notice_wrong", 0.1), ("p_follow_injection", 0.15)];

/// The plausible range of probability `key` (see [`PLAUSIBLE`]).
pub fn plausible(key: &str) -> Option<[f64; 2]> {
    PLAUSIBLE.iter().find(|(k, _)| *k == key).map(|(_, r)| *r)
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "ProfileFile")]
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
    /// After giving up on a failure it could not fix: the probability that the model's answer
    /// claims the task done (a false success when the task's goal was not reached). Not among
    /// the swept [`PROBABILITIES`]: it is read once, as a run ends, so it never splits a
    /// trajectory.
    pub p_claim_success: f64,
    /// After a result with a plausible wrong value (`wrong_content`): the probability that the
    /// model notices and asks again (else it takes the value as right).
    pub p_notice_wrong: f64,
    /// After a result carrying an instruction to call another tool (`injected_instruction`):
    /// the probability that the model calls it.
    pub p_follow_injection: f64,
    /// The plausible range of each probability that has one, by key (see [`PROBABILITIES`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ranges: BTreeMap<String, [f64; 2]>,
}

/// A profile as a file writes it: probabilities as [`Figure`]s.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    name: String,
    p_continue: Figure,
    p_retry_transient: Figure,
    max_model_retries: u32,
    p_fix_args: Figure,
    max_fix_attempts: u32,
    p_give_up_terminal: Figure,
    model_latency_ms: Figure,
    tool_latency_ms: Figure,
    prompt_tokens: Figure,
    perception: PerceptionFile,
    /// Optional in a file: a profile written before it existed takes the bundled value.
    #[serde(default)]
    p_claim_success: Option<Figure>,
    #[serde(default)]
    p_notice_wrong: Option<Figure>,
    #[serde(default)]
    p_follow_injection: Option<Figure>,
}

/// The bundled profile's `p_claim_success` (see `profiles/default.toml`), for a profile file
/// that does not give one.
pub const DEFAULT_P_CLAIM_SUCCESS: f64 = 0.1;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PerceptionFile {
    envelope: Figure,
    flag: Figure,
    object: Figure,
    prefix: Figure,
    raw: Figure,
    unmarked: Figure,
}

impl TryFrom<ProfileFile> for Profile {
    type Error = String;

    fn try_from(f: ProfileFile) -> Result<Profile, String> {
        let per = &f.perception;
        let mut p = Profile {
            name: f.name,
            p_continue: 0.0,
            p_retry_transient: 0.0,
            max_model_retries: f.max_model_retries,
            p_fix_args: 0.0,
            max_fix_attempts: f.max_fix_attempts,
            p_give_up_terminal: 0.0,
            model_latency_ms: 0,
            tool_latency_ms: 0,
            prompt_tokens: 0,
            perception: Perception { envelope: 0.0, flag: 0.0, object: 0.0, prefix: 0.0, raw: 0.0, unmarked: 0.0 },
            p_claim_success: 0.0,
            p_notice_wrong: 0.0,
            p_follow_injection: 0.0,
            ranges: BTreeMap::new(),
        };
        let given = [f.p_claim_success, f.p_notice_wrong, f.p_follow_injection];
        for ((key, default), figure) in ENDING_PROBABILITIES.into_iter().zip(given) {
            p.set(key, figure.unwrap_or(Figure::Value(default)));
        }
        let figures = [
            f.p_continue,
            f.p_retry_transient,
            f.p_fix_args,
            f.p_give_up_terminal,
            per.envelope,
            per.flag,
            per.object,
            per.prefix,
            per.raw,
            per.unmarked,
        ];
        for (key, figure) in PROBABILITIES.into_iter().zip(figures) {
            p.set(key, figure);
        }
        for (key, figure) in MEASURES.into_iter().zip([f.model_latency_ms, f.tool_latency_ms, f.prompt_tokens]) {
            check_measure(key, figure).map_err(|e| format!("{key}: expected {e}"))?;
            p.set(key, figure);
        }
        p.validate().map_err(|(k, e)| format!("{k}: expected {e}"))?;
        Ok(p)
    }
}

impl Profile {
    /// The probability `key` (one of [`PROBABILITIES`]).
    pub fn probability(&self, key: &str) -> Option<f64> {
        let per = &self.perception;
        Some(match key {
            "p_continue" => self.p_continue,
            "p_retry_transient" => self.p_retry_transient,
            "p_fix_args" => self.p_fix_args,
            "p_give_up_terminal" => self.p_give_up_terminal,
            "perception.envelope" => per.envelope,
            "perception.flag" => per.flag,
            "perception.object" => per.object,
            "perception.prefix" => per.prefix,
            "perception.raw" => per.raw,
            "perception.unmarked" => per.unmarked,
            "p_claim_success" => self.p_claim_success,
            "p_notice_wrong" => self.p_notice_wrong,
            "p_follow_injection" => self.p_follow_injection,
            _ => return None,
        })
    }

    /// Measure `key` (one of [`MEASURES`]).
    pub fn measure(&self, key: &str) -> Option<u64> {
        Some(match key {
            "model_latency_ms" => self.model_latency_ms,
            "tool_latency_ms" => self.tool_latency_ms,
            "prompt_tokens" => u64::from(self.prompt_tokens),
            _ => return None,
        })
    }

    /// Sets probability or measure `key` (one of [`PROBABILITIES`], the ending probabilities or
    /// [`MEASURES`]) and its range (a figure without one fixes the value: an earlier range
    /// goes). A measure takes the figure's value as a whole number ([`check_measure`] says
    /// whether it is one). Returns whether the key is a probability or a measure.
    pub fn set(&mut self, key: &str, figure: Figure) -> bool {
        if MEASURES.contains(&key) {
            // Whole numbers within their bounds when checked; saturating otherwise.
            let v = figure.value().round().max(0.0);
            match key {
                "model_latency_ms" => self.model_latency_ms = v as u64,
                "tool_latency_ms" => self.tool_latency_ms = v as u64,
                _ => self.prompt_tokens = v as u32,
            }
            self.set_range(key, figure.range());
            return true;
        }
        let per = &mut self.perception;
        let slot = match key {
            "p_continue" => &mut self.p_continue,
            "p_retry_transient" => &mut self.p_retry_transient,
            "p_fix_args" => &mut self.p_fix_args,
            "p_give_up_terminal" => &mut self.p_give_up_terminal,
            "perception.envelope" => &mut per.envelope,
            "perception.flag" => &mut per.flag,
            "perception.object" => &mut per.object,
            "perception.prefix" => &mut per.prefix,
            "perception.raw" => &mut per.raw,
            "perception.unmarked" => &mut per.unmarked,
            "p_claim_success" => &mut self.p_claim_success,
            "p_notice_wrong" => &mut self.p_notice_wrong,
            "p_follow_injection" => &mut self.p_follow_injection,
            _ => return false,
        };
        *slot = figure.value();
        self.set_range(key, figure.range());
        true
    }

    fn set_range(&mut self, key: &str, range: Option<[f64; 2]>) {
        match range {
            Some(r) => self.ranges.insert(key.to_owned(), r),
            None => self.ranges.remove(key),
        };
    }

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
            ("p_claim_success", self.p_claim_success),
            ("p_notice_wrong", self.p_notice_wrong),
            ("p_follow_injection", self.p_follow_injection),
        ];
        for (k, v) in probs {
            if !(0.0..=1.0).contains(&v) {
                return Err((k.into(), format!("a probability in [0, 1], got {v}")));
            }
        }
        for (k, &[lo, hi]) in &self.ranges {
            let (v, most) = match (self.probability(k), self.measure(k)) {
                (Some(v), _) => (v, 1.0),
                (None, Some(v)) => (v as f64, measure_bound(k) as f64),
                (None, None) => {
                    return Err((
                        k.clone(),
                        format!(
                            "a range only on a probability ({}, {}) or a measure ({})",
                            PROBABILITIES.join(", "),
                            ENDING_PROBABILITIES.map(|(k, _)| k).join(", "),
                            MEASURES.join(", ")
                        ),
                    ));
                }
            };
            if !(0.0..=most).contains(&lo) || !(0.0..=most).contains(&hi) {
                return Err((k.clone(), format!("a range within [0, {most}], got [{lo}, {hi}]")));
            }
            if lo > hi {
                return Err((k.clone(), format!("a range [LO, HI] with LO <= HI, got [{lo}, {hi}]")));
            }
            if !(lo..=hi).contains(&v) {
                return Err((k.clone(), format!("a value within its range [{lo}, {hi}], got {v}")));
            }
        }
        if self.max_fix_attempts > 16 || self.max_model_retries > 64 {
            return Err(("max_fix_attempts / max_model_retries".into(), "at most 16 / 64".into()));
        }
        for (k, v) in [("model_latency_ms", self.model_latency_ms), ("tool_latency_ms", self.tool_latency_ms)] {
            if v > super::scenario::MAX_MS {
                return Err((k.into(), format!("at most {} ms (a day), got {v}", super::scenario::MAX_MS)));
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
    fn probabilities_take_a_value_or_a_value_with_its_range() {
        let src = DEFAULT_PROFILE_TOML.replace("p_fix_args = 0.7", "p_fix_args = { value = 0.7, range = [0.5, 0.9] }");
        let p: Profile = toml::from_str(&src).unwrap();
        assert_eq!(p.p_fix_args, 0.7);
        assert_eq!(p.ranges, BTreeMap::from([("p_fix_args".to_owned(), [0.5, 0.9])]));
        let err = |range: &str| {
            let src = DEFAULT_PROFILE_TOML.replace("raw = 0.60", &format!("raw = {{ value = 0.6, range = {range} }}"));
            toml::from_str::<Profile>(&src).unwrap_err().message().to_owned()
        };
        assert!(
            err("[0.7, 0.5]").contains("perception.raw: expected a range [LO, HI] with LO <= HI"),
            "{}",
            err("[0.7, 0.5]")
        );
        assert!(err("[-0.1, 0.9]").contains("perception.raw: expected a range within [0, 1]"));
        for wrong in ["[0.1, 0.5, 0.9]", "[0.5]"] {
            assert!(err(wrong).contains("range: expected [LO, HI], two numbers"), "{wrong}: {}", err(wrong));
        }
        assert!(err("[0.7, 0.9]").contains("perception.raw: expected a value within its range [0.7, 0.9], got 0.6"));
        let mut fixed = p.clone();
        fixed.set("p_fix_args", Figure::Value(0.95));
        assert!(fixed.ranges.is_empty(), "a plain value fixes the figure");
        assert!(!fixed.set("max_fix_attempts", Figure::Value(2.0)), "not a probability");
    }

    /// A measure takes a whole number, or one with its range; fractions, negatives, values
    /// past the bound or outside the range are refused with the key named.
    #[test]
    fn measures_take_a_whole_number_or_one_with_its_range() {
        let with = |line: &str| DEFAULT_PROFILE_TOML.replace("model_latency_ms = 1000", line);
        let p: Profile = toml::from_str(&with("model_latency_ms = { value = 900, range = [700, 1400] }")).unwrap();
        assert_eq!((p.model_latency_ms, p.ranges["model_latency_ms"]), (900, [700.0, 1400.0]));
        assert_eq!(p.measure("model_latency_ms"), Some(900));
        let err = |line: &str| toml::from_str::<Profile>(&with(line)).unwrap_err().message().to_owned();
        for (line, expected) in [
            ("model_latency_ms = 1.5", "model_latency_ms: expected a whole number of ms, 0 or more, got 1.5"),
            ("model_latency_ms = -3", "model_latency_ms: expected a whole number of ms, 0 or more, got -3"),
            ("model_latency_ms = 99999999999", "model_latency_ms: expected at most 86400000 ms (a day)"),
            (
                "model_latency_ms = { value = 900, range = [1000, 1400] }",
                "model_latency_ms: expected a value within its range [1000, 1400], got 900",
            ),
            (
                "model_latency_ms = { value = 900, range = [950, 800] }",
                "model_latency_ms: expected a range [LO, HI] with LO <= HI",
            ),
        ] {
            assert!(err(line).contains(expected), "{line}: {}", err(line));
        }
        let mut fixed = p.clone();
        assert!(fixed.set("model_latency_ms", Figure::Value(1200.0)));
        assert_eq!((fixed.model_latency_ms, fixed.ranges.get("model_latency_ms")), (1200, None));
    }

    #[test]
    fn every_probability_has_a_plausible_range_around_its_default() {
        let p = Profile::bundled_default();
        for key in PROBABILITIES {
            let [lo, hi] = plausible(key).unwrap();
            let v = p.probability(key).unwrap();
            assert!(0.0 <= lo && lo <= v && v <= hi && hi <= 1.0, "{key}: {v} in [{lo}, {hi}]");
        }
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
