//! Loop guard: counts, per (tool, canonical args), how often the model was handed the same
//! failing or partial outcome class; the K-th time stops the run.

use crate::fault::ErrorClass;

#[derive(Clone, Debug, Default)]
pub struct LoopGuard {
    seen: Vec<(u64, u32)>,
}

impl LoopGuard {
    pub fn reset(&mut self) {
        self.seen.clear();
    }

    /// Counts one delivery of `class` for (tool, args, variant); returns the new count.
    pub fn hit(&mut self, tool: u16, args: u32, variant: u32, class: ErrorClass) -> u32 {
        let k = (u64::from(tool) << 48) ^ (u64::from(args) << 20) ^ (u64::from(variant) << 4) ^ class as u64;
        match self.seen.iter_mut().find(|e| e.0 == k) {
            Some(e) => {
                e.1 += 1;
                e.1
            }
            None => {
                self.seen.push((k, 1));
                1
            }
        }
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
}
