//! Stale access beyond the bound: without quiescence a reader's cached copy of a slot
//! stays old for as long as the line survives in its cache.
//!
//! A writer publishes a new value every 50 ticks through the runtime; a reader on another
//! node reads it continuously. Broken: the reader's node never runs a quiescence pass.
//! BI: it runs one every `PERIOD` ticks. Counted: reads that returned a value superseded
//! more than `PERIOD + D + pass time` ticks earlier (the bound the runtime documents).

use super::{Hazard, Variant, two_runtimes};

pub(super) const HAZARD: Hazard = Hazard {
    name: "stale_beyond_bound",
    counts: "reads of a value superseded longer ago than the staleness bound",
    run,
};

const PERIOD: u64 = 400;
/// A generous allowance for the pass itself (it takes some hundred emulated operations).
const PASS: u64 = 400;

fn run(variant: Variant, seed: u64) -> u64 {
    let s = two_runtimes(seed, |c| c.cache_lines(256).adjacent_prefetch_rate(0.1));
    let mut w = s.writer(0);
    let reader = s.nodes[1].reader().expect("reader slot");
    let slot = s.slot(0);
    // published[v] = the true time version v was published (version 0 = nothing yet).
    let mut published = vec![0u64];
    let (mut next_publish, mut next_pass) = (0, PERIOD);
    let mut beyond = 0;
    while published.len() < 60 {
        let now = s.emu.now();
        if now >= next_publish {
            let v = published.len() as u64;
            let b = w.alloc(v).expect("heap");
            let old = w.publish(slot, b).expect("publish");
            if !old.is_null() {
                w.retire(old).expect("retire");
            }
            published.push(s.emu.now());
            next_publish = now + 50;
            s.nodes[0].quiesce().expect("pass");
            let _ = w.reclaim();
        }
        if variant == Variant::Bi && now >= next_pass {
            s.nodes[1].quiesce().expect("pass");
            next_pass = now + PERIOD;
        }
        let guard = reader.enter();
        let seen = guard
            .load::<u64>(slot)
            .expect("valid read")
            .map_or(0, |v| *v);
        let now = s.emu.now();
        // The value read was superseded when version seen + 1 was published.
        if let Some(&superseded) = published.get(seen as usize + 1) {
            beyond += u64::from(now.saturating_sub(superseded) > PERIOD + PASS);
        }
    }
    beyond
}
