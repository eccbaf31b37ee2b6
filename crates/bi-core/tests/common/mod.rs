//! Helpers shared by the runtime's integration tests.
// Each test binary compiles this module on its own and may not use every item.
#![allow(dead_code)]

use bytemuck::{Pod, Zeroable};

/// A multi-line value (200 bytes: four 64-byte lines) that checks itself: every word is derived
/// from `id`.
#[derive(Clone, Copy, Debug, Pod, Zeroable, PartialEq, Eq)]
#[repr(C)]
pub struct Val {
    pub id: u64,
    pub words: [u64; 24],
}

impl Val {
    pub fn new(id: u64) -> Val {
        let mut words = [0; 24];
        for (i, w) in words.iter_mut().enumerate() {
            *w = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i as u64;
        }
        Val { id, words }
    }

    pub fn valid(&self) -> bool {
        *self == Val::new(self.id)
    }
}

/// The id of a process that existed a moment ago and is gone (reaped).
pub fn a_gone_process() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}
