//! Trees found by name, with one writer that can die and be replaced.

use super::{BiTree, TreeWriteHandle};
use crate::CollectionError;
use crate::naming::{Start, fingerprint, open_slot, take_role};
use crate::stored::Stored;
use bi_core::heap::Heap;
use bi_core::mem::MemView;
use bi_core::region::Region;
use bi_core::runtime::{NodeRuntime, Writer};
use std::marker::PhantomData;

impl<K: Stored + Ord, V: Stored> BiTree<K, V> {
    /// The tree named `name` in `region`, made (empty, with no writer yet) if the region
    /// has none. Opening a name made for another kind of structure, or for other key or
    /// value types, is an error ([`crate::naming`]). Any process of any node may call it;
    /// all find the same tree.
    ///
    /// ```
    /// use bi_alloc::NodeHeap;
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 1);
    /// let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
    /// let tree = BiTree::<u64, u64>::named(&s.region, &s.nodes[0], "prices").unwrap();
    /// let mut w = tree.take_writer(&s.nodes[0], s.nodes[0].writer(heap).unwrap()).unwrap();
    /// w.insert(1, 10).unwrap();
    ///
    /// // Another node finds it by name, as the same types only.
    /// let again = BiTree::<u64, u64>::named(&s.region, &s.nodes[1], "prices").unwrap();
    /// assert_eq!(again.read_handle(&s.nodes[1]).unwrap().get(&1).unwrap(), Some(10));
    /// assert!(BiTree::<u64, u32>::named(&s.region, &s.nodes[1], "prices").is_err());
    /// // And a second writer is refused while the first lives.
    /// let heap1 = NodeHeap::new(s.arena(1), s.region.layout().line_size()).unwrap();
    /// assert!(again.take_writer(&s.nodes[1], s.nodes[1].writer(heap1).unwrap()).is_err());
    /// ```
    pub fn named<M: MemView>(
        region: &Region,
        rt: &NodeRuntime<M>,
        name: &str,
    ) -> Result<Self, CollectionError> {
        let slot = open_slot(region, rt, name, fingerprint::<K, V>("BiTree"))?;
        Ok(BiTree {
            slot,
            named: true,
            _t: PhantomData,
        })
    }

    /// Makes this process the tree's writer, with `writer` (the node's writer, whose heap
    /// is over the arena the tree's nodes live in). A writer that is still alive makes it
    /// [`BiError::WriterAlive`](bi_core::runtime::BiError::WriterAlive): a tree has one
    /// writer. A tree that never had a writer starts empty. A tree whose writer left or
    /// died is **adopted**: its nodes (everything a publication that returned made
    /// reachable) stay as they are, and the rest of the arena (what the old writer
    /// retired, or allocated and never published) comes back to the heap after a grace
    /// period. Nothing a reader can see is lost or rewritten.
    ///
    /// Only for trees made by [`named`](Self::named) (a tree named by a bare slot has no
    /// writer record: use [`write_handle`](Self::write_handle)).
    ///
    /// ```
    /// use bi_alloc::NodeHeap;
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let heap = || NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
    /// let tree = BiTree::<u64, u64>::named(&s.region, &s.nodes[0], "stock").unwrap();
    /// let mut w = tree.take_writer(&s.nodes[0], s.nodes[0].writer(heap()).unwrap()).unwrap();
    /// w.insert(1, 10).unwrap();
    /// drop(w); // the writer leaves: the next one adopts the tree as it is
    /// let w = tree.take_writer(&s.nodes[0], s.nodes[0].writer(heap()).unwrap()).unwrap();
    /// assert_eq!(w.get(&1), Some(10));
    /// // A tree named by a bare slot has no writer record.
    /// let bare = BiTree::<u64, u64>::at(s.slot(0));
    /// assert!(bare.take_writer(&s.nodes[0], w.into_writer()).is_err());
    /// ```
    pub fn take_writer<M: MemView, H: Heap>(
        self,
        rt: &NodeRuntime<M>,
        mut writer: Writer<M, H>,
    ) -> Result<TreeWriteHandle<K, V, M, H>, CollectionError> {
        let (role, start) = take_role(rt, self.slot, self.named, self.scope(), &mut writer)?;
        match start {
            Start::Fresh => Ok(TreeWriteHandle::create(self, writer)?.with_role(role)),
            Start::Adopt { foreign } => {
                let root = writer.read_slot(self.slot)?;
                TreeWriteHandle::adopt(self, writer, root, foreign, role)
            }
        }
    }
}
