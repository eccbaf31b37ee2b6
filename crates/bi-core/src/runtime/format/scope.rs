//! Write notices scoped per structure: which structure a log entry is about, and which
//! structures a node's readers use.
//!
//! A writer tags every entry it logs with its current [`Scope`]; a node's pass under
//! [`Policy::Accessed`](crate::runtime::Policy::Accessed) invalidates an entry's lines only if one
//! of the node's readers declared that scope. So a node whose readers never read a
//! structure pays nothing for its updates, and a structure whose readers all sit on the
//! writer's node costs no invalidation anywhere.
//!
//! # Why skipping is sound
//!
//! - *Staleness.* A node that starts reading a structure it skipped first drops every
//!   line it caches of the heap and the root directory (`ScopeSet::insert` returns
//!   `true` once, and the caller invalidates), so what it skipped cannot be in its cache
//!   when its first reader of the scope enters. The pass decides per entry under the
//!   set's lock, after it read the tails: if it missed a declaration, that declaration's
//!   invalidation came after the tail read, so after the entries' lines were in memory.
//! - *Reuse.* Skipping a freed entry also means the node's readers are not waited for
//!   before that memory is reused. None of them can hold a link into it: they never
//!   declared the structure, and a reader that declares it later starts from the
//!   unlinked version in memory. A stale line of the block that some prefetch left in
//!   the cache is caught by the stamp of the block's next incarnation.
//! - *Collisions.* A scope is 16 bits of a hash: two structures may share one. That only
//!   makes a node invalidate more than it needs, never less. [`Scope::ALL`] (what raw
//!   writers log by default) is invalidated everywhere.
//!
//! Declarations are never withdrawn: a node that read a structure once keeps paying for
//! its notices for the life of the runtime.

use crate::primitive::sync::Mutex;
use std::sync::PoisonError;

/// Which structure a log entry is about: 16 bits of a hash of its root slot, or
/// [`Scope::ALL`].
///
/// ```
/// use bi_core::runtime::Scope;
///
/// let s = Scope::of_slot(4096);
/// assert_ne!(s, Scope::ALL);
/// assert_eq!(s, Scope::of_slot(4096));
/// assert_eq!(Scope::from_raw(s.raw()), s);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Scope(u16);

impl Scope {
    /// Not about one structure: every node invalidates it.
    pub const ALL: Scope = Scope(0);

    /// The scope of the structure whose root lives in the slot at `slot`.
    ///
    /// ```
    /// use bi_core::runtime::Scope;
    ///
    /// let a = Scope::of_slot(64);
    /// assert_ne!(a, Scope::ALL); // never the catch-all
    /// assert_eq!(a, Scope::of_slot(64));
    /// ```
    pub fn of_slot(slot: usize) -> Scope {
        let h = ((slot as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48) as u16;
        Scope(h.max(1))
    }

    /// The scope stored as `raw`.
    ///
    /// ```
    /// use bi_core::runtime::Scope;
    ///
    /// assert_eq!(Scope::from_raw(0), Scope::ALL);
    /// ```
    pub const fn from_raw(raw: u16) -> Scope {
        Scope(raw)
    }

    /// The stored form.
    ///
    /// ```
    /// use bi_core::runtime::Scope;
    ///
    /// assert_eq!(Scope::ALL.raw(), 0);
    /// assert_ne!(Scope::of_slot(128).raw(), 0);
    /// ```
    pub const fn raw(self) -> u16 {
        self.0
    }
}

const WORDS: usize = (u16::MAX as usize + 1) / 64;

/// The scopes a node's readers declared: one bit per scope.
pub(crate) struct ScopeSet {
    bits: Mutex<Vec<u64>>,
}

impl ScopeSet {
    pub(crate) fn new() -> ScopeSet {
        ScopeSet {
            bits: Mutex::new(vec![0; WORDS]),
        }
    }

    /// Adds `scope`; `true` if it was not there (the caller must then drop every cached
    /// line of the heap and the root directory before a reader of the scope enters).
    pub(crate) fn insert(&self, scope: Scope) -> bool {
        if scope == Scope::ALL {
            return false;
        }
        let mut bits = self.bits.lock().unwrap_or_else(PoisonError::into_inner);
        let (w, b) = (scope.0 as usize / 64, 1u64 << (scope.0 % 64));
        let new = bits[w] & b == 0;
        bits[w] |= b;
        new
    }

    /// Runs `f` with a membership test that holds the set still.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&dyn Fn(Scope) -> bool) -> R) -> R {
        let bits = self.bits.lock().unwrap_or_else(PoisonError::into_inner);
        let contains =
            |s: Scope| s == Scope::ALL || bits[s.0 as usize / 64] & (1u64 << (s.0 % 64)) != 0;
        f(&contains)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn insert_reports_new_scopes_once() {
        let set = ScopeSet::new();
        let s = Scope::of_slot(128);
        assert!(set.with(|c| c(Scope::ALL) && !c(s)));
        assert!(set.insert(s));
        assert!(!set.insert(s));
        assert!(!set.insert(Scope::ALL));
        assert!(set.with(|c| c(s)));
    }

    /// A scope stored in a record may be any 16-bit value: the highest ones too have a
    /// bit of their own, and declaring one declares no other.
    #[test]
    fn every_scope_has_a_bit_of_its_own() {
        let set = ScopeSet::new();
        let edges = [1u16, 63, 64, 65_471, 65_472, u16::MAX];
        for (i, &raw) in edges.iter().enumerate() {
            assert!(set.insert(Scope::from_raw(raw)), "{raw}");
            set.with(|c| {
                for (j, &other) in edges.iter().enumerate() {
                    assert_eq!(c(Scope::from_raw(other)), j <= i, "{raw} then {other}");
                }
            });
        }
    }

    #[test]
    fn slots_spread_over_scopes() {
        let scopes: std::collections::HashSet<_> =
            (0..1000).map(|i| Scope::of_slot(4096 + 8 * i)).collect();
        assert!(scopes.len() > 990, "{}", scopes.len());
        assert!(!scopes.contains(&Scope::ALL));
    }
}
