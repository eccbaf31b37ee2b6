//! A barrier read from the cache: graph partitions that are processes meet at a barrier
//! in the region where each writes only its own line, its count of arrivals, and waits
//! until every other line shows as many.
//!
//! The schedule: the shipped [`RegionBarrier`] of two emulated nodes (caches that neither
//! evict nor prefetch) goes through eight rounds: both nodes arrive, then each looks once
//! at the other's line. Broken ([`Fault::RegionBarrierRead`]): a node reads the other's
//! line through its cache, so from the second round on it still sees the count it cached
//! in the first and would wait forever. BI: it drops the line before each look, so both
//! pass every round. Counted: looks that found the other node behind although it had
//! arrived.

use super::Hazard;
use bi_core::mem::{Emulator, EmulatorConfig};
use bi_core::runtime::{Fault, RuntimeConfig};
use bi_graph::RegionBarrier;

pub(super) const HAZARD: Hazard = Hazard {
    name: "barrier_read_from_cache",
    fault: Fault::RegionBarrierRead,
    counts: "barrier looks that missed an arrival (the node would wait forever)",
    run,
};

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let emu = Emulator::new(
        EmulatorConfig::new(4096, 2)
            .seed(seed)
            .eviction_rate(0.0)
            .adjacent_prefetch_rate(0.0)
            .random_prefetch_rate(0.0),
    );
    let node = |me| RegionBarrier::new(emu.node(me), 0, 2, me).with_faults(config.faults());
    let (a, b) = (node(0), node(1));
    let mut missed = 0;
    for _ in 0..8 {
        let round = a.arrive().expect("arrives");
        assert_eq!(b.arrive().expect("arrives"), round);
        for n in [&a, &b] {
            missed += u64::from(!n.poll(round).expect("no abort"));
        }
    }
    missed
}
