//! The coherent baseline: the same Bonsai algorithm over ordinary heap nodes, with
//! crossbeam-epoch reclamation.

use super::algo::{self, Edit, InvariantError, NodeSource, NodeStore, Parts};
use crate::CollectionError;
use crate::op::{ApplyBatch, BatchReport, Op};
use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned, Shared};
use std::convert::Infallible;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::RangeBounds;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};

struct ENode<K, V> {
    key: K,
    value: V,
    size: usize,
    left: Atomic<ENode<K, V>>,
    right: Atomic<ENode<K, V>>,
}

/// A node pointer as the algorithm's reference.
struct NodePtr<K, V>(*const ENode<K, V>);

// SAFETY: a `NodePtr` is an address; nothing is read through it except by
// `EpochStore::read` under a pinned guard. It crosses threads only inside the writer's
// spare `Edit` (behind the writer mutex), which is restarted, so emptied, before every
// batch: no pointer left there from one batch is ever followed.
unsafe impl<K: Send + Sync, V: Send + Sync> Send for NodePtr<K, V> {}

impl<K, V> Clone for NodePtr<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K, V> Copy for NodePtr<K, V> {}
impl<K, V> PartialEq for NodePtr<K, V> {
    fn eq(&self, o: &Self) -> bool {
        std::ptr::eq(self.0, o.0)
    }
}
impl<K, V> Eq for NodePtr<K, V> {}
impl<K, V> Hash for NodePtr<K, V> {
    fn hash<Hs: Hasher>(&self, h: &mut Hs) {
        self.0.hash(h);
    }
}

/// Nodes reached under a pinned guard.
struct EpochStore<'g, K, V> {
    guard: &'g Guard,
    _t: std::marker::PhantomData<fn() -> (K, V)>,
}

impl<K: Ord + Copy, V: Copy> NodeSource<K, V> for EpochStore<'_, K, V> {
    type Ref = NodePtr<K, V>;
    type Error = Infallible;

    fn null(&self) -> NodePtr<K, V> {
        NodePtr(std::ptr::null())
    }

    #[inline]
    fn read(&self, r: NodePtr<K, V>) -> Result<Parts<K, V, NodePtr<K, V>>, Infallible> {
        // SAFETY: `r` is non-null and was loaded, under `self.guard`, from the root or
        // from a node reachable from it, or created by the writer in this operation. Nodes
        // are only destroyed (a) with `defer_destroy` after being unlinked, which cannot
        // run while this guard is pinned, or (b) at once if never published, and the
        // algorithm never reads such a node after destroying it.
        let n = unsafe { &*r.0 };
        Ok(Parts {
            key: n.key,
            value: n.value,
            left: NodePtr(n.left.load(Ordering::Acquire, self.guard).as_raw()),
            right: NodePtr(n.right.load(Ordering::Acquire, self.guard).as_raw()),
            size: n.size,
        })
    }

    fn order(&self, a: &K, b: &K) -> Result<std::cmp::Ordering, Infallible> {
        Ok(a.cmp(b))
    }
}

impl<K: Ord + Copy, V: Copy> NodeStore<K, V> for EpochStore<'_, K, V> {
    fn create(&mut self, p: Parts<K, V, NodePtr<K, V>>) -> Result<NodePtr<K, V>, Infallible> {
        let n = Owned::new(ENode {
            key: p.key,
            value: p.value,
            size: p.size,
            left: Atomic::from(p.left.0),
            right: Atomic::from(p.right.0),
        });
        Ok(NodePtr(n.into_shared(self.guard).as_raw()))
    }

    fn destroy_unpublished(&mut self, r: NodePtr<K, V>) -> Result<(), Infallible> {
        // SAFETY: `r` came from `Owned::into_shared` in `create` and never became
        // reachable from the published root, so no other thread can hold it; the
        // algorithm destroys each such node once and never reads it afterwards.
        drop(unsafe { Owned::from_raw(r.0.cast_mut()) });
        Ok(())
    }
}

fn infallible<T>(r: Result<T, Infallible>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => match e {},
    }
}

/// The coherent baseline of [`BiTree`](super::BiTree): the same Bonsai tree (same
/// algorithm code, same path copying and rotations) over ordinary heap nodes, with
/// [crossbeam-epoch] reclamation, for machines *with* cache coherence. It plays the role
/// userspace RCU plays in the evaluation of the Bonsai tree: the cost a coherent system
/// pays for the same reads, against which the non-coherent tree is measured.
///
/// Any number of threads read concurrently (lock-free, one epoch pin per operation);
/// writers are serialized by a mutex.
///
/// [crossbeam-epoch]: https://docs.rs/crossbeam-epoch
///
/// ```
/// use bi_collections::tree::EpochBonsai;
/// use std::sync::Arc;
///
/// let t = Arc::new(EpochBonsai::<u64, u64>::new());
/// let writer = {
///     let t = t.clone();
///     std::thread::spawn(move || {
///         for k in 0..100 {
///             t.insert(k, k + 1);
///         }
///     })
/// };
/// let _ = t.get(&5); // concurrent read: absent or 6
/// writer.join().unwrap();
/// assert_eq!(t.get(&5), Some(6));
/// assert_eq!(t.len(), 100);
/// assert_eq!(t.range(10..13), vec![(10, 11), (11, 12), (12, 13)]);
/// t.check_invariants().unwrap();
/// ```
pub struct EpochBonsai<K, V> {
    root: Atomic<ENode<K, V>>,
    /// Serialises writers, and keeps the batch bookkeeping between batches.
    writer: Mutex<Edit<NodePtr<K, V>>>,
}

impl<K, V> fmt::Debug for EpochBonsai<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EpochBonsai").finish_non_exhaustive()
    }
}

impl<K: Ord + Copy, V: Copy> Default for EpochBonsai<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K, V> Drop for EpochBonsai<K, V> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader or writer is running; nodes still reachable
        // from the root were never handed to `defer_destroy` (only replaced nodes are),
        // so each is freed exactly once here.
        unsafe {
            let guard = epoch::unprotected();
            let mut stack = vec![self.root.load(Ordering::Relaxed, guard)];
            while let Some(n) = stack.pop() {
                if n.is_null() {
                    continue;
                }
                let owned = n.into_owned();
                stack.push(owned.left.load(Ordering::Relaxed, guard));
                stack.push(owned.right.load(Ordering::Relaxed, guard));
                drop(owned);
            }
        }
    }
}

impl<K: Ord + Copy, V: Copy> EpochBonsai<K, V> {
    /// An empty tree.
    ///
    /// ```
    /// use bi_collections::tree::EpochBonsai;
    ///
    /// let t = EpochBonsai::<u64, u64>::new();
    /// assert!(t.is_empty());
    /// assert_eq!(t.get(&1), None);
    /// ```
    pub fn new() -> Self {
        EpochBonsai {
            root: Atomic::null(),
            writer: Mutex::new(Edit::new(NodePtr(std::ptr::null()))),
        }
    }

    fn with_store<T>(&self, f: impl FnOnce(&EpochStore<'_, K, V>, NodePtr<K, V>) -> T) -> T {
        let guard = epoch::pin();
        let store = EpochStore {
            guard: &guard,
            _t: std::marker::PhantomData,
        };
        let root = NodePtr(self.root.load(Ordering::Acquire, &guard).as_raw());
        f(&store, root)
    }

    /// The value of `key`.
    ///
    /// ```
    /// use bi_collections::tree::EpochBonsai;
    ///
    /// let t = EpochBonsai::new();
    /// t.insert(1, "one");
    /// assert_eq!(t.get(&1), Some("one"));
    /// assert_eq!(t.get(&2), None);
    /// ```
    #[inline]
    pub fn get(&self, key: &K) -> Option<V> {
        self.with_store(|s, root| {
            infallible(algo::get(s, root, |_, stored: &K| Ok(key.cmp(stored))))
        })
    }

    /// Whether `key` is present.
    ///
    /// ```
    /// use bi_collections::tree::EpochBonsai;
    ///
    /// let t = EpochBonsai::new();
    /// t.insert(1, ());
    /// assert!(t.contains_key(&1));
    /// assert!(!t.contains_key(&2));
    /// ```
    pub fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// Number of entries.
    ///
    /// ```
    /// use bi_collections::tree::EpochBonsai;
    ///
    /// let t = EpochBonsai::new();
    /// for k in 0..10 {
    ///     t.insert(k % 3, k);
    /// }
    /// assert_eq!(t.len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        self.with_store(|s, root| {
            if root == s.null() {
                0
            } else {
                infallible(s.read(root)).size
            }
        })
    }

    /// Whether the tree is empty.
    ///
    /// ```
    /// use bi_collections::tree::EpochBonsai;
    ///
    /// let t = EpochBonsai::new();
    /// t.insert(1, 1);
    /// assert!(!t.is_empty());
    /// t.remove(&1);
    /// assert!(t.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries in `range`, in key order, from one version.
    ///
    /// ```
    /// use bi_collections::tree::EpochBonsai;
    ///
    /// let t = EpochBonsai::from_sorted(&[(1, 10), (2, 20), (3, 30), (4, 40)]).unwrap();
    /// assert_eq!(t.range(2..4), vec![(2, 20), (3, 30)]);
    /// assert_eq!(t.range(..2), vec![(1, 10)]);
    /// ```
    pub fn range<B: RangeBounds<K>>(&self, range: B) -> Vec<(K, V)> {
        self.with_store(|s, root| {
            let mut out = Vec::new();
            let place = |stored: &K| algo::place(&range, stored, |b: &K, k: &K| Ok(b.cmp(k)));
            infallible(algo::collect_range(s, root, &place, |k, v| {
                out.push((k, v));
                Ok(())
            }));
            out
        })
    }

    /// Every entry in key order.
    ///
    /// ```
    /// use bi_collections::tree::EpochBonsai;
    ///
    /// let t = EpochBonsai::new();
    /// for k in [3, 1, 2] {
    ///     t.insert(k, k * 2);
    /// }
    /// assert_eq!(t.iter(), vec![(1, 2), (2, 4), (3, 6)]);
    /// ```
    pub fn iter(&self) -> Vec<(K, V)> {
        self.range(..)
    }

    /// The entry with the smallest key.
    ///
    /// ```
    /// use bi_collections::tree::EpochBonsai;
    ///
    /// let t = EpochBonsai::new();
    /// assert_eq!(t.first(), None);
    /// t.insert(5, 'e');
    /// t.insert(2, 'b');
    /// assert_eq!(t.first(), Some((2, 'b')));
    /// ```
    pub fn first(&self) -> Option<(K, V)> {
        self.with_store(|s, root| infallible(algo::extreme(s, root, true)))
    }

    /// The entry with the largest key.
    ///
    /// ```
    /// use bi_collections::tree::EpochBonsai;
    ///
    /// let t = EpochBonsai::new();
    /// t.insert(5, 'e');
    /// t.insert(2, 'b');
    /// assert_eq!(t.last(), Some((5, 'e')));
    /// ```
    pub fn last(&self) -> Option<(K, V)> {
        self.with_store(|s, root| infallible(algo::extreme(s, root, false)))
    }

    /// Inserts or replaces; returns the previous value.
    ///
    /// ```
    /// use bi_collections::tree::EpochBonsai;
    ///
    /// let t = EpochBonsai::new();
    /// assert_eq!(t.insert(1, 10), None);
    /// assert_eq!(t.insert(1, 11), Some(10)); // replaced
    /// assert_eq!(t.len(), 1);
    /// ```
    pub fn insert(&self, key: K, value: V) -> Option<V> {
        let mut old = None;
        self.apply_with(&[Op::Insert(key, value)], |v| old = v);
        old
    }

    /// Removes `key`; returns its value.
    ///
    /// ```
    /// use bi_collections::tree::EpochBonsai;
    ///
    /// let t = EpochBonsai::new();
    /// t.insert(1, 10);
    /// assert_eq!(t.remove(&1), Some(10));
    /// assert_eq!(t.remove(&1), None);
    /// ```
    pub fn remove(&self, key: &K) -> Option<V> {
        let mut old = None;
        self.apply_with(&[Op::Remove(*key)], |v| old = v);
        old
    }

    /// Applies a batch and publishes it with one root store.
    ///
    /// ```
    /// use bi_collections::Op;
    /// use bi_collections::tree::EpochBonsai;
    ///
    /// let t = EpochBonsai::new();
    /// t.insert(1, 0);
    /// let report = t.apply(&[Op::Insert(1, 1), Op::Insert(2, 2), Op::Remove(1), Op::Remove(9)]);
    /// assert_eq!((report.applied, report.inserted), (4, 1));
    /// assert_eq!((report.replaced, report.removed), (1, 1));
    /// assert_eq!(t.iter(), vec![(2, 2)]);
    /// ```
    pub fn apply(&self, ops: &[Op<K, V>]) -> BatchReport {
        self.apply_with(ops, |_| {})
    }

    fn apply_with(&self, ops: &[Op<K, V>], mut each: impl FnMut(Option<V>)) -> BatchReport {
        let mut edit = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let guard = epoch::pin();
        let mut store = EpochStore {
            guard: &guard,
            _t: std::marker::PhantomData,
        };
        let root = NodePtr(self.root.load(Ordering::Acquire, &guard).as_raw());
        edit.restart(root);
        for op in ops {
            each(infallible(edit.apply(&mut store, op)));
        }
        let report = edit.report();
        let new_root = edit.root();
        if new_root != root {
            self.root.store(Shared::from(new_root.0), Ordering::Release);
        }
        for r in edit.take_replaced() {
            // SAFETY: `r` was reachable from the previous root and is not from the new
            // one (path copying replaced it), so readers that pin from now on cannot
            // reach it; it is deferred once (each published node is replaced at most
            // once, since it is unreachable afterwards).
            unsafe { guard.defer_destroy(Shared::from(r.0)) };
        }
        report
    }

    /// A tree of `entries` (keys strictly increasing), built perfectly balanced; `None`
    /// if the keys are not strictly increasing.
    ///
    /// ```
    /// use bi_collections::tree::EpochBonsai;
    ///
    /// let entries: Vec<(u32, u32)> = (0..100).map(|k| (k, k)).collect();
    /// let t = EpochBonsai::from_sorted(&entries).unwrap();
    /// assert_eq!(t.len(), 100);
    /// t.check_invariants().unwrap();
    /// assert!(EpochBonsai::from_sorted(&[(2, 0), (1, 0)]).is_none()); // not increasing
    /// ```
    pub fn from_sorted(entries: &[(K, V)]) -> Option<Self> {
        if entries.windows(2).any(|w| w[0].0 >= w[1].0) {
            return None;
        }
        let t = Self::new();
        {
            let guard = epoch::pin();
            let mut store = EpochStore {
                guard: &guard,
                _t: std::marker::PhantomData,
            };
            let mut edit = Edit::new(store.null());
            infallible(edit.build_sorted(&mut store, entries)?);
            t.root.store(Shared::from(edit.root().0), Ordering::Release);
        }
        Some(t)
    }

    /// Checks key order, subtree sizes and weight balance.
    ///
    /// ```
    /// use bi_collections::tree::EpochBonsai;
    ///
    /// let t = EpochBonsai::new();
    /// for k in 0..500 {
    ///     t.insert(k, k); // ascending keys: rotations all the way
    /// }
    /// assert!(t.check_invariants().is_ok());
    /// ```
    pub fn check_invariants(&self) -> Result<(), InvariantError<Infallible>> {
        let _w = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        self.with_store(|s, root| algo::check(s, root).map(|_| ()))
    }
}

impl<K: Ord + Copy, V: Copy> ApplyBatch<K, V> for EpochBonsai<K, V> {
    fn apply_batch(&mut self, ops: &[Op<K, V>]) -> Result<BatchReport, CollectionError> {
        Ok(self.apply(ops))
    }
}
