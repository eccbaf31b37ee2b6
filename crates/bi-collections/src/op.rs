//! Write operations as values: what a delegating client sends and a writer applies in
//! batches.

use crate::CollectionError;

/// One write to a key-value structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op<K, V> {
    /// Insert or replace the value of a key.
    Insert(K, V),
    /// Remove a key (absent keys are not an error).
    Remove(K),
}

/// What a batch did.
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
pub trait ApplyBatch<K, V> {
    /// Applies `ops` in order. On an error, the operations before the failing one may
    /// have been applied and published; the failing one and those after were not.
    fn apply_batch(&mut self, ops: &[Op<K, V>]) -> Result<BatchReport, CollectionError>;
}
