//! The writer's private index of the nodes it published: link -> node value.
//!
//! The writer never reads its own tree through shared memory: every node it can reach was
//! created by it and is immutable, so a private copy is exact, costs no cache traffic, and
//! stays correct however the node's lines move between caches and memory.

use super::node::Node;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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
}

/// Raw link -> node.
pub(crate) type NodeIndex<K, V> = HashMap<u64, Node<K, V>, BuildHasherDefault<LinkHasher>>;
