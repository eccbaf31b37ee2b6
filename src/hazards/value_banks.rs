//! A value overwritten while others still read it: a graph engine's master applies as
//! soon as its own gather is done, while other masters of the same superstep, on its
//! partition and on others, have yet to read its old value.
//!
//! The schedule: the shipped engine runs PageRank over a small random graph cut by target
//! (every vertex's in-edges beside its master, so no replica feeds one and every master
//! applies inside the gather pass) on three emulated nodes ([`Mode::BiOnDemand`]), and
//! compares every vertex's rank with the same run over the machine's coherent memory.
//! Broken ([`Fault::ValueBanks`]): new values go into the bank of value slots the
//! superstep reads, so later gathers fold a mix of this superstep's values and the last
//! one's. BI: a superstep reads one bank and writes the other, and the banks swap at the
//! superstep's barrier, so the ranks equal the coherent run's bit for bit. Counted:
//! vertices whose rank differs from the coherent run's.
//!
//! [`Mode::BiOnDemand`]: bi_graph::Mode::BiOnDemand

use super::{Hazard, pagerank_against_coherent};
use bi_core::runtime::{Fault, RuntimeConfig};
use bi_graph::{Partitioner, RunOptions};

pub(super) const HAZARD: Hazard = Hazard {
    name: "value_overwritten_while_read",
    fault: Fault::ValueBanks,
    counts: "vertices whose PageRank differs from the run over coherent memory",
    run,
};

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let options = RunOptions {
        faults: config.faults(),
        ..RunOptions::default()
    };
    pagerank_against_coherent(Partitioner::ByTarget, &options, seed)
}
