//! `BiTree<K, V>`: a Bonsai tree shared by nodes without cache coherence.
//!
//! # Why a Bonsai tree
//!
//! Readers on other nodes read the tree through their own caches and perform no cache
//! operation and no fence on the read path. That rules out any structure whose published
//! bytes change in place: a reader could hold half of an old line and half of a new one.
//! A *Bonsai tree* (Clements, Kaashoek and Zeldovich) never changes a published node. An
//! update copies the path from the root down to the changed position into fresh nodes
//! (*path copying*), shares every other subtree with the old version, and makes the new
//! version visible by storing one new root link. Rebalancing works the same way: a
//! rotation allocates fresh nodes for the nodes it would have relinked. So every version
//! a reader can reach is a complete, immutable, balanced tree.
//!
//! The tree is *weight-balanced* (Adams): each node stores the size of its subtree and
//! siblings may differ in weight by at most a factor `DELTA = 3` (weights are sizes plus
//! one; rotation choice with `RATIO = 2`, the parameters Hirai and Yamamoto proved
//! correct). Weight balance suits path copying: the balance information is the subtree
//! size, which an update changes along its path only (the path it copies anyway), and the
//! size gives `len()`, rank and range counting for free.
//!
//! # What a reader sees, and when
//!
//! - Any read within one [`TreeRef`] (one guard) walks one version of the tree; nodes
//!   it reaches stay valid until the guard is dropped (the runtime's grace period waits
//!   for the reader's node to invalidate them, twice).
//! - Between its node's quiescence passes, a reader may see an older version: its cached
//!   copy of the root slot can lag. After a pass that starts after a publication (plus
//!   the clock skew bound), the node sees that publication or a later one.
//! - *Misses are bounded-stale, like hits*, as in the hash map: [`TreeRef::get`]
//!   answers from the version the node's cache holds, so a key inserted on another node
//!   is found once the reader's node has passed after the insertion, and a miss costs
//!   what a hit costs. A link whose object has moved on always sends the search to the
//!   root slot read from memory (a validation failure, not a miss).
//! - *Lazy invalidation on request*: [`TreeRef::get_fresh`] re-reads the root slot from
//!   memory on a miss and searches again if it changed, so a key whose insertion was
//!   published before the lookup began is always found; a hit can still return a value
//!   that a later, not yet visible, update replaced.
//! - A process reads its own writes: a write sent to another node's writer
//!   (`bi::SharedTree`) drops the sender's copy of the root slot once acknowledged.
//! - Stale lines of reused nodes are never accepted: every line of a node carries its
//!   generation and every link the generation it expects.
//!
//! # Costs
//!
//! - Lookup: one validated line per level, `O(log n)`, with no cache operation when
//!   the cached root is current (the walk is the runtime's
//!   [`BiGuard::walk`](bi_core::runtime::BiGuard::walk); a miss costs the same, and
//!   [`get_fresh`](TreeRef::get_fresh)'s miss a read of the root slot from memory and a
//!   second walk, the runtime's [`lazy`](bi_core::runtime::BiGuard::lazy)). A node of keys and values of up to 32
//!   bytes together is one line (a `u64 -> u64` node is 40 bytes beside the line's
//!   8-byte stamp).
//! - Update: `O(log n)` new nodes (the path, plus at most 3 per rotation), each written
//!   back without a fence; one fence and one slot store to publish; the replaced nodes
//!   retired with one more fence. A [batch](crate::ApplyBatch) of `b` operations
//!   publishes once and retires once, and gives back at once the nodes that a later
//!   operation of the same batch copied again.
//! - Memory: nothing beside the nodes. The writer reads its own tree back from its
//!   node's cache (it wrote every node there, and never writes a published node again);
//!   replaced nodes return to the heap about two pass periods after retirement
//!   ([`TreeWriteHandle::reclaim`]).
//!
//! # Pieces
//!
//! - [`BiTree`]: a `Copy` descriptor naming a tree by its root slot;
//! - [`TreeWriteHandle`]: the single writer (owns the node's runtime
//!   [`Writer`]);
//! - [`TreeReadHandle`] and [`TreeRef`]: readers and a view under one guard;
//! - [`EpochBonsai`]: the same algorithm over ordinary memory with crossbeam-epoch, the
//!   coherent baseline.
//!
//! ```
//! use bi_collections::tree::BiTree;
//! use bi_collections::{ApplyBatch, Op};
//! use bi_core::runtime::testing::Setup;
//!
//! let s = Setup::new(2, 7);
//! let tree = BiTree::<u64, u64>::at(s.slot(0));
//! let mut w = tree.write_handle(s.writer(0)).unwrap();
//! let ops: Vec<_> = (0..20).map(|k| Op::Insert(k, k * k)).collect();
//! let report = w.apply_batch(&ops).unwrap(); // one publication
//! assert_eq!(report.inserted, 20);
//! w.check_invariants().unwrap();
//!
//! let r = tree.read_handle(&s.nodes[1]).unwrap();
//! assert_eq!(r.get(&9).unwrap(), Some(81));
//! s.quiesce_all().unwrap();
//! assert_eq!(r.enter().iter().unwrap().len(), 20);
//! ```

#[cfg(test)]
mod adopt_corrupt;
mod algo;
mod epoch;
mod named;
mod node;
mod read;
mod recent;
mod ref_hash;
mod write;

pub use algo::InvariantError;
pub use epoch::EpochBonsai;
pub use node::Node;
pub use read::{Scan, TreeReadHandle, TreeRef};
pub use write::TreeWriteHandle;

/// A tree node of `K -> V` as it sits in memory: keys and values as their
/// [words](crate::Stored::Word).
pub(crate) type NodeOf<K, V> = Node<<K as Stored>::Word, <V as Stored>::Word>;

use crate::CollectionError;
use crate::stored::Stored;
use bi_core::heap::Heap;
use bi_core::mem::MemView;
use bi_core::runtime::{NodeRuntime, Scope, Writer};
use std::fmt;
use std::marker::PhantomData;

/// A Bonsai tree in shared memory, named by the offset of its root slot (an 8-byte slot
/// in the root directory or the heap). Cheap to copy and to send to other nodes: it holds
/// no state, only the slot and the types.
///
/// ```
/// use bi_collections::tree::BiTree;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 0);
/// let tree = BiTree::<u32, u64>::at(s.slot(1));
/// let mut w = tree.write_handle(s.writer(0)).unwrap();
/// w.insert(1, 10).unwrap();
/// let r = tree.read_handle(&s.nodes[1]).unwrap();
/// assert_eq!(r.get(&1).unwrap(), Some(10));
/// assert_eq!(r.get(&2).unwrap(), None);
/// ```
pub struct BiTree<K, V> {
    slot: usize,
    /// Made by [`BiTree::named`]: its slot is followed by a writer record.
    named: bool,
    _t: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for BiTree<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K, V> Copy for BiTree<K, V> {}

impl<K, V> fmt::Debug for BiTree<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BiTree").field("slot", &self.slot).finish()
    }
}

impl<K, V> BiTree<K, V> {
    /// The tree whose root link lives in the 8-byte slot at `slot`.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u64, u64>::at(s.slot(2));
    /// assert_eq!(tree.slot(), s.slot(2));
    /// // A descriptor only: copies name the same tree.
    /// let copy = tree;
    /// assert_eq!(copy.slot(), tree.slot());
    /// ```
    pub const fn at(slot: usize) -> Self {
        BiTree {
            slot,
            named: false,
            _t: PhantomData,
        }
    }

    /// Offset of the root slot.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    ///
    /// let tree = BiTree::<u32, u32>::at(4096);
    /// assert_eq!(tree.slot(), 4096);
    /// ```
    pub const fn slot(&self) -> usize {
        self.slot
    }

    /// The scope this tree's writer logs under and its readers declare
    /// ([`bi_core::runtime::scope`]).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::Scope;
    ///
    /// let tree = BiTree::<u32, u32>::at(4096);
    /// assert_eq!(tree.scope(), Scope::of_slot(4096));
    /// assert_ne!(tree.scope(), Scope::ALL);
    /// ```
    pub fn scope(&self) -> Scope {
        Scope::of_slot(self.slot)
    }
}

impl<K: Stored + Ord, V: Stored> BiTree<K, V> {
    /// Publishes an empty tree in the slot and returns the writer's handle, which owns
    /// `writer` ([`TreeWriteHandle::into_writer`] gives it back). A tree previously in the
    /// slot is unlinked, not retired. On an error the writer is dropped (the node can
    /// create a new one).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u64, u64>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// assert!(w.is_empty());
    /// w.insert(5, 50).unwrap();
    /// // The handle took the writer and set its scope to the tree's.
    /// assert_eq!(w.writer().scope(), tree.scope());
    /// ```
    pub fn write_handle<M: MemView, H: Heap>(
        self,
        mut writer: Writer<M, H>,
    ) -> Result<TreeWriteHandle<K, V, M, H>, CollectionError> {
        writer.set_scope(self.scope())?;
        Ok(TreeWriteHandle::create(self, writer)?)
    }

    /// Registers a reader on `rt`'s node (one per thread).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u64, u64>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 2).unwrap();
    /// // One reader per thread: two handles on one node are two readers.
    /// let a = tree.read_handle(&s.nodes[1]).unwrap();
    /// let b = tree.read_handle(&s.nodes[1]).unwrap();
    /// assert_ne!(a.reader().index(), b.reader().index());
    /// assert_eq!(b.get(&1).unwrap(), Some(2));
    /// ```
    pub fn read_handle<M: MemView>(
        self,
        rt: &NodeRuntime<M>,
    ) -> Result<TreeReadHandle<K, V, M>, CollectionError> {
        let reader = rt.reader()?;
        reader.use_scope(self.scope())?;
        Ok(TreeReadHandle::new(reader, self))
    }
}
