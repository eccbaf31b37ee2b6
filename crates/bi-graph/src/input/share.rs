//! One partition's share of an edge list: the lines that start in its byte range of the
//! file.
//!
//! Partitions that each read `1 / shares` of a file's bytes together read every line
//! once: a line belongs to the share whose range holds its first byte, so a share skips
//! the end of a line its range starts inside and reads past its end to finish the last
//! line it started. Each keeps raw ids; making them dense takes every share's ids
//! ([`GraphShare`](crate::engine::share::GraphShare) does that with the others).

use super::BUFFER_BYTES;
use super::lines::LineReader;
use super::snap::{edge_line, parse_line};
use crate::config::Observer;
use crate::error::GraphError;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

/// The edge lines of one share, as written.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct EdgeShare {
    /// Raw endpoint ids in file order: source, target, source, target, ...
    pub ends: Vec<u64>,
    /// One weight per edge when the lines carry them.
    pub weights: Option<Vec<f64>>,
    /// Whether the share's edge lines carry weights (`None`: it has none).
    pub weighted: Option<bool>,
}

/// The byte range of share `share` of `shares` in a file of `len` bytes.
pub(crate) fn byte_range(len: u64, share: usize, shares: usize) -> (u64, u64) {
    let at = |k: usize| (u128::from(len) * k as u128 / shares.max(1) as u128) as u64;
    (at(share), at(share + 1))
}

/// Reads share `share` of `shares` of the edge list at `path` (see the module docs).
pub(crate) fn read_share(
    path: &Path,
    share: usize,
    shares: usize,
    allow_negative_weights: bool,
    observer: Option<Arc<dyn Observer>>,
) -> Result<EdgeShare, GraphError> {
    let io_error = |source| GraphError::Io {
        file: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(io_error)?;
    let len = file.metadata().map_err(io_error)?.len();
    let (start, end) = byte_range(len, share, shares);
    // From the byte before the range: if it ends a line, the range starts a line.
    let skip_from = start.saturating_sub(1);
    file.seek(SeekFrom::Start(skip_from)).map_err(io_error)?;
    let mut reader = BufReader::with_capacity(BUFFER_BYTES, file);
    let mut at = skip_from;
    if start > 0 {
        let mut rest = Vec::new();
        at += reader.read_until(b'\n', &mut rest).map_err(io_error)? as u64;
    }
    if let Some(o) = &observer {
        o.start("load", end.saturating_sub(at));
    }
    let mut lines = LineReader::new(reader, path, observer.clone());
    let mut out = EdgeShare::default();
    let mut line_start = at;
    while line_start < end {
        let Some(line) = lines.next_line()? else {
            break;
        };
        let Some(line) = edge_line(line) else {
            line_start = at + lines.bytes();
            continue;
        };
        let parsed = parse_line(line, out.weighted, allow_negative_weights);
        let (source, target, weight) = match parsed {
            Ok(edge) => edge,
            Err(problem) => return Err(parse_error(path, line_start, problem)),
        };
        out.ends.extend([source, target]);
        if let Some(w) = weight {
            out.weights.get_or_insert_with(Vec::new).push(w);
        }
        out.weighted = Some(weight.is_some());
        line_start = at + lines.bytes();
    }
    if let Some(o) = &observer {
        o.finish();
    }
    Ok(out)
}

/// A parse error at the line starting at byte `at`, numbered as a whole-file read
/// numbers it (the lines before it are counted only on this path).
fn parse_error(path: &Path, at: u64, problem: String) -> GraphError {
    let line = File::open(path)
        .map(|f| {
            BufReader::with_capacity(BUFFER_BYTES, f)
                .take(at)
                .bytes()
                .filter(|b| matches!(b, Ok(b'\n')))
                .count()
                + 1
        })
        .unwrap_or(0);
    GraphError::Parse {
        file: path.to_path_buf(),
        line,
        problem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    /// However a file is cut, the shares hold its edge lines once each, in file order.
    #[test]
    fn shares_read_every_line_once_wherever_the_cuts_fall() {
        let text = "# comment\n1 2\n\n3 4\r\n  5 6\n% other\n70 80\n9 10";
        let f = file(text);
        let whole = read_share(f.path(), 0, 1, false, None).unwrap();
        assert_eq!(whole.ends, [1, 2, 3, 4, 5, 6, 70, 80, 9, 10]);
        for shares in 1..=text.len() + 3 {
            let mut ends = Vec::new();
            for k in 0..shares {
                ends.extend(read_share(f.path(), k, shares, false, None).unwrap().ends);
            }
            assert_eq!(ends, whole.ends, "{shares} shares");
        }
    }

    /// A bad line is reported with its line number in the whole file, whichever share
    /// reads it; weights are kept per edge.
    #[test]
    fn a_bad_line_is_numbered_as_in_the_whole_file() {
        let f = file("1 2 0.5\n3 4 1.5\n5 x 2\n7 8 1\n");
        for shares in [1, 2, 3] {
            let errors: Vec<String> = (0..shares)
                .filter_map(|k| read_share(f.path(), k, shares, false, None).err())
                .map(|e| e.to_string())
                .collect();
            assert_eq!(errors.len(), 1, "{shares} shares: {errors:?}");
            assert!(errors[0].contains(":3: target id 'x'"), "{}", errors[0]);
        }
        let g = file("1 2 0.5\n3 4 1.5\n");
        let second = read_share(g.path(), 1, 2, false, None).unwrap();
        assert_eq!((second.ends, second.weights), (vec![3, 4], Some(vec![1.5])));
        assert_eq!(second.weighted, Some(true));
    }
}
