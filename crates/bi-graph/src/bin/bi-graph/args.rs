//! The command line: one subcommand per program, the options they share.

use bi_graph::{Backend, Mode, Partitioner};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Supersteps PageRank runs when neither `--iterations` nor `--tolerance` is given.
pub const DEFAULT_PAGERANK_ITERATIONS: usize = 20;

/// Upper bound on PageRank supersteps with `--tolerance`.
pub const TOLERANCE_ITERATION_LIMIT: usize = 1000;

/// Run graph programs on a partitioned graph whose partitions share memory without
/// cache coherence, in message-passing (`stock`) and Bounded Incoherence modes.
///
/// Values are written as `vertex_id<TAB>value` lines with the input's original ids;
/// a summary table (time per superstep, replication factor, cache lines written back
/// and invalidated, messages, staleness) is printed at the end.
#[derive(Debug, Parser)]
#[command(name = "bi-graph", version, about, long_about)]
pub struct Cli {
    /// The program to run.
    #[command(subcommand)]
    pub program: Program,
}

/// A vertex program.
#[derive(Debug, Subcommand)]
pub enum Program {
    /// PageRank (damping 0.85, dangling mass spread uniformly; ranks sum to 1).
    Pagerank(PagerankArgs),
    /// Weakly connected components; a vertex's label is the smallest id in its component.
    Wcc(WccArgs),
    /// Single-source shortest paths (weights from the input's third column, else 1);
    /// unreachable vertices are left out of the output.
    Sssp(SsspArgs),
    /// Write a generated Kronecker graph as an edge list (`source target` per line), for
    /// --input: over MPI each rank then reads only its share of the file.
    Generate(GenerateArgs),
}

/// Options of `generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Scale of the Kronecker graph (Graph500 parameters, 2^S vertices).
    #[arg(long, value_name = "S", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=31))]
    pub scale: u32,
    /// Edges drawn per vertex (self-loops and repeats are then removed).
    #[arg(long, value_name = "F", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub edge_factor: u32,
    /// Seed of the generator.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// The file to write (`-` for standard output).
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
}

/// Options of `pagerank`.
#[derive(Debug, Args)]
pub struct PagerankArgs {
    /// Options every program takes.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Run exactly N supersteps [default: 20].
    #[arg(long, value_name = "N", conflicts_with = "tolerance", value_parser = clap::value_parser!(u64).range(1..))]
    pub iterations: Option<u64>,
    /// Run until the L1 change of the ranks between supersteps is below T (at most 1000
    /// supersteps).
    #[arg(long, value_name = "T", value_parser = positive_float)]
    pub tolerance: Option<f64>,
}

/// Options of `wcc`.
#[derive(Debug, Args)]
pub struct WccArgs {
    /// Options every program takes.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Stop after at most N supersteps [default: the number of vertices, always enough
    /// to converge].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub iterations: Option<u64>,
}

/// Options of `sssp`.
#[derive(Debug, Args)]
pub struct SsspArgs {
    /// Options every program takes.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Source vertex, as an id of the input (for a generated graph, 0 to 2^scale - 1).
    #[arg(long, value_name = "ID")]
    pub source: u64,
    /// Stop after at most N supersteps [default: the number of vertices, always enough
    /// to converge].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub iterations: Option<u64>,
}

/// Options every program takes.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Graph file: a SNAP-style edge list (`src dst [weight]` per line, `#` comments) or a
    /// Matrix Market coordinate file (recognised by its `%%MatrixMarket` banner or the
    /// `.mtx` extension). Without it a Kronecker graph is generated (see --scale).
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Scale of the generated Kronecker graph (Graph500 parameters, 2^S vertices) when
    /// no --input is given.
    #[arg(long, value_name = "S", default_value_t = 16, conflicts_with = "input",
          value_parser = clap::value_parser!(u32).range(1..=31))]
    pub scale: u32,
    /// Edges drawn per vertex for the generated graph (self-loops and repeats are then
    /// removed).
    #[arg(long, value_name = "F", default_value_t = 16, conflicts_with = "input",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub edge_factor: u32,
    /// Number of partitions, one node (a thread, or a process with --processes) each.
    #[arg(long, value_name = "K", default_value_t = 2,
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub nodes: u64,
    /// How edges are assigned to partitions.
    #[arg(long, value_name = "P", value_enum, default_value_t = PartitionArg::Random)]
    pub partition: PartitionArg,
    /// How replicas see their master's value; `all` runs the three modes one after the
    /// other, writes the output of the first and checks that they agree.
    #[arg(long, value_name = "M", value_enum, default_value_t = ModeArg::BiOnDemand)]
    pub mode: ModeArg,
    /// Write `vertex_id<TAB>value` lines here (`-` for standard output, which then moves
    /// the summary to standard error). Without it only the summary is printed.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Seed of the generator, the partitioner and the emulator.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Memory the partitions share: the machine's, or the non-coherence emulator (slow;
    /// for small graphs and checks).
    #[arg(long, value_name = "B", value_enum, default_value_t = BackendArg::Hardware)]
    pub backend: BackendArg,
    /// Print the summary as one JSON object on standard output (for scripts) instead of
    /// the table: the program, the graph's size and one entry per mode.
    #[arg(long)]
    pub json: bool,
    /// Run each partition as a process of its own over a region file (this program
    /// again, with the same arguments), instead of as threads of this process: vertex
    /// data, partials and the barrier are in the file, each process holds its edges.
    /// With --input (an edge list; random, grid or by-target cut) each process reads
    /// only its share of the file and builds only its own partition, and partition 0
    /// writes the values and the summary; otherwise each loads the whole graph.
    #[arg(long)]
    pub processes: bool,
    /// In the bi-periodic mode, stamp every value with the superstep that wrote it and
    /// report how many supersteps old the values read were ("max stale"): a diagnostic
    /// that costs a word per value and a load per edge.
    #[arg(long)]
    pub measure_staleness: bool,
    /// After the summary, show where a superstep's time goes: each phase of the loop per
    /// superstep, averaged over the partitions, with the exchanges' write-backs, waits at
    /// the barrier and invalidations (the BI modes) apart.
    #[arg(long)]
    pub phases: bool,
    /// The region file for --processes, which must not exist; it is removed after the
    /// run. Default: a new file in /dev/shm (or the temporary directory). A file on a
    /// DAX or CXL device shares the partitions across hosts' memory.
    #[arg(long, value_name = "FILE")]
    pub region: Option<PathBuf>,
    /// Run as one MPI rank per partition (start with `mpirun -np K bi-graph ... --mpi`;
    /// --nodes is the number of ranks): the stock mode with MPI as its transport. Rank
    /// 0 writes the values and the summary. With --input (an edge list) each rank reads
    /// only its share of the file and builds only its own partition (random, grid or
    /// by-target cut), in pools too.
    #[cfg(feature = "mpi")]
    #[arg(long, conflicts_with_all = ["processes", "nodes"])]
    pub mpi: bool,
    /// With --mpi: group consecutive ranks in pools of this many that share memory (a
    /// region file per pool: --region with `.K` appended, default in /dev/shm), with
    /// MPI between pools, in the bi-on-demand mode: one graph across several pools.
    #[cfg(feature = "mpi")]
    #[arg(long, value_name = "N", requires = "mpi",
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub pool_ranks: Option<u64>,
}

/// `--partition` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PartitionArg {
    /// Each edge to a partition chosen by a seeded hash.
    Random,
    /// PowerGraph's oblivious greedy placement.
    Oblivious,
    /// Partitions on a grid; an edge goes where its endpoints' row and column meet.
    Grid,
    /// Each edge with its target's master: programs gathering in-edges (pagerank, sssp)
    /// then send no partials, only values cross partitions.
    ByTarget,
}

impl From<PartitionArg> for Partitioner {
    fn from(p: PartitionArg) -> Self {
        match p {
            PartitionArg::Random => Partitioner::Random,
            PartitionArg::Oblivious => Partitioner::Oblivious,
            PartitionArg::Grid => Partitioner::Grid,
            PartitionArg::ByTarget => Partitioner::ByTarget,
        }
    }
}

/// `--mode` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Replicas hold copies; masters send updates over channels (message passing).
    Stock,
    /// Replicas reference their master; quiescence in the barrier (no stale data).
    BiOnDemand,
    /// Replicas reference their master; background quiescence (bounded staleness).
    BiPeriodic,
    /// The three modes, one after the other.
    All,
}

impl ModeArg {
    /// The engine modes to run.
    pub fn modes(self) -> Vec<Mode> {
        match self {
            ModeArg::Stock => vec![Mode::Stock],
            ModeArg::BiOnDemand => vec![Mode::BiOnDemand],
            ModeArg::BiPeriodic => vec![Mode::BiPeriodic],
            ModeArg::All => vec![Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic],
        }
    }
}

/// `--backend` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// The machine's memory with real cache write-back and invalidation.
    Hardware,
    /// The non-coherence emulator, seeded with --seed.
    Emulated,
}

impl BackendArg {
    /// The engine backend.
    pub fn backend(self, seed: u64) -> Backend {
        match self {
            BackendArg::Hardware => Backend::Hardware,
            BackendArg::Emulated => Backend::Emulated { seed },
        }
    }
}

fn positive_float(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(t) if t.is_finite() && t > 0.0 => Ok(t),
        Ok(_) => Err("must be a positive finite number".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}
