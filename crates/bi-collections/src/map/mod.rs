//! `BiHashMap<K, V>`: a relativistic hash map shared by nodes without cache coherence.
//!
//! # Why this shape
//!
//! Readers on other nodes read through caches that nobody invalidates for them on the
//! read path, and they take no lock. So nothing a reader can reach may change under it in
//! a way it could observe half-done, and nothing it can reach may be reused while it
//! might still follow a link to it. At a million keys a lookup misses in cache, and the
//! layout decides how many misses it pays, so the map is built, as CLHT is, from whole
//! lines:
//!
//! - **A bucket is one line** of a runtime [line array](bi_core::runtime::lines),
//!   holding up to six entries (three `u64 -> u64` pairs) and the link of an overflow
//!   line. Keys and values that fit 48 bytes together sit in the line itself, so a hit
//!   reads one line after the root; larger entries hold the key's hash and the link of an
//!   immutable pair object (one line more).
//! - **Lines change in place, one version at a time**: the writer rewrites a bucket line
//!   under the next version of its stamp (the runtime's write order makes a half-written
//!   line match nothing), writes it back, fences and logs it, so every node's pass
//!   invalidates it. Line 0 of the array, written once, holds the bucket count and the
//!   entry format (a reader that opens the map with other key or value sizes is refused);
//!   the last line holds the counters every commit rewrites (the length, and a sum of
//!   stamps for snapshots), away from the line every lookup reads.
//! - **Tag lines** after the buckets: a few bits per entry of every bucket line (bits
//!   of the key's hash, 0 for an empty entry) and a flag for a bucket with overflow
//!   lines, 28 `u64 -> u64` buckets to a line ([`tags`]). A table's tags are two bytes
//!   per bucket, so they mostly stay in the cache where the bucket lines do not, and a
//!   lookup of an absent key reads its tag line and stops there (one in about 30 goes
//!   on to the bucket line: a tag of 5 bits matched by chance).
//! - **One root slot per partition** holding the current array.
//!
//! # Updates
//!
//! - *Insert of a new key*: into the first free entry of its bucket's chain, or into a new
//!   overflow line (written, then linked from the chain's last line). One rewrite of the
//!   bucket line, its tag line and the counters: one fence.
//! - *Replace or remove*: the key's line and the counters are rewritten (a replaced or removed
//!   pair is retired; an emptied overflow line stays in its chain for the bucket's next
//!   keys, until the array is rebuilt).
//! - **A key that stays never moves**: a new key only takes a free entry, and a present
//!   key is rewritten in its place. An entry a batch empties stays empty for the rest of
//!   the batch unless its own key is put back (then into that entry), so no key changes
//!   line between two versions that both hold it. A reader that walks a chain while its
//!   lines are rewritten one by one, or reads them as versions of different moments,
//!   therefore always meets every key that stays.
//! - *Resize* (grow once a partition holds more than half as many keys as its buckets
//!   have entries, shrink under an eighth, never below the configured start): the writer
//!   builds a whole new array and its overflow lines, seals them, publishes the array into
//!   the root slot and retires the old lines. Readers that loaded the old array keep
//!   reading it, untouched, until they leave.
//! - *Batches* ([`ApplyBatch`](crate::ApplyBatch)): every touched chain is staged, new
//!   overflow lines are written, then every changed line and the counters are rewritten
//!   with one fence per partition (per 256 lines), then replaced objects are retired
//!   together.
//!
//! The writer reads its own lines back from its node's cache: it wrote every one of them
//! there and no one else writes them, so its copy is always current and its
//! [`get`](MapWriteHandle::get) needs no validation loop. Beside the lines it keeps only
//! the links of the overflow lines of buckets that have any, and the keys and values of
//! linked entries.
//!
//! # What readers see, and when
//!
//! A lookup hashes the key, reads the root slot, the array's header line (once per
//! array), the bucket's tag line and, unless the tags rule the key out, the bucket line
//! (and overflow lines, if any), all through the node's cache with no cache
//! operation. Every line read is validated against the generation its link names and
//! copied between two reads of its stamp, so a reader never accepts a half-written line
//! or a line of a reused block. Between two quiescence passes of its node, a reader may
//! see an older version of a line (by at most the runtime's staleness bound): the value
//! it returns was current at some moment since its node's last pass.
//!
//! **Misses are bounded-stale, like hits** ([`MapRef::get`]): a key the cached version
//! lacks is reported absent, at the cost of a hit, so a key inserted on another node is
//! found once the reader's node has passed after the insertion (the pass period, 1 ms by
//! default, plus the skew allowance). Caches, de-duplication tables and session stores
//! mostly miss, and a miss that went to memory every time would cost several trips there.
//! Two things come on top:
//!
//! - **A fresh read on request**: [`MapRef::get_fresh`] checks a miss again from memory
//!   (lazy invalidation: the root slot, tag line and bucket lines invalidated, fenced and
//!   read again), so a key whose insertion was published before the call is always found.
//! - **A process reads its own writes**: a writer's lines are in its node's cache, so its
//!   node reads them at once; a process that sends a write to another node's writer
//!   (`bi::SharedMap`) drops its node's copies of the key's path once the write is
//!   acknowledged, so its next read of the key comes from memory.
//!
//! A miss answered from the tags is the answer of the tag line's version: the writer
//! rewrites a tag line in the commit that rewrites its bucket's line, so it is logged
//! and dropped by every node's pass like any line, and a tag line older or newer than
//! the bucket line beside it does no harm, since tags only ever rule a key out. The tag
//! line is on the key's path: a fresh read and a process's refresh after its own write
//! drop it with the rest (`Fault::TagPath` and the catalog row `miss_from_cached_tags`
//! show what happens otherwise).
//!
//! A stale link met on the way (the array replaced, a pair retired) always sends the
//! search to memory: that is a validation failure, not a miss. A miss in a chain of
//! several lines is answered from the cache too: each line read is one version of it,
//! two lines may be versions of different moments, but a key present in every version
//! between them sits in one entry throughout, so the miss is the answer of a version in
//! between.
//!
//! **Snapshots**: `len` reads each partition's counters, one line, so it is the count of
//! one published version. Iteration reads each partition twice from memory and checks
//! the two reads against each other and against a sum of stamps in the counters, so it
//! yields the entries of one published version of each partition
//! ([`snapshot`]); [`MapRef::iter_live`] reads key by key through the cache
//! instead, without waiting for a quiet moment.
//!
//! # Trade-offs
//!
//! - **Memory**: a bucket is a whole line even for one key, and the table grows at half
//!   its entries: 43 to 86 bytes of table per `u64 -> u64` key (hashbrown uses about
//!   20); measured, 51 bytes of pool per entry after a load that reserved its room
//!   ([`MapWriteHandle::reserve`]), up to 95 for a map grown one insert at a time (each
//!   grow builds the new table beside the old one, whose memory stays in the heap).
//!   A grow the heap cannot hold leaves the table as it is, with longer chains; the
//!   counters line counts it for every reader ([`MapRef::failed_grows`]).
//! - **Writes pay two fences each** (a batch pays them once per 256 lines): the
//!   rewritten lines and their log entries reach memory before the log's tail says they
//!   are there. A write that adds or removes a key in a bucket's line also rewrites the
//!   bucket's tag line: three lines written back and logged instead of two.
//! - **Tags cost a hit a little**: a lookup of a present key reads the tag line too
//!   (the bucket line is asked for first, so the two trips overlap), and they take
//!   2 bytes per bucket of a `u64 -> u64` map (4 for formats of more than three
//!   entries a line).
//! - **Large entries cost a line more**: keys and values over 48 bytes together live in
//!   their own objects, and every update of one allocates and retires an object.
//! - **Line size**: at least 64 bytes; a larger line wastes the rest of each bucket.
//!
//! # Partitions
//!
//! One writer per structure, or one per partition: a map may be split into `P`
//! partitions, each with its own root slot (put them on different lines) and its own
//! writer, possibly on different nodes. A key's partition and bucket come from a fixed
//! hash ([`key_hash`]: foldhash with a fixed seed, pinned version), so every process and
//! node agrees on them. A read handle reads every partition.
//!
//! ```
//! use bi_collections::map::BiHashMap;
//! use bi_core::runtime::testing::Setup;
//!
//! let s = Setup::new(2, 1);
//! let map = BiHashMap::<u64, u64>::at(s.slot(0));
//! let mut w = map.write_handle(s.writer(0)).unwrap();
//! w.insert(1, 10).unwrap();
//! assert_eq!(w.insert(1, 11).unwrap(), Some(10));
//!
//! // Another node: a fresh read finds the key even before the node's pass.
//! let r = map.read_handle(&s.nodes[1]).unwrap();
//! assert_eq!(r.get_fresh(&1).unwrap(), Some(11));
//! s.quiesce_all().unwrap();
//! let m = r.enter();
//! assert_eq!((m.get(&1).unwrap(), m.len().unwrap()), (Some(11), 1));
//! ```

#[cfg(test)]
mod adopt_corrupt;
mod bucket;
mod hash;
mod named;
mod read;
pub mod snapshot;
pub mod tags;
mod write;

pub use hash::{bucket_of, key_hash};
pub use read::{BATCH_AHEAD, Iter, MapReadHandle, MapRef};
pub use write::MapWriteHandle;

use crate::CollectionError;
use crate::stored::Stored;
use bi_core::heap::Heap;
use bi_core::mem::MemView;
use bi_core::runtime::{NodeRuntime, Scope, Writer};
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::ops::Range;

/// Most partitions one map may have.
pub const MAX_PARTITIONS: usize = 4096;

/// Fewest buckets per partition.
pub const MIN_BUCKETS: usize = 8;

/// How a write handle sizes its tables.
///
/// ```
/// use bi_collections::map::{BiHashMap, MapConfig};
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(1, 0);
/// let config = MapConfig::new().initial_buckets(100);
/// let w = BiHashMap::<u64, u64>::at(s.slot(0)).write_handle_with(s.writer(0), config).unwrap();
/// assert_eq!(w.capacity(), 100);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapConfig {
    initial_buckets: usize,
}

impl Default for MapConfig {
    fn default() -> Self {
        MapConfig {
            initial_buckets: 16,
        }
    }
}

impl MapConfig {
    /// 16 buckets per partition to start with.
    ///
    /// ```
    /// use bi_collections::map::MapConfig;
    ///
    /// assert_eq!(MapConfig::new(), MapConfig::default());
    /// assert_eq!(MapConfig::new(), MapConfig::new().initial_buckets(16));
    /// ```
    pub fn new() -> Self {
        MapConfig::default()
    }

    /// Buckets per partition to start with (any count of at least [`MIN_BUCKETS`]), and the fewest it shrinks back to: size it for the expected keys
    /// to avoid resizes while loading. A bucket is one line holding a few entries (three
    /// `u64 -> u64` pairs); the table grows once a partition holds more than half as many
    /// keys as its buckets have entries.
    ///
    /// ```
    /// use bi_collections::map::{BiHashMap, MapConfig, MIN_BUCKETS};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let small = MapConfig::new().initial_buckets(1); // raised to the minimum
    /// let w = BiHashMap::<u64, u64>::at(s.slot(0)).write_handle_with(s.writer(0), small).unwrap();
    /// assert_eq!(w.capacity(), MIN_BUCKETS);
    /// let big = MapConfig::new().initial_buckets(1000); // exactly that many
    /// let w = BiHashMap::<u64, u64>::at(s.slot(1)).write_handle_with(s.writer(1), big).unwrap();
    /// assert_eq!(w.capacity(), 1000);
    /// ```
    pub fn initial_buckets(mut self, buckets: usize) -> Self {
        self.initial_buckets = buckets;
        self
    }

    /// Buckets for `keys` keys of `K -> V` (see [`initial_buckets`](Self::initial_buckets)):
    /// enough that loading them never grows the table, which grows past half its entries.
    ///
    /// ```
    /// use bi_collections::map::MapConfig;
    ///
    /// // Three u64 -> u64 entries per bucket line, half of them used: 2,000 buckets.
    /// assert_eq!(MapConfig::for_keys::<u64, u64>(3_000), MapConfig::new().initial_buckets(2_000));
    /// assert_eq!(MapConfig::for_keys::<u64, u64>(0), MapConfig::new().initial_buckets(1));
    /// ```
    pub fn for_keys<K: Stored, V: Stored>(keys: usize) -> Self {
        MapConfig::new().initial_buckets(bucket::Words::<K, V>::buckets_for(keys).max(1))
    }

    pub(crate) fn start_buckets(&self, max: usize) -> usize {
        self.initial_buckets.max(MIN_BUCKETS).min(max)
    }
}

/// A hash map in shared memory, named by its root slot(s): a cheap, `Copy` descriptor that
/// every process and node builds the same way to reach the same map.
///
/// `K` and `V` are [`Stored`] (plain data, or strings and byte strings); keys are
/// compared with `Eq` and placed with [`key_hash`] (their `Hash`), which must therefore
/// agree between processes (it does for the integer, array, string and byte-string
/// types), and a borrowed form must hash as its owned one (as `str` and `String` do). A map needs lines of at least 64 bytes (a bucket
/// line's record is 56 bytes).
///
/// ```
/// use bi_collections::map::BiHashMap;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 0);
/// let map = BiHashMap::<u64, u64>::at(s.slot(0));
/// let mut w = map.write_handle(s.writer(0)).unwrap();
/// w.insert(3, 30).unwrap();
/// // Any process builds the same descriptor to reach the same map.
/// let same = BiHashMap::<u64, u64>::at(s.slot(0));
/// assert_eq!(same, map);
/// assert_eq!(same.read_handle(&s.nodes[1]).unwrap().get(&3).unwrap(), Some(30));
/// ```
pub struct BiHashMap<K, V> {
    first_slot: usize,
    stride: usize,
    partitions: usize,
    /// Made by [`BiHashMap::named`]: its slot is followed by a writer record.
    named: bool,
    _kv: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for BiHashMap<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, V> Copy for BiHashMap<K, V> {}

impl<K, V> fmt::Debug for BiHashMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BiHashMap")
            .field("first_slot", &self.first_slot)
            .field("stride", &self.stride)
            .field("partitions", &self.partitions)
            .finish()
    }
}

impl<K, V> PartialEq for BiHashMap<K, V> {
    fn eq(&self, other: &Self) -> bool {
        (self.first_slot, self.stride, self.partitions)
            == (other.first_slot, other.stride, other.partitions)
    }
}

impl<K, V> Eq for BiHashMap<K, V> {}

impl<K: Stored + Eq + Hash, V: Stored> BiHashMap<K, V> {
    /// The map whose root is the `u64` slot at offset `slot` (a root directory entry or
    /// a slot inside a shared object).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u32, u32>::at(s.slot(3));
    /// assert_eq!((map.slot(), map.partitions()), (s.slot(3), 1));
    /// assert_eq!(map.partition_slot(0), s.slot(3));
    /// ```
    pub fn at(slot: usize) -> Self {
        BiHashMap {
            first_slot: slot,
            stride: 8,
            partitions: 1,
            named: false,
            _kv: PhantomData,
        }
    }

    /// A map split into `partitions` partitions whose root slots are at `first_slot`,
    /// `first_slot + stride`, ... Put the slots of partitions written by different nodes
    /// on different lines (a stride of at least one line): two nodes must never write
    /// one line.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let stride = s.slot(1) - s.slot(0);
    /// let map = BiHashMap::<u32, u32>::partitioned(s.slot(0), stride, 2).unwrap();
    /// // Partition 0 written on node 0, partition 1 on node 1.
    /// let mut w0 = map.partition_write_handle(s.writer(0), 0..1, Default::default()).unwrap();
    /// let mut w1 = map.partition_write_handle(s.writer(1), 1..2, Default::default()).unwrap();
    /// for k in 0..20u32 {
    ///     let w = if map.partition_of(&k) == 0 { &mut w0 } else { &mut w1 };
    ///     w.insert(k, k * 2).unwrap();
    /// }
    /// let r = map.read_handle(&s.nodes[0]).unwrap();
    /// assert_eq!(r.get(&7).unwrap(), Some(14));
    /// assert_eq!(r.enter().len().unwrap(), 20);
    /// ```
    pub fn partitioned(
        first_slot: usize,
        stride: usize,
        partitions: usize,
    ) -> Result<Self, CollectionError> {
        if partitions == 0 || partitions > MAX_PARTITIONS {
            return Err(CollectionError::Corrupt {
                reason: "a partitioned map needs 1 ..= MAX_PARTITIONS partitions",
            });
        }
        if stride == 0 || !stride.is_multiple_of(8) {
            return Err(CollectionError::Corrupt {
                reason: "partition slots must be 8-byte aligned and distinct",
            });
        }
        if stride
            .checked_mul(partitions)
            .and_then(|s| s.checked_add(first_slot))
            .is_none()
        {
            return Err(CollectionError::Corrupt {
                reason: "partition slots overflow the address space",
            });
        }
        Ok(BiHashMap {
            first_slot,
            stride,
            partitions,
            named: false,
            _kv: PhantomData,
        })
    }

    /// The scope this map's writers log under and its readers declare: that of its first
    /// root slot ([`bi_core::runtime::scope`]).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::Scope;
    ///
    /// let map = BiHashMap::<u32, u32>::partitioned(4096, 64, 4).unwrap();
    /// // One scope for the whole map: that of its first slot.
    /// assert_eq!(map.scope(), Scope::of_slot(4096));
    /// ```
    pub fn scope(&self) -> Scope {
        Scope::of_slot(self.first_slot)
    }

    /// The first partition's root slot: what names the map (its scope, its writer
    /// record and the extents its memory comes from when it is named).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    ///
    /// let map = BiHashMap::<u32, u32>::partitioned(4096, 64, 4).unwrap();
    /// assert_eq!(map.slot(), 4096);
    /// ```
    pub fn slot(&self) -> usize {
        self.first_slot
    }

    /// Number of partitions.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    ///
    /// assert_eq!(BiHashMap::<u32, u32>::at(4096).partitions(), 1);
    /// assert_eq!(BiHashMap::<u32, u32>::partitioned(4096, 64, 4).unwrap().partitions(), 4);
    /// assert!(BiHashMap::<u32, u32>::partitioned(4096, 64, 0).is_err());
    /// ```
    pub fn partitions(&self) -> usize {
        self.partitions
    }

    /// Root slot of partition `p`.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    ///
    /// let map = BiHashMap::<u32, u32>::partitioned(4096, 64, 4).unwrap();
    /// assert_eq!(map.partition_slot(0), 4096);
    /// assert_eq!(map.partition_slot(3), 4096 + 3 * 64);
    /// ```
    pub fn partition_slot(&self, p: usize) -> usize {
        self.first_slot + p * self.stride
    }

    /// The partition `key` belongs to.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    ///
    /// let map = BiHashMap::<u64, u64>::partitioned(4096, 64, 4).unwrap();
    /// let p = map.partition_of(&42);
    /// assert!(p < 4);
    /// assert_eq!(p, map.partition_of(&42)); // fixed: every process agrees
    /// assert_eq!(BiHashMap::<u64, u64>::at(4096).partition_of(&42), 0);
    /// ```
    pub fn partition_of(&self, key: &K) -> usize {
        hash::partition_of(key_hash(key), self.partitions)
    }

    /// A write handle for every partition, starting a new, empty map (16 buckets per
    /// partition). It owns `writer` (get it back with
    /// [`into_writer`](MapWriteHandle::into_writer)).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// assert_eq!((w.len(), w.capacity()), (0, 16));
    /// w.insert(1, 1).unwrap();
    /// assert_eq!(w.map(), map);
    /// ```
    pub fn write_handle<M: MemView, H: Heap>(
        &self,
        writer: Writer<M, H>,
    ) -> Result<MapWriteHandle<K, V, M, H>, CollectionError> {
        self.write_handle_with(writer, MapConfig::default())
    }

    /// [`write_handle`](Self::write_handle) with a configuration.
    ///
    /// ```
    /// use bi_collections::map::{BiHashMap, MapConfig};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::partitioned(s.slot(0), 8, 2).unwrap();
    /// let config = MapConfig::new().initial_buckets(32);
    /// let w = map.write_handle_with(s.writer(0), config).unwrap();
    /// assert_eq!(w.partitions(), 0..2);
    /// assert_eq!((w.buckets(0), w.buckets(1)), (Some(32), Some(32)));
    /// ```
    pub fn write_handle_with<M: MemView, H: Heap>(
        &self,
        writer: Writer<M, H>,
        config: MapConfig,
    ) -> Result<MapWriteHandle<K, V, M, H>, CollectionError> {
        self.partition_write_handle(writer, 0..self.partitions, config)
    }

    /// A write handle for partitions `parts` only (each partition must have exactly one
    /// writer), starting them empty. Inserting a key of another partition is an error.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::partitioned(s.slot(0), 8, 2).unwrap();
    /// let mut w = map.partition_write_handle(s.writer(0), 1..2, Default::default()).unwrap();
    /// assert_eq!(w.buckets(0), None); // not this handle's partition
    /// let mine = (0u64..).find(|k| map.partition_of(k) == 1).unwrap();
    /// let other = (0u64..).find(|k| map.partition_of(k) == 0).unwrap();
    /// w.insert(mine, 1).unwrap();
    /// assert!(w.insert(other, 1).is_err()); // another partition's key
    /// ```
    pub fn partition_write_handle<M: MemView, H: Heap>(
        &self,
        mut writer: Writer<M, H>,
        parts: Range<usize>,
        config: MapConfig,
    ) -> Result<MapWriteHandle<K, V, M, H>, CollectionError> {
        if parts.is_empty() || parts.end > self.partitions {
            return Err(CollectionError::Corrupt {
                reason: "the partition range is empty or past the map's partitions",
            });
        }
        writer.set_scope(self.scope())?;
        MapWriteHandle::new(*self, writer, parts, config)
    }

    /// A read handle on `rt`'s node: registers one reader (one per thread).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// w.insert(5, 55).unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.map(), map);
    /// assert_eq!(r.get(&5).unwrap(), Some(55));
    /// ```
    pub fn read_handle<M: MemView>(
        &self,
        rt: &NodeRuntime<M>,
    ) -> Result<MapReadHandle<K, V, M>, CollectionError> {
        let reader = rt.reader()?;
        reader.use_scope(self.scope())?;
        Ok(MapReadHandle::new(*self, reader))
    }
}
