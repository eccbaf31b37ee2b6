//! A periodic pass that keeps reading an old written-line log: in the graph engine's
//! periodic mode each partition's pass writes back only the lines its partition stored
//! into since the last pass and logs their groups with its pass number, and each reader's
//! pass drops only the lines it reads of the groups whose log word moved.
//!
//! The schedule: the shipped engine runs PageRank for a fixed number of supersteps over a
//! uniform random graph on three emulated nodes ([`Mode::BiPeriodic`], passes far more
//! often than supersteps) whose caches keep every line they read. Broken
//! ([`Fault::WrittenLog`]): a reader's pass reads the others' log words through its cache,
//! so after its first look it sees the same pass numbers for ever and never drops a
//! remote value again: its replicas read the values of the superstep they first cached.
//! BI: the pass drops the log's lines first, so every value written is dropped within a
//! pass of its write-back. Counted: runs in which a replica read a value half the run's
//! supersteps old.
//!
//! [`Mode::BiPeriodic`]: bi_graph::Mode::BiPeriodic

use super::Hazard;
use bi_core::runtime::{Fault, RuntimeConfig};
use bi_graph::generate::Uniform;
use bi_graph::{Backend, EngineConfig, Mode, PageRank, Partitioner, RunOptions};
use std::time::Duration;

pub(super) const HAZARD: Hazard = Hazard {
    name: "written_lines_left_cached",
    fault: Fault::WrittenLog,
    counts: "runs in which a replica read a value half the run's supersteps old",
    run,
};

/// Supersteps of each run.
const SUPERSTEPS: usize = 40;

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let graph = Uniform::new(2000, 16_000, seed).generate().expect("graph");
    let engine = EngineConfig {
        nodes: 3,
        partitioner: Partitioner::Random,
        mode: Mode::BiPeriodic,
        backend: Backend::Emulated { seed },
        seed,
        max_iterations: SUPERSTEPS,
        tolerance: None,
        measure_staleness: true,
        ..EngineConfig::default()
    };
    // Caches that neither evict nor prefetch: a copy stays until a pass drops it.
    let options = RunOptions {
        faults: config.faults(),
        quiescence_period: Duration::from_micros(50),
        eviction_rate: 0.0,
        prefetch_rate: 0.0,
        cache_lines: 4096,
        ..RunOptions::default()
    };
    let program = PageRank::new(graph.num_vertices(), None);
    let run = bi_graph::run_detailed(&program, &graph, &engine, &options).expect("emulated run");
    u64::from(run.run.stats.max_staleness >= (SUPERSTEPS / 2) as u64)
}
