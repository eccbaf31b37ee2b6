//! The write side: private boxes, publication, retirement and reclamation.
//!
//! One [`Writer`] per node owns that node's heap and log rings. It never modifies a
//! published object: it writes a new one into a private [`BiBox`], then publishes it by
//! writing it back, storing its link into a slot, writing the slot back and logging the
//! slot (and, if tracked, the object) in its modified ring. Retiring marks the object
//! FREED, writes that back and logs it in the freed ring; the block returns to the heap
//! only once [`synchronize`](Writer::synchronize) says every live node is done with it.

use crate::heap::{Block, Heap, HeapError};
use crate::mem::MemView;
use crate::primitive::sync::atomic::Ordering;
use crate::region::RingKind;
use crate::runtime::grace::{GracePoint, grace};
use crate::runtime::object::{
    Fetch, Generation, Lines, Link, MAX_OBJECT_LINES, Shape, Stamp, check_in, fetch_with,
    write_object, write_value,
};
use crate::runtime::ring::{LogEntry, RingGeom, RingWriter};
use crate::runtime::scope::Scope;
use crate::runtime::{BiError, Fault, NodeInner, lease};
use bytemuck::Pod;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many adoption patiences a step of an adoption waits at most for ring room held by
/// a node that renewed its lease after the wait began
/// ([`keeps_waiting`](Writer::keeps_waiting)): one renewal, and a margin.
const OUTLASTED_PATIENCES: u32 = 3;

/// How many unlinked objects [`Writer::defer_retire`] collects before it retires them
/// together (crossbeam-epoch's bags hold 64 too).
pub const RETIRE_BATCH: usize = 64;

/// How many allocations ahead a writer prefetches the block it will store into
/// ([`Heap::upcoming`]): a few, so that the line is in this node's cache by then.
const PREFETCH_AHEAD: usize = 4;

/// The most blocks [`Writer::defer_retire`] gives back each time it retires a bag.
pub const RECLAIM_STEP: usize = 2 * RETIRE_BATCH;

/// A new object, private to its writer until published.
///
/// It already sits in the writer node's cache (not written back). [`set`](BiBox::set)
/// changes the value; the object is rewritten, under a new generation, when published.
/// Dropping a box without publishing it leaks its block: give it back with
/// [`Writer::discard`].
///
/// ```
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 1);
/// let mut w = s.writer(0);
/// let mut b = w.alloc([1u64, 2]).unwrap();
/// b.set([3, 4]); // still private: no other node can see it
/// let link = w.publish(s.slot(0), b).unwrap();
/// assert!(link.is_null()); // the slot held nothing
/// s.quiesce_all().unwrap();
/// let r = s.nodes[1].reader().unwrap();
/// assert_eq!(*r.enter().load::<[u64; 2]>(s.slot(0)).unwrap().unwrap(), [3, 4]);
/// ```
#[must_use = "publish the box or give it back with Writer::discard"]
pub struct BiBox<T> {
    block: Block,
    shape: Shape,
    generation: Generation,
    value: T,
    dirty: bool,
}

impl<T: Pod> BiBox<T> {
    /// The value.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let b = w.alloc(17u32).unwrap();
    /// assert_eq!(*b.get(), 17);
    /// w.discard(b).unwrap();
    /// ```
    pub fn get(&self) -> &T {
        &self.value
    }

    /// Replaces the value (rewritten into shared memory when published).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let mut b = w.alloc(1u64).unwrap();
    /// let before = b.link();
    /// b.set(2);
    /// assert_eq!(*b.get(), 2);
    /// assert_eq!(b.link().generation(), before.generation().next()); // rewritten when published
    /// w.discard(b).unwrap();
    /// ```
    pub fn set(&mut self, value: T) {
        self.value = value;
        self.dirty = true;
    }

    /// Offset of the object.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w = s.writer(1);
    /// let b = w.alloc(1u64).unwrap();
    /// assert!(s.arena(1).contains(&b.offset())); // in node 1's arena
    /// assert_eq!(b.offset(), b.link().offset());
    /// w.discard(b).unwrap();
    /// ```
    pub fn offset(&self) -> usize {
        self.block.offset
    }

    /// The link this object will be published under (a [`set`](BiBox::set) before
    /// publication moves it to the next generation, and this accounts for it).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let b = w.alloc(5u64).unwrap();
    /// let link = b.link();
    /// w.publish(s.slot(0), b).unwrap();
    /// assert_eq!(w.read_own(link).unwrap(), 5);
    /// ```
    pub fn link(&self) -> Link<T> {
        let g = if self.dirty {
            self.generation.next()
        } else {
            self.generation
        };
        Link::new(self.block.offset, g.link_bits())
    }
}

impl<T> fmt::Debug for BiBox<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BiBox")
            .field("block", &self.block)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

/// A publication that did not happen: the error and the box, intact, to retry with.
///
/// ```
/// use bi_core::runtime::{BiError, testing::Setup};
///
/// let s = Setup::new(1, 0);
/// let mut w = s.writer(0);
/// let b = w.alloc(1u64).unwrap();
/// let header = s.region.layout().header().offset; // not a slot writers may use
/// let failed = w.try_publish(header, b).unwrap_err();
/// assert!(matches!(failed.error, BiError::OutOfSection { .. }));
/// w.publish(s.slot(0), failed.bibox).unwrap(); // the box, intact
/// ```
pub struct Unpublished<T> {
    /// Why.
    pub error: BiError,
    /// The box, still private.
    pub bibox: BiBox<T>,
}

impl<T> fmt::Debug for Unpublished<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unpublished")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for Unpublished<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not published: {}", self.error)
    }
}

impl<T> std::error::Error for Unpublished<T> {}

impl<T> From<Unpublished<T>> for BiError {
    fn from(u: Unpublished<T>) -> BiError {
        u.error
    }
}

/// What [`Writer::reclaim`] did.
///
/// ```
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(1, 0);
/// let mut w = s.writer(0);
/// let old = w.alloc_sealed(1u64).unwrap();
/// w.publish_link(s.slot(0), old).unwrap();
/// let new = w.alloc_sealed(2u64).unwrap();
/// w.publish_link(s.slot(0), new).unwrap();
/// w.retire(old).unwrap();
/// let early = w.reclaim().unwrap();
/// assert_eq!((early.freed_blocks, early.pending_blocks), (0, 1)); // no pass yet
/// for _ in 0..3 {
///     s.nodes[0].quiesce().unwrap();
/// }
/// let later = w.reclaim().unwrap();
/// assert_eq!((later.freed_blocks, later.pending_blocks), (1, 0));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReclaimReport {
    /// Blocks given back to the heap.
    pub freed_blocks: usize,
    /// Their bytes.
    pub freed_bytes: usize,
    /// Blocks still waiting for a grace period.
    pub pending_blocks: usize,
    /// Their bytes.
    pub pending_bytes: usize,
    /// The grace point used (with the nodes excluded for an expired lease).
    pub grace: GracePoint,
}

#[derive(Debug)]
pub(in crate::runtime) struct Retired {
    pub(in crate::runtime) block: Block,
    /// The generation its lines carry (line 0 with the FREED mark).
    pub(in crate::runtime) generation: Generation,
    pub(in crate::runtime) visible: u64,
}

/// The lists of a line rewrite, kept by the writer between rewrites so that a rewrite
/// of a few lines allocates nothing.
#[derive(Default)]
pub(in crate::runtime) struct RewriteScratch {
    /// (line offset, update index) of every update.
    pub(in crate::runtime) order: Vec<(usize, usize)>,
    /// (line offset, update index, new stamp) of the last update of each line.
    pub(in crate::runtime) last: Vec<(usize, usize, Stamp)>,
    /// The lines rewritten, in order.
    pub(in crate::runtime) lines: Vec<usize>,
}

/// The writer of one node. See the [module docs](crate::runtime) for the protocol.
///
/// ```
/// use bi_core::heap::BumpHeap;
/// use bi_core::region::{Region, RegionConfig};
/// use bi_core::runtime::{NodeRuntime, RuntimeConfig, TickClock};
/// use std::sync::Arc;
///
/// let region = Region::anonymous(RegionConfig::new(1 << 20)).unwrap();
/// let layout = *region.layout();
/// let rt = NodeRuntime::new(region.hardware(), layout, 0, RuntimeConfig::default(),
///     Arc::new(TickClock::new())).unwrap();
/// let heap = BumpHeap::new(layout.heap().range(), layout.line_size()).unwrap();
/// let mut w = rt.writer(heap).unwrap();
/// let slot = layout.root_entry(0).unwrap().offset;
/// let b = w.alloc(99u64).unwrap();
/// w.publish(slot, b).unwrap();
/// assert_eq!(*rt.reader().unwrap().enter().load::<u64>(slot).unwrap().unwrap(), 99);
/// ```
pub struct Writer<V: MemView, H: Heap> {
    pub(in crate::runtime) inner: Arc<NodeInner<V>>,
    pub(in crate::runtime) heap: H,
    pub(in crate::runtime) modified: RingWriter,
    pub(in crate::runtime) freed: RingWriter,
    pub(in crate::runtime) retired: VecDeque<Retired>,
    pub(in crate::runtime) retired_bytes: usize,
    /// Unlinked objects waiting for room in the freed ring ([`Writer::defer_retire`]).
    deferred: Vec<Link<()>>,
    /// The blocks of the retirement in progress and their generations (kept to reuse the
    /// allocation).
    retiring: Vec<(Block, Generation)>,
    /// The ring entries being appended (kept to reuse the allocation).
    entries: Vec<LogEntry>,
    /// The lines of the rewrite in progress (kept to reuse the allocation).
    pub(in crate::runtime) rewrite: RewriteScratch,
    /// Where this writer records each line it rewrites before it does, and the slot that
    /// names it ([`journal`](crate::runtime::journal)): allocated when the heap has room.
    pub(in crate::runtime) journal: Option<usize>,
    pub(in crate::runtime) journal_slot: Option<usize>,
    /// Sealed objects were written back since the last fence: the next slot store must
    /// fence first, or a reader could follow the new link into lines not yet in memory.
    pub(in crate::runtime) unfenced: bool,
    /// Sealed objects whose lines are still to be written back: all of them go out just
    /// before the next fence ([`settle`](Self::settle)), back to back.
    pub(in crate::runtime) unwritten: Vec<(usize, usize)>,
    /// The structure this writer's log entries are about ([`set_scope`](Self::set_scope)).
    scope: Scope,
    /// The lease was checked since the last publication ([`lease`](crate::runtime::lease)):
    /// allocations need not check it again.
    lease_checked: bool,
    /// When (this node's clock) the update in progress began writing back lines other
    /// nodes may hold (a slot, lines rewritten in place); its log append ends the span
    /// ([`NodeRuntime::take_longest_publish_span`](crate::runtime::NodeRuntime::take_longest_publish_span)).
    writing_since: Option<u64>,
    /// Set by [`set_adopting`](Self::set_adopting): waits for ring room last longer.
    adopting: bool,
}

impl<V: MemView, H: Heap> fmt::Debug for Writer<V, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer")
            .field("node", &self.inner.node)
            .field("retired_bytes", &self.retired_bytes)
            .finish_non_exhaustive()
    }
}

impl<V: MemView, H: Heap> Drop for Writer<V, H> {
    fn drop(&mut self) {
        self.inner.release_writer();
    }
}

impl<V: MemView, H: Heap> Writer<V, H> {
    pub(crate) fn new(inner: Arc<NodeInner<V>>, heap: H) -> Result<Self, BiError> {
        let now = inner.clock.refresh();
        let m = RingGeom::new(&inner.layout, inner.node, RingKind::Modified)?;
        let f = RingGeom::new(&inner.layout, inner.node, RingKind::Freed)?;
        let modified = RingWriter::open(&inner.view, m, now)?;
        let freed = RingWriter::open(&inner.view, f, now)?;
        Ok(Writer {
            inner,
            heap,
            modified,
            freed,
            retired: VecDeque::new(),
            retired_bytes: 0,
            deferred: Vec::new(),
            retiring: Vec::new(),
            entries: Vec::new(),
            rewrite: RewriteScratch::default(),
            journal: None,
            journal_slot: None,
            unfenced: false,
            unwritten: Vec::new(),
            scope: Scope::ALL,
            lease_checked: false,
            writing_since: None,
            adopting: false,
        })
    }

    /// Tags what this writer logs from now on as being about `scope` (a structure's:
    /// [`Scope::of_slot`] of its root slot), so that nodes none of whose readers declared
    /// it skip its notices (see [`scope`](crate::runtime::scope)). Unlinked objects still in the
    /// bag are retired first, under the old scope. A new writer logs under
    /// [`Scope::ALL`], which every node invalidates.
    ///
    /// ```
    /// use bi_core::heap::BumpHeap;
    /// use bi_core::runtime::{Scope, testing::Setup};
    ///
    /// let s = Setup::new(2, 1);
    /// let mut w = s.writer(0);
    /// assert_eq!(w.scope(), Scope::ALL);
    /// w.set_scope(Scope::of_slot(s.slot(0))).unwrap();
    /// assert_eq!(w.scope(), Scope::of_slot(s.slot(0)));
    /// ```
    pub fn set_scope(&mut self, scope: Scope) -> Result<(), BiError> {
        if scope != self.scope {
            self.wait(|w| {
                w.flush_deferred()?;
                match w.deferred.is_empty() {
                    true => Ok(()),
                    false => Err(BiError::LogFull {
                        node: w.inner.node,
                        kind: RingKind::Freed,
                        capacity: w.freed.geom.capacity,
                    }),
                }
            })?;
            self.scope = scope;
        }
        Ok(())
    }

    /// The scope this writer logs under.
    ///
    /// ```
    /// use bi_core::runtime::{Scope, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// assert_eq!(w.scope(), Scope::ALL);
    /// w.set_scope(Scope::of_slot(s.slot(3))).unwrap();
    /// assert_eq!(w.scope(), Scope::of_slot(s.slot(3)));
    /// ```
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// The mechanisms switched off in this node's runtime (none outside tests; see
    /// [`Fault`]), for structures that write through the writer.
    ///
    /// ```
    /// use bi_core::runtime::{Fault, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// assert!(!s.writer(0).faults().has(Fault::ChainMiss));
    /// ```
    pub fn faults(&self) -> crate::runtime::Faults {
        self.inner.config.faults
    }

    /// The heap.
    ///
    /// ```
    /// use bi_core::heap::Heap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let b = w.alloc([0u8; 128]).unwrap();
    /// assert_eq!(w.heap().stats().allocations, 1);
    /// assert!(w.heap().block_len(b.offset()).is_some());
    /// w.discard(b).unwrap();
    /// ```
    pub fn heap(&self) -> &H {
        &self.heap
    }

    /// Bytes retired but not yet given back to the heap.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let old = w.alloc_sealed([0u64; 4]).unwrap();
    /// w.publish_link(s.slot(0), old).unwrap();
    /// let b = w.alloc_sealed([1u64; 4]).unwrap();
    /// w.publish_link(s.slot(0), b).unwrap();
    /// assert_eq!(w.retired_bytes(), 0);
    /// w.retire(old).unwrap();
    /// assert_eq!(w.retired_bytes(), s.region.layout().line_size().get()); // one line
    /// ```
    pub fn retired_bytes(&self) -> usize {
        self.retired_bytes
    }

    /// Blocks retired but not yet given back.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_sealed(1u64).unwrap();
    /// let b = w.alloc_sealed(2u64).unwrap();
    /// w.retire_all(&[a, b]).unwrap(); // never published: nothing links to them
    /// assert_eq!(w.retired_blocks(), 2);
    /// ```
    pub fn retired_blocks(&self) -> usize {
        self.retired.len()
    }

    /// Entries of the (modified, freed) rings not yet known to be consumed by every live
    /// node.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// assert_eq!(w.ring_usage(), (0, 0));
    /// let link = w.alloc_sealed(1u64).unwrap();
    /// w.retire(link).unwrap();
    /// assert_eq!(w.ring_usage().1, 1); // one freed entry
    /// for _ in 0..2 {
    ///     s.nodes[0].quiesce().unwrap();
    /// }
    /// w.reclaim().unwrap();
    /// assert_eq!(w.ring_usage().1, 0); // consumed by every live node
    /// ```
    pub fn ring_usage(&self) -> (usize, usize) {
        (self.modified.len(), self.freed.len())
    }

    /// The entries each of this node's log rings holds: the most lines one publication
    /// may rewrite, and the most objects one retirement may retire (one entry each). A
    /// structure that publishes many lines at once splits them into pieces of at most
    /// this many.
    ///
    /// ```
    /// use bi_core::region::RegionConfig;
    /// use bi_core::runtime::{BiError, RuntimeConfig, testing::Setup};
    /// use std::time::Duration;
    ///
    /// let config = RegionConfig::new(1 << 20).with_nodes(1).with_log_ring_entries(4);
    /// let fast = RuntimeConfig::default().log_full_timeout(Duration::ZERO);
    /// let s = Setup::with(config, |c| c, fast);
    /// let mut w = s.writer(0);
    /// assert_eq!(w.ring_capacity(), 4);
    /// let a = w.alloc_lines(&[0u64; 5]).unwrap();
    /// let all: Vec<_> = (0..5).map(|i| (a, i, 1)).collect();
    /// assert!(matches!(w.rewrite_lines(&all), Err(BiError::LogFull { .. }))); // never fits
    /// for piece in all.chunks(w.ring_capacity()) {
    ///     w.rewrite_lines(piece).unwrap();
    ///     s.emu.advance(10);
    ///     s.quiesce_all().unwrap(); // every node has seen the piece: its entries are free
    /// }
    /// ```
    pub fn ring_capacity(&self) -> usize {
        self.modified.geom.capacity as usize
    }

    /// Allocates a block and writes `value` into it (header, stamped payload) in this
    /// node's cache.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let mut b = w.alloc([1u32, 2]).unwrap();
    /// b.set([3, 4]);
    /// assert_eq!(*b.get(), [3, 4]);
    /// w.discard(b).unwrap();
    /// ```
    pub fn alloc<T: Pod>(&mut self, value: T) -> Result<BiBox<T>, BiError> {
        let shape = Shape::new(size_of::<T>(), self.inner.line)?;
        let (block, generation) = self.alloc_block(&shape)?;
        let b = BiBox {
            block,
            shape,
            generation,
            value,
            dirty: false,
        };
        if let Err(e) = self.write(&b) {
            let _ = self.heap.free(block);
            return Err(e);
        }
        Ok(b)
    }

    /// Writes back the sealed objects not yet written back, and fences if anything was
    /// written back since the last fence: after it, every sealed object is in memory.
    pub(in crate::runtime) fn settle(&mut self) -> Result<(), BiError> {
        self.write_back_sealed()?;
        if self.unfenced {
            self.inner.view.fence();
            self.unfenced = false;
        }
        Ok(())
    }

    /// Writes back the sealed objects not yet written back, without a fence.
    fn write_back_sealed(&mut self) -> Result<(), BiError> {
        for (at, len) in self.unwritten.drain(..) {
            self.inner.view.writeback(at, len)?;
        }
        Ok(())
    }

    /// Appends `entries` to the modified ring (whose fences put them, and everything
    /// written back before them, in memory) and dates them. The update is published: the
    /// next one checks the lease again.
    fn log_modified(&mut self, entries: &[LogEntry]) -> Result<(), BiError> {
        self.modified.append(&self.inner.view, entries)?;
        let visible = self.inner.clock.refresh();
        self.modified.visible(entries.len(), visible);
        if let Some(since) = self.writing_since.take() {
            note_publish_span(&self.inner, since, visible);
        }
        self.lease_checked = false;
        self.note_figures();
        Ok(())
    }

    /// Dates the first store of an update to lines other nodes may hold; its log append
    /// ([`log_modified`](Self::log_modified)) ends the span. The clock is read afresh:
    /// its cheap reading lags until the last append and would count the time between
    /// updates.
    pub(in crate::runtime) fn start_publish_span(&mut self) {
        self.writing_since = Some(self.inner.clock.refresh());
    }

    /// Notes the figures this node's passes publish ([`NodeFigures`](crate::runtime::NodeFigures)):
    /// bytes waiting for their grace period, entries in flight in each ring.
    pub(in crate::runtime) fn note_figures(&self) {
        let stats = &self.inner.stats;
        stats
            .retired_bytes
            .store(self.retired_bytes as u64, Ordering::Relaxed);
        stats.in_flight[0].store(self.modified.len() as u64, Ordering::Relaxed);
        stats.in_flight[1].store(self.freed.len() as u64, Ordering::Relaxed);
    }

    /// Notes that the structure whose slot is `slot` holds `entries` entries: this
    /// node's next pass publishes it with the node's figures
    /// ([`NodeFigures`](crate::runtime::NodeFigures)), for inspection. Nothing reads it back.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 1);
    /// let mut w = s.writer(0);
    /// w.note_entries(s.slot(0), 42);
    /// s.nodes[0].quiesce().unwrap();
    /// let f = s.nodes[0].figures().unwrap();
    /// assert_eq!((f.structure, f.entries), (s.slot(0) as u64, 42));
    /// ```
    pub fn note_entries(&self, slot: usize, entries: usize) {
        let stats = &self.inner.stats;
        stats.structure.store(slot as u64, Ordering::Relaxed);
        stats.entries.store(entries as u64, Ordering::Relaxed);
    }

    /// Reads back one of this writer's live objects, from this node's cache.
    ///
    /// The writer wrote every line of its objects through this node, and a live object is
    /// never written again, so the node's copy is exact: a writer needs no private index
    /// of what it published. The read is the readers' validated read, so a link that is
    /// not (or no longer) a live object is [`BiError::StaleLink`], never another object's
    /// bytes.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_sealed([3u64, 4]).unwrap();
    /// assert_eq!(w.read_own(link).unwrap(), [3, 4]);
    /// w.retire(link).unwrap();
    /// assert!(w.read_own(link).is_err()); // FREED
    /// ```
    #[inline]
    pub fn read_own<T: Pod>(&self, link: Link<T>) -> Result<T, BiError> {
        self.read_own_with(link, |v| *v)
    }

    /// [`read_own`](Self::read_own), handing the copy to `f` where it was made: a caller
    /// that takes a few fields out of a packed record keeps them in registers instead of
    /// moving the whole record through the result.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_sealed([3u64, 4]).unwrap();
    /// assert_eq!(w.read_own_with(link, |v| v[1]).unwrap(), 4);
    /// w.retire(link).unwrap();
    /// assert!(w.read_own_with(link, |v| v[1]).is_err()); // FREED
    /// ```
    #[inline]
    pub fn read_own_with<T: Pod, R>(
        &self,
        link: Link<T>,
        f: impl FnOnce(&T) -> R,
    ) -> Result<R, BiError> {
        let inner = &self.inner;
        match fetch_with(&inner.view, inner.objects(), link, f)? {
            Fetch::Value(v) => Ok(v),
            Fetch::Null | Fetch::Stale => Err(BiError::StaleLink {
                offset: link.offset(),
            }),
        }
    }

    /// Allocates a block for an object of `shape` and picks its generation: one more than
    /// every stamp now in the block's lines. The block is not yet written nor live.
    pub(in crate::runtime) fn alloc_block(
        &mut self,
        shape: &Shape,
    ) -> Result<(Block, Generation), BiError> {
        self.alloc_block_with(shape, true)
    }

    /// [`alloc_lines`](Self::alloc_lines); with `wait` false, a full heap is an error at
    /// once.
    pub(in crate::runtime) fn alloc_lines_with<T: Pod>(
        &mut self,
        records: &[T],
        wait: bool,
    ) -> Result<Link<Lines<T>>, BiError> {
        let line = self.inner.line;
        let shape = Shape::of_lines(records.len(), size_of::<T>(), line)?;
        let one = Shape::new(size_of::<T>(), line)?;
        let (block, generation) = self.alloc_block_with(&shape, wait)?;
        let stamp = self.stamp(generation);
        let view = &self.inner.view;
        let written = records
            .iter()
            .enumerate()
            .try_for_each(|(i, r)| {
                write_value(
                    view,
                    block.offset + i * line,
                    &one,
                    stamp,
                    r,
                    self.inner.config.faults,
                )
            })
            .and_then(|()| self.stamp_rest(block, records.len(), stamp))
            .and_then(|()| Ok(view.writeback(block.offset, block.len)?));
        if let Err(e) = written {
            let _ = self.heap.free(block);
            return Err(e);
        }
        self.unfenced = true;
        Ok(Link::new(block.offset, generation.link_bits()))
    }

    /// [`alloc_block`](Self::alloc_block); with `wait` false, a full heap is an error at
    /// once instead of a wait for retired blocks to pass their grace period.
    pub(in crate::runtime) fn alloc_block_with(
        &mut self,
        shape: &Shape,
        wait: bool,
    ) -> Result<(Block, Generation), BiError> {
        // An update's first allocation: the block may be one another writer of this
        // structure has since published, if this node's lease lapsed.
        if !self.lease_checked {
            lease::check(&self.inner)?;
            self.lease_checked = true;
        }
        let (block, tag) = match self.heap.alloc_tagged(shape.bytes()) {
            Ok(got) => got,
            Err(HeapError::OutOfMemory { .. }) if wait && !self.retired.is_empty() => {
                self.alloc_after_reclaim(shape)?
            }
            Err(e) => return Err(e.into()),
        };
        let inner = &self.inner;
        // A hint: the line an allocation a few from now stores into starts on its way
        // into this node's cache now, so that those stores do not wait for memory (a
        // retired block's lines were dropped by the passes since; on one machine, other
        // nodes' passes drop them from this node's cache too).
        if let Some(at) = self.heap.upcoming(shape.bytes(), PREFETCH_AHEAD) {
            let _ = inner.view.prefetch(at);
        }
        let fits = check_in(inner.layout.heap(), block.offset, block.len, "heap").and_then(|()| {
            if block.len >= shape.bytes() && block.offset % inner.line == 0 {
                Ok(())
            } else {
                Err(BiError::BadConfig {
                    reason: "the heap returned a block that is too small or misaligned",
                })
            }
        });
        if let Err(e) = fits {
            let _ = self.heap.free(block);
            return Err(e);
        }
        let view = &inner.view;
        // The new generation exceeds every stamp now in the block's lines (this node is
        // the only writer of its arena, so its own cache holds the latest values), so no
        // stale copy of any line can ever match it. A block this writer gave back carries
        // that generation as its tag (`give_back`): its lines, invalidated by the passes
        // since, need not be read.
        let old = match tag {
            Some(g) if block.len == inner.line => Generation::new(g),
            _ => {
                let mut old = Generation::default();
                for i in 0..block.len / inner.line {
                    let stamp = Stamp::from_raw(view.load_u64(block.offset + i * inner.line)?);
                    if !stamp.is_invalid() {
                        old = old.max(stamp.generation());
                    }
                }
                old
            }
        };
        if block.reused {
            view.note_reuse(block.offset, block.len)?;
        }
        if inner.config.faults.has(Fault::GenerationBump) {
            return Ok((block, old));
        }
        Ok((block, old.next()))
    }

    /// The stamp of this writer's new objects of generation `g`.
    pub(in crate::runtime) fn stamp(&self, g: Generation) -> Stamp {
        Stamp::new(g, self.inner.config.track_objects)
    }

    /// Writes an object's payload under `stamp`, and the stamp into every line of the
    /// block past the object (so the block's lines agree on one incarnation).
    pub(in crate::runtime) fn write_block(
        &self,
        block: Block,
        shape: &Shape,
        stamp: Stamp,
        bytes: &[u8],
    ) -> Result<(), BiError> {
        let faults = self.inner.config.faults;
        write_object(&self.inner.view, block.offset, shape, stamp, bytes, faults)?;
        self.stamp_rest(block, shape.lines, stamp)
    }

    /// Writes `stamp` into the lines of `block` from line `from` on (the lines past the
    /// object, so that the block's lines agree on one incarnation).
    pub(in crate::runtime) fn stamp_rest(
        &self,
        block: Block,
        from: usize,
        stamp: Stamp,
    ) -> Result<(), BiError> {
        let line = self.inner.line;
        for i in from..block.len / line {
            self.inner
                .view
                .store_u64(block.offset + i * line, stamp.raw())?;
        }
        Ok(())
    }

    fn write<T: Pod>(&self, b: &BiBox<T>) -> Result<(), BiError> {
        let stamp = self.stamp(b.generation);
        let faults = self.inner.config.faults;
        write_value(
            &self.inner.view,
            b.block.offset,
            &b.shape,
            stamp,
            &b.value,
            faults,
        )?;
        self.stamp_rest(b.block, b.shape.lines, stamp)
    }

    /// Gives back a box that was never published (no other node can have its link).
    ///
    /// ```
    /// use bi_core::heap::Heap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let b = w.alloc([7u64; 3]).unwrap();
    /// assert!(w.heap().stats().live > 0);
    /// w.discard(b).unwrap();
    /// assert_eq!(w.heap().stats().live, 0);
    /// ```
    pub fn discard<T: Pod>(&mut self, b: BiBox<T>) -> Result<(), BiError> {
        self.give_back(b.block, b.generation)
    }

    /// Returns a block to the heap. A one-line block is tagged with `generation`, the one
    /// its line carries, so that reusing it needs no read of the line.
    /// The heap is full but retired blocks wait for their grace period: give back what
    /// has passed it and try again, waiting for passes as long as a full log ring would.
    #[cold]
    fn alloc_after_reclaim(&mut self, shape: &Shape) -> Result<(Block, Option<u64>), BiError> {
        let start = Instant::now();
        loop {
            self.reclaim()?;
            match self.heap.alloc_tagged(shape.bytes()) {
                Err(HeapError::OutOfMemory { .. })
                    if !self.retired.is_empty()
                        && start.elapsed() < self.inner.config.log_full_timeout =>
                {
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
                r => return Ok(r?),
            }
        }
    }

    fn give_back(&mut self, block: Block, generation: Generation) -> Result<(), BiError> {
        if block.len == self.inner.line {
            Ok(self.heap.free_tagged(block, generation.get())?)
        } else {
            Ok(self.heap.free(block)?)
        }
    }

    /// Makes a box immutable and returns its link, so that other new objects can link to
    /// it before one of them is published: the building block of path copying.
    ///
    /// The object is rewritten if it was [`set`](BiBox::set); its lines are written back
    /// by the next publication, together with those of every object sealed since the
    /// last one, just before its one fence. So a batch that seals a hundred nodes and
    /// publishes a new root costs one fence, not a hundred, and the write-backs go out
    /// back to back, after the stores they carry have long completed. Until a slot that
    /// reaches it is published, no other node can hold the link; give back a sealed
    /// object that never became reachable with [`discard_link`](Self::discard_link), and
    /// retire one that did.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use bi_core::runtime::Link;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// // A two-object chain: the tail is sealed, the head links to it.
    /// let tail = w.alloc([7u64, Link::<[u64; 2]>::null().raw()]).unwrap();
    /// let tail = w.seal(tail).unwrap();
    /// let head = w.alloc([5u64, tail.raw()]).unwrap();
    /// w.publish(s.slot(0), head).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// let h = g.load::<[u64; 2]>(s.slot(0)).unwrap().unwrap();
    /// let t = g.follow(Link::<[u64; 2]>::from_raw(h[1])).unwrap().unwrap();
    /// assert_eq!((h[0], t[0]), (5, 7));
    /// ```
    pub fn seal<T: Pod>(&mut self, mut b: BiBox<T>) -> Result<Link<T>, BiError> {
        if b.dirty {
            b.generation = b.generation.next();
            b.dirty = false;
            self.write(&b)?;
        }
        self.unwritten.push((b.block.offset, b.block.len));
        self.unfenced = true;
        Ok(Link::new(b.block.offset, b.generation.link_bits()))
    }

    /// [`alloc`](Self::alloc) then [`seal`](Self::seal): a new immutable object, whose
    /// lines reach memory with the next publication (until then no other node can read
    /// it, even from memory).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_sealed([1u32, 2]).unwrap();
    /// assert_eq!(w.read_own(link).unwrap(), [1, 2]);
    /// assert!(!link.is_null());
    /// ```
    pub fn alloc_sealed<T: Pod>(&mut self, value: T) -> Result<Link<T>, BiError> {
        let b = self.alloc(value)?;
        self.seal(b)
    }

    /// Gives back an object that was [sealed](Self::seal) but never became reachable from
    /// a published slot (for example a node that a later step of the same batch copied
    /// again). Giving back an object that *was* reachable is a logic error: readers
    /// holding its link would then be protected by the generation check only.
    ///
    /// ```
    /// use bi_core::heap::Heap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_sealed(3u64).unwrap();
    /// w.discard_link(link).unwrap();
    /// assert_eq!(w.heap().stats().live, 0);
    /// assert!(w.discard_link(link).is_err()); // given back already
    /// ```
    pub fn discard_link<T: Pod>(&mut self, link: Link<T>) -> Result<(), BiError> {
        self.discard_block(link)
    }

    /// [`discard_link`](Self::discard_link) for a link of any type.
    pub(in crate::runtime) fn discard_block<T>(&mut self, link: Link<T>) -> Result<(), BiError> {
        let (len, generation) = self.own_block(link)?;
        let block = Block {
            offset: link.offset(),
            len,
            reused: false,
        };
        self.give_back(block, generation)
    }

    /// Makes sure `n` entries fit in `ring`, reading node records if it looks full.
    pub(in crate::runtime) fn reserve(
        inner: &NodeInner<V>,
        ring: &mut RingWriter,
        n: usize,
    ) -> Result<(), BiError> {
        // Every publication and retirement reserves its entries before it writes.
        lease::check(inner)?;
        if ring.free() >= n as u64 {
            return Ok(());
        }
        let g = grace(inner)?;
        ring.release(g.min_pass_start, inner.config.skew);
        if ring.free() >= n as u64 {
            Ok(())
        } else if inner.config.faults.has(Fault::LogBackPressure) && n as u64 <= ring.geom.capacity
        {
            ring.overwrite_oldest(n);
            Ok(())
        } else {
            Err(BiError::LogFull {
                node: inner.node,
                kind: ring.geom.kind,
                capacity: ring.geom.capacity,
            })
        }
    }

    /// The block length of a live object this writer allocated, after checking that its
    /// first line still carries `link`'s generation (and no FREED mark): the heap knows
    /// its blocks (a foreign object's first line belongs to another node's writer), the
    /// stamp tells a live object from a retired one.
    /// Returns the length and the full generation.
    pub(in crate::runtime) fn own_block<T>(
        &self,
        link: Link<T>,
    ) -> Result<(usize, Generation), BiError> {
        let at = link.offset();
        let len = self
            .heap
            .block_len(at)
            .ok_or_else(|| BiError::StaleLink { offset: at })?;
        check_in(self.inner.layout.heap(), at, len, "heap")?;
        let stamp = Stamp::from_raw(self.inner.view.load_u64(at)?);
        if stamp.matches(link.generation()) {
            Ok((len, stamp.generation()))
        } else {
            Err(BiError::StaleLink { offset: at })
        }
    }

    /// Why `link` cannot be retired: already retired (FREED with its generation) or not
    /// a live object of this writer.
    pub(in crate::runtime) fn not_retirable<T>(&self, link: Link<T>) -> BiError {
        let at = link.offset();
        let stamp = self.inner.view.load_u64(at).map(Stamp::from_raw);
        match stamp {
            Ok(s) if s.is_freed() && s.generation().link_bits() == link.generation() => {
                BiError::AlreadyRetired { offset: at }
            }
            _ => BiError::StaleLink { offset: at },
        }
    }

    pub(in crate::runtime) fn check_slot(&self, slot: usize) -> Result<(), BiError> {
        let l = &self.inner.layout;
        if slot.is_multiple_of(8)
            && (l.heap().contains(slot, 8) || l.root_directory().contains(slot, 8))
        {
            Ok(())
        } else {
            Err(BiError::OutOfSection {
                offset: slot,
                section: "heap or root directory (8-byte aligned)",
            })
        }
    }

    /// Publishes `new` into the `u64` slot at `slot` without waiting: returns the link
    /// that was there (retire it once nothing else links to it), or the box back with
    /// [`BiError::LogFull`] when the modified ring has no room.
    ///
    /// This writer must be the only one that writes `slot`.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w = s.writer(0);
    /// let b = w.alloc(1u64).unwrap();
    /// let first = w.try_publish(s.slot(0), b).unwrap();
    /// assert!(first.is_null());
    /// let b = w.alloc(2u64).unwrap();
    /// let second = b.link();
    /// let old = w.try_publish(s.slot(0), b).unwrap();
    /// assert_eq!(w.read_own(old).unwrap(), 1);
    /// assert_ne!(old, second);
    /// ```
    pub fn try_publish<T: Pod>(
        &mut self,
        slot: usize,
        mut new: BiBox<T>,
    ) -> Result<Link<T>, Unpublished<T>> {
        let tracked = self.inner.config.track_objects;
        let needed = 1 + usize::from(tracked);
        let r = self
            .check_slot(slot)
            .and_then(|()| Self::reserve(&self.inner, &mut self.modified, needed));
        if let Err(error) = r {
            return Err(Unpublished { error, bibox: new });
        }
        if new.dirty {
            new.generation = new.generation.next();
            new.dirty = false;
            if let Err(error) = self.write(&new) {
                return Err(Unpublished { error, bibox: new });
            }
        }
        let link = Link::<T>::new(new.block.offset, new.generation.link_bits());
        let object = Some((new.block.offset, new.block.len / self.inner.line));
        match self.store_link(slot, link.raw(), object, tracked) {
            Ok(old) => Ok(Link::from_raw(old)),
            Err(error) => Err(Unpublished { error, bibox: new }),
        }
    }

    /// [`try_publish`](Self::try_publish), waiting up to the configured timeout for ring
    /// space.
    ///
    /// ```
    /// use bi_core::runtime::Link;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let b = w.alloc(5u64).unwrap();
    /// let new = b.link();
    /// assert!(w.publish(s.slot(0), b).unwrap().is_null());
    /// let c = w.alloc(6u64).unwrap();
    /// assert_eq!(w.publish(s.slot(0), c).unwrap(), new);
    /// w.retire(new).unwrap();
    /// ```
    pub fn publish<T: Pod>(
        &mut self,
        slot: usize,
        new: BiBox<T>,
    ) -> Result<Link<T>, Unpublished<T>> {
        let start = Instant::now();
        let limit = self.ring_patience();
        let mut new = new;
        loop {
            match self.try_publish(slot, new) {
                Err(Unpublished {
                    error: BiError::LogFull { kind, .. },
                    bibox,
                }) if self.keeps_waiting(kind, start.elapsed(), limit) => {
                    new = bibox;
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
                r => return r,
            }
        }
    }

    /// Stores an existing link (or null) into `slot`: same protocol as
    /// [`try_publish`](Self::try_publish), returning the old link.
    ///
    /// ```
    /// use bi_core::runtime::{Link, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_sealed(4u64).unwrap();
    /// assert!(w.try_publish_link(s.slot(0), link).unwrap().is_null());
    /// // Unpublish: store null, get the link back.
    /// assert_eq!(w.try_publish_link(s.slot(0), Link::<u64>::null()).unwrap(), link);
    /// ```
    pub fn try_publish_link<T: Pod>(
        &mut self,
        slot: usize,
        link: Link<T>,
    ) -> Result<Link<T>, BiError> {
        Ok(Link::from_raw(self.try_publish_raw(slot, link.raw())?))
    }

    /// Stores a raw link of any type (an object's, an array's) into `slot` with the
    /// protocol of [`try_publish_link`](Self::try_publish_link); returns the old word.
    pub(in crate::runtime) fn try_publish_raw(
        &mut self,
        slot: usize,
        raw: u64,
    ) -> Result<u64, BiError> {
        self.check_slot(slot)?;
        Self::reserve(&self.inner, &mut self.modified, 1)?;
        self.store_link(slot, raw, None, false)
    }

    /// Logs the lines written back since the last fence in the modified ring (one entry
    /// per line), so every node's pass invalidates them: the lines and the entries reach
    /// memory under one fence, before the ring's tail moves. Room must have been
    /// reserved.
    pub(in crate::runtime) fn fence_and_log_lines(
        &mut self,
        lines: &[usize],
    ) -> Result<(), BiError> {
        let inner = &self.inner;
        let t = inner.clock.now();
        // Taken out for the call, put back to keep its allocation.
        let mut entries = std::mem::take(&mut self.entries);
        entries.clear();
        entries.extend(lines.iter().map(|&l| LogEntry::new(l, 1, t, self.scope)));
        let logged = self.log_modified(&entries);
        self.entries = entries;
        logged
    }

    /// [`try_publish_link`](Self::try_publish_link), waiting for ring space.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_sealed(8u64).unwrap();
    /// w.publish_link(s.slot(0), link).unwrap();
    /// w.publish_link(s.slot(1), link).unwrap(); // one object, two slots
    /// s.nodes[1].quiesce().unwrap();
    /// let r = s.nodes[1].reader().unwrap();
    /// let g = r.enter();
    /// assert_eq!(g.load::<u64>(s.slot(1)).unwrap().unwrap().link(), link);
    /// ```
    pub fn publish_link<T: Pod>(&mut self, slot: usize, link: Link<T>) -> Result<Link<T>, BiError> {
        self.wait(|w| w.try_publish_link(slot, link))
    }

    /// Runs `f` until it does not find a log ring full, for at most the configured wait
    /// on a full log (longer while [`adopting`](Self::set_adopting)).
    pub(in crate::runtime) fn wait<R>(
        &mut self,
        f: impl FnMut(&mut Self) -> Result<R, BiError>,
    ) -> Result<R, BiError> {
        self.wait_up_to(self.ring_patience(), f)
    }

    /// How long a wait for ring room lasts now: the configured wait on a full log, or
    /// while [`adopting`](Self::set_adopting) the adoption's patience.
    fn ring_patience(&self) -> Duration {
        match self.adopting {
            true => self.adoption_patience(),
            false => self.inner.config.log_full_timeout,
        }
    }

    /// How long a step of an adoption waits for ring room: a node stopped inside its
    /// lease holds ring entries until it passes again or its lease lapses (then it no
    /// longer counts), so the configured wait plus one node lease and the skew allowance.
    pub(in crate::runtime) fn adoption_patience(&self) -> Duration {
        let config = &self.inner.config;
        config.log_full_timeout
            + Duration::from_nanos(config.node_lease.saturating_add(config.skew))
    }

    /// Marks the steps that follow as those of taking a structure over from a writer
    /// that is gone (finishing its half-written line, [`adopt`](Self::adopt), rewriting
    /// what it left inconsistent), until it is called with `false`: meanwhile every wait
    /// for ring room lasts up to a node lease longer than a write's, because a node
    /// stopped, or too loaded to pass, inside its lease holds ring entries until it
    /// passes or its lease lapses, and a takeover must wait that out rather than fail.
    /// A node whose lease was renewed without a pass after the wait began (a process
    /// that claimed it and stopped before its first pass) is waited out too, until its
    /// lease lapses (three patiences at most).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[1u64]).unwrap();
    /// w.set_adopting(true);
    /// w.rewrite_lines(&[(a, 0, 2)]).unwrap();
    /// w.set_adopting(false);
    /// assert_eq!(w.read_own_line(a, 0).unwrap(), 2);
    /// ```
    pub fn set_adopting(&mut self, adopting: bool) {
        self.adopting = adopting;
    }

    /// [`wait`](Self::wait), for at most `limit`.
    pub(in crate::runtime) fn wait_up_to<R>(
        &mut self,
        limit: Duration,
        mut f: impl FnMut(&mut Self) -> Result<R, BiError>,
    ) -> Result<R, BiError> {
        // Read the clock only once the log is full: most calls never wait.
        let mut start = None;
        loop {
            match f(self) {
                Err(BiError::LogFull { kind, .. })
                    if self.keeps_waiting(
                        kind,
                        start.get_or_insert_with(Instant::now).elapsed(),
                        limit,
                    ) =>
                {
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
                r => return r,
            }
        }
    }

    /// Whether a wait for room in the `kind` ring that has lasted `waited` goes on: up to
    /// `limit`, and while [`adopting`](Self::set_adopting) for as long as a node that has
    /// not passed since the ring's oldest entry still holds a lease, and a write's wait
    /// after it lapses (at most
    /// [`OUTLASTED_PATIENCES`] times `limit`). Such a node renewed its heartbeat without
    /// passing, later than the wait began: a process that claimed the node and stopped
    /// before its first pass keeps it live for a lease from its claim, so a patience
    /// counted from the start of the wait can end before that lease does.
    fn keeps_waiting(&self, kind: RingKind, waited: Duration, limit: Duration) -> bool {
        if waited < limit {
            return true;
        }
        if !self.adopting || waited >= limit.saturating_mul(OUTLASTED_PATIENCES) {
            return false;
        }
        let ring = match kind {
            RingKind::Modified => &self.modified,
            RingKind::Freed => &self.freed,
        };
        let (Some(oldest), Ok(g)) = (ring.oldest(), grace(&self.inner)) else {
            return false;
        };
        // A holder's lease lapsing frees the room at the next attempt: it is waited for up
        // to a write's wait past its end.
        let config = &self.inner.config;
        let margin = u64::try_from(config.log_full_timeout.as_nanos()).unwrap_or(u64::MAX);
        let (lease, skew) = (config.node_lease, config.skew);
        g.claimed.iter().any(|&(start, heartbeat)| {
            start <= oldest.saturating_add(skew)
                && g.now
                    <= heartbeat
                        .saturating_add(lease)
                        .saturating_add(skew)
                        .saturating_add(margin)
        })
    }

    /// Writes the object back (if any), stores the link, writes the slot back, logs.
    pub(in crate::runtime) fn store_link(
        &mut self,
        slot: usize,
        raw: u64,
        object: Option<(usize, usize)>,
        log_object: bool,
    ) -> Result<u64, BiError> {
        let inner = &self.inner;
        let view = &inner.view;
        let out_of_order = inner.config.faults.has(Fault::PublishOrder);
        if let Some((at, lines)) = object {
            view.writeback(at, lines * inner.line)?;
            self.unfenced = true;
        }
        if !out_of_order {
            // The object is in memory before the slot that names it is stored.
            self.settle()?;
        } else {
            // Written back, and fenced only by the ring append, after the slot.
            self.write_back_sealed()?;
        }
        self.start_publish_span();
        let inner = &self.inner;
        let view = &inner.view;
        // (An existing link's object was written back when it was first published.)
        let old: u64 = view.load(slot)?;
        view.store(slot, &raw)?;
        // The slot reaches memory under the ring append's first fence, with the entry
        // that logs it: both before the tail that lets a pass see the entry.
        view.writeback(slot, 8)?;
        let t = inner.clock.now();
        let mut entries = [LogEntry::new(inner.line_floor(slot), 1, t, self.scope); 2];
        let mut n = 1;
        if let Some((at, lines)) = object.filter(|_| log_object) {
            entries[1] = LogEntry::new(at, lines, t, self.scope);
            n = 2;
        }
        self.log_modified(&entries[..n])?;
        Ok(old)
    }

    /// Retires the object `link` names without waiting: marks it FREED, writes that back,
    /// logs it in the freed ring and keeps it until a grace period has passed. Unlink it
    /// first (publish something else into every slot that holds it). Only objects this
    /// writer allocated can be retired ([`BiError::StaleLink`] otherwise, or
    /// [`BiError::AlreadyRetired`]).
    ///
    /// ```
    /// use bi_core::runtime::{BiError, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_sealed(1u64).unwrap();
    /// w.try_retire(link).unwrap();
    /// assert!(matches!(w.try_retire(link), Err(BiError::AlreadyRetired { .. })));
    /// ```
    pub fn try_retire<T: Pod>(&mut self, link: Link<T>) -> Result<(), BiError> {
        self.try_retire_all(&[link])
    }

    /// Retires several objects at once, with one write-back batch, one fence and one
    /// append to the freed ring (the old nodes of a batch of path copies). Every link is
    /// checked before anything is marked: on an error, nothing was retired. More links
    /// than the freed ring holds is [`BiError::LogFull`]; split the batch.
    ///
    /// ```
    /// use bi_core::runtime::{Link, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_sealed(1u64).unwrap();
    /// let b = w.alloc_sealed(2u64).unwrap();
    /// let foreign = Link::<u64>::new(s.arena(0).end + 64, Default::default()); // not this writer's
    /// assert!(w.try_retire_all(&[a, foreign]).is_err());
    /// assert_eq!(w.retired_blocks(), 0); // nothing was retired
    /// w.try_retire_all(&[a, b]).unwrap();
    /// assert_eq!(w.retired_blocks(), 2);
    /// ```
    pub fn try_retire_all<T: Pod>(&mut self, links: &[Link<T>]) -> Result<(), BiError> {
        self.try_retire_links(links)
    }

    /// [`try_retire_all`](Self::try_retire_all) for links of any type (slot arrays too).
    pub(in crate::runtime) fn try_retire_links<T>(
        &mut self,
        links: &[Link<T>],
    ) -> Result<(), BiError> {
        if links.is_empty() {
            return Ok(());
        }
        // Room first: a full ring is the common refusal, and finding it must not cost a
        // look at every object (callers retry when a pass has made room).
        Self::reserve(&self.inner, &mut self.freed, links.len())?;
        let mut blocks = std::mem::take(&mut self.retiring);
        blocks.clear();
        let checked = self.check_retirable(links, &mut blocks);
        let r = checked.and_then(|()| self.mark_and_log(&blocks));
        self.retiring = blocks;
        r
    }

    /// Fills `blocks` with the blocks `links` name, after checking each one (see
    /// [`own_block`](Self::own_block)) and that none is named twice.
    fn check_retirable<T>(
        &self,
        links: &[Link<T>],
        blocks: &mut Vec<(Block, Generation)>,
    ) -> Result<(), BiError> {
        for &link in links {
            let (len, generation) = self.own_block(link).map_err(|_| self.not_retirable(link))?;
            let block = Block {
                offset: link.offset(),
                len,
                reused: false,
            };
            blocks.push((block, generation));
        }
        if blocks.len() > 1 {
            blocks.sort_unstable_by_key(|(b, _)| b.offset);
            if let Some(w) = blocks.windows(2).find(|w| w[0].0.offset == w[1].0.offset) {
                return Err(BiError::AlreadyRetired {
                    offset: w[0].0.offset,
                });
            }
        }
        Ok(())
    }

    /// Marks checked blocks FREED, writes the marks back, fences once and logs them in the
    /// freed ring with one append (room for `blocks.len()` entries is reserved).
    fn mark_and_log(&mut self, blocks: &[(Block, Generation)]) -> Result<(), BiError> {
        let inner = &self.inner;
        let view = &inner.view;
        // A block longer than one entry covers (a large line array) takes several.
        let pieces =
            |(b, _): &(Block, Generation)| (b.len / inner.line).div_ceil(MAX_OBJECT_LINES).max(1);
        let needed: usize = blocks.iter().map(pieces).sum();
        if needed > blocks.len() {
            Self::reserve(inner, &mut self.freed, needed)?;
        }
        let (now, scope) = (inner.clock.now(), self.scope);
        // A FREED mark is a store to a line other nodes may hold: its span to the append
        // counts as a publication's (see `log_modified`).
        let marking_since = inner.clock.refresh();
        let entries = &mut self.entries;
        entries.clear();
        for (b, _) in blocks {
            // One word: a reader sees the FREED mark or the live stamp, never a mix.
            let stamp = Stamp::from_raw(view.load_u64(b.offset)?);
            view.store_u64(b.offset, stamp.freed().raw())?;
            view.writeback(b.offset, inner.line)?;
            let lines = b.len / inner.line;
            for first in (0..lines.max(1)).step_by(MAX_OBJECT_LINES) {
                let n = (lines - first).min(MAX_OBJECT_LINES);
                entries.push(LogEntry::new(b.offset + first * inner.line, n, now, scope));
            }
        }
        // The marks reach memory under the append's first fence, with the entries.
        self.freed.append(view, entries)?;
        // The time that matters is when the entries became visible, taken afresh after
        // the fence: a pass starting more than D later has certainly read them.
        let visible = inner.clock.refresh();
        self.freed.visible(entries.len(), visible);
        note_publish_span(inner, marking_since, visible);
        for &(block, generation) in blocks {
            self.retired.push_back(Retired {
                block,
                generation,
                visible,
            });
            self.retired_bytes += block.len;
        }
        self.note_figures();
        Ok(())
    }

    /// Retires objects that are already unlinked, without ever waiting: they go into this
    /// writer's bag, and once the bag holds [`RETIRE_BATCH`] links they are all marked,
    /// written back and logged together (one fence, one freed-ring append), as far as
    /// the ring has room; the rest wait for the next `defer_retire`,
    /// [`flush_deferred`](Self::flush_deferred) or [`reclaim`](Self::reclaim). The one
    /// retirement path for structures: an update hands over what it replaced and goes
    /// on, and the cost of retiring is shared by the updates of a bag, as in
    /// crossbeam-epoch's `defer`. Unless the freed ring is full, fewer than
    /// `RETIRE_BATCH` links wait. Each time a bag is retired, up to [`RECLAIM_STEP`]
    /// retired blocks whose grace period has passed go back to the heap, so a structure
    /// that only updates keeps its memory bounded without calling
    /// [`reclaim`](Self::reclaim): retired memory stays within what was retired over
    /// about two pass periods plus the skew bound, plus one bag.
    ///
    /// Each link is checked first ([`BiError::StaleLink`] or
    /// [`BiError::AlreadyRetired`]); on an error nothing was deferred.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let old = w.alloc_sealed(1u64).unwrap();
    /// w.publish_link(s.slot(0), old).unwrap();
    /// let new = w.alloc_sealed(2u64).unwrap();
    /// w.publish_link(s.slot(0), new).unwrap();
    /// w.defer_retire([old]).unwrap();
    /// assert_eq!((w.deferred(), w.retired_blocks()), (1, 0)); // in the bag
    /// w.flush_deferred().unwrap();
    /// assert_eq!((w.deferred(), w.retired_blocks()), (0, 1)); // marked and logged
    /// ```
    pub fn defer_retire<T>(
        &mut self,
        links: impl IntoIterator<Item = Link<T>>,
    ) -> Result<(), BiError> {
        let start = self.deferred.len();
        for link in links {
            if let Err(e) = self.own_block(link) {
                self.deferred.truncate(start);
                return Err(match e {
                    BiError::StaleLink { .. } => self.not_retirable(link),
                    e => e,
                });
            }
            self.deferred.push(link.cast());
        }
        if self.deferred.len() >= RETIRE_BATCH {
            // Back-pressure in two steps, as crossbeam-epoch's `defer`: retire the bag,
            // then give back a bounded number of blocks whose grace has passed, so memory
            // comes back at twice the rate it is retired and no update pays for a backlog.
            self.flush_deferred()?;
            self.reclaim_up_to(RECLAIM_STEP).map(drop)
        } else {
            Ok(())
        }
    }

    /// Logs deferred retirements in as few groups as the freed ring takes now; what does
    /// not fit stays deferred. A full ring is not an error here.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_sealed(1u64).unwrap();
    /// w.defer_retire([link]).unwrap();
    /// assert_eq!(w.deferred(), 1);
    /// w.flush_deferred().unwrap();
    /// assert_eq!((w.deferred(), w.retired_blocks()), (0, 1));
    /// ```
    pub fn flush_deferred(&mut self) -> Result<(), BiError> {
        let mut bag = std::mem::take(&mut self.deferred);
        let r = self.retire_from(&mut bag);
        self.deferred = bag;
        r
    }

    /// Retires the links of `bag` from its end, in groups as large as the freed ring
    /// takes; what is retired leaves the bag.
    fn retire_from(&mut self, bag: &mut Vec<Link<()>>) -> Result<(), BiError> {
        let mut chunk = bag.len();
        while !bag.is_empty() {
            let n = chunk.min(bag.len());
            let at = bag.len() - n;
            match self.try_retire_links(&bag[at..]) {
                Ok(()) => bag.truncate(at),
                Err(BiError::LogFull { capacity, .. }) => {
                    let free = (capacity as usize).saturating_sub(self.freed.len());
                    if free == 0 || free >= n {
                        return Ok(());
                    }
                    chunk = free;
                }
                Err(e) => {
                    // A link deferred twice: retire the rest one by one, drop the
                    // offender, report it.
                    let group: Vec<_> = bag.drain(at..).collect();
                    for link in group {
                        if let Err(BiError::LogFull { .. }) = self.try_retire_links(&[link]) {
                            bag.push(link);
                        }
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Unlinked objects still waiting for room in the freed ring.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// assert_eq!(w.deferred(), 0);
    /// let links = [w.alloc_sealed(1u64).unwrap(), w.alloc_sealed(2u64).unwrap()];
    /// w.defer_retire(links).unwrap();
    /// assert_eq!(w.deferred(), 2);
    /// ```
    pub fn deferred(&self) -> usize {
        self.deferred.len()
    }

    /// [`try_retire_all`](Self::try_retire_all), waiting for ring space.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let links: Vec<_> = (0..3u64).map(|v| w.alloc_sealed(v).unwrap()).collect();
    /// w.retire_all(&links).unwrap();
    /// assert_eq!(w.retired_blocks(), 3);
    /// assert!(links.iter().all(|&l| w.read_own(l).is_err())); // all FREED
    /// ```
    pub fn retire_all<T: Pod>(&mut self, links: &[Link<T>]) -> Result<(), BiError> {
        self.wait(|w| w.try_retire_all(links))
    }

    /// [`try_retire`](Self::try_retire), waiting for ring space.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w = s.writer(0);
    /// let old = w.alloc_sealed(1u64).unwrap();
    /// w.publish_link(s.slot(0), old).unwrap();
    /// let new = w.alloc_sealed(2u64).unwrap();
    /// let unlinked = w.publish_link(s.slot(0), new).unwrap();
    /// w.retire(unlinked).unwrap();
    /// assert_eq!(w.retired_blocks(), 1);
    /// ```
    pub fn retire<T: Pod>(&mut self, link: Link<T>) -> Result<(), BiError> {
        self.wait(|w| w.try_retire(link))
    }

    /// The current grace point. Never blocks: it reads every node's record once.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let w = s.writer(0);
    /// let g = w.synchronize().unwrap();
    /// assert_eq!(g.tick, 0); // no node has passed yet
    /// ```
    pub fn synchronize(&self) -> Result<GracePoint, BiError> {
        grace(&self.inner)
    }

    /// Gives back to the heap every retired block whose retirement became visible before
    /// the grace point. Structures need not call it: every retired bag also gives back up
    /// to [`RECLAIM_STEP`] blocks (see [`defer_retire`](Self::defer_retire)).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_sealed(1u64).unwrap();
    /// w.retire(link).unwrap();
    /// assert_eq!(w.reclaim().unwrap().freed_blocks, 0); // node 1 has not passed
    /// for _ in 0..3 {
    ///     s.quiesce_all().unwrap();
    /// }
    /// let rep = w.reclaim().unwrap();
    /// assert_eq!((rep.freed_blocks, w.retired_blocks()), (1, 0));
    /// ```
    pub fn reclaim(&mut self) -> Result<ReclaimReport, BiError> {
        self.reclaim_up_to(usize::MAX)
    }

    /// [`reclaim`](Self::reclaim), giving back at most `max` blocks: the oldest ones.
    fn reclaim_up_to(&mut self, max: usize) -> Result<ReclaimReport, BiError> {
        let g = self.synchronize()?;
        self.freed.release(g.min_pass_start, self.inner.config.skew);
        self.modified
            .release(g.min_pass_start, self.inner.config.skew);
        self.flush_deferred()?;
        let mut report = ReclaimReport::default();
        let wait = !self.inner.config.faults.has(Fault::GraceWait);
        while let Some(r) = self.retired.front() {
            if (wait && r.visible >= g.tick) || report.freed_blocks == max {
                break;
            }
            let (block, generation) = (r.block, r.generation);
            self.retired.pop_front();
            self.retired_bytes -= block.len;
            self.give_back(block, generation)?;
            report.freed_blocks += 1;
            report.freed_bytes += block.len;
        }
        report.pending_blocks = self.retired.len();
        report.pending_bytes = self.retired_bytes;
        report.grace = g;
        self.note_figures();
        Ok(report)
    }
}

/// Notes a publication's span, from its first store to a line other nodes may hold
/// (`since`) to the log append that makes their passes drop it (`visible`), for
/// [`NodeRuntime::take_longest_publish_span`](crate::runtime::NodeRuntime::take_longest_publish_span).
fn note_publish_span<V: MemView>(inner: &NodeInner<V>, since: u64, visible: u64) {
    inner
        .stats
        .publish_span
        .fetch_max(visible.saturating_sub(since), Ordering::Relaxed);
}
