//! The writer's copies of the nodes it created lately.
//!
//! Every update reads back nodes the same update just created: a level's balance reads
//! the size of the child the level below made, and the next update walks the path the
//! last one copied. The line such a node lives in was written a moment ago, but its
//! memory may have been dropped from every cache when it was retired last time (other
//! nodes' passes drop retired lines, and on one machine their caches are this one's): the
//! store waits for the line to come back from memory, and a read of it waits as long,
//! once per level. A node never changes once it is sealed, so the writer can keep what it
//! wrote in its own memory and answer such reads from there. A copy is exact while its
//! node lives, and it leaves when the node is given back or retired
//! ([`forget`](Recent::forget)), so a link never finds the copy of an older node that
//! had the same block.

use super::algo::Parts;

/// How many copies are kept: about two paths of a tree of a million keys.
const SLOTS: usize = 64;

/// A kept copy: the node's link and its fields.
type Kept<K, V> = (u64, Parts<K, V, u64>);

/// Copies of created nodes, by link, in a direct-mapped table (a node whose slot another
/// takes is read from its line again).
#[derive(Debug)]
pub(super) struct Recent<K, V> {
    slots: Box<[Option<Kept<K, V>>; SLOTS]>,
}

impl<K: Copy, V: Copy> Default for Recent<K, V> {
    fn default() -> Self {
        Recent {
            slots: Box::new([None; SLOTS]),
        }
    }
}

impl<K: Copy, V: Copy> Recent<K, V> {
    /// Nodes take one line each: the line index spreads neighbours over the slots.
    fn slot(link: u64) -> usize {
        (link as usize >> 6) % SLOTS
    }

    /// Keeps the copy of the node just created at `link`.
    pub(super) fn keep(&mut self, link: u64, parts: Parts<K, V, u64>) {
        self.slots[Self::slot(link)] = Some((link, parts));
    }

    /// The copy of the live node at `link`, if it is kept.
    #[inline]
    pub(super) fn get(&self, link: u64) -> Option<Parts<K, V, u64>> {
        match self.slots[Self::slot(link)] {
            Some((at, parts)) if at == link => Some(parts),
            _ => None,
        }
    }

    /// Drops the copy of the node at `link`, which is being given back or retired.
    pub(super) fn forget(&mut self, link: u64) {
        let slot = &mut self.slots[Self::slot(link)];
        if matches!(slot, Some((at, _)) if *at == link) {
            *slot = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(size: usize) -> Parts<u64, u64, u64> {
        Parts {
            key: 1,
            value: 2,
            left: 0,
            right: 0,
            size,
        }
    }

    #[test]
    fn a_copy_answers_only_its_own_link_until_forgotten() {
        let mut r = Recent::<u64, u64>::default();
        r.keep(64, parts(1));
        assert_eq!(r.get(64).map(|p| p.size), Some(1));
        // The same block under another generation (another link) is not this node.
        let other = 64 | (7 << 48);
        assert!(r.get(other).is_none());
        r.forget(other); // not the kept one: it stays
        assert!(r.get(64).is_some());
        // A node of the next line has a slot of its own: both copies stay.
        r.keep(128, parts(2));
        assert_eq!(r.get(64).map(|p| p.size), Some(1));
        assert_eq!(r.get(128).map(|p| p.size), Some(2));
        // A node taking the same slot displaces the copy.
        let same_slot = 64 + 64 * SLOTS as u64;
        r.keep(same_slot, parts(3));
        assert!(r.get(64).is_none());
        assert_eq!(r.get(same_slot).map(|p| p.size), Some(3));
        r.forget(same_slot);
        assert!(r.get(same_slot).is_none());
    }
}
