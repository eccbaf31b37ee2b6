//! Maps found by name, with one writer that can die and be replaced.

use super::write::MapWriteHandle;
use super::{BiHashMap, MapConfig};
use crate::CollectionError;
use crate::naming::{Start, fingerprint, open_slot, take_role};
use crate::stored::Stored;
use bi_core::heap::Heap;
use bi_core::mem::MemView;
use bi_core::region::Region;
use bi_core::runtime::{NodeRuntime, Writer};
use std::hash::Hash;
use std::marker::PhantomData;

impl<K: Stored + Eq + Hash, V: Stored> BiHashMap<K, V> {
    /// The map named `name` in `region` (one partition), made (with no writer yet) if
    /// the region has none. Opening a name made for another kind of structure, or for
    /// other key or value types, is an error ([`crate::naming`]).
    ///
    /// ```
    /// use bi_alloc::NodeHeap;
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 1);
    /// let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
    /// let map = BiHashMap::<u64, u64>::named(&s.region, &s.nodes[0], "orders").unwrap();
    /// let mut w = map.take_writer(&s.nodes[0], s.nodes[0].writer(heap).unwrap()).unwrap();
    /// w.insert(7, 70).unwrap();
    ///
    /// let again = BiHashMap::<u64, u64>::named(&s.region, &s.nodes[1], "orders").unwrap();
    /// assert_eq!(again.read_handle(&s.nodes[1]).unwrap().get(&7).unwrap(), Some(70));
    /// assert!(BiHashMap::<u32, u64>::named(&s.region, &s.nodes[1], "orders").is_err());
    /// ```
    pub fn named<M: MemView>(
        region: &Region,
        rt: &NodeRuntime<M>,
        name: &str,
    ) -> Result<Self, CollectionError> {
        let slot = open_slot(region, rt, name, fingerprint::<K, V>("BiHashMap"))?;
        Ok(BiHashMap {
            first_slot: slot,
            stride: 8,
            partitions: 1,
            named: true,
            _kv: PhantomData,
        })
    }

    /// Makes this process the map's writer, with `writer` (the node's writer, whose heap
    /// is over the arena the map's lines live in). A writer that is still alive makes it
    /// [`BiError::WriterAlive`](bi_core::runtime::BiError::WriterAlive). A map that never
    /// had a writer starts empty; a map whose writer left or died is **adopted**: its
    /// array, overflow lines and pairs stay as they are, and the rest of the arena comes
    /// back to the heap after a grace period.
    ///
    /// Only for maps made by [`named`](Self::named).
    ///
    /// ```
    /// use bi_alloc::NodeHeap;
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let heap = || NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
    /// let map = BiHashMap::<u64, u64>::named(&s.region, &s.nodes[0], "orders").unwrap();
    /// let mut w = map.take_writer(&s.nodes[0], s.nodes[0].writer(heap()).unwrap()).unwrap();
    /// w.insert(1, 10).unwrap();
    /// drop(w); // the writer leaves: the next one adopts the map as it is
    /// let w = map.take_writer(&s.nodes[0], s.nodes[0].writer(heap()).unwrap()).unwrap();
    /// assert_eq!((w.get(&1), w.len()), (Some(10), 1));
    /// ```
    pub fn take_writer<M: MemView, H: Heap>(
        &self,
        rt: &NodeRuntime<M>,
        writer: Writer<M, H>,
    ) -> Result<MapWriteHandle<K, V, M, H>, CollectionError> {
        self.take_writer_with(rt, writer, MapConfig::default())
    }

    /// [`take_writer`](Self::take_writer), sizing the table as `config` says (a fresh
    /// map starts with its buckets, an adopted one never shrinks below them).
    ///
    /// ```
    /// use bi_alloc::NodeHeap;
    /// use bi_collections::map::{BiHashMap, MapConfig};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let heap = NodeHeap::new(s.arena(0), s.region.layout().line_size()).unwrap();
    /// let map = BiHashMap::<u64, u64>::named(&s.region, &s.nodes[0], "orders").unwrap();
    /// let config = MapConfig::for_keys::<u64, u64>(3_000);
    /// let w = map.take_writer_with(&s.nodes[0], s.nodes[0].writer(heap).unwrap(), config).unwrap();
    /// assert_eq!(w.capacity(), 2000);
    /// ```
    pub fn take_writer_with<M: MemView, H: Heap>(
        &self,
        rt: &NodeRuntime<M>,
        mut writer: Writer<M, H>,
        config: MapConfig,
    ) -> Result<MapWriteHandle<K, V, M, H>, CollectionError> {
        let (role, start) = take_role(rt, self.first_slot, self.named, self.scope(), &mut writer)?;
        let mut handle = match start {
            Start::Fresh => MapWriteHandle::new(*self, writer, 0..1, config)?,
            Start::Adopt { foreign } => {
                // A line the previous writer's process was killed in the middle of
                // rewriting is finished first, from its journal; the adoption's own
                // rewrites go to that journal until this writer keeps its own.
                writer.set_adopting(true);
                if self.named {
                    writer.finish_from_journal(self.first_slot)?;
                    writer.resume_rewrite_journal(self.first_slot)?;
                }
                MapWriteHandle::adopt(*self, writer, 0..1, config, foreign)?
            }
        };
        if self.named {
            handle.keep_journal(self.first_slot)?;
        }
        Ok(handle.with_role(role))
    }
}
