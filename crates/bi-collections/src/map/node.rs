//! Chain nodes: one key, its value and the link of the next node, immutable once sealed.

use bi_core::runtime::Link;
use bytemuck::{Pod, Zeroable};

/// One node of a bucket chain, as stored in shared memory.
///
/// `packed` so that the layout has no padding whatever `K` and `V` are (which is what
/// makes the manual [`Pod`] implementation sound); fields are read by copy, never by
/// reference.
#[repr(C, packed)]
pub(crate) struct Node<K, V> {
    pub(crate) key: K,
    pub(crate) value: V,
    /// Raw [`Link`] of the next node of the chain (0 at the end).
    pub(crate) next: u64,
}

impl<K: Copy, V: Copy> Clone for Node<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K: Copy, V: Copy> Copy for Node<K, V> {}

// SAFETY: `Node` is `repr(C, packed)`, so it has no padding bytes; its fields are `K: Pod`,
// `V: Pod` and `u64`, for each of which the all-zero bit pattern is valid, so the
// all-zero `Node` is valid.
unsafe impl<K: Pod, V: Pod> Zeroable for Node<K, V> {}

// SAFETY: no padding (`packed`), every field is `Pod` (so every bit pattern of every field
// is valid and none holds a reference or interior mutability), the type is `Copy` and
// `'static` (as `K: Pod` and `V: Pod` are `'static`); `Pod` does not require alignment.
unsafe impl<K: Pod, V: Pod> Pod for Node<K, V> {}

impl<K: Pod, V: Pod> Node<K, V> {
    pub(crate) fn new(key: K, value: V, next: Link<Node<K, V>>) -> Self {
        Node {
            key,
            value,
            next: next.raw(),
        }
    }

    pub(crate) fn key(&self) -> K {
        self.key
    }

    pub(crate) fn value(&self) -> V {
        self.value
    }

    pub(crate) fn next(&self) -> Link<Node<K, V>> {
        Link::from_raw(self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_round_trips_through_bytes_without_padding() {
        let n = Node::<u8, u64>::new(7, 9, Link::new(4096, 3));
        let bytes = bytemuck::bytes_of(&n);
        assert_eq!(bytes.len(), 1 + 8 + 8);
        let back: Node<u8, u64> = bytemuck::pod_read_unaligned(bytes);
        assert_eq!(
            (back.key(), back.value(), back.next()),
            (7, 9, Link::new(4096, 3))
        );
    }
}
