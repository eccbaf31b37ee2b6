//! Matrix Market coordinate files: the adjacency matrix, one stored entry per line.
//!
//! The banner `%%MatrixMarket matrix coordinate <field> <symmetry>` comes first, with
//! field `real`, `integer` or `pattern` and symmetry `general` or `symmetric`. Comment
//! lines (`%`) and blank lines may follow, then the size line `rows columns entries`,
//! then exactly `entries` lines `row column [value]` with 1-based indices. Entry
//! `(i, j)` is the edge `i -> j`; in a symmetric file an off-diagonal entry stands for
//! both directions. Vertex `i` of the result has original id `i + 1`, and every row is a
//! vertex even when no entry mentions it. `real` and `integer` values become weights;
//! `pattern` files are unweighted.

use super::lines::{LineReader, check_weight, parse_u64, quote, tokens, trim_start};
use crate::edge_list::EdgeList;
use crate::error::GraphError;
use std::io::BufRead;

/// Capacity reserved up front at most, whatever the size line claims.
const RESERVE_LIMIT: u64 = 1 << 24;

/// How many more vertices than twice the entries a size line may declare: isolated
/// vertices cost memory too, and a corrupt size line must not exhaust it.
const ISOLATED_LIMIT: u64 = 1 << 24;

/// What the banner says the entries hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Real,
    Integer,
    Pattern,
}

/// The banner line.
#[derive(Clone, Copy, Debug)]
struct Banner {
    field: Field,
    symmetric: bool,
}

/// The size line.
#[derive(Clone, Copy, Debug)]
struct Size {
    vertices: u64,
    entries: u64,
}

/// Reads a Matrix Market file from `lines` (see the module docs).
pub(crate) fn read<R: BufRead>(
    mut lines: LineReader<'_, R>,
    allow_negative_weights: bool,
) -> Result<EdgeList, GraphError> {
    let banner = match lines.next_line()? {
        Some(line) => parse_banner(line).map_err(|p| lines.error(p))?,
        None => return Err(lines.error_at(1, "empty file: missing %%MatrixMarket banner")),
    };
    let size = loop {
        let Some(line) = lines.next_line()? else {
            return Err(lines.error_at(lines.line() + 1, "missing size line"));
        };
        let line = trim_start(line);
        if line.is_empty() || line[0] == b'%' {
            continue;
        }
        break parse_size(line, banner).map_err(|p| lines.error(p))?;
    };
    let n = size.vertices;
    let copies = if banner.symmetric { 2 } else { 1 };
    let reserve = (size.entries.saturating_mul(copies)).min(RESERVE_LIMIT) as usize;
    let mut edges = Vec::with_capacity(reserve);
    let mut weights = match banner.field {
        Field::Pattern => None,
        Field::Real | Field::Integer => Some(Vec::with_capacity(reserve)),
    };
    let mut seen = 0u64;
    while let Some(line) = lines.next_line()? {
        let line = trim_start(line);
        if line.is_empty() || line[0] == b'%' {
            continue;
        }
        if seen == size.entries {
            return Err(lines.error(format!(
                "more entries than the {} the size line declares",
                size.entries
            )));
        }
        let (row, column, value) = parse_entry(line, n, banner.field, allow_negative_weights)
            .map_err(|p| lines.error(p))?;
        seen += 1;
        let (i, j) = ((row - 1) as u32, (column - 1) as u32);
        edges.push((i, j));
        if let Some(w) = weights.as_mut() {
            w.push(value);
        }
        if banner.symmetric && i != j {
            edges.push((j, i));
            if let Some(w) = weights.as_mut() {
                w.push(value);
            }
        }
    }
    if seen < size.entries {
        return Err(lines.error_at(
            lines.line() + 1,
            format!(
                "file ends after {seen} of the {} entries the size line declares",
                size.entries
            ),
        ));
    }
    Ok(EdgeList {
        ids: (1..=n).collect(),
        edges,
        weights,
    })
}

fn parse_banner(line: &[u8]) -> Result<Banner, String> {
    let mut words = tokens(line);
    let expected =
        "expected '%%MatrixMarket matrix coordinate real|integer|pattern general|symmetric'";
    let mut word = |what: &str| {
        words
            .next()
            .map(|w| w.to_ascii_lowercase())
            .ok_or_else(|| format!("bad header: missing {what}; {expected}"))
    };
    if word("banner")? != b"%%matrixmarket" {
        return Err(format!("bad header: no %%MatrixMarket banner; {expected}"));
    }
    let object = word("object")?;
    if object != b"matrix" {
        return Err(format!(
            "bad header: object {} is not 'matrix'",
            quote(&object)
        ));
    }
    let format = word("format")?;
    if format != b"coordinate" {
        return Err(format!(
            "bad header: format {} is not supported (only 'coordinate')",
            quote(&format)
        ));
    }
    let field = match word("field")?.as_slice() {
        b"real" | b"double" => Field::Real,
        b"integer" => Field::Integer,
        b"pattern" => Field::Pattern,
        other => {
            return Err(format!(
                "bad header: field {} is not supported (real, integer or pattern)",
                quote(other)
            ));
        }
    };
    let symmetric = match word("symmetry")?.as_slice() {
        b"general" => false,
        b"symmetric" => true,
        other => {
            return Err(format!(
                "bad header: symmetry {} is not supported (general or symmetric)",
                quote(other)
            ));
        }
    };
    if let Some(extra) = words.next() {
        return Err(format!("bad header: extra word {}", quote(extra)));
    }
    Ok(Banner { field, symmetric })
}

fn parse_size(line: &[u8], banner: Banner) -> Result<Size, String> {
    let mut columns = tokens(line);
    let mut number = |what: &str| {
        let token = columns.next().ok_or_else(|| {
            format!("size line: missing {what} (expected 'rows columns entries')")
        })?;
        parse_u64(token)
            .ok_or_else(|| format!("size line: {what} {} is not an integer", quote(token)))
    };
    let rows = number("rows")?;
    let cols = number("columns")?;
    let entries = number("entries")?;
    if let Some(extra) = columns.next() {
        return Err(format!("size line: extra column {}", quote(extra)));
    }
    if rows != cols {
        return Err(format!(
            "size line: the matrix is {rows} x {cols}; an adjacency matrix must be square"
        ));
    }
    if rows > u64::from(u32::MAX) {
        return Err(format!(
            "size line: {rows} vertices do not fit 32-bit vertex indices"
        ));
    }
    if rows > entries.saturating_mul(2).saturating_add(ISOLATED_LIMIT) {
        return Err(format!(
            "size line: {rows} vertices for {entries} entries is too sparse to load \
             (at most {ISOLATED_LIMIT} more vertices than twice the entries)"
        ));
    }
    let cells = rows.saturating_mul(cols);
    let most = if banner.symmetric {
        rows.saturating_mul(rows.saturating_add(1)) / 2
    } else {
        cells
    };
    if entries > most {
        return Err(format!(
            "size line: {entries} entries do not fit a {rows} x {cols} matrix"
        ));
    }
    Ok(Size {
        vertices: rows,
        entries,
    })
}

fn parse_entry(
    line: &[u8],
    n: u64,
    field: Field,
    allow_negative_weights: bool,
) -> Result<(u64, u64, f64), String> {
    let mut columns = tokens(line);
    let mut index = |what: &str| {
        let token = columns
            .next()
            .ok_or_else(|| format!("missing {what} column"))?;
        let i = parse_u64(token)
            .ok_or_else(|| format!("{what} index {} is not a positive integer", quote(token)))?;
        if i == 0 || i > n {
            return Err(format!("{what} index {i} is out of range 1..={n}"));
        }
        Ok(i)
    };
    let row = index("row")?;
    let column = index("column")?;
    let value = match field {
        Field::Pattern => 1.0,
        Field::Real | Field::Integer => {
            let token = columns
                .next()
                .ok_or_else(|| "missing value column".to_owned())?;
            if field == Field::Integer
                && std::str::from_utf8(token)
                    .ok()
                    .and_then(|t| t.parse::<i64>().ok())
                    .is_none()
            {
                return Err(format!("value {} is not an integer", quote(token)));
            }
            check_weight(token, allow_negative_weights)?
        }
    };
    if let Some(extra) = columns.next() {
        return Err(format!("extra column {}", quote(extra)));
    }
    Ok((row, column, value))
}
