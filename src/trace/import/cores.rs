//! Work shared over the machine's cores with its results in input order, so what a reader
//! makes is the same on one core or many.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How many items a thread takes at a time: few enough to share uneven items, enough that
/// taking them costs nothing beside the work.
const TAKE: usize = 4;

/// The machine's cores (1 when it will not say).
pub fn available() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The lines in windows of about `size` bytes, as ranges of line numbers (a line longer than
/// `size` is a window of its own).
pub fn windows(lines: &[&str], size: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut from, mut bytes) = (0, 0);
    for (n, line) in lines.iter().enumerate() {
        bytes += line.len();
        if bytes >= size || n + 1 == lines.len() {
            out.push(from..n + 1);
            (from, bytes) = (n + 1, 0);
        }
    }
    out
}

/// `f` of each item (with its index), in input order, on up to `cores` threads; each item is
/// dropped on the thread that used it. A panic in `f` is a panic here.
pub fn map_in_order<T: Send, R: Send>(items: Vec<T>, cores: usize, f: impl Fn(usize, T) -> R + Sync) -> Vec<R> {
    let threads = cores.min(items.len().div_ceil(TAKE));
    if threads <= 1 {
        return items.into_iter().enumerate().map(|(i, t)| f(i, t)).collect();
    }
    let count = items.len();
    let cells: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let from = next.fetch_add(TAKE, Ordering::Relaxed);
            if from >= count {
                return done;
            }
            for (i, cell) in cells.iter().enumerate().take((from + TAKE).min(count)).skip(from) {
                let item = cell.lock().ok().and_then(|mut c| c.take()).expect("each item is taken once");
                done.push((i, f(i, item)));
            }
        }
    };
    let shares: Vec<Vec<(usize, R)>> = std::thread::scope(|s| {
        let others: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
        let mine = work();
        let mut shares: Vec<_> =
            others.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect();
        shares.push(mine);
        shares
    });
    let mut slots: Vec<Option<R>> = std::iter::repeat_with(|| None).take(count).collect();
    for (i, r) in shares.into_iter().flatten() {
        slots[i] = Some(r);
    }
    slots.into_iter().map(|r| r.expect("every index is taken exactly once")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On any number of cores, each item's result in its place, each computed once.
    #[test]
    fn results_keep_their_order() {
        let items: Vec<u64> = (0..1000).collect();
        let calls = AtomicUsize::new(0);
        for cores in [1, 2, 3, 8] {
            calls.store(0, Ordering::Relaxed);
            let out = map_in_order(items.clone(), cores, |i, x| {
                calls.fetch_add(1, Ordering::Relaxed);
                (i as u64) * 1000 + x * x
            });
            let want: Vec<u64> = items.iter().map(|x| x * 1000 + x * x).collect();
            assert_eq!(out, want, "{cores} cores");
            assert_eq!(calls.load(Ordering::Relaxed), items.len());
        }
        assert!(map_in_order(Vec::<u8>::new(), 4, |_, x| x).is_empty());
    }
}
