//! Asking the processor for memory ahead.
//!
//! When rows come in no order (a shuffled snapshot, a PostgreSQL table after years of updates),
//! each row of a loop that looks things up by code reads memory the cache does not hold, and
//! the processor waits for each read in turn. Asking for the memory a row a few places on will
//! read, while this row is worked on, lets those waits overlap. Asking is only a hint: nothing
//! waits for it, nothing is read, and what the loop computes is the same with or without it.
//!
//! * [`prefetch`] asks for one address, [`ask`] for one element of a slice;
//! * [`each_row`] is the loop: it asks for what rows [`FAR`] and [`NEAR`] places on will read
//!   before it works on a row;
//! * [`values`] gives the slice a numeric column's cells are in, to ask for; [`ask_text`] asks
//!   for a text cell.
//!
//! The dictionary's batch coding (`crate::dictionary`) asks the same way over hashed values.

use std::ops::Range;

use polars::prelude::*;

/// How many rows on [`each_row`] asks for what a row itself names.
pub const FAR: usize = 16;
/// How many rows on [`each_row`] asks for what that names in turn (read by then from the cache).
pub const NEAR: usize = 8;

/// Asks the processor to bring the memory at `at` into its cache. Elsewhere than on x86-64 it
/// does nothing.
#[inline(always)]
pub fn prefetch<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and cannot fault, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(at.cast::<i8>(), std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Asks for `values[index]`, if there is one.
#[inline(always)]
pub fn ask<T>(values: &[T], index: usize) {
    if let Some(value) = values.get(index) {
        prefetch(value);
    }
}

/// `work` on each row of `rows` in order. Before each, `far` is called with the row [`FAR`] on
/// and `near` with the row [`NEAR`] on, where `rows` has them: `far` asks for what that row
/// names (its cells in other tables), `near` for what those name in turn.
#[inline]
pub fn each_row(
    rows: Range<usize>,
    far: impl Fn(usize),
    near: impl Fn(usize),
    mut work: impl FnMut(usize),
) {
    for row in rows.clone() {
        if row + FAR < rows.end {
            far(row + FAR);
        }
        if row + NEAR < rows.end {
            near(row + NEAR);
        }
        work(row);
    }
}

/// The values of a numeric column's first chunk (all of them for a column of one chunk), to
/// ask for by row.
pub fn values<T: PolarsNumericType>(column: &ChunkedArray<T>) -> &[T::Native] {
    column
        .downcast_iter()
        .next()
        .map_or(&[], |array| array.values().as_slice())
}

/// Asks for the view of a text column's cell at `row` (its length and where its bytes are),
/// in the column's first chunk (all of it for a column of one chunk).
#[inline]
pub fn ask_text(column: &StringChunked, row: usize) {
    if let Some(array) = column.downcast_iter().next() {
        ask(array.views().as_slice(), row);
    }
}
