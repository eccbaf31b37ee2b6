//! Publish before write-back: the pointer to a new object reaches memory before the object
//! does, so another node follows it into old or half-written bytes.
//!
//! Broken: the writer stores and writes back the pointer, then writes the object back.
//! BI: the object is written back and fenced before the pointer is stored. Counted: reads
//! through a freshly loaded pointer that found an object whose words disagree with the
//! version the pointer names.

use super::{Hazard, Variant, adversarial};
use bi_core::mem::{Emulator, MemView};

pub(super) const HAZARD: Hazard = Hazard {
    name: "publish_before_writeback",
    counts: "objects read through a published pointer that were torn or old",
    run,
};

const SLOT: usize = 0;
const OBJECTS: usize = 1024;
const WORDS: usize = 32; // four lines

fn run(variant: Variant, seed: u64) -> u64 {
    let emu = Emulator::new(adversarial(OBJECTS + 8 * WORDS * 8, 2, seed));
    let (w, r) = (emu.node(0), emu.node(1));
    let mut torn = 0;
    for version in 1..=64u64 {
        // A fresh object each time (RCU style), in one of eight places.
        let object = OBJECTS + (version as usize % 8) * WORDS * 8;
        w.store(object, &[version; WORDS]).expect("in bounds");
        let pointer = (object as u64) << 16 | version;
        if variant == Variant::Bi {
            w.writeback(object, WORDS * 8).expect("in bounds");
            w.fence();
        }
        w.store(SLOT, &pointer).expect("in bounds");
        w.writeback(SLOT, 8).expect("in bounds");
        w.fence();

        // The reader follows the pointer it finds in memory, reading the object fresh.
        r.invalidate(SLOT, 8).expect("in bounds");
        r.fence();
        let seen: u64 = r.load(SLOT).expect("in bounds");
        let (at, expect) = ((seen >> 16) as usize, seen & 0xffff);
        r.invalidate(at, WORDS * 8).expect("in bounds");
        r.fence();
        let words: [u64; WORDS] = r.load(at).expect("in bounds");
        torn += u64::from(words.iter().any(|&x| x != expect));

        if variant == Variant::Broken {
            w.writeback(object, WORDS * 8).expect("in bounds");
            w.fence();
        }
    }
    torn
}
