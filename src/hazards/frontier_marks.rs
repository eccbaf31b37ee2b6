//! A partial gathered from values that have since changed: WCC and SSSP gather again only
//! the local vertices whose neighbours changed in the previous superstep, keeping every
//! other vertex's partial as it was.
//!
//! The schedule: the shipped engine runs weakly connected components over a small random
//! graph on three partitions (threads over the machine's memory, [`Mode::BiOnDemand`]) and
//! compares every label with a plain union of the edges. Broken ([`Fault::FrontierMarks`]):
//! a changed vertex does not mark the neighbours whose partial it puts out of date, so
//! after the first superstep nothing is gathered again and labels stop spreading. BI: the
//! marks are set while scatter walks the changed vertices' edges, so the labels are the
//! components'. Counted: vertices whose label differs from its component's smallest index.

use super::Hazard;
use bi_core::runtime::{Fault, RuntimeConfig};
use bi_graph::generate::Uniform;
use bi_graph::{EngineConfig, Mode, RunOptions, Wcc, reference, run_detailed};

pub(super) const HAZARD: Hazard = Hazard {
    name: "frontier_without_marks",
    fault: Fault::FrontierMarks,
    counts: "vertices whose WCC label is not their component's smallest index",
    run,
};

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    // Sparse enough for long paths: labels need several supersteps to spread.
    let graph = Uniform::new(200, 220, seed).generate().expect("graph");
    let engine = EngineConfig {
        nodes: 3,
        mode: Mode::BiOnDemand,
        seed,
        max_iterations: graph.num_vertices() + 1,
        ..EngineConfig::default()
    };
    let options = RunOptions {
        faults: config.faults(),
        ..RunOptions::default()
    };
    let labels = run_detailed(&Wcc, &graph, &engine, &options)
        .expect("wcc run")
        .run
        .values;
    let components = reference::wcc(&graph);
    labels
        .iter()
        .zip(&components)
        .filter(|(a, b)| a != b)
        .count() as u64
}
