//! The reader side: a registered reader per thread, views under one guard.

use super::algo::{self, NodeSource, Parts};
use super::node::Node;
use super::{BiTree, NodeOf};
use crate::CollectionError;
use crate::error::StepAnswer;
use crate::stored::{Query, Stored};
use bi_core::mem::MemView;
use bi_core::runtime::walk::Step;
use bi_core::runtime::{BiError, BiGuard, Fault, Fetch, Fetcher, Link, Reader, Search};
use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::marker::PhantomData;
use std::ops::RangeBounds;

fn is_stale(e: &CollectionError) -> bool {
    matches!(e, CollectionError::Runtime(BiError::StaleLink { .. }))
}

/// Nodes read through a guard: each read validates the node's generation in every line.
struct GuardSource<'a, 'r, K, V, M: MemView> {
    guard: &'a BiGuard<'r, M>,
    reads: Fetcher<'a, 'r, M>,
    _t: PhantomData<fn() -> (K, V)>,
}

impl<K: Stored + Ord, V: Stored, M: MemView> NodeSource<K::Word, V::Word>
    for GuardSource<'_, '_, K, V, M>
{
    type Ref = u64;
    type Error = CollectionError;

    fn null(&self) -> u64 {
        0
    }

    #[inline(always)]
    fn read(&self, r: u64) -> Result<Parts<K::Word, V::Word, u64>, CollectionError> {
        let link = Link::<NodeOf<K, V>>::from_raw(r);
        match self.reads.fetch_with(link, Node::parts)? {
            Fetch::Value(parts) => Ok(parts),
            Fetch::Null => Err(CollectionError::Corrupt {
                reason: "a null link where a node was expected",
            }),
            Fetch::Stale => Err(BiError::StaleLink {
                offset: link.offset(),
            }
            .into()),
        }
    }

    fn order(&self, a: &K::Word, b: &K::Word) -> Result<Ordering, CollectionError> {
        Ok(K::from_word(a, self.guard)?.cmp(&K::from_word(b, self.guard)?))
    }
}

impl<K: Stored + Ord, V: Stored, M: MemView> GuardSource<'_, '_, K, V, M> {
    /// The entry a node's words hold.
    fn entry(&self, (k, v): (K::Word, V::Word)) -> Result<(K, V), CollectionError> {
        Ok((K::from_word(&k, self.guard)?, V::from_word(&v, self.guard)?))
    }
}

/// A reader of a [`BiTree`] on one node: a registered runtime [`Reader`] (one per thread;
/// it is `Send`, not `Sync`).
///
/// ```
/// use bi_collections::tree::BiTree;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 4);
/// let tree = BiTree::<u32, u32>::at(s.slot(0));
/// let mut w = tree.write_handle(s.writer(0)).unwrap();
/// for k in 0..10 {
///     w.insert(k, k * 10).unwrap();
/// }
/// let r = tree.read_handle(&s.nodes[1]).unwrap();
/// // Node 1 read nothing of the tree before: its first lookup reads memory.
/// assert_eq!(r.get(&3).unwrap(), Some(30));
/// s.quiesce_all().unwrap();
/// let view = r.enter();
/// assert_eq!(view.len().unwrap(), 10);
/// assert_eq!(view.range(2..5).unwrap(), vec![(2, 20), (3, 30), (4, 40)]);
/// assert_eq!(view.first().unwrap(), Some((0, 0)));
/// ```
pub struct TreeReadHandle<K, V, M: MemView> {
    reader: Reader<M>,
    tree: BiTree<K, V>,
}

/// The entries in key order, as this node reads them (one version of the tree).
///
/// ```
/// use bi_collections::tree::BiTree;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 0);
/// let tree = BiTree::<u32, u32>::at(s.slot(0));
/// tree.write_handle(s.writer(0)).unwrap().extend([(2, 20), (1, 10)]).unwrap();
/// let r = tree.read_handle(&s.nodes[1]).unwrap();
/// assert_eq!(format!("{r:?}"), "{1: 10, 2: 20}");
/// ```
impl<K, V, M> fmt::Debug for TreeReadHandle<K, V, M>
where
    K: Stored + Ord + fmt::Debug,
    V: Stored + fmt::Debug,
    M: MemView,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::show::entries(f, self.enter().iter())
    }
}

impl<K: Stored + Ord, V: Stored, M: MemView> TreeReadHandle<K, V, M> {
    pub(crate) fn new(reader: Reader<M>, tree: BiTree<K, V>) -> Self {
        TreeReadHandle { reader, tree }
    }

    /// Enters a read section: the returned view reads one consistent version of the tree
    /// per operation, and every node it reaches stays valid until the view is dropped.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 10).unwrap();
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// let view = r.enter();
    /// assert!(r.reader().is_active());
    /// assert_eq!(view.get(&1).unwrap(), Some(10));
    /// drop(view);
    /// assert!(!r.reader().is_active());
    /// ```
    #[inline]
    pub fn enter(&self) -> TreeRef<'_, K, V, M> {
        TreeRef {
            guard: self.reader.enter(),
            slot: self.tree.slot(),
            _t: PhantomData,
        }
    }

    /// The value of `key`, in a section of its own, as [`TreeRef::get`] reads it: a hit
    /// or a miss of the version this node's cache holds (at most one staleness bound
    /// old).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 10).unwrap();
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.get(&1).unwrap(), Some(10));
    /// w.insert(1, 11).unwrap();
    /// s.quiesce_all().unwrap(); // the reader's node passes: it sees the new value
    /// assert_eq!(r.get(&1).unwrap(), Some(11));
    /// ```
    pub fn get<Q>(&self, key: &Q) -> Result<Option<V>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + ?Sized,
    {
        self.enter().get(key)
    }

    /// The value of `key`, in a section of its own, finding every insertion published
    /// before the call ([`TreeRef::get_fresh`]).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.get_fresh(&3).unwrap(), None);
    /// w.insert(3, 30).unwrap();
    /// // Published before the lookup: the miss re-reads the root, so it is found.
    /// assert_eq!(r.get_fresh(&3).unwrap(), Some(30));
    /// ```
    pub fn get_fresh<Q>(&self, key: &Q) -> Result<Option<V>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + ?Sized,
    {
        self.enter().get_fresh(key)
    }

    /// Whether `key` is present, in a section of its own (as [`get`](Self::get) reads).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// assert!(!r.contains_key(&3).unwrap());
    /// w.insert(3, 30).unwrap();
    /// s.quiesce_all().unwrap(); // a miss may be stale until the reader's node passes
    /// assert!(r.contains_key(&3).unwrap());
    /// ```
    pub fn contains_key<Q>(&self, key: &Q) -> Result<bool, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + ?Sized,
    {
        self.enter().contains_key(key)
    }

    /// The number of entries of the version this node sees, in a section of its own.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// for k in 0..5 {
    ///     w.insert(k, k).unwrap();
    /// }
    /// s.quiesce_all().unwrap();
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.len().unwrap(), 5);
    /// ```
    pub fn len(&self) -> Result<usize, CollectionError> {
        self.enter().len()
    }

    /// Whether the version this node sees is empty.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// assert!(r.is_empty().unwrap());
    /// w.insert(1, 1).unwrap();
    /// s.quiesce_all().unwrap();
    /// assert!(!r.is_empty().unwrap());
    /// ```
    pub fn is_empty(&self) -> Result<bool, CollectionError> {
        Ok(self.len()? == 0)
    }

    /// The runtime reader.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// assert!(!r.reader().is_active());
    /// let _view = r.enter();
    /// assert!(r.reader().is_active());
    /// ```
    pub fn reader(&self) -> &Reader<M> {
        &self.reader
    }

    /// Gives the runtime reader back.
    #[cfg(test)]
    pub(crate) fn into_reader(self) -> Reader<M> {
        self.reader
    }
}

/// A view of a [`BiTree`] inside one read section (one [`BiGuard`]).
///
/// Between its node's quiescence passes a view may see an older version of the tree
/// (never a torn one: every version is a complete immutable tree), for hits and misses
/// alike ([`get`](Self::get)). [`get_fresh`](Self::get_fresh) re-reads the root slot
/// from memory on a miss and, if a newer root was published, searches it, so a key whose
/// insertion was published before the lookup began is always found.
///
/// ```
/// use bi_collections::tree::BiTree;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 0);
/// let tree = BiTree::<u32, u32>::at(s.slot(0));
/// let mut w = tree.write_handle(s.writer(0)).unwrap();
/// for k in [5, 1, 3] {
///     w.insert(k, k * 100).unwrap();
/// }
/// s.quiesce_all().unwrap();
/// let r = tree.read_handle(&s.nodes[1]).unwrap();
/// let view = r.enter(); // several reads under one guard
/// assert_eq!(view.get(&3).unwrap(), Some(300));
/// assert_eq!(view.iter().unwrap(), vec![(1, 100), (3, 300), (5, 500)]);
/// ```
pub struct TreeRef<'r, K, V, M: MemView> {
    guard: BiGuard<'r, M>,
    slot: usize,
    _t: PhantomData<fn() -> (K, V)>,
}

/// The entries, in order, as a map (`{k: v, ...}`), from one version of the tree; a
/// failed read shows as the error.
///
/// ```
/// use bi_collections::tree::BiTree;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(1, 0);
/// let tree = BiTree::<String, u32>::at(s.slot(0));
/// let mut w = tree.write_handle(s.writer(0)).unwrap();
/// w.extend([("b".to_string(), 2), ("a".to_string(), 1)]).unwrap();
/// let r = tree.read_handle(&s.nodes[0]).unwrap();
/// assert_eq!(format!("{:?}", r.enter()), r#"{"a": 1, "b": 2}"#);
/// ```
impl<K: Stored + Ord + fmt::Debug, V: Stored + fmt::Debug, M: MemView> fmt::Debug
    for TreeRef<'_, K, V, M>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.iter() {
            Ok(entries) => f.debug_map().entries(entries).finish(),
            Err(e) => write!(f, "<unreadable tree: {e}>"),
        }
    }
}

/// A node on a scan's path, and where it lies against the range.
type PathNode<K, V> = (
    Parts<<K as Stored>::Word, <V as Stored>::Word, u64>,
    algo::Place,
);

/// An ordered walk of a range of one version of a tree, one node at a time, without
/// collecting it first ([`TreeRef::scan`]). It keeps the path from the root to the next
/// entry (a few dozen nodes at most); every node it reads stays valid while the view it
/// borrows is alive. A failed read is the last item.
pub struct Scan<'a, 'r, K: Stored, V: Stored, M: MemView, Q: ?Sized, B> {
    view: &'a TreeRef<'r, K, V, M>,
    range: B,
    stack: Vec<PathNode<K, V>>,
    failed: bool,
    _q: PhantomData<fn(&Q)>,
}

impl<K: Stored, V: Stored, M: MemView, Q: ?Sized, B> fmt::Debug for Scan<'_, '_, K, V, M, Q, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scan")
            .field("depth", &self.stack.len())
            .finish_non_exhaustive()
    }
}

impl<K, V, M, Q, B> Scan<'_, '_, K, V, M, Q, B>
where
    K: Stored + Ord + Borrow<Q>,
    V: Stored,
    M: MemView,
    Q: Query<K> + ?Sized,
    B: RangeBounds<Q>,
{
    /// Pushes the path from `link` down to the smallest node of its subtree that may be
    /// in the range.
    fn descend(&mut self, mut link: u64) -> Result<(), CollectionError> {
        let src = self.view.source();
        let g = &self.view.guard;
        while link != 0 {
            let n = src.read(link)?;
            let at = algo::place(&self.range, &n.key, |b: &Q, k| b.order(k, g))?;
            let left = n.left;
            self.stack.push((n, at));
            if !at.after_start {
                break;
            }
            link = left;
        }
        Ok(())
    }

    fn step(&mut self) -> Result<Option<(K, V)>, CollectionError> {
        while let Some((n, at)) = self.stack.pop() {
            if at.before_end {
                self.descend(n.right)?;
            } else {
                // Every node still on the path is larger: past the range's end.
                self.stack.clear();
            }
            if at.inside {
                return self.view.source().entry((n.key, n.value)).map(Some);
            }
        }
        Ok(None)
    }
}

impl<K, V, M, Q, B> Iterator for Scan<'_, '_, K, V, M, Q, B>
where
    K: Stored + Ord + Borrow<Q>,
    V: Stored,
    M: MemView,
    Q: Query<K> + ?Sized,
    B: RangeBounds<Q>,
{
    type Item = Result<(K, V), CollectionError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.step().transpose();
        self.failed = matches!(item, Some(Err(_)));
        item
    }
}

impl<'r, K: Stored + Ord, V: Stored, M: MemView> TreeRef<'r, K, V, M> {
    /// The guard of this section.
    pub fn guard(&self) -> &BiGuard<'r, M> {
        &self.guard
    }

    /// Drops this node's copy of the root slot, so its next read names the version
    /// memory holds then ([`Refresh`](crate::Refresh)): nodes are never rewritten in
    /// place, so everything below a fresh root is that version.
    pub(crate) fn refresh_root(&self) -> Result<(), CollectionError> {
        Ok(self.guard.drop_lines([self.slot])?)
    }

    fn source(&self) -> GuardSource<'_, 'r, K, V, M> {
        GuardSource {
            guard: &self.guard,
            reads: self.guard.fetcher(),
            _t: PhantomData,
        }
    }

    /// One search for `key` in the version whose root link is `root`: one validated read
    /// per level, straight from the node's fields.
    ///
    /// A comparison that had to read a stored byte string and found it stale ends the
    /// walk with that error: the caller starts again from fresh entry points.
    #[inline(always)]
    fn search<Q: Query<K> + ?Sized>(
        &self,
        root: u64,
        key: &Q,
    ) -> Result<Search<StepAnswer<V::Word>>, BiError> {
        self.guard.walk(Link::<NodeOf<K, V>>::from_raw(root), |n| {
            match key.order(&n.key(), &self.guard) {
                Ok(Ordering::Equal) => Step::Found(Ok(n.value())),
                Ok(Ordering::Less) => Step::Next(Link::from_raw(n.left())),
                Ok(Ordering::Greater) => Step::Next(Link::from_raw(n.right())),
                Err(e) => Step::Found(Err(Box::new(e))),
            }
        })
    }

    /// Runs `f` on the version whose root link is in the slot (cached, then fresh from
    /// memory when `f` meets a stale link): lazy invalidation for whole-tree reads.
    fn with_root<T>(
        &self,
        f: impl Fn(&GuardSource<'_, 'r, K, V, M>, u64) -> Result<T, CollectionError>,
    ) -> Result<T, CollectionError> {
        let src = self.source();
        let found = self.guard.lazy(|entry| {
            let root = self.guard.slot_word(self.slot, entry)?;
            match f(&src, root) {
                Ok(v) => Ok(Search::Found(v)),
                Err(e) if is_stale(&e) => Ok(Search::Stale),
                Err(e) => Err(e),
            }
        })?;
        found.ok_or_else(|| CollectionError::Corrupt {
            reason: "a whole-tree read reported a miss",
        })
    }

    /// The value of `key` in the version of the tree this node's cache holds: a hit, or a
    /// miss, of that version, at most one staleness bound old (a key inserted on another
    /// node is found once this node has passed after the insertion). A miss costs what a
    /// hit costs: one walk, no cache operation. A stale link met on the way (a node
    /// retired since) sends the search to the root slot read from memory. For a miss
    /// checked against memory, [`get_fresh`](Self::get_fresh).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.enter().get(&8).unwrap(), None);
    /// w.insert(8, 80).unwrap();
    /// assert_eq!(r.enter().get(&8).unwrap(), None); // node 1 has not passed yet
    /// s.quiesce_all().unwrap();
    /// assert_eq!(r.enter().get(&8).unwrap(), Some(80));
    /// ```
    #[inline]
    pub fn get<Q>(&self, key: &Q) -> Result<Option<V>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + ?Sized,
    {
        // `move`: the search holds `key` itself, not a reference to it, so the walk's
        // comparisons load the key with no extra indirection.
        self.guard.bounded(move |entry| {
            let root = self.guard.slot_word(self.slot, entry)?;
            self.value_in(root, key)
        })
    }

    /// The value of `key`, finding every insertion published before the call: a miss
    /// through the cache re-reads the root slot from memory and, if a newer root is there,
    /// searches it ([`BiGuard::lazy`]). A hit costs what [`get`](Self::get)'s does; a
    /// miss a read of the root slot from memory and a second walk more.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// let view = r.enter();
    /// assert_eq!(view.get_fresh(&8).unwrap(), None);
    /// w.insert(8, 80).unwrap();
    /// // The miss re-reads the root from memory: the new key is found in the same view.
    /// assert_eq!(view.get_fresh(&8).unwrap(), Some(80));
    /// ```
    #[inline]
    pub fn get_fresh<Q>(&self, key: &Q) -> Result<Option<V>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + ?Sized,
    {
        // A root already searched without success names the same immutable version: it
        // need not be searched again.
        let mut missed = None;
        let missed = &mut missed;
        self.guard.lazy(move |entry| {
            // With `Fault::LazyTree` a miss in the cached version is trusted as is.
            if missed.is_some() && self.guard.faults().has(Fault::LazyTree) {
                return Ok(Search::Missing);
            }
            let root = self.guard.slot_word(self.slot, entry)?;
            if *missed == Some(root) {
                return Ok(Search::Missing);
            }
            let found = self.value_in(root, key)?;
            if matches!(found, Search::Missing) {
                *missed = Some(root);
            }
            Ok(found)
        })
    }

    /// One search for `key`'s value in the version whose root link is `root`.
    #[inline(always)]
    fn value_in<Q>(&self, root: u64, key: &Q) -> Result<Search<V>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + ?Sized,
    {
        Ok(match self.search(root, key)? {
            Search::Found(word) => match word
                .map_err(|e| *e)
                .and_then(|w| V::from_word(&w, &self.guard))
            {
                Ok(v) => Search::Found(v),
                Err(e) if is_stale(&e) => Search::Stale,
                Err(e) => return Err(e),
            },
            Search::Missing => Search::Missing,
            Search::Stale => Search::Stale,
        })
    }

    /// Whether `key` is present (see [`get`](Self::get)).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.insert(2, 20).unwrap();
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// let view = r.enter();
    /// assert!(view.contains_key(&2).unwrap());
    /// assert!(!view.contains_key(&3).unwrap());
    /// ```
    pub fn contains_key<Q>(&self, key: &Q) -> Result<bool, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + ?Sized,
    {
        Ok(self.get(key)?.is_some())
    }

    /// The number of entries of the version this node sees (the root's subtree size).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// for k in 0..7 {
    ///     w.insert(k, 0).unwrap();
    /// }
    /// w.remove(&0).unwrap();
    /// s.quiesce_all().unwrap();
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.enter().len().unwrap(), 6);
    /// ```
    pub fn len(&self) -> Result<usize, CollectionError> {
        self.with_root(|src, root| {
            if root == 0 {
                Ok(0)
            } else {
                Ok(src.read(root)?.size)
            }
        })
    }

    /// Whether the version this node sees is empty.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// assert!(r.enter().is_empty().unwrap());
    /// w.insert(1, 1).unwrap();
    /// w.remove(&1).unwrap();
    /// s.quiesce_all().unwrap();
    /// assert!(r.enter().is_empty().unwrap());
    /// ```
    pub fn is_empty(&self) -> Result<bool, CollectionError> {
        Ok(self.len()? == 0)
    }

    /// The entries of `range` in order, one at a time (see [`Scan`]), from the version
    /// whose root memory holds when the scan begins (the root is read from memory: a
    /// scan never starts from an older version than the last publication before it).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    /// use std::ops::Bound::{Excluded, Included};
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<String, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.extend(["apple", "banana", "cherry", "date"].map(|k| (k.to_string(), k.len() as u32)))
    ///     .unwrap();
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// let view = r.enter();
    /// let mut scan = view.scan::<str, _>((Included("b"), Excluded("d"))).unwrap();
    /// assert_eq!(scan.next().unwrap().unwrap(), ("banana".to_string(), 6));
    /// assert_eq!(scan.next().unwrap().unwrap(), ("cherry".to_string(), 6));
    /// assert!(scan.next().is_none());
    /// ```
    pub fn scan<Q, B>(&self, range: B) -> Result<Scan<'_, 'r, K, V, M, Q, B>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + ?Sized,
        B: RangeBounds<Q>,
    {
        let root = self
            .guard
            .slot_word(self.slot, bi_core::runtime::Via::Fresh)?;
        let mut scan = Scan {
            view: self,
            range,
            stack: Vec::new(),
            failed: false,
            _q: PhantomData,
        };
        scan.descend(root)?;
        Ok(scan)
    }

    /// The entries in `range`, in key order, from one version of the tree.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// for k in 0..10 {
    ///     w.insert(k, k * k).unwrap();
    /// }
    /// s.quiesce_all().unwrap(); // the reader's node sees the last publication
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// let view = r.enter();
    /// assert_eq!(view.range(7..).unwrap(), vec![(7, 49), (8, 64), (9, 81)]);
    /// assert_eq!(view.range(..=1).unwrap(), vec![(0, 0), (1, 1)]);
    /// assert!(view.range(20..30).unwrap().is_empty());
    /// ```
    pub fn range<Q, B>(&self, range: B) -> Result<Vec<(K, V)>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + ?Sized,
        B: RangeBounds<Q>,
    {
        let g = &self.guard;
        self.entries(|stored| algo::place(&range, stored, |b: &Q, k| b.order(k, g)))
    }

    /// The entries a range `place`s inside, in order, from one version of the tree.
    fn entries(
        &self,
        place: impl Fn(&K::Word) -> Result<algo::Place, CollectionError>,
    ) -> Result<Vec<(K, V)>, CollectionError> {
        self.with_root(|src, root| {
            let mut out = Vec::new();
            algo::collect_range(src, root, &place, |k, v| {
                out.push(src.entry((k, v))?);
                Ok(())
            })?;
            Ok(out)
        })
    }

    /// Every entry, in key order, from one version of the tree.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// for k in [3, 1, 2] {
    ///     w.insert(k, k + 10).unwrap();
    /// }
    /// s.quiesce_all().unwrap(); // the reader's node sees the last publication
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.enter().iter().unwrap(), vec![(1, 11), (2, 12), (3, 13)]);
    /// ```
    pub fn iter(&self) -> Result<Vec<(K, V)>, CollectionError> {
        self.entries(|_| Ok(algo::Place::ALL))
    }

    /// The entry with the smallest key.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.enter().first().unwrap(), None);
    /// for k in [9, 4, 6] {
    ///     w.insert(k, k).unwrap();
    /// }
    /// s.quiesce_all().unwrap(); // the reader's node sees the last publication
    /// assert_eq!(r.enter().first().unwrap(), Some((4, 4)));
    /// ```
    pub fn first(&self) -> Result<Option<(K, V)>, CollectionError> {
        self.with_root(|src, root| {
            algo::extreme(src, root, true)?
                .map(|e| src.entry(e))
                .transpose()
        })
    }

    /// The entry with the largest key.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// for k in [9, 4, 6] {
    ///     w.insert(k, k * 2).unwrap();
    /// }
    /// s.quiesce_all().unwrap(); // the reader's node sees the last publication
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!(r.enter().last().unwrap(), Some((9, 18)));
    /// ```
    pub fn last(&self) -> Result<Option<(K, V)>, CollectionError> {
        self.with_root(|src, root| {
            algo::extreme(src, root, false)?
                .map(|e| src.entry(e))
                .transpose()
        })
    }
}

/// Examples of the crate-private items above, as tests.
#[cfg(test)]
mod private_examples {
    #[test]
    fn into_reader_example() {
        use crate::tree::BiTree;
        use bi_core::runtime::testing::Setup;

        let s = Setup::new(2, 0);
        let tree = BiTree::<u32, u32>::at(s.slot(0));
        let _w = tree.write_handle(s.writer(0)).unwrap();
        let r = tree.read_handle(&s.nodes[1]).unwrap();
        let index = r.reader().index();
        let reader = r.into_reader(); // still registered: reuse it for other structures
        assert_eq!(reader.index(), index);
    }
}
