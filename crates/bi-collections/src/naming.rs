//! Named structures: found by name in the region, typed, with one writer.
//!
//! A structure made by name ([`BiTree::named`](crate::BiTree::named)) lives in a root
//! directory entry of its own ([`Region::structure`]): the entry records a fingerprint of
//! the structure's kind and of its key and value types, so opening it as another kind or
//! with other types is an error, never a reinterpretation of its bytes; the entry's slot
//! holds the structure's root word and its writer record ([`bi_core::runtime::role`]).
//! Entries are made under the pool lock, so processes of several nodes may open one name
//! at the same moment and find one structure.
//!
//! The fingerprint is built from the types' names, sizes and alignments as this build of
//! the program sees them: the same program, or programs sharing the key and value type
//! definitions, agree on it; a rename of a type (or a compiler that spells a name
//! differently) makes an existing structure refuse to open, which is the safe side.

use crate::CollectionError;
use bi_core::heap::Heap;
use bi_core::mem::MemView;
use bi_core::region::Region;
use bi_core::runtime::lock::{again_if_lease_lost, is_lease_lost};
use bi_core::runtime::{NodeRuntime, Role, Scope, Writer};
use std::time::Duration;

/// How long opening a structure or taking its writer role waits for the pool lock.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(5);

/// The fingerprint of a structure of kind `kind` with keys `K` and values `V` (never 0).
///
/// ```
/// use bi_collections::naming::fingerprint;
///
/// let a = fingerprint::<u64, u64>("BiTree");
/// assert_eq!(a, fingerprint::<u64, u64>("BiTree")); // stable within a build
/// assert_ne!(a, fingerprint::<u64, u32>("BiTree")); // other value type
/// assert_ne!(a, fingerprint::<u64, u64>("BiHashMap")); // other kind
/// assert_ne!(a, 0);
/// ```
pub fn fingerprint<K, V>(kind: &str) -> u64 {
    let (k, v) = (std::any::type_name::<K>(), std::any::type_name::<V>());
    let sizes = [
        size_of::<K>(),
        align_of::<K>(),
        size_of::<V>(),
        align_of::<V>(),
    ];
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3);
        }
        // A separator, so that ("ab", "c") and ("a", "bc") differ.
        h = (h ^ 0xFF).wrapping_mul(0x0000_0100_0000_01B3);
    };
    eat(kind.as_bytes());
    eat(k.as_bytes());
    eat(v.as_bytes());
    for s in sizes {
        eat(&(s as u64).to_le_bytes());
    }
    h.max(1)
}

/// The slot of the structure named `name` with fingerprint `types`, made if missing.
///
/// A structure that exists is found without the pool lock (entries are only ever added,
/// and the root directory is read from memory), so opening a handle per thread costs a
/// directory lookup, not a lock round; only making one, or a lookup that fails for any
/// reason (a type mismatch, an entry another node is writing right now), takes the lock
/// and looks again. A process that joined its node finds only: it takes no lock.
pub(crate) fn open_slot<M: MemView>(
    region: &Region,
    rt: &NodeRuntime<M>,
    name: &str,
    types: u64,
) -> Result<usize, CollectionError> {
    let found = region.structure(rt.view(), name, types, false);
    if let Ok(Some((slot, _))) = found {
        return Ok(slot);
    }
    if rt.is_joined() {
        return match found {
            Ok(Some((slot, _))) => Ok(slot),
            Ok(None) => Err(CollectionError::NotFound {
                name: name.to_owned(),
            }),
            Err(e) => Err(CollectionError::Runtime(e.into())),
        };
    }
    let make = || {
        let guard = rt.lock(LOCK_WAIT)?;
        guard.check()?;
        match region.structure(rt.view(), name, types, true) {
            Ok(Some((slot, _))) => Ok(slot),
            Ok(None) => Err(CollectionError::Corrupt {
                reason: "the root directory made no entry",
            }),
            Err(e) => Err(CollectionError::Runtime(e.into())),
        }
    };
    again_if_lease_lost(
        make,
        |e| matches!(e, CollectionError::Runtime(e) if is_lease_lost(e)),
    )
}

/// How a new writer of a named structure starts.
pub(crate) enum Start {
    /// The structure never had a root: make it empty.
    Fresh,
    /// An earlier writer left the structure: adopt it. `foreign` when that writer ran on
    /// another node (its lines are not in this node's cache).
    Adopt { foreign: bool },
}

/// Takes the writer role of the named structure at `slot` for this process and sets
/// `writer`'s scope; says whether to make the structure or adopt it.
pub(crate) fn take_role<M: MemView, H: Heap>(
    rt: &NodeRuntime<M>,
    slot: usize,
    named: bool,
    scope: Scope,
    writer: &mut Writer<M, H>,
) -> Result<(Role<M>, Start), CollectionError> {
    if !named {
        return Err(CollectionError::Corrupt {
            reason: "take_writer needs a structure opened by name (`named`)",
        });
    }
    let role = rt.take_writer_role(slot, LOCK_WAIT)?;
    // Every step from here to the handle (made fresh or adopted: `with_role` ends it)
    // waits out a node that holds ring room inside its lease, stopped or too loaded to
    // pass: a process that opens a structure must not fail for a stall another node
    // recovers from.
    writer.set_adopting(true);
    writer.set_scope(scope)?;
    let previous = role.previous();
    // A writer that died between taking the role and publishing a first root left
    // nothing to adopt.
    let start = if previous.takes == 0 || writer.read_slot(slot)? == 0 {
        Start::Fresh
    } else {
        Start::Adopt {
            foreign: previous.node != rt.node() as u64 + 1,
        }
    };
    Ok((role, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_tell_kinds_and_types_apart() {
        let a = fingerprint::<u64, u64>("BiTree");
        assert_eq!(a, fingerprint::<u64, u64>("BiTree"));
        assert_ne!(a, fingerprint::<u64, u64>("BiHashMap"));
        assert_ne!(a, fingerprint::<u64, u32>("BiTree"));
        assert_ne!(a, fingerprint::<i64, u64>("BiTree"));
        assert_ne!(
            fingerprint::<[u8; 2], u8>("t"),
            fingerprint::<[u8; 1], [u8; 2]>("t")
        );
    }
}
