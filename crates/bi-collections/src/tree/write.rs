//! The writer's handle: path-copying updates, one publication per batch.

use super::algo::{self, Change, Edit, InvariantError, NodeSource, NodeStore, Parts};
use super::node::Node;
use super::recent::Recent;
use super::{BiTree, NodeOf};
use crate::CollectionError;
use crate::op::{ApplyBatch, BatchReport, Op};
use crate::stored::{Query, Stored};
use crate::strings::Strings;
use bi_core::heap::Heap;
use bi_core::mem::MemView;
use bi_core::runtime::{BiError, Link, ReclaimReport, Role, Writer};
use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::ops::RangeBounds;

/// The node storage of the writer: nodes are runtime objects, allocated and sealed by the
/// node's [`Writer`] and read back from its node's cache ([`Writer::read_own`]), or from
/// the writer's copies of the nodes it created lately ([`Recent`]).
struct WriterStore<K: Stored, V: Stored, M: MemView, H: Heap> {
    writer: Writer<M, H>,
    /// Nodes created and not destroyed or retired: the reachable ones, once a batch is
    /// published (checked by `check_invariants`).
    nodes: usize,
    /// Copies of the nodes it created lately, read instead of their lines.
    recent: Recent<K::Word, V::Word>,
    _types: std::marker::PhantomData<fn() -> (K, V)>,
}

impl<K: Stored + Ord, V: Stored, M: MemView, H: Heap> NodeSource<K::Word, V::Word>
    for WriterStore<K, V, M, H>
{
    type Ref = u64;
    type Error = CollectionError;

    fn null(&self) -> u64 {
        0
    }

    fn order(&self, a: &K::Word, b: &K::Word) -> Result<Ordering, CollectionError> {
        Ok(K::from_word(a, &self.writer)?.cmp(&K::from_word(b, &self.writer)?))
    }

    #[inline]
    fn read(&self, r: u64) -> Result<Parts<K::Word, V::Word, u64>, CollectionError> {
        if let Some(parts) = self.recent.get(r) {
            return Ok(parts);
        }
        let link = Link::<NodeOf<K, V>>::from_raw(r);
        Ok(self.writer.read_own_with(link, Node::parts)?)
    }
}

impl<K: Stored + Ord, V: Stored, M: MemView, H: Heap> NodeStore<K::Word, V::Word>
    for WriterStore<K, V, M, H>
{
    fn create(&mut self, p: Parts<K::Word, V::Word, u64>) -> Result<u64, CollectionError> {
        let node = Node::new(p.key, p.value, p.left, p.right, p.size as u64);
        let link = self.writer.alloc_sealed(node)?;
        self.nodes += 1;
        self.recent.keep(link.raw(), node.parts());
        Ok(link.raw())
    }

    fn destroy_unpublished(&mut self, r: u64) -> Result<(), CollectionError> {
        self.recent.forget(r);
        self.writer
            .discard_link(Link::<NodeOf<K, V>>::from_raw(r))?;
        self.nodes -= 1;
        Ok(())
    }
}

/// The single writer of a [`BiTree`]: owns the node's [`Writer`].
///
/// Every update copies the path from the root to the changed node (and the nodes a
/// rotation moves) into fresh objects, seals them (written back, no fence), publishes the
/// new root with one fence and one slot store, and retires the replaced nodes together.
/// [`apply_batch`](ApplyBatch::apply_batch) does the same for many operations at once:
/// nodes created and superseded within the batch are given back at once and never
/// published.
///
/// Reads on the writer's handle read the nodes from the writer's own node cache: exact,
/// since the writer wrote every node of its tree and never writes a published one again.
///
/// ```
/// use bi_collections::tree::BiTree;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 1);
/// let tree = BiTree::<u64, u64>::at(s.slot(0));
/// let mut w = tree.write_handle(s.writer(0)).unwrap();
/// assert_eq!(w.insert(7, 70).unwrap(), None);
/// assert_eq!(w.insert(7, 71).unwrap(), Some(70));
/// assert_eq!(w.get(&7), Some(71));
/// assert_eq!(w.remove(&7).unwrap(), Some(71));
/// assert!(w.is_empty());
/// w.check_invariants().unwrap();
/// ```
pub struct TreeWriteHandle<K: Stored + Ord, V: Stored, M: MemView, H: Heap> {
    store: WriterStore<K, V, M, H>,
    tree: BiTree<K, V>,
    root: u64,
    /// The batch bookkeeping, kept between batches so that an update allocates none.
    edit: Edit<u64>,
    /// The byte strings the batch wrote and dropped.
    strings: Strings,
    /// The writer role of a named tree, given up when the handle is dropped.
    role: Option<Role<M>>,
    /// A bound on every value's out-of-line bytes (`None` for an adopted tree), for
    /// [`ApplyBatch::longest_value`].
    longest_value: Option<usize>,
}

/// The entries in key order, as the writer last published them.
///
/// ```
/// use bi_collections::tree::BiTree;
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(1, 0);
/// let mut w = BiTree::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
/// w.extend([(2, 20), (1, 10)]).unwrap();
/// assert_eq!(format!("{w:?}"), "{1: 10, 2: 20}");
/// ```
impl<K, V, M, H> fmt::Debug for TreeWriteHandle<K, V, M, H>
where
    K: Stored + Ord + fmt::Debug,
    V: Stored + fmt::Debug,
    M: MemView,
    H: Heap,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::show::entries(f, self.iter())
    }
}

impl<K: Stored + Ord, V: Stored, M: MemView, H: Heap> TreeWriteHandle<K, V, M, H> {
    /// Publishes an empty tree in `tree`'s slot and takes `writer`. Whatever the slot held
    /// before is unlinked but not retired (its nodes are not known to this handle).
    pub(crate) fn create(tree: BiTree<K, V>, mut writer: Writer<M, H>) -> Result<Self, BiError> {
        writer.publish_link(tree.slot(), Link::<NodeOf<K, V>>::null())?;
        Ok(TreeWriteHandle {
            store: WriterStore {
                writer,
                nodes: 0,
                recent: Recent::default(),
                _types: std::marker::PhantomData,
            },
            tree,
            root: 0,
            edit: Edit::new(0),
            strings: Strings::default(),
            role: None,
            longest_value: Some(0),
        })
    }

    /// Takes `writer` over the tree already in `tree`'s slot, whose root is `root`: walks
    /// it, keeps its nodes live in the writer's heap and retires the rest of the arena
    /// until a grace period has passed ([`Writer::adopt`]). With `foreign`, the nodes were
    /// written through another node's cache, so this node's copy of the heap is dropped
    /// first.
    pub(crate) fn adopt(
        tree: BiTree<K, V>,
        mut writer: Writer<M, H>,
        root: u64,
        foreign: bool,
        role: Role<M>,
    ) -> Result<Self, CollectionError> {
        if foreign {
            writer.invalidate_heap()?;
        }
        let bytes = writer.object_bytes(size_of::<NodeOf<K, V>>())?;
        let most = writer.heap().stats().capacity / bytes.max(1);
        let (mut live, mut nodes) = (Vec::new(), 0usize);
        let mut todo = vec![root];
        while let Some(r) = todo.pop() {
            if r == 0 {
                continue;
            }
            let link = Link::<NodeOf<K, V>>::from_raw(r);
            let n = writer.read_own(link)?;
            live.push((link.offset(), bytes));
            nodes += 1;
            let owned = K::owned_bytes(&n.key()).into_iter();
            for string in owned.chain(V::owned_bytes(&n.value())) {
                live.push((string.offset(), writer.string_bytes(string)?));
            }
            if nodes > most {
                return Err(CollectionError::Corrupt {
                    reason: "the tree has more nodes than its arena holds (a cycle?)",
                });
            }
            todo.extend([n.left(), n.right()]);
        }
        writer.adopt(&mut live, &[tree.slot()])?;
        writer.set_adopting(false);
        let handle = TreeWriteHandle {
            store: WriterStore {
                writer,
                nodes,
                recent: Recent::default(),
                _types: std::marker::PhantomData,
            },
            tree,
            root,
            edit: Edit::new(root),
            strings: Strings::default(),
            role: Some(role),
            // What an earlier writer stored is not measured.
            longest_value: None,
        };
        handle
            .check_invariants()
            .map_err(|_| CollectionError::Corrupt {
                reason: "the adopted tree breaks the tree's invariants",
            })?;
        Ok(handle)
    }

    /// The handle of a writer that took the role: its take-over is over, so its waits for
    /// ring room are a write's again.
    pub(crate) fn with_role(mut self, role: Role<M>) -> Self {
        self.role = Some(role);
        self.store.writer.set_adopting(false);
        self
    }

    /// The tree this handle writes.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// assert_eq!(w.tree().slot(), tree.slot());
    /// ```
    pub fn tree(&self) -> BiTree<K, V> {
        self.tree
    }

    /// The node's writer (to allocate or publish other objects with it).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 1).unwrap();
    /// w.insert(1, 2).unwrap(); // replaces a node: the old one waits to be retired
    /// assert_eq!(w.writer().deferred(), 1);
    /// assert_eq!(w.writer().scope(), tree.scope());
    /// ```
    pub fn writer(&mut self) -> &mut Writer<M, H> {
        &mut self.store.writer
    }

    /// Gives the writer back. The published tree stays readable; its nodes are never
    /// retired (nothing remembers the root any more).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 10).unwrap();
    /// let writer = w.into_writer();
    /// assert_eq!(writer.scope(), tree.scope());
    /// // The published tree stays readable.
    /// let r = tree.read_handle(&s.nodes[0]).unwrap();
    /// assert_eq!(r.get(&1).unwrap(), Some(10));
    /// ```
    pub fn into_writer(self) -> Writer<M, H> {
        self.store.writer
    }

    /// Inserts or replaces; returns the previous value. Published before returning.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// assert_eq!(w.insert(3, 30).unwrap(), None);
    /// assert_eq!(w.insert(3, 31).unwrap(), Some(30));
    /// let r = tree.read_handle(&s.nodes[0]).unwrap();
    /// assert_eq!(r.get(&3).unwrap(), Some(31));
    /// ```
    pub fn insert(&mut self, key: K, value: V) -> Result<Option<V>, CollectionError> {
        self.single(|h, edit| h.stage_insert(edit, &key, &value))
    }

    /// Removes a key; returns its value. Published before returning.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.insert(3, 30).unwrap();
    /// assert_eq!(w.remove(&3).unwrap(), Some(30));
    /// assert_eq!(w.remove(&3).unwrap(), None); // absent keys are no error
    /// let r = tree.read_handle(&s.nodes[0]).unwrap();
    /// assert_eq!(r.get(&3).unwrap(), None);
    /// ```
    pub fn remove<Q>(&mut self, key: &Q) -> Result<Option<V>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + ?Sized,
    {
        self.single(|h, edit| h.stage_remove(edit, key))
    }

    /// Replaces the value of `key`, if present, with `f(value)`, published before it
    /// returns; returns the old value (`None`, and nothing written, if absent).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiTree::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 10).unwrap();
    /// assert_eq!(w.update(1, |v| v + 1).unwrap(), Some(10));
    /// assert_eq!(w.update(2, |v| v + 1).unwrap(), None); // absent: nothing written
    /// assert_eq!(w.get(&1), Some(11));
    /// assert_eq!(w.len(), 1);
    /// ```
    pub fn update(
        &mut self,
        key: K,
        f: impl FnOnce(&V) -> V,
    ) -> Result<Option<V>, CollectionError> {
        crate::entry::update(self, key, f)
    }

    /// The value of `key`, inserting `f()` first if it is absent.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiTree::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// assert_eq!(w.get_or_insert_with(3, || 30).unwrap(), 30);
    /// assert_eq!(w.get_or_insert_with(3, || 99).unwrap(), 30); // already there
    /// assert_eq!(w.get(&3), Some(30));
    /// ```
    pub fn get_or_insert_with(
        &mut self,
        key: K,
        f: impl FnOnce() -> V,
    ) -> Result<V, CollectionError> {
        crate::entry::get_or_insert_with(self, key, f)
    }

    /// Sets `key` to `f(current value)`: `Some` inserts or replaces, `None` removes.
    /// Returns the old value. The closure runs here, on the writer; other processes send
    /// [`Op`]s instead.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiTree::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// let count = |v: Option<u32>| Some(v.unwrap_or(0) + 1);
    /// assert_eq!(w.compute(7, count).unwrap(), None);
    /// assert_eq!(w.compute(7, count).unwrap(), Some(1));
    /// assert_eq!(w.compute(7, |_| None).unwrap(), Some(2)); // removes
    /// assert_eq!(w.get(&7), None);
    /// ```
    pub fn compute(
        &mut self,
        key: K,
        f: impl FnOnce(Option<V>) -> Option<V>,
    ) -> Result<Option<V>, CollectionError> {
        crate::entry::compute(self, key, f)
    }

    /// Keeps only the entries for which `keep` returns true, removing the others in
    /// batches of 4,096 (each published as one version); returns how many it removed.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiTree::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// w.extend((0..10).map(|k| (k, k * k))).unwrap();
    /// assert_eq!(w.retain(|k, _| k % 2 == 0).unwrap(), 5);
    /// assert_eq!(w.iter().unwrap().len(), 5);
    /// ```
    pub fn retain(&mut self, keep: impl FnMut(&K, &V) -> bool) -> Result<usize, CollectionError> {
        crate::entry::retain(self, keep)
    }

    /// Removes every entry (in batches, as [`retain`](Self::retain) does).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiTree::<String, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// w.insert("a".into(), 1).unwrap();
    /// w.clear().unwrap();
    /// assert!(w.is_empty());
    /// ```
    pub fn clear(&mut self) -> Result<(), CollectionError> {
        crate::entry::retain(self, |_, _| false).map(|_| ())
    }

    /// Inserts every entry of `entries`, 4,096 to a batch (each published as one
    /// version): the way to build a tree from an iterator. Returns what the batches did.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiTree::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// let report = w.extend([(1, 10), (2, 20), (1, 11)]).unwrap();
    /// assert_eq!((report.inserted, report.replaced), (2, 1));
    /// assert_eq!(w.get(&1), Some(11));
    /// ```
    pub fn extend(
        &mut self,
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> Result<BatchReport, CollectionError> {
        crate::entry::extend(self, entries)
    }

    /// The value of `key` in the current tree, from the writer's own (always current)
    /// nodes. (Reading a node the writer wrote can fail only if the region was
    /// corrupted; that reads as absent.)
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.insert(4, 40).unwrap();
    /// assert_eq!(w.get(&4), Some(40));
    /// assert_eq!(w.get(&5), None);
    /// ```
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Query<K> + ?Sized,
    {
        self.try_get(key).ok().flatten()
    }

    /// [`get`](Self::get), telling a corrupt region (an error) from an absent key.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiTree::<String, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// w.insert("four".into(), 4).unwrap();
    /// assert_eq!(w.try_get("four").unwrap(), Some(4));
    /// assert_eq!(w.try_get("five").unwrap(), None);
    /// ```
    pub fn try_get<Q>(&self, key: &Q) -> Result<Option<V>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + ?Sized,
    {
        let probe = |st: &WriterStore<K, V, M, H>, stored: &K::Word| key.order(stored, &st.writer);
        match algo::get(&self.store, self.root, probe)? {
            Some(word) => Ok(Some(V::from_word(&word, &self.store.writer)?)),
            None => Ok(None),
        }
    }

    /// Whether `key` is present.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.insert(4, 40).unwrap();
    /// assert!(w.contains_key(&4).unwrap());
    /// assert!(!w.contains_key(&40).unwrap());
    /// ```
    pub fn contains_key<Q>(&self, key: &Q) -> Result<bool, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + ?Sized,
    {
        Ok(self.try_get(key)?.is_some())
    }

    /// Number of entries.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// for k in 0..12 {
    ///     w.insert(k % 4, k).unwrap(); // four keys, replaced three times each
    /// }
    /// assert_eq!(w.len(), 4);
    /// ```
    pub fn len(&self) -> usize {
        self.store.read(self.root).map_or(0, |n| n.size)
    }

    /// Whether the tree is empty.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// assert!(w.is_empty());
    /// w.insert(1, 1).unwrap();
    /// assert!(!w.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.root == 0
    }

    /// The entries in `range`, in key order.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// for k in 0..10 {
    ///     w.insert(k, k * 10).unwrap();
    /// }
    /// assert_eq!(w.range(3..6).unwrap(), vec![(3, 30), (4, 40), (5, 50)]);
    /// assert_eq!(w.range(9..).unwrap(), vec![(9, 90)]);
    /// ```
    pub fn range<Q, B>(&self, range: B) -> Result<Vec<(K, V)>, CollectionError>
    where
        K: Borrow<Q>,
        Q: Query<K> + ?Sized,
        B: RangeBounds<Q>,
    {
        let w = &self.store.writer;
        self.entries(|stored| algo::place(&range, stored, |b: &Q, k| b.order(k, w)))
    }

    /// The entries a range `place`s inside, in order.
    fn entries(
        &self,
        place: impl Fn(&K::Word) -> Result<algo::Place, CollectionError>,
    ) -> Result<Vec<(K, V)>, CollectionError> {
        let w = &self.store.writer;
        let mut out = Vec::new();
        algo::collect_range(&self.store, self.root, &place, |k, v| {
            out.push((K::from_word(&k, w)?, V::from_word(&v, w)?));
            Ok(())
        })?;
        Ok(out)
    }

    /// Every entry, in key order.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// for k in [2, 0, 1] {
    ///     w.insert(k, k).unwrap();
    /// }
    /// assert_eq!(w.iter().unwrap(), vec![(0, 0), (1, 1), (2, 2)]);
    /// ```
    pub fn iter(&self) -> Result<Vec<(K, V)>, CollectionError> {
        self.entries(|_| Ok(algo::Place::ALL))
    }

    /// Checks the tree's invariants: keys in order, every stored size equal to the size
    /// of its subtree, and weight balance at every node.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// for k in 0..200 {
    ///     w.insert(k, k).unwrap(); // ascending keys: every insert rebalances
    /// }
    /// w.check_invariants().unwrap();
    /// assert_eq!(w.len(), 200);
    /// ```
    pub fn check_invariants(&self) -> Result<(), InvariantError<CollectionError>> {
        let counted = algo::check(&self.store, self.root)?;
        if counted != self.store.nodes {
            // Every node created and not given back must be reachable from the root:
            // anything else is a node that was neither published nor given back.
            return Err(InvariantError::Storage(CollectionError::Corrupt {
                reason: "the writer holds nodes the tree does not reach",
            }));
        }
        Ok(())
    }

    /// Fills an empty tree with `entries` (keys strictly increasing) as one perfectly
    /// balanced tree, published once: `n` node allocations instead of `n` path copies.
    /// On an error nothing is published.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiTree::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// let entries: Vec<(u32, u32)> = (0..100).map(|k| (k, k + 1)).collect();
    /// w.load_sorted(&entries).unwrap();
    /// assert_eq!(w.len(), 100);
    /// w.check_invariants().unwrap();
    /// assert!(w.load_sorted(&entries).is_err()); // not empty any more
    /// ```
    pub fn load_sorted(&mut self, entries: &[(K, V)]) -> Result<(), CollectionError> {
        const REFUSED: CollectionError = CollectionError::Corrupt {
            reason: "load_sorted needs an empty tree and strictly increasing keys",
        };
        if self.root != 0 || entries.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(REFUSED);
        }
        let mut edit = self.begin();
        let mut words = Vec::with_capacity(entries.len());
        let mut r = entries.iter().try_for_each(|(k, v)| {
            self.note_value(v);
            words.push(self.strings.words(&mut self.store.writer, k, v)?);
            Ok(())
        });
        if r.is_ok() {
            r = match edit.build_sorted(&mut self.store, &words) {
                None => Err(REFUSED),
                Some(Err(e)) => Err(e),
                Some(Ok(())) => self.publish(&mut edit),
            };
        }
        if r.is_err() {
            self.abandon_strings();
        }
        self.edit = edit;
        r
    }

    /// Retires the replaced nodes still in the writer's retirement bag (it is logged by
    /// itself only every [`RETIRE_BATCH`](bi_core::runtime::RETIRE_BATCH) objects), then
    /// gives back to the heap every retired node whose grace period has passed. Nodes it
    /// has just retired wait for their own grace period: memory comes back on a later
    /// call, after every node has passed twice.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// for v in 0..10 {
    ///     w.insert(1, v).unwrap(); // every insert replaces the node
    /// }
    /// let report = w.reclaim().unwrap(); // retires the replaced nodes
    /// assert_eq!((report.freed_blocks, report.pending_blocks), (0, 9));
    /// s.quiesce_all().unwrap();
    /// s.quiesce_all().unwrap(); // every node passed twice: the grace period is over
    /// let report = w.reclaim().unwrap();
    /// assert_eq!((report.freed_blocks, report.pending_blocks), (9, 0));
    /// ```
    pub fn reclaim(&mut self) -> Result<ReclaimReport, CollectionError> {
        Ok(self.store.writer.reclaim()?)
    }

    /// Replaced nodes whose retirement is still to be logged: they wait in the writer's
    /// retirement bag until it holds a batch (or the freed ring has room again, if it
    /// was full), or until [`reclaim`](Self::reclaim). They are unlinked already; they
    /// count toward memory in use.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 1).unwrap();
    /// w.insert(1, 2).unwrap();
    /// // The replaced node waits to be logged with the next ones (one retirement per bag).
    /// assert_eq!(w.unretired(), 1);
    /// w.reclaim().unwrap();
    /// assert_eq!(w.unretired(), 0);
    /// ```
    pub fn unretired(&self) -> usize {
        self.store.writer.deferred()
    }

    /// The kept bookkeeping, restarted over the published root (put it back when done).
    fn begin(&mut self) -> Edit<u64> {
        // `Edit::new` allocates nothing: the swap costs no allocation either way.
        let mut edit = std::mem::replace(&mut self.edit, Edit::new(0));
        edit.restart(self.root);
        edit
    }

    fn single(
        &mut self,
        stage: impl FnOnce(&mut Self, &mut Edit<u64>) -> Result<Option<V>, CollectionError>,
    ) -> Result<Option<V>, CollectionError> {
        let mut edit = self.begin();
        let r = match stage(self, &mut edit) {
            Ok(old) => self.publish(&mut edit).map(|()| old),
            // Nothing of this operation remains; the batch holds no other operation.
            Err(e) => {
                self.abandon_strings();
                edit.abandon(&mut self.store).and(Err(e))
            }
        };
        self.edit = edit;
        r
    }

    /// Counts `value` into the bound [`ApplyBatch::longest_value`] gives.
    fn note_value(&mut self, value: &V) {
        if V::OUT_OF_LINE {
            let len = crate::stored::out_of_line_len(value);
            self.longest_value = self.longest_value.map(|l| l.max(len));
        }
    }

    /// Inserts one entry into the batch `edit` builds; returns the old value.
    fn stage_insert(
        &mut self,
        edit: &mut Edit<u64>,
        key: &K,
        value: &V,
    ) -> Result<Option<V>, CollectionError> {
        self.note_value(value);
        let (k, v) = self.strings.words(&mut self.store.writer, key, value)?;
        let probe =
            |st: &WriterStore<K, V, M, H>, stored: &K::Word| key.order_word(stored, &st.writer);
        match edit.change(&mut self.store, Change::Insert(k, v), &probe) {
            Ok(None) => Ok(None),
            Ok(Some((_, old))) => {
                // The stored key stays: the one just written is not needed.
                self.strings.unused::<K, M, H>(&mut self.store.writer, &k);
                self.dropped::<V>(&old)
            }
            Err(e) => {
                self.strings.unused::<K, M, H>(&mut self.store.writer, &k);
                self.strings.unused::<V, M, H>(&mut self.store.writer, &v);
                Err(e)
            }
        }
    }

    /// Removes one key in the batch `edit` builds; returns its value.
    fn stage_remove<Q: Query<K> + ?Sized>(
        &mut self,
        edit: &mut Edit<u64>,
        key: &Q,
    ) -> Result<Option<V>, CollectionError> {
        let probe = |st: &WriterStore<K, V, M, H>, stored: &K::Word| key.order(stored, &st.writer);
        match edit.change(&mut self.store, Change::Remove, &probe)? {
            None => Ok(None),
            Some((k, old)) => {
                self.strings.dropped::<K>(&k);
                self.dropped::<V>(&old)
            }
        }
    }

    /// The value of an entry the batch replaced or removed; its byte string (if any) is
    /// retired with the batch.
    fn dropped<T: Stored>(&mut self, word: &T::Word) -> Result<Option<T>, CollectionError> {
        let value = T::from_word(word, &self.store.writer)?;
        self.strings.dropped::<T>(word);
        Ok(Some(value))
    }

    /// The batch will not be published: gives back the strings it wrote.
    fn abandon_strings(&mut self) {
        self.strings.abandon(&mut self.store.writer);
    }

    /// The batch was published: retires the strings of the entries it dropped.
    fn settle_strings(&mut self) -> Result<(), CollectionError> {
        self.strings.settle(&mut self.store.writer)
    }

    /// Publishes the batch's root, retires what it replaced.
    fn publish(&mut self, edit: &mut Edit<u64>) -> Result<(), CollectionError> {
        if !edit.changed() && edit.root() == self.root {
            return Ok(());
        }
        let root = edit.root();
        if let Err(e) = self
            .store
            .writer
            .publish_link(self.tree.slot(), Link::<NodeOf<K, V>>::from_raw(root))
        {
            self.abandon_strings();
            edit.abandon(&mut self.store)?;
            return Err(e.into());
        }
        self.root = root;
        let replaced = edit.take_replaced();
        let store = &mut self.store;
        store.nodes -= replaced.len();
        let recent = &mut store.recent;
        store.writer.defer_retire(replaced.map(|r| {
            recent.forget(r);
            Link::<NodeOf<K, V>>::from_raw(r)
        }))?;
        if self.role.is_some() {
            let entries = self.len();
            self.store.writer.note_entries(self.tree.slot(), entries);
        }
        self.settle_strings()
    }
}

impl<K: Stored + Ord, V: Stored, M: MemView, H: Heap> ApplyBatch<K, V>
    for TreeWriteHandle<K, V, M, H>
{
    /// From the writer's own lookups ([`TreeWriteHandle::get`]) and the batch's earlier
    /// operations.
    fn old_values(
        &self,
        ops: &[Op<K, V>],
        olds: &mut Vec<Option<V>>,
    ) -> Result<bool, CollectionError> {
        crate::entry::old_values::<_, _, _, std::collections::BTreeMap<_, _>>(self, ops, olds)
    }

    /// The longest value this handle stored; unknown for an adopted tree.
    fn longest_value(&self) -> Option<usize> {
        self.longest_value
    }

    /// Applies the operations by path copying and publishes the resulting root once.
    /// Nodes created and then superseded within the batch are given back at once
    /// ([`Writer::discard_link`]); the published nodes the batch replaced are retired
    /// together ([`Writer::retire_all`]). On an error, the operations before the failing
    /// one are published (if that publication fails too, nothing is) and the error of
    /// the failing one is returned.
    fn apply_batch(&mut self, ops: &[Op<K, V>]) -> Result<BatchReport, CollectionError> {
        self.apply_prefix(ops).1
    }

    /// [`apply_batch`](ApplyBatch::apply_batch) after the old values; on an error,
    /// `olds` keeps the values of the operations published before it.
    fn apply_reporting(
        &mut self,
        ops: &[Op<K, V>],
        olds: &mut Vec<Option<V>>,
    ) -> Result<BatchReport, CollectionError> {
        if !self.old_values(ops, olds)? {
            olds.clear();
        }
        let (applied, result) = self.apply_prefix(ops);
        if result.is_err() {
            olds.truncate(applied);
        }
        result
    }

    /// A batch that runs out of heap publishes the operations before the failing one
    /// (or, if that publication fails, nothing), and the old values say which.
    fn reports_applied_prefix(&self) -> bool {
        true
    }
}

impl<K: Stored + Ord, V: Stored, M: MemView, H: Heap> TreeWriteHandle<K, V, M, H> {
    /// Applies `ops` as [`apply_batch`](ApplyBatch::apply_batch) does; with the result,
    /// how many of them were published (a prefix).
    fn apply_prefix(&mut self, ops: &[Op<K, V>]) -> (usize, Result<BatchReport, CollectionError>) {
        let mut edit = self.begin();
        let mut failure = None;
        for op in ops {
            let staged = match op {
                Op::Insert(k, v) => self.stage_insert(&mut edit, k, v),
                Op::Remove(k) => self.stage_remove(&mut edit, k),
            };
            if let Err(e) = staged {
                failure = Some(e);
                break;
            }
        }
        let report = edit.report();
        let published = self.publish(&mut edit);
        self.edit = edit;
        if let Err(e) = published {
            return (0, Err(e));
        }
        match failure {
            Some(e) => (report.applied, Err(e)),
            None => (report.applied, Ok(report)),
        }
    }
}

impl<K: Stored + Ord, V: Stored, M: MemView, H: Heap> crate::entry::Keyed<K, V>
    for TreeWriteHandle<K, V, M, H>
{
    fn lookup(&self, key: &K) -> Result<Option<V>, CollectionError> {
        self.try_get(key)
    }
    fn put(&mut self, key: K, value: V) -> Result<Option<V>, CollectionError> {
        self.insert(key, value)
    }
    fn delete(&mut self, key: &K) -> Result<Option<V>, CollectionError> {
        self.remove(key)
    }
    fn entries(&self) -> Result<Vec<(K, V)>, CollectionError> {
        self.iter()
    }
}
