//! Reading one's own writes: what a process that sent a write to another node's writer
//! does once the write is acknowledged.
//!
//! A writer publishes a write before it acknowledges it (written back, fenced), but a
//! reader's node may still cache the lines the write replaced, until its next pass. A
//! process that wrote through another node's writer would then read its own write back
//! as missing, or as the value before it. So, once the writer has acknowledged, the
//! process drops its node's copies of the key's path through the structure (the lines
//! it caches of it, under one fence): the next read of the key on this node fetches them
//! from memory, which holds the write, and every read after it sees that version or a
//! later one. Reads pay nothing for it; a remote write pays a few invalidations and one
//! fence.

use crate::CollectionError;
use crate::map::MapReadHandle;
use crate::stored::Stored;
use crate::tree::TreeReadHandle;
use bi_core::mem::MemView;
use bi_core::runtime::Fault;
use std::hash::Hash;

/// A read handle that can drop its node's copies of one key's path, so that its node
/// reads a write to the key that another node's writer has published (switched off by
/// [`Fault::OwnWrites`]).
///
/// ```
/// use bi_collections::map::BiHashMap;
/// use bi_collections::Refresh;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 0);
/// let map = BiHashMap::<u64, u64>::at(s.slot(0));
/// let mut w = map.write_handle(s.writer(0)).unwrap();
/// w.insert(1, 10).unwrap();
/// s.quiesce_all().unwrap();
/// let r = map.read_handle(&s.nodes[1]).unwrap();
/// assert_eq!(r.get(&1).unwrap(), Some(10)); // cached on node 1
/// w.insert(1, 11).unwrap(); // written for node 1 (by another node's writer)
/// w.insert(2, 20).unwrap();
/// assert_eq!(r.get(&1).unwrap(), Some(10)); // node 1 has not passed yet
/// r.refresh(&1).unwrap();
/// r.refresh(&2).unwrap();
/// assert_eq!((r.get(&1).unwrap(), r.get(&2).unwrap()), (Some(11), Some(20)));
/// ```
pub trait Refresh<K> {
    /// Drops this node's copies of the path to `key`: its next read of the key comes
    /// from memory as it is now.
    fn refresh(&self, key: &K) -> Result<(), CollectionError>;
}

impl<K: Stored + Eq + Hash, V: Stored, M: MemView> Refresh<K> for MapReadHandle<K, V, M> {
    fn refresh(&self, key: &K) -> Result<(), CollectionError> {
        let m = self.enter();
        if m.guard().faults().has(Fault::OwnWrites) {
            return Ok(());
        }
        m.refresh(key)
    }
}

impl<K: Stored + Ord, V: Stored, M: MemView> Refresh<K> for TreeReadHandle<K, V, M> {
    /// The tree's nodes are never rewritten in place (a write copies the path and
    /// publishes a new root), so dropping the root slot's line is all it takes.
    fn refresh(&self, _key: &K) -> Result<(), CollectionError> {
        let t = self.enter();
        if t.guard().faults().has(Fault::OwnWrites) {
            return Ok(());
        }
        t.refresh_root()
    }
}
