//! # bi-graph: a GAS graph engine over non-coherent memory
//!
//! A PowerGraph-style gather-apply-scatter engine whose partitions run as nodes sharing
//! one memory without cache coherence, with the toolkit around it.
//!
//! - [`VertexProgram`]: the GAS interface; [`run`] and [`run_detailed`] execute one.
//! - [`VertexCut`]: random, oblivious-greedy and grid vertex cuts; every edge on one
//!   partition, every vertex with a master, the replication factor reported.
//! - Three modes side by side ([`Mode`]): message passing (`Stock`), replicas that
//!   *reference* their master with quiescence in the barrier (`BiOnDemand`, no stale
//!   data), and the same with background quiescence (`BiPeriodic`, bounded staleness).
//!   The [`engine`] module explains why references beat messages and what each mode
//!   guarantees.
//! - Programs: [`pagerank`] (networkx's definition), [`wcc`], [`sssp`]; plain CSR
//!   versions in [`reference`](mod@reference) for checking and as the performance baseline.
//!
//! ```
//! use bi_graph::{EdgeList, EngineConfig, Mode, pagerank};
//!
//! let g = EdgeList { ids: vec![1, 2, 3], edges: vec![(0, 1), (1, 2), (2, 0)], weights: None };
//! for mode in [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic] {
//!     let config = EngineConfig { nodes: 3, mode, ..EngineConfig::default() };
//!     let ranks = pagerank(&g, &config)?.values;
//!     assert!(ranks.iter().all(|r| (r - 1.0 / 3.0).abs() < 1e-12));
//! }
//! # Ok::<(), bi_graph::GraphError>(())
//! ```
//!
//! - Graphs larger than one machine: over MPI each rank reads only its share of an edge
//!   list ([`GraphShare`]: the lines starting in its part of the file), the ranks
//!   exchange what the cut needs, and each builds only its own plan.
//!
//! Graph readers (SNAP edge lists, Matrix Market), generators and a command-line tool
//! complete the toolkit.

mod config;
mod edge_list;
mod error;

#[cfg(feature = "mpi")]
pub use config::MpiPools;
pub use config::{
    Backend, EngineConfig, Launch, Mode, Observer, PartitionOf, Partitioner, Phases, Placement,
    RunStats,
};
pub use edge_list::EdgeList;
pub use error::GraphError;

// The engine, the vertex cut and the toolkit's programs.
pub mod engine;
pub mod partition;
mod programs;
pub mod reference;
pub use engine::share::{Collective, GraphShare};
pub use engine::{
    Aborted, DetailedRun, EdgeDirection, Graph, RegionBarrier, Run, RunOptions, VertexInfo,
    VertexProgram, run, run_detailed,
};
pub use partition::{MAX_PARTITIONS, VertexCut};

// Reading and generating graphs.
pub mod generate;
pub mod input;
pub use programs::{PageRank, Sssp, Wcc, pagerank, sssp, wcc};
