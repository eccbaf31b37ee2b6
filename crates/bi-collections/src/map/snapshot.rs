//! Snapshot reads: the entries of one version of a partition, as its writer published
//! it ([`MapRef::iter`]).
//!
//! # Why reading every line is not enough
//!
//! A map changes in place, a line at a time, and its readers read through caches that
//! hold lines of different ages. Even read from memory, lines read one after another
//! come from different moments, and memory at one moment may hold part of a commit:
//! a commit's lines are written back together and land in any order until its fence.
//!
//! # How
//!
//! A *collect* reads the partition from memory: its root slot, its header, its counters
//! line, every bucket line (all dropped from this node's cache with one fence, then
//! read) and every overflow line (each dropped and fenced before it is read), keeping
//! the stamp each line validated under. Two collects that find the same root and the
//! same stamps read lines that memory held all at once, when the first collect ended: a
//! rewritten line never shows an earlier stamp again, so a line that had changed in
//! between would show another stamp in the second collect.
//!
//! A moment of memory is a published version when the stamps of the bucket and overflow
//! lines sum to what the counters line says. Every commit rewrites the counters with
//! that sum, and every part of a commit makes the lines' sum grow (a rewrite advances a
//! line's stamp, a new overflow line adds its own, and no line is ever unlinked while
//! its array lives: an emptied overflow line stays in its chain). So memory holding
//! some of a commit's lines and not the others, or the counters and not all the lines,
//! sums to another value than its counters.
//!
//! An attempt that fails either check starts again; a writer that commits during every
//! one of `SNAPSHOT_ATTEMPTS` attempts makes the read
//! [`CollectionError::Contended`].
//!
//! # Trade-offs
//!
//! - **Two reads of every line from memory** per attempt: a snapshot of a partition
//!   costs about twice as many cache misses and fences as it has lines, where a read
//!   key by key ([`MapRef::iter_live`]) costs hits on a warm cache.
//! - **Starvation**: a writer committing faster than a partition can be read twice
//!   keeps every attempt from succeeding. Writes are not slowed down for readers.
//! - **Emptied overflow lines stay linked** until the partition is rebuilt (it shrinks
//!   below an eighth full, or grows): a chain keeps the length it once needed.

use super::bucket::{BucketLine, COUNTERS_SUM, LineLink, counters_line};
use super::read::{MapRef, buckets_of};
use crate::CollectionError;
use crate::stored::Stored;
use bi_core::mem::MemView;
use bi_core::runtime::{Fault, Fetch, Via};
use std::hash::Hash;

/// Attempts of a snapshot read before it reports [`CollectionError::Contended`].
pub(crate) const SNAPSHOT_ATTEMPTS: usize = 64;

/// One read of a partition from memory.
struct Collect<K, V> {
    /// The root slot's word.
    root: u64,
    /// The stamps of the header and of every line read, in reading order.
    stamps: Vec<u64>,
    entries: Vec<(K, V)>,
    /// The lines' stamps sum to what the counters line says.
    whole: bool,
}

impl<K: Stored + Eq + Hash, V: Stored, M: MemView> MapRef<'_, K, V, M> {
    /// Reads the entries of one published version of partition `p` into `out`.
    pub(super) fn snapshot_partition(
        &self,
        p: usize,
        out: &mut Vec<(K, V)>,
    ) -> Result<(), CollectionError> {
        let slot = self.map.partition_slot(p);
        let faults = self.guard.faults();
        for _ in 0..SNAPSHOT_ATTEMPTS {
            let Some(first) = self.collect(slot)? else {
                continue;
            };
            if !faults.has(Fault::SnapshotRecollect) {
                let Some(second) = self.collect(slot)? else {
                    continue;
                };
                if (second.root, &second.stamps) != (first.root, &first.stamps) {
                    continue;
                }
            }
            if first.whole || faults.has(Fault::SnapshotSum) {
                *out = first.entries;
                return Ok(());
            }
        }
        Err(CollectionError::Contended {
            attempts: SNAPSHOT_ATTEMPTS,
        })
    }

    /// One collect of the partition whose root slot is `slot`; `None` if a line, pair or
    /// byte string did not validate (the writer replaced it meanwhile).
    fn collect(&self, slot: usize) -> Result<Option<Collect<K, V>>, CollectionError> {
        let g = &self.guard;
        let root = g.slot_word(slot, Via::Fresh)?;
        let mut c = Collect {
            root,
            stamps: Vec::new(),
            entries: Vec::new(),
            whole: true,
        };
        let array = LineLink::from_raw(root);
        if array.is_null() {
            return Ok(Some(c));
        }
        let Fetch::Value((header, stamp)) =
            g.fetch_stamped_via(Via::Fresh, g.line(array, 0)?, |l: &BucketLine| *l)?
        else {
            return Ok(None);
        };
        let buckets = buckets_of::<K, V>(&header)?;
        c.stamps.push(stamp.raw());
        g.refresh_lines(array, counters_line(buckets) + 1)?;
        let counters = g.line(array, counters_line(buckets))?;
        let Fetch::Value((counters, stamp)) =
            g.fetch_stamped_via(Via::Cached, counters, |l: &BucketLine| *l)?
        else {
            return Ok(None);
        };
        c.stamps.push(stamp.raw());
        let mut sum = 0u64;
        for b in 0..buckets {
            // The bucket lines were just dropped; overflow lines are dropped one by one.
            let whole = self.walk_chain(array, b, Via::Cached, Via::Fresh, |l, stamp| {
                c.stamps.push(stamp.raw());
                sum = sum.wrapping_add(stamp.raw());
                self.line_entries(l, Via::Cached, |k, v| c.entries.push((k, v)))
            })?;
            if !whole {
                return Ok(None);
            }
        }
        c.whole = sum == counters.0[COUNTERS_SUM];
        Ok(Some(c))
    }
}
