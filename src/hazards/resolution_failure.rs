//! Resolution failure: a key inserted (and written back) before a lookup starts is not
//! found, because the lookup walks a stale cached copy of the table.
//!
//! The table is an open-addressed array of keys in shared memory with one writer. Broken:
//! the lookup trusts its cache and reports "absent" on a miss. BI: on a miss, the lookup
//! invalidates the path it walked and looks again (lazy invalidation), so additions are
//! visible at once while lookups of present keys stay free of cache operations. Counted:
//! lookups of keys inserted before the lookup began that reported "absent".

use super::{Hazard, Variant, adversarial};
use bi_core::mem::{EmulatedNode, Emulator, MemView};

pub(super) const HAZARD: Hazard = Hazard {
    name: "resolution_failure",
    counts: "lookups of keys inserted before the lookup that reported absent",
    run,
};

const BUCKETS: usize = 64;

fn bucket(key: u64, probe: usize) -> usize {
    (key as usize).wrapping_mul(0x9E37_79B9).wrapping_add(probe) % BUCKETS * 8
}

/// Walks the probe sequence; returns the offsets visited and whether the key was found.
fn probe(view: &EmulatedNode, key: u64) -> (Vec<usize>, bool) {
    let mut path = Vec::new();
    for p in 0..BUCKETS {
        let at = bucket(key, p);
        path.push(at);
        match view.load::<u64>(at).expect("in bounds") {
            0 => return (path, false),
            k if k == key => return (path, true),
            _ => {}
        }
    }
    (path, false)
}

fn run(variant: Variant, seed: u64) -> u64 {
    let emu = Emulator::new(adversarial(BUCKETS * 8, 2, seed));
    let (w, r) = (emu.node(0), emu.node(1));
    let mut failures = 0;
    for key in 1..=48u64 {
        let (path, found) = probe(&w, key);
        if !found {
            let at = *path.last().expect("non-empty path");
            w.store(at, &key).expect("in bounds");
            w.writeback(at, 8).expect("in bounds");
            w.fence();
        }
        // Every key inserted so far must be found.
        for k in 1..=key {
            let (path, mut found) = probe(&r, k);
            if !found && variant == Variant::Bi {
                for at in path {
                    r.invalidate(at, 8).expect("in bounds");
                }
                r.fence();
                found = probe(&r, k).1;
            }
            failures += u64::from(!found);
        }
    }
    failures
}
