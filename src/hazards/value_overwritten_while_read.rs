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

use super::Hazard;
use bi_core::runtime::{Fault, RuntimeConfig};
use bi_graph::generate::Uniform;
use bi_graph::{
    Backend, EngineConfig, Mode, PageRank, Partitioner, RunOptions, pagerank, run_detailed,
};

pub(super) const HAZARD: Hazard = Hazard {
    name: "value_overwritten_while_read",
    fault: Fault::ValueBanks,
    counts: "vertices whose PageRank differs from the run over coherent memory",
    run,
};

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let graph = Uniform::new(30, 90, seed).generate().expect("graph");
    let engine = |backend| EngineConfig {
        nodes: 3,
        partitioner: Partitioner::ByTarget,
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
    let options = RunOptions {
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
    ranks.iter().zip(&coherent).filter(|(a, b)| a != b).count() as u64
}
