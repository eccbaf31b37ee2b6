//! Errors of the graph toolkit: bad input names the file, the line and the problem.

use bi_core::channel::ChannelError;
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
        }
    }
}

impl std::error::Error for GraphError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GraphError::Io { source, .. } => Some(source),
            GraphError::Runtime(e) => Some(e),
            GraphError::Channel(e) => Some(e),
            GraphError::Region(e) => Some(e),
            GraphError::Parse { .. } | GraphError::InvalidArgument { .. } => None,
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
