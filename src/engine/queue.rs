//! The run's event queue: pending events of every agent, ordered by (time, insertion).
//!
//! Ties in time go to the earlier insertion, which keeps runs deterministic. The agent shares
//! a word with the insertion number (below it, so the order is the insertion's), which keeps an
//! entry at 24 bytes. A lone agent rarely holds more than a few events, and a linear scan of a
//! few beats any heap; past [`Queue::SMALL`] (a fleet, or a wide parallel turn) they move to a
//! timing wheel. Virtual time never runs back — nothing is scheduled before the event being
//! handled — so the queue is monotone, and a wheel of one slot per millisecond over the next
//! few seconds (Varghese and Lauck, 1987) serves it with a push and a pop in constant time;
//! the few events scheduled further ahead wait in a binary heap until the wheel reaches them.

use std::cmp::Reverse;

/// Bits of an entry's second word that hold the agent (enough for `MAX_AGENTS`).
pub const AGENT_BITS: u32 = 14;
const AGENT: u64 = (1 << AGENT_BITS) - 1;

/// One pending event: its time, its insertion number (agent in the low bits), the event.
type Entry<E> = (u64, u64, E);

pub struct Queue<E> {
    small: Vec<Entry<E>>,
    wheel: Wheel<E>,
    seq: u64,
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Self { small: Vec::new(), wheel: Wheel::default(), seq: 0 }
    }
}

impl<E: Copy + Ord> Queue<E> {
    const SMALL: usize = 8;

    pub fn clear(&mut self) {
        self.small.clear();
        self.wheel.clear();
        self.seq = 0;
    }

    // Inlined by hand: whether the compiler inlines these on its own shifted with unrelated
    // code elsewhere in the crate and cost the engine up to 20%.
    /// Schedules `ev` of `agent` at `t`, which is never before the last event popped.
    #[inline(always)]
    pub fn push(&mut self, t: u64, agent: u32, ev: E) {
        self.seq += 1 << AGENT_BITS;
        let seq = self.seq | u64::from(agent);
        if self.wheel.is_empty() && self.small.len() < Self::SMALL {
            self.small.push((t, seq, ev));
        } else {
            if self.wheel.is_empty() {
                self.wheel.start(&mut self.small);
            }
            self.wheel.push((t, seq, ev));
        }
    }

    /// The earliest event (the first scheduled among equals) and its agent.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<(u64, u32, E)> {
        // The wheel is almost always empty: asking it (out of line) costs every pop.
        if !self.wheel.is_empty() {
            let (t, seq, ev) = self.wheel.pop();
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

/// The wheel's window: one slot per millisecond of virtual time for this many milliseconds.
const SLOT_BITS: u32 = 12;
const SLOTS: usize = 1 << SLOT_BITS;
const WORDS: usize = SLOTS / 64;
const _: () = assert!(WORDS <= 64, "one summary word covers the slot words");
/// No node: the end of a slot's list, or an empty free list.
const NIL: u32 = u32::MAX;

/// An event in a slot, in the order it was scheduled.
#[derive(Clone, Copy)]
struct Node<E> {
    seq: u64,
    ev: E,
    next: u32,
}

/// An event past the wheel's window, earliest first in a binary heap (insertion numbers are
/// unique, so the event itself is never compared).
type Later<E> = Reverse<Entry<E>>;

/// A timing wheel over a window of [`SLOTS`] milliseconds from `base`, for a monotone queue.
/// Each slot lists its events in the order they were scheduled (all at the same time, so in
/// insertion order); a two-level bitmap finds the first full slot in two bit scans. Events past
/// the window wait in a binary heap; when the wheel runs empty it moves to the earliest of them
/// and takes in every one that fits, in order, so each event is moved at most once.
struct Wheel<E> {
    len: usize,
    /// Whether `base` holds: not until the first pop after [`Wheel::start`].
    anchored: bool,
    base: u64,
    /// Bit `s % 64` of `words[s / 64]` is set when slot `s` holds something; bit `w` of
    /// `summary` when `words[w]` is not zero.
    summary: u64,
    words: [u64; WORDS],
    /// First and last node of each full slot (stale in an empty one).
    ends: Vec<(u32, u32)>,
    nodes: Vec<Node<E>>,
    /// Nodes popped, linked through `next`, for reuse.
    free: u32,
    later: std::collections::BinaryHeap<Later<E>>,
}

impl<E> Default for Wheel<E> {
    fn default() -> Self {
        Self {
            len: 0,
            anchored: false,
            base: 0,
            summary: 0,
            words: [0; WORDS],
            ends: Vec::new(),
            nodes: Vec::new(),
            free: NIL,
            later: std::collections::BinaryHeap::new(),
        }
    }
}

impl<E: Copy + Ord> Wheel<E> {
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn clear(&mut self) {
        while self.summary != 0 {
            self.words[self.summary.trailing_zeros() as usize] = 0;
            self.summary &= self.summary - 1;
        }
        self.nodes.clear();
        self.free = NIL;
        self.later.clear();
        self.len = 0;
        self.anchored = false;
    }

    /// Starts the empty wheel with `entries` (moved out). Where its window begins is not known
    /// until the first pop (an event may yet be scheduled before all of these), so they wait.
    #[cold]
    fn start(&mut self, entries: &mut Vec<Entry<E>>) {
        self.anchored = false;
        for e in entries.drain(..) {
            self.push(e);
        }
    }

    fn push(&mut self, (t, seq, ev): Entry<E>) {
        self.len += 1;
        let slot = t.wrapping_sub(self.base);
        if self.anchored && slot < SLOTS as u64 {
            self.put(slot as usize, seq, ev);
        } else {
            self.later.push(Reverse((t, seq, ev)));
        }
    }

    /// Appends an event to slot `s`.
    fn put(&mut self, s: usize, seq: u64, ev: E) {
        let node = Node { seq, ev, next: NIL };
        let i = if self.free == NIL {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        } else {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = node;
            i
        };
        let (w, bit) = (s / 64, 1 << (s % 64));
        if self.words[w] & bit == 0 {
            self.words[w] |= bit;
            self.summary |= 1 << w;
            self.ends[s] = (i, i);
        } else {
            self.nodes[self.ends[s].1 as usize].next = i;
            self.ends[s].1 = i;
        }
    }

    /// The minimum; the wheel must not be empty.
    fn pop(&mut self) -> Entry<E> {
        if self.summary == 0 {
            self.advance();
        }
        let w = self.summary.trailing_zeros() as usize;
        let b = self.words[w].trailing_zeros() as usize;
        let s = w * 64 + b;
        let i = self.ends[s].0;
        let node = self.nodes[i as usize];
        if node.next == NIL {
            self.words[w] &= !(1 << b);
            if self.words[w] == 0 {
                self.summary &= !(1 << w);
            }
        } else {
            self.ends[s].0 = node.next;
        }
        self.nodes[i as usize].next = self.free;
        self.free = i;
        self.len -= 1;
        (self.base + s as u64, node.seq, node.ev)
    }

    /// Moves the empty wheel's window to the earliest event waiting past it, taking in every
    /// event that now fits (nothing is scheduled before an event popped, so none goes below).
    #[cold]
    fn advance(&mut self) {
        if self.ends.is_empty() {
            self.ends.resize(SLOTS, (NIL, NIL));
        }
        let Some(Reverse((first, ..))) = self.later.peek() else { unreachable!("advancing an empty wheel") };
        self.base = *first;
        self.anchored = true;
        while let Some(Reverse((t, ..))) = self.later.peek()
            && t - self.base < SLOTS as u64
        {
            let Some(Reverse((t, seq, ev))) = self.later.pop() else { break };
            self.put((t - self.base) as usize, seq, ev);
        }
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

    /// Up to [`Queue::SMALL`] events are scanned in place; one more moves them all to the wheel,
    /// which keeps the queue's events until it runs empty. (The order alone cannot tell: a
    /// queue that never used the wheel, or always did, pops the same, only slower.)
    #[test]
    fn past_eight_events_the_wheel_holds_them() {
        type Q = Queue<()>;
        let mut q = Q::default();
        for k in 0..Q::SMALL as u64 {
            q.push(k, 0, ());
            assert_eq!((q.small.len(), q.wheel.len), (k as usize + 1, 0), "{} events", k + 1);
        }
        q.push(3, 0, ());
        assert_eq!((q.small.len(), q.wheel.len), (0, Q::SMALL + 1), "one past the scan");
        q.pop();
        q.push(4, 0, ());
        assert_eq!((q.small.len(), q.wheel.len), (0, Q::SMALL + 1), "the wheel keeps taking them");
        while q.pop().is_some() {}
        q.push(9, 0, ());
        assert_eq!((q.small.len(), q.wheel.len), (1, 0), "an emptied wheel hands back to the scan");
    }

    /// A cleared wheel forgets every slot, in every word of its bitmap: a new run that puts
    /// events in the same slots finds them empty.
    #[test]
    fn a_cleared_wheel_forgets_slots_in_every_word() {
        let mut q = Queue::default();
        // Slots in four words (0 to 3), so the summary holds more than its lowest bit.
        let times = [0, 1, 70, 71, 200, 201, 130, 2, 3, 4];
        for (k, t) in times.into_iter().enumerate() {
            q.push(t, k as u32, 'x');
        }
        assert_eq!(q.pop(), Some((0, 0, 'x')));
        q.clear();
        for (k, t) in times.into_iter().enumerate() {
            q.push(t, k as u32, 'y');
        }
        let popped: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        let mut want: Vec<_> = times.into_iter().enumerate().map(|(k, t)| (t, k as u32, 'y')).collect();
        want.sort();
        assert_eq!(popped, want);
    }

    /// The window's last slot is in the wheel; the next millisecond waits past it.
    #[test]
    fn the_window_ends_one_slot_before_its_length() {
        let mut q = Queue::default();
        for k in 0..10 {
            q.push(0, k, ());
        }
        assert_eq!(q.pop(), Some((0, 0, ())), "anchored at 0");
        let edge = SLOTS as u64;
        q.push(edge, 20, ());
        q.push(edge - 1, 21, ());
        assert_eq!(q.wheel.later.len(), 1, "only the event at the window's length waits past it");
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).skip(9).collect();
        assert_eq!(rest, [(edge - 1, 21, ()), (edge, 20, ())]);

        // The same edge when the emptied wheel moves its window to the earliest waiting event.
        for k in 0..10 {
            q.push(0, k, ());
        }
        q.pop();
        let far = 3 * edge;
        q.push(far + edge, 30, ());
        q.push(far, 31, ());
        q.push(far + edge - 1, 32, ());
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).skip(9).take(1).collect();
        assert_eq!(rest, [(far, 31, ())]);
        assert_eq!(q.wheel.later.len(), 1, "taken in up to the window's last slot");
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, [(far + edge - 1, 32, ()), (far + edge, 30, ())]);
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

    /// Events scheduled past the wheel's window wait, are taken in when it moves to them, and
    /// keep their place before events scheduled at the same time after it moved.
    #[test]
    fn events_past_the_window_keep_their_order() {
        let mut q = Queue::default();
        let far = SLOTS as u64 + 900;
        for k in 0..10 {
            q.push(k, k as u32, 'n');
        }
        assert_eq!(q.pop(), Some((0, 0, 'n')), "the wheel anchors at the first pop");
        q.push(far, 20, 'x');
        q.push(far, 21, 'y');
        q.push(far - 1, 22, 'w');
        for k in 1..10 {
            assert_eq!(q.pop(), Some((k, k as u32, 'n')));
        }
        assert_eq!(q.pop(), Some((far - 1, 22, 'w')));
        assert_eq!(q.pop(), Some((far, 20, 'x')));
        q.push(far, 23, 'z');
        q.push(far + 2 * SLOTS as u64, 24, 'v');
        q.push(far + 1, 25, 'u');
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, [(far, 21, 'y'), (far, 23, 'z'), (far + 1, 25, 'u'), (far + 2 * SLOTS as u64, 24, 'v')]);
    }

    proptest! {
        /// Against a sorted reference: pushes and pops interleaved, every push at or after the
        /// time last popped (the engine's only use), in both the small and the wheel regimes.
        #[test]
        fn pops_in_time_then_insertion_order(
            most in 1usize..4,
            // Mostly near (ties and the wheel), sometimes past the wheel's window.
            ops in prop::collection::vec(
                (prop_oneof![4 => 0u64..50, 1 => 0..3 * SLOTS as u64], 0u32..4, 0usize..4),
                1..400,
            ),
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
