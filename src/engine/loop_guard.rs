//! Loop guard: counts, per (tool, canonical args), how often the model was handed the same
//! failing or partial outcome class; the K-th time stops the run.

use crate::fault::ErrorClass;

#[derive(Clone, Debug, Default)]
pub struct LoopGuard {
    /// Deliveries per key; a handful in a run, so a vector, until a wide run makes it a map.
    seen: Vec<(u64, u32)>,
    many: std::collections::HashMap<u64, u32>,
}

impl LoopGuard {
    pub fn reset(&mut self) {
        self.seen.clear();
        self.many.clear();
    }

    /// Counts one delivery of `class` for (tool, args, variant); returns the new count.
    pub fn hit(&mut self, tool: u16, args: u32, variant: u32, class: ErrorClass) -> u32 {
        let k = (u64::from(tool) << 48) ^ (u64::from(args) << 20) ^ (u64::from(variant) << 4) ^ class as u64;
        if !self.many.is_empty() {
            let n = self.many.entry(k).or_insert(0);
            *n += 1;
            return *n;
        }
        if let Some(e) = self.seen.iter_mut().find(|e| e.0 == k) {
            e.1 += 1;
            return e.1;
        }
        if self.seen.len() < 16 {
            self.seen.push((k, 1));
        } else {
            self.many.extend(self.seen.drain(..));
            self.many.insert(k, 1);
        }
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_non_consecutive_repeats() {
        let mut g = LoopGuard::default();
        assert_eq!(g.hit(0, 1, 0, ErrorClass::Partial), 1);
        assert_eq!(g.hit(0, 2, 0, ErrorClass::Partial), 1);
        assert_eq!(g.hit(0, 1, 0, ErrorClass::Transient), 1);
        assert_eq!(g.hit(0, 1, 0, ErrorClass::Partial), 2);
        assert_eq!(g.hit(0, 1, 1, ErrorClass::Partial), 1, "changed arguments are another call");
        assert_eq!(g.hit(0, 1, 0, ErrorClass::Partial), 3);
    }

    #[test]
    fn counts_keep_going_once_a_wide_run_moves_them_to_a_map() {
        let mut g = LoopGuard::default();
        for args in 0..20 {
            assert_eq!(g.hit(0, args, 0, ErrorClass::Partial), 1);
        }
        assert!(!g.many.is_empty());
        assert_eq!(g.hit(0, 3, 0, ErrorClass::Partial), 2);
        assert_eq!(g.hit(0, 19, 0, ErrorClass::Partial), 2);
        assert_eq!(g.hit(0, 3, 0, ErrorClass::Partial), 3);
    }
}
