//! A value slot read before anything was written to it: in a graph engine's periodic
//! mode replicas read their masters' value slots through their caches, refreshed only by
//! background passes, and a superstep reads the bank of slots the previous one wrote.
//!
//! The schedule: the shipped engine runs single-source shortest paths from four sources
//! over a small random graph on three emulated nodes in [`Mode::BiPeriodic`], with
//! background passes far apart (none runs during the run), and compares every distance
//! with the reference computation. Broken ([`Fault::SecondBankStart`]): the initial values go into the first
//! bank only, so a replica that reads the second bank before a master's first write of it
//! reaches memory reads the region's zeros: a distance of 0, smaller than any the
//! master ever had, which no later superstep corrects (a minimum only goes down). BI:
//! both banks start with the initial values, written back and fenced before the first
//! superstep, so a stale read finds a value some superstep had. Counted: vertices whose
//! distance differs from the reference.
//!
//! [`Mode::BiPeriodic`]: bi_graph::Mode::BiPeriodic

use super::Hazard;
use bi_core::runtime::{Fault, RuntimeConfig};
use bi_graph::generate::Uniform;
use bi_graph::{Backend, EngineConfig, Mode, Partitioner, RunOptions, Sssp};
use std::time::Duration;

pub(super) const HAZARD: Hazard = Hazard {
    name: "value_read_before_first_write",
    fault: Fault::SecondBankStart,
    counts: "vertices whose shortest distance differs from the reference",
    run,
};

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let graph = Uniform::new(60, 240, seed).generate().expect("graph");
    let engine = EngineConfig {
        nodes: 3,
        partitioner: Partitioner::Grid,
        mode: Mode::BiPeriodic,
        backend: Backend::Emulated { seed },
        seed,
        max_iterations: 100,
        tolerance: None,
        ..EngineConfig::default()
    };
    let options = RunOptions {
        faults: config.faults(),
        quiescence_period: Duration::from_secs(10),
        eviction_rate: 0.0,
        prefetch_rate: 0.0,
        ..RunOptions::default()
    };
    // A few sources, so that every graph drawn has paths across partitions.
    (0..4)
        .map(|source| {
            let run = bi_graph::run_detailed(&Sssp { source }, &graph, &engine, &options)
                .expect("emulated run");
            let reference = bi_graph::reference::sssp(&graph, source);
            let wrong = run
                .run
                .values
                .iter()
                .zip(&reference)
                .filter(|(a, b)| a != b);
            wrong.count() as u64
        })
        .sum()
}
