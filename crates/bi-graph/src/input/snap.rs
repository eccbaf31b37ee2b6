//! SNAP-style edge lists: one `source target [weight]` per line.
//!
//! Columns are separated by spaces or tabs; lines starting with `#` or `%` are comments
//! and blank lines are ignored, so SNAP and KONECT downloads load as they are. Ids are
//! arbitrary non-negative 64-bit integers and need not be contiguous; vertex `i` of the
//! result is the `i`-th smallest id. Either every line has a weight or none has; the
//! first edge line decides. Edges are kept as written, self-loops and repeated edges
//! included.

use super::dense_ids::Endpoints;
use super::lines::{LineReader, check_weight, parse_u64, quote, tokens, trim_start};
use crate::edge_list::EdgeList;
use crate::error::GraphError;
use std::io::BufRead;

/// Reads an edge list from `lines` (see the module docs).
pub(crate) fn read<R: BufRead>(
    mut lines: LineReader<'_, R>,
    allow_negative_weights: bool,
) -> Result<EdgeList, GraphError> {
    let mut ends = Endpoints::default();
    let mut weights: Option<Vec<f64>> = None;
    let mut weighted: Option<bool> = None;
    loop {
        let line_number = lines.line() + 1;
        let Some(line) = lines.next_line()? else {
            break;
        };
        let Some(line) = edge_line(line) else {
            continue;
        };
        let parsed = parse_line(line, weighted, allow_negative_weights);
        let (source, target, weight) = parsed.map_err(|p| lines.error_at(line_number, p))?;
        ends.push(source, target);
        if let Some(w) = weight {
            weights.get_or_insert_with(Vec::new).push(w);
        }
        weighted = Some(weight.is_some());
    }
    let (ids, edges) = ends.densify()?;
    Ok(EdgeList {
        ids,
        edges,
        weights,
    })
}

/// The line without leading blanks, or `None` for a comment or blank line.
pub(crate) fn edge_line(line: &[u8]) -> Option<&[u8]> {
    let line = trim_start(line);
    (!line.is_empty() && line[0] != b'#' && line[0] != b'%').then_some(line)
}

/// One edge line; `weighted` is what earlier lines decided.
pub(crate) fn parse_line(
    line: &[u8],
    weighted: Option<bool>,
    allow_negative_weights: bool,
) -> Result<(u64, u64, Option<f64>), String> {
    let mut columns = tokens(line);
    let id = |token: Option<&[u8]>, what: &str| -> Result<u64, String> {
        let token = token.ok_or_else(|| format!("missing {what} column"))?;
        parse_u64(token).ok_or_else(|| {
            format!(
                "{what} id {} is not a non-negative 64-bit integer",
                quote(token)
            )
        })
    };
    let source = id(columns.next(), "source")?;
    let target = id(columns.next(), "target")?;
    let weight = match (columns.next(), weighted) {
        (None, Some(true)) => {
            return Err("missing weight column (earlier lines have one)".to_owned());
        }
        (None, _) => None,
        (Some(token), Some(false)) => {
            return Err(format!(
                "extra column {} (earlier lines have no weight)",
                quote(token)
            ));
        }
        (Some(token), _) => Some(check_weight(token, allow_negative_weights)?),
    };
    if let Some(extra) = columns.next() {
        return Err(format!(
            "extra column {} (expected: source target [weight])",
            quote(extra)
        ));
    }
    Ok((source, target, weight))
}
