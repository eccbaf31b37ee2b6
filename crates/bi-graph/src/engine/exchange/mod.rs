//! How values cross partitions: the one seam between the GAS loop and the modes.
//!
//! A superstep moves two things between partitions. Replicas hand their partial sums to
//! their masters (after gather), and masters hand their new values, with their share of
//! the global aggregate, to everyone (after apply). The worker says *what* crosses, in a
//! fixed order, and an [`Exchange`] decides *how*:
//!
//! - [`Messages`] (the stock mode): replicas keep private copies of their masters'
//!   values; everything crosses as messages over channels in shared memory.
//! - [`SharedSlots`] (the BI modes): every value and partial has one slot in its
//!   writer's lines, and readers load it in place. Quiescence either happens at the
//!   phase ends (on demand: write back, barrier, invalidate what will be read) or in the
//!   background (periodic: the runtime's passes; the phase ends only wait).
//!
//! Either way the order of a superstep `t` is: `put_partial` for every feeding replica in
//! increasing local order and `put_value` for the masters no replica feeds, in master
//! order; then, if any replica anywhere feeds, `exchange_partials` and for every other
//! master in master order `next_partial` for each of its feeding replicas in increasing
//! partition order and `put_value`; then `exchange_values`. Gather reads the values of
//! stamp `t` from one bank of value slots while `put_value` writes stamp `t + 1` to the
//! other ([`bank`]), so a master can be applied while others still read its old value.

pub(crate) mod messages;
#[cfg(feature = "mpi")]
pub(crate) mod pooled;
pub(crate) mod slots;

pub(crate) use messages::{Channels, Expected, Messages};
pub(crate) use slots::SharedSlots;

use super::memory::WordSource;
use crate::error::GraphError;
use std::time::{Duration, Instant};

/// A program value, an aggregate or a partial, encoded as two words
/// ([`encode`](super::memory::encode)).
pub(crate) type Words = [u64; 2];

/// `value`'s words (at most two) as [`Words`], zero padded.
#[inline]
pub(crate) fn padded(value: &[u64]) -> Words {
    let mut w = [0; 2];
    for (x, &v) in w.iter_mut().zip(value) {
        *x = v;
    }
    w
}

/// The meta word of a value or partial, stored as itself: the superstep that wrote it
/// (its stamp, 0 for never) above one flag ("changed" for a value, "signalled" for a
/// partial).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct Meta(u64);

impl Meta {
    /// The meta word of superstep `stamp` with `flag`.
    #[inline]
    pub(crate) const fn new(stamp: u64, flag: bool) -> Meta {
        Meta(stamp << 1 | flag as u64)
    }

    /// From the stored word.
    #[inline]
    pub(crate) const fn from_word(word: u64) -> Meta {
        Meta(word)
    }

    /// The stored word.
    #[inline]
    pub(crate) const fn word(self) -> u64 {
        self.0
    }

    /// The superstep that wrote it.
    #[inline]
    pub(crate) const fn stamp(self) -> u64 {
        self.0 >> 1
    }

    /// The flag: "changed" for a value, "signalled" for a partial.
    #[inline]
    pub(crate) const fn flag(self) -> bool {
        self.0 & 1 == 1
    }
}

/// Where the exchanges of the BI modes spend their quiescence: writing back what this
/// partition wrote, waiting at the barrier, and dropping what it will read (with the
/// fences). The stock mode's exchanges wait for messages instead, and report none.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Quiescence {
    pub write_back: Duration,
    pub wait: Duration,
    pub invalidate: Duration,
}

/// Adds the time since `*since` to `total` and restarts `since`: one phase ends, the
/// next begins.
#[inline]
pub(crate) fn lap(since: &mut Instant, total: &mut Duration) {
    let now = Instant::now();
    *total += now - *since;
    *since = now;
}

/// The bank of value slots that holds the values of stamp `stamp`.
#[inline]
pub(crate) fn bank(stamp: u64) -> usize {
    (stamp & 1) as usize
}

/// How one partition's values and partials reach the others.
pub(crate) trait Exchange {
    /// Where gather and scatter read vertex values (data words, then the meta word).
    type Source<'s>: WordSource
    where
        Self: 's;

    /// Where the value slots of `bank` are read (and, for the shared exchanges, the
    /// partial slots, whatever the bank).
    fn source(&self, bank: usize) -> Self::Source<'_>;

    /// Word index, in [`source`](Exchange::source), of local vertex `l`'s value slot.
    fn value_word(&self, l: usize) -> usize;

    /// Publishes master `i`'s value (its data words) with its meta word in `bank` (that
    /// of the meta word's stamp, [`bank`]).
    fn put_value(
        &mut self,
        i: usize,
        bank: usize,
        value: &[u64],
        meta: Meta,
    ) -> Result<(), GraphError>;

    /// Publishes replica `l`'s partial with its meta word (its flag: signalled).
    fn put_partial(&mut self, l: usize, partial: Words, meta: Meta) -> Result<(), GraphError>;

    /// Ends gather: the partials put become readable by their masters. With `fresh`,
    /// every partial read afterwards is this superstep's.
    fn exchange_partials(&mut self, fresh: bool) -> Result<(), GraphError>;

    /// The next partial that partition `q` holds for master `i`, as `(meta, words)`; no
    /// meta word where the layout keeps none (then the partial is this superstep's and
    /// signals nothing).
    fn next_partial(&mut self, q: usize, i: usize) -> Result<(Option<Meta>, Words), GraphError>;

    /// Ends apply: the values put in `bank` and this partition's aggregate (with its
    /// count of changed masters) become readable everywhere. Fills `all[q]` with
    /// partition `q`'s aggregate and count, this one's included. With `fresh`, every
    /// value read from `bank` afterwards is this superstep's.
    fn exchange_values(
        &mut self,
        bank: usize,
        aggregate: Words,
        changed: u64,
        fresh: bool,
        all: &mut [(Words, u64)],
    ) -> Result<(), GraphError>;

    /// Makes the values published in `bank` readable everywhere, fresh (before the
    /// confirming superstep of the periodic mode).
    fn refresh_values(&mut self, bank: usize) -> Result<(), GraphError>;

    /// Messages sent so far.
    fn messages(&self) -> u64;

    /// Time spent on quiescence so far (none for exchanges that do not quiesce).
    fn quiescence(&self) -> Quiescence {
        Quiescence::default()
    }
}

#[cfg(test)]
mod tests {
    use super::{Meta, bank};

    /// A meta word keeps its superstep and its flag apart through the stored word, and
    /// the values of consecutive supersteps alternate banks.
    #[test]
    fn a_meta_word_carries_its_superstep_and_flag() {
        for stamp in [0u64, 1, 2, 77, u64::MAX >> 1] {
            for flag in [false, true] {
                let m = Meta::from_word(Meta::new(stamp, flag).word());
                assert_eq!((m.stamp(), m.flag()), (stamp, flag));
            }
            assert_ne!(Meta::new(stamp, true), Meta::new(stamp, false));
            assert_ne!(bank(stamp), bank(stamp.wrapping_add(1)));
        }
        assert_eq!(Meta::from_word(0), Meta::new(0, false)); // never written
    }
}
