//! A fleet: how many copies of the agent one run holds, when each starts, and the keys that
//! give every agent its own random streams (agent 0's are a lone agent's, so a fleet of one is
//! today's run bit for bit, and adding agents never changes the draws of the others).

use super::rng::{LazyStream, splitmix64};

/// How the agents of a run start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Start {
    /// All at t = 0.
    Together,
    /// Agent k at k × `ms`.
    Every { ms: u64 },
    /// Seeded Poisson arrivals at `per_s` a second; agent 0 opens the run at t = 0.
    Poisson { per_s: f64 },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fleet {
    pub agents: u32,
    pub start: Start,
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet { agents: 1, start: Start::Together }
    }
}

/// Most agents a fleet may have.
pub const MAX_AGENTS: u32 = 10_000;

/// Agent `agent`'s version of a stream key: agent 0 keeps the key itself, agent k > 0 mixes
/// k in (as if it were one more part of the key).
pub fn agent_key(key: u64, agent: u32) -> u64 {
    if agent == 0 { key } else { splitmix64(key ^ u64::from(agent)) }
}

impl Fleet {
    /// The start time of every agent, in agent order, into `out`. Poisson gaps are drawn from
    /// `arrivals` by agent number, so agent k starts at the same time however many follow it.
    pub fn start_times(&self, arrivals: &mut LazyStream, out: &mut Vec<u64>) {
        out.clear();
        let n = u64::from(self.agents);
        match self.start {
            Start::Together => out.resize(self.agents as usize, 0),
            Start::Every { ms } => out.extend((0..n).map(|k| k.saturating_mul(ms))),
            Start::Poisson { per_s } => {
                let mut t = 0.0f64;
                out.push(0);
                for k in 1..n {
                    // Exponential gap in ms; 1 − u is in (0, 1], so the logarithm is finite.
                    t += -libm::log(1.0 - arrivals.unit(k)) * 1000.0 / per_s;
                    out.push(t.round() as u64);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_follow_the_chosen_rule() {
        let mut arrivals = LazyStream::default();
        arrivals.reset(7);
        let mut out = Vec::new();
        Fleet { agents: 3, start: Start::Together }.start_times(&mut arrivals, &mut out);
        assert_eq!(out, [0, 0, 0]);
        Fleet { agents: 4, start: Start::Every { ms: 250 } }.start_times(&mut arrivals, &mut out);
        assert_eq!(out, [0, 250, 500, 750]);

        // Poisson: non-decreasing, agent k's start independent of how many follow, and the mean
        // gap near 1000 / per_s.
        let poisson = |agents| {
            let mut a = LazyStream::default();
            a.reset(7);
            let mut out = Vec::new();
            Fleet { agents, start: Start::Poisson { per_s: 20.0 } }.start_times(&mut a, &mut out);
            out
        };
        let many = poisson(5000);
        assert!(many.windows(2).all(|w| w[0] <= w[1]));
        // The gaps are exponential: agent 1 starts −ln(1 − u₁)·1000 / per_s ms after agent 0.
        let mut a = LazyStream::default();
        a.reset(7);
        assert_eq!(many[1], (-libm::log(1.0 - a.unit(1)) * 1000.0 / 20.0).round() as u64);
        assert_eq!(poisson(10)[..], many[..10]);
        let mean_gap = many[4999] as f64 / 4999.0;
        assert!((mean_gap - 50.0).abs() < 3.0, "mean gap {mean_gap}");
    }

    #[test]
    fn agent_zero_keeps_the_key() {
        assert_eq!(agent_key(42, 0), 42);
        // Agent k's key is the key with k as one more part.
        use super::super::rng::key;
        assert_eq!(agent_key(key(&[1, 2]), 3), key(&[1, 2, 3]));
        assert_ne!(agent_key(42, 1), agent_key(42, 2));
    }
}
