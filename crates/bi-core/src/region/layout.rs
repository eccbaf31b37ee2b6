//! Where each part of a region lives, computed from a handful of parameters.
//!
//! # Why computed, and why stored too
//!
//! Every process that maps a region must agree on where the node table, the reader table,
//! the log rings, the root directory and the heap begin. The layout is therefore a pure
//! function of a few parameters ([`RegionConfig`]): the creator computes it and writes both
//! the parameters and the resulting section table into the header; an opener recomputes it
//! from the stored parameters and insists that the two agree. A disagreement means the
//! file was written by different layout rules (or is corrupt), and continuing would mean
//! two processes reading each other's records at the wrong offsets.
//!
//! # How
//!
//! Sections follow each other in a fixed order, each starting on a line boundary and
//! spanning whole lines, so cache operations on one section never touch its neighbour:
//!
//! | section | size |
//! |---|---|
//! | header | [`HEADER_LEN`] rounded up to a line |
//! | node table | `nodes` x 4 slots |
//! | reader table | `nodes` x `readers_per_node` slots |
//! | log rings | `nodes` x 2 rings (modified and freed), each 2 slots of control then `log_ring_entries` x 16 bytes rounded up to a slot |
//! | root directory | `root_entries` x 2 slots |
//! | extent table | one 8-byte owner word per extent of the heap, rounded up to a slot |
//! | heap | the rest, at least 4 KiB |
//!
//! The heap is cut into *extents* (the last one may be shorter): the unit in which heap
//! memory is handed to the structures that need it ([`Layout::extent`]), recorded in the
//! extent table. Their size follows from the region's size: the smallest power of two of
//! lines, at least [`MIN_EXTENT_LINES`], that makes at most [`TARGET_EXTENTS`] of them.
//!
//! A *slot* is `max(line size, 64)` bytes: one line on machines with 64-byte lines or
//! larger, and enough lines to hold a 64-byte record on machines (or tests) with smaller
//! lines. Every per-node and per-reader record gets slots of its own, so two nodes never
//! write the same line.

use super::error::RegionError;
use super::section::{HEADER_LEN, Section, SectionKind};
use crate::line::LineSize;

/// Slots per node record, each on lines of its own: the quiescence record (slot 0), the
/// pool lock record (slot 1), and room for more per-node state.
pub(crate) const NODE_RECORD_SLOTS: usize = 4;
/// Log rings per node: one for modified slots, one for freed objects.
pub(crate) const RINGS_PER_NODE: usize = 2;
/// Control slots at the start of each log ring (head and tail on separate lines).
pub(crate) const RING_CONTROL_SLOTS: usize = 2;
/// Slots per root directory entry: the entry (name, type) and the slot of the structure
/// it names (its root word and its writer record), each on lines of their own.
pub(crate) const ROOT_ENTRY_SLOTS: usize = 2;
/// Bytes per log ring entry (an offset and a time stamp).
pub(crate) const LOG_ENTRY_BYTES: usize = 16;
/// The smallest heap a region may have.
pub(crate) const MIN_HEAP_BYTES: usize = 4096;
/// The smallest slot: one 64-byte record.
pub(crate) const MIN_SLOT_BYTES: usize = 64;
/// Bytes per extent table entry (the owner word of one extent).
pub const EXTENT_ENTRY_BYTES: usize = 8;
/// The smallest extent, in lines.
pub const MIN_EXTENT_LINES: usize = 64;
/// At most about how many extents a heap is cut into.
pub const TARGET_EXTENTS: usize = 1024;

/// Most nodes a region can describe.
pub(crate) const MAX_NODES: u32 = 4096;
/// Most readers per node.
pub(crate) const MAX_READERS_PER_NODE: u32 = 65536;
/// Most entries per log ring.
pub(crate) const MAX_LOG_RING_ENTRIES: u32 = 1 << 24;
/// Most root directory entries.
pub(crate) const MAX_ROOT_ENTRIES: u32 = 65536;
/// Largest region size in bytes (2^48: far beyond any memory pool, and small enough that no
/// offset computation can overflow).
pub(crate) const MAX_REGION_SIZE: u64 = 1 << 48;

/// The parameters a region's layout is computed from.
///
/// A builder: start from [`RegionConfig::new`] (or `default()`, 4 MiB) and adjust with the
/// `with_*` methods; [`RegionConfig::validate`] (also run by [`Layout::compute`]) checks
/// every value and reports the first bad one as a typed error.
///
/// ```
/// use bi_core::region::{RegionConfig, RegionError};
///
/// let config = RegionConfig::new(1 << 20).with_nodes(2).with_root_entries(16);
/// assert!(config.validate().is_ok());
/// assert_eq!(config.nodes(), 2);
///
/// let bad = RegionConfig::new(1 << 20).with_log_ring_entries(1000); // not a power of two
/// assert!(matches!(bad.validate(), Err(RegionError::InvalidParameter { .. })));
/// assert!(matches!(
///     RegionConfig::new(1 << 20).with_line_size(48).validate(),
///     Err(RegionError::BadLineSize { found: 48 })
/// ));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegionConfig {
    size: u64,
    line_size: u64,
    nodes: u32,
    readers_per_node: u32,
    log_ring_entries: u32,
    root_entries: u32,
}

impl Default for RegionConfig {
    /// 4 MiB, 64-byte lines, 4 nodes, 16 readers per node, 1024-entry log rings, 64 roots.
    fn default() -> Self {
        RegionConfig::new(4 << 20)
    }
}

impl RegionConfig {
    /// A region of `size` bytes with default parameters: 64-byte lines, 4 nodes, 16 readers
    /// per node, 1024-entry log rings and 64 root directory entries.
    ///
    /// ```
    /// use bi_core::region::RegionConfig;
    ///
    /// let c = RegionConfig::new(1 << 20);
    /// assert_eq!((c.size(), c.line_size(), c.nodes()), (1 << 20, 64, 4));
    /// assert_eq!((c.readers_per_node(), c.log_ring_entries(), c.root_entries()), (16, 1024, 64));
    /// ```
    pub const fn new(size: usize) -> RegionConfig {
        RegionConfig {
            size: size as u64,
            line_size: 64,
            nodes: 4,
            readers_per_node: 16,
            log_ring_entries: 1024,
            root_entries: 64,
        }
    }

    /// Sets the total size in bytes (a multiple of the line size).
    ///
    /// ```
    /// use bi_core::region::RegionConfig;
    ///
    /// let c = RegionConfig::default().with_size(8 << 20);
    /// assert_eq!(c.size(), 8 << 20);
    /// assert!(c.with_size((1 << 20) + 8).validate().is_err()); // not whole lines
    /// ```
    pub const fn with_size(mut self, size: usize) -> Self {
        self.size = size as u64;
        self
    }

    /// Sets the cache-line size in bytes (a power of two in `8..=4096`).
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let c = RegionConfig::new(1 << 20).with_line_size(128);
    /// assert_eq!(Layout::compute(&c).unwrap().line_size().get(), 128);
    /// assert!(RegionConfig::new(1 << 20).with_line_size(100).validate().is_err());
    /// ```
    pub const fn with_line_size(mut self, line_size: usize) -> Self {
        self.line_size = line_size as u64;
        self
    }

    /// Sets the number of nodes (`1..=4096`).
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20).with_nodes(8)).unwrap();
    /// assert!(layout.node_record(7).is_some() && layout.node_record(8).is_none());
    /// assert!(RegionConfig::new(1 << 20).with_nodes(0).validate().is_err());
    /// ```
    pub const fn with_nodes(mut self, nodes: u32) -> Self {
        self.nodes = nodes;
        self
    }

    /// Sets the number of reader records per node (`1..=65536`).
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let c = RegionConfig::new(1 << 20).with_readers_per_node(2);
    /// let layout = Layout::compute(&c).unwrap();
    /// assert!(layout.reader_record(0, 1).is_some());
    /// assert!(layout.reader_record(0, 2).is_none());
    /// ```
    pub const fn with_readers_per_node(mut self, readers: u32) -> Self {
        self.readers_per_node = readers;
        self
    }

    /// Sets the number of entries per log ring (a power of two in `2..=2^24`).
    ///
    /// ```
    /// use bi_core::region::RegionConfig;
    ///
    /// assert_eq!(RegionConfig::new(1 << 20).with_log_ring_entries(256).log_ring_entries(), 256);
    /// assert!(RegionConfig::new(1 << 20).with_log_ring_entries(100).validate().is_err());
    /// ```
    pub const fn with_log_ring_entries(mut self, entries: u32) -> Self {
        self.log_ring_entries = entries;
        self
    }

    /// Sets the number of root directory entries (`1..=65536`).
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20).with_root_entries(4)).unwrap();
    /// assert!(layout.root_entry(3).is_some() && layout.root_entry(4).is_none());
    /// ```
    pub const fn with_root_entries(mut self, entries: u32) -> Self {
        self.root_entries = entries;
        self
    }

    /// Total size in bytes.
    ///
    /// ```
    /// use bi_core::region::RegionConfig;
    ///
    /// assert_eq!(RegionConfig::default().size(), 4 << 20);
    /// ```
    pub const fn size(&self) -> u64 {
        self.size
    }

    /// Cache-line size in bytes.
    ///
    /// ```
    /// use bi_core::region::RegionConfig;
    ///
    /// assert_eq!(RegionConfig::default().line_size(), 64);
    /// assert_eq!(RegionConfig::default().with_line_size(32).line_size(), 32);
    /// ```
    pub const fn line_size(&self) -> u64 {
        self.line_size
    }

    /// Number of nodes.
    ///
    /// ```
    /// use bi_core::region::RegionConfig;
    ///
    /// assert_eq!(RegionConfig::default().nodes(), 4);
    /// ```
    pub const fn nodes(&self) -> u32 {
        self.nodes
    }

    /// Reader records per node.
    ///
    /// ```
    /// use bi_core::region::RegionConfig;
    ///
    /// assert_eq!(RegionConfig::default().readers_per_node(), 16);
    /// ```
    pub const fn readers_per_node(&self) -> u32 {
        self.readers_per_node
    }

    /// Entries per log ring.
    ///
    /// ```
    /// use bi_core::region::RegionConfig;
    ///
    /// assert_eq!(RegionConfig::default().log_ring_entries(), 1024);
    /// ```
    pub const fn log_ring_entries(&self) -> u32 {
        self.log_ring_entries
    }

    /// Root directory entries.
    ///
    /// ```
    /// use bi_core::region::RegionConfig;
    ///
    /// assert_eq!(RegionConfig::default().root_entries(), 64);
    /// ```
    pub const fn root_entries(&self) -> u32 {
        self.root_entries
    }

    /// Checks every parameter, and that the size fits the layout.
    ///
    /// ```
    /// use bi_core::region::{RegionConfig, RegionError};
    ///
    /// assert!(RegionConfig::new(1 << 20).validate().is_ok());
    /// let tiny = RegionConfig::new(4096).validate();
    /// assert!(matches!(tiny, Err(RegionError::TooSmall { .. })));
    /// ```
    pub fn validate(&self) -> Result<(), RegionError> {
        Layout::compute(self).map(|_| ())
    }

    /// The smallest region size that holds this configuration's sections and a minimal
    /// heap (the configured size itself is ignored).
    ///
    /// ```
    /// use bi_core::region::RegionConfig;
    ///
    /// let config = RegionConfig::default().with_nodes(1).with_readers_per_node(1);
    /// let min = config.min_size().unwrap();
    /// assert!(config.with_size(min).validate().is_ok());
    /// assert!(config.with_size(min - 64).validate().is_err());
    /// ```
    pub fn min_size(&self) -> Result<usize, RegionError> {
        let line = self.checked_line()?;
        self.check_counts()?;
        let fixed = fixed_sections(self, line)?;
        let heap = MIN_HEAP_BYTES.max(line.get());
        // The smallest table that covers itself and a minimal heap.
        let mut table = 0;
        loop {
            let (_, need) = extent_geometry(line, table + heap);
            if need <= table {
                return Ok(fixed[4].end() + table + heap);
            }
            table = need;
        }
    }

    fn checked_line(&self) -> Result<LineSize, RegionError> {
        usize::try_from(self.line_size)
            .ok()
            .and_then(|l| LineSize::new(l).ok())
            .ok_or_else(|| RegionError::BadLineSize {
                found: self.line_size,
            })
    }

    fn check_counts(&self) -> Result<(), RegionError> {
        fn range(
            name: &'static str,
            v: u32,
            max: u32,
            reason: &'static str,
        ) -> Result<(), RegionError> {
            if v == 0 || v > max {
                Err(RegionError::InvalidParameter {
                    name,
                    value: v.into(),
                    reason,
                })
            } else {
                Ok(())
            }
        }
        range("nodes", self.nodes, MAX_NODES, "must be between 1 and 4096")?;
        range(
            "readers_per_node",
            self.readers_per_node,
            MAX_READERS_PER_NODE,
            "must be between 1 and 65536",
        )?;
        range(
            "root_entries",
            self.root_entries,
            MAX_ROOT_ENTRIES,
            "must be between 1 and 65536",
        )?;
        let e = self.log_ring_entries;
        if !(2..=MAX_LOG_RING_ENTRIES).contains(&e) || !e.is_power_of_two() {
            return Err(RegionError::InvalidParameter {
                name: "log_ring_entries",
                value: e.into(),
                reason: "must be a power of two between 2 and 2^24",
            });
        }
        Ok(())
    }
}

/// Which of a node's two log rings.
///
/// ```
/// use bi_core::region::{Layout, RegionConfig, RingKind};
///
/// let layout = Layout::compute(&RegionConfig::new(1 << 20)).unwrap();
/// let modified = layout.log_ring(0, RingKind::Modified).unwrap();
/// let freed = layout.log_ring(0, RingKind::Freed).unwrap();
/// assert_eq!(modified.end(), freed.offset); // a node's two rings follow each other
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RingKind {
    /// Slots modified by the node's writer.
    Modified = 0,
    /// Objects freed by the node's writer.
    Freed = 1,
}

/// A validated configuration together with the sections it places.
///
/// ```
/// use bi_core::region::{Layout, RegionConfig, SectionKind};
///
/// let layout = Layout::compute(&RegionConfig::new(1 << 20)).unwrap();
/// let line = layout.line_size().get();
/// let mut end = 0;
/// for kind in SectionKind::ALL {
///     let s = layout.section(kind);
///     assert_eq!(s.offset, end); // sections follow each other
///     assert_eq!(s.offset % line, 0); // on line boundaries
///     assert_eq!(s.len % line, 0); // in whole lines
///     end = s.end();
/// }
/// assert_eq!(end, layout.size());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    config: RegionConfig,
    line: LineSize,
    sections: [Section; 7],
    /// Bytes per extent (a whole number of lines).
    extent: usize,
}

/// Offsets of the five fixed sections (header to root directory), checked for overflow.
fn fixed_sections(config: &RegionConfig, line: LineSize) -> Result<[Section; 5], RegionError> {
    let overflow = || RegionError::InvalidParameter {
        name: "size",
        value: u64::MAX,
        reason: "the layout's sections overflow the address space",
    };
    let slot = line.get().max(MIN_SLOT_BYTES);
    let nodes = config.nodes as usize;
    let mul = |a: usize, b: usize| a.checked_mul(b).ok_or_else(overflow);
    let round = |n: usize| {
        n.checked_add(slot - 1)
            .map(|v| v / slot * slot)
            .ok_or_else(overflow)
    };

    let header_len = line.align_up(HEADER_LEN).ok_or_else(overflow)?;
    let node_len = mul(mul(nodes, NODE_RECORD_SLOTS)?, slot)?;
    let reader_len = mul(mul(nodes, config.readers_per_node as usize)?, slot)?;
    let ring_len = mul(RING_CONTROL_SLOTS, slot)?
        .checked_add(round(mul(
            config.log_ring_entries as usize,
            LOG_ENTRY_BYTES,
        )?)?)
        .ok_or_else(overflow)?;
    let rings_len = mul(mul(nodes, RINGS_PER_NODE)?, ring_len)?;
    let roots_len = mul(mul(config.root_entries as usize, ROOT_ENTRY_SLOTS)?, slot)?;

    let mut out = [Section::default(); 5];
    let mut at = 0usize;
    for (i, len) in [header_len, node_len, reader_len, rings_len, roots_len]
        .into_iter()
        .enumerate()
    {
        out[i] = Section { offset: at, len };
        at = at.checked_add(len).ok_or_else(overflow)?;
    }
    Ok(out)
}

/// The extent size and the extent table's length for `rest` bytes after the root
/// directory (table and heap together).
/// Extents are the smallest power of two of lines, at least [`MIN_EXTENT_LINES`], that
/// cuts `rest` into at most [`TARGET_EXTENTS`].
fn extent_geometry(line: LineSize, rest: usize) -> (usize, usize) {
    let slot = line.get().max(MIN_SLOT_BYTES);
    let lines = (rest / line.get()).div_ceil(TARGET_EXTENTS);
    let extent = lines.next_power_of_two().max(MIN_EXTENT_LINES) * line.get();
    let table = (rest.div_ceil(extent) * EXTENT_ENTRY_BYTES).next_multiple_of(slot);
    (extent, table)
}

impl Layout {
    /// Validates `config` and computes its sections.
    ///
    /// Errors: [`RegionError::BadLineSize`], [`RegionError::InvalidParameter`] for a count
    /// out of range or a size that is not a multiple of the line size or exceeds 2^48, and
    /// [`RegionError::TooSmall`] when the size cannot hold the sections and a
    /// heap of at least 4 KiB.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig, RegionError};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20)).unwrap();
    /// assert_eq!(layout.size(), 1 << 20);
    /// assert!(layout.heap().len > 0);
    /// let err = Layout::compute(&RegionConfig::new(1 << 20).with_line_size(0));
    /// assert!(matches!(err, Err(RegionError::BadLineSize { found: 0 })));
    /// ```
    pub fn compute(config: &RegionConfig) -> Result<Layout, RegionError> {
        let line = config.checked_line()?;
        config.check_counts()?;
        if config.size > MAX_REGION_SIZE {
            return Err(RegionError::InvalidParameter {
                name: "size",
                value: config.size,
                reason: "must not exceed 2^48 bytes",
            });
        }
        if !config.size.is_multiple_of(line.get() as u64) {
            return Err(RegionError::InvalidParameter {
                name: "size",
                value: config.size,
                reason: "must be a multiple of the line size",
            });
        }
        // Fits: at most 2^48 and we are on a 64-bit or wider target in practice; on a
        // narrower one the conversion fails cleanly.
        let size = usize::try_from(config.size).map_err(|_| RegionError::InvalidParameter {
            name: "size",
            value: config.size,
            reason: "does not fit in this machine's address space",
        })?;
        let needed = config.min_size()?;
        if size < needed {
            return Err(RegionError::TooSmall {
                size: config.size,
                needed: needed as u64,
            });
        }
        let fixed = fixed_sections(config, line)?;
        let table_at = fixed[4].end();
        // The table is sized for extents over everything after the root directory, so it
        // covers the heap that remains once the table is carved out.
        let (extent, table_len) = extent_geometry(line, size - table_at);
        let heap_at = table_at + table_len;
        if size < heap_at + MIN_HEAP_BYTES.max(line.get()) {
            return Err(RegionError::TooSmall {
                size: config.size,
                needed: (heap_at + MIN_HEAP_BYTES.max(line.get())) as u64,
            });
        }
        let mut sections = [Section::default(); 7];
        sections[..5].copy_from_slice(&fixed);
        sections[5] = Section {
            offset: table_at,
            len: table_len,
        };
        sections[6] = Section {
            offset: heap_at,
            len: size - heap_at,
        };
        Ok(Layout {
            config: *config,
            line,
            sections,
            extent,
        })
    }

    /// The parameters this layout was computed from.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let config = RegionConfig::new(1 << 20).with_nodes(3);
    /// assert_eq!(*Layout::compute(&config).unwrap().config(), config);
    /// ```
    pub const fn config(&self) -> &RegionConfig {
        &self.config
    }

    /// Total size of the region in bytes.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(2 << 20)).unwrap();
    /// assert_eq!(layout.size(), 2 << 20);
    /// assert_eq!(layout.heap().end(), layout.size()); // the heap is last
    /// ```
    pub const fn size(&self) -> usize {
        self.config.size as usize
    }

    /// The cache-line size.
    ///
    /// ```
    /// use bi_core::line::LineSize;
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20)).unwrap();
    /// assert_eq!(layout.line_size(), LineSize::X86);
    /// ```
    pub const fn line_size(&self) -> LineSize {
        self.line
    }

    /// The size of one record slot: `max(line size, 64)` bytes, a whole number of lines.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let small = Layout::compute(&RegionConfig::new(1 << 20).with_line_size(32)).unwrap();
    /// assert_eq!(small.slot_size(), 64); // at least 64 bytes
    /// let big = Layout::compute(&RegionConfig::new(1 << 20).with_line_size(128)).unwrap();
    /// assert_eq!(big.slot_size(), 128);
    /// ```
    pub fn slot_size(&self) -> usize {
        self.line.get().max(MIN_SLOT_BYTES)
    }

    /// The section of the given kind.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig, SectionKind};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20)).unwrap();
    /// assert_eq!(layout.section(SectionKind::Header), layout.header());
    /// assert_eq!(layout.section(SectionKind::RootDirectory), layout.root_directory());
    /// ```
    pub const fn section(&self, kind: SectionKind) -> Section {
        self.sections[kind as usize]
    }

    /// The header section.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20)).unwrap();
    /// assert_eq!(layout.header().offset, 0);
    /// assert_eq!(layout.header().end(), layout.node_table().offset);
    /// ```
    pub const fn header(&self) -> Section {
        self.sections[0]
    }

    /// The node table.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20).with_nodes(2)).unwrap();
    /// let records = layout.node_record(0).unwrap().len * 2;
    /// assert_eq!(layout.node_table().len, records);
    /// ```
    pub const fn node_table(&self) -> Section {
        self.sections[1]
    }

    /// The reader table.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let c = RegionConfig::new(1 << 20).with_nodes(2).with_readers_per_node(4);
    /// let layout = Layout::compute(&c).unwrap();
    /// assert_eq!(layout.reader_table().len, 2 * 4 * layout.slot_size());
    /// ```
    pub const fn reader_table(&self) -> Section {
        self.sections[2]
    }

    /// The log rings.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig, RingKind};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20).with_nodes(2)).unwrap();
    /// let last = layout.log_ring(1, RingKind::Freed).unwrap();
    /// assert_eq!(last.end(), layout.log_rings().end());
    /// ```
    pub const fn log_rings(&self) -> Section {
        self.sections[3]
    }

    /// The root directory.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20).with_root_entries(8)).unwrap();
    /// assert_eq!(layout.root_directory().len, 8 * layout.root_entry(0).unwrap().len);
    /// ```
    pub const fn root_directory(&self) -> Section {
        self.sections[4]
    }

    /// The extent table: one owner word per extent of the heap.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20)).unwrap();
    /// assert!(layout.extent_table().len >= layout.extents() * 8); // one word per extent
    /// assert_eq!(layout.extent_table().end(), layout.heap().offset);
    /// ```
    pub const fn extent_table(&self) -> Section {
        self.sections[5]
    }

    /// The heap.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20)).unwrap();
    /// assert_eq!(layout.heap().end(), 1 << 20);
    /// assert_eq!(layout.heap().offset % layout.line_size().get(), 0);
    /// ```
    pub const fn heap(&self) -> Section {
        self.sections[6]
    }

    /// Bytes per extent (the last extent of the heap may be shorter).
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(64 << 20)).unwrap();
    /// assert_eq!(layout.extent_bytes(), 64 << 10); // 1024 extents of 64 KiB
    /// assert_eq!(layout.extents(), layout.heap().len.div_ceil(64 << 10));
    /// ```
    pub const fn extent_bytes(&self) -> usize {
        self.extent
    }

    /// How many extents the heap is cut into.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20)).unwrap();
    /// assert!(layout.extents() >= 1);
    /// assert!(layout.extent(layout.extents()).is_none());
    /// ```
    pub fn extents(&self) -> usize {
        self.heap().len.div_ceil(self.extent)
    }

    /// Extent `index` of the heap, or `None` past the last.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20)).unwrap();
    /// let n = layout.extents();
    /// let last = layout.extent(n - 1).unwrap();
    /// assert_eq!(last.end(), layout.heap().end());
    /// assert_eq!(layout.extent(0).unwrap().offset, layout.heap().offset);
    /// assert!(layout.extent(n).is_none());
    /// assert_eq!(layout.extent_of(last.offset), Some(n - 1));
    /// ```
    pub fn extent(&self, index: usize) -> Option<Section> {
        let heap = self.heap();
        let offset = heap.offset.checked_add(index.checked_mul(self.extent)?)?;
        (offset < heap.end()).then(|| Section {
            offset,
            len: self.extent.min(heap.end() - offset),
        })
    }

    /// The extent holding byte `offset` of the region, if it is in the heap.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20)).unwrap();
    /// assert_eq!(layout.extent_of(layout.heap().offset), Some(0));
    /// assert_eq!(layout.extent_of(0), None); // the header is not in the heap
    /// ```
    pub fn extent_of(&self, offset: usize) -> Option<usize> {
        let heap = self.heap();
        heap.contains(offset, 1)
            .then(|| (offset - heap.offset) / self.extent)
    }

    /// The record of `node` in the node table (4 slots), or `None`
    /// for a node the region does not have.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20).with_nodes(2)).unwrap();
    /// let n1 = layout.node_record(1).unwrap();
    /// assert_eq!(n1.offset, layout.node_table().offset + n1.len);
    /// assert!(layout.node_record(2).is_none());
    /// ```
    pub fn node_record(&self, node: usize) -> Option<Section> {
        let len = NODE_RECORD_SLOTS * self.slot_size();
        self.nth(
            SectionKind::NodeTable,
            node,
            self.config.nodes as usize,
            len,
        )
    }

    /// The record of reader `reader` of `node` in the reader table (one slot).
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20).with_nodes(2)).unwrap();
    /// let r = layout.reader_record(1, 0).unwrap();
    /// assert!(layout.reader_table().contains(r.offset, r.len));
    /// assert!(layout.reader_record(2, 0).is_none());
    /// ```
    pub fn reader_record(&self, node: usize, reader: usize) -> Option<Section> {
        let per_node = self.config.readers_per_node as usize;
        if node >= self.config.nodes as usize || reader >= per_node {
            return None;
        }
        let slot = self.slot_size();
        self.nth(
            SectionKind::ReaderTable,
            node * per_node + reader,
            usize::MAX,
            slot,
        )
    }

    /// A log ring of `node`: 2 control slots followed by the entries.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig, RingKind};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20).with_nodes(2)).unwrap();
    /// let ring = layout.log_ring(1, RingKind::Modified).unwrap();
    /// assert!(ring.len >= 1024 * 16); // 1024 entries of 16 bytes, and its control slots
    /// assert!(layout.log_ring(2, RingKind::Modified).is_none());
    /// ```
    pub fn log_ring(&self, node: usize, kind: RingKind) -> Option<Section> {
        if node >= self.config.nodes as usize {
            return None;
        }
        let len = self.log_rings().len / (self.config.nodes as usize * RINGS_PER_NODE);
        self.nth(
            SectionKind::LogRings,
            node * RINGS_PER_NODE + kind as usize,
            usize::MAX,
            len,
        )
    }

    /// Entry `index` of the root directory (2 slots: the entry, then
    /// the slot of the structure it names).
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20)).unwrap();
    /// let e = layout.root_entry(0).unwrap();
    /// assert_eq!((e.offset, e.len), (layout.root_directory().offset, 2 * layout.slot_size()));
    /// assert!(layout.root_entry(64).is_none());
    /// ```
    pub fn root_entry(&self, index: usize) -> Option<Section> {
        let slot = self.slot_size();
        self.nth(
            SectionKind::RootDirectory,
            index,
            self.config.root_entries as usize,
            ROOT_ENTRY_SLOTS * slot,
        )
    }

    /// The structure slot of root entry `index` (its second slot): the root word of the
    /// structure the entry names, and its writer record.
    ///
    /// ```
    /// use bi_core::region::{Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 20)).unwrap();
    /// let (e, s) = (layout.root_entry(5).unwrap(), layout.root_slot(5).unwrap());
    /// assert_eq!(s.offset, e.offset + layout.slot_size());
    /// assert_eq!(s.end(), e.end());
    /// ```
    pub fn root_slot(&self, index: usize) -> Option<Section> {
        let slot = self.slot_size();
        self.root_entry(index).map(|e| Section {
            offset: e.offset + slot,
            len: slot,
        })
    }

    fn nth(&self, kind: SectionKind, index: usize, count: usize, len: usize) -> Option<Section> {
        if index >= count {
            return None;
        }
        let section = self.sections[kind.index()];
        let offset = section.offset.checked_add(index.checked_mul(len)?)?;
        let s = Section { offset, len };
        (s.end() <= section.end()).then_some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_tile_the_region_for_many_line_sizes() {
        for line in [8usize, 32, 64, 128, 4096] {
            let config = RegionConfig::new(1 << 22).with_line_size(line);
            let layout = Layout::compute(&config).unwrap();
            let mut end = 0;
            for kind in SectionKind::ALL {
                let s = layout.section(kind);
                assert_eq!(s.offset, end, "{kind} at line {line}");
                assert_eq!(s.offset % line, 0);
                assert_eq!(s.len % line, 0);
                assert!(s.len > 0);
                end = s.end();
            }
            assert_eq!(end, 1 << 22);
            let last_reader = layout.reader_record(3, 15).unwrap();
            assert_eq!(last_reader.end(), layout.reader_table().end());
            let last_ring = layout.log_ring(3, RingKind::Freed).unwrap();
            assert_eq!(last_ring.end(), layout.log_rings().end());
            let last_root = layout.root_entry(63).unwrap();
            assert_eq!(last_root.end(), layout.root_directory().end());
            assert!(layout.root_entry(64).is_none());
            assert!(layout.reader_record(4, 0).is_none());
            assert!(layout.reader_record(0, 16).is_none());
        }
    }

    /// The heap's extents: the smallest power of two of lines (at least
    /// `MIN_EXTENT_LINES`) that cuts the heap into at most `TARGET_EXTENTS`; they tile the
    /// heap in order, only the last may be shorter, the table has an entry for each, and
    /// every byte of the heap (and no byte outside it) belongs to the extent that holds it.
    #[test]
    fn extents_tile_the_heap_and_every_heap_byte_finds_its_extent() {
        let sizes = [1usize << 20, (3 << 20) + 4096, 64 << 20, (256 << 20) - 128];
        for line in [32usize, 64, 128] {
            for size in sizes {
                let config = RegionConfig::new(size).with_line_size(line);
                assert_eq!(config.line_size(), line as u64);
                config.validate().unwrap();
                let layout = Layout::compute(&config).unwrap();
                let (heap, extent, n) = (layout.heap(), layout.extent_bytes(), layout.extents());
                let what = format!("{size} bytes at {line}-byte lines");
                assert!(
                    extent.is_power_of_two() && extent >= MIN_EXTENT_LINES * line,
                    "{what}"
                );
                assert!((1..=TARGET_EXTENTS).contains(&n), "{what}: {n} extents");
                // Extents half as long would be too many (or too short).
                let half = extent / 2;
                assert!(
                    half < MIN_EXTENT_LINES * line
                        || (size - layout.section(SectionKind::ExtentTable).offset).div_ceil(half)
                            > TARGET_EXTENTS,
                    "{what}: extents of {extent} bytes are not the smallest"
                );
                assert!(layout.section(SectionKind::ExtentTable).len >= n * EXTENT_ENTRY_BYTES);
                assert_eq!(n, heap.len.div_ceil(extent), "{what}");
                let mut at = heap.offset;
                for k in 0..n {
                    let e = layout.extent(k).unwrap();
                    assert_eq!(e.offset, at, "{what}: extent {k}");
                    if k + 1 < n {
                        assert_eq!(e.len, extent, "{what}: extent {k}");
                    } else {
                        assert!(e.len > 0 && e.len <= extent && e.end() == heap.end());
                    }
                    for byte in [e.offset, e.offset + e.len / 2, e.end() - 1] {
                        assert_eq!(layout.extent_of(byte), Some(k), "{what}: byte {byte}");
                    }
                    at = e.end();
                }
                assert!(layout.extent(n).is_none() && layout.extent(usize::MAX).is_none());
                assert_eq!(layout.extent_of(heap.offset - 1), None);
                assert_eq!(layout.extent_of(heap.end()), None);
            }
        }
    }

    /// A heap whose length is a whole number of extents has no extent past its end, and
    /// the log rings take what their entries need, rounded up to a slot, and no more.
    #[test]
    fn a_heap_of_whole_extents_ends_at_its_last_and_rings_have_no_slack() {
        let mut found = false;
        for size in (1usize << 20..(1 << 20) + (64 << 10)).step_by(64) {
            let layout = Layout::compute(&RegionConfig::new(size)).unwrap();
            if !layout.heap().len.is_multiple_of(layout.extent_bytes()) {
                continue;
            }
            found = true;
            let n = layout.extents();
            assert_eq!(layout.extent(n - 1).unwrap().end(), layout.heap().end());
            assert!(
                layout.extent(n).is_none(),
                "{size}: an extent of no bytes past the heap"
            );
        }
        assert!(found, "no size in the range gives a heap of whole extents");
        for (line, entries) in [(32usize, 8u32), (64, 1024), (128, 2), (128, 4), (4096, 16)] {
            let config = RegionConfig::new(1 << 22)
                .with_line_size(line)
                .with_log_ring_entries(entries);
            let layout = Layout::compute(&config).unwrap();
            let slot = line.max(MIN_SLOT_BYTES);
            let ring = RING_CONTROL_SLOTS * slot
                + (entries as usize * LOG_ENTRY_BYTES).next_multiple_of(slot);
            assert_eq!(
                layout.section(SectionKind::LogRings).len,
                config.nodes() as usize * RINGS_PER_NODE * ring,
                "{line}-byte lines, {entries} entries"
            );
        }
    }

    /// The largest region is 2^48 bytes: that size is accepted, one line more is not.
    #[test]
    fn a_region_of_two_to_the_48_bytes_is_the_largest() {
        assert!(RegionConfig::new(1 << 48).validate().is_ok());
        let err = RegionConfig::new((1 << 48) + 64).validate().unwrap_err();
        assert!(
            matches!(err, RegionError::InvalidParameter { name: "size", .. }),
            "{err}"
        );
    }

    /// `validate` is the layout's verdict: it refuses what `Layout::compute` refuses.
    #[test]
    fn validate_refuses_what_the_layout_refuses() {
        let base = RegionConfig::new(1 << 20);
        for bad in [
            base.with_line_size(0),
            base.with_line_size(48),
            base.with_nodes(0),
            base.with_size(4096),
            base.with_size((1 << 20) + 8),
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
            assert!(Layout::compute(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_parameters_are_typed_errors() {
        let base = RegionConfig::new(1 << 20);
        let cases = [
            base.with_nodes(0),
            base.with_nodes(MAX_NODES + 1),
            base.with_readers_per_node(0),
            base.with_root_entries(0),
            base.with_log_ring_entries(3),
            base.with_log_ring_entries(1),
            base.with_size((1 << 20) + 8),
            base.with_size(usize::MAX),
        ];
        for c in cases {
            assert!(
                matches!(
                    Layout::compute(&c),
                    Err(RegionError::InvalidParameter { .. })
                ),
                "{c:?}"
            );
        }
        assert!(matches!(
            Layout::compute(&base.with_line_size(0)),
            Err(RegionError::BadLineSize { found: 0 })
        ));
        assert!(matches!(
            Layout::compute(&base.with_size(4096)),
            Err(RegionError::TooSmall { size: 4096, .. })
        ));
    }

    #[test]
    fn huge_counts_do_not_overflow() {
        let c = RegionConfig::new(1 << 20)
            .with_nodes(MAX_NODES)
            .with_readers_per_node(MAX_READERS_PER_NODE)
            .with_log_ring_entries(MAX_LOG_RING_ENTRIES)
            .with_root_entries(MAX_ROOT_ENTRIES)
            .with_line_size(4096);
        assert!(matches!(
            Layout::compute(&c),
            Err(RegionError::TooSmall { .. })
        ));
    }
}
