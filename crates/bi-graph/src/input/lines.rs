//! Line-by-line reading without a `String` per line, and the small token parsers the
//! two formats share.
//!
//! A 16M-edge file has 16M lines; allocating for each would dominate the load. The
//! reader keeps one byte buffer, hands out each line as a slice of it, and counts lines
//! (for error messages) and bytes (for progress).

use crate::config::Observer;
use crate::error::GraphError;
use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

/// Bytes between two progress reports.
const PROGRESS_STEP: u64 = 1 << 20;

/// Longest token quoted back in an error message.
const QUOTE_LIMIT: usize = 40;

/// Reads lines into one reused buffer.
pub(crate) struct LineReader<'f, R> {
    reader: R,
    file: &'f Path,
    buffer: Vec<u8>,
    line: usize,
    /// Bytes read so far.
    bytes: u64,
    unreported: u64,
    observer: Option<Arc<dyn Observer>>,
}

impl<'f, R: BufRead> LineReader<'f, R> {
    /// Reads `reader`, naming `file` in errors and reporting bytes to `observer`.
    pub(crate) fn new(reader: R, file: &'f Path, observer: Option<Arc<dyn Observer>>) -> Self {
        LineReader {
            reader,
            file,
            buffer: Vec::with_capacity(256),
            line: 0,
            bytes: 0,
            unreported: 0,
            observer,
        }
    }

    /// The next line without its terminator (`\n` or `\r\n`), or `None` at the end.
    pub(crate) fn next_line(&mut self) -> Result<Option<&[u8]>, GraphError> {
        self.buffer.clear();
        let read = self
            .reader
            .read_until(b'\n', &mut self.buffer)
            .map_err(|source| GraphError::Io {
                file: self.file.to_path_buf(),
                source,
            })?;
        self.count(read as u64);
        self.bytes += read as u64;
        if read == 0 {
            return Ok(None);
        }
        self.line += 1;
        let mut end = self.buffer.len();
        if self.buffer[..end].ends_with(b"\n") {
            end -= 1;
        }
        if self.buffer[..end].ends_with(b"\r") {
            end -= 1;
        }
        Ok(Some(&self.buffer[..end]))
    }

    /// Bytes read so far, line terminators included.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// 1-based number of the line last returned (0 before the first).
    pub(crate) fn line(&self) -> usize {
        self.line
    }

    /// A parse error at `line`.
    pub(crate) fn error_at(&self, line: usize, problem: impl Into<String>) -> GraphError {
        GraphError::Parse {
            file: self.file.to_path_buf(),
            line,
            problem: problem.into(),
        }
    }

    /// A parse error at the line last returned.
    pub(crate) fn error(&self, problem: impl Into<String>) -> GraphError {
        self.error_at(self.line, problem)
    }

    fn count(&mut self, bytes: u64) {
        self.unreported += bytes;
        if self.unreported >= PROGRESS_STEP || (bytes == 0 && self.unreported > 0) {
            if let Some(observer) = &self.observer {
                observer.advance(self.unreported);
            }
            self.unreported = 0;
        }
    }
}

/// The whitespace-separated tokens of a line.
pub(crate) fn tokens(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
}

/// The line without leading whitespace.
pub(crate) fn trim_start(line: &[u8]) -> &[u8] {
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    &line[start..]
}

/// A token as text for an error message (shortened, lossy for non-UTF-8 bytes).
pub(crate) fn quote(token: &[u8]) -> String {
    let shown = &token[..token.len().min(QUOTE_LIMIT)];
    let mut text = String::from_utf8_lossy(shown).into_owned();
    if token.len() > QUOTE_LIMIT {
        text.push_str("...");
    }
    format!("'{text}'")
}

/// A non-negative decimal integer (digits only), or `None` when the token is not one or
/// overflows.
pub(crate) fn parse_u64(token: &[u8]) -> Option<u64> {
    if token.is_empty() {
        return None;
    }
    token.iter().try_fold(0u64, |acc, &b| {
        let digit = b.checked_sub(b'0').filter(|d| *d < 10)?;
        acc.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// A floating-point number in Rust's syntax (`1`, `-2.5`, `3e-4`, `inf`, `NaN`).
pub(crate) fn parse_f64(token: &[u8]) -> Option<f64> {
    std::str::from_utf8(token).ok()?.parse().ok()
}

/// Why a weight token is unacceptable, if it is.
pub(crate) fn check_weight(token: &[u8], allow_negative: bool) -> Result<f64, String> {
    let weight =
        parse_f64(token).ok_or_else(|| format!("weight {} is not a number", quote(token)))?;
    if weight.is_nan() {
        return Err("weight is NaN".to_owned());
    }
    if weight.is_infinite() {
        return Err(format!("weight {} is not finite", quote(token)));
    }
    if weight < 0.0 && !allow_negative {
        return Err(format!(
            "negative weight {weight} (shortest paths need non-negative weights)"
        ));
    }
    Ok(weight)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_digits_only_and_overflow_is_rejected() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"+1"), None);
        assert_eq!(parse_u64(b"1.0"), None);
        assert_eq!(parse_u64(b""), None);
    }

    #[test]
    fn weights_reject_nan_infinity_and_by_default_negatives() {
        assert_eq!(check_weight(b"2.5", false), Ok(2.5));
        assert_eq!(check_weight(b"1e3", false), Ok(1000.0));
        assert!(check_weight(b"NaN", true).is_err());
        assert!(check_weight(b"inf", true).is_err());
        assert!(check_weight(b"x", true).is_err());
        assert!(check_weight(b"-1", false).is_err());
        assert_eq!(check_weight(b"-1", true), Ok(-1.0));
    }

    #[test]
    fn lines_lose_their_terminators_and_are_counted() {
        let data = b"a b\r\n\nc\n d";
        let mut lines = LineReader::new(&data[..], Path::new("x"), None);
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line().unwrap() {
            seen.push(line.to_vec());
        }
        assert_eq!(seen, [&b"a b"[..], b"", b"c", b" d"]);
        assert_eq!(lines.line(), 4);
    }

    #[test]
    fn quotes_are_shortened() {
        let long = [b'x'; 100];
        let q = quote(&long);
        assert!(q.len() < 50 && q.ends_with("...'"), "{q}");
    }
}
