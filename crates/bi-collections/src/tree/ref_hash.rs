//! The set a batch keeps of the nodes it created and has not published: probed once per
//! node a batch copies. A single update creates a couple of dozen nodes, so the set is a
//! vector searched linearly until it outgrows [`SMALL`], and only then a hash set, whose
//! hash costs a multiply, not SipHash's rounds (references are not chosen by users, so
//! flooding is not a concern). So a single update keeps no hash set at all.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// Up to this many nodes, the set is a vector.
const SMALL: usize = 64;

/// Hashes a raw link (a line-aligned offset with a generation on top): one 128-bit
/// multiply, folded, so that the low bits (bucket index) and high bits both mix.
#[derive(Default)]
pub(crate) struct LinkHasher(u64);

impl Hasher for LinkHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, x: u64) {
        let p = u128::from(x ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835);
        self.0 = (p >> 64) as u64 ^ p as u64;
    }

    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
}

type RefSet<R> = HashSet<R, BuildHasherDefault<LinkHasher>>;

/// A set of node references: a vector while small, a hash set once large.
#[derive(Debug)]
pub(crate) enum NodeSet<R> {
    Small(Vec<R>),
    Large(RefSet<R>),
}

impl<R> Default for NodeSet<R> {
    fn default() -> Self {
        NodeSet::Small(Vec::new())
    }
}

impl<R: Copy + Eq + Hash> NodeSet<R> {
    /// Adds nodes (each not yet in the set).
    pub(crate) fn extend(&mut self, nodes: impl IntoIterator<Item = R>) {
        match self {
            NodeSet::Small(v) => {
                v.extend(nodes);
                if v.len() > SMALL {
                    *self = NodeSet::Large(v.drain(..).collect());
                }
            }
            NodeSet::Large(set) => set.extend(nodes),
        }
    }

    /// Removes `r`; whether it was there.
    pub(crate) fn remove(&mut self, r: &R) -> bool {
        match self {
            NodeSet::Small(v) => match v.iter().position(|x| x == r) {
                Some(i) => {
                    v.swap_remove(i);
                    true
                }
                None => false,
            },
            NodeSet::Large(set) => set.remove(r),
        }
    }

    /// Whether the set is empty.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            NodeSet::Small(v) => v.is_empty(),
            NodeSet::Large(set) => set.is_empty(),
        }
    }

    /// Empties the set (a small set keeps its vector's capacity).
    pub(crate) fn clear(&mut self) {
        match self {
            NodeSet::Small(v) => v.clear(),
            NodeSet::Large(_) => *self = NodeSet::default(),
        }
    }

    /// Every node, the set left empty.
    pub(crate) fn take_all(&mut self) -> Vec<R> {
        match std::mem::take(self) {
            NodeSet::Small(v) => v,
            NodeSet::Large(set) => set.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_sets_agree() {
        let mut s = NodeSet::default();
        s.extend(0u64..10);
        assert!(matches!(s, NodeSet::Small(_)));
        assert!(s.remove(&3) && !s.remove(&3));
        s.extend(10..200);
        assert!(matches!(s, NodeSet::Large(_)));
        assert!(s.remove(&150) && !s.remove(&3) && s.remove(&0));
        let mut all = s.take_all();
        all.sort();
        let want: Vec<u64> = (1..200).filter(|&x| x != 3 && x != 150).collect();
        assert_eq!(all, want);
        assert!(s.is_empty());
    }
}
