//! The Bonsai algorithm, written once over a node storage.
//!
//! Weight-balanced trees (Adams) keep, at every node, `size` = nodes in the subtree, and
//! require `DELTA * (size(l) + 1) >= size(r) + 1` (and the mirror image). An update
//! changes one root-to-leaf path; every node on it is *copied* (path copying), so the
//! published tree is never modified and a reader holding any version sees a consistent
//! tree. A rebalance is a rotation, and rotations too allocate fresh nodes instead of
//! relinking old ones. With `DELTA = 3, RATIO = 2` (the parameters Hirai and Yamamoto
//! proved correct) one single or double rotation per level restores balance after one
//! insertion or deletion.
//!
//! Storage is abstract: [`NodeSource`] reads a node, [`NodeStore`] adds creating a node
//! and destroying one that was never published. [`Edit`] tracks, over a batch of
//! operations, which nodes were created (and not yet published) and which published nodes
//! were replaced, so a batch publishes once, gives back the nodes it created and then
//! superseded, and retires the replaced ones together.

use super::ref_hash::NodeSet;
use crate::op::{BatchReport, Op};
use std::cmp::Ordering;
use std::hash::Hash;
use std::ops::{Bound, RangeBounds};

/// The balance parameter: a subtree may weigh up to `DELTA` times its sibling.
pub(crate) const DELTA: usize = 3;
/// The rotation parameter: single rotation when the inner grandchild weighs less than
/// `RATIO` times the outer one, double otherwise.
pub(crate) const RATIO: usize = 2;

/// One change to one key (the key itself is named by a probe).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Change<K, V> {
    /// Insert: `K` is the stored form of the key, used if it is absent.
    Insert(K, V),
    /// Remove the key.
    Remove,
}

/// A node, read out of its storage.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Parts<K, V, R> {
    pub(crate) key: K,
    pub(crate) value: V,
    pub(crate) left: R,
    pub(crate) right: R,
    pub(crate) size: usize,
}

/// Reads nodes.
pub(crate) trait NodeSource<K, V> {
    /// A reference to a node.
    type Ref: Copy + Eq + Hash;
    /// Why a read failed.
    type Error;
    /// The empty tree.
    fn null(&self) -> Self::Ref;
    /// Reads a non-null node.
    fn read(&self, r: Self::Ref) -> Result<Parts<K, V, Self::Ref>, Self::Error>;
    /// How two stored keys order (for invariant checks).
    fn order(&self, a: &K, b: &K) -> Result<Ordering, Self::Error>;
}

/// Reads, creates and destroys nodes (the writer side).
pub(crate) trait NodeStore<K, V>: NodeSource<K, V> {
    /// Creates an immutable node.
    fn create(&mut self, node: Parts<K, V, Self::Ref>) -> Result<Self::Ref, Self::Error>;
    /// Destroys a node that was created but never reachable from a published root.
    fn destroy_unpublished(&mut self, r: Self::Ref) -> Result<(), Self::Error>;
}

fn size_of_tree<K, V, S: NodeSource<K, V>>(s: &S, t: S::Ref) -> Result<usize, S::Error> {
    if t == s.null() {
        Ok(0)
    } else {
        Ok(s.read(t)?.size)
    }
}

/// Looks a key up, starting at an already-read root: `probe` says how the key looked for
/// orders against a stored one (`key.cmp(stored)`).
#[inline]
pub(crate) fn get_from<K: Copy, V: Copy, S: NodeSource<K, V>>(
    s: &S,
    root: Option<Parts<K, V, S::Ref>>,
    probe: impl Fn(&S, &K) -> Result<Ordering, S::Error>,
) -> Result<Option<V>, S::Error> {
    let null = s.null();
    let mut cur = root;
    while let Some(n) = cur {
        let next = match probe(s, &n.key)? {
            Ordering::Equal => return Ok(Some(n.value)),
            Ordering::Less => n.left,
            Ordering::Greater => n.right,
        };
        cur = if next == null {
            None
        } else {
            Some(s.read(next)?)
        };
    }
    Ok(None)
}

/// Looks a key up in the tree rooted at `root` (see [`get_from`]).
pub(crate) fn get<K: Copy, V: Copy, S: NodeSource<K, V>>(
    s: &S,
    root: S::Ref,
    probe: impl Fn(&S, &K) -> Result<Ordering, S::Error>,
) -> Result<Option<V>, S::Error> {
    let first = if root == s.null() {
        None
    } else {
        Some(s.read(root)?)
    };
    get_from(s, first, probe)
}

/// The smallest (`leftmost`) or largest entry.
pub(crate) fn extreme<K: Copy, V: Copy, S: NodeSource<K, V>>(
    s: &S,
    root: S::Ref,
    leftmost: bool,
) -> Result<Option<(K, V)>, S::Error> {
    let null = s.null();
    if root == null {
        return Ok(None);
    }
    let mut n = s.read(root)?;
    loop {
        let next = if leftmost { n.left } else { n.right };
        if next == null {
            return Ok(Some((n.key, n.value)));
        }
        n = s.read(next)?;
    }
}

/// Where a stored key lies against a range.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    /// The key is past the range's start: smaller keys may be in the range.
    pub(crate) after_start: bool,
    /// The key is before the range's end: larger keys may be in the range.
    pub(crate) before_end: bool,
    /// The key is in the range.
    pub(crate) inside: bool,
}

impl Place {
    /// Inside a range with no bounds.
    pub(crate) const ALL: Place = Place {
        after_start: true,
        before_end: true,
        inside: true,
    };
}

/// Where `stored` lies against `range`, given how a bound orders against a stored key
/// (`bound.cmp(stored)`).
pub(crate) fn place<Q: ?Sized, K, E>(
    range: &impl RangeBounds<Q>,
    stored: &K,
    order: impl Fn(&Q, &K) -> Result<Ordering, E>,
) -> Result<Place, E> {
    let (after_start, from_start) = match range.start_bound() {
        Bound::Unbounded => (true, true),
        Bound::Included(b) => {
            let o = order(b, stored)?;
            (o == Ordering::Less, o != Ordering::Greater)
        }
        Bound::Excluded(b) => {
            let o = order(b, stored)?;
            (o == Ordering::Less, o == Ordering::Less)
        }
    };
    let (before_end, to_end) = match range.end_bound() {
        Bound::Unbounded => (true, true),
        Bound::Included(b) => {
            let o = order(b, stored)?;
            (o == Ordering::Greater, o != Ordering::Less)
        }
        Bound::Excluded(b) => {
            let o = order(b, stored)?;
            (o == Ordering::Greater, o == Ordering::Greater)
        }
    };
    Ok(Place {
        after_start,
        before_end,
        inside: from_start && to_end,
    })
}

/// Hands the entries of a range to `emit` in key order: `place` says where a stored key
/// lies against it. In order without recursion: the nodes whose left subtree is being
/// visited wait on a stack, so a visit costs one read and no call; the caller builds its
/// output as the walk goes (no second pass over a list of words).
pub(crate) fn collect_range<K: Copy, V: Copy, S: NodeSource<K, V>>(
    s: &S,
    root: S::Ref,
    place: &impl Fn(&K) -> Result<Place, S::Error>,
    mut emit: impl FnMut(K, V) -> Result<(), S::Error>,
) -> Result<(), S::Error> {
    // (key, value, right subtree to visit next, or null; whether the entry is inside)
    let mut waiting: Vec<(K, V, S::Ref, bool)> = Vec::with_capacity(48);
    let mut next = root;
    loop {
        while next != s.null() {
            let n = s.read(next)?;
            let at = place(&n.key)?;
            let right = if at.before_end { n.right } else { s.null() };
            let left = if at.after_start { n.left } else { s.null() };
            if left == s.null() {
                // Nothing to visit on its left: the node's turn is now, and it need not
                // wait on the stack (half the nodes of a balanced tree are leaves, and a
                // pop right after its push waits for the pushed words to land).
                if at.inside {
                    emit(n.key, n.value)?;
                }
                next = right;
                continue;
            }
            waiting.push((n.key, n.value, right, at.inside));
            next = left;
        }
        let Some((key, value, right, inside)) = waiting.pop() else {
            return Ok(());
        };
        if inside {
            emit(key, value)?;
        }
        next = right;
    }
}

/// A broken invariant of a tree, found by a check.
///
/// ```
/// use bi_collections::tree::{EpochBonsai, InvariantError};
///
/// let t = EpochBonsai::from_sorted(&[(1, 'a'), (2, 'b'), (3, 'c')]).unwrap();
/// let checked: Result<(), InvariantError<std::convert::Infallible>> = t.check_invariants();
/// assert!(checked.is_ok());
/// let e = InvariantError::<std::convert::Infallible>::Order { depth: 2 };
/// assert_eq!(e.to_string(), "key out of order at depth 2");
/// ```
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvariantError<E> {
    /// A key is out of order (not between the keys of its ancestors).
    Order {
        /// Depth of the node (the root is at 0).
        depth: usize,
    },
    /// A node's stored size is not the number of nodes below it plus one.
    Size {
        /// Depth of the node.
        depth: usize,
        /// The size the node stores.
        stored: usize,
        /// The size counted.
        counted: usize,
    },
    /// A node's subtrees violate the weight balance `3 (size + 1) >= sibling size + 1`.
    Balance {
        /// Depth of the node.
        depth: usize,
        /// Size of the left subtree.
        left: usize,
        /// Size of the right subtree.
        right: usize,
    },
    /// A node could not be read.
    Storage(E),
}

impl<E: std::fmt::Display> std::fmt::Display for InvariantError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InvariantError::Order { depth } => write!(f, "key out of order at depth {depth}"),
            InvariantError::Size {
                depth,
                stored,
                counted,
            } => write!(
                f,
                "node at depth {depth} stores size {stored}, its subtree has {counted}"
            ),
            InvariantError::Balance { depth, left, right } => write!(
                f,
                "node at depth {depth} is out of balance: left {left}, right {right}"
            ),
            InvariantError::Storage(e) => write!(f, "unreadable node: {e}"),
        }
    }
}

impl<E: std::fmt::Debug + std::fmt::Display> std::error::Error for InvariantError<E> {}

/// Checks BST order, sizes and weight balance; returns the number of nodes.
pub(crate) fn check<K: Copy, V: Copy, S: NodeSource<K, V>>(
    s: &S,
    root: S::Ref,
) -> Result<usize, InvariantError<S::Error>> {
    check_below(s, root, None, None, 0)
}

fn check_below<K: Copy, V: Copy, S: NodeSource<K, V>>(
    s: &S,
    t: S::Ref,
    lo: Option<K>,
    hi: Option<K>,
    depth: usize,
) -> Result<usize, InvariantError<S::Error>> {
    if t == s.null() {
        return Ok(0);
    }
    let n = s.read(t).map_err(InvariantError::Storage)?;
    let above = |lo: &K| -> Result<bool, S::Error> { Ok(s.order(&n.key, lo)?.is_gt()) };
    let below = |hi: &K| -> Result<bool, S::Error> { Ok(s.order(&n.key, hi)?.is_lt()) };
    let ordered = lo
        .as_ref()
        .map_or(Ok(true), above)
        .and_then(|ok| Ok(ok && hi.as_ref().map_or(Ok(true), below)?));
    if !ordered.map_err(InvariantError::Storage)? {
        return Err(InvariantError::Order { depth });
    }
    let l = check_below(s, n.left, lo, Some(n.key), depth + 1)?;
    let r = check_below(s, n.right, Some(n.key), hi, depth + 1)?;
    if n.size != l + r + 1 {
        return Err(InvariantError::Size {
            depth,
            stored: n.size,
            counted: l + r + 1,
        });
    }
    if l + r >= 2 && (DELTA * (l + 1) < r + 1 || DELTA * (r + 1) < l + 1) {
        return Err(InvariantError::Balance {
            depth,
            left: l,
            right: r,
        });
    }
    Ok(l + r + 1)
}

/// A batch of updates in progress: the current root and the bookkeeping that lets the
/// batch publish once.
#[derive(Debug)]
pub(crate) struct Edit<R> {
    root: R,
    /// Created by earlier operations of the batch, reachable from `root`, not published.
    fresh: NodeSet<R>,
    /// Published nodes that the batch replaced (to retire once the new root is out).
    replaced: Vec<R>,
    op_created: Vec<R>,
    op_superseded: Vec<R>,
    report: BatchReport,
}

impl<R: Copy + Eq + Hash> Edit<R> {
    /// A batch over the published tree `root`.
    pub(crate) fn new(root: R) -> Self {
        Edit {
            root,
            fresh: NodeSet::default(),
            replaced: Vec::new(),
            op_created: Vec::new(),
            op_superseded: Vec::new(),
            report: BatchReport::default(),
        }
    }

    /// Starts a new batch over the published tree `root`, keeping the vectors' capacity
    /// (a writer keeps one `Edit` and restarts it for every batch, so that an update
    /// allocates no bookkeeping).
    pub(crate) fn restart(&mut self, root: R) {
        self.root = root;
        self.fresh.clear();
        self.replaced.clear();
        self.op_created.clear();
        self.op_superseded.clear();
        self.report = BatchReport::default();
    }

    /// The published nodes the batch replaced, taken out (to retire once the new root is
    /// published).
    pub(crate) fn take_replaced(&mut self) -> std::vec::Drain<'_, R> {
        self.replaced.drain(..)
    }

    /// The root after the operations applied so far.
    pub(crate) fn root(&self) -> R {
        self.root
    }

    /// What the batch did so far.
    pub(crate) fn report(&self) -> BatchReport {
        self.report
    }

    /// Whether any operation changed the tree.
    pub(crate) fn changed(&self) -> bool {
        !self.fresh.is_empty() || !self.replaced.is_empty()
    }

    fn make<K, V, S: NodeStore<K, V, Ref = R>>(
        &mut self,
        s: &mut S,
        key: K,
        value: V,
        left: R,
        right: R,
        size: usize,
    ) -> Result<R, S::Error> {
        let r = s.create(Parts {
            key,
            value,
            left,
            right,
            size,
        })?;
        self.op_created.push(r);
        Ok(r)
    }

    fn supersede(&mut self, r: R) {
        self.op_superseded.push(r);
    }

    /// Applies one operation of `Ord` keys (see [`change`](Self::change)); returns the
    /// old value.
    pub(crate) fn apply<K: Ord + Copy, V: Copy, S: NodeStore<K, V, Ref = R>>(
        &mut self,
        s: &mut S,
        op: &Op<K, V>,
    ) -> Result<Option<V>, S::Error> {
        let (key, change) = match *op {
            Op::Insert(k, v) => (k, Change::Insert(k, v)),
            Op::Remove(k) => (k, Change::Remove),
        };
        let old = self.change(s, change, &|_: &S, stored: &K| Ok(key.cmp(stored)))?;
        Ok(old.map(|(_, v)| v))
    }

    /// Applies one change to the key `probe` looks for (`probe(stored)` is
    /// `key.cmp(stored)`); returns the entry it replaced or removed. An insert of a
    /// present key keeps the stored key and replaces the value (as `BTreeMap::insert`
    /// does). On an error, the tree is as before and the nodes the change created are
    /// destroyed.
    pub(crate) fn change<K: Copy, V: Copy, S: NodeStore<K, V, Ref = R>>(
        &mut self,
        s: &mut S,
        change: Change<K, V>,
        probe: &impl Fn(&S, &K) -> Result<Ordering, S::Error>,
    ) -> Result<Option<(K, V)>, S::Error> {
        self.op_created.clear();
        self.op_superseded.clear();
        let inserting = matches!(change, Change::Insert(..));
        let result = match change {
            Change::Insert(k, v) => self
                .insert(s, self.root, probe, k, v)
                .map(|(r, old)| (Some(r), old)),
            Change::Remove => self
                .remove(s, self.root, probe)
                .map(|o| o.map_or((None, None), |(r, old)| (Some(r), Some(old)))),
        };
        match result {
            Ok((new_root, old)) => {
                if let Some(new_root) = new_root {
                    self.fresh.extend(self.op_created.drain(..));
                    // Drained, not taken: the vector keeps its capacity for the next change.
                    for r in self.op_superseded.drain(..) {
                        if self.fresh.remove(&r) {
                            s.destroy_unpublished(r)?;
                        } else {
                            self.replaced.push(r);
                        }
                    }
                    self.root = new_root;
                }
                self.report.applied += 1;
                match (inserting, old.is_some()) {
                    (true, false) => self.report.inserted += 1,
                    (true, true) => self.report.replaced += 1,
                    (false, true) => self.report.removed += 1,
                    (false, false) => {}
                }
                Ok(old)
            }
            Err(e) => {
                self.op_superseded.clear();
                for r in self.op_created.drain(..) {
                    // Best effort: the first error is the one reported.
                    let _ = s.destroy_unpublished(r);
                }
                Err(e)
            }
        }
    }

    /// Gives back every node the batch created (the batch will not be published).
    pub(crate) fn abandon<K, V, S: NodeStore<K, V, Ref = R>>(
        &mut self,
        s: &mut S,
    ) -> Result<(), S::Error> {
        let mut first = Ok(());
        for r in self.fresh.take_all() {
            if let Err(e) = s.destroy_unpublished(r)
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }

    fn balance<K: Copy, V: Copy, S: NodeStore<K, V, Ref = R>>(
        &mut self,
        s: &mut S,
        key: K,
        value: V,
        left: R,
        right: R,
    ) -> Result<R, S::Error> {
        let sl = size_of_tree(s, left)?;
        let sr = size_of_tree(s, right)?;
        if sl + sr >= 2 {
            if sr + 1 > DELTA * (sl + 1) {
                return self.rotate(s, key, value, left, right, sl, true);
            }
            if sl + 1 > DELTA * (sr + 1) {
                return self.rotate(s, key, value, left, right, sr, false);
            }
        }
        self.make(s, key, value, left, right, sl + sr + 1)
    }

    /// Rotates toward the light side. `to_left`: the right subtree is heavy (`light` is
    /// the left one and `light_size` its size); otherwise the mirror image.
    #[allow(clippy::too_many_arguments)]
    fn rotate<K: Copy, V: Copy, S: NodeStore<K, V, Ref = R>>(
        &mut self,
        s: &mut S,
        key: K,
        value: V,
        left: R,
        right: R,
        light_size: usize,
        to_left: bool,
    ) -> Result<R, S::Error> {
        let (light, heavy) = if to_left {
            (left, right)
        } else {
            (right, left)
        };
        let h = s.read(heavy)?;
        self.supersede(heavy);
        // `inner` is the heavy child's subtree nearer the light side.
        let (inner, outer) = if to_left {
            (h.left, h.right)
        } else {
            (h.right, h.left)
        };
        let si = size_of_tree(s, inner)?;
        let so = size_of_tree(s, outer)?;
        // Builds a node with `near` on the light side and `far` on the other.
        let oriented = |near: R, far: R| if to_left { (near, far) } else { (far, near) };
        if si + 1 < RATIO * (so + 1) {
            let (l, r) = oriented(light, inner);
            let moved = self.make(s, key, value, l, r, light_size + si + 1)?;
            let (l, r) = oriented(moved, outer);
            self.make(s, h.key, h.value, l, r, light_size + si + so + 2)
        } else {
            let i = s.read(inner)?;
            self.supersede(inner);
            let (i_near, i_far) = if to_left {
                (i.left, i.right)
            } else {
                (i.right, i.left)
            };
            let sn = size_of_tree(s, i_near)?;
            let sf = size_of_tree(s, i_far)?;
            let (l, r) = oriented(light, i_near);
            let a = self.make(s, key, value, l, r, light_size + sn + 1)?;
            let (l, r) = oriented(i_far, outer);
            let b = self.make(s, h.key, h.value, l, r, sf + so + 1)?;
            let (l, r) = oriented(a, b);
            self.make(s, i.key, i.value, l, r, light_size + sn + sf + so + 3)
        }
    }

    #[allow(clippy::type_complexity)]
    fn insert<K: Copy, V: Copy, S: NodeStore<K, V, Ref = R>>(
        &mut self,
        s: &mut S,
        t: R,
        probe: &impl Fn(&S, &K) -> Result<Ordering, S::Error>,
        key: K,
        value: V,
    ) -> Result<(R, Option<(K, V)>), S::Error> {
        let null = s.null();
        if t == null {
            return Ok((self.make(s, key, value, null, null, 1)?, None));
        }
        let n = s.read(t)?;
        match probe(s, &n.key)? {
            Ordering::Equal => {
                self.supersede(t);
                let r = self.make(s, n.key, value, n.left, n.right, n.size)?;
                Ok((r, Some((n.key, n.value))))
            }
            Ordering::Less => {
                let (l, old) = self.insert(s, n.left, probe, key, value)?;
                self.supersede(t);
                Ok((self.balance(s, n.key, n.value, l, n.right)?, old))
            }
            Ordering::Greater => {
                let (r, old) = self.insert(s, n.right, probe, key, value)?;
                self.supersede(t);
                Ok((self.balance(s, n.key, n.value, n.left, r)?, old))
            }
        }
    }

    /// `None` when the key is absent (nothing changes).
    #[allow(clippy::type_complexity)]
    fn remove<K: Copy, V: Copy, S: NodeStore<K, V, Ref = R>>(
        &mut self,
        s: &mut S,
        t: R,
        probe: &impl Fn(&S, &K) -> Result<Ordering, S::Error>,
    ) -> Result<Option<(R, (K, V))>, S::Error> {
        if t == s.null() {
            return Ok(None);
        }
        let n = s.read(t)?;
        match probe(s, &n.key)? {
            Ordering::Equal => {
                self.supersede(t);
                Ok(Some((self.glue(s, n.left, n.right)?, (n.key, n.value))))
            }
            Ordering::Less => match self.remove(s, n.left, probe)? {
                None => Ok(None),
                Some((l, old)) => {
                    self.supersede(t);
                    Ok(Some((self.balance(s, n.key, n.value, l, n.right)?, old)))
                }
            },
            Ordering::Greater => match self.remove(s, n.right, probe)? {
                None => Ok(None),
                Some((r, old)) => {
                    self.supersede(t);
                    Ok(Some((self.balance(s, n.key, n.value, n.left, r)?, old)))
                }
            },
        }
    }

    /// Joins two subtrees whose keys are ordered and whose sizes were balanced.
    fn glue<K: Copy, V: Copy, S: NodeStore<K, V, Ref = R>>(
        &mut self,
        s: &mut S,
        left: R,
        right: R,
    ) -> Result<R, S::Error> {
        let null = s.null();
        if left == null {
            return Ok(right);
        }
        if right == null {
            return Ok(left);
        }
        if size_of_tree(s, left)? > size_of_tree(s, right)? {
            let (k, v, l) = self.remove_extreme(s, left, false)?;
            self.balance(s, k, v, l, right)
        } else {
            let (k, v, r) = self.remove_extreme(s, right, true)?;
            self.balance(s, k, v, left, r)
        }
    }

    /// Removes the smallest (`min`) or largest entry of a non-empty subtree.
    fn remove_extreme<K: Copy, V: Copy, S: NodeStore<K, V, Ref = R>>(
        &mut self,
        s: &mut S,
        t: R,
        min: bool,
    ) -> Result<(K, V, R), S::Error> {
        let n = s.read(t)?;
        self.supersede(t);
        let null = s.null();
        if min {
            if n.left == null {
                return Ok((n.key, n.value, n.right));
            }
            let (k, v, l) = self.remove_extreme(s, n.left, true)?;
            Ok((k, v, self.balance(s, n.key, n.value, l, n.right)?))
        } else {
            if n.right == null {
                return Ok((n.key, n.value, n.left));
            }
            let (k, v, r) = self.remove_extreme(s, n.right, false)?;
            Ok((k, v, self.balance(s, n.key, n.value, n.left, r)?))
        }
    }
}

impl<R: Copy + Eq + Hash> Edit<R> {
    /// Builds a perfectly balanced tree of `entries` (strictly increasing keys: the
    /// caller checks) as the new root of an empty tree: `n` node creations, no rotation.
    /// `None` if the tree is not empty.
    pub(crate) fn build_sorted<K: Copy, V: Copy, S: NodeStore<K, V, Ref = R>>(
        &mut self,
        s: &mut S,
        entries: &[(K, V)],
    ) -> Option<Result<(), S::Error>> {
        if self.root != s.null() {
            return None;
        }
        self.op_created.clear();
        self.op_superseded.clear();
        Some(match self.build(s, entries) {
            Ok(root) => {
                self.fresh.extend(self.op_created.drain(..));
                self.root = root;
                self.report.applied += entries.len();
                self.report.inserted += entries.len();
                Ok(())
            }
            Err(e) => {
                for r in std::mem::take(&mut self.op_created) {
                    let _ = s.destroy_unpublished(r);
                }
                Err(e)
            }
        })
    }

    fn build<K: Copy, V: Copy, S: NodeStore<K, V, Ref = R>>(
        &mut self,
        s: &mut S,
        entries: &[(K, V)],
    ) -> Result<R, S::Error> {
        if entries.is_empty() {
            return Ok(s.null());
        }
        let mid = entries.len() / 2;
        let left = self.build(s, &entries[..mid])?;
        let right = self.build(s, &entries[mid + 1..])?;
        let (k, v) = entries[mid];
        self.make(s, k, v, left, right, entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes in a vector, referred to by index plus one (0 is the empty tree): trees of
    /// any shape, sound or not, for the invariant check.
    struct Nodes(Vec<Parts<u32, (), usize>>);

    impl NodeSource<u32, ()> for Nodes {
        type Ref = usize;
        type Error = ();
        fn null(&self) -> usize {
            0
        }
        fn read(&self, r: usize) -> Result<Parts<u32, (), usize>, ()> {
            self.0.get(r - 1).copied().ok_or(())
        }
        fn order(&self, a: &u32, b: &u32) -> Result<Ordering, ()> {
            Ok(a.cmp(b))
        }
    }

    impl NodeStore<u32, ()> for Nodes {
        fn create(&mut self, node: Parts<u32, (), usize>) -> Result<usize, ()> {
            self.0.push(node);
            Ok(self.0.len())
        }
        fn destroy_unpublished(&mut self, _: usize) -> Result<(), ()> {
            Ok(())
        }
    }

    /// Every shape of a weight-balanced tree of `n` nodes, as the sizes of each node's
    /// left subtree in order (pre-order).
    fn balanced_shapes(n: usize, memo: &mut Vec<Vec<Vec<usize>>>) -> Vec<Vec<usize>> {
        while memo.len() <= n {
            let m = memo.len();
            let mut all = Vec::new();
            for l in 0..m {
                let r = m - 1 - l;
                if l + r >= 2 && (DELTA * (l + 1) < r + 1 || DELTA * (r + 1) < l + 1) {
                    continue;
                }
                for a in &memo[l] {
                    for b in &memo[r] {
                        all.push([&[l][..], a, b].concat());
                    }
                }
            }
            memo.push(if m == 0 { vec![Vec::new()] } else { all });
        }
        memo[n].clone()
    }

    /// Builds the tree of `shape` (from `at` in it) with keys `*next`, `*next + 2`, ...
    /// in order; returns its root and where its shape ends.
    fn build(
        nodes: &mut Nodes,
        shape: &[usize],
        at: usize,
        size: usize,
        next: &mut u32,
    ) -> (usize, usize) {
        if size == 0 {
            return (0, at);
        }
        let left_size = shape[at];
        let (left, at) = build(nodes, shape, at + 1, left_size, next);
        let key = *next;
        *next += 2;
        let (right, at) = build(nodes, shape, at, size - 1 - left_size, next);
        let node = Parts {
            key,
            value: (),
            left,
            right,
            size,
        };
        (nodes.create(node).unwrap(), at)
    }

    /// Every weight-balanced tree of up to 16 nodes, every insertion (of each key between
    /// and around its keys) and every removal: the result is sorted, counted and in
    /// balance, and holds what it should. (The single or double rotation's choice is
    /// exercised at every size it can be made at in such trees.)
    #[test]
    #[cfg_attr(miri, ignore = "four million operations")]
    fn every_operation_on_every_small_balanced_tree_keeps_the_invariants() {
        let mut memo = Vec::new();
        let probe = |k: u32| move |_: &Nodes, stored: &u32| Ok(k.cmp(stored));
        for n in 0..=16 {
            for shape in balanced_shapes(n, &mut memo) {
                let mut nodes = Nodes(Vec::new());
                let (root, _) = build(&mut nodes, &shape, 0, n, &mut 2);
                assert_eq!(check(&nodes, root), Ok(n));
                for k in 1..=2 * n as u32 + 2 {
                    let mut after = Nodes(nodes.0.clone());
                    let mut edit = Edit::new(root);
                    let change = if k % 2 == 1 {
                        Change::Insert(k, ())
                    } else {
                        Change::Remove
                    };
                    let present = k % 2 == 0 && k <= 2 * n as u32;
                    let old = edit.change(&mut after, change, &probe(k)).unwrap();
                    assert_eq!(old.is_some(), present, "{shape:?} key {k}");
                    let want = if k % 2 == 1 {
                        n + 1
                    } else {
                        n - usize::from(present)
                    };
                    assert_eq!(check(&after, edit.root()), Ok(want), "{shape:?} key {k}");
                    let found = get(&after, edit.root(), probe(k)).unwrap();
                    assert_eq!(found.is_some(), k % 2 == 1, "{shape:?} key {k}");
                }
            }
        }
    }

    /// `(key, left, right, size)` for nodes 1, 2, ...; the root is node 1.
    fn tree(nodes: &[(u32, usize, usize, usize)]) -> Nodes {
        Nodes(
            nodes
                .iter()
                .map(|&(key, left, right, size)| Parts {
                    key,
                    value: (),
                    left,
                    right,
                    size,
                })
                .collect(),
        )
    }

    /// Sound trees pass at the edge of the balance (a subtree of two beside none; one
    /// beside three) and report their size.
    #[test]
    fn sound_trees_at_the_edge_of_the_balance_pass() {
        // 10 with a right chain 20 -> 30: 3 * (0 + 1) >= 2 + 1.
        let chain = tree(&[(10, 0, 2, 3), (20, 0, 3, 2), (30, 0, 0, 1)]);
        assert_eq!(check(&chain, 1), Ok(3));
        // The mirror image.
        let mirror = tree(&[(30, 2, 0, 3), (20, 3, 0, 2), (10, 0, 0, 1)]);
        assert_eq!(check(&mirror, 1), Ok(3));
        // 20 over {10} and {30 over 25, 40 -> ...}: one beside three.
        let wide = tree(&[
            (20, 2, 3, 5),
            (10, 0, 0, 1),
            (30, 4, 5, 3),
            (25, 0, 0, 1),
            (40, 0, 0, 1),
        ]);
        assert_eq!(check(&wide, 1), Ok(5));
        assert_eq!(check(&wide, 0), Ok(0));
    }

    /// Each broken invariant is reported at the depth of the node that breaks it.
    #[test]
    fn each_broken_invariant_is_reported_where_it_is() {
        // Three in a right chain under none: out of balance at the root.
        let chain = tree(&[(10, 0, 2, 4), (20, 0, 3, 3), (30, 0, 4, 2), (40, 0, 0, 1)]);
        assert_eq!(
            check(&chain, 1),
            Err(InvariantError::Balance {
                depth: 0,
                left: 0,
                right: 3
            })
        );
        let mirror = tree(&[(40, 2, 0, 4), (30, 3, 0, 3), (20, 4, 0, 2), (10, 0, 0, 1)]);
        assert_eq!(
            check(&mirror, 1),
            Err(InvariantError::Balance {
                depth: 0,
                left: 3,
                right: 0
            })
        );
        // A key at depth 2 on the wrong side of the root.
        let order = tree(&[(20, 2, 0, 3), (10, 0, 3, 2), (25, 0, 0, 1)]);
        assert_eq!(check(&order, 1), Err(InvariantError::Order { depth: 2 }));
        // Equal keys are out of order too.
        let equal = tree(&[(20, 2, 0, 2), (20, 0, 0, 1)]);
        assert_eq!(check(&equal, 1), Err(InvariantError::Order { depth: 1 }));
        // A stored size one off, at depth 1.
        let size = tree(&[(20, 2, 3, 4), (10, 0, 0, 2), (30, 0, 0, 1)]);
        assert_eq!(
            check(&size, 1),
            Err(InvariantError::Size {
                depth: 1,
                stored: 2,
                counted: 1
            })
        );
        // A root that stores the wrong size over sound subtrees.
        let root = tree(&[(20, 2, 3, 2), (10, 0, 0, 1), (30, 0, 0, 1)]);
        assert_eq!(
            check(&root, 1),
            Err(InvariantError::Size {
                depth: 0,
                stored: 2,
                counted: 3
            })
        );
        assert_eq!(check(&tree(&[]), 1), Err(InvariantError::Storage(())));
    }

    /// What each report says.
    #[test]
    fn reports_name_the_node_and_the_figures() {
        let shown = [
            InvariantError::Order { depth: 2 },
            InvariantError::Size {
                depth: 1,
                stored: 2,
                counted: 1,
            },
            InvariantError::Balance {
                depth: 0,
                left: 0,
                right: 3,
            },
            InvariantError::Storage("gone"),
        ]
        .map(|e| e.to_string());
        assert_eq!(
            shown,
            [
                "key out of order at depth 2",
                "node at depth 1 stores size 2, its subtree has 1",
                "node at depth 0 is out of balance: left 0, right 3",
                "unreadable node: gone",
            ]
        );
    }
}
