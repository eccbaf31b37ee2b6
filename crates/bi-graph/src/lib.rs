//! # bi-graph: a GAS graph engine over non-coherent memory
//!
//! *Being built.* This crate will hold a PowerGraph-style gather-apply-scatter engine
//! whose partitions run as nodes sharing one memory without cache coherence. Vertex
//! replicas will hold a reference to their master instead of a copy, so no update
//! messages flow between partitions; the engine will run in three modes side by side
//! (message-passing `stock`, `bi-on-demand` with quiescence in the barrier, and
//! `bi-periodic` with background quiescence), with PageRank, connected components and
//! SSSP, graph readers for SNAP edge lists and Matrix Market files, Kronecker and uniform
//! generators, and a command-line tool.

mod config;
mod edge_list;
mod error;

pub use config::{Backend, EngineConfig, Mode, Observer, Partitioner, RunStats};
pub use edge_list::EdgeList;
pub use error::GraphError;
