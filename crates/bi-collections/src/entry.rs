//! Read-modify-write on the writer's own handle: `update`, `get_or_insert_with`,
//! `compute`.
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

use crate::CollectionError;

/// The three operations read-modify-write is made of.
pub(crate) trait Keyed<K, V> {
    fn lookup(&self, key: &K) -> Result<Option<V>, CollectionError>;
    fn put(&mut self, key: K, value: V) -> Result<Option<V>, CollectionError>;
    fn delete(&mut self, key: &K) -> Result<Option<V>, CollectionError>;
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
