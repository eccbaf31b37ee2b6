//! The heap seam: where the runtime asks for memory, and what it gets back.
//!
//! The Bounded Incoherence runtime decides *when* memory may be reused (after a grace
//! period); a heap decides *where* objects go. Keeping the two apart lets `bi-alloc`
//! provide the real shared-memory heap (per-node arenas, size classes, statistics) while
//! `bi-core` stays testable on its own with [`BumpHeap`], the simplest heap that can
//! work: a bump pointer over one section of a region plus exact-size free lists.
//!
//! A heap here is *one node's* heap. A node allocates and frees only blocks of its own
//! arena, so no heap ever needs an atomic operation that crosses nodes. Blocks are whole,
//! line-aligned lines, so two nodes never share a line through the heap.
//!
//! A heap only places memory. It never reads or writes the blocks it hands out; whatever
//! header an object carries is written by the runtime. It reports whether a block was used
//! before ([`Block::reused`]), so the runtime can tell the memory view (and, under the
//! emulator, the oracle) that the range now holds a new object.

use crate::line::LineSize;
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;

/// A block of whole lines handed out by a [`Heap`].
///
/// ```
/// use bi_core::heap::{BumpHeap, Heap};
/// use bi_core::line::LineSize;
///
/// let mut heap = BumpHeap::new(0..4096, LineSize::X86).unwrap();
/// let b = heap.alloc(65).unwrap();
/// assert_eq!((b.offset % 64, b.len, b.reused), (0, 128, false)); // whole lines
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Block {
    /// Offset of the first byte (line-aligned).
    pub offset: usize,
    /// Length in bytes (a whole number of lines).
    pub len: usize,
    /// Whether this memory held an object before (the block is being reused).
    pub reused: bool,
}

/// Why a heap could not serve a request.
///
/// ```
/// use bi_core::heap::{BumpHeap, Heap, HeapError};
/// use bi_core::line::LineSize;
///
/// let mut heap = BumpHeap::new(0..128, LineSize::X86).unwrap();
/// assert_eq!(heap.alloc(0), Err(HeapError::BadSize { requested: 0 }));
/// assert_eq!(heap.alloc(256), Err(HeapError::BadSize { requested: 256 })); // > the arena
/// let b = heap.alloc(128).unwrap();
/// assert!(matches!(heap.alloc(64), Err(HeapError::OutOfMemory { requested: 64, .. })));
/// heap.free(b).unwrap();
/// assert_eq!(heap.free(b), Err(HeapError::ForeignBlock { offset: 0 })); // twice
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeapError {
    /// Not enough free memory for `requested` bytes.
    OutOfMemory {
        /// Bytes asked for.
        requested: usize,
        /// Bytes still free in the arena (possibly fragmented).
        free: usize,
    },
    /// A zero-byte request, or one larger than any block this heap can hold.
    BadSize {
        /// Bytes asked for.
        requested: usize,
    },
    /// A block this heap did not hand out, or one freed twice.
    ForeignBlock {
        /// Offset of the block.
        offset: usize,
    },
    /// The arena given to the heap is unusable (empty, misaligned, out of range).
    BadArena {
        /// Why.
        reason: &'static str,
    },
    /// The heap needed more memory from its pool and could not be given any for a reason
    /// other than exhaustion (the pool lock could not be had, the extent table is damaged).
    NoExtent {
        /// Why.
        reason: String,
    },
}

impl fmt::Display for HeapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeapError::OutOfMemory { requested, free } => write!(
                f,
                "shared heap exhausted: {requested} bytes requested, {free} bytes free"
            ),
            HeapError::BadSize { requested } => {
                write!(f, "cannot allocate a block of {requested} bytes")
            }
            HeapError::ForeignBlock { offset } => write!(
                f,
                "block at offset {offset} was not handed out by this heap (or was freed twice)"
            ),
            HeapError::BadArena { reason } => write!(f, "unusable heap arena: {reason}"),
            HeapError::NoExtent { reason } => {
                write!(f, "the heap could not be given more memory: {reason}")
            }
        }
    }
}

impl std::error::Error for HeapError {}

/// Counters a heap keeps about its arena.
///
/// ```
/// use bi_core::heap::{BumpHeap, Heap};
/// use bi_core::line::LineSize;
///
/// let mut heap = BumpHeap::new(0..1024, LineSize::X86).unwrap();
/// let a = heap.alloc(64).unwrap();
/// heap.free(a).unwrap();
/// heap.alloc(64).unwrap();
/// let s = heap.stats();
/// assert_eq!((s.capacity, s.live, s.peak), (1024, 64, 64));
/// assert_eq!((s.allocations, s.frees, s.reuses), (2, 1, 1));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Size of the arena in bytes.
    pub capacity: usize,
    /// Bytes in blocks currently handed out.
    pub live: usize,
    /// The largest `live` ever reached.
    pub peak: usize,
    /// Blocks handed out so far.
    pub allocations: u64,
    /// Blocks given back so far.
    pub frees: u64,
    /// Allocations served from memory that held an object before.
    pub reuses: u64,
}

/// One node's allocator of line-aligned blocks inside shared memory.
///
/// The node's writer owns its heap, so allocating and freeing take `&mut self`: the fast
/// path needs no lock. Implementations must be `Send + Sync` (a writer may move between
/// threads) and must never panic on bad input: exhaustion and foreign blocks are
/// [`HeapError`] values.
///
/// ```
/// use bi_core::heap::{BumpHeap, Heap};
/// use bi_core::line::LineSize;
///
/// fn fill(heap: &mut impl Heap, n: usize) -> usize {
///     (0..n).filter(|_| heap.alloc(64).is_ok()).count()
/// }
/// let mut heap = BumpHeap::new(0..256, LineSize::X86).unwrap();
/// assert_eq!(fill(&mut heap, 10), 4); // four lines, then exhausted
/// ```
pub trait Heap: Send + Sync {
    /// The line size blocks are aligned and padded to.
    ///
    /// ```
    /// use bi_core::heap::{BumpHeap, Heap};
    /// use bi_core::line::LineSize;
    ///
    /// let heap = BumpHeap::new(0..4096, LineSize::new(128).unwrap()).unwrap();
    /// assert_eq!(heap.line_size().get(), 128);
    /// ```
    fn line_size(&self) -> LineSize;

    /// A block of at least `bytes` bytes: line-aligned, a whole number of lines.
    ///
    /// ```
    /// use bi_core::heap::{BumpHeap, Heap};
    /// use bi_core::line::LineSize;
    ///
    /// let mut heap = BumpHeap::new(4096..8192, LineSize::X86).unwrap();
    /// let (a, b) = (heap.alloc(10).unwrap(), heap.alloc(10).unwrap());
    /// assert_eq!((a.offset, b.offset), (4096, 4160)); // never sharing a line
    /// ```
    fn alloc(&mut self, bytes: usize) -> Result<Block, HeapError>;

    /// Gives a block back. The runtime calls this only after a grace period, when no node
    /// can still hold a reference to the block or a cached line of it.
    ///
    /// ```
    /// use bi_core::heap::{Block, BumpHeap, Heap};
    /// use bi_core::line::LineSize;
    ///
    /// let mut heap = BumpHeap::new(0..1024, LineSize::X86).unwrap();
    /// let b = heap.alloc(64).unwrap();
    /// heap.free(b).unwrap();
    /// assert_eq!(heap.stats().live, 0);
    /// let foreign = Block { offset: 512, len: 64, reused: false };
    /// assert!(heap.free(foreign).is_err());
    /// ```
    fn free(&mut self, block: Block) -> Result<(), HeapError>;

    /// [`alloc`](Self::alloc), with the tag the block was last given back with through
    /// [`free_tagged`](Self::free_tagged), if the heap kept one. The runtime tags a block
    /// with the generation its lines last carried, so that reusing it needs no read of
    /// its (by then invalidated, so missing) lines. The default keeps no tags.
    ///
    /// ```
    /// use bi_core::heap::{BumpHeap, Heap};
    /// use bi_core::line::LineSize;
    ///
    /// let mut heap = BumpHeap::new(0..1024, LineSize::X86).unwrap();
    /// let b = heap.alloc(64).unwrap();
    /// heap.free_tagged(b, 7).unwrap();
    /// let (again, tag) = heap.alloc_tagged(64).unwrap();
    /// assert_eq!((again.offset, tag), (b.offset, None)); // BumpHeap keeps no tags
    /// ```
    fn alloc_tagged(&mut self, bytes: usize) -> Result<(Block, Option<u64>), HeapError> {
        Ok((self.alloc(bytes)?, None))
    }

    /// [`free`](Self::free), leaving `tag` with the block for the next
    /// [`alloc_tagged`](Self::alloc_tagged) that hands out exactly this block. A heap may
    /// drop tags (the default does; `bi-alloc`'s drops them when it merges runs).
    ///
    /// ```
    /// use bi_core::heap::{BumpHeap, Heap};
    /// use bi_core::line::LineSize;
    ///
    /// let mut heap = BumpHeap::new(0..1024, LineSize::X86).unwrap();
    /// let b = heap.alloc(64).unwrap();
    /// heap.free_tagged(b, 3).unwrap(); // a plain free here
    /// assert_eq!(heap.stats().frees, 1);
    /// ```
    fn free_tagged(&mut self, block: Block, tag: u64) -> Result<(), HeapError> {
        let _ = tag;
        self.free(block)
    }

    /// The length of the live block that starts at `offset`, or `None` if this heap has
    /// no block handed out there (another node's memory, the inside of a block, a block
    /// already given back). The runtime asks it before retiring an object, so that only
    /// whole blocks of its own node are ever marked or freed.
    ///
    /// ```
    /// use bi_core::heap::{BumpHeap, Heap};
    /// use bi_core::line::LineSize;
    ///
    /// let mut heap = BumpHeap::new(0..1024, LineSize::X86).unwrap();
    /// let b = heap.alloc(100).unwrap();
    /// assert_eq!(heap.block_len(b.offset), Some(128));
    /// assert_eq!(heap.block_len(b.offset + 64), None); // inside the block
    /// heap.free(b).unwrap();
    /// assert_eq!(heap.block_len(b.offset), None);
    /// ```
    fn block_len(&self, offset: usize) -> Option<usize>;

    /// Where the allocation `ahead` allocations from now would be, if it asked for
    /// `bytes` and nothing were freed in between: a hint, so that a writer can start
    /// bringing that line into its cache before it stores into it. A heap that cannot
    /// tell says `None` (the default).
    ///
    /// ```
    /// use bi_core::heap::{BumpHeap, Heap};
    /// use bi_core::line::LineSize;
    ///
    /// let mut heap = BumpHeap::new(0..1024, LineSize::X86).unwrap();
    /// assert_eq!(heap.upcoming(64, 2), Some(128)); // after 0 and 64
    /// let b = heap.alloc(64).unwrap();
    /// heap.free(b).unwrap();
    /// assert_eq!(heap.upcoming(64, 0), Some(b.offset)); // the block just given back
    /// assert_eq!(heap.upcoming(64, 1), Some(64));
    /// assert_eq!(heap.upcoming(64, 16), None); // past the arena
    /// assert_eq!(heap.upcoming(0, 0), None); // no allocation is of nothing
    /// ```
    fn upcoming(&self, bytes: usize, ahead: usize) -> Option<usize> {
        let _ = (bytes, ahead);
        None
    }

    /// The heap's counters.
    ///
    /// ```
    /// use bi_core::heap::{BumpHeap, Heap};
    /// use bi_core::line::LineSize;
    ///
    /// let mut heap = BumpHeap::new(0..1024, LineSize::X86).unwrap();
    /// heap.alloc(200).unwrap();
    /// assert_eq!((heap.stats().live, heap.stats().allocations), (256, 1));
    /// ```
    fn stats(&self) -> HeapStats;

    /// Takes over an arena that an earlier owner left: this heap (which must not have
    /// handed anything out yet) marks the blocks of `live` as handed out (each given as
    /// its offset and the bytes it was allocated for), and hands out everything else of
    /// the arena at once, as the blocks it returns. Those may still be cached or read by
    /// other nodes (the earlier owner's retired and unfinished objects), so the caller
    /// keeps them until a grace period has passed and then frees them.
    ///
    /// Errors: [`HeapError::ForeignBlock`] for a block outside the arena, misaligned or
    /// overlapping another; [`HeapError::BadArena`] if this heap cannot adopt (the
    /// default) or has already handed blocks out.
    ///
    /// ```
    /// use bi_core::heap::{BumpHeap, Heap, HeapError};
    /// use bi_core::line::LineSize;
    ///
    /// let mut heap = BumpHeap::new(0..1024, LineSize::X86).unwrap();
    /// // The default: this heap cannot take an arena over.
    /// assert!(matches!(heap.adopt(&mut [(0, 64)]), Err(HeapError::BadArena { .. })));
    /// ```
    fn adopt(&mut self, live: &mut [(usize, usize)]) -> Result<Vec<Block>, HeapError> {
        let _ = live;
        Err(HeapError::BadArena {
            reason: "this heap cannot take over an arena",
        })
    }
}

/// The simplest heap that works: a bump pointer over an arena, with exact-size free lists.
///
/// For tests of the runtime and for small programs; `bi-alloc` has the real heap.
///
/// ```
/// use bi_core::heap::{BumpHeap, Heap, HeapError};
/// use bi_core::line::LineSize;
///
/// let mut heap = BumpHeap::new(4096..4096 + 256, LineSize::X86).unwrap();
/// let a = heap.alloc(100).unwrap(); // two lines
/// assert_eq!((a.offset, a.len, a.reused), (4096, 128, false));
/// heap.free(a).unwrap();
/// let b = heap.alloc(70).unwrap(); // same size class: the block comes back
/// assert_eq!((b.offset, b.reused), (4096, true));
/// heap.alloc(64).unwrap();
/// heap.alloc(64).unwrap();
/// assert!(matches!(heap.alloc(64), Err(HeapError::OutOfMemory { .. })));
/// ```
#[derive(Debug)]
pub struct BumpHeap {
    arena: Range<usize>,
    line: LineSize,
    state: BumpState,
}

#[derive(Debug, Default)]
struct BumpState {
    next: usize,
    /// Free blocks by length in bytes.
    free: HashMap<usize, Vec<usize>>,
    /// Length of every block handed out, by offset.
    live: HashMap<usize, usize>,
    stats: HeapStats,
}

impl BumpHeap {
    /// A heap over the byte range `arena` of shared memory (line-aligned, non-empty).
    ///
    /// ```
    /// use bi_core::heap::{BumpHeap, Heap};
    /// use bi_core::line::LineSize;
    ///
    /// let heap = BumpHeap::new(4096..8192, LineSize::X86).unwrap();
    /// assert_eq!(heap.stats().capacity, 4096);
    /// assert!(BumpHeap::new(4096..4096, LineSize::X86).is_err()); // empty
    /// assert!(BumpHeap::new(10..4096, LineSize::X86).is_err()); // not line-aligned
    /// ```
    pub fn new(arena: Range<usize>, line: LineSize) -> Result<BumpHeap, HeapError> {
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
        let state = BumpState {
            next: arena.start,
            stats: HeapStats {
                capacity: arena.len(),
                ..HeapStats::default()
            },
            ..BumpState::default()
        };
        Ok(BumpHeap { arena, line, state })
    }
}

impl Heap for BumpHeap {
    fn line_size(&self) -> LineSize {
        self.line
    }

    /// Blocks of the same length given back, last first, then the bump pointer.
    fn upcoming(&self, bytes: usize, ahead: usize) -> Option<usize> {
        let len = self.line.align_up(bytes).filter(|&l| l > 0)?;
        let st = &self.state;
        let free = st.free.get(&len).map_or(&[][..], Vec::as_slice);
        match ahead.checked_sub(free.len()) {
            None => Some(free[free.len() - 1 - ahead]),
            Some(cut) => {
                let at = st.next.checked_add(cut.checked_mul(len)?)?;
                (at.checked_add(len)? <= self.arena.end).then_some(at)
            }
        }
    }

    fn alloc(&mut self, bytes: usize) -> Result<Block, HeapError> {
        let len = match self.line.align_up(bytes) {
            Some(len) if bytes > 0 && len <= self.arena.len() => len,
            _ => return Err(HeapError::BadSize { requested: bytes }),
        };
        let st = &mut self.state;
        let (offset, reused) = match st.free.get_mut(&len).and_then(Vec::pop) {
            Some(offset) => (offset, true),
            None => {
                if self.arena.end - st.next < len {
                    let free = self.arena.end - st.next
                        + st.free.iter().map(|(l, v)| l * v.len()).sum::<usize>();
                    return Err(HeapError::OutOfMemory {
                        requested: bytes,
                        free,
                    });
                }
                st.next += len;
                (st.next - len, false)
            }
        };
        st.live.insert(offset, len);
        st.stats.live += len;
        st.stats.peak = st.stats.peak.max(st.stats.live);
        st.stats.allocations += 1;
        st.stats.reuses += u64::from(reused);
        Ok(Block {
            offset,
            len,
            reused,
        })
    }

    fn free(&mut self, block: Block) -> Result<(), HeapError> {
        let st = &mut self.state;
        match st.live.get(&block.offset) {
            Some(&len) if len == block.len => {}
            _ => {
                return Err(HeapError::ForeignBlock {
                    offset: block.offset,
                });
            }
        }
        st.live.remove(&block.offset);
        st.free.entry(block.len).or_default().push(block.offset);
        st.stats.live -= block.len;
        st.stats.frees += 1;
        Ok(())
    }

    fn block_len(&self, offset: usize) -> Option<usize> {
        self.state.live.get(&offset).copied()
    }

    fn stats(&self) -> HeapStats {
        self.state.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_arenas_and_sizes() {
        assert!(BumpHeap::new(0..0, LineSize::X86).is_err());
        assert!(BumpHeap::new(8..72, LineSize::X86).is_err());
        let mut heap = BumpHeap::new(0..128, LineSize::X86).unwrap();
        assert_eq!(heap.alloc(0), Err(HeapError::BadSize { requested: 0 }));
        assert_eq!(heap.alloc(129), Err(HeapError::BadSize { requested: 129 }));
        assert_eq!(
            heap.alloc(usize::MAX),
            Err(HeapError::BadSize {
                requested: usize::MAX
            })
        );
    }

    #[test]
    fn upcoming_names_what_the_next_allocations_hand_out() {
        let mut heap = BumpHeap::new(0..16 * 64, LineSize::X86).unwrap();
        let given: Vec<_> = (0..3).map(|_| heap.alloc(64).unwrap()).collect();
        for &b in &given {
            heap.free(b).unwrap();
        }
        // Three blocks given back (last first), then the bump pointer, to the arena's end.
        let announced: Vec<_> = (0..17).map(|k| heap.upcoming(64, k)).collect();
        assert_eq!(announced[16], None, "past the arena");
        for (k, at) in announced.into_iter().take(16).enumerate() {
            assert_eq!(Some(heap.alloc(64).unwrap().offset), at, "allocation {k}");
        }
        assert_eq!(heap.upcoming(64, 0), None, "the arena is full");
        assert_eq!(heap.upcoming(0, 0), None, "no allocation is of nothing");
    }

    #[test]
    fn double_free_and_foreign_blocks_are_errors() {
        let mut heap = BumpHeap::new(0..1024, LineSize::X86).unwrap();
        let a = heap.alloc(64).unwrap();
        heap.free(a).unwrap();
        assert_eq!(heap.free(a), Err(HeapError::ForeignBlock { offset: 0 }));
        let fake = Block {
            offset: 512,
            len: 64,
            reused: false,
        };
        assert_eq!(
            heap.free(fake),
            Err(HeapError::ForeignBlock { offset: 512 })
        );
    }

    #[test]
    fn stats_track_live_peak_and_reuse() {
        let mut heap = BumpHeap::new(0..1024, LineSize::X86).unwrap();
        let blocks: Vec<_> = (0..4).map(|_| heap.alloc(64).unwrap()).collect();
        for b in &blocks[..2] {
            heap.free(*b).unwrap();
        }
        let again = heap.alloc(10).unwrap();
        assert!(again.reused);
        let s = heap.stats();
        assert_eq!((s.capacity, s.live, s.peak), (1024, 192, 256));
        assert_eq!((s.allocations, s.frees, s.reuses), (5, 2, 1));
    }
}
