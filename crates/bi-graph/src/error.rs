//! Errors of the graph toolkit: bad input names the file, the line and the problem.

use bi_core::channel::ChannelError;
use bi_core::mem::EmulatorError;
use bi_core::region::RegionError;
use bi_core::runtime::BiError;
use std::fmt;
use std::path::PathBuf;

/// Why loading a graph or running a program failed.
///
/// ```
/// use bi_graph::{sssp, EdgeList, EngineConfig, GraphError};
///
/// let g = EdgeList { ids: vec![1, 2], edges: vec![(0, 1)], weights: None };
/// let err = sssp(&g, 9, &EngineConfig::default()).unwrap_err(); // no vertex 9
/// assert!(matches!(err, GraphError::InvalidArgument { .. }));
/// assert!(err.to_string().contains("9"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum GraphError {
    /// A line of an input file is malformed.
    Parse {
        /// The file.
        file: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// An input or output file could not be read or written.
    Io {
        /// The file.
        file: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A parameter is out of range (zero nodes, a source vertex not in the graph, ...).
    InvalidArgument {
        /// What is wrong.
        reason: String,
    },
    /// The shared-memory runtime failed.
    Runtime(BiError),
    /// A message channel failed.
    Channel(ChannelError),
    /// The shared region could not be created.
    Region(RegionError),
    /// The graph's shared arrays do not fit: the address space, or the 32-bit word
    /// indices the engine's shared layout uses.
    TooLarge {
        /// What does not fit.
        reason: String,
    },
    /// The non-coherence emulator refused its configuration (`--backend emulated`).
    Emulator(EmulatorError),
    /// A partition's worker thread panicked (a bug: please report it with the command).
    PartitionPanicked {
        /// The partition.
        partition: usize,
    },
    /// The partition stopped because another one failed; that partition's error is the
    /// one a run reports, so this one is seen only where no other was kept.
    Aborted,
    /// Values between partitions arrived inconsistent: a message or a slot named a
    /// vertex, a partial or an aggregate that its partition's plan does not have (a bug,
    /// or memory another program wrote).
    Exchange {
        /// What was inconsistent.
        what: &'static str,
    },
    /// A partition's process could not be started or watched ([`Placement::Processes`]).
    ///
    /// [`Placement::Processes`]: crate::Placement::Processes
    Spawn {
        /// The partition.
        partition: usize,
        /// Why.
        source: std::io::Error,
    },
    /// A partition's process failed, died or was stopped ([`Placement::Processes`]); the
    /// others were stopped.
    ///
    /// [`Placement::Processes`]: crate::Placement::Processes
    PartitionFailed {
        /// The partition that failed first.
        partition: usize,
        /// What happened to its process.
        reason: String,
    },
    /// Background quiescence passes of the periodic mode failed (a cache operation was
    /// refused), so values may have been read staler than the period allows.
    QuiescenceFailed {
        /// How many passes failed.
        passes: u64,
    },
    /// The engine could not lay its shared arrays out in the region (a bug).
    Layout {
        /// What went wrong.
        reason: String,
    },
}

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GraphError::Parse {
                file,
                line,
                problem,
            } => write!(f, "{}:{line}: {problem}", file.display()),
            GraphError::Io { file, source } => write!(f, "{}: {source}", file.display()),
            GraphError::InvalidArgument { reason } => write!(f, "invalid argument: {reason}"),
            GraphError::Runtime(e) => write!(f, "runtime: {e}"),
            GraphError::Channel(e) => write!(f, "channel: {e}"),
            GraphError::Region(e) => write!(f, "region: {e}"),
            GraphError::TooLarge { reason } => write!(f, "the graph is too large: {reason}"),
            GraphError::Emulator(e) => write!(f, "emulator: {e}"),
            GraphError::PartitionPanicked { partition } => {
                write!(f, "the worker of partition {partition} panicked")
            }
            GraphError::Aborted => f.write_str("stopped because another partition failed"),
            GraphError::Exchange { what } => {
                write!(f, "values between partitions are inconsistent: {what}")
            }
            GraphError::Spawn { partition, source } => {
                write!(
                    f,
                    "cannot start the process of partition {partition}: {source}"
                )
            }
            GraphError::PartitionFailed { partition, reason } => {
                write!(f, "the process of partition {partition} {reason}")
            }
            GraphError::QuiescenceFailed { passes } => {
                write!(f, "{passes} background quiescence passes failed")
            }
            GraphError::Layout { reason } => write!(f, "shared layout: {reason}"),
        }
    }
}

impl std::error::Error for GraphError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GraphError::Io { source, .. } | GraphError::Spawn { source, .. } => Some(source),
            GraphError::Runtime(e) => Some(e),
            GraphError::Channel(e) => Some(e),
            GraphError::Region(e) => Some(e),
            GraphError::Emulator(e) => Some(e),
            GraphError::Parse { .. }
            | GraphError::InvalidArgument { .. }
            | GraphError::TooLarge { .. }
            | GraphError::PartitionPanicked { .. }
            | GraphError::Aborted
            | GraphError::Exchange { .. }
            | GraphError::PartitionFailed { .. }
            | GraphError::QuiescenceFailed { .. }
            | GraphError::Layout { .. } => None,
        }
    }
}

impl From<BiError> for GraphError {
    fn from(e: BiError) -> Self {
        GraphError::Runtime(e)
    }
}

impl From<ChannelError> for GraphError {
    fn from(e: ChannelError) -> Self {
        GraphError::Channel(e)
    }
}

impl From<RegionError> for GraphError {
    fn from(e: RegionError) -> Self {
        GraphError::Region(e)
    }
}
