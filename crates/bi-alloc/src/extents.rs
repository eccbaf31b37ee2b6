//! Extents: a pool's heap handed to the structures that need it, on demand.
//!
//! # Why not one arena per node
//!
//! Splitting the heap evenly when a region is made ([`Arenas`](crate::Arenas)) fixes
//! who may allocate where before anyone knows who will write: the only writer of a pool
//! of eight nodes gets an eighth of it, and a structure written on one node cannot be
//! taken over by a writer on another, whose arena is elsewhere. So the heap section is
//! cut into *extents* ([`Layout::extent`](bi_core::region::Layout::extent)) and an extent table records the owner of each:
//! a structure's writer asks for extents when its heap runs out, and they stay the
//! structure's, whichever node writes it next. A writer that adopts a structure
//! ([`Writer::adopt`](bi_core::runtime::Writer::adopt)) takes over exactly the memory
//! the structure owns, never another structure's.
//!
//! # How
//!
//! The table holds one owner word per extent: 0 for a free extent, otherwise the owner
//! (a named structure's slot offset, never 0). It is read and written only under the
//! pool lock ([`NodeRuntime::lock`]), which is what makes a table changed by several
//! nodes, with no coherence and no cross-node atomic, consistent: the lock's holder drops
//! its cached copy of the table before reading it and writes its change back before
//! letting go. A grant takes the lowest run of free extents that holds the request
//! (first fit), so a structure's extents tend to be adjacent and its heap one window.
//! Extents are never given back (a structure lives as long as its region).
//!
//! A writer that dies between writing an owner word and using the extent leaves memory
//! its structure owns and never used: the next writer's adoption counts it with the rest
//! of what the dead writer left, and gives it back to the heap after a grace period.

use crate::grow::Grow;
use crate::node_heap::NodeHeap;
use bi_core::heap::HeapError;
use bi_core::mem::MemView;
use bi_core::region::EXTENT_ENTRY_BYTES;
use bi_core::runtime::lock::again_if_lease_lost;
use bi_core::runtime::{BiError, NodeRuntime};
use std::ops::Range;
use std::time::Duration;

/// How long a grant waits for the pool lock before it fails with [`HeapError::NoExtent`].
pub(crate) const GRANT_LOCK_WAIT: Duration = Duration::from_secs(5);

/// The extent table of a pool, as seen by one owner: the extents it holds, and more on
/// demand.
///
/// ```
/// use bi_alloc::Extents;
/// use bi_core::heap::Heap;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 7);
/// let owner = s.slot(0) as u64; // a structure's slot names its extents
/// let mut heap = Extents::new(s.nodes[0].clone(), owner).unwrap().heap().unwrap();
/// let block = heap.alloc(100).unwrap(); // the first extent is granted here
///
/// // Another node (a later writer of the same structure) finds the same memory.
/// let again = Extents::new(s.nodes[1].clone(), owner).unwrap();
/// assert_eq!(again.owned().unwrap(), heap.owned());
/// assert!(heap.owned()[0].contains(&block.offset));
/// // Another owner gets other extents.
/// let mut other = Extents::new(s.nodes[1].clone(), s.slot(1) as u64).unwrap().heap().unwrap();
/// assert!(!heap.owned()[0].contains(&other.alloc(100).unwrap().offset));
/// ```
pub struct Extents<V: MemView> {
    rt: NodeRuntime<V>,
    owner: u64,
    /// The longest run of free extents and all free extents (bytes) the table held when
    /// a grant last failed for want of room, if one did: extents are never given back,
    /// so no later request longer than that run can be granted, and it is refused
    /// without the pool lock (with the free bytes of then, at most what is free now).
    refused: Option<(usize, usize)>,
}

impl<V: MemView> Extents<V> {
    /// The extents of `owner` (not 0), read and granted through `rt`'s node.
    ///
    /// ```
    /// use bi_alloc::Extents;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// assert!(Extents::new(s.nodes[0].clone(), 0).is_err()); // 0 marks a free extent
    /// let extents = Extents::new(s.nodes[0].clone(), s.slot(0) as u64).unwrap();
    /// assert!(extents.owned().unwrap().is_empty()); // nothing granted yet
    /// ```
    pub fn new(rt: NodeRuntime<V>, owner: u64) -> Result<Extents<V>, HeapError> {
        if owner == 0 {
            return Err(HeapError::BadArena {
                reason: "extent owner 0 means a free extent",
            });
        }
        Ok(Extents {
            rt,
            owner,
            refused: None,
        })
    }

    /// The extents this owner holds now, adjacent ones merged, in address order.
    ///
    /// ```
    /// use bi_alloc::Extents;
    /// use bi_core::heap::Heap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let owner = s.slot(3) as u64;
    /// let mut heap = Extents::new(s.nodes[0].clone(), owner).unwrap().heap().unwrap();
    /// heap.alloc(64).unwrap();
    /// // The table lives in the region: node 1 reads the same grant.
    /// let seen = Extents::new(s.nodes[1].clone(), owner).unwrap().owned().unwrap();
    /// assert_eq!(seen, heap.owned());
    /// assert_eq!(seen.len(), 1);
    /// ```
    pub fn owned(&self) -> Result<Vec<Range<usize>>, HeapError> {
        let _guard = self.rt.lock(GRANT_LOCK_WAIT).map_err(no_extent)?;
        let table = self.read_table()?;
        let layout = self.rt.layout();
        let mut out: Vec<Range<usize>> = Vec::new();
        for (i, _) in table.iter().enumerate().filter(|(_, o)| **o == self.owner) {
            let Some(e) = layout.extent(i) else { continue };
            match out.last_mut() {
                Some(last) if last.end == e.offset => last.end = e.end(),
                _ => out.push(e.range()),
            }
        }
        Ok(out)
    }

    /// A growing heap over the pool's heap section that owns what this owner holds (its
    /// contents count as used) and is granted more extents as it needs them.
    ///
    /// ```
    /// use bi_alloc::Extents;
    /// use bi_core::region::{Region, RegionConfig};
    /// use bi_core::runtime::{NodeRuntime, RuntimeConfig, TickClock};
    /// use std::sync::Arc;
    ///
    /// // Real hardware: a region in this process's memory, node 0 run over it.
    /// let region = Region::anonymous(RegionConfig::new(1 << 20).with_nodes(2)).unwrap();
    /// let (layout, config) = (*region.layout(), RuntimeConfig::default());
    /// let clock = Arc::new(TickClock::new());
    /// let rt = NodeRuntime::new(region.hardware(), layout, 0, config, clock).unwrap();
    /// let owner = region.layout().root_entry(0).unwrap().offset;
    /// let heap = Extents::new(rt.clone(), owner as u64).unwrap().heap().unwrap();
    /// let mut w = rt.writer(heap).unwrap();
    /// let link = w.alloc_sealed(42u64).unwrap();
    /// assert_eq!(w.read_own(link).unwrap(), 42);
    /// assert!(w.heap().owned().iter().any(|r| r.contains(&link.offset())));
    /// ```
    pub fn heap(self) -> Result<NodeHeap, HeapError>
    where
        V: 'static,
    {
        let owned = self.owned()?;
        let layout = *self.rt.layout();
        NodeHeap::growing(
            layout.heap().range(),
            layout.line_size(),
            &owned,
            Box::new(self),
        )
    }

    /// Every owner word, as memory holds it (call under the lock).
    fn read_table(&self) -> Result<Vec<u64>, HeapError> {
        let layout = self.rt.layout();
        let table = layout.extent_table();
        let view = self.rt.view();
        let io = |e: bi_core::mem::MemError| no_extent(e.into());
        view.invalidate(table.offset, table.len).map_err(io)?;
        view.fence();
        let mut words = vec![0u64; layout.extents()];
        view.load_u64s(table.offset, &mut words).map_err(io)?;
        Ok(words)
    }
}

fn no_extent(e: bi_core::runtime::BiError) -> HeapError {
    HeapError::NoExtent {
        reason: e.to_string(),
    }
}

impl<V: MemView> Grow for Extents<V> {
    /// Grants the lowest run of free extents that holds `bytes`, under the pool lock
    /// (taken again if this node's lease lapsed while it held it: nothing was written).
    fn grow(&mut self, bytes: usize) -> Result<Range<usize>, HeapError> {
        // A full pool stays full: a writer that keeps asking (each retry of an
        // allocation, each grow of a table) does not queue for the lock each time.
        if let Some((_, free)) = self.refused.filter(|&(longest, _)| bytes > longest) {
            return Err(HeapError::OutOfMemory {
                requested: bytes,
                free,
            });
        }
        let lost = |e: &Granting| matches!(e, Granting::LeaseLost);
        match again_if_lease_lost(|| self.grow_once(bytes), lost) {
            Ok(range) => Ok(range),
            Err(Granting::LeaseLost) => Err(no_extent(BiError::LockLeaseLost {
                node: self.rt.node(),
            })),
            Err(Granting::Failed(e)) => Err(e),
        }
    }
}

/// Why one try of a grant failed.
enum Granting {
    /// The node's lease lapsed while it held the pool lock, before anything was written.
    LeaseLost,
    Failed(HeapError),
}

impl From<HeapError> for Granting {
    fn from(e: HeapError) -> Granting {
        Granting::Failed(e)
    }
}

impl<V: MemView> Extents<V> {
    /// One try of [`grow`](Grow::grow), under one hold of the pool lock.
    fn grow_once(&mut self, bytes: usize) -> Result<Range<usize>, Granting> {
        let guard = self.rt.lock(GRANT_LOCK_WAIT).map_err(no_extent)?;
        let table = self.read_table()?;
        let layout = self.rt.layout();
        // First fit: the lowest run of free extents as long as the request.
        let (mut first, mut run, mut longest) = (0, 0, 0);
        let mut found = None;
        for (i, &owner) in table.iter().enumerate() {
            let Some(e) = layout.extent(i) else { break };
            if owner != 0 {
                (first, run) = (i + 1, 0);
                continue;
            }
            run += e.len;
            longest = longest.max(run);
            if run >= bytes {
                found = Some(first..i + 1);
                break;
            }
        }
        let Some(extents) = found else {
            let free = table.iter().filter(|&&o| o == 0).count() * layout.extent_bytes();
            self.refused = Some((longest, free));
            return Err(HeapError::OutOfMemory {
                requested: bytes,
                free,
            }
            .into());
        };
        if guard.check().is_err() {
            return Err(Granting::LeaseLost);
        }
        let view = self.rt.view();
        let io = |e: bi_core::mem::MemError| no_extent(e.into());
        let table_at = layout.extent_table().offset;
        let at = |i: usize| table_at + i * EXTENT_ENTRY_BYTES;
        for i in extents.clone() {
            view.store_u64(at(i), self.owner).map_err(io)?;
        }
        view.writeback(at(extents.start), extents.len() * EXTENT_ENTRY_BYTES)
            .map_err(io)?;
        view.fence();
        let (Some(a), Some(b)) = (layout.extent(extents.start), layout.extent(extents.end - 1))
        else {
            return Err(HeapError::BadArena {
                reason: "an extent past the heap",
            }
            .into());
        };
        Ok(a.offset..b.end())
    }
}
