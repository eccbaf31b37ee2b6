//! The read side: a registered reader per thread, sections, lookups with lazy
//! invalidation on a miss, `len` and iteration.

use super::hash::{bucket_of, partition_of};
use super::node::Node;
use super::{BiHashMap, FIRST_BUCKET, LEN_WORD, key_hash};
use crate::CollectionError;
use bi_core::mem::MemView;
use bi_core::runtime::walk::Step;
use bi_core::runtime::{BiError, BiGuard, Entry, Link, Reader, Search, SlotArrayRef};
use bytemuck::Pod;
use std::cell::RefCell;
use std::fmt;
use std::hash::Hash;

fn corrupt(reason: &'static str) -> CollectionError {
    CollectionError::Corrupt { reason }
}

/// A reader of a [`BiHashMap`] on one node (one per thread, like the runtime's
/// [`Reader`]).
///
/// ```
/// use bi_collections::map::BiHashMap;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 2);
/// let map = BiHashMap::<u64, [u8; 4]>::at(s.slot(0));
/// let mut w = map.write_handle(s.writer(0)).unwrap();
/// w.insert(9, *b"nine").unwrap();
/// let r = map.read_handle(&s.nodes[1]).unwrap();
/// assert_eq!(r.get(&9).unwrap(), Some(*b"nine"));
/// assert!(!r.contains_key(&8).unwrap());
/// ```
pub struct MapReadHandle<K, V, M: MemView> {
    map: BiHashMap<K, V>,
    reader: Reader<M>,
}

impl<K, V, M: MemView> fmt::Debug for MapReadHandle<K, V, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MapReadHandle")
            .field("map", &self.map)
            .finish_non_exhaustive()
    }
}

impl<K: Pod + Eq + Hash, V: Pod, M: MemView> MapReadHandle<K, V, M> {
    pub(super) fn new(map: BiHashMap<K, V>, reader: Reader<M>) -> Self {
        MapReadHandle { map, reader }
    }

    /// The map.
    pub fn map(&self) -> BiHashMap<K, V> {
        self.map
    }

    /// The runtime reader this handle uses.
    pub fn reader(&self) -> &Reader<M> {
        &self.reader
    }

    /// Opens a read section: everything read through the returned [`MapRef`] is
    /// protected until it is dropped. Keep sections short (the reader lease).
    #[inline]
    pub fn enter(&self) -> MapRef<'_, K, V, M> {
        MapRef {
            map: self.map,
            guard: self.reader.enter(),
        }
    }

    /// The value of `key`, in a section of its own.
    #[inline]
    pub fn get(&self, key: &K) -> Result<Option<V>, CollectionError> {
        self.enter().get(key)
    }

    /// Whether `key` is present, in a section of its own.
    pub fn contains_key(&self, key: &K) -> Result<bool, CollectionError> {
        Ok(self.get(key)?.is_some())
    }
}

/// An open read section on a map.
pub struct MapRef<'r, K, V, M: MemView> {
    map: BiHashMap<K, V>,
    guard: BiGuard<'r, M>,
}

impl<K, V, M: MemView> fmt::Debug for MapRef<'_, K, V, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MapRef")
            .field("map", &self.map)
            .finish_non_exhaustive()
    }
}

impl<'r, K: Pod + Eq + Hash, V: Pod, M: MemView> MapRef<'r, K, V, M> {
    /// The guard of this section.
    pub fn guard(&self) -> &BiGuard<'r, M> {
        &self.guard
    }

    /// The value of `key`.
    ///
    /// The hit path reads the root slot, the bucket slot and the chain through this
    /// node's cache, with no cache operation. On a miss (or a stale link), it reads the
    /// root and the bucket again from memory and searches once more ([`BiGuard::lazy`]):
    /// a key whose insertion was published before this call began is always found.
    #[inline]
    pub fn get(&self, key: &K) -> Result<Option<V>, CollectionError> {
        let h = key_hash(key);
        let slot = self
            .map
            .partition_slot(partition_of(h, self.map.partitions()));
        self.guard.lazy(|entry| self.search(slot, h, key, entry))
    }

    /// One search for `key` from the partition's root slot read through `entry`.
    #[inline(always)]
    fn search(
        &self,
        slot: usize,
        h: u64,
        key: &K,
        entry: Entry,
    ) -> Result<Search<V>, CollectionError> {
        let array = match self.array(slot, entry) {
            Ok(Some(a)) => a,
            Ok(None) => return Ok(Search::Missing),
            Err(CollectionError::Runtime(BiError::StaleLink { .. })) => return Ok(Search::Stale),
            Err(e) => return Err(e),
        };
        let b = FIRST_BUCKET + bucket_of(h, array.len() - FIRST_BUCKET);
        let Some(head) = self.bucket_head(&array, b, entry)? else {
            return Ok(Search::Stale);
        };
        Ok(self.guard.walk(head, |n| {
            if n.key() == *key {
                Step::Found(n.value())
            } else {
                Step::Next(n.next())
            }
        })?)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &K) -> Result<bool, CollectionError> {
        Ok(self.get(key)?.is_some())
    }

    /// The head link of bucket `b`, through the cache or from memory; `None` when the
    /// array itself turned out stale.
    #[inline(always)]
    fn bucket_head(
        &self,
        array: &SlotArrayRef<'_>,
        b: usize,
        entry: Entry,
    ) -> Result<Option<Link<Node<K, V>>>, CollectionError> {
        let g = &self.guard;
        let head = match entry {
            Entry::Cached => g.link_in(array, b),
            Entry::Fresh => g.word_in_fresh(array, b).map(Link::from_raw),
        };
        match head {
            Ok(l) => Ok(Some(l)),
            Err(BiError::StaleLink { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn array(
        &self,
        slot: usize,
        entry: Entry,
    ) -> Result<Option<SlotArrayRef<'_>>, CollectionError> {
        let a = match entry {
            Entry::Cached => self.guard.load_slots(slot),
            Entry::Fresh => self.guard.load_slots_fresh(slot),
        };
        match a {
            Ok(Some(a)) => {
                let buckets = a.len().saturating_sub(FIRST_BUCKET);
                if buckets.is_power_of_two() {
                    Ok(Some(a))
                } else {
                    Err(corrupt(
                        "a bucket array whose bucket count is not a power of two",
                    ))
                }
            }
            Ok(None) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Number of keys, as published (each partition's count read once; between passes
    /// possibly stale by the runtime's bound).
    pub fn len(&self) -> Result<usize, CollectionError> {
        let mut total = 0usize;
        for p in 0..self.map.partitions() {
            let slot = self.map.partition_slot(p);
            let len = self.guard.lazy(|entry| match self.array(slot, entry) {
                Ok(Some(a)) => Ok(Search::Found(self.guard.load_word_in(&a, LEN_WORD)?)),
                Ok(None) => Ok(Search::Found(0)),
                Err(CollectionError::Runtime(BiError::StaleLink { .. })) => Ok(Search::Stale),
                Err(e) => Err(e),
            })?;
            total += len.unwrap_or(0) as usize;
        }
        Ok(total)
    }

    /// Whether the map has no key.
    pub fn is_empty(&self) -> Result<bool, CollectionError> {
        Ok(self.len()? == 0)
    }

    /// Every entry, partition by partition. Each partition is read whole from one bucket
    /// array before its entries are yielded: if the writer replaced the array meanwhile
    /// (a resize retires the old chains), the partition is read again from the new one,
    /// so no entry is yielded twice. Partitions are read one after another, so the
    /// result is not a snapshot of a map being written across partitions.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u16, u16>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// for k in 0..50 {
    ///     w.insert(k, k + 1).unwrap();
    /// }
    /// let r = map.read_handle(&s.nodes[0]).unwrap();
    /// let m = r.enter();
    /// let mut all: Vec<(u16, u16)> = m.iter().collect::<Result<_, _>>().unwrap();
    /// all.sort();
    /// assert_eq!(all, (0..50).map(|k| (k, k + 1)).collect::<Vec<_>>());
    /// ```
    pub fn iter(&self) -> Iter<'_, 'r, K, V, M> {
        Iter {
            map: self,
            partition: 0,
            buffer: Vec::new(),
            done: false,
        }
    }
}

impl<K: Pod + Eq + Hash, V: Pod, M: MemView> MapRef<'_, K, V, M> {
    /// Reads every entry of partition `p` into `out` from one bucket array: through the
    /// cache first, and again from slots read fresh from memory when a link turns out
    /// stale (the writer replaced a chain or the whole array meanwhile), by
    /// [`BiGuard::lazy`].
    fn read_partition(&self, p: usize, out: &mut Vec<(K, V)>) -> Result<(), CollectionError> {
        let slot = self.map.partition_slot(p);
        let g = &self.guard;
        let entries = RefCell::new(out);
        let read = g.lazy(|entry| {
            entries.borrow_mut().clear();
            let array = match self.array(slot, entry) {
                Ok(Some(a)) => a,
                Ok(None) => return Ok(Search::Found(())),
                Err(CollectionError::Runtime(BiError::StaleLink { .. })) => {
                    return Ok(Search::Stale);
                }
                Err(e) => return Err(e),
            };
            for b in FIRST_BUCKET..array.len() {
                let Some(head) = self.bucket_head(&array, b, entry)? else {
                    return Ok(Search::Stale);
                };
                let chain = g.walk(head, |n| {
                    entries.borrow_mut().push((n.key(), n.value()));
                    Step::<_, ()>::Next(n.next())
                })?;
                if matches!(chain, Search::Stale) {
                    return Ok(Search::Stale);
                }
            }
            Ok(Search::Found(()))
        })?;
        read.ok_or(corrupt("a partition read reported a miss"))
    }
}

/// Iterator over a map's entries under one section ([`MapRef::iter`]); yields an error
/// (and then ends) if the structure cannot be read.
pub struct Iter<'a, 'r, K, V, M: MemView> {
    map: &'a MapRef<'r, K, V, M>,
    partition: usize,
    buffer: Vec<(K, V)>,
    done: bool,
}

impl<K, V, M: MemView> fmt::Debug for Iter<'_, '_, K, V, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Iter")
            .field("partition", &self.partition)
            .finish_non_exhaustive()
    }
}

impl<'a, 'r, K: Pod + Eq + Hash, V: Pod, M: MemView> Iterator for Iter<'a, 'r, K, V, M> {
    type Item = Result<(K, V), CollectionError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(kv) = self.buffer.pop() {
                return Some(Ok(kv));
            }
            if self.done || self.partition >= self.map.map.partitions() {
                self.done = true;
                return None;
            }
            let p = self.partition;
            self.partition += 1;
            if let Err(e) = self.map.read_partition(p, &mut self.buffer) {
                self.buffer.clear();
                self.done = true;
                return Some(Err(e));
            }
        }
    }
}
