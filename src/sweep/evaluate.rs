//! Evaluates a sweep's profiles: every run of every scenario under every strategy, with each
//! run's distinct trajectories simulated once for all the profiles that share them
//! ([`ProfileSet`]). Each profile's aggregates are those `run` gives under that profile alone,
//! to the bit (but for the paired differences, which no ranked metric reads): the same runs,
//! folded into the same exact integer sums.

use crate::engine::Scenario;
use crate::engine::probabilities::ProfileSet;
use crate::engine::profile::Profile;
use crate::engine::run::{Workspace, simulate_with};
use crate::metrics::aggregate::Aggregate;
use crate::metrics::run::RunMetrics;
use crate::scenario::{Loaded, RANKED};
use crate::suite::{Unit, in_parallel, summary_rows, units};

/// One scenario's aggregates per strategy: `common` holds the runs every profile shared (one
/// trajectory for all), `own[profile]` the rest; a profile's aggregate is the two merged.
#[derive(Clone, Default)]
struct Split {
    common: Vec<Aggregate>,
    own: Vec<Vec<Aggregate>>,
}

impl Split {
    fn new(strategies: usize, profiles: usize) -> Split {
        Split {
            common: vec![Aggregate::default(); strategies],
            own: vec![vec![Aggregate::default(); strategies]; profiles],
        }
    }

    fn merge(&mut self, o: &Split) {
        for (into, from) in self
            .common
            .iter_mut()
            .chain(self.own.iter_mut().flatten())
            .zip(o.common.iter().chain(o.own.iter().flatten()))
        {
            into.merge(from);
        }
    }

    /// Profile `p`'s aggregates, per strategy.
    fn of(&self, p: usize) -> Vec<Aggregate> {
        let mut aggs = self.common.clone();
        for (a, own) in aggs.iter_mut().zip(&self.own[p]) {
            a.merge(own);
        }
        aggs
    }
}

/// Per scenario, per profile of `profiles[scenario]`, per strategy: the metrics of
/// [`RANKED`]. `progress` is told of each finished unit (runs × strategies).
pub fn ranked_metrics(
    suite: &[Loaded],
    profiles: &[Vec<Profile>],
    jobs: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<Vec<Vec<[f64; 4]>>> {
    let sets: Vec<ProfileSet> = profiles.iter().map(|p| ProfileSet::new(p)).collect();
    let all = units(suite);
    let mut splits: Vec<Split> =
        suite.iter().zip(profiles).map(|(sc, p)| Split::new(sc.strategies.len(), p.len())).collect();
    let work = |ws: &mut Workspace, k: usize| {
        let u = all[k];
        let r = evaluate_unit(&suite[u.scenario], u, &sets[u.scenario], ws);
        progress((u.last - u.first) * suite[u.scenario].strategies.len() as u64);
        (u.scenario, r)
    };
    // Aggregates are exact integer sums: merged as units finish, in whatever order, they give
    // the same bytes.
    in_parallel(jobs, all.len(), &work, &mut |_, (si, r)| splits[si].merge(&r));
    suite
        .iter()
        .zip(&splits)
        .zip(profiles)
        .map(|((sc, split), p)| {
            (0..p.len())
                .map(|p| {
                    let rows = summary_rows(sc, &split.of(p));
                    rows.iter().map(|row| RANKED.map(|(m, _)| row.get(m).unwrap_or(f64::NAN))).collect()
                })
                .collect()
        })
        .collect()
}

/// Runs `unit` of `sc` under every strategy for every profile of `set`. The paired
/// differences against the baseline are left out: no ranked metric reads them.
fn evaluate_unit(sc: &Scenario, unit: Unit, set: &ProfileSet, ws: &mut Workspace) -> Split {
    let mut set = set.clone();
    let mut split = Split::new(sc.strategies.len(), set.profiles());
    let mut m = RunMetrics::default();
    ws.caching_for(sc, |ws| {
        for run in unit.first..unit.last {
            for (s, strat) in sc.strategies.iter().enumerate() {
                set.start();
                while set.take_next() {
                    m.reset(sc.faults.rules.len());
                    simulate_with(sc, strat, run, sc.seed, ws, &mut m, &mut set);
                    if set.members().len() == set.profiles() {
                        split.common[s].add(&m, run);
                    } else {
                        set.members().iter().for_each(|&p| split.own[p as usize][s].add(&m, run));
                    }
                }
            }
        }
    });
    split
}
