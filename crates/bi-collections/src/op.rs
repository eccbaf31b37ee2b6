//! Write operations as values: what a delegating client sends and a writer applies in
//! batches.

use crate::CollectionError;

/// One write to a key-value structure.
///
/// ```
/// use bi_collections::{ApplyBatch, EpochBonsai, Op};
///
/// let mut t = EpochBonsai::new();
/// t.apply_batch(&[Op::Insert(1, 'a'), Op::Insert(2, 'b'), Op::Remove(1)]).unwrap();
/// assert_eq!(t.iter(), vec![(2, 'b')]);
/// assert_ne!(Op::<u8, u8>::Remove(1), Op::Insert(1, 0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op<K, V> {
    /// Insert or replace the value of a key.
    Insert(K, V),
    /// Remove a key (absent keys are not an error).
    Remove(K),
}

/// What a batch did.
///
/// ```
/// use bi_collections::tree::BiTree;
/// use bi_collections::{ApplyBatch, BatchReport, Op};
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(1, 0);
/// let mut w = BiTree::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
/// let report = w.apply_batch(&[Op::Insert(1, 1), Op::Insert(1, 2), Op::Remove(1), Op::Remove(1)]);
/// let expected = BatchReport { applied: 4, inserted: 1, replaced: 1, removed: 1 };
/// assert_eq!(report.unwrap(), expected);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchReport {
    /// Operations applied.
    pub applied: usize,
    /// Inserts of new keys.
    pub inserted: usize,
    /// Inserts that replaced a value.
    pub replaced: usize,
    /// Removals of present keys.
    pub removed: usize,
}

/// A structure's single writer: applies a batch of operations and makes all of them
/// visible with one publication (one write-back batch and one fence for the batch).
///
/// ```
/// use bi_collections::{ApplyBatch, BiHashMap, BiTree, Op};
/// use bi_core::runtime::testing::Setup;
///
/// // One function for every single writer.
/// fn load(w: &mut impl ApplyBatch<u32, u32>) -> usize {
///     let ops: Vec<_> = (0..50).map(|k| Op::Insert(k, k)).collect();
///     w.apply_batch(&ops).unwrap().inserted
/// }
/// let s = Setup::new(2, 0);
/// let mut tree = BiTree::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
/// let mut map = BiHashMap::<u32, u32>::at(s.slot(1)).write_handle(s.writer(1)).unwrap();
/// assert_eq!((load(&mut tree), load(&mut map)), (50, 50));
/// ```
pub trait ApplyBatch<K, V> {
    /// Applies `ops` in order. On an error, the operations before the failing one may
    /// have been applied and published; the failing one and those after were not.
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_collections::{ApplyBatch, Op};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// let report = w.apply_batch(&[Op::Insert(1, 10), Op::Insert(2, 20), Op::Remove(1)]).unwrap();
    /// assert_eq!(report.applied, 3);
    /// // One publication for the batch: readers see all of it.
    /// let r = tree.read_handle(&s.nodes[1]).unwrap();
    /// assert_eq!((r.get(&1).unwrap(), r.get(&2).unwrap()), (None, Some(20)));
    /// ```
    fn apply_batch(&mut self, ops: &[Op<K, V>]) -> Result<BatchReport, CollectionError>;

    /// The value each of `ops` would replace or remove if the batch were applied now, in
    /// order (an operation sees the earlier ones' effect), put in `olds`; `false` if the
    /// structure cannot tell (the default), `olds` then left empty. A delegation server
    /// calls it before [`apply_batch`](Self::apply_batch) to return old values to its
    /// clients, as a local `insert` does. The tree and map write handles tell.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_collections::{ApplyBatch, Op};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiHashMap::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// w.insert(1, 10).unwrap();
    /// let ops = [Op::Insert(1, 11), Op::Remove(1), Op::Insert(2, 20)];
    /// let mut olds = Vec::new();
    /// assert!(w.old_values(&ops, &mut olds).unwrap());
    /// assert_eq!(olds, [Some(10), Some(11), None]);
    /// ```
    fn old_values(
        &self,
        ops: &[Op<K, V>],
        olds: &mut Vec<Option<V>>,
    ) -> Result<bool, CollectionError> {
        let _ = ops;
        olds.clear();
        Ok(false)
    }

    /// Applies `ops` as [`apply_batch`](Self::apply_batch) does, and leaves in `olds`
    /// the value each one replaced or removed ([`old_values`](Self::old_values)), or
    /// nothing if the structure cannot tell. What a delegation server calls: override it
    /// when the two steps must not be separated (a structure shared behind a lock takes
    /// the lock once).
    ///
    /// ```
    /// use bi_collections::tree::BiTree;
    /// use bi_collections::{ApplyBatch, EpochBonsai, Op};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiTree::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// let mut olds = Vec::new();
    /// w.apply_reporting(&[Op::Insert(1, 1), Op::Insert(1, 2)], &mut olds).unwrap();
    /// assert_eq!(olds, [None, Some(1)]);
    /// // A structure that cannot tell leaves `olds` empty.
    /// EpochBonsai::new().apply_reporting(&[Op::Insert(1, 1)], &mut olds).unwrap();
    /// assert!(olds.is_empty());
    /// ```
    fn apply_reporting(
        &mut self,
        ops: &[Op<K, V>],
        olds: &mut Vec<Option<V>>,
    ) -> Result<BatchReport, CollectionError> {
        if !self.old_values(ops, olds)? {
            olds.clear();
        }
        self.apply_batch(ops)
    }
}
