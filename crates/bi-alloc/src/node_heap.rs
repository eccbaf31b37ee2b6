//! One node's heap: size classes, bump refill, large runs, and what the node knows of them.
//!
//! # Why the state is private to the node (and to the process)
//!
//! Only the node that owns an arena allocates or frees in it, so the heap's bookkeeping
//! (bump pointer, free lists, which blocks are live) need not be visible to any other node,
//! and keeping it out of shared memory means it is never subject to stale reads or lost
//! write-backs. The heap never reads or writes shared memory at all: it hands out offsets,
//! and the runtime writes whatever header and contents an object has.
//!
//! The price is honest and simple: the bookkeeping lives in this process's memory, so **a
//! process restart loses it**. A restarted node cannot tell which blocks of its arena are
//! live; it must treat the arena as empty and re-initialise it with [`NodeHeap::reinit`]
//! (which reports every block as reused, since any of it may still sit in another node's
//! cache as an old object). Objects that were live in the arena before the restart are
//! then overwritten as the new heap hands their memory out again.
//!
//! # Why no lock
//!
//! Allocation and freeing happen on the writer path only (building a new version of an
//! object, reclaiming after a grace period), and a node's writer owns its heap: the
//! [`Heap`] seam takes `&mut self` to allocate and free. So a size-class allocation is a
//! pop from a `Vec` and one tag byte written, a free is one tag byte read and cleared and
//! a push, with no lock and no atomic at all. Code that wants to share one heap between
//! threads wraps it in a `Mutex` of its own.
//!
//! # Why reuse is reported
//!
//! A block that held an object before may still be cached, as the *old* object, by a node
//! that has not invalidated it yet. The grace period makes this safe for correct readers,
//! but the runtime still has to tell its memory view that the range now holds a new object
//! (`MemView::note_reuse`), so the emulator's oracle can count any read of the old copy as
//! a reuse hazard. [`Block::reused`] is that signal: it is `true` exactly when some byte of
//! the block was part of a block handed out before (or, after [`NodeHeap::reinit`], may
//! have been).
//!
//! # How
//!
//! - Requests are rounded up to whole lines. Up to
//!   [`LARGEST_CLASS_LINES`](crate::class::LARGEST_CLASS_LINES) lines they are served from
//!   a size class ([`CLASS_LINES`]): a LIFO free list per class, refilled by cutting a
//!   chunk of several slots at a time (up to `CHUNK_LINES` lines, fewer in small arenas).
//!   Slots stay in their class once cut.
//! - Longer requests get an exact run of lines. Freed runs are coalesced with their free
//!   neighbours; allocation is first-fit over the free runs; a free run that reaches the
//!   bump pointer gives its lines back to the bump pointer.
//! - New memory (for a large block or a class chunk) comes first from the free runs, then
//!   from the bump pointer; if neither has room (even for a single slot) the request fails
//!   with [`HeapError::OutOfMemory`]. A class never borrows another class's free slots.
//!
//! # Growing
//!
//! A heap made with [`NodeHeap::growing`] starts with the memory it owns already (none,
//! for a new structure) and asks its [`Grow`] source for more when a request does not
//! fit: extents of the pool's heap handed to it on demand (see [`crate::extents`]). A
//! grant next to the bump window extends it; any other moves the bump pointer there and
//! leaves the rest of the old window as a free run. The heap's live map spans the whole
//! heap section, in pages allocated as blocks land in them.

use crate::arena::Arenas;
use crate::class::{CLASS_LINES, CLASSES, class_of};
use crate::error::AllocError;
use crate::grow::Grow;
use crate::live::{Kind, LiveMap};
use crate::runs::FreeRuns;
use bi_core::heap::{Block, Heap, HeapError, HeapStats};
use bi_core::line::LineSize;
use bi_core::region::Layout;
use std::ops::Range;

/// The most lines a size class cuts from the arena at once (fewer for large slots, and
/// at most a sixteenth of a small arena).
pub(crate) const CHUNK_LINES: usize = 32;

/// Counters of one size class.
///
/// ```
/// use bi_alloc::NodeHeap;
/// use bi_core::heap::Heap;
/// use bi_core::line::LineSize;
///
/// let mut heap = NodeHeap::new(0..256 * 64, LineSize::X86).unwrap();
/// let b = heap.alloc(64).unwrap();
/// heap.free(b).unwrap();
/// heap.alloc(64).unwrap(); // the same one-line slot again
/// let c = heap.node_stats().classes[0];
/// assert_eq!((c.lines, c.slot_bytes), (1, 64));
/// assert_eq!((c.live, c.allocations, c.reuses), (1, 2, 1));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Slot size in lines.
    pub lines: usize,
    /// Slot size in bytes.
    pub slot_bytes: usize,
    /// Slots handed out now.
    pub live: usize,
    /// Slots on the free list.
    pub free: usize,
    /// Slots cut from the arena but never handed out yet (rest of the current chunk).
    pub uncut: usize,
    /// Slots this class cut from the arena and holds (free ones go back to the free
    /// runs only when the heap runs out of memory).
    pub reserved: usize,
    /// Allocations served by this class.
    pub allocations: u64,
    /// Allocations served from a slot that held an object before.
    pub reuses: u64,
}

/// Counters of the runs that serve requests above the largest class.
///
/// ```
/// use bi_alloc::NodeHeap;
/// use bi_alloc::class::LARGEST_CLASS_LINES;
/// use bi_core::heap::Heap;
/// use bi_core::line::LineSize;
///
/// let mut heap = NodeHeap::new(0..1024 * 64, LineSize::X86).unwrap();
/// let big = heap.alloc(LARGEST_CLASS_LINES * 64 + 1).unwrap(); // past every class
/// let l = heap.node_stats().large;
/// assert_eq!((l.live_blocks, l.live_bytes, l.allocations), (1, big.len, 1));
/// heap.free(big).unwrap();
/// assert_eq!(heap.node_stats().large.live_blocks, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LargeStats {
    /// Large blocks handed out now.
    pub live_blocks: usize,
    /// Bytes in large blocks handed out now.
    pub live_bytes: usize,
    /// Bytes in free runs (below the bump pointer).
    pub free_bytes: usize,
    /// Number of free runs (after coalescing).
    pub free_runs: usize,
    /// Large blocks handed out so far.
    pub allocations: u64,
}

/// Everything a [`NodeHeap`] counts: the [`HeapStats`] of the heap seam plus the arena's
/// footprint and per-class detail.
///
/// ```
/// use bi_alloc::NodeHeap;
/// use bi_core::heap::Heap;
/// use bi_core::line::LineSize;
///
/// let mut heap = NodeHeap::new(0..256 * 64, LineSize::X86).unwrap();
/// let before = heap.node_stats();
/// assert_eq!((before.footprint, before.untouched), (0, 256 * 64));
/// let b = heap.alloc(200).unwrap(); // a four-line slot
/// heap.free(b).unwrap();
/// let after = heap.node_stats();
/// assert!(after.footprint > 0 && after.footprint_peak >= after.footprint);
/// assert_eq!(after.free, after.heap.capacity); // everything free again
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeHeapStats {
    /// Capacity, live, peak, allocations, frees, reuses.
    pub heap: HeapStats,
    /// Bytes below the bump pointer: cut into class slots or large runs (live or free).
    pub footprint: usize,
    /// The largest `footprint` ever reached: how much of the arena has ever been used.
    pub footprint_peak: usize,
    /// Bytes above the bump pointer, never yet cut.
    pub untouched: usize,
    /// Bytes free anywhere (untouched, free runs, class free lists, uncut chunk slots).
    pub free: usize,
    /// The large-run side of the heap.
    pub large: LargeStats,
    /// One entry per size class, in [`CLASS_LINES`] order.
    pub classes: [ClassStats; CLASSES],
}

/// The tag of a free slot given back without one.
const NO_TAG: u64 = u64::MAX;

#[derive(Debug, Default)]
struct ClassState {
    /// Free slots and their tags, most recently freed last (LIFO keeps hot lines hot).
    free: Vec<(usize, u64)>,
    /// The current chunk: slots `next .. end` are cut but never handed out.
    next: usize,
    end: usize,
    /// Slots of the current chunk starting at or after this offset are fresh memory.
    fresh_from: usize,
    live: usize,
    reserved: usize,
    allocations: u64,
    reuses: u64,
}

#[derive(Debug)]
struct State {
    /// Next fresh byte; everything from here to `bump_end` has never been cut.
    bump: usize,
    /// The end of the memory the bump pointer cuts from (the arena's end for a fixed heap,
    /// the end of the latest grant for a growing one).
    bump_end: usize,
    /// Memory below this offset may have held an object: `bump .. high_water` and the free
    /// runs all belonged to large blocks handed out before (after `reinit`, everything).
    high_water: usize,
    /// The largest footprint ever reached.
    footprint_peak: usize,
    /// The memory this heap owns, sorted, adjacent ranges merged.
    owned: Vec<Range<usize>>,
    runs: FreeRuns,
    classes: [ClassState; CLASSES],
    live: LiveMap,
    stats: HeapStats,
    large: LargeStats,
}

/// One node's heap over its arena: size classes with line-padded slots, exact runs for
/// large objects, node-local free lists.
///
/// Implements [`Heap`]. Never touches the shared memory it manages.
///
/// ```
/// use bi_alloc::NodeHeap;
/// use bi_core::heap::{Heap, HeapError};
/// use bi_core::line::LineSize;
///
/// let mut heap = NodeHeap::new(4096..4096 + 128 * 64, LineSize::X86).unwrap(); // 128 lines
/// let a = heap.alloc(100).unwrap(); // two lines: the 2-line class
/// assert_eq!((a.offset % 64, a.len, a.reused), (0, 128, false));
/// heap.free(a).unwrap();
/// let b = heap.alloc(65).unwrap(); // same class: the slot comes back, reused
/// assert_eq!((b.offset, b.reused), (a.offset, true));
/// heap.free(b).unwrap();
/// assert!(matches!(heap.free(b), Err(HeapError::ForeignBlock { .. }))); // twice
/// assert!(matches!(heap.alloc(0), Err(HeapError::BadSize { .. })));
/// assert!(matches!(heap.alloc(64 * 129), Err(HeapError::BadSize { .. }))); // > arena
/// let big = heap.alloc(64 * 100).unwrap(); // above the largest class: an exact run
/// assert_eq!(big.len, 64 * 100);
/// assert!(matches!(heap.alloc(64 * 30), Err(HeapError::OutOfMemory { .. })));
/// ```
pub struct NodeHeap {
    geom: Geom,
    state: State,
    /// Where a growing heap gets more memory.
    source: Option<Box<dyn Grow>>,
}

impl std::fmt::Debug for NodeHeap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeHeap")
            .field("geom", &self.geom)
            .field("state", &self.state)
            .field("growing", &self.source.is_some())
            .finish()
    }
}

/// What a heap is over: fixed at creation.
#[derive(Debug)]
struct Geom {
    /// The memory the heap may ever own: its arena, or the pool's whole heap section for
    /// a growing heap.
    arena: Range<usize>,
    line: LineSize,
    /// Lines cut per class refill at most (depends on the arena's size).
    chunk_lines: usize,
}

impl NodeHeap {
    /// A heap over the byte range `arena` (line-aligned, non-empty) of memory that has
    /// never held an object, such as a freshly created region: blocks are `reused` only
    /// once this heap has handed their memory out before.
    ///
    /// Errors: [`HeapError::BadArena`] for an empty or misaligned range.
    ///
    /// ```
    /// use bi_alloc::NodeHeap;
    /// use bi_core::heap::Heap;
    /// use bi_core::line::LineSize;
    ///
    /// let mut heap = NodeHeap::new(4096..8192, LineSize::X86).unwrap();
    /// let b = heap.alloc(100).unwrap(); // two lines
    /// assert_eq!((b.offset % 64, b.len, b.reused), (0, 128, false));
    /// assert!((4096..8192).contains(&b.offset));
    /// assert!(NodeHeap::new(4096..4100, LineSize::X86).is_err()); // not whole lines
    /// ```
    pub fn new(arena: Range<usize>, line: LineSize) -> Result<NodeHeap, HeapError> {
        NodeHeap::build(arena, line, false)
    }

    /// A heap over an arena whose memory may hold objects from before, for instance after
    /// the process that owned the node restarted and lost its free lists. All previous
    /// contents are abandoned, and every block is reported `reused`.
    ///
    /// ```
    /// use bi_alloc::NodeHeap;
    /// use bi_core::heap::Heap;
    /// use bi_core::line::LineSize;
    ///
    /// let mut heap = NodeHeap::reinit(0..4096, LineSize::X86).unwrap();
    /// assert!(heap.alloc(64).unwrap().reused);
    /// ```
    pub fn reinit(arena: Range<usize>, line: LineSize) -> Result<NodeHeap, HeapError> {
        NodeHeap::build(arena, line, true)
    }

    /// A heap that may own any memory of `span` (a pool's heap section), owns `owned`
    /// now (ranges of `span` it was given earlier, which may hold objects from before:
    /// everything in them is reported `reused`), and asks `source` for more when a
    /// request does not fit.
    ///
    /// ```
    /// use bi_alloc::{Grow, NodeHeap};
    /// use bi_core::heap::{Heap, HeapError};
    /// use bi_core::line::LineSize;
    /// use std::ops::Range;
    ///
    /// /// Hands out 16-line extents from 0 up to 4096 lines.
    /// struct Extents(usize);
    /// impl Grow for Extents {
    ///     fn grow(&mut self, bytes: usize) -> Result<Range<usize>, HeapError> {
    ///         let len = bytes.next_multiple_of(16 * 64);
    ///         self.0 += len;
    ///         Ok(self.0 - len..self.0)
    ///     }
    /// }
    ///
    /// let mut heap = NodeHeap::growing(0..4096 * 64, LineSize::X86, &[], Box::new(Extents(0)))
    ///     .unwrap();
    /// assert_eq!(heap.stats().capacity, 0);
    /// let a = heap.alloc(100).unwrap(); // the first extent arrives
    /// assert_eq!((a.offset, heap.stats().capacity), (0, 16 * 64));
    /// let big = heap.alloc(40 * 64).unwrap(); // three more, next to it
    /// assert_eq!(heap.owned(), [0..64 * 64]);
    /// assert!(big.offset >= 16 * 64);
    /// ```
    pub fn growing(
        span: Range<usize>,
        line: LineSize,
        owned: &[Range<usize>],
        source: Box<dyn Grow>,
    ) -> Result<NodeHeap, HeapError> {
        let mut heap = NodeHeap::build(span, line, false)?;
        heap.state = heap.geom.empty_state();
        heap.geom.chunk_lines = CHUNK_LINES;
        for range in owned {
            heap.add(range.clone(), true)?;
        }
        heap.source = Some(source);
        Ok(heap)
    }

    /// The memory this heap owns: its arena, or what a growing heap has been given.
    ///
    /// ```
    /// use bi_alloc::NodeHeap;
    /// use bi_core::line::LineSize;
    ///
    /// let heap = NodeHeap::new(4096..8192, LineSize::X86).unwrap();
    /// assert_eq!(heap.owned(), [4096..8192]); // a fixed heap owns its arena
    /// ```
    pub fn owned(&self) -> &[Range<usize>] {
        &self.state.owned
    }

    /// Takes `range` (whole lines of the span, owned by no one else) into the heap; `used`
    /// when it may hold objects from before.
    fn add(&mut self, range: Range<usize>, used: bool) -> Result<(), HeapError> {
        let g = &self.geom;
        let st = &mut self.state;
        let aligned = g.line.align_down(range.start) == range.start
            && g.line.align_down(range.end) == range.end;
        let overlaps = st
            .owned
            .iter()
            .any(|o| o.start < range.end && range.start < o.end);
        if range.is_empty()
            || !aligned
            || range.start < g.arena.start
            || range.end > g.arena.end
            || overlaps
        {
            return Err(HeapError::BadArena {
                reason: "a grant must be whole lines of the heap's span, owned by no one else",
            });
        }
        st.stats.capacity += range.len();
        if range.start != st.bump_end {
            // The rest of the old window stays free, as a run; the grant is the new window.
            if st.bump_end > st.bump {
                st.runs.insert(st.bump, st.bump_end - st.bump);
            }
            st.bump = range.start;
            st.high_water = range.start;
        }
        st.bump_end = range.end;
        if used {
            st.high_water = range.end;
        }
        // A free run that ends where the window starts is window again.
        if let Some((start, _)) = st.runs.remove_ending_at(st.bump) {
            st.bump = start;
        }
        let at = st.owned.partition_point(|o| o.start < range.start);
        st.owned.insert(at, range);
        merge_adjacent(&mut st.owned);
        Ok(())
    }

    /// The heap of `node` over its arena in a freshly created region with this layout
    /// (see [`Arenas::split`]).
    ///
    /// ```
    /// use bi_alloc::NodeHeap;
    /// use bi_core::heap::Heap;
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20).with_nodes(2)).unwrap();
    /// let mut heap = NodeHeap::for_node(&layout, 1).unwrap();
    /// let block = heap.alloc(200).unwrap();
    /// assert!(layout.heap().contains(block.offset, block.len));
    /// assert!(heap.arena().contains(&block.offset));
    /// assert!(NodeHeap::for_node(&layout, 2).is_err());
    /// ```
    pub fn for_node(layout: &Layout, node: usize) -> Result<NodeHeap, AllocError> {
        let arena = Arenas::split(layout)?.node(node)?;
        Ok(NodeHeap::new(arena.range(), layout.line_size())?)
    }

    fn build(arena: Range<usize>, line: LineSize, used: bool) -> Result<NodeHeap, HeapError> {
        if arena.is_empty() {
            return Err(HeapError::BadArena {
                reason: "empty range",
            });
        }
        if line.align_down(arena.start) != arena.start || line.align_down(arena.end) != arena.end {
            return Err(HeapError::BadArena {
                reason: "range is not line-aligned",
            });
        }
        let lines = arena.len() / line.get();
        let geom = Geom {
            chunk_lines: (lines / 16).clamp(1, CHUNK_LINES),
            arena: arena.clone(),
            line,
        };
        let mut state = geom.empty_state();
        state.bump_end = arena.end;
        state.high_water = if used { arena.end } else { arena.start };
        state.owned = vec![arena.clone()];
        state.stats.capacity = arena.len();
        Ok(NodeHeap {
            geom,
            state,
            source: None,
        })
    }

    /// The arena this heap allocates in.
    ///
    /// ```
    /// use bi_alloc::NodeHeap;
    /// use bi_core::line::LineSize;
    ///
    /// let heap = NodeHeap::new(4096..8192, LineSize::X86).unwrap();
    /// assert_eq!(heap.arena(), 4096..8192);
    /// ```
    pub fn arena(&self) -> Range<usize> {
        self.geom.arena.clone()
    }

    /// All counters, including the arena's footprint and per-class detail.
    ///
    /// ```
    /// use bi_alloc::NodeHeap;
    /// use bi_core::heap::Heap;
    /// use bi_core::line::LineSize;
    ///
    /// let mut heap = NodeHeap::new(0..64 * 64, LineSize::X86).unwrap();
    /// heap.alloc(64).unwrap();
    /// let s = heap.node_stats();
    /// assert_eq!(s.heap.live, 64);
    /// assert_eq!(s.classes[0].live, 1);
    /// assert_eq!(s.classes[0].uncut + 1, s.classes[0].reserved); // the rest of the chunk
    /// assert_eq!(s.free + s.heap.live, s.heap.capacity);
    /// ```
    pub fn node_stats(&self) -> NodeHeapStats {
        let st = &self.state;
        let classes = std::array::from_fn(|i| {
            let c = &st.classes[i];
            let slot = CLASS_LINES[i] * self.geom.line.get();
            ClassStats {
                lines: CLASS_LINES[i],
                slot_bytes: slot,
                live: c.live,
                free: c.free.len(),
                uncut: (c.end - c.next) / slot,
                reserved: c.reserved,
                allocations: c.allocations,
                reuses: c.reuses,
            }
        });
        NodeHeapStats {
            heap: st.stats,
            footprint: st.footprint(),
            footprint_peak: st.footprint_peak,
            untouched: st.bump_end - st.bump,
            free: self.geom.free_bytes(st),
            large: LargeStats {
                free_bytes: st.runs.total(),
                free_runs: st.runs.count(),
                ..st.large
            },
            classes,
        }
    }
}

/// Sorts nothing: merges neighbours of a sorted list of disjoint ranges that touch.
fn merge_adjacent(ranges: &mut Vec<Range<usize>>) {
    let mut out: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for r in ranges.drain(..) {
        match out.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => out.push(r),
        }
    }
    *ranges = out;
}

impl State {
    /// Bytes owned and cut (below the bump pointer or outside its window).
    fn footprint(&self) -> usize {
        self.stats.capacity - (self.bump_end - self.bump)
    }
}

impl Geom {
    /// The class whose slots serve blocks of `len` bytes (whole lines), if one does.
    fn class_for(&self, len: usize) -> Option<usize> {
        // A class whose slot exceeds the arena could never be refilled: use an exact run.
        class_of(len / self.line.get())
            .filter(|&c| CLASS_LINES[c] * self.line.get() <= self.arena.len())
    }

    /// A state that owns nothing yet.
    fn empty_state(&self) -> State {
        let lines = self.arena.len() / self.line.get();
        State {
            bump: self.arena.start,
            bump_end: self.arena.start,
            high_water: self.arena.start,
            footprint_peak: 0,
            owned: Vec::new(),
            runs: FreeRuns::default(),
            classes: Default::default(),
            live: LiveMap::new(self.arena.start, lines, self.line.get()),
            stats: HeapStats::default(),
            large: LargeStats::default(),
        }
    }

    fn free_bytes(&self, st: &State) -> usize {
        let classes: usize = st
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| c.free.len() * CLASS_LINES[i] * self.line.get() + (c.end - c.next))
            .sum();
        (st.bump_end - st.bump) + st.runs.total() + classes
    }

    /// Takes `len` bytes of new memory: first-fit from the free runs, else from the bump
    /// pointer. Returns the offset and the offset from which the memory is fresh (never
    /// part of a block handed out before).
    fn take(&self, st: &mut State, len: usize) -> Option<(usize, usize)> {
        if let Some(offset) = st.runs.take_first_fit(len) {
            return Some((offset, offset + len));
        }
        if st.bump_end - st.bump < len {
            return None;
        }
        let offset = st.bump;
        st.bump += len;
        let fresh_from = st.high_water.clamp(offset, st.bump);
        st.high_water = st.high_water.max(st.bump);
        st.footprint_peak = st.footprint_peak.max(st.footprint());
        Some((offset, fresh_from))
    }

    /// Gives every class's free slots back to the free runs (merged with their
    /// neighbours; the rest of a class's current chunk stays, never handed out, so that
    /// its reuse is still reported exactly), so that another class or a large
    /// block can take the memory: slots otherwise stay in their class once cut, and a
    /// heap whose memory all went to one class (filled with values of one size, then
    /// emptied) could serve no other size again. Returns whether anything came back.
    /// Taken only when memory is short: the class lists lose their slots' tags (the
    /// runtime then reads the lines' stamps instead) and their LIFO order.
    fn recycle_free_slots(&self, st: &mut State) -> bool {
        let line = self.line.get();
        let mut any = false;
        for (class, c) in st.classes.iter_mut().enumerate() {
            let slot = CLASS_LINES[class] * line;
            for (offset, _) in c.free.drain(..) {
                st.runs.insert(offset, slot);
                c.reserved -= 1;
                any = true;
            }
        }
        // Free runs never touch the bump pointer: give the lines back to it.
        while let Some((start, _)) = st.runs.remove_ending_at(st.bump) {
            st.bump = start;
        }
        any
    }

    fn out_of_memory(&self, st: &State, requested: usize) -> HeapError {
        HeapError::OutOfMemory {
            requested,
            free: self.free_bytes(st),
        }
    }

    fn alloc_class(
        &self,
        st: &mut State,
        class: usize,
        requested: usize,
    ) -> Result<(Block, u64), HeapError> {
        let slot = CLASS_LINES[class] * self.line.get();
        let (offset, reused, tag) = if let Some((offset, tag)) = st.classes[class].free.pop() {
            (offset, true, tag)
        } else {
            if st.classes[class].next == st.classes[class].end {
                // Refill: a whole chunk if possible, fewer slots when memory is short.
                let mut slots = (self.chunk_lines / CLASS_LINES[class]).max(1);
                let (start, fresh_from) = loop {
                    if let Some(got) = self.take(st, slots * slot) {
                        break got;
                    }
                    if slots == 1 {
                        return Err(self.out_of_memory(st, requested));
                    }
                    slots /= 2;
                };
                let c = &mut st.classes[class];
                c.next = start;
                c.end = start + slots * slot;
                c.fresh_from = fresh_from;
                c.reserved += slots;
            }
            let c = &mut st.classes[class];
            let offset = c.next;
            c.next += slot;
            (offset, offset < c.fresh_from, NO_TAG)
        };
        let c = &mut st.classes[class];
        c.live += 1;
        c.allocations += 1;
        c.reuses += u64::from(reused);
        st.live.insert(offset, Kind::Class(class));
        let block = Block {
            offset,
            len: slot,
            reused,
        };
        Ok((block, tag))
    }

    fn alloc_large(
        &self,
        st: &mut State,
        len: usize,
        requested: usize,
    ) -> Result<Block, HeapError> {
        let Some((offset, fresh_from)) = self.take(st, len) else {
            return Err(self.out_of_memory(st, requested));
        };
        st.large.live_blocks += 1;
        st.large.live_bytes += len;
        st.large.allocations += 1;
        st.live.insert(offset, Kind::Large(len));
        Ok(Block {
            offset,
            len,
            reused: offset < fresh_from,
        })
    }
}

impl NodeHeap {
    /// An allocation from the memory the heap owns now.
    fn alloc_owned(&mut self, bytes: usize) -> Result<(Block, Option<u64>), HeapError> {
        let g = &self.geom;
        let len = match g.line.align_up(bytes) {
            Some(len) if bytes > 0 && len <= g.arena.len() => len,
            _ => return Err(HeapError::BadSize { requested: bytes }),
        };
        let class = g.class_for(len);
        let st = &mut self.state;
        let (block, tag) = match class {
            Some(c) => g.alloc_class(st, c, bytes)?,
            None => (g.alloc_large(st, len, bytes)?, NO_TAG),
        };
        st.stats.live += block.len;
        st.stats.peak = st.stats.peak.max(st.stats.live);
        st.stats.allocations += 1;
        st.stats.reuses += u64::from(block.reused);
        Ok((block, (tag != NO_TAG).then_some(tag)))
    }
}

impl Heap for NodeHeap {
    fn line_size(&self) -> LineSize {
        self.geom.line
    }

    fn alloc(&mut self, bytes: usize) -> Result<Block, HeapError> {
        Ok(self.alloc_tagged(bytes)?.0)
    }

    /// Memory first from what the heap owns, then from its source (a growing heap), and
    /// only then from the free slots of other classes (`Geom::recycle_free_slots`).
    fn alloc_tagged(&mut self, bytes: usize) -> Result<(Block, Option<u64>), HeapError> {
        let short = match self.alloc_owned(bytes) {
            Err(e @ HeapError::OutOfMemory { .. }) => e,
            r => return r,
        };
        if let Some(source) = self.source.as_mut() {
            let len = self.geom.line.align_up(bytes).unwrap_or(bytes);
            match source.grow(len) {
                Ok(range) => {
                    self.add(range, false)?;
                    match self.alloc_owned(bytes) {
                        Err(HeapError::OutOfMemory { .. }) => {}
                        r => return r,
                    }
                }
                Err(HeapError::OutOfMemory { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        if self.geom.recycle_free_slots(&mut self.state) {
            return self.alloc_owned(bytes);
        }
        Err(short)
    }
    fn free(&mut self, block: Block) -> Result<(), HeapError> {
        self.free_tagged(block, NO_TAG)
    }

    /// The slot of the request's class that many pops or cuts away (a request no class
    /// serves is not hinted).
    fn upcoming(&self, bytes: usize, ahead: usize) -> Option<usize> {
        let g = &self.geom;
        let class = g.class_for(g.line.align_up(bytes)?)?;
        let c = &self.state.classes[class];
        match ahead.checked_sub(c.free.len()) {
            None => Some(c.free[c.free.len() - 1 - ahead].0),
            Some(cut) => {
                let at = c.next + cut * CLASS_LINES[class] * g.line.get();
                (at < c.end).then_some(at)
            }
        }
    }

    /// Class slots keep their tag on the free list; large runs drop it (they merge).
    /// The one value that cannot be kept is `u64::MAX`.
    fn free_tagged(&mut self, block: Block, tag: u64) -> Result<(), HeapError> {
        let st = &mut self.state;
        let len = match st.live.get(block.offset) {
            Some(Kind::Class(c)) if CLASS_LINES[c] * self.geom.line.get() == block.len => {
                let c = &mut st.classes[c];
                c.live -= 1;
                c.free.push((block.offset, tag));
                block.len
            }
            Some(Kind::Large(len)) if len == block.len => {
                st.large.live_blocks -= 1;
                st.large.live_bytes -= len;
                st.runs.insert(block.offset, len);
                // Free runs never touch the bump pointer: give the lines back to it.
                if let Some((start, _)) = st.runs.remove_ending_at(st.bump) {
                    st.bump = start;
                }
                len
            }
            _ => {
                return Err(HeapError::ForeignBlock {
                    offset: block.offset,
                });
            }
        };
        st.live.remove(block.offset);
        st.stats.live -= len;
        st.stats.frees += 1;
        Ok(())
    }

    fn block_len(&self, offset: usize) -> Option<usize> {
        match self.state.live.get(offset)? {
            Kind::Class(c) => Some(CLASS_LINES[c] * self.geom.line.get()),
            Kind::Large(len) => Some(len),
        }
    }

    fn stats(&self) -> HeapStats {
        self.state.stats
    }

    /// Live blocks keep the slot their size asks for (a class slot, or an exact run);
    /// the gaps between them come back as large runs, the caller's to free after a grace
    /// period (they then coalesce as any run does).
    ///
    /// ```
    /// use bi_alloc::NodeHeap;
    /// use bi_core::heap::Heap;
    /// use bi_core::line::LineSize;
    ///
    /// let mut heap = NodeHeap::new(0..64 * 64, LineSize::X86).unwrap();
    /// let gaps = heap.adopt(&mut [(640, 64), (128, 100)]).unwrap();
    /// // Lines 0-1, 4-9 and 11-63 were not live: handed out until the caller frees them.
    /// let spans: Vec<_> = gaps.iter().map(|b| (b.offset, b.len)).collect();
    /// assert_eq!(spans, [(0, 128), (256, 384), (704, 64 * 64 - 704)]);
    /// assert_eq!(heap.block_len(128), Some(128)); // the 2-line class
    /// assert!(heap.alloc(64).is_err()); // nothing is free yet
    /// for g in gaps {
    ///     heap.free(g).unwrap();
    /// }
    /// assert!(heap.alloc(64).unwrap().reused);
    /// ```
    fn adopt(&mut self, live: &mut [(usize, usize)]) -> Result<Vec<Block>, HeapError> {
        let g = &self.geom;
        if self.state.stats.allocations != 0 {
            return Err(HeapError::BadArena {
                reason: "only a heap that has handed nothing out can take over an arena",
            });
        }
        let line = g.line.get();
        live.sort_unstable_by_key(|&(offset, _)| offset);
        // Everything owned counts as used memory from before, and nothing is left to cut.
        let owned = self.state.owned.clone();
        let capacity: usize = owned.iter().map(|r| r.len()).sum();
        let mut st = g.empty_state();
        let end = owned.last().map_or(g.arena.start, |r| r.end);
        (st.bump, st.bump_end, st.high_water) = (end, end, end);
        st.footprint_peak = capacity;
        st.owned = owned.clone();
        st.stats = HeapStats {
            capacity,
            live: capacity,
            peak: capacity,
            ..HeapStats::default()
        };
        let mut gaps = Vec::new();
        let mut gap = |st: &mut State, from: usize, to: usize| {
            if to > from {
                st.live.insert(from, Kind::Large(to - from));
                st.large.live_blocks += 1;
                st.large.live_bytes += to - from;
                gaps.push(Block {
                    offset: from,
                    len: to - from,
                    reused: true,
                });
            }
        };
        // Walk the owned ranges and the live blocks together; `at` is where the next gap
        // of range `r` starts.
        let mut r = 0;
        let mut at = owned.first().map_or(0, |o| o.start);
        for &(offset, bytes) in live.iter() {
            let lines = g.line.align_up(bytes).unwrap_or(0) / line;
            let class = class_of(lines).filter(|&c| CLASS_LINES[c] * line <= g.arena.len());
            let len = class.map_or(lines * line, |c| CLASS_LINES[c] * line);
            let block_end = offset.checked_add(len);
            while r < owned.len() && owned[r].end <= offset {
                gap(&mut st, at, owned[r].end);
                r += 1;
                at = owned.get(r).map_or(at, |o| o.start);
            }
            let fits = lines > 0
                && offset % line == 0
                && r < owned.len()
                && offset >= at
                && block_end.is_some_and(|e| e <= owned[r].end);
            if !fits {
                return Err(HeapError::ForeignBlock { offset });
            }
            gap(&mut st, at, offset);
            match class {
                Some(c) => {
                    st.classes[c].live += 1;
                    st.classes[c].reserved += 1;
                    st.live.insert(offset, Kind::Class(c));
                }
                None => {
                    st.large.live_blocks += 1;
                    st.large.live_bytes += len;
                    st.live.insert(offset, Kind::Large(len));
                }
            }
            at = offset + len;
        }
        for o in owned.get(r..).unwrap_or_default() {
            gap(&mut st, at.max(o.start), o.end);
        }
        self.state = st;
        Ok(gaps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: usize = 64;

    fn heap(lines: usize) -> NodeHeap {
        NodeHeap::new(L * 8..L * (8 + lines), LineSize::X86).unwrap()
    }

    #[test]
    fn rejects_bad_arenas() {
        let l = LineSize::X86;
        assert!(matches!(
            NodeHeap::new(0..0, l),
            Err(HeapError::BadArena { .. })
        ));
        assert!(matches!(
            NodeHeap::new(8..72, l),
            Err(HeapError::BadArena { .. })
        ));
        assert!(matches!(
            NodeHeap::new(0..100, l),
            Err(HeapError::BadArena { .. })
        ));
        assert!(NodeHeap::new(64..128, l).is_ok());
    }

    #[test]
    fn bad_sizes() {
        let mut h = heap(16);
        for bad in [0, 16 * L + 1, usize::MAX, usize::MAX - 10] {
            assert_eq!(h.alloc(bad), Err(HeapError::BadSize { requested: bad }));
        }
        assert_eq!(h.stats().allocations, 0);
    }

    #[test]
    fn requests_round_to_their_class() {
        let mut h = heap(1024);
        for (bytes, lines) in [(1, 1), (64, 1), (65, 2), (129, 3), (257, 6), (4096, 64)] {
            let b = h.alloc(bytes).unwrap();
            assert_eq!(b.len, lines * L, "{bytes} bytes");
            assert_eq!(b.offset % L, 0);
        }
        // Above the largest class: an exact run.
        let b = h.alloc(65 * L - 3).unwrap();
        assert_eq!(b.len, 65 * L);
        let s = h.node_stats();
        assert_eq!(s.large.live_blocks, 1);
        assert_eq!(s.classes[class_of(6).unwrap()].live, 1);
    }

    #[test]
    fn foreign_and_double_frees_are_errors() {
        let mut h = heap(64);
        let a = h.alloc(100).unwrap();
        let wrong_len = Block { len: L, ..a };
        assert_eq!(
            h.free(wrong_len),
            Err(HeapError::ForeignBlock { offset: a.offset })
        );
        let inside = Block {
            offset: a.offset + L,
            len: L,
            reused: false,
        };
        assert!(h.free(inside).is_err());
        h.free(a).unwrap();
        assert_eq!(h.free(a), Err(HeapError::ForeignBlock { offset: a.offset }));
        let s = h.stats();
        assert_eq!((s.live, s.frees), (0, 1));
    }

    #[test]
    fn upcoming_names_what_the_next_allocations_hand_out() {
        let mut h = heap(256);
        let given: Vec<_> = (0..3).map(|_| h.alloc(100).unwrap()).collect();
        for &b in &given {
            h.free(b).unwrap();
        }
        // Three slots given back (last first), then the rest of the chunk.
        let announced: Vec<_> = (0..5).map(|k| h.upcoming(100, k)).collect();
        for (k, at) in announced.into_iter().enumerate() {
            assert_eq!(Some(h.alloc(100).unwrap().offset), at, "allocation {k}");
        }
        // No class serves a request above the largest one: no hint.
        assert_eq!(h.upcoming(65 * L, 0), None);
        assert_eq!(h.upcoming(0, 0), None);
        // Past the chunk cut so far: unknown, from its first slot past the end on.
        h.alloc(L).unwrap();
        let c = &h.state.classes[class_of(1).unwrap()];
        let left = c.free.len() + (c.end - c.next) / L;
        assert!(h.upcoming(L, left - 1).is_some());
        assert_eq!(h.upcoming(L, left), None);
        assert_eq!(h.upcoming(L, 1 << 20), None);
    }

    #[test]
    fn class_slots_are_reused_lifo_and_reported() {
        let mut h = heap(256);
        let a = h.alloc(L).unwrap();
        let b = h.alloc(L).unwrap();
        assert!(!a.reused && !b.reused);
        assert_eq!(b.offset, a.offset + L); // cut from one chunk
        h.free(a).unwrap();
        h.free(b).unwrap();
        assert_eq!(h.alloc(L).unwrap(), Block { reused: true, ..b });
        assert_eq!(h.alloc(L).unwrap(), Block { reused: true, ..a });
        let c = h.alloc(L).unwrap();
        assert!(!c.reused, "the rest of the chunk is fresh");
        let s = h.stats();
        assert_eq!(
            (s.allocations, s.reuses, s.live, s.peak),
            (5, 2, 3 * L, 3 * L)
        );
        let cs = h.node_stats().classes[0];
        assert_eq!((cs.live, cs.free, cs.allocations, cs.reuses), (3, 0, 5, 2));
    }

    #[test]
    fn large_runs_coalesce_and_return_to_the_bump_pointer() {
        let mut h = heap(1024);
        let a = h.alloc(100 * L).unwrap();
        let b = h.alloc(100 * L).unwrap();
        let c = h.alloc(100 * L).unwrap();
        assert_eq!(h.node_stats().footprint, 300 * L);
        h.free(a).unwrap();
        h.free(b).unwrap();
        let s = h.node_stats();
        assert_eq!((s.large.free_runs, s.large.free_bytes), (1, 200 * L));
        // First fit: a 150-line request lands in the coalesced hole, and is a reuse.
        let d = h.alloc(150 * L).unwrap();
        assert_eq!((d.offset, d.reused), (a.offset, true));
        h.free(c).unwrap();
        let s = h.node_stats();
        assert_eq!(
            s.footprint,
            150 * L,
            "c and the 50 free lines went back to bump"
        );
        assert_eq!(s.footprint_peak, 300 * L);
        h.free(d).unwrap();
        let s = h.node_stats();
        assert_eq!((s.footprint, s.large.free_runs, s.free), (0, 0, 1024 * L));
        // Memory under the old high-water mark is reused even from the bump pointer.
        let e = h.alloc(400 * L).unwrap();
        assert!(e.reused);
        let f = h.alloc(100 * L).unwrap();
        assert!(!f.reused, "entirely above the high-water mark");
    }

    #[test]
    fn class_chunks_cut_from_freed_runs_are_reused() {
        let mut h = heap(256);
        let big = h.alloc(128 * L).unwrap();
        let keep = h.alloc(100 * L).unwrap(); // keeps the run below from reaching bump
        h.free(big).unwrap();
        let small = h.alloc(L).unwrap();
        assert_eq!((small.offset, small.reused), (big.offset, true));
        let _ = keep;
    }

    #[test]
    fn exhaustion_is_an_error_and_recoverable() {
        let mut h = heap(16);
        let mut blocks = Vec::new();
        loop {
            match h.alloc(L) {
                Ok(b) => blocks.push(b),
                Err(HeapError::OutOfMemory { requested, free }) => {
                    assert_eq!((requested, free), (L, 0));
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(blocks.len(), 16);
        assert_eq!(h.stats().live, 16 * L);
        assert!(matches!(h.alloc(2 * L), Err(HeapError::OutOfMemory { .. })));
        h.free(blocks.pop().unwrap()).unwrap();
        assert!(h.alloc(L).unwrap().reused);
    }

    #[test]
    fn memory_one_class_held_serves_another_once_freed() {
        // 64 lines filled with two-line values, all freed: one-line and large requests
        // are served from them (they stayed in the two-line class before).
        let mut h = heap(64);
        let mut blocks = Vec::new();
        while let Ok(b) = h.alloc(2 * L) {
            blocks.push(b);
        }
        assert!(matches!(h.alloc(L), Err(HeapError::OutOfMemory { .. })));
        for b in blocks {
            h.free(b).unwrap();
        }
        let one = h.alloc(L).unwrap();
        assert!(one.reused && one.len == L);
        let two = h
            .node_stats()
            .classes
            .into_iter()
            .find(|c| c.lines == 2)
            .unwrap();
        assert_eq!(
            (two.reserved, two.free, two.live),
            (0, 0, 0),
            "all given back"
        );
        let big = h.alloc(40 * L).unwrap();
        assert!(big.len >= 40 * L);
        let mut ones = vec![one];
        while let Ok(b) = h.alloc(L) {
            ones.push(b);
        }
        assert_eq!(ones.len() * L + big.len, 64 * L, "every line serves again");
        // And back: freed one-line slots serve two-line requests.
        for b in ones {
            h.free(b).unwrap();
        }
        h.free(big).unwrap();
        assert!(h.alloc(2 * L).is_ok());
        assert_eq!(h.stats().live, 2 * L);
    }

    #[test]
    fn chunks_shrink_when_memory_is_short() {
        // 20 lines: chunks of one line each (arena / 16), then a 12-line slot (one fits).
        let mut h = heap(20);
        let a = h.alloc(12 * L).unwrap();
        assert_eq!(a.len, 12 * L);
        // 8 lines left: a 6-line slot fits, a second does not.
        h.alloc(6 * L).unwrap();
        let err = h.alloc(6 * L).unwrap_err();
        assert_eq!(
            err,
            HeapError::OutOfMemory {
                requested: 6 * L,
                free: 2 * L
            }
        );
        // A class bigger than the arena falls back to an exact run.
        let mut h = heap(5);
        assert_eq!(h.alloc(5 * L).unwrap().len, 5 * L);
    }

    #[test]
    fn reinit_reports_everything_as_reused() {
        let mut h = NodeHeap::reinit(0..64 * L, LineSize::X86).unwrap();
        assert!(h.alloc(L).unwrap().reused);
        assert!(h.alloc(40 * L).unwrap().reused);
        assert_eq!(h.node_stats().footprint_peak, h.node_stats().footprint);
    }

    #[test]
    fn works_for_other_line_sizes() {
        for line in [32usize, 128] {
            let l = LineSize::new(line).unwrap();
            let mut h = NodeHeap::new(line * 4..line * 260, l).unwrap();
            assert_eq!(h.line_size(), l);
            let a = h.alloc(line + 1).unwrap();
            assert_eq!((a.len, a.offset % line), (2 * line, 0));
            let b = h.alloc(70 * line).unwrap();
            assert_eq!((b.len, b.offset % line), (70 * line, 0));
        }
    }

    /// Hands out the listed ranges, in order, then says the pool is full.
    struct Script(Vec<Range<usize>>);
    impl Grow for Script {
        fn grow(&mut self, bytes: usize) -> Result<Range<usize>, HeapError> {
            match self.0.first() {
                Some(r) if r.len() >= bytes => Ok(self.0.remove(0)),
                _ => Err(HeapError::OutOfMemory {
                    requested: bytes,
                    free: 0,
                }),
            }
        }
    }

    fn growing(grants: Vec<Range<usize>>) -> NodeHeap {
        NodeHeap::growing(0..1024 * L, LineSize::X86, &[], Box::new(Script(grants))).unwrap()
    }

    #[test]
    fn a_growing_heap_takes_grants_apart_and_adjacent() {
        // Requests above the largest class, so that every block is an exact run.
        let mut h = growing(vec![64 * L..192 * L, 512 * L..640 * L, 640 * L..768 * L]);
        assert!(h.owned().is_empty());
        let a = h.alloc(124 * L).unwrap(); // the first grant
        assert_eq!((a.offset, a.reused), (64 * L, false));
        let b = h.alloc(70 * L).unwrap(); // four lines left: the next grant, elsewhere
        assert_eq!(b.offset, 512 * L);
        let c = h.alloc(100 * L).unwrap(); // 58 left: the third grant extends the window
        assert_eq!(c.offset, 582 * L);
        assert_eq!(h.owned(), [64 * L..192 * L, 512 * L..768 * L]);
        // The first window's four lines became a free run.
        let st = h.node_stats();
        assert_eq!((st.large.free_runs, st.large.free_bytes), (1, 4 * L));
        assert_eq!((st.heap.capacity, st.untouched), (384 * L, 86 * L));
        assert!(matches!(
            h.alloc(100 * L),
            Err(HeapError::OutOfMemory { .. })
        ));
        h.free(c).unwrap();
        assert_eq!(h.alloc(100 * L).unwrap(), Block { reused: true, ..c });
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // one grant, one owned range
    fn grants_outside_the_span_or_overlapping_are_refused() {
        let mut h = growing(vec![1020 * L..1030 * L]);
        assert!(matches!(h.alloc(L), Err(HeapError::BadArena { .. })));
        let mut h = NodeHeap::growing(
            0..1024 * L,
            LineSize::X86,
            &[0..64 * L],
            Box::new(Script(vec![32 * L..96 * L])),
        )
        .unwrap();
        h.alloc(64 * L).unwrap();
        assert!(matches!(h.alloc(L), Err(HeapError::BadArena { .. })));
    }

    #[test]
    fn adoption_walks_every_owned_range() {
        let owned = [64 * L..128 * L, 512 * L..576 * L];
        let mut h = NodeHeap::growing(0..1024 * L, LineSize::X86, &owned, Box::new(Script(vec![])))
            .unwrap();
        // Owned memory from before is reported as reused.
        let mut h2 =
            NodeHeap::growing(0..1024 * L, LineSize::X86, &owned, Box::new(Script(vec![])))
                .unwrap();
        assert!(h2.alloc(L).unwrap().reused);
        let gaps = h.adopt(&mut [(520 * L, 64), (70 * L, 65)]).unwrap();
        let spans: Vec<_> = gaps.iter().map(|b| (b.offset / L, b.len / L)).collect();
        assert_eq!(spans, [(64, 6), (72, 56), (512, 8), (521, 55)]);
        // Until the gaps are given back, everything owned counts as in use, and as the
        // peak so far.
        let s = h.stats();
        assert_eq!((s.capacity, s.live, s.peak), (128 * L, 128 * L, 128 * L));
        // A block outside every owned range, or across the end of one, is foreign.
        let mut h3 =
            NodeHeap::growing(0..1024 * L, LineSize::X86, &owned, Box::new(Script(vec![])))
                .unwrap();
        assert!(h3.adopt(&mut [(300 * L, 64)]).is_err());
        assert!(h3.adopt(&mut [(127 * L, 128)]).is_err());
    }

    #[test]
    fn shared_between_threads() {
        // A heap is owned by its writer; threads that share one wrap it in a lock.
        let h = std::sync::Arc::new(std::sync::Mutex::new(heap(1024)));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let h = h.clone();
                std::thread::spawn(move || {
                    for i in 0..50 {
                        let mut h = h.lock().unwrap();
                        let b = h.alloc((t * 50 + i) % 300 + 1).unwrap();
                        h.free(b).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = h.lock().unwrap().stats();
        assert_eq!((s.live, s.allocations, s.frees), (0, 200, 200));
    }
}
