//! The single writer of a map (or of some of its partitions).
//!
//! Every change goes through one path: *stage* (allocate and seal new nodes, in a private
//! copy of each touched chain), *commit* (store every changed bucket slot and the length
//! with one fence, then adopt the staged chains), *retire* (the replaced nodes, queued and
//! handed to the runtime in bounded batches). A failure while staging an operation gives
//! its new nodes back and leaves the published map as it was.

use super::hash::{bucket_of, partition_of};
use super::node::Node;
use super::{BiHashMap, FIRST_BUCKET, LEN_WORD, MIN_BUCKETS, MapConfig, key_hash};
use crate::{ApplyBatch, BatchReport, CollectionError, Op};
use bi_core::heap::Heap;
use bi_core::mem::MemView;
use bi_core::runtime::{BiError, Link, ReclaimReport, SlotArray, Writer};
use bytemuck::Pod;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::hash::Hash;
use std::ops::Range;

/// Links retired per call to the runtime (each is one freed-ring entry).
const RETIRE_CHUNK: usize = 32;
/// Slot stores published per fence when a batch touches many buckets.
const PUBLISH_CHUNK: usize = 256;

type NodeLink<K, V> = Link<Node<K, V>>;

/// The writer's private record of one chain node.
struct Entry<K, V> {
    key: K,
    value: V,
    link: NodeLink<K, V>,
}

impl<K: Copy, V: Copy> Clone for Entry<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K: Copy, V: Copy> Copy for Entry<K, V> {}

/// One partition as its writer knows it: the published array and a mirror of its chains.
struct Partition<K, V> {
    slot: usize,
    array: Link<SlotArray>,
    chains: Vec<Vec<Entry<K, V>>>,
    len: usize,
    /// A failed grow is not retried before the partition holds this many keys.
    grow_after: usize,
}

/// A staged bucket: its new chain and the nodes the batch made or replaced in it.
struct StagedBucket<K, V> {
    chain: Vec<Entry<K, V>>,
    created: Vec<NodeLink<K, V>>,
    superseded: Vec<NodeLink<K, V>>,
    retire: Vec<NodeLink<K, V>>,
}

/// What one staged operation did.
enum Outcome<V> {
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
pub struct MapWriteHandle<K, V, M: MemView, H: Heap> {
    map: BiHashMap<K, V>,
    writer: Writer<M, H>,
    parts: Range<usize>,
    partitions: Vec<Partition<K, V>>,
    pending_nodes: Vec<NodeLink<K, V>>,
    pending_arrays: Vec<Link<SlotArray>>,
    max_buckets: usize,
}

impl<K, V, M: MemView, H: Heap> fmt::Debug for MapWriteHandle<K, V, M, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MapWriteHandle")
            .field("map", &self.map)
            .field("parts", &self.parts)
            .field("pending_retirements", &self.pending_nodes.len())
            .finish_non_exhaustive()
    }
}

fn largest_power_of_two_at_most(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        1 << (usize::BITS - 1 - n.leading_zeros())
    }
}

impl<K: Pod + Eq + Hash, V: Pod, M: MemView, H: Heap> MapWriteHandle<K, V, M, H> {
    pub(super) fn new(
        map: BiHashMap<K, V>,
        mut writer: Writer<M, H>,
        parts: Range<usize>,
        config: MapConfig,
    ) -> Result<Self, CollectionError> {
        let max_buckets = largest_power_of_two_at_most(writer.max_slots() - FIRST_BUCKET);
        if max_buckets < MIN_BUCKETS {
            return Err(CollectionError::Corrupt {
                reason: "the line size leaves no room for a bucket array",
            });
        }
        let buckets = config.start_buckets(max_buckets);
        let mut partitions = Vec::with_capacity(parts.len());
        for p in parts.clone() {
            let slot = map.partition_slot(p);
            let array = writer.alloc_slots(FIRST_BUCKET + buckets)?;
            if let Err(e) = writer.publish_slots(slot, array) {
                let _ = writer.discard_slots(array);
                return Err(e.into());
            }
            partitions.push(Partition {
                slot,
                array,
                chains: vec![Vec::new(); buckets],
                len: 0,
                grow_after: 0,
            });
        }
        Ok(MapWriteHandle {
            map,
            writer,
            parts,
            partitions,
            pending_nodes: Vec::new(),
            pending_arrays: Vec::new(),
            max_buckets,
        })
    }

    /// The map this handle writes.
    pub fn map(&self) -> BiHashMap<K, V> {
        self.map
    }

    /// The partitions this handle writes.
    pub fn partitions(&self) -> Range<usize> {
        self.parts.clone()
    }

    /// The writer (for its statistics: retired bytes, heap, ring usage).
    pub fn writer(&self) -> &Writer<M, H> {
        &self.writer
    }

    /// Gives the writer back. Retirements still queued (see
    /// [`pending_retirements`](Self::pending_retirements)) are abandoned: their memory
    /// is not reused.
    pub fn into_writer(mut self) -> Writer<M, H> {
        let _ = self.flush_retired();
        self.writer
    }

    /// Keys in the partitions this handle writes.
    pub fn len(&self) -> usize {
        self.partitions.iter().map(|p| p.len).sum()
    }

    /// Whether the partitions this handle writes are empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Buckets over the partitions this handle writes.
    pub fn capacity(&self) -> usize {
        self.partitions.iter().map(|p| p.chains.len()).sum()
    }

    /// Buckets of partition `p` (`None` if this handle does not write it).
    pub fn buckets(&self, p: usize) -> Option<usize> {
        self.part_index(p).map(|i| self.partitions[i].chains.len())
    }

    /// Most buckets one partition grows to with this line size.
    pub fn max_buckets(&self) -> usize {
        self.max_buckets
    }

    /// Replaced nodes and arrays waiting to be handed to the runtime for retirement
    /// (when its freed ring was full).
    pub fn pending_retirements(&self) -> usize {
        self.pending_nodes.len() + self.pending_arrays.len()
    }

    /// The value of `key`, from the writer's own (always current) record.
    pub fn get(&self, key: &K) -> Option<V> {
        let h = key_hash(key);
        let pi = self.part_index(partition_of(h, self.map.partitions()))?;
        let chains = &self.partitions[pi].chains;
        chains[bucket_of(h, chains.len())]
            .iter()
            .find(|e| e.key == *key)
            .map(|e| e.value)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// Inserts or replaces; returns the previous value. Published (visible to lazy
    /// lookups on every node) when it returns.
    pub fn insert(&mut self, key: K, value: V) -> Result<Option<V>, CollectionError> {
        match self.apply_one(Op::Insert(key, value))? {
            Outcome::Replaced(v) => Ok(Some(v)),
            _ => Ok(None),
        }
    }

    /// Removes `key`; returns its value if it was present.
    pub fn remove(&mut self, key: &K) -> Result<Option<V>, CollectionError> {
        match self.apply_one(Op::Remove(*key))? {
            Outcome::Removed(v) => Ok(Some(v)),
            _ => Ok(None),
        }
    }

    /// Hands queued retirements to the runtime and gives back to the heap every retired
    /// block whose grace period has passed.
    pub fn reclaim(&mut self) -> Result<ReclaimReport, CollectionError> {
        self.flush_retired()?;
        Ok(self.writer.reclaim()?)
    }

    fn part_index(&self, p: usize) -> Option<usize> {
        self.parts.contains(&p).then(|| p - self.parts.start)
    }

    fn apply_one(&mut self, op: Op<K, V>) -> Result<Outcome<V>, CollectionError> {
        let mut stage = BTreeMap::new();
        let outcome = self.stage(&mut stage, op);
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                self.abort(stage);
                return Err(e);
            }
        };
        self.commit(stage)?;
        self.after_commit()?;
        Ok(outcome)
    }

    /// Stages one operation. On an error, nothing of this operation is staged and its
    /// new nodes were given back.
    fn stage(
        &mut self,
        stage: &mut BTreeMap<(usize, usize), StagedBucket<K, V>>,
        op: Op<K, V>,
    ) -> Result<Outcome<V>, CollectionError> {
        let key = match op {
            Op::Insert(k, _) | Op::Remove(k) => k,
        };
        let h = key_hash(&key);
        let pi = self
            .part_index(partition_of(h, self.map.partitions()))
            .ok_or(CollectionError::Corrupt {
                reason: "the key belongs to a partition this handle does not write",
            })?;
        let part = &self.partitions[pi];
        let b = bucket_of(h, part.chains.len());
        let staged = stage.entry((pi, b)).or_insert_with(|| StagedBucket {
            chain: part.chains[b].clone(),
            created: Vec::new(),
            superseded: Vec::new(),
            retire: Vec::new(),
        });
        let found = staged.chain.iter().position(|e| e.key == key);
        let w = &mut self.writer;
        match (op, found) {
            (Op::Insert(k, v), None) => {
                let head = staged.chain.first().map_or(Link::null(), |e| e.link);
                let link = w.alloc_sealed(Node::new(k, v, head))?;
                staged.created.push(link);
                staged.chain.insert(
                    0,
                    Entry {
                        key: k,
                        value: v,
                        link,
                    },
                );
                Ok(Outcome::Inserted)
            }
            (Op::Insert(_, v), Some(j)) => {
                let old = staged.chain[j].value;
                rebuild_prefix(w, staged, j, Some(v))?;
                Ok(Outcome::Replaced(old))
            }
            (Op::Remove(_), Some(j)) => {
                let old = staged.chain[j].value;
                rebuild_prefix(w, staged, j, None)?;
                Ok(Outcome::Removed(old))
            }
            (Op::Remove(_), None) => Ok(Outcome::Absent),
        }
    }

    /// Gives back every node a failed batch made.
    fn abort(&mut self, stage: BTreeMap<(usize, usize), StagedBucket<K, V>>) {
        for s in stage.into_values() {
            for l in s.created {
                let _ = self.writer.discard_link(l);
            }
        }
    }

    /// Publishes staged buckets, partition by partition, a chunk of slots per fence, and
    /// adopts each chunk once it is published. On an error, the chunks published so far
    /// stay (and are adopted); the rest are given back.
    fn commit(
        &mut self,
        stage: BTreeMap<(usize, usize), StagedBucket<K, V>>,
    ) -> Result<(), CollectionError> {
        let mut items: Vec<((usize, usize), StagedBucket<K, V>)> = stage.into_iter().collect();
        let mut failure = None;
        while !items.is_empty() {
            if failure.is_some() {
                let rest = std::mem::take(&mut items);
                self.abort(rest.into_iter().collect());
                break;
            }
            let pi = items[0].0.0;
            let n = items
                .iter()
                .take(PUBLISH_CHUNK)
                .take_while(|((p, _), _)| *p == pi)
                .count();
            let chunk: Vec<_> = items.drain(..n).collect();
            let part = &self.partitions[pi];
            let mut len = part.len;
            let mut updates = Vec::with_capacity(chunk.len() + 1);
            for ((_, b), s) in &chunk {
                len = len + s.chain.len() - part.chains[*b].len();
                let head = s.chain.first().map_or(0, |e| e.link.raw());
                updates.push((FIRST_BUCKET + b, head));
            }
            if len != part.len {
                updates.push((LEN_WORD, len as u64));
            }
            match self.writer.publish_words_in(part.array, &updates) {
                Ok(_) => {
                    let part = &mut self.partitions[pi];
                    part.len = len;
                    for ((_, b), s) in chunk {
                        part.chains[b] = s.chain;
                        for l in s.superseded {
                            let _ = self.writer.discard_link(l);
                        }
                        self.pending_nodes.extend(s.retire);
                    }
                }
                Err(e) => {
                    self.abort(chunk.into_iter().collect());
                    failure = Some(e);
                }
            }
        }
        match failure {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Resizes partitions whose load left the band, then queues retirements.
    fn after_commit(&mut self) -> Result<(), CollectionError> {
        for pi in 0..self.partitions.len() {
            let part = &self.partitions[pi];
            let (len, buckets) = (part.len, part.chains.len());
            if len > buckets && buckets < self.max_buckets && len >= part.grow_after {
                let target = len.next_power_of_two().min(self.max_buckets);
                if self.resize(pi, target).is_err() {
                    // The map stays correct with longer chains; retry after more growth.
                    self.partitions[pi].grow_after = len + len / 2 + 1;
                }
            } else if len < buckets / 4 && buckets > MIN_BUCKETS {
                let target = (len.max(1).next_power_of_two() * 2).max(MIN_BUCKETS);
                // A failed shrink (heap exhausted) leaves the larger table in place.
                let _ = self.resize(pi, target);
            }
        }
        self.flush_retired()
    }

    /// Builds partition `pi` anew with `buckets` buckets from copies of its nodes,
    /// publishes the new array and queues the old array and nodes for retirement.
    fn resize(&mut self, pi: usize, buckets: usize) -> Result<(), CollectionError> {
        let part = &self.partitions[pi];
        let mut chains: Vec<Vec<Entry<K, V>>> = vec![Vec::new(); buckets];
        for e in part.chains.iter().flatten() {
            chains[bucket_of(key_hash(&e.key), buckets)].push(*e);
        }
        let mut words = vec![0u64; FIRST_BUCKET + buckets];
        words[LEN_WORD] = part.len as u64;
        let mut created = Vec::with_capacity(part.len);
        let mut built = Ok(());
        'build: for (b, chain) in chains.iter_mut().enumerate() {
            let mut next = Link::null();
            for e in chain.iter_mut().rev() {
                match self.writer.alloc_sealed(Node::new(e.key, e.value, next)) {
                    Ok(l) => {
                        created.push(l);
                        e.link = l;
                        next = l;
                    }
                    Err(err) => {
                        built = Err(err);
                        break 'build;
                    }
                }
            }
            words[FIRST_BUCKET + b] = next.raw();
        }
        let published = built.and_then(|()| {
            let array = self.writer.alloc_slots_from(&words)?;
            match self.writer.publish_slots(part.slot, array) {
                Ok(_) => Ok(array),
                Err(e) => {
                    let _ = self.writer.discard_slots(array);
                    Err(e)
                }
            }
        });
        let array = match published {
            Ok(a) => a,
            Err(e) => {
                for l in created {
                    let _ = self.writer.discard_link(l);
                }
                return Err(e.into());
            }
        };
        let part = &mut self.partitions[pi];
        let old_chains = std::mem::replace(&mut part.chains, chains);
        self.pending_arrays
            .push(std::mem::replace(&mut part.array, array));
        self.pending_nodes
            .extend(old_chains.iter().flatten().map(|e| e.link));
        Ok(())
    }

    /// Retires queued links in bounded batches; stops quietly when the freed ring is full
    /// (they stay queued for the next call).
    fn flush_retired(&mut self) -> Result<(), CollectionError> {
        while let Some(&a) = self.pending_arrays.last() {
            match self.writer.retire_slots(a) {
                Ok(()) => {
                    self.pending_arrays.pop();
                }
                Err(BiError::LogFull { .. }) => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
        while !self.pending_nodes.is_empty() {
            let n = self.pending_nodes.len().min(RETIRE_CHUNK);
            let at = self.pending_nodes.len() - n;
            match self.writer.try_retire_all(&self.pending_nodes[at..]) {
                Ok(()) => self.pending_nodes.truncate(at),
                Err(BiError::LogFull { .. }) => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// Replaces the chain prefix `0..=j` of a staged bucket with fresh copies: node `j` gets
/// `replacement` (or is dropped when `None`), and every node before it is copied so that
/// the new head leads to the unchanged suffix. Copies are made from the tail side, so
/// each links to a node already sealed.
fn rebuild_prefix<K: Pod, V: Pod, M: MemView, H: Heap>(
    w: &mut Writer<M, H>,
    staged: &mut StagedBucket<K, V>,
    j: usize,
    replacement: Option<V>,
) -> Result<(), CollectionError> {
    let chain = &staged.chain;
    let mut next = chain.get(j + 1).map_or(Link::null(), |e| e.link);
    let mut made: Vec<Entry<K, V>> = Vec::with_capacity(j + 1);
    let mut result = Ok(());
    let targets = replacement
        .map(|v| (chain[j].key, v))
        .into_iter()
        .chain(chain[..j].iter().rev().map(|e| (e.key, e.value)));
    for (key, value) in targets {
        match w.alloc_sealed(Node::new(key, value, next)) {
            Ok(link) => {
                made.push(Entry { key, value, link });
                next = link;
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if let Err(e) = result {
        for m in made {
            let _ = w.discard_link(m.link);
        }
        return Err(e.into());
    }
    made.reverse();
    let created: HashSet<u64> = staged.created.iter().map(|l| l.raw()).collect();
    for old in &staged.chain[..=j] {
        if created.contains(&old.link.raw()) {
            staged.superseded.push(old.link);
        } else {
            staged.retire.push(old.link);
        }
    }
    staged.created.extend(made.iter().map(|e| e.link));
    staged.chain.splice(..=j, made);
    Ok(())
}

impl<K: Pod + Eq + Hash, V: Pod, M: MemView, H: Heap> ApplyBatch<K, V>
    for MapWriteHandle<K, V, M, H>
{
    /// Stages every operation (new nodes sealed, no fence), publishes every changed
    /// bucket and length with one fence per partition (per 256 buckets), then queues the
    /// replaced nodes for retirement in bounded batches. Nodes made and replaced inside
    /// the batch are given back at once.
    fn apply_batch(&mut self, ops: &[Op<K, V>]) -> Result<BatchReport, CollectionError> {
        let mut stage = BTreeMap::new();
        let mut report = BatchReport::default();
        let mut failure = None;
        for &op in ops {
            match self.stage(&mut stage, op) {
                Ok(o) => {
                    report.applied += 1;
                    match o {
                        Outcome::Inserted => report.inserted += 1,
                        Outcome::Replaced(_) => report.replaced += 1,
                        Outcome::Removed(_) => report.removed += 1,
                        Outcome::Absent => {}
                    }
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        self.commit(stage)?;
        self.after_commit()?;
        match failure {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }
}
