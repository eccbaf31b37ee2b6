//! The read side: a registered reader per thread, sections, lookups with lazy
//! invalidation on a miss, `len` and iteration.

use super::bucket::{
    ARRAY_LAYOUT, BucketLine, COUNTERS_FAILED_GROWS, COUNTERS_LEN, HEADER_BUCKETS, HEADER_FORMAT,
    HEADER_LAYOUT, LineLink, Pair, Words, code, counters_line,
};
use super::hash::{bucket_of, partition_of};
use super::tags::{Group, tag_line};
use super::{BiHashMap, key_hash};
use crate::CollectionError;
use crate::error::StepAnswer;
use crate::stored::{ByteSource, Query, Stored};
use bi_core::mem::MemView;
use bi_core::runtime::walk::{MAX_WALK, Step};
use bi_core::runtime::{BiError, BiGuard, Fault, Fetch, Link, Reader, Search, Stamp, Via, lines};
use std::borrow::Borrow;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::hash::Hash;

fn corrupt(reason: &'static str) -> CollectionError {
    CollectionError::Corrupt { reason }
}

/// The value of a decoding, `None` if it met a stale copy of a byte string (the search
/// starts again from fresh entry points), or the real failure.
fn unless_stale<T>(r: Result<T, CollectionError>) -> Result<Option<T>, CollectionError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(CollectionError::Runtime(BiError::StaleLink { .. })) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A search's answer from a decoded value: found, or (a stale byte string) stale.
#[inline(always)]
fn answer<R>(r: Result<R, CollectionError>) -> Result<Search<R>, CollectionError> {
    Ok(match unless_stale(r)? {
        Some(v) => Search::Found(v),
        None => Search::Stale,
    })
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
    /// The last array this handle validated the header of (its link) and its bucket
    /// count: a header is written once, before its array is published, and a link's
    /// generation names one array, so a lookup that finds the same link in the root slot
    /// need not read the header again.
    known: Cell<(u64, usize)>,
}

/// The entries as this node reads them (in no particular order).
///
/// ```
/// use bi_collections::map::BiHashMap;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 0);
/// let map = BiHashMap::<u32, u32>::at(s.slot(0));
/// map.write_handle(s.writer(0)).unwrap().insert(1, 10).unwrap();
/// let r = map.read_handle(&s.nodes[1]).unwrap();
/// assert_eq!(format!("{r:?}"), "{1: 10}");
/// ```
impl<K, V, M> fmt::Debug for MapReadHandle<K, V, M>
where
    K: Stored + Eq + Hash + fmt::Debug,
    V: Stored + fmt::Debug,
    M: MemView,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::show::entries(f, self.enter().iter().collect::<Result<Vec<_>, _>>())
    }
}

impl<K: Stored + Eq + Hash, V: Stored, M: MemView> MapReadHandle<K, V, M> {
    pub(super) fn new(map: BiHashMap<K, V>, reader: Reader<M>) -> Self {
        MapReadHandle {
            map,
            reader,
            known: Cell::new((0, 0)),
        }
    }

    /// The map.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.map(), map);
    /// assert_eq!(r.map().slot(), s.slot(0));
    /// ```
    pub fn map(&self) -> BiHashMap<K, V> {
        self.map
    }

    /// The runtime reader this handle uses.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// let m = r.enter();
    /// assert!(r.reader().is_active());
    /// drop(m);
    /// assert!(!r.reader().is_active());
    /// ```
    pub fn reader(&self) -> &Reader<M> {
        &self.reader
    }

    /// Opens a read section: everything read through the returned [`MapRef`] is
    /// protected until it is dropped. Keep sections short (the reader lease).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 10).unwrap();
    /// w.insert(2, 20).unwrap();
    /// s.quiesce_all().unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// let m = r.enter(); // one section for several reads
    /// assert_eq!((m.get(&1).unwrap(), m.get(&2).unwrap()), (Some(10), Some(20)));
    /// assert_eq!(m.len().unwrap(), 2);
    /// ```
    #[inline]
    pub fn enter(&self) -> MapRef<'_, K, V, M> {
        MapRef {
            map: self.map,
            guard: self.reader.enter(),
            known: &self.known,
        }
    }

    /// The value of `key`, in a section of its own, as [`MapRef::get`] reads it: a hit
    /// or a miss of the version this node's cache holds (at most one staleness bound
    /// old).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.get(&4).unwrap(), None);
    /// w.insert(4, 40).unwrap();
    /// s.quiesce_all().unwrap(); // node 1's pass: what was published before it is read
    /// assert_eq!(r.get(&4).unwrap(), Some(40));
    /// ```
    #[inline]
    pub fn get<Q>(&self, key: &Q) -> Result<Option<V>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + Hash + ?Sized,
    {
        self.enter().get(key)
    }

    /// The value of `key`, in a section of its own, finding every insertion published
    /// before the call ([`MapRef::get_fresh`]).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.get_fresh(&4).unwrap(), None);
    /// w.insert(4, 40).unwrap();
    /// // Published before the lookup: the miss re-reads from memory and finds it.
    /// assert_eq!(r.get_fresh(&4).unwrap(), Some(40));
    /// ```
    #[inline]
    pub fn get_fresh<Q>(&self, key: &Q) -> Result<Option<V>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + Hash + ?Sized,
    {
        self.enter().get_fresh(key)
    }

    /// The values of `keys` into `out`, in one section ([`MapRef::get_many`]).
    pub fn get_many<Q>(&self, keys: &[Q], out: &mut Vec<Option<V>>) -> Result<(), CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + Hash,
    {
        self.enter().get_many(keys, out)
    }

    /// Whether `key` is present, in a section of its own.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// w.insert(4, 40).unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// assert!(r.contains_key(&4).unwrap());
    /// w.remove(&4).unwrap();
    /// s.quiesce_all().unwrap(); // a hit may be stale until the reader's node passes
    /// assert!(!r.contains_key(&4).unwrap());
    /// ```
    pub fn contains_key<Q>(&self, key: &Q) -> Result<bool, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + Hash + ?Sized,
    {
        Ok(self.get(key)?.is_some())
    }
}

/// An open read section on a map.
///
/// ```
/// use bi_collections::map::BiHashMap;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 0);
/// let map = BiHashMap::<u64, u64>::at(s.slot(0));
/// let mut w = map.write_handle(s.writer(0)).unwrap();
/// for k in 0..10 {
///     w.insert(k, k * 3).unwrap();
/// }
/// s.quiesce_all().unwrap();
/// let r = map.read_handle(&s.nodes[1]).unwrap();
/// let m = r.enter();
/// assert_eq!(m.get(&4).unwrap(), Some(12));
/// assert_eq!(m.len().unwrap(), 10);
/// assert_eq!(m.iter().count(), 10);
/// ```
pub struct MapRef<'r, K, V, M: MemView> {
    pub(super) map: BiHashMap<K, V>,
    pub(super) guard: BiGuard<'r, M>,
    /// The handle's last validated array and its bucket count.
    known: &'r Cell<(u64, usize)>,
}

/// The entries as a map (`{k: v, ...}`, in no particular order); a failed read shows as
/// the error.
///
/// ```
/// use bi_collections::map::BiHashMap;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(1, 0);
/// let map = BiHashMap::<String, u32>::at(s.slot(0));
/// let mut w = map.write_handle(s.writer(0)).unwrap();
/// w.insert("one".into(), 1).unwrap();
/// let r = map.read_handle(&s.nodes[0]).unwrap();
/// assert_eq!(format!("{:?}", r.enter()), r#"{"one": 1}"#);
/// ```
impl<K: Stored + Eq + Hash + fmt::Debug, V: Stored + fmt::Debug, M: MemView> fmt::Debug
    for MapRef<'_, K, V, M>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for entry in self.iter() {
            match entry {
                Ok((k, v)) => m.entry(&k, &v),
                Err(e) => return write!(f, "<unreadable map: {e}>"),
            };
        }
        m.finish()
    }
}

/// What a line holds for a key, where the chain walk stops.
enum Probed<V> {
    /// The key, with its value.
    Found(V),
    /// Linked entries whose hash matches (up to three; null links pad), then the rest of
    /// the chain.
    Candidates([u64; 3], LineLink),
}

/// One step of the chain walk for `key` on one validated copy of a line: the value, the
/// linked candidates to compare, or on to the next line.
#[inline(always)]
fn probe<K: Stored + Eq, V: Stored, Q: Query<K> + ?Sized>(
    line: &BucketLine,
    key: &Q,
    h: u64,
    src: &impl ByteSource,
) -> Step<BucketLine, StepAnswer<Probed<V::Word>>> {
    if Words::<K, V>::INLINE {
        for j in 0..Words::<K, V>::PER_LINE {
            if line.is_used(j) {
                match key.matches(&line.key::<K::Word, V::Word>(j), src) {
                    Ok(true) => {
                        return Step::Found(Ok(Probed::Found(line.value::<K::Word, V::Word>(j))));
                    }
                    Ok(false) => {}
                    Err(e) => return Step::Found(Err(Box::new(e))),
                }
            }
        }
    } else {
        let mut found = [0u64; 3];
        let mut n = 0;
        for j in 0..Words::<K, V>::PER_LINE.min(3) {
            let (hash, pair) = line.linked::<K::Word, V::Word>(j);
            if line.is_used(j) && hash == h {
                found[n] = pair.raw();
                n += 1;
            }
        }
        if n > 0 {
            return Step::Found(Ok(Probed::Candidates(found, line.next())));
        }
    }
    Step::Next(line.next().first_line())
}

/// How many keys [`MapRef::get_many`] issues the bucket lines of before it reads any:
/// enough misses in flight to cover a trip to memory, no more than a core tracks at once.
pub const BATCH_AHEAD: usize = 16;

/// Lines of one chain [`MapRef::refresh`] drops under one fence; a longer chain is read
/// again from memory whole.
const REFRESH_LINES: usize = 6;

/// The bucket count a header line gives, once its format is that of `K -> V`.
#[inline(always)]
pub(super) fn buckets_of<K: Stored, V: Stored>(
    header: &BucketLine,
) -> Result<usize, CollectionError> {
    let buckets = header.0[HEADER_BUCKETS];
    if header.0[HEADER_LAYOUT] != ARRAY_LAYOUT {
        return Err(corrupt(
            "the map's bucket array was laid out by another version of bi",
        ));
    }
    if header.0[HEADER_FORMAT] != code::<K, V>() {
        return Err(corrupt(
            "the map was built with key and value types of other sizes",
        ));
    }
    if buckets == 0 || buckets as usize >= lines::MAX_LINES {
        return Err(corrupt(
            "a bucket array with no bucket or more than a table may have",
        ));
    }
    Ok(buckets as usize)
}

impl<'r, K: Stored + Eq + Hash, V: Stored, M: MemView> MapRef<'r, K, V, M> {
    /// The guard of this section.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// let m = r.enter();
    /// // The guard reads anything else under the same section: here the map's root slot.
    /// let root = m.guard().slot_word(map.slot(), bi_core::runtime::Via::Fresh).unwrap();
    /// assert_ne!(root, 0); // the write handle published the bucket array
    /// ```
    pub fn guard(&self) -> &BiGuard<'r, M> {
        &self.guard
    }

    /// The value of `key`, as this node's cache holds the map: a hit and a miss alike are
    /// the answer of a version at most one staleness bound old (the node's pass period,
    /// plus the runtime's skew allowance), and this process's own writes are read at once
    /// (a writer's lines are in its node's cache; a shared handle refreshes a key after
    /// each write it sends to another process).
    ///
    /// It reads the partition's root slot, the array's header line and the key's bucket
    /// line through this node's cache, with no cache operation and no fence: for keys and
    /// values that fit a line together, the bucket line holds the value itself. Only a
    /// stale link (the writer replaced the array, or a linked pair, since this node's
    /// copy was fetched) sends the search to memory. [`get_fresh`](Self::get_fresh) also
    /// finds a key inserted since this node's last pass.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.enter().get(&9).unwrap(), None);
    /// w.insert(9, 90).unwrap();
    /// assert_eq!(r.enter().get(&9).unwrap(), None); // node 1 has not passed yet
    /// s.quiesce_all().unwrap();
    /// assert_eq!(r.enter().get(&9).unwrap(), Some(90));
    /// ```
    #[inline]
    pub fn get<Q>(&self, key: &Q) -> Result<Option<V>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + Hash + ?Sized,
    {
        let h = key_hash(key);
        let slot = self.slot_of(h);
        self.guard.bounded(|entry| self.search(slot, h, key, entry))
    }

    /// The value of `key`, finding every insertion published before the call: a miss
    /// through the cache is checked again from memory (the root slot, header and bucket
    /// lines invalidated and read again: lazy invalidation, [`BiGuard::lazy`]). A hit
    /// costs what [`get`](Self::get)'s does; a miss three reads from memory more.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// let m = r.enter();
    /// assert_eq!(m.get_fresh(&9).unwrap(), None);
    /// w.insert(9, 90).unwrap();
    /// assert_eq!(m.get_fresh(&9).unwrap(), Some(90)); // the miss re-read the lines from memory
    /// ```
    #[inline]
    pub fn get_fresh<Q>(&self, key: &Q) -> Result<Option<V>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + Hash + ?Sized,
    {
        let h = key_hash(key);
        let slot = self.slot_of(h);
        // Set once a search missed: with `Fault::LazyMap` the miss is trusted as is.
        let mut missed = false;
        self.guard.lazy(|entry| {
            if missed && self.guard.faults().has(Fault::LazyMap) {
                return Ok(Search::Missing);
            }
            let found = self.search(slot, h, key, entry)?;
            missed = matches!(found, Search::Missing);
            Ok(found)
        })
    }

    /// The values of `keys`, in order, into `out` (cleared first), each read as
    /// [`get`](Self::get) reads it. Before it reads any key of a group of
    /// [`BATCH_AHEAD`], it asks for all of their bucket lines (a software prefetch), so
    /// their trips to memory overlap instead of following one another: where nearly
    /// every bucket line misses in the cache (a large map, or memory far away, as on a
    /// CXL pool), a batch costs a fraction of a loop of `get`s per key.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// for k in 0..100 {
    ///     w.insert(k, k * 2).unwrap();
    /// }
    /// let r = map.read_handle(&s.nodes[0]).unwrap();
    /// let mut out = Vec::new();
    /// r.enter().get_many(&[3, 1000, 99], &mut out).unwrap();
    /// assert_eq!(out, [Some(6), None, Some(198)]);
    /// ```
    pub fn get_many<Q>(&self, keys: &[Q], out: &mut Vec<Option<V>>) -> Result<(), CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + Hash,
    {
        out.clear();
        out.reserve(keys.len());
        for group in keys.chunks(BATCH_AHEAD) {
            let mut hashes = [0u64; BATCH_AHEAD];
            for (h, key) in hashes.iter_mut().zip(group) {
                *h = key_hash(key);
                self.prefetch_bucket(*h)?;
            }
            for (key, &h) in group.iter().zip(&hashes) {
                let slot = self.slot_of(h);
                out.push(
                    self.guard
                        .bounded(|entry| self.search(slot, h, key, entry))?,
                );
            }
        }
        Ok(())
    }

    /// Drops this node's copies of the path to `key` (the root slot, the bucket's tag
    /// line and the lines of the key's chain as this node caches them) under one fence, so
    /// that its next read of the key comes from memory as it is now
    /// ([`Refresh`](crate::Refresh)). Lines the chain gained since (a new overflow line,
    /// a new array) are new memory, which no stale copy can pass for: their stamps say so.
    pub(crate) fn refresh<Q>(&self, key: &Q) -> Result<(), CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + Hash + ?Sized,
    {
        let h = key_hash(key);
        let slot = self.slot_of(h);
        let g = &self.guard;
        // The array's header is written once, before the array is published: a cached
        // copy of it is never older than the array the root slot names.
        let mut path = [slot; 2 + REFRESH_LINES];
        let mut len = 1;
        if let Some((Some(array), buckets)) = self.array(slot, Via::Cached)? {
            let b = bucket_of(h, buckets);
            if !g.faults().has(Fault::TagPath) {
                path[len] = g
                    .line(array, tag_line::<K::Word, V::Word>(buckets, b))?
                    .offset();
                len += 1;
            }
            let mut line = g.line(array, 1 + b)?;
            loop {
                if len == path.len() {
                    // A chain longer than any map keeps: read it all from memory instead.
                    g.drop_lines(path)?;
                    return g.fresh(|entry| self.search(slot, h, key, entry)).map(drop);
                }
                path[len] = line.offset();
                len += 1;
                match g.fetch_via(Via::Cached, line, |l| l.next())? {
                    Fetch::Value(next) if !next.is_null() => line = g.line(next, 0)?,
                    _ => break,
                }
            }
        }
        Ok(g.drop_lines(path[..len].iter().copied())?)
    }

    /// The root slot of the partition of hash `h`.
    #[inline(always)]
    fn slot_of(&self, h: u64) -> usize {
        self.map
            .partition_slot(partition_of(h, self.map.partitions()))
    }

    /// Asks for the bucket line of hash `h` in the array this node's cache holds.
    #[inline(always)]
    fn prefetch_bucket(&self, h: u64) -> Result<(), CollectionError> {
        let slot = self.slot_of(h);
        if let Some((Some(array), buckets)) = self.array(slot, Via::Cached)? {
            let b = bucket_of(h, buckets);
            let g = &self.guard;
            g.prefetch(g.line(array, tag_line::<K::Word, V::Word>(buckets, b))?);
            g.prefetch(g.line(array, 1 + b)?);
        }
        Ok(())
    }

    /// One search for `key` from the partition's root slot read through `entry`.
    #[inline(always)]
    fn search<Q: Query<K> + ?Sized>(
        &self,
        slot: usize,
        h: u64,
        key: &Q,
        entry: Via,
    ) -> Result<Search<V>, CollectionError> {
        let g = &self.guard;
        let Some((array, buckets)) = self.array(slot, entry)? else {
            return Ok(Search::Missing);
        };
        let Some(array) = array else {
            return Ok(Search::Stale);
        };
        let b = bucket_of(h, buckets);
        let mut line = g.line(array, 1 + b)?;
        // The bucket's tags first: their line is dense and mostly cached, and most misses
        // end there. It is on the key's path like the bucket line: read through `entry`.
        // The bucket line is asked for first, so that a hit's two reads overlap.
        g.prefetch(line);
        let tags = g.line(array, tag_line::<K::Word, V::Word>(buckets, b))?;
        let tags_entry = match g.faults().has(Fault::TagPath) {
            true => Via::Cached,
            false => entry,
        };
        let tag = Group::tag::<K::Word, V::Word>(h);
        match g.fetch_via(tags_entry, tags, |l| {
            Group::of::<K::Word, V::Word>(l, b).may_hold::<K::Word, V::Word>(tag)
        })? {
            Fetch::Value(true) => {}
            Fetch::Value(false) => return Ok(Search::Missing),
            Fetch::Null | Fetch::Stale => return Ok(Search::Stale),
        }
        // The chain, bucket line first. Its lines read through the cache may be versions
        // of different moments; a miss across them is still the answer of a moment
        // between them, since a key never changes line while it stays present (the writer
        // keeps a removed key's entry for it through the batch). The walk stops at lines
        // with candidates for a linked key; the count bounds a cycle of such lines.
        for _ in 0..MAX_WALK {
            let probed = g.walk_via(entry, entry, line, |l, _| probe::<K, V, Q>(l, key, h, g))?;
            let (pairs, next) = match probed {
                Search::Found(Ok(Probed::Found(v))) => return answer(V::from_word(&v, g)),
                Search::Found(Ok(Probed::Candidates(pairs, next))) => (pairs, next),
                Search::Found(Err(e)) => return answer(Err(*e)),
                Search::Missing => return Ok(Search::Missing),
                Search::Stale => return Ok(Search::Stale),
            };
            for raw in pairs.into_iter().filter(|&r| r != 0) {
                let pair = Link::<Pair<K::Word, V::Word>>::from_raw(raw);
                let hit = g.fetch_via(entry, pair, |p| {
                    let k = p.key;
                    Ok(key.matches(&k, g)?.then_some(p.value))
                })?;
                match hit {
                    Fetch::Value(Ok(Some(v))) => return answer(V::from_word(&v, g)),
                    Fetch::Value(Ok(None)) => {}
                    Fetch::Value(Err(e)) => return answer(Err(e)),
                    Fetch::Null | Fetch::Stale => return Ok(Search::Stale),
                }
            }
            if next.is_null() {
                return Ok(Search::Missing);
            }
            line = next.first_line();
        }
        Err(BiError::LinkCycle {
            offset: line.offset(),
        }
        .into())
    }

    /// Whether `key` is present.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// w.insert(9, 90).unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// let m = r.enter();
    /// assert!(m.contains_key(&9).unwrap());
    /// assert!(!m.contains_key(&10).unwrap());
    /// ```
    pub fn contains_key<Q>(&self, key: &Q) -> Result<bool, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + Hash + ?Sized,
    {
        Ok(self.get(key)?.is_some())
    }

    /// The array in the partition's root slot and its bucket count, read through `entry`:
    /// `None` for an empty slot, `Some((None, _))` when the array does not validate. The
    /// header is read only for an array this handle has not validated before.
    #[inline(always)]
    fn array(
        &self,
        slot: usize,
        entry: Via,
    ) -> Result<Option<(Option<LineLink>, usize)>, CollectionError> {
        let g = &self.guard;
        let raw = g.slot_word(slot, entry)?;
        let array = LineLink::from_raw(raw);
        if array.is_null() {
            return Ok(None);
        }
        let (known, buckets) = self.known.get();
        if known == raw {
            return Ok(Some((Some(array), buckets)));
        }
        let header = match g.fetch_via(entry, g.line(array, 0)?, |l| *l)? {
            Fetch::Value(h) => h,
            Fetch::Null | Fetch::Stale => return Ok(Some((None, 0))),
        };
        let buckets = buckets_of::<K, V>(&header)?;
        self.known.set((raw, buckets));
        Ok(Some((Some(array), buckets)))
    }

    /// Number of keys, as published: each partition's count is one line (its array's
    /// counters), so it is the count of one published version of the partition (between
    /// passes possibly an older one, by the runtime's staleness bound).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// for k in 0..100 {
    ///     w.insert(k, k).unwrap(); // grows the table several times
    /// }
    /// w.remove(&0).unwrap();
    /// s.quiesce_all().unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.enter().len().unwrap(), 99);
    /// ```
    pub fn len(&self) -> Result<usize, CollectionError> {
        Ok(self.counters_total(COUNTERS_LEN)? as usize)
    }

    /// How many times a writer of the map needed a larger table and the heap could not
    /// hold one, since the map was made (summed over partitions, each as published).
    /// The map stays correct when a grow fails, but its chains grow longer and its
    /// lookups slower: a count above zero says the pool is too small for the map (see
    /// the map's [trade-offs](super#trade-offs) for what a key takes).
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 1).unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.enter().failed_grows().unwrap(), 0);
    /// ```
    pub fn failed_grows(&self) -> Result<u64, CollectionError> {
        self.counters_total(COUNTERS_FAILED_GROWS)
    }

    /// The sum over partitions of word `word` of each partition's counters line.
    fn counters_total(&self, word: usize) -> Result<u64, CollectionError> {
        let mut total = 0u64;
        for p in 0..self.map.partitions() {
            let slot = self.map.partition_slot(p);
            let value = self.guard.lazy(|entry| {
                let (array, buckets) = match self.array(slot, entry)? {
                    None => return Ok(Search::Found(0)),
                    Some((None, _)) => return Ok(Search::Stale),
                    Some((Some(array), buckets)) => (array, buckets),
                };
                let counters = self.guard.line(array, counters_line(buckets))?;
                Ok::<_, CollectionError>(match self.guard.fetch_via(entry, counters, |l| *l)? {
                    Fetch::Value(c) => Search::Found(c.0[word]),
                    Fetch::Null | Fetch::Stale => Search::Stale,
                })
            })?;
            total = total.wrapping_add(value.unwrap_or(0));
        }
        Ok(total)
    }

    /// Whether the map has no key.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u64, u64>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// assert!(r.enter().is_empty().unwrap());
    /// w.insert(1, 1).unwrap();
    /// s.quiesce_all().unwrap();
    /// assert!(!r.enter().is_empty().unwrap());
    /// ```
    pub fn is_empty(&self) -> Result<bool, CollectionError> {
        Ok(self.len()? == 0)
    }

    /// Every entry, partition by partition, each partition a **snapshot**: the entries
    /// of one version its writer published, read from memory (see
    /// [`snapshot`](super::snapshot) for how, and what it costs). A partition its writer
    /// commits to during every attempt is [`CollectionError::Contended`]; then
    /// [`iter_live`](Self::iter_live) reads key by key instead. A map of several
    /// partitions (several writers) yields one snapshot of each, taken one after
    /// another.
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
            live: false,
        }
    }

    /// Every entry, partition by partition, through this node's cache and without
    /// waiting for a quiet moment: each key appears once, with a value it had at some
    /// moment since this node's last pass, but two keys may come from different versions
    /// (a key the writer inserted while the partition was read may show while an older
    /// one it removed still does). Each partition is read whole from one bucket array
    /// before its entries are yielded: if a line turns out stale (the writer replaced
    /// the array meanwhile, or a chain's overflow line), the partition is read again
    /// from memory.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let map = BiHashMap::<u32, u32>::at(s.slot(0));
    /// let mut w = map.write_handle(s.writer(0)).unwrap();
    /// for k in 0..20 {
    ///     w.insert(k, k).unwrap();
    /// }
    /// s.quiesce_all().unwrap();
    /// let r = map.read_handle(&s.nodes[1]).unwrap();
    /// let m = r.enter();
    /// assert_eq!(m.iter_live().count(), 20);
    /// ```
    pub fn iter_live(&self) -> Iter<'_, 'r, K, V, M> {
        Iter {
            live: true,
            ..self.iter()
        }
    }
}

impl<K: Stored + Eq + Hash, V: Stored, M: MemView> MapRef<'_, K, V, M> {
    /// Hands every entry of the line `l` to `each`, following linked pairs through
    /// `entry`; `false` if a pair or a byte string was stale.
    pub(super) fn line_entries(
        &self,
        l: &BucketLine,
        entry: Via,
        mut each: impl FnMut(K, V),
    ) -> Result<bool, CollectionError> {
        let g = &self.guard;
        for j in l.used_entries::<K::Word, V::Word>() {
            let (k, v) = if Words::<K, V>::INLINE {
                (l.key::<K::Word, V::Word>(j), l.value::<K::Word, V::Word>(j))
            } else {
                let (_, pair) = l.linked::<K::Word, V::Word>(j);
                match g.fetch_via(entry, pair, |p| (p.key, p.value))? {
                    Fetch::Value(kv) => kv,
                    Fetch::Null | Fetch::Stale => return Ok(false),
                }
            };
            let decoded = K::from_word(&k, g).and_then(|k| Ok((k, V::from_word(&v, g)?)));
            match unless_stale(decoded)? {
                Some((k, v)) => each(k, v),
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Reads every entry of partition `p` into `out` from one bucket array: through the
    /// cache first, and again from memory when a line turns out stale, by
    /// [`BiGuard::lazy`].
    fn read_partition(&self, p: usize, out: &mut Vec<(K, V)>) -> Result<(), CollectionError> {
        let slot = self.map.partition_slot(p);
        let entries = RefCell::new(out);
        let read = self
            .guard
            .lazy(|entry| -> Result<Search<()>, CollectionError> {
                entries.borrow_mut().clear();
                let Some((array, buckets)) = self.array(slot, entry)? else {
                    return Ok(Search::Found(()));
                };
                let Some(array) = array else {
                    return Ok(Search::Stale);
                };
                for b in 0..buckets {
                    let mut out = entries.borrow_mut();
                    if !self.read_chain(array, b, entry, &mut out)? {
                        return Ok(Search::Stale);
                    }
                }
                Ok(Search::Found(()))
            })?;
        read.ok_or_else(|| corrupt("a partition read reported a miss"))
    }

    /// Appends the entries of bucket `b`'s chain to `out`; `false` if a line was stale.
    /// A key the writer removed and put back further down the chain while the chain was
    /// read shows up twice: only its first sighting is kept.
    fn read_chain(
        &self,
        array: LineLink,
        b: usize,
        entry: Via,
        out: &mut Vec<(K, V)>,
    ) -> Result<bool, CollectionError> {
        let from = out.len();
        self.walk_chain(array, b, entry, entry, |l, _| {
            self.line_entries(l, entry, |k, v| {
                if !out[from..].iter().any(|(seen, _)| *seen == k) {
                    out.push((k, v));
                }
            })
        })
    }

    /// Hands each line of bucket `b`'s chain to `each` with the stamp it validated under,
    /// the bucket's line read through `first` and overflow lines through `rest`; `false`
    /// if a line was stale or `each` said so.
    pub(super) fn walk_chain(
        &self,
        array: LineLink,
        b: usize,
        first: Via,
        rest: Via,
        mut each: impl FnMut(&BucketLine, Stamp) -> Result<bool, CollectionError>,
    ) -> Result<bool, CollectionError> {
        let g = &self.guard;
        // `each` stops the walk by answering.
        let walked = g.walk_via(first, rest, g.line(array, 1 + b)?, |l, stamp| {
            match each(l, stamp) {
                Ok(true) => Step::Next(l.next().first_line()),
                Ok(false) => Step::Found(Ok(())),
                Err(e) => Step::Found(Err(e)),
            }
        })?;
        match walked {
            Search::Missing => Ok(true),
            Search::Found(r) => r.map(|()| false),
            Search::Stale => Ok(false),
        }
    }
}

/// Iterator over a map's entries under one section ([`MapRef::iter`]); yields an error
/// (and then ends) if the structure cannot be read.
///
/// ```
/// use bi_collections::map::BiHashMap;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 0);
/// let map = BiHashMap::<u64, u64>::at(s.slot(0));
/// let mut w = map.write_handle(s.writer(0)).unwrap();
/// w.insert(1, 10).unwrap();
/// w.insert(2, 20).unwrap();
/// s.quiesce_all().unwrap();
/// let r = map.read_handle(&s.nodes[1]).unwrap();
/// let m = r.enter();
/// let sum: u64 = m.iter().map(|e| e.unwrap().1).sum();
/// assert_eq!(sum, 30);
/// ```
pub struct Iter<'a, 'r, K, V, M: MemView> {
    map: &'a MapRef<'r, K, V, M>,
    partition: usize,
    buffer: Vec<(K, V)>,
    done: bool,
    /// Key by key ([`MapRef::iter_live`]) rather than snapshots.
    live: bool,
}

impl<K, V, M: MemView> fmt::Debug for Iter<'_, '_, K, V, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Iter")
            .field("partition", &self.partition)
            .finish_non_exhaustive()
    }
}

impl<'a, 'r, K: Stored + Eq + Hash, V: Stored, M: MemView> Iterator for Iter<'a, 'r, K, V, M> {
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
            let read = match self.live {
                true => self.map.read_partition(p, &mut self.buffer),
                false => self.map.snapshot_partition(p, &mut self.buffer),
            };
            if let Err(e) = read {
                self.buffer.clear();
                self.done = true;
                return Some(Err(e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header of another layout, another entry format, no bucket, or more buckets than
    /// a table may have is corrupt: the map refuses it instead of reading lines past its
    /// array or decoding entries of another size.
    #[test]
    fn headers_of_another_layout_format_or_bucket_count_are_refused() {
        let good = BucketLine::header(16, code::<u64, u64>());
        assert_eq!(buckets_of::<u64, u64>(&good).unwrap(), 16);
        let largest = BucketLine::header(lines::MAX_LINES - 1, code::<u64, u64>());
        assert_eq!(
            buckets_of::<u64, u64>(&largest).unwrap(),
            lines::MAX_LINES - 1
        );
        let bad = [
            (HEADER_BUCKETS, 0),
            (HEADER_BUCKETS, lines::MAX_LINES as u64),
            (HEADER_BUCKETS, u64::MAX),
            (HEADER_LAYOUT, ARRAY_LAYOUT ^ 1),
            (HEADER_FORMAT, code::<u64, [u64; 2]>()),
        ];
        for (word, value) in bad {
            let mut header = good;
            header.0[word] = value;
            assert!(
                matches!(
                    buckets_of::<u64, u64>(&header),
                    Err(CollectionError::Corrupt { .. })
                ),
                "word {word} = {value:#x}"
            );
        }
    }
}
