//! Log overflow: a writer's log of modified slots is a ring of fixed size. If the writer
//! overwrites entries a node has not read yet, that node never invalidates those slots and
//! keeps reading their old values indefinitely, with nothing to tell it so.
//!
//! A writer updates eight slots round-robin and logs each update in a four-entry ring; a
//! reader node runs its pass (read the ring, invalidate the logged slots) only every ten
//! updates. Broken: the writer overwrites the oldest entry when the ring is full. BI: when
//! the ring is full the writer waits for the reader's pass (back-pressure, as the
//! runtime's `publish` does; here the wait is the pass itself, since the schedule is
//! single-threaded). Counted: slots still stale on the reader after one of its passes.

use super::{Hazard, Variant, adversarial};
use bi_core::mem::{EmulatedNode, Emulator, MemView};

pub(super) const HAZARD: Hazard = Hazard {
    name: "log_overflow",
    counts: "slots left stale by a reader's pass because their log entry was overwritten",
    run,
};

const SLOTS: usize = 8;
const RING: u64 = 4;
/// Layout: the slots (one line each), then the ring's tail line, then its entries.
const TAIL: usize = SLOTS * 64;
const ENTRIES: usize = TAIL + 64;

struct ReaderNode {
    view: EmulatedNode,
    next: u64,
}

impl ReaderNode {
    /// Reads the ring from where it stopped and invalidates every logged slot. A reader
    /// that finds entries overwritten cannot know which slots it missed (the broken ring
    /// gives it no way to tell); it processes what is there.
    fn pass(&mut self) {
        let v = &self.view;
        v.invalidate(TAIL, 64 + RING as usize * 8)
            .expect("in bounds");
        v.fence();
        let tail: u64 = v.load(TAIL).expect("in bounds");
        for i in self.next.max(tail.saturating_sub(RING))..tail {
            let slot: u64 = v
                .load(ENTRIES + (i % RING) as usize * 8)
                .expect("in bounds");
            v.invalidate(slot as usize, 8).expect("in bounds");
        }
        v.fence();
        self.next = tail;
    }
}

fn run(variant: Variant, seed: u64) -> u64 {
    let emu = Emulator::new(adversarial(4096, 2, seed).eviction_rate(0.0));
    let w = emu.node(0);
    let mut reader = ReaderNode {
        view: emu.node(1),
        next: 0,
    };
    let mut tail = 0u64;
    let mut stale = 0;
    // The reader caches every slot once.
    for s in 0..SLOTS {
        let _: u64 = reader.view.load(s * 64).expect("in bounds");
    }
    for update in 1..=40u64 {
        if variant == Variant::Bi && tail - reader.next == RING {
            reader.pass(); // back-pressure: no entry is overwritten before it is read
        }
        let slot = (update as usize % SLOTS) * 64;
        w.store(slot, &update).expect("in bounds");
        w.writeback(slot, 8).expect("in bounds");
        w.store(ENTRIES + (tail % RING) as usize * 8, &(slot as u64))
            .expect("in bounds");
        w.writeback(ENTRIES + (tail % RING) as usize * 8, 8)
            .expect("in bounds");
        w.fence();
        tail += 1;
        w.store(TAIL, &tail).expect("in bounds");
        w.writeback(TAIL, 8).expect("in bounds");
        w.fence();
        if update % 10 == 0 {
            reader.pass();
            stale += count_stale(&emu, &reader.view);
        }
    }
    stale
}

/// Slots whose value on the reader differs from memory.
fn count_stale(emu: &Emulator, view: &EmulatedNode) -> u64 {
    (0..SLOTS)
        .filter(|s| {
            let seen: u64 = view.load(s * 64).expect("in bounds");
            seen != emu.peek::<u64>(s * 64).expect("in bounds")
        })
        .count() as u64
}
