//! Reading graphs from files: SNAP-style edge lists and Matrix Market.
//!
//! # Why this shape
//!
//! The engine wants dense `u32` vertex indices, while real data sets name vertices with
//! sparse 64-bit ids. The readers keep the ids ([`EdgeList::ids`], sorted increasingly,
//! so vertex `i` is the `i`-th smallest id) and output is written back with them. A bad
//! line is reported as [`GraphError::Parse`] with the file, the 1-based line number and
//! what is wrong, so a user can fix a 16M-line file without bisecting it; an unreadable
//! file is [`GraphError::Io`]. No input, however malformed, makes a reader panic.
//!
//! Reading is one buffered pass with one reused line buffer (no allocation per line);
//! the only temporaries are a few words per edge while ids are made dense.
//!
//! # Formats
//!
//! * **Edge list** (SNAP, KONECT): `source target [weight]` per line, `#`/`%` comments.
//! * **Matrix Market** coordinate files (`real`, `integer` or `pattern`; `general` or
//!   `symmetric`), recognised by the `%%MatrixMarket` banner or the `.mtx` extension.
//!
//! Negative weights are rejected unless [`GraphReader::allow_negative_weights`] is set:
//! shortest paths are undefined with them, while PageRank and components ignore weights.
//!
//! # Example
//!
//! ```
//! use bi_graph::input::{Format, GraphReader};
//!
//! let text = "# a small graph\n10 20\n20 30\n30 10\n";
//! let g = GraphReader::new().read(text.as_bytes(), "inline.txt", Format::EdgeList)?;
//! assert_eq!(g.ids, [10, 20, 30]);
//! assert_eq!(g.edges, [(0, 1), (1, 2), (2, 0)]);
//!
//! let bad = "10 20\n20 x\n";
//! let err = GraphReader::new().read(bad.as_bytes(), "bad.txt", Format::EdgeList).unwrap_err();
//! assert!(err.to_string().starts_with("bad.txt:2: target id 'x'"));
//! # Ok::<(), bi_graph::GraphError>(())
//! ```

mod dense_ids;
mod lines;
mod matrix_market;
pub(crate) mod share;
mod snap;

use crate::config::Observer;
use crate::edge_list::EdgeList;
use crate::error::GraphError;
use lines::LineReader;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;

/// Read buffer size: large enough that a read is one system call per 256 KiB.
pub(crate) const BUFFER_BYTES: usize = 256 * 1024;

/// The banner that starts every Matrix Market file.
const MATRIX_MARKET_BANNER: &[u8] = b"%%MatrixMarket";

/// A graph file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Whitespace-separated `source target [weight]` lines (SNAP style).
    EdgeList,
    /// A Matrix Market coordinate file.
    MatrixMarket,
}

impl Format {
    /// The format a file of this name and first bytes is in: Matrix Market when the
    /// contents start with `%%MatrixMarket` or the name ends in `.mtx`, an edge list
    /// otherwise.
    ///
    /// ```
    /// use bi_graph::input::Format;
    /// use std::path::Path;
    ///
    /// assert_eq!(Format::detect(Path::new("g.mtx"), b""), Format::MatrixMarket);
    /// assert_eq!(Format::detect(Path::new("g"), b"%%MatrixMarket matrix"), Format::MatrixMarket);
    /// assert_eq!(Format::detect(Path::new("g.txt"), b"1 2\n"), Format::EdgeList);
    /// ```
    pub fn detect(path: &Path, start: &[u8]) -> Format {
        let has_banner = start.len() >= MATRIX_MARKET_BANNER.len()
            && start[..MATRIX_MARKET_BANNER.len()].eq_ignore_ascii_case(MATRIX_MARKET_BANNER);
        let mtx_name = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("mtx"));
        if has_banner || mtx_name {
            Format::MatrixMarket
        } else {
            Format::EdgeList
        }
    }
}

/// Reads graphs; the options say how.
///
/// ```
/// use bi_graph::input::GraphReader;
/// use std::io::Write;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("g.mtx");
/// let mut f = std::fs::File::create(&path)?;
/// writeln!(f, "%%MatrixMarket matrix coordinate pattern symmetric")?;
/// writeln!(f, "3 3 1")?;
/// writeln!(f, "2 1")?;
/// drop(f);
///
/// let g = GraphReader::new().read_path(&path)?;
/// assert_eq!(g.ids, [1, 2, 3]); // vertex 3 is isolated but present
/// assert_eq!(g.edges, [(1, 0), (0, 1)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct GraphReader {
    format: Option<Format>,
    allow_negative_weights: bool,
    observer: Option<Arc<dyn Observer>>,
}

impl std::fmt::Debug for GraphReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphReader")
            .field("format", &self.format)
            .field("allow_negative_weights", &self.allow_negative_weights)
            .finish_non_exhaustive()
    }
}

impl GraphReader {
    /// A reader that detects the format and rejects negative weights.
    pub fn new() -> Self {
        GraphReader::default()
    }

    /// Reads files as `format` instead of detecting it.
    pub fn format(mut self, format: Format) -> Self {
        self.format = Some(format);
        self
    }

    /// Whether negative weights are accepted (they are not by default).
    pub fn allow_negative_weights(mut self, allow: bool) -> Self {
        self.allow_negative_weights = allow;
        self
    }

    /// Reports progress to `observer`: one phase `"load"` whose steps are bytes.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Reads the graph in the file at `path`.
    ///
    /// # Errors
    ///
    /// [`GraphError::Io`] when the file cannot be opened or read, [`GraphError::Parse`]
    /// for malformed contents, [`GraphError::InvalidArgument`] when the graph has more
    /// vertices than 32-bit indices can number.
    pub fn read_path(&self, path: impl AsRef<Path>) -> Result<EdgeList, GraphError> {
        let path = path.as_ref();
        let io_error = |source| GraphError::Io {
            file: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io_error)?;
        let total = file.metadata().map(|m| m.len()).unwrap_or(0);
        let mut reader = BufReader::with_capacity(BUFFER_BYTES, file);
        let format = match self.format {
            Some(format) => format,
            None => Format::detect(path, reader.fill_buf().map_err(io_error)?),
        };
        if let Some(observer) = &self.observer {
            observer.start("load", total);
        }
        let result = self.parse(reader, path, format);
        if let Some(observer) = &self.observer {
            observer.finish();
        }
        result
    }

    /// Reads a graph in `format` from `reader`, naming it `name` in errors.
    ///
    /// # Errors
    ///
    /// As [`GraphReader::read_path`].
    pub fn read<R: BufRead>(
        &self,
        reader: R,
        name: impl AsRef<Path>,
        format: Format,
    ) -> Result<EdgeList, GraphError> {
        self.parse(reader, name.as_ref(), format)
    }

    /// Share `share` of `shares` of the edge list at `path`: the lines that start in
    /// that part of its bytes (see [`share`]).
    pub(crate) fn read_share(
        &self,
        path: &Path,
        share: usize,
        shares: usize,
    ) -> Result<share::EdgeShare, GraphError> {
        let io_error = |source| GraphError::Io {
            file: path.to_path_buf(),
            source,
        };
        let mut start = Vec::with_capacity(MATRIX_MARKET_BANNER.len());
        File::open(path)
            .and_then(|f| {
                f.take(MATRIX_MARKET_BANNER.len() as u64)
                    .read_to_end(&mut start)
            })
            .map_err(io_error)?;
        if self.format.unwrap_or_else(|| Format::detect(path, &start)) == Format::MatrixMarket {
            return Err(GraphError::InvalidArgument {
                reason: format!(
                    "{}: a Matrix Market file is read whole, not in shares (its header and \
                     symmetry belong to the whole file); give an edge list",
                    path.display()
                ),
            });
        }
        let allow = self.allow_negative_weights;
        share::read_share(path, share, shares, allow, self.observer.clone())
    }

    fn parse<R: BufRead>(
        &self,
        reader: R,
        name: &Path,
        format: Format,
    ) -> Result<EdgeList, GraphError> {
        let lines = LineReader::new(reader, name, self.observer.clone());
        match format {
            Format::EdgeList => snap::read(lines, self.allow_negative_weights),
            Format::MatrixMarket => matrix_market::read(lines, self.allow_negative_weights),
        }
    }
}

/// Reads the graph in the file at `path`, detecting its format, rejecting negative
/// weights. Shorthand for `GraphReader::new().read_path(path)`.
///
/// # Errors
///
/// As [`GraphReader::read_path`].
///
/// ```no_run
/// let g = bi_graph::input::read_graph("web-Google.txt")?;
/// println!("{} vertices, {} edges", g.num_vertices(), g.num_edges());
/// # Ok::<(), bi_graph::GraphError>(())
/// ```
pub fn read_graph(path: impl AsRef<Path>) -> Result<EdgeList, GraphError> {
    GraphReader::new().read_path(path)
}
