//! A superstep that reads the last one's data: the graph engine's partitions read each
//! other's lines in place (a replica its master's value, a master its replicas' partial
//! sums, everyone the others' aggregates), and a partition's cache still holds the copies
//! it read a superstep ago.
//!
//! The schedule: the shipped engine runs PageRank over a small random graph on three
//! emulated nodes (one thread per partition, [`Mode::BiOnDemand`]) whose caches are large
//! enough to keep every line they read, then compares every vertex's rank with the same
//! run over the machine's coherent memory. Broken ([`Fault::GraphBarrier`]): after each
//! barrier a partition reads the others' lines through its cache, so it folds partials and
//! values of earlier supersteps. BI: after each barrier it drops exactly the remote lines
//! it reads next and fences once, so the ranks equal the coherent run's bit for bit.
//! Counted: vertices whose rank differs from the coherent run's.
//!
//! [`Mode::BiOnDemand`]: bi_graph::Mode::BiOnDemand

use super::{Hazard, pagerank_against_coherent};
use bi_core::runtime::{Fault, RuntimeConfig};
use bi_graph::{Partitioner, RunOptions};

pub(super) const HAZARD: Hazard = Hazard {
    name: "barrier_without_invalidation",
    fault: Fault::GraphBarrier,
    counts: "vertices whose PageRank differs from the run over coherent memory",
    run,
};

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    // Caches that neither evict nor prefetch: a copy stays until it is dropped.
    let options = RunOptions {
        eviction_rate: 0.0,
        prefetch_rate: 0.0,
        cache_lines: 1024,
        faults: config.faults(),
        ..RunOptions::default()
    };
    pagerank_against_coherent(Partitioner::Random, &options, seed)
}
