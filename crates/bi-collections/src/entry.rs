//! Read-modify-write and whole-structure changes on the writer's own handle: `update`,
//! `get_or_insert_with`, `compute`, `retain`, `clear`, `extend`.
//!
//! The writer is the only one that changes a structure, so a read followed by a write on
//! its handle cannot race with another write: these are a lookup and at most one
//! [`insert`](crate::TreeWriteHandle::insert) or [`remove`](crate::TreeWriteHandle::remove),
//! each published before it returns. The closures run in the writer's process; other
//! processes ship operations instead ([`Op`](crate::Op)).
//!
//! Written once here, over the three operations every write handle has ([`Keyed`]), and
//! exposed as inherent methods of [`TreeWriteHandle`](crate::TreeWriteHandle) and
//! [`MapWriteHandle`](crate::MapWriteHandle).

use crate::{ApplyBatch, BatchReport, CollectionError, Op};
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// Operations per batch of a whole-structure change (one publication each).
const CHUNK: usize = 4096;

/// The operations read-modify-write and whole-structure changes are made of.
pub(crate) trait Keyed<K, V>: ApplyBatch<K, V> {
    fn lookup(&self, key: &K) -> Result<Option<V>, CollectionError>;
    fn put(&mut self, key: K, value: V) -> Result<Option<V>, CollectionError>;
    fn delete(&mut self, key: &K) -> Result<Option<V>, CollectionError>;
    /// Every entry, as the writer last published it.
    fn entries(&self) -> Result<Vec<(K, V)>, CollectionError>;
}

/// Removes every entry for which `keep` says no, in batches of [`CHUNK`] removals (each
/// published as one version); returns how many were removed. On an error the batches
/// before it are published.
pub(crate) fn retain<K, V, S: Keyed<K, V>>(
    s: &mut S,
    mut keep: impl FnMut(&K, &V) -> bool,
) -> Result<usize, CollectionError> {
    let doomed: Vec<Op<K, V>> = s
        .entries()?
        .into_iter()
        .filter(|(k, v)| !keep(k, v))
        .map(|(k, _)| Op::Remove(k))
        .collect();
    for chunk in doomed.chunks(CHUNK) {
        s.apply_batch(chunk)?;
    }
    Ok(doomed.len())
}

/// What the earlier operations of a batch left at a key: `Some(state)` once one touched
/// it. A `BTreeMap` for ordered keys, a `HashMap` for hashed ones.
pub(crate) trait Overlay<'a, K, V>: Default {
    fn state(&self, key: &K) -> Option<&Option<V>>;
    fn set(&mut self, key: &'a K, value: Option<V>);
}

impl<'a, K: Ord, V> Overlay<'a, K, V> for BTreeMap<&'a K, Option<V>> {
    fn state(&self, key: &K) -> Option<&Option<V>> {
        self.get(key)
    }
    fn set(&mut self, key: &'a K, value: Option<V>) {
        self.insert(key, value);
    }
}

impl<'a, K: Eq + Hash, V> Overlay<'a, K, V> for HashMap<&'a K, Option<V>> {
    fn state(&self, key: &K) -> Option<&Option<V>> {
        self.get(key)
    }
    fn set(&mut self, key: &'a K, value: Option<V>) {
        self.insert(key, value);
    }
}

/// The value each of `ops` replaces or removes, in order: the writer's own lookup the
/// first time a key is touched, then what the batch's earlier operations left there
/// ([`ApplyBatch::old_values`]).
pub(crate) fn old_values<'a, K, V: Clone, S: Keyed<K, V>, O: Overlay<'a, K, V>>(
    s: &S,
    ops: &'a [Op<K, V>],
    olds: &mut Vec<Option<V>>,
) -> Result<bool, CollectionError> {
    olds.clear();
    let mut overlay = O::default();
    for (i, op) in ops.iter().enumerate() {
        let key = match op {
            Op::Insert(k, _) | Op::Remove(k) => k,
        };
        let old = match overlay.state(key) {
            Some(state) => state.clone(),
            None => s.lookup(key)?,
        };
        olds.push(old);
        if i + 1 == ops.len() {
            // Nothing after it reads the overlay (a batch of one allocates nothing).
            break;
        }
        overlay.set(
            key,
            match op {
                Op::Insert(_, v) => Some(v.clone()),
                Op::Remove(_) => None,
            },
        );
    }
    Ok(true)
}

/// Inserts every entry of `entries`, in batches of [`CHUNK`] (each published as one
/// version); what the batches did, summed.
pub(crate) fn extend<K, V, S: Keyed<K, V>>(
    s: &mut S,
    entries: impl IntoIterator<Item = (K, V)>,
) -> Result<BatchReport, CollectionError> {
    let mut total = BatchReport::default();
    let mut ops = Vec::with_capacity(CHUNK);
    let mut entries = entries.into_iter().peekable();
    while entries.peek().is_some() {
        ops.clear();
        ops.extend(entries.by_ref().take(CHUNK).map(|(k, v)| Op::Insert(k, v)));
        total += s.apply_batch(&ops)?;
    }
    Ok(total)
}

/// Replaces the value of a present `key` with `f(value)`; returns the old value (`None`,
/// and nothing written, for an absent key).
pub(crate) fn update<K, V, S: Keyed<K, V>>(
    s: &mut S,
    key: K,
    f: impl FnOnce(&V) -> V,
) -> Result<Option<V>, CollectionError> {
    match s.lookup(&key)? {
        Some(old) => {
            let new = f(&old);
            s.put(key, new)?;
            Ok(Some(old))
        }
        None => Ok(None),
    }
}

/// The value of `key`, inserting `f()` first if it is absent.
pub(crate) fn get_or_insert_with<K, V: Clone, S: Keyed<K, V>>(
    s: &mut S,
    key: K,
    f: impl FnOnce() -> V,
) -> Result<V, CollectionError> {
    if let Some(v) = s.lookup(&key)? {
        return Ok(v);
    }
    let v = f();
    s.put(key, v.clone())?;
    Ok(v)
}

/// Sets `key` to `f(current value)`: a value inserts or replaces, `None` removes (an
/// absent key stays absent). Returns the old value.
pub(crate) fn compute<K, V: Clone, S: Keyed<K, V>>(
    s: &mut S,
    key: K,
    f: impl FnOnce(Option<V>) -> Option<V>,
) -> Result<Option<V>, CollectionError> {
    let old = s.lookup(&key)?;
    match (f(old.clone()), &old) {
        (Some(new), _) => {
            s.put(key, new)?;
        }
        (None, Some(_)) => {
            s.delete(&key)?;
        }
        (None, None) => {}
    }
    Ok(old)
}
