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

use super::Hazard;
use bi_core::runtime::{Fault, RuntimeConfig};
use bi_graph::generate::Uniform;
use bi_graph::{
    Backend, EngineConfig, Mode, PageRank, Partitioner, RunOptions, pagerank, run_detailed,
};

pub(super) const HAZARD: Hazard = Hazard {
    name: "barrier_without_invalidation",
    fault: Fault::GraphBarrier,
    counts: "vertices whose PageRank differs from the run over coherent memory",
    run,
};

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let graph = Uniform::new(30, 90, seed).generate().expect("graph");
    let engine = |backend| EngineConfig {
        nodes: 3,
        partitioner: Partitioner::Random,
        mode: Mode::BiOnDemand,
        backend,
        seed,
        max_iterations: 10,
        tolerance: None,
        ..EngineConfig::default()
    };
    let coherent = pagerank(&graph, &engine(Backend::Hardware))
        .expect("coherent run")
        .values;
    // Caches that neither evict nor prefetch: a copy stays until it is dropped.
    let options = RunOptions {
        eviction_rate: 0.0,
        prefetch_rate: 0.0,
        cache_lines: 1024,
        faults: config.faults(),
        ..RunOptions::default()
    };
    let program = PageRank::new(graph.num_vertices(), None);
    let emulated = run_detailed(
        &program,
        &graph,
        &engine(Backend::Emulated { seed }),
        &options,
    )
    .expect("emulated run");
    let ranks = PageRank::ranks(&graph, &emulated.run.values);
    let differ = ranks.iter().zip(&coherent).filter(|(a, b)| a != b).count();
    differ as u64
}
