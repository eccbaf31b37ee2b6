//! The named byte ranges of a region ([`Section`], [`SectionKind`]) and the length and
//! magic of the header that opens it: what errors, the header and the layout all speak
//! of.

use std::fmt;
use std::ops::Range;

/// Length of the encoded header in bytes.
pub const HEADER_LEN: usize = 152;

/// The first eight bytes of every region.
pub const MAGIC: [u8; 8] = *b"BIREGION";

/// The named parts of a region, in address order.
///
/// ```
/// use bi_core::region::{Layout, RegionConfig, SectionKind};
///
/// let layout = Layout::compute(&RegionConfig::new(1 << 20)).unwrap();
/// assert_eq!(layout.section(SectionKind::Heap), layout.heap());
/// assert_eq!(SectionKind::ALL[0], SectionKind::Header);
/// assert_eq!(SectionKind::ALL.len(), 7);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SectionKind {
    /// The header (format, parameters, section table, checksum).
    Header,
    /// One record per node: clock, quiescence record, per-node runtime state.
    NodeTable,
    /// One record per reader of each node: enter and exit times.
    ReaderTable,
    /// Per-node rings logging modified slots and freed objects.
    LogRings,
    /// Named roots.
    RootDirectory,
    /// Who owns each extent of the heap.
    ExtentTable,
    /// Everything else: the objects themselves.
    Heap,
}

impl SectionKind {
    /// All sections, in address order.
    pub const ALL: [SectionKind; 7] = [
        SectionKind::Header,
        SectionKind::NodeTable,
        SectionKind::ReaderTable,
        SectionKind::LogRings,
        SectionKind::RootDirectory,
        SectionKind::ExtentTable,
        SectionKind::Heap,
    ];

    /// The sections recorded in the header's section table (all but the header itself).
    pub(crate) const STORED: [SectionKind; 6] = [
        SectionKind::NodeTable,
        SectionKind::ReaderTable,
        SectionKind::LogRings,
        SectionKind::RootDirectory,
        SectionKind::ExtentTable,
        SectionKind::Heap,
    ];

    pub(super) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for SectionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SectionKind::Header => "header",
            SectionKind::NodeTable => "node table",
            SectionKind::ReaderTable => "reader table",
            SectionKind::LogRings => "log rings",
            SectionKind::RootDirectory => "root directory",
            SectionKind::ExtentTable => "extent table",
            SectionKind::Heap => "heap",
        })
    }
}

/// A byte range of a region: `offset .. offset + len`.
///
/// ```
/// use bi_core::region::Section;
///
/// let s = Section { offset: 64, len: 128 };
/// assert_eq!(s.end(), 192);
/// assert!(s.contains(100, 8));
/// assert!(!s.contains(190, 8));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Section {
    /// First byte.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

impl Section {
    /// One past the last byte (saturating).
    ///
    /// ```
    /// use bi_core::region::Section;
    ///
    /// assert_eq!(Section { offset: 64, len: 64 }.end(), 128);
    /// assert_eq!(Section { offset: usize::MAX, len: 1 }.end(), usize::MAX); // saturates
    /// ```
    pub const fn end(&self) -> usize {
        self.offset.saturating_add(self.len)
    }

    /// The section as a range of offsets.
    ///
    /// ```
    /// use bi_core::region::Section;
    ///
    /// let s = Section { offset: 64, len: 32 };
    /// assert_eq!(s.range(), 64..96);
    /// assert_eq!(s.range().len(), s.len);
    /// ```
    pub const fn range(&self) -> Range<usize> {
        self.offset..self.end()
    }

    /// Whether `offset .. offset + len` lies inside this section.
    ///
    /// ```
    /// use bi_core::region::Section;
    ///
    /// let s = Section { offset: 64, len: 64 };
    /// assert!(s.contains(64, 64) && s.contains(120, 8));
    /// assert!(!s.contains(60, 8) && !s.contains(121, 8));
    /// assert!(!s.contains(usize::MAX, 2)); // no overflow
    /// ```
    #[inline(always)]
    pub const fn contains(&self, offset: usize, len: usize) -> bool {
        // `offset - self.offset` wraps to a huge value below the section, so one
        // comparison covers both ends, and nothing here can overflow.
        let rel = offset.wrapping_sub(self.offset);
        rel <= self.len && len <= self.len - rel
    }
}

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{} ({} bytes)", self.offset, self.end(), self.len)
    }
}
