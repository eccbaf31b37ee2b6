//! `bi-graph`: run PageRank, connected components or shortest paths on a graph file or
//! a generated Kronecker graph, in the stock (message-passing) and Bounded Incoherence
//! modes, and compare them. `bi-graph --help` lists the options.

mod args;
mod processes;
mod progress;
#[cfg(feature = "mpi")]
mod ranks;
mod report;

use args::{Cli, CommonArgs, Program};
use bi_graph::engine::file_group::FileGroup;
use bi_graph::generate::Kronecker;
use bi_graph::input::GraphReader;
use bi_graph::{
    EdgeList, EngineConfig, Graph, GraphError, GraphShare, Observer, Partitioner, Placement,
    RunStats,
};
use clap::Parser;
use report::{Row, Values};
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// Why the tool stopped; printed as `error: <this>`.
#[derive(Debug)]
enum Failure {
    /// Loading or running failed.
    Graph(GraphError),
    /// Anything else, already phrased.
    Message(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Graph(e) => write!(f, "{e}"),
            Failure::Message(m) => f.write_str(m),
        }
    }
}

impl From<GraphError> for Failure {
    fn from(e: GraphError) -> Self {
        Failure::Graph(e)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            // One write, so that the errors of partitions' processes sharing this
            // stream do not interleave within a line.
            let line = format!("error: {failure}\n");
            let _ = io::stderr().lock().write_all(line.as_bytes());
            ExitCode::FAILURE
        }
    }
}

/// What the selected program needs beyond the common options.
enum Job {
    Pagerank {
        iterations: usize,
        tolerance: Option<f64>,
    },
    Wcc {
        iterations: Option<usize>,
    },
    Sssp {
        source: u64,
        iterations: Option<usize>,
    },
}

/// The program once the graph is loaded (the source as a dense index).
#[derive(Clone, Copy)]
enum Task {
    Pagerank,
    Wcc,
    Sssp(u32),
}

fn run(cli: Cli) -> Result<(), Failure> {
    let (common, job) = match cli.program {
        Program::Pagerank(a) => {
            let iterations = match (a.iterations, a.tolerance) {
                (Some(n), _) => to_usize(n),
                (None, Some(_)) => args::TOLERANCE_ITERATION_LIMIT,
                (None, None) => args::DEFAULT_PAGERANK_ITERATIONS,
            };
            let tolerance = a.tolerance;
            (
                a.common,
                Job::Pagerank {
                    iterations,
                    tolerance,
                },
            )
        }
        Program::Wcc(a) => {
            let iterations = a.iterations.map(to_usize);
            (a.common, Job::Wcc { iterations })
        }
        Program::Sssp(a) => {
            let (source, iterations) = (a.source, a.iterations.map(to_usize));
            (a.common, Job::Sssp { source, iterations })
        }
        Program::Generate(a) => return generate(&a),
    };
    #[cfg(feature = "mpi")]
    let over_files = common.processes || common.pool_ranks.is_some();
    #[cfg(not(feature = "mpi"))]
    let over_files = common.processes;
    if common.region.is_some() && !over_files {
        return Err(Failure::Message(
            "--region names the region file of --processes (or of --pool-ranks)".to_owned(),
        ));
    }
    if common.json && common.output.as_deref() == Some(Path::new("-")) {
        return Err(Failure::Message(
            "--json prints the summary on standard output: write the values to a file \
             (--output FILE)"
                .to_owned(),
        ));
    }
    let program = match job {
        Job::Pagerank { .. } => "pagerank",
        Job::Wcc { .. } => "wcc",
        Job::Sssp { .. } => "sssp",
    };
    let worker = processes::Worker::from_env().map_err(Failure::Message)?;
    // Partitions as processes reading shares of the input: the launcher only starts and
    // watches them; partition 0 reports.
    let cut: Partitioner = common.partition.into();
    if worker.is_none() && common.processes && common.input.is_some() && cut.reads_shares() {
        return processes::launch_shares(common.region.as_deref(), to_usize(common.nodes));
    }
    let modes = match worker.as_ref().and_then(|w| w.mode) {
        Some(mode) => vec![mode],
        None => common.mode.modes(),
    };
    #[cfg(feature = "mpi")]
    let mpi = if common.mpi {
        Some(ranks::Ranks::start(&modes, common.pool_ranks.is_some())?)
    } else {
        None
    };
    #[cfg(feature = "mpi")]
    let nodes = mpi
        .as_ref()
        .map_or(to_usize(common.nodes), ranks::Ranks::size);
    #[cfg(not(feature = "mpi"))]
    let nodes = to_usize(common.nodes);
    // Partitions' processes and ranks other than 0 keep quiet: the launcher or rank 0
    // reports.
    let quiet_worker = worker.as_ref().is_some_and(|w| !w.reports());
    #[cfg(feature = "mpi")]
    let quiet = quiet_worker || mpi.as_ref().is_some_and(|m| !m.is_root());
    #[cfg(not(feature = "mpi"))]
    let quiet = quiet_worker;
    let observer = if quiet {
        None
    } else {
        progress::Bars::for_terminal()
    };
    let started = Instant::now();
    let weights_matter = matches!(job, Job::Sssp { .. });
    // The partitions' processes of a launch reading shares exchange through files.
    let exchanging = match (&worker, &common.input) {
        (Some(w), Some(path)) => w.exchange.as_ref().map(|dir| (w.partition, dir, path)),
        _ => None,
    };
    let graph = if let Some((partition, dir, path)) = exchanging {
        let reader = reader(weights_matter, observer.clone());
        let group = FileGroup::join(dir, "read", partition, nodes)?;
        let share = GraphShare::read(&reader, path, cut, common.seed, &group);
        if share.is_err()
            && let Some(w) = &worker
        {
            w.clean_up_if_orphaned();
        }
        Loaded::Share(share?)
    } else {
        #[cfg(feature = "mpi")]
        let graph = match (&mpi, &common.input) {
            // Each rank reads its own share of the file and builds its own plan.
            (Some(ranks), Some(path)) => {
                let reader = reader(weights_matter, observer.clone());
                let share = GraphShare::read(&reader, path, cut, common.seed, &ranks.world())?;
                Loaded::Share(share)
            }
            _ => Loaded::Whole(load(&common, weights_matter, observer.clone())?),
        };
        #[cfg(not(feature = "mpi"))]
        let graph = Loaded::Whole(load(&common, weights_matter, observer.clone())?);
        graph
    };
    if !quiet {
        eprintln!(
            "graph: {} vertices, {} edges ({} in {:.2} s)",
            graph.num_vertices(),
            graph.num_edges(),
            if common.input.is_some() {
                "read"
            } else {
                "generated"
            },
            started.elapsed().as_secs_f64()
        );
    }
    let converge = graph.num_vertices().max(1);
    let (task, max_iterations, tolerance) = match job {
        Job::Pagerank {
            iterations,
            tolerance,
        } => (Task::Pagerank, iterations, tolerance),
        Job::Wcc { iterations } => (Task::Wcc, iterations.unwrap_or(converge), None),
        Job::Sssp { source, iterations } => {
            let source = dense_source(&graph, source)?;
            (Task::Sssp(source), iterations.unwrap_or(converge), None)
        }
    };

    let mut rows: Vec<Row> = Vec::new();
    let mut first: Option<Values> = None;
    for mode in modes {
        let placement = match &worker {
            Some(w) => w.placement(),
            #[cfg(feature = "mpi")]
            None if let Some(ranks) = &mpi => match common.pool_ranks {
                None => Placement::Mpi,
                Some(n) => Placement::MpiPools(bi_graph::MpiPools {
                    ranks_per_pool: to_usize(n),
                    region: common.region.clone().unwrap_or_else(|| {
                        std::path::PathBuf::from(format!("/dev/shm/bi-graph-{}", ranks.job_id()))
                    }),
                }),
            },
            None if common.processes => processes::launch(common.region.as_deref(), mode)?,
            None => Placement::Threads,
        };
        let region = processes::region_of(&placement);
        let config = EngineConfig {
            nodes,
            partitioner: cut,
            mode,
            backend: common.backend.backend(common.seed),
            seed: common.seed,
            max_iterations,
            tolerance,
            observer: observer.clone(),
            placement,
            measure_staleness: common.measure_staleness,
            on_partition_start: None,
        };
        let run = match &graph {
            Loaded::Whole(g) => run_task(task, g, &config),
            Loaded::Share(g) => run_task(task, g, &config),
        };
        match (&worker, region) {
            (None, Some(path)) => processes::remove_region(&path),
            (Some(worker), _) => worker.clean_up_if_orphaned(),
            (None, None) => {}
        }
        let (values, stats) = run?;
        if worker.as_ref().is_some_and(|w| w.mode.is_some()) {
            // A partition's process: the launcher reports.
            return Ok(());
        }
        if quiet_worker {
            continue; // partition 0 reports
        }
        #[cfg(feature = "mpi")]
        if mpi.as_ref().is_some_and(|m| !m.is_root()) {
            continue; // rank 0 reports
        }
        let difference = first.as_ref().map(|f| report::compare(f, &values, mode));
        if first.is_none() {
            first = Some(values);
        }
        rows.push(Row {
            mode,
            stats,
            difference,
            staleness_measured: mode != bi_graph::Mode::BiPeriodic || common.measure_staleness,
        });
    }

    #[cfg(feature = "mpi")]
    if mpi.as_ref().is_some_and(|m| !m.is_root()) {
        return Ok(());
    }
    if quiet_worker {
        return Ok(());
    }
    let to_stdout = common.output.as_deref() == Some(Path::new("-"));
    if let (Some(path), Some(values)) = (&common.output, &first) {
        write_output(path, graph.ids(), values)?;
    }
    if common.json {
        let size = (graph.num_vertices(), graph.num_edges());
        println!("{}", report::json(program, size, common.nodes, &rows));
    } else {
        let mut text = report::summary(&rows);
        if common.phases {
            text.push('\n');
            text.push_str(&report::phases(&rows));
        }
        if to_stdout {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    }
    let disagreeing: Vec<String> = rows
        .iter()
        .filter(|r| r.difference.as_ref().is_some_and(|d| d.disagrees))
        .map(|r| report::mode_name(r.mode).to_owned())
        .collect();
    if disagreeing.is_empty() {
        Ok(())
    } else {
        Err(Failure::Message(format!(
            "modes disagree with {}: {}",
            report::mode_name(rows[0].mode),
            disagreeing.join(", ")
        )))
    }
}

/// The graph a run works on: the whole of it, or this rank's share.
enum Loaded {
    Whole(EdgeList),
    Share(GraphShare),
}

impl Loaded {
    fn num_vertices(&self) -> usize {
        match self {
            Loaded::Whole(g) => g.num_vertices(),
            Loaded::Share(g) => g.num_vertices(),
        }
    }

    fn num_edges(&self) -> usize {
        match self {
            Loaded::Whole(g) => g.num_edges(),
            Loaded::Share(g) => g.num_edges(),
        }
    }

    /// Every vertex's id in the input.
    fn ids(&self) -> &[u64] {
        match self {
            Loaded::Whole(g) => &g.ids,
            Loaded::Share(g) => g.ids(),
        }
    }
}

/// Runs the program once.
fn run_task<G: Graph>(
    task: Task,
    graph: &G,
    config: &EngineConfig,
) -> Result<(Values, RunStats), Failure> {
    Ok(match task {
        Task::Pagerank => {
            let run = bi_graph::pagerank(graph, config)?;
            (Values::Ranks(run.values), run.stats)
        }
        Task::Wcc => {
            let run = bi_graph::wcc(graph, config)?;
            (Values::Labels(run.values), run.stats)
        }
        Task::Sssp(source) => {
            let run = bi_graph::sssp(graph, source, config)?;
            (Values::Distances(run.values), run.stats)
        }
    })
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// `generate`: writes the Kronecker graph as `source target` lines.
fn generate(args: &args::GenerateArgs) -> Result<(), Failure> {
    let generator = Kronecker {
        edge_factor: args.edge_factor,
        ..Kronecker::graph500(args.scale, args.seed)
    };
    let graph = generator.generate()?;
    let io_failure = |source: io::Error| {
        Failure::Graph(GraphError::Io {
            file: args.output.clone(),
            source,
        })
    };
    let write = |out: &mut dyn Write| -> io::Result<()> {
        writeln!(
            out,
            "# Kronecker scale {} edge factor {} seed {}: {} edges",
            args.scale,
            args.edge_factor,
            args.seed,
            graph.num_edges()
        )?;
        for &(u, v) in &graph.edges {
            writeln!(out, "{}\t{}", graph.ids[u as usize], graph.ids[v as usize])?;
        }
        out.flush()
    };
    if args.output == Path::new("-") {
        write(&mut BufWriter::new(io::stdout().lock())).map_err(io_failure)
    } else {
        let file = File::create(&args.output).map_err(io_failure)?;
        write(&mut BufWriter::new(file)).map_err(io_failure)
    }
}

/// The reader of `--input`: negative weights only where they do not matter.
fn reader(weights_matter: bool, observer: Option<Arc<dyn Observer>>) -> GraphReader {
    let reader = GraphReader::new().allow_negative_weights(!weights_matter);
    match observer {
        Some(o) => reader.observer(o),
        None => reader,
    }
}

/// The graph from `--input`, or a generated Kronecker graph.
fn load(
    common: &CommonArgs,
    weights_matter: bool,
    observer: Option<Arc<dyn Observer>>,
) -> Result<EdgeList, Failure> {
    match &common.input {
        Some(path) => Ok(reader(weights_matter, observer).read_path(path)?),
        None => {
            if let Some(o) = &observer {
                o.start("generate", 0);
            }
            let generator = Kronecker {
                edge_factor: common.edge_factor,
                ..Kronecker::graph500(common.scale, common.seed)
            };
            let graph = generator.generate();
            if let Some(o) = &observer {
                o.finish();
            }
            Ok(graph?)
        }
    }
}

/// The dense index of the vertex whose original id is `id`.
fn dense_source(graph: &Loaded, id: u64) -> Result<u32, Failure> {
    match graph.ids().binary_search(&id) {
        Ok(index) => u32::try_from(index)
            .map_err(|_| Failure::Message(format!("source vertex {id} has no 32-bit index"))),
        Err(_) => Err(Failure::Message(format!(
            "unknown source vertex {id}: the graph has no vertex with this id"
        ))),
    }
}

fn write_output(path: &Path, ids: &[u64], values: &Values) -> Result<(), Failure> {
    let io_failure = |source: io::Error| {
        Failure::Graph(GraphError::Io {
            file: path.to_path_buf(),
            source,
        })
    };
    if path == Path::new("-") {
        let stdout = io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        report::write_values(ids, values, &mut out).map_err(io_failure)
    } else {
        let file = File::create(path).map_err(io_failure)?;
        let mut out = BufWriter::new(file);
        report::write_values(ids, values, &mut out).map_err(io_failure)?;
        out.flush().map_err(io_failure)
    }
}
