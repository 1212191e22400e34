//! Splitting an audit's work over the machine's cores.
//!
//! Two shapes of parallel work, and nothing else, so the audit's threads can be read off one
//! page:
//!
//! * [`over_rows`] (and [`concat_rows`]): the same work on consecutive parts of a table's rows,
//!   the parts' results in row order. The work on a row must not depend on which part it is in,
//!   so the result is the same however the rows are split.
//! * [`side_by_side`]: two different pieces of work at once; and [`Started`], a piece of work
//!   started on a thread of its own in a [`std::thread::scope`] and finished where its result
//!   is needed, for work that runs beside several steps in turn.
//! * [`items_then_beside`]: independent pieces of work (the rules) taken in turn by this thread
//!   and by a thread that first does one other piece (the verdicts), so neither core waits
//!   while pieces are left; [`items`], the same without the other piece (a table's columns).

use std::ops::Range;
use std::thread::{Scope, ScopedJoinHandle};

/// How many parts [`over_rows`] splits rows into: one per core of the machines the audit is
/// tuned for (two).
pub const PARTS: usize = 2;

/// `work` on [`PARTS`] consecutive parts of `0..rows`, all but the first on threads of their
/// own; the parts' results in row order.
pub fn over_rows<T: Send>(rows: usize, work: impl Fn(Range<usize>) -> T + Sync) -> Vec<T> {
    let bounds: Vec<usize> = (0..=PARTS).map(|part| rows * part / PARTS).collect();
    let work = &work;
    std::thread::scope(|threads| {
        let others: Vec<_> = bounds[1..]
            .windows(2)
            .map(|part| {
                let part = part[0]..part[1];
                threads.spawn(move || work(part))
            })
            .collect();
        let mut results = vec![work(bounds[0]..bounds[1])];
        results.extend(others.into_iter().map(|thread| {
            thread
                .join()
                .expect("work on a part of the rows does not panic")
        }));
        results
    })
}

/// [`over_rows`] for work that gives a value per row: the values of all rows, in row order.
pub fn concat_rows<T: Send>(rows: usize, work: impl Fn(Range<usize>) -> Vec<T> + Sync) -> Vec<T> {
    let mut parts = over_rows(rows, work).into_iter();
    let mut all = parts.next().unwrap_or_default();
    for part in parts {
        all.extend(part);
    }
    all
}

/// `work` on every item `0..count`, and `first` on a thread of its own that then takes items
/// too: each thread takes the next item not yet taken, in order, until none is left. The
/// items' results in item order, and `first`'s. The work on an item must not depend on which
/// thread does it.
pub fn items_then_beside<T: Send, F: Send>(
    count: usize,
    work: impl Fn(usize) -> T + Sync,
    first: impl FnOnce() -> F + Send,
) -> (Vec<T>, F) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let take = || {
        let mut done = Vec::new();
        loop {
            let item = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if item >= count {
                return done;
            }
            done.push((item, work(item)));
        }
    };
    let (mut done, (first, theirs)) = std::thread::scope(|threads| {
        let beside = threads.spawn(|| {
            let first = first();
            (first, take())
        });
        let mine = take();
        (mine, beside.join().expect("work beside does not panic"))
    });
    done.extend(theirs);
    done.sort_by_key(|(item, _)| *item);
    (done.into_iter().map(|(_, result)| result).collect(), first)
}

/// `work` on every item `0..count`, taken in turn by this thread and by a thread of its own;
/// the items' results in item order.
pub fn items<T: Send>(count: usize, work: impl Fn(usize) -> T + Sync) -> Vec<T> {
    items_then_beside(count, work, || ()).0
}

/// `here` on this thread and `beside` on a thread of its own, at the same time.
pub fn side_by_side<A: Send, B: Send>(
    here: impl FnOnce() -> A + Send,
    beside: impl FnOnce() -> B + Send,
) -> (A, B) {
    std::thread::scope(|threads| {
        let beside = threads.spawn(beside);
        let here = here();
        (here, beside.join().expect("work beside does not panic"))
    })
}

/// Work running on a thread of its own in a scope, until [`Started::finish`] takes its result.
pub struct Started<'scope, T> {
    thread: ScopedJoinHandle<'scope, T>,
    what: &'static str,
}

impl<'scope, T: Send + 'scope> Started<'scope, T> {
    /// Starts `work` (`what` names it if it panics).
    pub fn start<'env>(
        threads: &'scope Scope<'scope, 'env>,
        what: &'static str,
        work: impl FnOnce() -> T + Send + 'scope,
    ) -> Started<'scope, T> {
        Started {
            thread: threads.spawn(work),
            what,
        }
    }

    /// Waits for the work and takes its result.
    pub fn finish(self) -> T {
        let what = self.what;
        self.thread
            .join()
            .unwrap_or_else(|_| panic!("{what} panicked"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_then_beside_gives_every_item_once_in_order() {
        for count in [0, 1, 2, 7, 100] {
            let taken = std::sync::Mutex::new(Vec::new());
            let (results, first) = items_then_beside(
                count,
                |item| {
                    taken.lock().unwrap().push(item);
                    item * 10
                },
                || "first",
            );
            assert_eq!(first, "first");
            assert_eq!(
                results,
                (0..count).map(|item| item * 10).collect::<Vec<_>>()
            );
            let mut taken = taken.into_inner().unwrap();
            taken.sort();
            assert_eq!(
                taken,
                (0..count).collect::<Vec<_>>(),
                "an item done twice or not at all"
            );
        }
    }

    #[test]
    fn parts_cover_every_row_once_in_order() {
        for rows in [0, 1, 2, 3, 10, 11] {
            let parts = over_rows(rows, |part| part);
            assert_eq!(parts.len(), PARTS);
            let covered: Vec<usize> = parts.into_iter().flatten().collect();
            assert_eq!(covered, (0..rows).collect::<Vec<_>>());
        }
        assert_eq!(concat_rows(5, |part| part.collect()), vec![0, 1, 2, 3, 4]);
    }
}
