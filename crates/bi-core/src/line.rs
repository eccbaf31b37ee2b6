//! Cache-line geometry: line sizes and the rounding of byte ranges to whole lines.
//!
//! Every cache operation works on whole lines, so a byte range is widened outward: its
//! start rounds down to a line boundary and its end rounds up. A zero-length range covers
//! no line at all (it is not "the line containing `start`"), so callers can pass empty
//! ranges without special cases.

use std::fmt;
use std::ops::Range;

/// A cache-line size in bytes: a power of two from 8 to 4096.
///
/// x86_64 uses 64-byte lines; some aarch64 parts use 128, and tests also use 32 to
/// exercise the rounding.
///
/// ```
/// use bi_core::line::LineSize;
///
/// let line = LineSize::new(64).unwrap();
/// assert_eq!(line.get(), 64);
/// assert_eq!(line.lines(10, 100), 0..2); // bytes 10..110 touch lines 0 and 1
/// assert_eq!(line.lines(64, 0), 0..0); // empty range: no line
/// assert!(LineSize::new(48).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LineSize(u32);

/// A line size that is not a power of two in `8..=4096`.
///
/// ```
/// use bi_core::line::{BadLineSize, LineSize};
///
/// assert_eq!(LineSize::new(96), Err(BadLineSize(96)));
/// assert_eq!(LineSize::new(8192).unwrap_err().0, 8192); // above 4096
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadLineSize(pub usize);

impl fmt::Display for BadLineSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line size {} is not a power of two between 8 and 4096",
            self.0
        )
    }
}

impl std::error::Error for BadLineSize {}

impl LineSize {
    /// The line size of x86_64 processors.
    pub const X86: LineSize = LineSize(64);

    /// Checks that `bytes` is a power of two in `8..=4096`.
    ///
    /// ```
    /// use bi_core::line::LineSize;
    ///
    /// assert_eq!(LineSize::new(64).unwrap(), LineSize::X86);
    /// assert!(LineSize::new(8).is_ok() && LineSize::new(4096).is_ok());
    /// assert!(LineSize::new(4).is_err() && LineSize::new(0).is_err());
    /// ```
    pub const fn new(bytes: usize) -> Result<LineSize, BadLineSize> {
        if bytes.is_power_of_two() && bytes >= 8 && bytes <= 4096 {
            Ok(LineSize(bytes as u32))
        } else {
            Err(BadLineSize(bytes))
        }
    }

    /// The size in bytes.
    ///
    /// ```
    /// use bi_core::line::LineSize;
    ///
    /// assert_eq!(LineSize::new(128).unwrap().get(), 128);
    /// ```
    #[inline]
    pub const fn get(self) -> usize {
        self.0 as usize
    }

    /// The index of the line that holds byte `addr`.
    ///
    /// ```
    /// use bi_core::line::LineSize;
    ///
    /// let line = LineSize::X86;
    /// assert_eq!((line.line_of(0), line.line_of(63), line.line_of(64)), (0, 0, 1));
    /// ```
    #[inline]
    pub const fn line_of(self, addr: usize) -> usize {
        addr >> self.0.trailing_zeros()
    }

    /// `addr` rounded down to the start of its line.
    ///
    /// ```
    /// use bi_core::line::LineSize;
    ///
    /// assert_eq!(LineSize::X86.align_down(130), 128);
    /// assert_eq!(LineSize::X86.align_down(128), 128);
    /// ```
    #[inline]
    pub const fn align_down(self, addr: usize) -> usize {
        addr & !(self.get() - 1)
    }

    /// `addr` rounded up to a line boundary, or `None` on overflow.
    ///
    /// ```
    /// use bi_core::line::LineSize;
    ///
    /// assert_eq!(LineSize::X86.align_up(130), Some(192));
    /// assert_eq!(LineSize::X86.align_up(128), Some(128));
    /// assert_eq!(LineSize::X86.align_up(usize::MAX), None);
    /// ```
    #[inline]
    pub const fn align_up(self, addr: usize) -> Option<usize> {
        match addr.checked_add(self.get() - 1) {
            Some(v) => Some(v & !(self.get() - 1)),
            None => None,
        }
    }

    /// Indices of the lines touched by the byte range `start .. start + len`.
    ///
    /// Empty for `len == 0`. The end saturates at the top of the address space.
    ///
    /// ```
    /// use bi_core::line::LineSize;
    ///
    /// let line = LineSize::X86;
    /// assert_eq!(line.lines(60, 8), 0..2); // straddles a boundary
    /// assert_eq!(line.lines(64, 64), 1..2);
    /// assert_eq!(line.lines(usize::MAX - 10, 100).end, usize::MAX / 64 + 1); // saturates
    /// ```
    #[inline]
    pub fn lines(self, start: usize, len: usize) -> Range<usize> {
        if len == 0 {
            return 0..0;
        }
        let last = start.saturating_add(len - 1);
        self.line_of(start)..self.line_of(last) + 1
    }
}

impl Default for LineSize {
    fn default() -> Self {
        LineSize::X86
    }
}

impl fmt::Display for LineSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} B", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_sizes() {
        for bad in [0, 1, 4, 48, 96, 8192] {
            assert_eq!(LineSize::new(bad), Err(BadLineSize(bad)));
        }
        for good in [8, 32, 64, 128, 4096] {
            assert_eq!(LineSize::new(good).unwrap().get(), good);
        }
    }

    #[test]
    fn lines_round_outward() {
        for size in [32usize, 64, 128] {
            let l = LineSize::new(size).unwrap();
            assert_eq!(l.lines(0, 0), 0..0);
            assert_eq!(l.lines(5, 0), 0..0);
            assert_eq!(l.lines(0, 1), 0..1);
            assert_eq!(l.lines(size - 1, 1), 0..1);
            assert_eq!(l.lines(size - 1, 2), 0..2); // misaligned, straddles a boundary
            assert_eq!(l.lines(size, size), 1..2); // exactly one aligned line
            assert_eq!(l.lines(1, 3 * size), 0..4); // misaligned start and end
            assert_eq!(l.align_down(size + 3), size);
            assert_eq!(l.align_up(size + 3), Some(2 * size));
            assert_eq!(l.align_up(usize::MAX), None);
        }
    }

    #[test]
    fn lines_saturate_at_top_of_address_space() {
        let l = LineSize::X86;
        let r = l.lines(usize::MAX - 10, 100);
        assert_eq!(r.end, l.line_of(usize::MAX) + 1);
    }
}
