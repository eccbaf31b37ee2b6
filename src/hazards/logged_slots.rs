//! Stale access beyond the bound: without quiescence a reader's cached copy of a slot
//! stays old for as long as the line survives in its cache.
//!
//! A writer publishes a new value every 50 ticks through the runtime (the old ones stay:
//! a retired object's FREED mark would send the reader to the fresh slot, which is
//! another mechanism); a reader on another node reads it continuously, and its node runs
//! a quiescence pass every `PERIOD` ticks. Broken ([`Fault::LoggedSlots`]): the pass does
//! not invalidate the slots the writer logged. BI: it does. Counted: reads that returned
//! a value superseded more than `PERIOD + D + pass time` ticks earlier (the bound the
//! runtime documents).

use super::{Hazard, two_runtimes};
use bi_core::runtime::{Fault, RuntimeConfig};

pub(super) const HAZARD: Hazard = Hazard {
    name: "stale_beyond_bound",
    fault: Fault::LoggedSlots,
    counts: "reads of a value superseded longer ago than the staleness bound",
    run,
};

const PERIOD: u64 = 400;
/// A generous allowance for the pass itself (it takes some hundred emulated operations).
const PASS: u64 = 400;

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let s = two_runtimes(config, seed, |c| {
        c.cache_lines(256).adjacent_prefetch_rate(0.1)
    });
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
            w.publish(slot, b).expect("publish");
            published.push(s.emu.now());
            next_publish = now + 50;
            s.nodes[0].quiesce().expect("pass");
        }
        if now >= next_pass {
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
