//! The run's event queue: pending events of every agent, ordered by (time, insertion).
//!
//! Ties in time go to the earlier insertion, which keeps runs deterministic. The agent shares
//! a word with the insertion number (below it, so the order is the insertion's), which keeps an
//! entry at 24 bytes. A lone agent rarely holds more than a few events, and a linear scan of a
//! few beats any heap; past [`Queue::SMALL`] (a fleet, or a wide parallel turn) they move to a
//! radix heap. Virtual time never runs back — nothing is scheduled before the event being
//! handled — so the queue is monotone, and a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan,
//! 1990) serves it with a push in constant time and a pop that moves each entry down a few
//! buckets over its life, instead of a binary heap's logarithmic sifts on every push and pop.

/// Bits of an entry's second word that hold the agent (enough for `MAX_AGENTS`).
pub const AGENT_BITS: u32 = 14;
const AGENT: u64 = (1 << AGENT_BITS) - 1;

/// One pending event: its time, its insertion number (agent in the low bits), the event.
type Entry<E> = (u64, u64, E);

pub struct Queue<E> {
    small: Vec<Entry<E>>,
    heap: RadixHeap<E>,
    seq: u64,
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Self { small: Vec::new(), heap: RadixHeap::default(), seq: 0 }
    }
}

impl<E: Copy> Queue<E> {
    const SMALL: usize = 8;

    pub fn clear(&mut self) {
        self.small.clear();
        self.heap.clear();
        self.seq = 0;
    }

    // Inlined by hand: whether the compiler inlines these on its own shifted with unrelated
    // code elsewhere in the crate and cost the engine up to 20%.
    /// Schedules `ev` of `agent` at `t`, which is never before the last event popped.
    #[inline(always)]
    pub fn push(&mut self, t: u64, agent: u32, ev: E) {
        self.seq += 1 << AGENT_BITS;
        let seq = self.seq | u64::from(agent);
        if self.heap.is_empty() && self.small.len() < Self::SMALL {
            self.small.push((t, seq, ev));
        } else {
            if self.heap.is_empty() {
                self.heap.start(&mut self.small);
            }
            self.heap.push((t, seq, ev));
        }
    }

    /// The earliest event (the first scheduled among equals) and its agent.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<(u64, u32, E)> {
        // The heap is almost always empty: asking it (out of line) costs every pop.
        if !self.heap.is_empty() {
            let (t, seq, ev) = self.heap.pop();
            return Some((t, (seq & AGENT) as u32, ev));
        }
        if self.small.len() == 1 {
            // The common case: one event pending (the one just scheduled).
            let (t, seq, ev) = self.small[0];
            self.small.clear();
            return Some((t, (seq & AGENT) as u32, ev));
        }
        let (i, &(t, seq, ev)) = self.small.iter().enumerate().min_by_key(|(_, e)| (e.0, e.1))?;
        // Not `swap_remove`: it copies the last entry even onto itself, and that wide read of
        // an entry just written field by field stalls store forwarding (a run's queue mostly
        // holds the one event pushed a moment ago).
        let last = self.small.len() - 1;
        if i != last {
            self.small[i] = self.small[last];
        }
        self.small.truncate(last);
        Some((t, (seq & AGENT) as u32, ev))
    }
}

/// Buckets of a radix heap over 128-bit keys (time, insertion): bucket `b` holds the entries
/// whose key first differs from the last key popped at bit `b`.
const BUCKETS: usize = 128;

/// A monotone priority queue. Every key it holds is above `last`, the key popped last; an
/// entry lives in the bucket of the highest bit where its key differs from `last`, so the
/// lowest non-empty bucket holds the minimum. Popping from a bucket of several entries makes
/// their minimum the new `last` and spreads the rest over lower buckets.
struct RadixHeap<E> {
    buckets: Vec<Vec<Entry<E>>>,
    /// Bit `b` is set when bucket `b` holds something.
    full: u128,
    last: (u64, u64),
}

impl<E> Default for RadixHeap<E> {
    fn default() -> Self {
        Self { buckets: Vec::new(), full: 0, last: (0, 0) }
    }
}

impl<E: Copy> RadixHeap<E> {
    fn is_empty(&self) -> bool {
        self.full == 0
    }

    fn clear(&mut self) {
        self.buckets.iter_mut().for_each(Vec::clear);
        self.full = 0;
    }

    /// Starts the empty heap with `entries` (moved out), ordered from scratch.
    #[cold]
    fn start(&mut self, entries: &mut Vec<Entry<E>>) {
        if self.buckets.is_empty() {
            self.buckets.resize_with(BUCKETS, Vec::new);
        }
        // Every key is above (0, 0): insertion numbers start at one.
        self.last = (0, 0);
        for e in entries.drain(..) {
            self.push(e);
        }
    }

    /// The bucket of key (`t`, `seq`) when `last` was popped last.
    fn bucket_of(last: (u64, u64), t: u64, seq: u64) -> usize {
        if t == last.0 {
            (u64::BITS - 1 - (seq ^ last.1).leading_zeros()) as usize
        } else {
            (2 * u64::BITS - 1 - (t ^ last.0).leading_zeros()) as usize
        }
    }

    fn push(&mut self, e: Entry<E>) {
        debug_assert!((e.0, e.1) > self.last, "an event scheduled before the last one popped");
        let b = Self::bucket_of(self.last, e.0, e.1);
        self.buckets[b].push(e);
        self.full |= 1 << b;
    }

    /// The minimum; the heap must not be empty.
    fn pop(&mut self) -> Entry<E> {
        let b = self.full.trailing_zeros() as usize;
        let (lower, upper) = self.buckets.split_at_mut(b);
        let from = &mut upper[0];
        self.full &= !(1 << b);
        let min = if from.len() == 1 {
            from[0]
        } else {
            let key = |e: &Entry<E>| u128::from(e.0) << 64 | u128::from(e.1);
            let min = *from.iter().min_by_key(|e| key(e)).expect("a full bucket");
            // The rest differ from the new minimum below bit `b`.
            let last = (min.0, min.1);
            for &e in from.iter().filter(|e| e.1 != min.1) {
                let to = Self::bucket_of(last, e.0, e.1);
                lower[to].push(e);
                self.full |= 1 << to;
            }
            min
        };
        from.clear();
        self.last = (min.0, min.1);
        min
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ties_in_time_go_to_the_earlier_insertion() {
        let mut q = Queue::default();
        for (k, t) in [5, 3, 5, 3, 9, 3, 5, 1, 5, 3, 2, 7].into_iter().enumerate() {
            q.push(t, k as u32, ());
        }
        let popped: Vec<(u64, u32)> = std::iter::from_fn(|| q.pop()).map(|(t, a, ())| (t, a)).collect();
        let want = [(1, 7), (2, 10), (3, 1), (3, 3), (3, 5), (3, 9), (5, 0), (5, 2), (5, 6), (5, 8), (7, 11), (9, 4)];
        assert_eq!(popped, want);
    }

    #[test]
    fn a_cleared_queue_holds_nothing_of_its_last_run() {
        let mut q = Queue::default();
        for small in [true, false] {
            let n = if small { 3 } else { 20 };
            for k in 0..n {
                q.push(100 + k, k as u32, 'x');
            }
            q.pop();
            q.clear();
            assert_eq!(q.pop(), None);
            // A new run's times start again from zero.
            for k in 0..n {
                q.push(n - k, k as u32, 'y');
            }
            let popped: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
            let want: Vec<_> = (0..n).rev().map(|k| (n - k, k as u32, 'y')).collect();
            assert_eq!(popped, want, "small: {small}");
        }
    }

    /// Times at the far end of the clock (a wait that saturated) keep their order.
    #[test]
    fn times_at_the_end_of_the_clock_keep_their_order() {
        let mut q = Queue::default();
        let times = [u64::MAX, 0, 1 << 63, u64::MAX - 1, 5, (1 << 63) - 1, u64::MAX, 1 << 62, 7, 3];
        for (k, t) in times.into_iter().enumerate() {
            q.push(t, k as u32, ());
        }
        let popped: Vec<(u64, u32)> = std::iter::from_fn(|| q.pop()).map(|(t, a, ())| (t, a)).collect();
        let mut want: Vec<(u64, u32)> = times.into_iter().enumerate().map(|(k, t)| (t, k as u32)).collect();
        want.sort();
        assert_eq!(popped, want);
    }

    proptest! {
        /// Against a sorted reference: pushes and pops interleaved, every push at or after the
        /// time last popped (the engine's only use), in both the small and the heap regimes.
        #[test]
        fn pops_in_time_then_insertion_order(
            most in 1usize..4,
            ops in prop::collection::vec((0u64..50, 0u32..4, 0usize..4), 1..400),
        ) {
            let mut q = Queue::default();
            let mut reference: Vec<(u64, u64, u32)> = Vec::new();
            let (mut now, mut n) = (0, 0);
            // Up to `most` pops after each push: the queue grows (one), wanders (two) or keeps
            // emptying (three), so both regimes and the moves between them are met.
            for (dt, agent, pops) in ops {
                let pops = pops.min(most);
                n += 1;
                q.push(now + dt, agent, n);
                reference.push((now + dt, n, agent));
                reference.sort_unstable_by(|a, b| b.cmp(a));
                for _ in 0..pops {
                    let want = reference.pop().map(|(t, n, a)| (t, a, n));
                    let got = q.pop();
                    prop_assert_eq!(got, want);
                    if let Some((t, ..)) = got {
                        now = t;
                    }
                }
            }
            while let Some(want) = reference.pop() {
                prop_assert_eq!(q.pop(), Some((want.0, want.2, want.1)));
            }
            prop_assert_eq!(q.pop(), None);
        }
    }
}
