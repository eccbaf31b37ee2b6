//! A hasher for node references (raw links, pointers): the sets a batch keeps of the
//! nodes it created are probed once per node copied, so their hash must cost a multiply,
//! not SipHash's rounds. References are not chosen by users, so flooding is not a concern.

use std::collections::HashSet;
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

    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
}

/// A set of node references.
pub(crate) type RefSet<R> = HashSet<R, BuildHasherDefault<LinkHasher>>;
