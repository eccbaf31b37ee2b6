//! The single writer of a map (or of some of its partitions).
//!
//! Every change goes through one path: *stage* (edit a private copy of each touched
//! chain: its bucket line and overflow lines), *commit* (allocate the chain's new
//! overflow lines, then rewrite every changed line and the counters with one fence per
//! chunk, then adopt the staged chains), *retire* (replaced pairs and old arrays, handed
//! to the writer's deferred retirement).
//!
//! Every commit rewrites the array's counters line (its length, and the sum of the
//! stamps of the partition's bucket and overflow lines), which only grows: a rewrite advances a line's stamp, a new overflow line adds
//! its own, and an overflow line that empties stays linked (for the chain's next keys)
//! until the array is rebuilt. So any part of a commit seen without the rest makes the
//! lines' sum differ from the counters', which is what a snapshot read checks
//! ([`snapshot`](super::snapshot)).
//!
//! A key that an operation does not remove never changes place: an insert of a present
//! key rewrites its value where it is, and a new key takes the first free entry of its
//! chain. So a reader that walks a chain while lines are rewritten one by one always
//! meets every key that stays (see the [map docs](super)).

use super::bucket::{
    ARRAY_LAYOUT, BucketLine, COUNTERS_FAILED_GROWS, Format, HEADER_BUCKETS, HEADER_FORMAT,
    HEADER_LAYOUT, LineLink, Pair, Words, code, counters_line,
};
use super::hash::{bucket_of, partition_of};
use super::tags::{Group, array_lines, tag_line};
use super::{BiHashMap, MapConfig, key_hash};
use crate::stored::{Query, Stored};
use crate::strings::Strings;
use crate::{ApplyBatch, BatchReport, CollectionError, Op};
use bi_core::heap::Heap;
use bi_core::mem::MemView;
use bi_core::runtime::{BiError, Fault, Link, ReclaimReport, Role, Stamp, Writer, lines};
use bytemuck::Pod;
use foldhash::fast::FixedState;
use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::ops::Range;

/// Lines rewritten per fence when a batch touches many buckets, at most: fewer when the
/// node's log rings hold fewer entries (see [`chunk_lines`]).
const PUBLISH_CHUNK: usize = 256;

/// The most lines one publication of a batch rewrites with `writer`: every line takes an
/// entry of the modified ring, so a piece larger than the ring could never be published,
/// however long the writer waited for room. `extra` lines ride along with each piece
/// (the partition's counters).
fn chunk_lines<M: MemView, H: Heap>(writer: &Writer<M, H>, extra: usize) -> usize {
    PUBLISH_CHUNK
        .min(writer.ring_capacity().saturating_sub(extra))
        .max(1)
}

/// How many operations ahead a batch asks for the lines it will stage from: enough
/// misses in flight to cover a trip to memory.
const STAGE_AHEAD: usize = 8;

/// A staged bucket with its place: (partition index, bucket).
type Placed<K, V> = ((usize, usize), Staged<K, V>);

/// The buckets a batch stages: each in a vector, in the order first touched, found by
/// (partition index, bucket) through a hash map once there are more than a few, since a
/// batch of a large load touches thousands of buckets once each (a write of one key
/// stages one bucket and builds no map). Ordered only at commit, by sorting their
/// positions (a staged bucket is large: it moves as little as possible).
struct Stage<K, V> {
    buckets: Vec<Placed<K, V>>,
    index: HashMap<(usize, usize), usize, FixedState>,
}

/// Staged buckets found by a scan rather than through the index.
const SCANNED: usize = 8;

impl<K, V> Stage<K, V> {
    fn with_capacity(n: usize) -> Self {
        Stage {
            buckets: Vec::with_capacity(n),
            index: HashMap::default(),
        }
    }

    /// Where the bucket `at` is staged, if it is.
    fn position(&self, at: (usize, usize)) -> Option<usize> {
        match self.buckets.len() <= SCANNED {
            true => self.buckets.iter().position(|(p, _)| *p == at),
            false => self.index.get(&at).copied(),
        }
    }

    /// Stages bucket `at`; returns its position.
    fn push(&mut self, at: (usize, usize), staged: Staged<K, V>) -> usize {
        self.buckets.push((at, staged));
        let n = self.buckets.len();
        if n == SCANNED + 1 {
            // A batch of many keys: the index is sized for them at once, as the vector is.
            self.index.reserve(self.buckets.capacity());
            self.index
                .extend(self.buckets.iter().enumerate().map(|(i, (p, _))| (*p, i)));
        } else if n > SCANNED {
            self.index.insert(at, n - 1);
        }
        n - 1
    }

    /// Every staged bucket with its place, ordered by (partition, bucket).
    fn into_sorted(self) -> Vec<Placed<K, V>> {
        if self.buckets.len() <= 1 {
            return self.buckets;
        }
        let mut order: Vec<usize> = (0..self.buckets.len()).collect();
        order.sort_unstable_by_key(|&i| self.buckets[i].0);
        let mut slots: Vec<Option<Placed<K, V>>> = self.buckets.into_iter().map(Some).collect();
        order.into_iter().filter_map(|i| slots[i].take()).collect()
    }
}

type PairLink<K, V> = Link<Pair<K, V>>;
/// A pair a batch made, with its key and value.
type NewPair<K, V> = (PairLink<K, V>, (K, V));

/// One line of a chain as its writer knows it: where it lives and what it holds.
#[derive(Clone, Copy)]
struct ChainLine {
    /// The overflow line's own link; `None` for the bucket's line in the array, and for
    /// a line staged but not yet allocated.
    link: Option<LineLink>,
    line: BucketLine,
}

/// One partition as its writer knows it: the published array (whose lines the writer
/// reads back from its node's cache: it wrote them, and no one else does) and the links
/// of the overflow lines.
struct Partition<K, V> {
    slot: usize,
    array: LineLink,
    /// Buckets of the array (line `1 + b` is bucket `b`'s first line).
    buckets: usize,
    /// The links of the overflow lines of the buckets that have any, in chain order
    /// (their contents are read back from the node's cache, like the array's lines;
    /// boxed: exactly as long as the chain, where a `Vec` of one would hold room for four).
    overflow: HashMap<usize, Box<[LineLink]>, FixedState>,
    /// Keys and values behind the linked entries (types too large for a line).
    pairs: HashMap<u64, (K, V)>,
    len: usize,
    /// The sum of the stamps of the bucket and overflow lines, as the counters say.
    sum: u64,
    /// A failed grow is not retried before the partition holds this many keys.
    grow_after: usize,
    /// Keys at the last resize check: a table shrinks only when keys were removed since
    /// (never while a load fills a table [`MapWriteHandle::reserve`] made).
    checked_len: usize,
    /// Grows the heap could not hold, as the counters say.
    failed_grows: u64,
}

impl<K, V> Partition<K, V> {
    /// A partition whose published array is `array`, before its keys are counted.
    fn empty(slot: usize, array: LineLink, buckets: usize) -> Self {
        Partition {
            slot,
            array,
            buckets,
            overflow: HashMap::default(),
            pairs: HashMap::new(),
            len: 0,
            sum: 0,
            grow_after: 0,
            checked_len: 0,
            failed_grows: 0,
        }
    }
}

/// A staged bucket: its new chain (line 0 is the bucket's line in the array) and the
/// pairs the batch made or replaced in it.
struct Staged<K, V> {
    /// The bucket's line as published when the batch first touched it.
    was: BucketLine,
    /// Keys the chain held as published.
    was_count: usize,
    /// The bucket's tag group, kept in step with the chain's first line.
    tags: Group,
    chain: Vec<ChainLine>,
    created: Vec<PairLink<K, V>>,
    superseded: Vec<PairLink<K, V>>,
    retire: Vec<PairLink<K, V>>,
    pairs: Vec<NewPair<K, V>>,
    /// Entries the batch emptied (line of the chain, entry, the key that was there):
    /// each stays empty for the rest of the batch unless its own key comes back.
    freed: Vec<(usize, usize, K)>,
    /// The byte strings the batch wrote and dropped in this bucket.
    strings: Strings,
}

impl<K, V> Staged<K, V> {
    /// The first entry of the chain that a new key may take: empty, and not emptied by
    /// this batch. A key present in the published version and again after the batch
    /// (removed, then put back) thus never changes line, so a lookup that reads the
    /// chain's lines as versions of different moments still meets it.
    fn free_entry<KW: Pod, VW: Pod>(&self, keep_freed: bool) -> Option<(usize, usize)> {
        self.chain.iter().enumerate().find_map(|(i, l)| {
            (0..Format::<KW, VW>::PER_LINE).find_map(|j| {
                let reserved = keep_freed && self.freed.iter().any(|f| (f.0, f.1) == (i, j));
                (!l.line.is_used(j) && !reserved).then_some((i, j))
            })
        })
    }
}

/// A staged bucket ready to publish: the line rewrites, the lines it allocated and what
/// both add to the partition's stamp sum.
struct Ready<K, V> {
    staged: Staged<K, V>,
    rewrites: Vec<(LineLink, usize, BucketLine)>,
    allocated: Vec<LineLink>,
    added: u64,
}

/// A staged bucket ready to publish, of a map of `K -> V`.
type ReadyOf<K, V> = Ready<<K as Stored>::Word, <V as Stored>::Word>;

/// An entry found in a line: its index, key word and value word.
type Found<K, V> = (usize, <K as Stored>::Word, <V as Stored>::Word);

/// What one staged operation did.
enum Effect<V> {
    Inserted,
    Replaced(V),
    Removed(V),
    Absent,
}

/// The write handle of a [`BiHashMap`]: owns the node's [`Writer`] and the map's
/// partitions it writes.
///
/// ```
/// use bi_collections::map::BiHashMap;
/// use bi_collections::{ApplyBatch, Op};
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(1, 0);
/// let mut w = BiHashMap::<u32, u64>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
/// assert_eq!(w.insert(3, 30).unwrap(), None);
/// let report = w.apply_batch(&[Op::Insert(4, 40), Op::Remove(3), Op::Insert(4, 41)]).unwrap();
/// assert_eq!((report.inserted, report.removed, report.replaced), (1, 1, 1));
/// assert_eq!((w.get(&4), w.get(&3), w.len()), (Some(41), None, 1));
/// ```
pub struct MapWriteHandle<K: Stored, V: Stored, M: MemView, H: Heap> {
    map: BiHashMap<K, V>,
    writer: Writer<M, H>,
    parts: Range<usize>,
    partitions: Vec<Partition<K::Word, V::Word>>,
    /// Shrinking stops at the configured start size.
    min_buckets: usize,
    /// The writer role of a named map, given up when the handle is dropped.
    role: Option<Role<M>>,
    /// A bound on every value's out-of-line bytes (`None` for an adopted map), for
    /// [`ApplyBatch::longest_value`].
    longest_value: Option<usize>,
}

/// The entries, as the writer last published them (in no particular order).
///
/// ```
/// use bi_collections::map::BiHashMap;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(1, 0);
/// let mut w = BiHashMap::<u32, String>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
/// w.insert(1, "one".into()).unwrap();
/// assert_eq!(format!("{w:?}"), r#"{1: "one"}"#);
/// ```
impl<K, V, M, H> fmt::Debug for MapWriteHandle<K, V, M, H>
where
    K: Stored + Eq + Hash + fmt::Debug,
    V: Stored + fmt::Debug,
    M: MemView,
    H: Heap,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::show::entries(f, self.entries())
    }
}

/// Most buckets a partition's array may have: the largest power of two whose array
/// (header, buckets, counters and tag lines) fits a line array.
pub(super) const MAX_BUCKETS: usize = lines::MAX_LINES / 2;
const _: () = assert!(lines::MAX_LINES.is_power_of_two());

impl<K: Stored + Eq + Hash, V: Stored, M: MemView, H: Heap> MapWriteHandle<K, V, M, H> {
    pub(super) fn new(
        map: BiHashMap<K, V>,
        writer: Writer<M, H>,
        parts: Range<usize>,
        config: MapConfig,
    ) -> Result<Self, CollectionError> {
        let mut handle = MapWriteHandle {
            map,
            writer,
            parts: parts.clone(),
            partitions: Vec::with_capacity(parts.len()),
            min_buckets: config.start_buckets(MAX_BUCKETS),
            role: None,
            longest_value: Some(0),
        };
        let buckets = handle.min_buckets;
        for p in parts {
            let slot = map.partition_slot(p);
            let (array, sum) = handle.build_array(buckets, 0, Vec::new(), 0, 0, |_| None)?;
            if let Err(e) = handle.writer.publish_lines(slot, array) {
                let _ = handle.writer.discard_lines(array);
                return Err(e.into());
            }
            let mut part = Partition::empty(slot, array, buckets);
            part.sum = sum;
            handle.partitions.push(part);
        }
        Ok(handle)
    }

    /// Takes `writer` over the partitions `parts` of a map already in memory, as an
    /// earlier writer left them: walks each partition's array, overflow lines and linked
    /// pairs, keeps them live in the writer's heap and retires the rest of the arena until
    /// a grace period has passed ([`Writer::adopt`]). With `foreign`, the lines were
    /// written through another node's cache, so this node's copy of the heap is dropped
    /// first.
    pub(super) fn adopt(
        map: BiHashMap<K, V>,
        mut writer: Writer<M, H>,
        parts: Range<usize>,
        config: MapConfig,
        foreign: bool,
    ) -> Result<Self, CollectionError> {
        let corrupt = |reason| CollectionError::Corrupt { reason };
        writer.set_adopting(true);
        if foreign {
            writer.invalidate_heap()?;
        }
        let line_bytes = writer.lines_bytes(1, size_of::<BucketLine>())?;
        let pair_bytes = writer.object_bytes(size_of::<Pair<K::Word, V::Word>>())?;
        let most = writer.heap().stats().capacity / line_bytes.max(1);
        let mut live = Vec::new();
        let mut partitions = Vec::with_capacity(parts.len());
        for p in parts.clone() {
            let slot = map.partition_slot(p);
            let array = LineLink::from_raw(writer.read_slot(slot)?);
            if array.is_null() {
                return Err(corrupt("a partition of the adopted map has no array"));
            }
            let header: BucketLine = writer.read_own_line(array, 0)?;
            let buckets = header.0[HEADER_BUCKETS] as usize;
            if header.0[HEADER_LAYOUT] != ARRAY_LAYOUT {
                return Err(corrupt(
                    "the adopted map's array was laid out by another version of bi",
                ));
            }
            if header.0[HEADER_FORMAT] != code::<K, V>() || buckets == 0 || buckets > most {
                return Err(corrupt("the adopted map's header does not fit its types"));
            }
            let all_lines = array_lines::<K::Word, V::Word>(buckets);
            live.push((
                array.offset(),
                writer.lines_bytes(all_lines, size_of::<BucketLine>())?,
            ));
            let mut part = Partition::empty(slot, array, buckets);
            let mut tags = vec![BucketLine::default(); all_lines - counters_line(buckets) - 1];
            for b in 0..buckets {
                let first: BucketLine = writer.read_own_line(array, 1 + b)?;
                let mut group = Group::default();
                for j in first.used_entries::<K::Word, V::Word>() {
                    let h = entry_hash::<K, V, M, H>(&first, j, &writer)?;
                    group.set::<K::Word, V::Word>(j, Group::tag::<K::Word, V::Word>(h));
                }
                group.set_chained::<K::Word, V::Word>(!first.next().is_null());
                let at = tag_line::<K::Word, V::Word>(buckets, b) - counters_line(buckets) - 1;
                group.store::<K::Word, V::Word>(&mut tags[at], b);
                let mut chain = vec![first];
                let mut rest = Vec::new();
                let mut next = first.next();
                while !next.is_null() {
                    if live.len() > most {
                        return Err(corrupt("the adopted map has more lines than its arena"));
                    }
                    let line: BucketLine = writer.read_own_line(next, 0)?;
                    live.push((next.offset(), line_bytes));
                    rest.push(next);
                    chain.push(line);
                    next = line.next();
                }
                for l in &chain {
                    part.len += l.entries();
                    for j in l.used_entries::<K::Word, V::Word>() {
                        let (k, v) = if Words::<K, V>::INLINE {
                            (l.key::<K::Word, V::Word>(j), l.value::<K::Word, V::Word>(j))
                        } else {
                            let (_, pair) = l.linked::<K::Word, V::Word>(j);
                            let kv = writer.read_own(pair)?;
                            live.push((pair.offset(), pair_bytes));
                            part.pairs.insert(pair.raw(), ({ kv.key }, { kv.value }));
                            ({ kv.key }, { kv.value })
                        };
                        let owned = K::owned_bytes(&k).into_iter();
                        for string in owned.chain(V::owned_bytes(&v)) {
                            live.push((string.offset(), writer.string_bytes(string)?));
                        }
                    }
                }
                if !rest.is_empty() {
                    part.overflow.insert(b, rest.into_boxed_slice());
                }
            }
            partitions.push((part, tags));
        }
        let slots: Vec<usize> = (0..map.partitions())
            .map(|p| map.partition_slot(p))
            .collect();
        writer.adopt(&mut live, &slots)?;
        // A writer that died mid-commit may have left tag lines that do not describe
        // their buckets' lines: they are rewritten from the lines, which are what this
        // writer goes on from.
        let mut partitions: Vec<Partition<K::Word, V::Word>> = partitions
            .into_iter()
            .map(|(part, tags)| {
                let first = counters_line(part.buckets) + 1;
                let mut fixes = Vec::new();
                for (i, line) in tags.into_iter().enumerate() {
                    if writer.read_own_line::<BucketLine>(part.array, first + i)? != line {
                        fixes.push((part.array, first + i, line));
                    }
                }
                for chunk in fixes.chunks(chunk_lines(&writer, 0)) {
                    writer.rewrite_lines(chunk)?;
                }
                Ok(part)
            })
            .collect::<Result<_, CollectionError>>()?;
        // A writer that died mid-commit may have left counters that do not describe the
        // lines (the lines reached memory, the counters did not, or the other way round):
        // adopting publishes them as they are. (Stamps are read once the lines are this
        // writer's.)
        for part in &mut partitions {
            let buckets = (1..=part.buckets).map(|i| (part.array, i));
            let overflow = part.overflow.values().flatten().copied();
            part.sum = stamp_sum(&writer, buckets.chain(overflow.map(|l| (l, 0))))?;
            let at = counters_line(part.buckets);
            let counters: BucketLine = writer.read_own_line(part.array, at)?;
            part.failed_grows = counters.0[COUNTERS_FAILED_GROWS];
            let fixed = BucketLine::counters(part.len, part.sum, part.failed_grows);
            if counters != fixed {
                writer.rewrite_lines(&[(part.array, at, fixed)])?;
            }
        }
        writer.set_adopting(false);
        Ok(MapWriteHandle {
            map,
            writer,
            parts,
            partitions,
            min_buckets: config.start_buckets(MAX_BUCKETS),
            role: None,
            // What an earlier writer stored is not measured.
            longest_value: None,
        })
    }

    /// Keeps a rewrite journal named in the structure slot `slot`
    /// ([`journal`](bi_core::runtime::journal)).
    pub(super) fn keep_journal(&mut self, slot: usize) -> Result<(), CollectionError> {
        Ok(self.writer.keep_rewrite_journal(slot)?)
    }

    /// The handle of a writer that took the role: its take-over is over, so its waits for
    /// ring room are a write's again.
    pub(super) fn with_role(mut self, role: Role<M>) -> Self {
        self.role = Some(role);
        self.writer.set_adopting(false);
        self
    }

    /// The map this handle writes.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// assert_eq!(w.map(), map);
    /// ```
    pub fn map(&self) -> BiHashMap<K, V> {
        self.map
    }

    /// The partitions this handle writes.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// assert_eq!(w.partitions(), 0..1);
    /// ```
    pub fn partitions(&self) -> Range<usize> {
        self.parts.clone()
    }

    /// The writer (for its statistics: retired bytes, heap, ring usage).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// assert_eq!(w.writer().scope(), map.scope());
    /// ```
    pub fn writer(&self) -> &Writer<M, H> {
        &self.writer
    }

    /// Gives the writer back (with its deferred retirements, see
    /// [`pending_retirements`](Self::pending_retirements)).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 10).unwrap();
    /// let writer = w.into_writer();
    /// assert_eq!(writer.scope(), map.scope());
    /// // The map stays published.
    /// assert_eq!(map.read_handle(&s.nodes[0]).unwrap().get(&1).unwrap(), Some(10));
    /// ```
    pub fn into_writer(self) -> Writer<M, H> {
        self.writer
    }

    /// Grows of the partitions this handle writes that the heap could not hold
    /// ([`MapRef::failed_grows`](super::MapRef::failed_grows) reads it on any node).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 1).unwrap();
    /// assert_eq!(w.failed_grows(), 0);
    /// ```
    pub fn failed_grows(&self) -> u64 {
        self.partitions.iter().map(|p| p.failed_grows).sum()
    }

    /// Keys in the partitions this handle writes.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// for k in 0..30 {
    ///     w.insert(k % 10, k).unwrap();
    /// }
    /// assert_eq!(w.len(), 10);
    /// ```
    pub fn len(&self) -> usize {
        self.partitions.iter().map(|p| p.len).sum()
    }

    /// Whether the partitions this handle writes are empty.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// assert!(w.is_empty());
    /// w.insert(1, 1).unwrap();
    /// w.remove(&1).unwrap();
    /// assert!(w.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Buckets (one line each, holding up to a few entries) over the partitions this
    /// handle writes.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// let start = w.capacity();
    /// for k in 0..200 {
    ///     w.insert(k, k).unwrap();
    /// }
    /// assert!(w.capacity() > start); // the table grew
    /// ```
    pub fn capacity(&self) -> usize {
        self.partitions.iter().map(|p| p.buckets).sum()
    }

    /// Buckets of partition `p` (`None` if this handle does not write it).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// assert_eq!(w.buckets(0), Some(16));
    /// assert_eq!(w.buckets(1), None); // the map has one partition
    /// ```
    pub fn buckets(&self, p: usize) -> Option<usize> {
        self.part_index(p).map(|i| self.partitions[i].buckets)
    }

    /// Most buckets one partition grows to.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// assert!(w.max_buckets().is_power_of_two());
    /// assert!(w.max_buckets() >= w.capacity());
    /// ```
    pub fn max_buckets(&self) -> usize {
        MAX_BUCKETS
    }

    /// Makes room for `additional` more keys (spread over the map's partitions by their
    /// hash), as `HashMap::reserve` does: each partition this handle writes that would
    /// pass its grow point is rebuilt once, at the size the keys need, instead of
    /// doubling again and again while they arrive. A bulk load that reserves first
    /// builds one array, and leaves no retired arrays behind it.
    ///
    /// A rebuild the heap cannot hold is the heap's error and leaves the table as it is
    /// (inserts then grow it step by step, as without the reservation).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// w.reserve(300).unwrap();
    /// let reserved = w.capacity();
    /// assert!(reserved * 3 / 2 >= 300); // three entries a bucket, half of them used
    /// for k in 0..300 {
    ///     w.insert(k, k).unwrap();
    /// }
    /// assert_eq!(w.capacity(), reserved); // no grow while loading
    /// ```
    pub fn reserve(&mut self, additional: usize) -> Result<(), CollectionError> {
        let share = additional.div_ceil(self.map.partitions());
        for pi in 0..self.partitions.len() {
            let part = &self.partitions[pi];
            let keys = part.len.saturating_add(share);
            if Words::<K, V>::past_grow_point(keys, part.buckets) {
                let buckets = Words::<K, V>::buckets_for(keys).min(MAX_BUCKETS);
                if buckets > part.buckets {
                    self.resize(pi, buckets)?;
                }
            }
        }
        Ok(())
    }

    /// Overflow lines, replaced pairs and old arrays whose retirement is still to be
    /// logged: in the writer's retirement bag, or waiting for room in the freed ring
    /// ([`Writer::deferred`]).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 1).unwrap();
    /// for k in 0..100 {
    ///     w.insert(k, k).unwrap(); // resizes: the old arrays wait to be retired
    /// }
    /// w.reclaim().unwrap();
    /// assert_eq!(w.pending_retirements(), 0);
    /// ```
    pub fn pending_retirements(&self) -> usize {
        self.writer.deferred()
    }

    /// Every entry of the partitions this handle writes, as it last published them, in
    /// no particular order (read back from this node's cache).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiHashMap::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// w.extend([(1, 10), (2, 20)]).unwrap();
    /// let mut all = w.entries().unwrap();
    /// all.sort();
    /// assert_eq!(all, [(1, 10), (2, 20)]);
    /// ```
    pub fn entries(&self) -> Result<Vec<(K, V)>, CollectionError> {
        let w = &self.writer;
        let mut out = Vec::with_capacity(self.len());
        for (pi, part) in self.partitions.iter().enumerate() {
            for b in 0..part.buckets {
                for l in self.published_chain(pi, b) {
                    let l = l?.line;
                    for j in l.used_entries::<K::Word, V::Word>() {
                        let (k, v) = if Words::<K, V>::INLINE {
                            (l.key::<K::Word, V::Word>(j), l.value::<K::Word, V::Word>(j))
                        } else {
                            let (_, pair) = l.linked::<K::Word, V::Word>(j);
                            *part.pairs.get(&pair.raw()).ok_or_else(|| {
                                CollectionError::Corrupt {
                                    reason: "a linked entry whose pair the writer does not know",
                                }
                            })?
                        };
                        out.push((K::from_word(&k, w)?, V::from_word(&v, w)?));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Keeps only the entries for which `keep` returns true, removing the others in
    /// batches of 4,096 (each published as one version); returns how many it removed.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiHashMap::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// w.extend((0..10).map(|k| (k, k))).unwrap();
    /// assert_eq!(w.retain(|_, v| *v >= 7).unwrap(), 7);
    /// assert_eq!(w.len(), 3);
    /// ```
    pub fn retain(&mut self, keep: impl FnMut(&K, &V) -> bool) -> Result<usize, CollectionError> {
        crate::entry::retain(self, keep)
    }

    /// Removes every entry (in batches, as [`retain`](Self::retain) does).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiHashMap::<String, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// w.insert("a".into(), 1).unwrap();
    /// w.clear().unwrap();
    /// assert!(w.is_empty());
    /// ```
    pub fn clear(&mut self) -> Result<(), CollectionError> {
        crate::entry::retain(self, |_, _| false).map(|_| ())
    }

    /// Inserts every entry of `entries`, 4,096 to a batch (each published as one
    /// version): the way to build a map from an iterator. Returns what the batches did.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiHashMap::<String, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// let report = w.extend([("a".to_string(), 1), ("b".to_string(), 2)]).unwrap();
    /// assert_eq!(report.inserted, 2);
    /// assert_eq!(w.get("b"), Some(2));
    /// ```
    pub fn extend(
        &mut self,
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> Result<BatchReport, CollectionError> {
        crate::entry::extend(self, entries)
    }

    /// The value of `key`, from the writer's own (always current) lines. (Reading a line
    /// the writer wrote can fail only if the region was corrupted; that reads as absent.)
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// w.insert(2, 20).unwrap();
    /// assert_eq!(w.get(&2), Some(20));
    /// assert_eq!(w.get(&3), None);
    /// ```
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Query<K> + Hash + ?Sized,
    {
        self.try_get(key).ok().flatten()
    }

    /// [`get`](Self::get), telling a corrupt region (an error) from an absent key.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiHashMap::<String, u64>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// w.insert("two".into(), 2).unwrap();
    /// assert_eq!(w.try_get("two").unwrap(), Some(2));
    /// assert_eq!(w.try_get("three").unwrap(), None);
    /// ```
    pub fn try_get<Q>(&self, key: &Q) -> Result<Option<V>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + Hash + ?Sized,
    {
        let h = key_hash(key);
        let Some(pi) = self.part_index(partition_of(h, self.map.partitions())) else {
            return Ok(None);
        };
        let part = &self.partitions[pi];
        let b = bucket_of(h, part.buckets);
        for l in self.published_chain(pi, b) {
            if let Some((_, _, v)) = find::<K, V, Q, M, H>(part, &l?.line, key, h, &self.writer)? {
                return Ok(Some(V::from_word(&v, &self.writer)?));
            }
        }
        Ok(None)
    }

    fn bucket_line(&self, pi: usize, b: usize) -> Result<BucketLine, CollectionError> {
        let array = self.partitions[pi].array;
        Ok(self.writer.read_own_line(array, 1 + b)?)
    }

    /// Bucket `b`'s chain as published: its line in the array, then its overflow lines.
    fn published_chain(
        &self,
        pi: usize,
        b: usize,
    ) -> impl Iterator<Item = Result<ChainLine, CollectionError>> + '_ {
        let first = self
            .bucket_line(pi, b)
            .map(|line| ChainLine { link: None, line });
        let rest = overflow_of(&self.partitions[pi], b).iter().map(|&link| {
            let line = self.writer.read_own_line(link, 0)?;
            Ok(ChainLine {
                link: Some(link),
                line,
            })
        });
        std::iter::once(first).chain(rest)
    }

    /// Asks for the bucket and tag lines `key` would be staged from (a software
    /// prefetch, [`STAGE_AHEAD`] keys ahead of a batch's staging).
    #[inline(always)]
    fn prefetch_bucket(&self, key: &K) {
        let h = key_hash(key);
        if let Some(pi) = self.part_index(partition_of(h, self.map.partitions())) {
            let part = &self.partitions[pi];
            let b = bucket_of(h, part.buckets);
            self.writer.prefetch_line(part.array, 1 + b);
            self.writer
                .prefetch_line(part.array, tag_line::<K::Word, V::Word>(part.buckets, b));
        }
    }

    /// Bucket `b`'s tag group as published.
    fn tag_group(&self, pi: usize, b: usize) -> Result<Group, CollectionError> {
        let part = &self.partitions[pi];
        let at = tag_line::<K::Word, V::Word>(part.buckets, b);
        let line: BucketLine = self.writer.read_own_line(part.array, at)?;
        Ok(Group::of::<K::Word, V::Word>(&line, b))
    }

    /// Whether `key` is present.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// w.insert(2, 20).unwrap();
    /// assert!(w.contains_key(&2));
    /// assert!(!w.contains_key(&20));
    /// ```
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Query<K> + Hash + ?Sized,
    {
        self.get(key).is_some()
    }

    /// Inserts or replaces; returns the previous value. Published (visible to lazy
    /// lookups on every node) when it returns.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// assert_eq!(w.insert(2, 20).unwrap(), None);
    /// assert_eq!(w.insert(2, 21).unwrap(), Some(20));
    /// assert_eq!(map.read_handle(&s.nodes[0]).unwrap().get(&2).unwrap(), Some(21));
    /// ```
    pub fn insert(&mut self, key: K, value: V) -> Result<Option<V>, CollectionError> {
        match self.apply_one(|h, stage| h.stage(stage, &key, Some((&key, &value))))? {
            Effect::Replaced(v) => Ok(Some(v)),
            _ => Ok(None),
        }
    }

    /// Removes `key`; returns its value if it was present.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// w.insert(2, 20).unwrap();
    /// assert_eq!(w.remove(&2).unwrap(), Some(20));
    /// assert_eq!(w.remove(&2).unwrap(), None);
    /// assert_eq!(w.len(), 0);
    /// ```
    pub fn remove<Q>(&mut self, key: &Q) -> Result<Option<V>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + Hash + ?Sized,
    {
        match self.apply_one(|h, stage| h.stage(stage, key, None))? {
            Effect::Removed(v) => Ok(Some(v)),
            _ => Ok(None),
        }
    }

    /// Replaces the value of `key`, if present, with `f(value)`, published before it
    /// returns; returns the old value (`None`, and nothing written, if absent).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiHashMap::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 10).unwrap();
    /// assert_eq!(w.update(1, |v| v + 1).unwrap(), Some(10));
    /// assert_eq!(w.update(2, |v| v + 1).unwrap(), None); // absent: nothing written
    /// assert_eq!(w.get(&1), Some(11));
    /// assert_eq!(w.len(), 1);
    /// ```
    pub fn update(
        &mut self,
        key: K,
        f: impl FnOnce(&V) -> V,
    ) -> Result<Option<V>, CollectionError> {
        crate::entry::update(self, key, f)
    }

    /// The value of `key`, inserting `f()` first if it is absent.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiHashMap::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// assert_eq!(w.get_or_insert_with(3, || 30).unwrap(), 30);
    /// assert_eq!(w.get_or_insert_with(3, || 99).unwrap(), 30); // already there
    /// assert_eq!(w.get(&3), Some(30));
    /// ```
    pub fn get_or_insert_with(
        &mut self,
        key: K,
        f: impl FnOnce() -> V,
    ) -> Result<V, CollectionError> {
        crate::entry::get_or_insert_with(self, key, f)
    }

    /// Sets `key` to `f(current value)`: `Some` inserts or replaces, `None` removes.
    /// Returns the old value. The closure runs here, on the writer; other processes send
    /// [`Op`]s instead.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiHashMap::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// let count = |v: Option<u32>| Some(v.unwrap_or(0) + 1);
    /// assert_eq!(w.compute(7, count).unwrap(), None);
    /// assert_eq!(w.compute(7, count).unwrap(), Some(1));
    /// assert_eq!(w.compute(7, |_| None).unwrap(), Some(2)); // removes
    /// assert_eq!(w.get(&7), None);
    /// ```
    pub fn compute(
        &mut self,
        key: K,
        f: impl FnOnce(Option<V>) -> Option<V>,
    ) -> Result<Option<V>, CollectionError> {
        crate::entry::compute(self, key, f)
    }

    /// Logs deferred retirements and gives back to the heap every retired block whose
    /// grace period has passed.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// for v in 0..5 {
    ///     w.insert(1, v).unwrap();
    /// }
    /// for k in 0..100 {
    ///     w.insert(k, k).unwrap(); // resizes retire the old arrays
    /// }
    /// w.reclaim().unwrap();
    /// s.quiesce_all().unwrap();
    /// s.quiesce_all().unwrap(); // the grace period has passed
    /// assert!(w.reclaim().unwrap().freed_blocks > 0);
    /// ```
    pub fn reclaim(&mut self) -> Result<ReclaimReport, CollectionError> {
        Ok(self.writer.reclaim()?)
    }

    fn part_index(&self, p: usize) -> Option<usize> {
        self.parts.contains(&p).then(|| p - self.parts.start)
    }

    fn apply_one(
        &mut self,
        one: impl FnOnce(&mut Self, &mut Stage<K::Word, V::Word>) -> Result<Effect<V>, CollectionError>,
    ) -> Result<Effect<V>, CollectionError> {
        let mut stage = Stage::with_capacity(1);
        // On an error nothing is staged: `Self::stage` gives back what it took.
        let outcome = one(self, &mut stage)?;
        self.commit(stage)?;
        self.after_commit()?;
        Ok(outcome)
    }

    /// Stages one operation. On an error, nothing of this operation is staged and the
    /// pair it made was given back.
    /// Stages one change of `key` into `stage`: an insert of `(key, value)` when `insert`
    /// is given, a removal otherwise.
    fn stage<Q: Query<K> + Hash + ?Sized>(
        &mut self,
        stage: &mut Stage<K::Word, V::Word>,
        key: &Q,
        insert: Option<(&K, &V)>,
    ) -> Result<Effect<V>, CollectionError> {
        let h = key_hash(key);
        let pi = self
            .part_index(partition_of(h, self.map.partitions()))
            .ok_or_else(|| CollectionError::Corrupt {
                reason: "the key belongs to a partition this handle does not write",
            })?;
        let b = bucket_of(h, self.partitions[pi].buckets);
        let at = match stage.position((pi, b)) {
            Some(at) => at,
            None => {
                let tags = self.tag_group(pi, b)?;
                let chain: Vec<ChainLine> =
                    self.published_chain(pi, b).collect::<Result<_, _>>()?;
                let was = chain[0].line;
                stage.push(
                    (pi, b),
                    Staged {
                        was,
                        was_count: count(&chain),
                        tags,
                        chain,
                        created: Vec::new(),
                        superseded: Vec::new(),
                        retire: Vec::new(),
                        pairs: Vec::new(),
                        freed: Vec::new(),
                        strings: Strings::default(),
                    },
                )
            }
        };
        let staged = &mut stage.buckets[at].1;
        let part = &self.partitions[pi];
        let w = &mut self.writer;
        let mut found = None;
        for (i, l) in staged.chain.iter().enumerate() {
            if let Some((j, k, v)) =
                staged_find::<K, V, Q, M, H>(part, &staged.pairs, &l.line, key, h, w)?
            {
                found = Some((i, j, k, v));
                break;
            }
        }
        // The old value, read before anything of it is dropped.
        let old = match found {
            Some((_, _, _, v)) => Some(V::from_word(&v, w)?),
            None => None,
        };
        match (insert, found) {
            (Some((key, value)), found) => {
                let (i, j, k) = match found {
                    // The stored key stays.
                    Some((i, j, k, _)) => (i, j, k),
                    None => {
                        // `Fault::ChainMiss`: emptied entries are anyone's.
                        let keep_freed = !w.faults().has(Fault::ChainMiss);
                        let mut own = None;
                        if keep_freed {
                            for (at, f) in staged.freed.iter().enumerate() {
                                if key.matches(&f.2, w)? {
                                    own = Some(at);
                                    break;
                                }
                            }
                        }
                        let free = match own {
                            // The key was removed earlier in the batch: back to its entry.
                            Some(at) => {
                                let (i, j, _) = staged.freed.swap_remove(at);
                                Some((i, j))
                            }
                            None => staged.free_entry::<K::Word, V::Word>(keep_freed),
                        };
                        let (i, j) = free.unwrap_or_else(|| {
                            staged.chain.push(ChainLine {
                                link: None,
                                line: BucketLine::default(),
                            });
                            (staged.chain.len() - 1, 0)
                        });
                        (i, j, staged.strings.word(w, key)?)
                    }
                };
                if V::OUT_OF_LINE {
                    let len = crate::stored::out_of_line_len(value);
                    self.longest_value = self.longest_value.map(|l| l.max(len));
                }
                let v = match staged.strings.word(w, value) {
                    Ok(v) => v,
                    Err(e) => {
                        if found.is_none() {
                            staged.strings.unused::<K, M, H>(w, &k);
                        }
                        return Err(e);
                    }
                };
                if i == 0 {
                    staged
                        .tags
                        .set::<K::Word, V::Word>(j, Group::tag::<K::Word, V::Word>(h));
                }
                if Words::<K, V>::INLINE {
                    staged.chain[i].line.put(j, k, v);
                } else {
                    let pair = match w.alloc_sealed(Pair { key: k, value: v }) {
                        Ok(pair) => pair,
                        Err(e) => {
                            if found.is_none() {
                                staged.strings.unused::<K, M, H>(w, &k);
                            }
                            staged.strings.unused::<V, M, H>(w, &v);
                            return Err(e.into());
                        }
                    };
                    if found.is_some() {
                        let (_, replaced) = staged.chain[i].line.linked::<K::Word, V::Word>(j);
                        drop_pair(staged, replaced);
                    }
                    staged.created.push(pair);
                    staged.pairs.push((pair, (k, v)));
                    staged.chain[i].line.put_linked(j, h, pair);
                }
                if let Some((_, _, _, replaced)) = found {
                    staged.strings.dropped::<V>(&replaced);
                }
                Ok(old.map_or(Effect::Inserted, Effect::Replaced))
            }
            (None, Some((i, j, k, v))) => {
                if !Words::<K, V>::INLINE {
                    let (_, pair) = staged.chain[i].line.linked::<K::Word, V::Word>(j);
                    drop_pair(staged, pair);
                }
                staged.chain[i].line.clear::<K::Word, V::Word>(j);
                if i == 0 {
                    staged.tags.set::<K::Word, V::Word>(j, 0);
                }
                staged.freed.push((i, j, k));
                staged.strings.dropped::<K>(&k);
                staged.strings.dropped::<V>(&v);
                Ok(old.map_or(Effect::Absent, Effect::Removed))
            }
            (None, None) => Ok(Effect::Absent),
        }
    }

    fn abort(&mut self, staged: impl IntoIterator<Item = Staged<K::Word, V::Word>>) {
        for mut s in staged {
            s.strings.abandon(&mut self.writer);
            for l in s.created.into_iter().chain(s.superseded) {
                let _ = self.writer.discard_link(l);
            }
        }
    }

    /// Publishes staged buckets, partition by partition, a chunk of lines per fence, and
    /// adopts each chunk once it is published. Each chunk rewrites the partition's counters
    /// with the length so far.
    ///
    /// Every bucket is prepared (its new overflow lines allocated) before anything is
    /// published, so a heap that runs out fails the commit with nothing of it published
    /// (and everything staged given back). A publication that fails after that leaves
    /// the chunks published so far (adopted) and gives the rest back.
    fn commit(&mut self, stage: Stage<K::Word, V::Word>) -> Result<(), CollectionError> {
        let mut staged = stage.into_sorted().into_iter();
        let mut ready: Vec<((usize, usize), ReadyOf<K, V>)> = Vec::with_capacity(staged.len());
        for ((pi, b), s) in staged.by_ref() {
            match self.prepare(pi, b, s) {
                Ok(r) => ready.push(((pi, b), r)),
                Err(e) => {
                    self.abort_ready(ready);
                    self.abort(staged.map(|(_, s)| s));
                    return Err(e);
                }
            }
        }
        let mut items = ready.into_iter().peekable();
        let most = chunk_lines(&self.writer, 1);
        while let Some(first) = items.next() {
            // A chunk: buckets of one partition, up to `most` lines (at least one bucket,
            // however long its chain), each bucket's tag line counted.
            let pi = first.0.0;
            let lines_of = |r: &ReadyOf<K, V>| r.staged.chain.len() + 1;
            let mut lines = lines_of(&first.1);
            let mut chunk = vec![(first.0.1, first.1)];
            while let Some(next) =
                items.next_if(|((p, _), r)| *p == pi && lines + lines_of(r) <= most)
            {
                lines += lines_of(&next.1);
                chunk.push((next.0.1, next.1));
            }
            if let Err(e) = self.commit_chunk(pi, chunk) {
                self.abort_ready(items.collect());
                return Err(e);
            }
        }
        Ok(())
    }

    /// Gives back prepared buckets that will not be published: the lines they
    /// allocated and what they staged.
    fn abort_ready(&mut self, ready: Vec<(impl Sized, ReadyOf<K, V>)>) {
        for (_, r) in ready {
            for l in r.allocated {
                let _ = self.writer.discard_lines(l);
            }
            self.abort([r.staged]);
        }
    }

    /// Publishes prepared buckets of partition `pi` with one rewrite (one fence). On an
    /// error, nothing of them is published and they are given back.
    fn commit_chunk(
        &mut self,
        pi: usize,
        ready: Vec<(usize, ReadyOf<K, V>)>,
    ) -> Result<(), CollectionError> {
        let array = self.partitions[pi].array;
        let (mut len, mut sum) = (self.partitions[pi].len, self.partitions[pi].sum);
        // Each bucket's lines, its tag line and the counters: a rewrite of one key's
        // bucket needs no more room than this.
        let lines: usize = ready.iter().map(|(_, r)| r.rewrites.len() + 1).sum();
        let mut rewrites = Vec::with_capacity(lines + 1);
        for (_, r) in &ready {
            rewrites.extend_from_slice(&r.rewrites);
            len = len + count(&r.staged.chain) - r.staged.was_count;
            sum = sum.wrapping_add(r.added);
        }
        // The tag lines of the changed groups (buckets are in order, so the buckets of one
        // tag line are together): the line being edited, and whether it changed.
        let buckets = self.partitions[pi].buckets;
        let mut editing: Option<(usize, BucketLine, bool)> = None;
        for (b, r) in &ready {
            let at = tag_line::<K::Word, V::Word>(buckets, *b);
            if editing.is_none_or(|(i, _, _)| i != at) {
                if let Some((i, line, true)) = editing {
                    rewrites.push((array, i, line));
                }
                match self.writer.read_own_line(array, at) {
                    Ok(line) => editing = Some((at, line, false)),
                    Err(e) => {
                        self.abort_ready(ready);
                        return Err(e.into());
                    }
                }
            }
            if let Some((_, line, changed)) = editing.as_mut()
                && Group::of::<K::Word, V::Word>(line, *b) != r.staged.tags
            {
                r.staged.tags.store::<K::Word, V::Word>(line, *b);
                *changed = true;
            }
        }
        if let Some((i, line, true)) = editing {
            rewrites.push((array, i, line));
        }
        let at = counters_line(self.partitions[pi].buckets);
        let failed = self.partitions[pi].failed_grows;
        rewrites.push((array, at, BucketLine::counters(len, sum, failed)));
        if let Err(e) = self.writer.rewrite_lines(&rewrites) {
            self.abort_ready(ready);
            return Err(e.into());
        }
        let part = &mut self.partitions[pi];
        part.len = len;
        part.sum = sum;
        let (mut pairs, mut strings) = (Vec::new(), Vec::new());
        for (b, r) in ready {
            if !r.staged.strings.is_empty() {
                strings.push(r.staged.strings);
            }
            let rest: Box<[LineLink]> = r.staged.chain[1..].iter().filter_map(|l| l.link).collect();
            if rest.is_empty() {
                part.overflow.remove(&b);
            } else {
                part.overflow.insert(b, rest);
            }
            for (link, kv) in r.staged.pairs {
                part.pairs.insert(link.raw(), kv);
            }
            for l in r.staged.superseded.iter().chain(&r.staged.retire) {
                part.pairs.remove(&l.raw());
            }
            for l in r.staged.superseded {
                let _ = self.writer.discard_link(l);
            }
            pairs.extend(r.staged.retire);
        }
        self.writer.defer_retire(pairs)?;
        for mut s in strings {
            s.settle(&mut self.writer)?;
        }
        Ok(self.writer.flush_deferred()?)
    }

    /// Makes a staged chain publishable: drops staged overflow lines that ended empty
    /// (emptied published ones stay linked), allocates new ones (from the tail, so each
    /// links to a line already written) and lists the rewrites of lines that changed
    /// and what they add to the stamp sum. On an error, the lines it allocated were
    /// given back.
    fn prepare(
        &mut self,
        pi: usize,
        b: usize,
        mut s: Staged<K::Word, V::Word>,
    ) -> Result<Ready<K::Word, V::Word>, CollectionError> {
        let mut first = true;
        s.chain.retain(|l| {
            let keep = first || l.link.is_some() || !l.line.is_empty();
            first = false;
            keep
        });
        s.tags.set_chained::<K::Word, V::Word>(s.chain.len() > 1);
        let mut allocated = Vec::new();
        let mut next = LineLink::null();
        for i in (0..s.chain.len()).rev() {
            let l = &mut s.chain[i];
            l.line.set_next(next);
            if i > 0 && l.link.is_none() {
                match self.writer.alloc_lines(&[l.line]) {
                    Ok(link) => {
                        allocated.push(link);
                        l.link = Some(link);
                    }
                    Err(e) => return Err(self.give_back(allocated, s, e.into())),
                }
            }
            next = l.link.unwrap_or(LineLink::null());
        }
        let part = &self.partitions[pi];
        let mut rewrites = Vec::new();
        if s.chain[0].line != s.was {
            rewrites.push((part.array, 1 + b, s.chain[0].line));
        }
        for l in &s.chain[1..] {
            let Some(link) = l.link else { continue };
            if overflow_of(part, b).contains(&link) {
                match self.writer.read_own_line::<BucketLine>(link, 0) {
                    Ok(was) if was == l.line => {}
                    Ok(_) => rewrites.push((link, 0, l.line)),
                    Err(e) => return Err(self.give_back(allocated, s, e.into())),
                }
            }
        }
        // Each rewrite advances a stamp by one step; each new line adds its own. (A line
        // whose versions ran out fails the rewrite: nothing is published.)
        let added = match stamp_sum(&self.writer, allocated.iter().map(|&l| (l, 0))) {
            Ok(new) => Stamp::REWRITE_STEP
                .wrapping_mul(rewrites.len() as u64)
                .wrapping_add(new),
            Err(e) => return Err(self.give_back(allocated, s, e.into())),
        };
        Ok(Ready {
            staged: s,
            rewrites,
            allocated,
            added,
        })
    }

    /// Gives back the lines a failed [`prepare`](Self::prepare) allocated and its staged
    /// chain; returns `e`.
    fn give_back(
        &mut self,
        allocated: Vec<LineLink>,
        s: Staged<K::Word, V::Word>,
        e: CollectionError,
    ) -> CollectionError {
        for a in allocated {
            let _ = self.writer.discard_lines(a);
        }
        self.abort([s]);
        e
    }

    /// Resizes partitions whose load left the band.
    fn after_commit(&mut self) -> Result<(), CollectionError> {
        let per = Words::<K, V>::PER_LINE;
        for pi in 0..self.partitions.len() {
            let part = &self.partitions[pi];
            let (len, buckets) = (part.len, part.buckets);
            // Grow past the grow point to at least twice the buckets; shrink under an
            // eighth full.
            let fits = Words::<K, V>::buckets_for(len);
            if Words::<K, V>::past_grow_point(len, buckets)
                && buckets < MAX_BUCKETS
                && len >= part.grow_after
            {
                let target = (fits + 1)
                    .next_power_of_two()
                    .max(buckets.saturating_mul(2));
                if self.resize(pi, target.min(MAX_BUCKETS)).is_err() {
                    // The map stays correct with longer chains; retry after more growth.
                    // The counters say so, for every reader to see.
                    let part = &mut self.partitions[pi];
                    part.grow_after = len + len / 2 + 1;
                    part.failed_grows += 1;
                    let failed = part.failed_grows;
                    let (array, at) = (part.array, counters_line(part.buckets));
                    let counters = BucketLine::counters(len, part.sum, failed);
                    self.writer.rewrite_lines(&[(array, at, counters)])?;
                }
            } else if len < buckets * per / 8
                && len < part.checked_len
                && buckets > self.min_buckets
            {
                // To a quarter to half full. A failed shrink (heap exhausted) leaves the
                // larger table in place.
                let target = (fits + 1).next_power_of_two();
                let _ = self.resize(pi, target.max(self.min_buckets));
            }
        }
        for part in &mut self.partitions {
            part.checked_len = part.len;
        }
        if self.role.is_some() {
            // A named map's one handle writes every partition: its count is the map's.
            let entries = self.len();
            self.writer.note_entries(self.map.slot(), entries);
        }
        Ok(())
    }

    /// Allocates (not published) a bucket array of `buckets` buckets holding `len` keys,
    /// whose bucket `b` starts with `first(b)` and its tags (empty for `None`) and goes
    /// on to the overflow line `heads[b]` names; `overflow` is the sum of the stamps of
    /// all the overflow lines. Returns the array and the partition's stamp sum, which its
    /// counters line holds (written once the array's stamps are known).
    fn build_array(
        &mut self,
        buckets: usize,
        len: usize,
        heads: Vec<Option<LineLink>>,
        overflow: u64,
        failed_grows: u64,
        first: impl Fn(usize) -> Option<(BucketLine, Group)>,
    ) -> Result<(LineLink, u64), CollectionError> {
        let mut lines = Vec::with_capacity(array_lines::<K::Word, V::Word>(buckets));
        lines.push(BucketLine::header(buckets, code::<K, V>()));
        let mut tags = vec![BucketLine::default(); array_lines::<K::Word, V::Word>(buckets)];
        tags.truncate(tags.len() - counters_line(buckets) - 1);
        for b in 0..buckets {
            let (mut l, mut group) = first(b).unwrap_or_default();
            let head = heads.get(b).copied().flatten();
            l.set_next(head.unwrap_or(LineLink::null()));
            lines.push(l);
            group.set_chained::<K::Word, V::Word>(head.is_some());
            let at = tag_line::<K::Word, V::Word>(buckets, b) - counters_line(buckets) - 1;
            group.store::<K::Word, V::Word>(&mut tags[at], b);
        }
        lines.push(BucketLine::counters(len, 0, failed_grows));
        lines.extend(tags);
        let array = self.writer.alloc_lines(&lines)?;
        let counted = self.writer.line_stamp(array, 1).and_then(|stamp| {
            // Every line of a new array carries the array's one stamp.
            let sum = stamp
                .raw()
                .wrapping_mul(buckets as u64)
                .wrapping_add(overflow);
            let counters = BucketLine::counters(len, sum, failed_grows);
            self.writer
                .rewrite_lines(&[(array, counters_line(buckets), counters)])?;
            Ok(sum)
        });
        match counted {
            Ok(sum) => Ok((array, sum)),
            Err(e) => {
                let _ = self.writer.discard_lines(array);
                Err(e.into())
            }
        }
    }

    /// Builds partition `pi` anew with `buckets` buckets from its entries, publishes the
    /// new array and retires the old array and overflow lines. Pairs stay
    /// where they are: the new lines link to them.
    fn resize(&mut self, pi: usize, buckets: usize) -> Result<(), CollectionError> {
        let part = &self.partitions[pi];
        // Each bucket's first line in one array, and the lines after it only for the
        // buckets that need them (a few percent): no allocation per bucket.
        let mut firsts = vec![(BucketLine::default(), Group::default()); buckets];
        let mut tails: HashMap<usize, Vec<BucketLine>, FixedState> = HashMap::default();
        for b in 0..part.buckets {
            for l in self.published_chain(pi, b) {
                let l = &l?.line;
                for j in l.used_entries::<K::Word, V::Word>() {
                    let h = entry_hash::<K, V, M, H>(l, j, &self.writer)?;
                    let nb = bucket_of(h, buckets);
                    let last = match tails.get_mut(&nb).and_then(|t| t.last_mut()) {
                        Some(line) => line,
                        None => {
                            let (line, tags) = &mut firsts[nb];
                            if let Some(e) = line.free_entry::<K::Word, V::Word>() {
                                tags.set::<K::Word, V::Word>(e, Group::tag::<K::Word, V::Word>(h));
                            }
                            line
                        }
                    };
                    match last.free_entry::<K::Word, V::Word>() {
                        Some(e) => copy_entry::<K::Word, V::Word>(l, j, last, e),
                        None => {
                            let mut line = BucketLine::default();
                            copy_entry::<K::Word, V::Word>(l, j, &mut line, 0);
                            tails.entry(nb).or_default().push(line);
                        }
                    }
                }
            }
        }
        // Overflow lines first, from each chain's tail.
        let mut allocated = Vec::new();
        let mut overflow: HashMap<usize, Box<[LineLink]>, FixedState> = HashMap::default();
        let mut heads = vec![None; buckets];
        let mut built = Ok(());
        'build: for (&b, tail) in tails.iter_mut() {
            let mut next = LineLink::null();
            let mut rest = Vec::new();
            for line in tail.iter_mut().rev() {
                line.set_next(next);
                match self.writer.alloc_lines(&[*line]) {
                    Ok(link) => {
                        allocated.push(link);
                        rest.push(link);
                        next = link;
                    }
                    Err(e) => {
                        built = Err(e.into());
                        break 'build;
                    }
                }
            }
            rest.reverse();
            overflow.insert(b, rest.into_boxed_slice());
            heads[b] = Some(next);
        }
        let (len, failed) = (self.partitions[pi].len, self.partitions[pi].failed_grows);
        let published = built
            .and_then(|()| Ok(stamp_sum(&self.writer, allocated.iter().map(|&l| (l, 0)))?))
            .and_then(|overflow| {
                self.build_array(buckets, len, heads, overflow, failed, |b| Some(firsts[b]))
            })
            .and_then(|(array, sum)| {
                let slot = self.partitions[pi].slot;
                match self.writer.publish_lines(slot, array) {
                    Ok(_) => Ok((array, sum)),
                    Err(e) => {
                        let _ = self.writer.discard_lines(array);
                        Err(e.into())
                    }
                }
            });
        let (array, sum) = match published {
            Ok(a) => a,
            Err(e) => {
                for l in allocated {
                    let _ = self.writer.discard_lines(l);
                }
                return Err(e);
            }
        };
        let part = &mut self.partitions[pi];
        let old_overflow = std::mem::replace(&mut part.overflow, overflow);
        part.buckets = buckets;
        part.sum = sum;
        let old_array = std::mem::replace(&mut part.array, array);
        let old = old_overflow.values().flatten().copied();
        self.writer
            .defer_retire(std::iter::once(old_array).chain(old))?;
        // Retired now, not when the bag fills: a reader that refetches a line of the old
        // array must find it FREED and go to the new one, never mix the two (overflow
        // lines move to the new array and are rewritten there).
        Ok(self.writer.flush_deferred()?)
    }
}

/// The sum (wrapping) of the stamps the lines `(array, index)` of this writer carry now.
fn stamp_sum<M: MemView, H: Heap>(
    writer: &Writer<M, H>,
    lines: impl IntoIterator<Item = (LineLink, usize)>,
) -> Result<u64, BiError> {
    lines.into_iter().try_fold(0u64, |sum, (array, i)| {
        Ok(sum.wrapping_add(writer.line_stamp(array, i)?.raw()))
    })
}

/// The hash of the key in entry `j` of `line`: kept in a linked entry, computed from the
/// key of an inline one.
fn entry_hash<K: Stored + Hash, V: Stored, M: MemView, H: Heap>(
    line: &BucketLine,
    j: usize,
    w: &Writer<M, H>,
) -> Result<u64, CollectionError> {
    Ok(if Words::<K, V>::INLINE {
        key_hash(&K::from_word(&line.key::<K::Word, V::Word>(j), w)?)
    } else {
        line.linked::<K::Word, V::Word>(j).0
    })
}

/// Bucket `b`'s overflow lines (none for most buckets).
fn overflow_of<K, V>(part: &Partition<K, V>, b: usize) -> &[LineLink] {
    part.overflow.get(&b).map_or(&[], |chain| chain)
}

/// Keys held by a chain's lines.
fn count<'a>(chain: impl IntoIterator<Item = &'a ChainLine>) -> usize {
    chain.into_iter().map(|l| l.line.entries()).sum()
}

/// The entry of `key` in `line` (its index and value), with the partition's pairs.
/// The entry of `key` in `line`: its index and words.
fn find<K: Stored + Eq, V: Stored, Q: Query<K> + ?Sized, M: MemView, H: Heap>(
    part: &Partition<K::Word, V::Word>,
    line: &BucketLine,
    key: &Q,
    h: u64,
    w: &Writer<M, H>,
) -> Result<Option<Found<K, V>>, CollectionError> {
    staged_find::<K, V, Q, M, H>(part, &[], line, key, h, w)
}

/// [`find`] in a staged line, whose linked entries may name pairs the batch made.
fn staged_find<K: Stored + Eq, V: Stored, Q: Query<K> + ?Sized, M: MemView, H: Heap>(
    part: &Partition<K::Word, V::Word>,
    staged: &[NewPair<K::Word, V::Word>],
    line: &BucketLine,
    key: &Q,
    h: u64,
    w: &Writer<M, H>,
) -> Result<Option<Found<K, V>>, CollectionError> {
    for j in line.used_entries::<K::Word, V::Word>() {
        let (k, v) = if Words::<K, V>::INLINE {
            (
                line.key::<K::Word, V::Word>(j),
                line.value::<K::Word, V::Word>(j),
            )
        } else {
            let (hash, pair) = line.linked::<K::Word, V::Word>(j);
            if hash != h {
                continue;
            }
            let known = part.pairs.get(&pair.raw()).copied().or_else(|| {
                staged
                    .iter()
                    .rev()
                    .find(|(l, _)| *l == pair)
                    .map(|&(_, kv)| kv)
            });
            let Some(kv) = known else { continue };
            kv
        };
        if key.matches(&k, w)? {
            return Ok(Some((j, k, v)));
        }
    }
    Ok(None)
}

fn drop_pair<K, V>(staged: &mut Staged<K, V>, pair: PairLink<K, V>) {
    if staged.created.contains(&pair) {
        staged.created.retain(|&l| l != pair);
        staged.superseded.push(pair);
    } else {
        staged.retire.push(pair);
    }
}

/// Copies entry `j` of `from` into entry `e` of `to`.
fn copy_entry<K: Pod, V: Pod>(from: &BucketLine, j: usize, to: &mut BucketLine, e: usize) {
    if Format::<K, V>::INLINE {
        to.put(e, from.key::<K, V>(j), from.value::<K, V>(j));
    } else {
        let (h, pair) = from.linked::<K, V>(j);
        to.put_linked(e, h, pair);
    }
}

impl<K: Stored + Eq + Hash, V: Stored, M: MemView, H: Heap> ApplyBatch<K, V>
    for MapWriteHandle<K, V, M, H>
{
    /// From the writer's own lookups ([`MapWriteHandle::get`]) and the batch's earlier
    /// operations.
    fn old_values(
        &self,
        ops: &[Op<K, V>],
        olds: &mut Vec<Option<V>>,
    ) -> Result<bool, CollectionError> {
        crate::entry::old_values::<_, _, _, std::collections::HashMap<_, _>>(self, ops, olds)
    }

    /// A batch that runs out of heap publishes the operations staged before the failing
    /// one, or, if their new lines do not fit either, nothing.
    fn reports_applied_prefix(&self) -> bool {
        true
    }

    /// The longest value this handle stored (values written back by a batch that
    /// failed count too); unknown for an adopted map.
    fn longest_value(&self) -> Option<usize> {
        self.longest_value
    }

    fn reserve(&mut self, additional: usize) -> Result<(), CollectionError> {
        MapWriteHandle::reserve(self, additional)
    }

    /// Stages every operation, allocates the chains' new overflow lines, rewrites every
    /// changed line and the counters with one fence per partition (per 256 lines), then
    /// queues emptied lines and replaced pairs for retirement in bounded batches.
    fn apply_batch(&mut self, ops: &[Op<K, V>]) -> Result<BatchReport, CollectionError> {
        self.apply_staged(ops, None)
    }

    /// [`apply_batch`](ApplyBatch::apply_batch), keeping the value each operation's
    /// staging found (after the batch's earlier operations): no lookup of its own.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_collections::{ApplyBatch, Op};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiHashMap::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 10).unwrap();
    /// let ops = [Op::Insert(1, 11), Op::Remove(1), Op::Remove(1), Op::Insert(2, 20)];
    /// let mut olds = vec![Some(99)]; // cleared first
    /// let report = w.apply_reporting(&ops, &mut olds).unwrap();
    /// assert_eq!(olds, [Some(10), Some(11), None, None]);
    /// assert_eq!((report.replaced, report.removed, report.inserted), (1, 1, 1));
    /// ```
    fn apply_reporting(
        &mut self,
        ops: &[Op<K, V>],
        olds: &mut Vec<Option<V>>,
    ) -> Result<BatchReport, CollectionError> {
        olds.clear();
        self.apply_staged(ops, Some(olds))
    }
}

impl<K: Stored + Eq + Hash, V: Stored, M: MemView, H: Heap> MapWriteHandle<K, V, M, H> {
    /// Stages and commits `ops`; pushes onto `olds`, when given, the value each one
    /// replaced or removed.
    fn apply_staged(
        &mut self,
        ops: &[Op<K, V>],
        mut olds: Option<&mut Vec<Option<V>>>,
    ) -> Result<BatchReport, CollectionError> {
        let mut stage = Stage::with_capacity(ops.len());
        let mut report = BatchReport::default();
        let mut failure = None;
        for (i, op) in ops.iter().enumerate() {
            if let Some(ahead) = ops.get(i + STAGE_AHEAD) {
                self.prefetch_bucket(ahead.key());
            }
            let staged = match op {
                Op::Insert(k, v) => self.stage(&mut stage, k, Some((k, v))),
                Op::Remove(k) => self.stage(&mut stage, k, None),
            };
            match staged {
                Ok(o) => {
                    report.applied += 1;
                    let old = match o {
                        Effect::Inserted => {
                            report.inserted += 1;
                            None
                        }
                        Effect::Replaced(v) => {
                            report.replaced += 1;
                            Some(v)
                        }
                        Effect::Removed(v) => {
                            report.removed += 1;
                            Some(v)
                        }
                        Effect::Absent => None,
                    };
                    if let Some(olds) = olds.as_mut() {
                        olds.push(old);
                    }
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if let Err(e) = self.commit(stage) {
            // Nothing of the batch is known to be published: say none of it was
            // decided (a heap that ran out fails before anything is published).
            if let Some(olds) = olds {
                olds.clear();
            }
            return Err(e);
        }
        self.after_commit()?;
        match failure {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }
}

impl<K: Stored + Eq + Hash, V: Stored, M: MemView, H: Heap> crate::entry::Keyed<K, V>
    for MapWriteHandle<K, V, M, H>
{
    fn lookup(&self, key: &K) -> Result<Option<V>, CollectionError> {
        self.try_get(key)
    }
    fn put(&mut self, key: K, value: V) -> Result<Option<V>, CollectionError> {
        self.insert(key, value)
    }
    fn delete(&mut self, key: &K) -> Result<Option<V>, CollectionError> {
        self.remove(key)
    }
    fn entries(&self) -> Result<Vec<(K, V)>, CollectionError> {
        self.entries()
    }
}
