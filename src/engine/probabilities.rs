//! Where the simulated model's probabilities are read: from one profile, or from a set of
//! profiles at once that share one trajectory until a draw falls between their values, where
//! the set splits and each part follows its own.
//!
//! Every decision of the model compares a uniform draw with one probability of its profile,
//! and the draws themselves never depend on the profile. So two profiles that agree on every
//! comparison a run makes give that run the same trajectory, to the bit; a sweep over many
//! profiles simulates each distinct trajectory once ([`ProfileSet`]).

use super::profile::{PROBABILITIES, Profile};
use crate::envelope::read::Signal;

/// One probability of the profile, as the model's decisions read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prob {
    Continue,
    RetryTransient,
    FixArgs,
    GiveUpTerminal,
    /// The accuracy with which the model reads a failure that carries this signal.
    Perception(Signal),
}

impl Prob {
    /// Its index in [`PROBABILITIES`].
    #[inline(always)]
    pub fn index(self) -> usize {
        match self {
            Prob::Continue => 0,
            Prob::RetryTransient => 1,
            Prob::FixArgs => 2,
            Prob::GiveUpTerminal => 3,
            Prob::Perception(s) => {
                4 + match s {
                    Signal::Envelope => 0,
                    Signal::Flag => 1,
                    Signal::Object => 2,
                    Signal::Prefix => 3,
                    Signal::Raw => 4,
                    Signal::Unmarked => 5,
                }
            }
        }
    }
}

/// One comparison the model made: the profile's probability (by its key), its value, the
/// seeded draw, and whether the draw fell below it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Draw {
    pub probability: String,
    pub p: f64,
    pub draw: f64,
    pub below: bool,
}

/// A source of probabilities that reads one profile and keeps every comparison it answers, for an explanation
/// of a run (`run --explain`, `exec`'s traces).
pub struct Explaining<'a> {
    profile: &'a Profile,
    draws: Vec<Draw>,
}

impl<'a> Explaining<'a> {
    pub fn new(profile: &'a Profile) -> Explaining<'a> {
        Explaining { profile, draws: Vec::new() }
    }
}

impl Probabilities for Explaining<'_> {
    fn below(&mut self, p: Prob, u: f64) -> bool {
        let value = self.profile.value_of(p);
        let below = u < value;
        self.draws.push(Draw { probability: PROBABILITIES[p.index()].to_owned(), p: value, draw: u, below });
        below
    }

    fn keep(&mut self, probability: &str, p: f64, draw: f64, below: bool) {
        self.draws.push(Draw { probability: probability.to_owned(), p, draw, below });
    }

    fn take_draws(&mut self) -> Vec<Draw> {
        std::mem::take(&mut self.draws)
    }
}

/// Answers the model's comparisons of a uniform draw with a probability.
pub trait Probabilities {
    /// Whether the draw `u` falls below probability `p`.
    fn below(&mut self, p: Prob, u: f64) -> bool;

    /// Keeps a comparison made outside [`below`](Self::below) (a probability read once where a
    /// result or a run ends, which no sweep varies), for a source that explains; the others
    /// ignore it.
    fn keep(&mut self, _probability: &str, _p: f64, _draw: f64, _below: bool) {}

    /// The comparisons answered since the last call, for a source that keeps them
    /// ([`Explaining`]); none for the others.
    fn take_draws(&mut self) -> Vec<Draw> {
        Vec::new()
    }
}

impl Profile {
    /// The value of probability `p` in this profile.
    #[inline(always)]
    pub fn value_of(&self, p: Prob) -> f64 {
        match p {
            Prob::Continue => self.p_continue,
            Prob::RetryTransient => self.p_retry_transient,
            Prob::FixArgs => self.p_fix_args,
            Prob::GiveUpTerminal => self.p_give_up_terminal,
            Prob::Perception(s) => self.perception.accuracy(s),
        }
    }
}

impl Probabilities for &Profile {
    #[inline(always)]
    fn below(&mut self, p: Prob, u: f64) -> bool {
        u < self.value_of(p)
    }
}

const N: usize = PROBABILITIES.len();

/// Many profiles judged at once. A simulation follows the profiles of [`members`](Self::members)
/// along one trajectory; where a draw falls between their values, those that compare the
/// other way are set aside, to be simulated from the start as a set of their own (they take
/// the same path up to that comparison, since they agreed on every one before it).
///
/// Usage: [`start`](Self::start), then `while set.take_next() { simulate; credit set.members() }`.
/// Each profile ends up in exactly one finished trajectory per `start`.
#[derive(Clone, Debug, Default)]
pub struct ProfileSet {
    /// Each profile's probabilities, indexed like [`PROBABILITIES`].
    values: Vec<[f64; N]>,
    /// The profiles on the trajectory being simulated, and the least and greatest value of
    /// each probability among them.
    members: Vec<u32>,
    lo: [f64; N],
    hi: [f64; N],
    /// Sets split off, each waiting to follow its own trajectory; and emptied ones to reuse.
    pending: Vec<Vec<u32>>,
    spare: Vec<Vec<u32>>,
}

impl ProfileSet {
    pub fn new(profiles: &[Profile]) -> ProfileSet {
        let values = profiles
            .iter()
            .map(|p| std::array::from_fn(|k| p.probability(PROBABILITIES[k]).expect("every key is a probability")))
            .collect();
        ProfileSet { values, ..ProfileSet::default() }
    }

    /// How many profiles the set holds.
    pub fn profiles(&self) -> usize {
        self.values.len()
    }

    /// Sets every profile waiting for its trajectory (of the next run to simulate).
    pub fn start(&mut self) {
        let mut all = self.spare.pop().unwrap_or_default();
        all.clear();
        all.extend(0..self.values.len() as u32);
        self.pending.push(all);
    }

    /// Takes the next waiting set as the members to simulate; `false` when none is left.
    pub fn take_next(&mut self) -> bool {
        let Some(set) = self.pending.pop() else { return false };
        let done = std::mem::replace(&mut self.members, set);
        self.spare.push(done);
        self.bounds();
        true
    }

    /// The profiles (indices into those given to [`new`](Self::new)) the trajectory
    /// simulated since the last [`take_next`](Self::take_next) belongs to.
    pub fn members(&self) -> &[u32] {
        &self.members
    }

    fn bounds(&mut self) {
        self.lo = [f64::INFINITY; N];
        self.hi = [f64::NEG_INFINITY; N];
        for &m in &self.members {
            for (k, &v) in self.values[m as usize].iter().enumerate() {
                self.lo[k] = self.lo[k].min(v);
                self.hi[k] = self.hi[k].max(v);
            }
        }
    }
}

impl Probabilities for ProfileSet {
    fn below(&mut self, p: Prob, u: f64) -> bool {
        let k = p.index();
        if u < self.lo[k] {
            return true;
        }
        if u >= self.hi[k] {
            return false;
        }
        // The draw falls between the members' values: those it falls below stay, the others
        // wait for a trajectory of their own.
        let mut rest = self.spare.pop().unwrap_or_default();
        rest.clear();
        let values = &self.values;
        rest.extend(self.members.iter().copied().filter(|&m| u >= values[m as usize][k]));
        self.members.retain(|&m| u < values[m as usize][k]);
        // Both parts hold someone: the bounds are those of the members.
        debug_assert!(!rest.is_empty() && !self.members.is_empty());
        self.pending.push(rest);
        self.bounds();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Prob; N] = [
        Prob::Continue,
        Prob::RetryTransient,
        Prob::FixArgs,
        Prob::GiveUpTerminal,
        Prob::Perception(Signal::Envelope),
        Prob::Perception(Signal::Flag),
        Prob::Perception(Signal::Object),
        Prob::Perception(Signal::Prefix),
        Prob::Perception(Signal::Raw),
        Prob::Perception(Signal::Unmarked),
    ];

    /// A profile whose probability `k` is `(k + 1) / 20` plus `shift`.
    fn profile(shift: f64) -> Profile {
        let mut p = Profile::bundled_default();
        for (k, key) in PROBABILITIES.iter().enumerate() {
            p.set(key, crate::engine::profile::Figure::Value((k + 1) as f64 / 20.0 + shift));
        }
        p
    }

    #[test]
    fn each_prob_is_the_key_of_its_index() {
        let p = profile(0.0);
        for (i, prob) in ALL.into_iter().enumerate() {
            assert_eq!(prob.index(), i);
            let v = p.probability(PROBABILITIES[i]).unwrap();
            assert!(!(&p).below(prob, v) && (&p).below(prob, v - 1e-9), "{}", PROBABILITIES[i]);
        }
    }

    #[test]
    fn a_set_answers_alone_where_its_members_agree_and_splits_where_they_do_not() {
        // Members 0..4 with every probability shifted by 0, 0.1, 0.2, 0.3.
        let profiles: Vec<Profile> = (0..4).map(|i| profile(f64::from(i) / 10.0)).collect();
        let mut set = ProfileSet::new(&profiles);
        set.start();
        assert!(set.take_next());
        assert_eq!(set.members(), [0, 1, 2, 3]);
        // p_continue is 0.05, 0.15, 0.25, 0.35.
        assert!(set.below(Prob::Continue, 0.04));
        assert!(!set.below(Prob::Continue, 0.35));
        assert_eq!(set.members(), [0, 1, 2, 3], "no split while all agree");
        // 0.2 is below 0.25 and 0.35 only.
        assert!(set.below(Prob::Continue, 0.2));
        assert_eq!(set.members(), [2, 3]);
        // A draw equal to a value is not below it, as with one profile: 0.25 leaves member 2.
        assert!((&profiles[3]).below(Prob::Continue, 0.25) && !(&profiles[2]).below(Prob::Continue, 0.25));
        assert!(set.below(Prob::Continue, 0.25));
        assert_eq!(set.members(), [3]);
        // The next set follows, newest first, with bounds of its own: perception.raw is
        // 0.45 + shift, 0.65 for member 2 alone, so 0.7 no longer splits anything.
        assert!(set.take_next());
        assert_eq!(set.members(), [2]);
        assert!(!set.below(Prob::Perception(Signal::Raw), 0.7));
        assert!(set.below(Prob::Perception(Signal::Raw), 0.6));
        assert_eq!(set.members(), [2]);
        // Every profile finishes exactly once.
        assert!(set.take_next());
        assert_eq!(set.members(), [0, 1]);
        assert!(!set.take_next());
    }
}
