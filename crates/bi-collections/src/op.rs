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

impl<K, V> Op<K, V> {
    /// The key the operation changes.
    pub(crate) fn key(&self) -> &K {
        match self {
            Op::Insert(k, _) | Op::Remove(k) => k,
        }
    }

    /// The same operation with its key and value mapped, both with `cx` (the first
    /// error if any).
    pub(crate) fn try_map<C, L, W, E>(
        &self,
        cx: &mut C,
        key: impl FnOnce(&mut C, &K) -> Result<L, E>,
        value: impl FnOnce(&mut C, &V) -> Result<W, E>,
    ) -> Result<Op<L, W>, E> {
        Ok(match self {
            Op::Insert(k, v) => Op::Insert(key(cx, k)?, value(cx, v)?),
            Op::Remove(k) => Op::Remove(key(cx, k)?),
        })
    }
}

/// What an operation expects to find at its key before it may apply: the condition of
/// an insert-if-absent or a compare-and-set that other processes can ask of a writer
/// without shipping code ([`ApplyBatch::apply_conditional`]).
///
/// ```
/// use bi_collections::Condition;
///
/// let same = |a: &u32, b: &u32| a == b;
/// assert!(Condition::Absent.admits(None, same));
/// assert!(!Condition::Absent.admits(Some(&1), same));
/// assert!(Condition::Equals(1).admits(Some(&1), same));
/// assert!(!Condition::Equals(1).admits(None, same));
/// assert!(Condition::<u32>::Always.admits(Some(&5), same) && Condition::<u32>::Present.admits(Some(&5), same));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Condition<V> {
    /// Apply whatever is there (a plain insert or remove).
    #[default]
    Always,
    /// Apply only if the key is absent (insert-if-absent).
    Absent,
    /// Apply only if the key is present (replace-if-present).
    Present,
    /// Apply only if the key holds this value (compare-and-set, compare-and-remove).
    Equals(V),
}

impl<V> Condition<V> {
    /// The same condition with its expected value mapped by `f` (its error if it fails).
    pub(crate) fn try_map<W, E>(
        &self,
        f: impl FnOnce(&V) -> Result<W, E>,
    ) -> Result<Condition<W>, E> {
        Ok(match self {
            Condition::Always => Condition::Always,
            Condition::Absent => Condition::Absent,
            Condition::Present => Condition::Present,
            Condition::Equals(v) => Condition::Equals(f(v)?),
        })
    }

    /// Whether an operation with this condition applies when it finds `found` at its key
    /// (`same` compares values; the delegation server compares their bytes).
    ///
    /// ```
    /// use bi_collections::Condition;
    ///
    /// let by_bytes = |a: &[u8; 2], b: &[u8; 2]| a == b;
    /// assert!(Condition::Present.admits(Some(&[0, 1]), by_bytes));
    /// assert!(!Condition::Equals([1, 1]).admits(Some(&[0, 1]), by_bytes));
    /// ```
    pub fn admits(&self, found: Option<&V>, same: impl Fn(&V, &V) -> bool) -> bool {
        match (self, found) {
            (Condition::Always, _) => true,
            (Condition::Absent, found) => found.is_none(),
            (Condition::Present, found) => found.is_some(),
            (Condition::Equals(expected), Some(found)) => same(expected, found),
            (Condition::Equals(_), None) => false,
        }
    }

    /// Whether this condition admits every value (an unconditional operation).
    pub(crate) fn is_always(&self) -> bool {
        matches!(self, Condition::Always)
    }
}

/// What a conditional write answers: the value it found at its key, `Ok` if the write
/// applied (the value it replaced or removed), `Err` if its condition refused it.
pub type Decided<V> = Result<Option<V>, Option<V>>;

/// The value a conditional write found at its key, whether it applied or not: what
/// `insert`, `remove` and `insert_if_absent` return.
///
/// ```
/// use bi_collections::found_value;
///
/// assert_eq!(found_value::<u8>(Ok(Some(1))), Some(1));
/// assert_eq!(found_value::<u8>(Err(Some(2))), Some(2)); // refused: 2 is there
/// ```
pub fn found_value<V>(decided: Decided<V>) -> Option<V> {
    decided.unwrap_or_else(|v| v)
}

/// A compare-and-set's (or compare-and-remove's) answer: `Ok` with the value it
/// replaced (it held the expected one), `Err` with what the key held instead.
///
/// ```
/// use bi_collections::compared_value;
///
/// assert_eq!(compared_value::<u8>(Ok(Some(1))), Ok(1));
/// assert_eq!(compared_value::<u8>(Err(None)), Err(None)); // absent
/// assert_eq!(compared_value::<u8>(Err(Some(3))), Err(Some(3)));
/// ```
pub fn compared_value<V>(decided: Decided<V>) -> Result<V, Option<V>> {
    decided.and_then(|v| v.ok_or(None))
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

impl std::ops::AddAssign for BatchReport {
    /// Adds what another batch did.
    ///
    /// ```
    /// use bi_collections::BatchReport;
    ///
    /// let mut total = BatchReport { applied: 2, inserted: 2, ..Default::default() };
    /// total += BatchReport { applied: 1, removed: 1, ..Default::default() };
    /// assert_eq!(total, BatchReport { applied: 3, inserted: 2, replaced: 0, removed: 1 });
    /// ```
    fn add_assign(&mut self, other: BatchReport) {
        self.applied += other.applied;
        self.inserted += other.inserted;
        self.replaced += other.replaced;
        self.removed += other.removed;
    }
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

    /// A bound on the length of every value the structure holds, counting only the
    /// bytes that do not fit a value's word (`out_of_line_len`):
    /// `Some(0)` for plain values. `None` (the default) when the structure cannot tell. A
    /// delegation server reports old values back through a bounded reply area, and
    /// looks up what each request will find before applying it only when this bound
    /// exceeds the area.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_collections::ApplyBatch;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiHashMap::<u32, String>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// assert_eq!(w.longest_value(), Some(0));
    /// w.insert(1, "a value longer than sixteen bytes".into()).unwrap();
    /// assert_eq!(w.longest_value(), Some(33));
    /// ```
    fn longest_value(&self) -> Option<usize> {
        None
    }

    /// Makes room for `additional` more keys before a bulk load, if the structure sizes
    /// itself (a hash map rebuilds its table once instead of at every doubling). The
    /// default does nothing.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_collections::{ApplyBatch, Op};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiHashMap::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// ApplyBatch::reserve(&mut w, 1_000).unwrap();
    /// let reserved = w.capacity();
    /// w.apply_batch(&(0..1_000).map(|k| Op::Insert(k, k)).collect::<Vec<_>>()).unwrap();
    /// assert_eq!(w.capacity(), reserved); // the load did not grow the table
    /// ```
    fn reserve(&mut self, additional: usize) -> Result<(), CollectionError> {
        let _ = additional;
        Ok(())
    }

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

    /// Whether a batch that fails for lack of heap (`CollectionError::is_no_room`)
    /// leaves in the `olds` of [`apply_reporting`](Self::apply_reporting) (and the
    /// `found` of [`apply_conditional`](Self::apply_conditional)) exactly one value for each
    /// operation it applied or refused: a prefix of the batch, after which nothing was
    /// applied. A delegation server then reports the failing operation
    /// ([`Outcome::NoRoom`](crate::delegate::Outcome::NoRoom)) and keeps the ones after
    /// it for the next batch, instead of stopping. The default: `false` (a server stops
    /// at such an error).
    fn reports_applied_prefix(&self) -> bool {
        false
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

    /// Applies `ops` as [`apply_reporting`](Self::apply_reporting) does, except that an
    /// operation whose condition (`conditions[i]`; [`Condition::Always`] past the end of `conditions`)
    /// refuses the value it finds is skipped. `found` gets, for every operation, the
    /// value it found at its key (which it replaced or removed if it applied), or is left
    /// empty if the structure cannot tell; a conditional operation is then skipped too, since
    /// its condition cannot be decided. `same` compares two values.
    ///
    /// Each conditional operation is decided on the value it finds after every operation
    /// before it is applied, so the default publishes the unconditional runs between
    /// conditional operations as batches and each conditional operation on its own (a batch
    /// without conditions is one [`apply_reporting`](Self::apply_reporting)). The order of
    /// effects is the order of `ops`.
    ///
    /// ```
    /// use bi_collections::map::BiHashMap;
    /// use bi_collections::{ApplyBatch, Condition, Op};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = BiHashMap::<u32, u32>::at(s.slot(0)).write_handle(s.writer(0)).unwrap();
    /// let ops = [Op::Insert(1, 10), Op::Insert(1, 11), Op::Insert(1, 12), Op::Remove(1)];
    /// // Insert-if-absent (refused: 10 is there), compare-and-set from 10 (applies),
    /// // compare-and-remove of 10 (refused: 12 is there now).
    /// let conditions = [Condition::Always, Condition::Absent, Condition::Equals(10), Condition::Equals(10)];
    /// let mut found = Vec::new();
    /// let report = w.apply_conditional(&ops, &conditions, |a, b| a == b, &mut found).unwrap();
    /// assert_eq!(found, [None, Some(10), Some(10), Some(12)]);
    /// assert_eq!((report.applied, w.get(&1)), (2, Some(12)));
    /// ```
    fn apply_conditional(
        &mut self,
        ops: &[Op<K, V>],
        conditions: &[Condition<V>],
        same: fn(&V, &V) -> bool,
        found: &mut Vec<Option<V>>,
    ) -> Result<BatchReport, CollectionError> {
        let condition = |i: usize| conditions.get(i).filter(|g| !g.is_always());
        if (0..ops.len()).all(|i| condition(i).is_none()) {
            return self.apply_reporting(ops, found);
        }
        found.clear();
        let (mut total, mut told, mut run, mut one) = (BatchReport::default(), true, 0, Vec::new());
        for i in (0..=ops.len()).filter(|&i| i == ops.len() || condition(i).is_some()) {
            let applied = self.apply_reporting(&ops[run..i], &mut one);
            // On an error, `one` holds what the run applied before it failed.
            found.append(&mut one);
            total += applied?;
            told &= found.len() == i;
            run = i + 1;
            let (Some(g), Some(op)) = (condition(i), ops.get(i)) else {
                break;
            };
            if !self.old_values(std::slice::from_ref(op), &mut one)? || one.len() != 1 {
                told = false;
                continue;
            }
            if g.admits(one[0].as_ref(), same) {
                total += self.apply_batch(std::slice::from_ref(op))?;
            }
            found.append(&mut one);
        }
        if !told {
            found.clear();
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::Condition;

    #[test]
    fn only_always_is_unconditional() {
        assert!(Condition::<u8>::Always.is_always());
        assert!(!Condition::Equals(3u8).is_always());
        assert!(!Condition::<u8>::Absent.is_always());
    }
}
