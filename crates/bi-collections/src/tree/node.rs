//! The node as it sits in shared memory: plain bytes, no padding, links as raw words.

use super::algo::Parts;
use bytemuck::{Pod, Zeroable};
use std::fmt;

/// One node of a [`BiTree`](super::BiTree) in shared memory.
///
/// The layout is `key | value | left | right | size`, packed, with a 64-bit `size` so that
/// a node of word-sized keys and values is a whole number of words (the read path moves
/// it word by word): with `u64` keys and values that is 40 bytes, which the runtime
/// stores in one 64-byte line beside the line's 8-byte stamp (up to 56 bytes of node fit
/// one line: keys and values of up to 32 bytes together). `left`
/// and `right` are raw [`Link`](bi_core::runtime::Link)s (offset and generation; zero is
/// an empty subtree) and `size` counts the nodes of the subtree rooted here.
///
/// Fields are read by copy (the struct is packed, so no reference to a field is ever
/// taken).
///
/// ```
/// use bi_collections::tree::{BiTree, Node};
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(1, 0);
/// let tree = BiTree::<u32, u32>::at(s.slot(0));
/// let mut w = tree.write_handle(s.writer(0)).unwrap();
/// for k in 1..=3 {
///     w.insert(k, k * 10).unwrap();
/// }
/// let r = tree.read_handle(&s.nodes[0]).unwrap();
/// let guard = r.reader().enter();
/// let root = guard.load::<Node<u32, u32>>(tree.slot()).unwrap().unwrap();
/// assert_eq!(root.size(), 3);
/// assert_eq!(root.value(), root.key() * 10);
/// ```
#[derive(Clone, Copy)]
#[repr(C, packed)]
pub struct Node<K, V> {
    key: K,
    value: V,
    left: u64,
    right: u64,
    size: u64,
}

// SAFETY: `Node` is `repr(C, packed)`, so it has no padding bytes anywhere (packed
// removes inter-field and trailing padding); every field is `Zeroable` (`K: Pod`, `V: Pod`,
// integers), so the all-zero bit pattern is a valid `Node`.
unsafe impl<K: Pod, V: Pod> Zeroable for Node<K, V> {}

// SAFETY: `repr(C, packed)` with no padding (see above); every field is `Pod`, so every bit
// pattern of the struct's bytes is a valid value; it is `Copy` and `'static` (`Pod`
// implies `'static` for `K` and `V`). Alignment is 1, so casting from any byte slice of
// the right length is fine, and fields are only read by copy (never by reference), so
// unaligned fields are never referenced.
unsafe impl<K: Pod, V: Pod> Pod for Node<K, V> {}

impl<K: Pod, V: Pod> Node<K, V> {
    /// A node from its parts.
    pub(crate) fn new(key: K, value: V, left: u64, right: u64, size: u64) -> Self {
        Node {
            key,
            value,
            left,
            right,
            size,
        }
    }

    /// The node's fields as the algorithms take them (taken out of the packed record one
    /// by one, so that a read hands on registers, not the record).
    #[inline(always)]
    pub(crate) fn parts(&self) -> Parts<K, V, u64> {
        Parts {
            key: self.key(),
            value: self.value(),
            left: self.left(),
            right: self.right(),
            size: self.size() as usize,
        }
    }

    /// The key.
    ///
    /// ```
    /// use bi_collections::tree::{BiTree, Node};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.insert(7, 70).unwrap();
    /// let r = tree.read_handle(&s.nodes[0]).unwrap();
    /// let guard = r.reader().enter();
    /// let root = guard.load::<Node<u32, u32>>(tree.slot()).unwrap().unwrap();
    /// assert_eq!(root.key(), 7);
    /// ```
    pub fn key(&self) -> K {
        self.key
    }

    /// The value.
    ///
    /// ```
    /// use bi_collections::tree::{BiTree, Node};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.insert(7, 70).unwrap();
    /// let r = tree.read_handle(&s.nodes[0]).unwrap();
    /// let guard = r.reader().enter();
    /// let root = guard.load::<Node<u32, u32>>(tree.slot()).unwrap().unwrap();
    /// assert_eq!(root.value(), 70);
    /// ```
    pub fn value(&self) -> V {
        self.value
    }

    /// Raw link of the left subtree (zero: empty).
    ///
    /// ```
    /// use bi_collections::tree::{BiTree, Node};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.insert(7, 70).unwrap();
    /// w.insert(3, 30).unwrap(); // smaller: goes left
    /// let r = tree.read_handle(&s.nodes[0]).unwrap();
    /// let guard = r.reader().enter();
    /// let root = guard.load::<Node<u32, u32>>(tree.slot()).unwrap().unwrap();
    /// assert_ne!(root.left(), 0);
    /// assert_eq!(root.right(), 0);
    /// ```
    pub fn left(&self) -> u64 {
        self.left
    }

    /// Raw link of the right subtree (zero: empty).
    ///
    /// ```
    /// use bi_collections::tree::{BiTree, Node};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// w.insert(7, 70).unwrap();
    /// w.insert(9, 90).unwrap(); // larger: goes right
    /// let r = tree.read_handle(&s.nodes[0]).unwrap();
    /// let guard = r.reader().enter();
    /// let root = guard.load::<Node<u32, u32>>(tree.slot()).unwrap().unwrap();
    /// assert_ne!(root.right(), 0);
    /// assert_eq!(root.left(), 0);
    /// ```
    pub fn right(&self) -> u64 {
        self.right
    }

    /// Nodes in the subtree rooted here.
    ///
    /// ```
    /// use bi_collections::tree::{BiTree, Node};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let tree = BiTree::<u32, u32>::at(s.slot(0));
    /// let mut w = tree.write_handle(s.writer(0)).unwrap();
    /// for k in 0..10 {
    ///     w.insert(k, k).unwrap();
    /// }
    /// let r = tree.read_handle(&s.nodes[0]).unwrap();
    /// let guard = r.reader().enter();
    /// let root = guard.load::<Node<u32, u32>>(tree.slot()).unwrap().unwrap();
    /// assert_eq!(root.size(), 10); // the root's subtree is the whole tree
    /// ```
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl<K: Pod + fmt::Debug, V: Pod + fmt::Debug> fmt::Debug for Node<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (key, value, left, right, size) =
            (self.key, self.value, self.left, self.right, self.size);
        f.debug_struct("Node")
            .field("key", &key)
            .field("value", &value)
            .field("left", &left)
            .field("right", &right)
            .field("size", &size)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_sizes() {
        assert_eq!(size_of::<Node<u64, u64>>(), 40);
        assert_eq!(size_of::<Node<u32, u32>>(), 32);
        assert_eq!(align_of::<Node<u64, u64>>(), 1);
        let n = Node::new(1u64, 2u64, 3, 4, 5);
        let back: Node<u64, u64> = bytemuck::pod_read_unaligned(bytemuck::bytes_of(&n));
        assert_eq!(
            (
                back.key(),
                back.value(),
                back.left(),
                back.right(),
                back.size()
            ),
            (1, 2, 3, 4, 5)
        );
    }
}
