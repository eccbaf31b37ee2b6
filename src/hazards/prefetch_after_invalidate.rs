//! Prefetch after invalidate: a reader drops a line, the hardware prefetcher brings it
//! straight back, and the writer's new bytes land in memory after that; the reader's next
//! load hits the refilled, now stale, copy although it "just invalidated".
//!
//! No invalidation schedule can rule this out, so BI objects carry their identity: the
//! link to an object names its generation and every line of the object repeats it (see
//! `bi_core::runtime`). Broken: the reader trusts its invalidation and accepts what it
//! reads. BI: the reader checks the stamp against the link and, on a mismatch,
//! invalidates and reads again. Counted: stale values accepted.

use super::{Hazard, Variant, adversarial};
use bi_core::mem::{Emulator, MemView};

pub(super) const HAZARD: Hazard = Hazard {
    name: "prefetch_after_invalidate",
    counts: "stale values accepted after an invalidation (prefetch refilled the line)",
    run,
};

const SLOT: usize = 0;
const OBJECT: usize = 64;

fn run(variant: Variant, seed: u64) -> u64 {
    let emu = Emulator::new(adversarial(4096, 2, seed).random_prefetch_rate(0.0));
    let (w, r) = (emu.node(0), emu.node(1));
    let mut accepted_stale = 0;
    for generation in 1..=32u64 {
        // The reader is done with the old object and drops its lines; the prefetcher
        // refills one at once (the worst moment).
        r.invalidate(OBJECT, 64).expect("in bounds");
        r.fence();
        r.prefetch(OBJECT).expect("in bounds");
        // The writer rewrites the block: stamp and value, then the link (RCU order).
        w.store(OBJECT, &[generation, generation * 1000])
            .expect("in bounds");
        w.writeback(OBJECT, 16).expect("in bounds");
        w.fence();
        w.store(SLOT, &generation).expect("in bounds");
        w.writeback(SLOT, 8).expect("in bounds");
        w.fence();
        // The reader sees the new link (its slot line is fresh) and reads the object.
        r.invalidate(SLOT, 8).expect("in bounds");
        r.fence();
        let link: u64 = r.load(SLOT).expect("in bounds");
        let [mut stamp, mut value]: [u64; 2] = r.load(OBJECT).expect("in bounds");
        if variant == Variant::Bi && stamp != link {
            r.invalidate(OBJECT, 16).expect("in bounds");
            r.fence();
            [stamp, value] = r.load(OBJECT).expect("in bounds");
        }
        let _ = stamp;
        accepted_stale += u64::from(value != link * 1000);
    }
    accepted_stale
}
