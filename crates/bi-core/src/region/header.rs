//! The region header: its byte format, its checksum, and the validator for raw bytes.
//!
//! # Why so strict
//!
//! The header is the only thing a process opening a region knows about it. If it were
//! trusted as found, a stray file, a file from another version, a truncated copy or a
//! flipped bit would turn into offsets that point into the wrong section or past the end of
//! the mapping. So [`Header::decode`] checks, in order: enough bytes for a header, the
//! magic, the format version, the checksum, the line size and parameters (and that the size
//! fits the layout they call for), the section table on its own (aligned, in order, inside
//! the region), the section table against the one the
//! parameters produce, and finally that the bytes available cover the declared size. It is
//! a pure function of a byte slice, which is what the fuzz target and the property tests
//! drive.
//!
//! # Format (version 3)
//!
//! Versions 2 and 3 changed what the sections hold, not the header. Version 2: objects
//! carry one stamp word per line (see `runtime::object`) instead of version 1's 32-byte
//! header. Version 3: a log ring entry's second word carries the scope of the structure
//! it is about in its top 16 bits (see `runtime::scope`), where version 2 kept the full
//! clock; node records name the process that runs the node (`runtime::claim`) and hold
//! its pool lock record (`runtime::lock`); root entries take two slots (the second is a
//! named structure's root word and writer record) and record a structure fingerprint, so
//! names are at most 32 bytes. Version 4: the heap is cut into extents handed out on
//! demand, with an extent table before it recording each extent's owner (and the extent
//! size in what was a reserved field). Older regions cannot be read by this code; their files are refused as
//! [`RegionError::UnsupportedVersion`].
//!
//! All integers little-endian. [`HEADER_LEN`] bytes, at offset 0 of the region; the header
//! section is that rounded up to a whole line, the rest of it zero.
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | magic `b"BIREGION"` |
//! | 8 | 4 | format version (4) |
//! | 12 | 4 | header length in bytes (152) |
//! | 16 | 8 | total region size in bytes |
//! | 24 | 4 | line size in bytes |
//! | 28 | 4 | nodes |
//! | 32 | 4 | readers per node |
//! | 36 | 4 | log ring entries |
//! | 40 | 4 | root directory entries |
//! | 44 | 4 | lines per extent (follows from the size; checked) |
//! | 48 | 16 | node table: offset (u64), length (u64) |
//! | 64 | 16 | reader table |
//! | 80 | 16 | log rings |
//! | 96 | 16 | root directory |
//! | 112 | 16 | extent table |
//! | 128 | 16 | heap |
//! | 144 | 8 | checksum: 64-bit FNV-1a of bytes 0..144 |
//!
//! FNV-1a changes its result for any single changed byte (each step is a bijection of the
//! running state), so every one-byte corruption of the header is caught.

use super::error::RegionError;
use super::layout::{Layout, RegionConfig};
pub use super::section::{HEADER_LEN, MAGIC};
use super::section::{Section, SectionKind};

/// The header format version this code reads and writes.
pub const FORMAT_VERSION: u32 = 4;

/// Byte offsets of the header's fields, for tools and tests that inspect or craft headers.
pub mod offsets {
    /// Magic, 8 bytes.
    pub const MAGIC: usize = 0;
    /// Format version, u32.
    pub const VERSION: usize = 8;
    /// Header length, u32.
    pub const HEADER_LEN: usize = 12;
    /// Total size, u64.
    pub const SIZE: usize = 16;
    /// Line size, u32.
    pub const LINE_SIZE: usize = 24;
    /// Nodes, u32.
    pub const NODES: usize = 28;
    /// Readers per node, u32.
    pub const READERS_PER_NODE: usize = 32;
    /// Log ring entries, u32.
    pub const LOG_RING_ENTRIES: usize = 36;
    /// Root directory entries, u32.
    pub const ROOT_ENTRIES: usize = 40;
    /// Lines per extent (what the region's size gives), u32.
    pub const EXTENT_LINES: usize = 44;
    /// Section table: six (offset u64, length u64) pairs in address order.
    pub const SECTIONS: usize = 48;
    /// Checksum, u64.
    pub const CHECKSUM: usize = 144;
}

/// 64-bit FNV-1a.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// A decoded, fully validated header.
///
/// ```
/// use bi_core::region::{Header, Layout, RegionConfig, RegionError};
///
/// let layout = Layout::compute(&RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
/// let mut bytes = vec![0u8; layout.size()];
/// bytes[..bi_core::region::HEADER_LEN].copy_from_slice(&Header::new(layout).encode());
/// assert_eq!(Header::decode(&bytes).unwrap().layout(), &layout);
///
/// bytes[30] ^= 1; // flip a bit of the node count
/// assert!(matches!(Header::decode(&bytes), Err(RegionError::ChecksumMismatch { .. })));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    layout: Layout,
}

impl Header {
    /// The header describing `layout`, in the current format version.
    ///
    /// ```
    /// use bi_core::region::{Header, Layout, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let h = Header::new(layout);
    /// assert_eq!(h.layout(), &layout);
    /// ```
    pub const fn new(layout: Layout) -> Header {
        Header { layout }
    }

    /// The format version (always [`FORMAT_VERSION`] for a decoded header).
    ///
    /// ```
    /// use bi_core::region::{FORMAT_VERSION, Header, Region, RegionConfig};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let h = Header::decode(&region.to_bytes()).unwrap();
    /// assert_eq!(h.version(), FORMAT_VERSION);
    /// ```
    pub const fn version(&self) -> u32 {
        FORMAT_VERSION
    }

    /// The layout the header describes.
    ///
    /// ```
    /// use bi_core::region::{Header, Region, RegionConfig};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let h = Header::decode(&region.to_bytes()).unwrap();
    /// assert_eq!(h.layout(), region.layout());
    /// ```
    pub const fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The header's bytes, checksum included.
    ///
    /// ```
    /// use bi_core::region::{HEADER_LEN, Header, Layout, MAGIC, RegionConfig};
    ///
    /// let layout = Layout::compute(&RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let bytes = Header::new(layout).encode();
    /// assert_eq!(bytes.len(), HEADER_LEN);
    /// assert_eq!(bytes[..8], MAGIC);
    /// ```
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        let c = self.layout.config();
        b[offsets::MAGIC..offsets::MAGIC + 8].copy_from_slice(&MAGIC);
        let mut put32 = |at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        put32(offsets::VERSION, FORMAT_VERSION);
        put32(offsets::HEADER_LEN, HEADER_LEN as u32);
        put32(offsets::LINE_SIZE, self.layout.line_size().get() as u32);
        put32(offsets::NODES, c.nodes());
        put32(offsets::READERS_PER_NODE, c.readers_per_node());
        put32(offsets::LOG_RING_ENTRIES, c.log_ring_entries());
        put32(offsets::ROOT_ENTRIES, c.root_entries());
        put32(
            offsets::EXTENT_LINES,
            (self.layout.extent_bytes() / self.layout.line_size().get()) as u32,
        );
        b[offsets::SIZE..offsets::SIZE + 8].copy_from_slice(&c.size().to_le_bytes());
        for (i, kind) in SectionKind::STORED.into_iter().enumerate() {
            let s = self.layout.section(kind);
            let at = offsets::SECTIONS + 16 * i;
            b[at..at + 8].copy_from_slice(&(s.offset as u64).to_le_bytes());
            b[at + 8..at + 16].copy_from_slice(&(s.len as u64).to_le_bytes());
        }
        seal(&mut b);
        b
    }

    /// Validates the header at the start of `region`, taking `region.len()` as the number
    /// of bytes the region really has.
    ///
    /// Never panics; every problem is a [`RegionError`]. See the module documentation for
    /// the order of the checks.
    ///
    /// ```
    /// use bi_core::region::{Header, RegionError};
    ///
    /// assert!(matches!(Header::decode(&[0u8; 16]), Err(RegionError::Truncated { .. })));
    /// assert!(matches!(Header::decode(&[0u8; 4096]), Err(RegionError::BadMagic { .. })));
    /// ```
    pub fn decode(region: &[u8]) -> Result<Header, RegionError> {
        Header::decode_prefix(region, region.len() as u64)
    }

    /// Validates the header at the start of `prefix`, where the region really has
    /// `available` bytes (for example, the length of the file `prefix` was read from).
    /// Only the first [`HEADER_LEN`] bytes of `prefix` are read.
    ///
    /// ```
    /// use bi_core::region::{HEADER_LEN, Header, Region, RegionConfig, RegionError};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 16).with_nodes(1)).unwrap();
    /// let bytes = region.to_bytes();
    /// let prefix = &bytes[..HEADER_LEN];
    /// assert!(Header::decode_prefix(prefix, 1 << 16).is_ok());
    /// // A file shorter than the region its header describes.
    /// let short = Header::decode_prefix(prefix, 1 << 15);
    /// assert!(matches!(short, Err(RegionError::Truncated { .. })));
    /// ```
    pub fn decode_prefix(prefix: &[u8], available: u64) -> Result<Header, RegionError> {
        let have = (prefix.len() as u64).min(available);
        if have < HEADER_LEN as u64 {
            return Err(RegionError::Truncated {
                available: have,
                needed: HEADER_LEN as u64,
            });
        }
        let b = &prefix[..HEADER_LEN];
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&b[..8]);
        if magic != MAGIC {
            return Err(RegionError::BadMagic { found: magic });
        }
        let version = u32_at(b, offsets::VERSION);
        if version != FORMAT_VERSION {
            return Err(RegionError::UnsupportedVersion {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let stored = u64_at(b, offsets::CHECKSUM);
        let computed = fnv1a(&b[..offsets::CHECKSUM]);
        if stored != computed {
            return Err(RegionError::ChecksumMismatch { stored, computed });
        }
        let header_len = u32_at(b, offsets::HEADER_LEN);
        if header_len as usize != HEADER_LEN {
            return Err(RegionError::InvalidParameter {
                name: "header_len",
                value: header_len.into(),
                reason: "must be 152 in this format version",
            });
        }
        let line = u32_at(b, offsets::LINE_SIZE);
        if crate::line::LineSize::new(line as usize).is_err() {
            return Err(RegionError::BadLineSize { found: line.into() });
        }
        let size = u64_at(b, offsets::SIZE);
        let config = RegionConfig::new(0)
            .with_line_size(line as usize)
            .with_nodes(u32_at(b, offsets::NODES))
            .with_readers_per_node(u32_at(b, offsets::READERS_PER_NODE))
            .with_log_ring_entries(u32_at(b, offsets::LOG_RING_ENTRIES))
            .with_root_entries(u32_at(b, offsets::ROOT_ENTRIES));
        // `with_size` takes usize; keep the full u64 so a huge stored size is reported as
        // such rather than wrapped on a narrow target.
        let config = config_with_size(config, size);
        // Parameters first: a size too small for them is reported as such, not as the
        // heap running past the end.
        let layout = Layout::compute(&config)?;

        // The stored section table on its own terms: aligned, in order, inside the region.
        let header_section_end = HEADER_LEN.next_multiple_of(line as usize) as u64;
        let mut prev_end = header_section_end;
        let mut stored_sections = [Section::default(); 6];
        for (i, kind) in SectionKind::STORED.into_iter().enumerate() {
            let at = offsets::SECTIONS + 16 * i;
            let (off, len) = (u64_at(b, at), u64_at(b, at + 8));
            let shown = Section {
                offset: usize::try_from(off).unwrap_or(usize::MAX),
                len: usize::try_from(len).unwrap_or(usize::MAX),
            };
            let bad = |problem| RegionError::BadSection {
                section: kind,
                stored: shown,
                problem,
            };
            if off % u64::from(line) != 0 || len % u64::from(line) != 0 {
                return Err(bad("not aligned to whole lines"));
            }
            let end = off
                .checked_add(len)
                .ok_or_else(|| bad("extends past the region"))?;
            if end > size {
                return Err(bad("extends past the region"));
            }
            if off < prev_end {
                return Err(bad("overlaps the section before it"));
            }
            prev_end = end;
            stored_sections[i] = shown;
        }

        let extent_lines = u32_at(b, offsets::EXTENT_LINES);
        if extent_lines as usize * line as usize != layout.extent_bytes() {
            return Err(RegionError::InvalidParameter {
                name: "extent_lines",
                value: extent_lines.into(),
                reason: "must be the extent size the region's size gives",
            });
        }
        for (i, kind) in SectionKind::STORED.into_iter().enumerate() {
            let expected = layout.section(kind);
            if stored_sections[i] != expected {
                return Err(RegionError::LayoutMismatch {
                    section: kind,
                    stored: stored_sections[i],
                    expected,
                });
            }
        }
        if available < size {
            return Err(RegionError::Truncated {
                available,
                needed: size,
            });
        }
        Ok(Header { layout })
    }
}

fn config_with_size(config: RegionConfig, size: u64) -> RegionConfig {
    match usize::try_from(size) {
        Ok(s) => config.with_size(s),
        // Larger than the address space: anything above the 2^48 limit is rejected the same
        // way by `Layout::compute`.
        Err(_) => config.with_size(usize::MAX),
    }
}

/// Recomputes and stores the checksum of the header at the start of `bytes`.
///
/// For tools and tests that craft headers: after changing a field, `seal` makes the header
/// pass the checksum test so the field's own validation is what gets exercised. Does
/// nothing if `bytes` is shorter than a header.
///
/// ```
/// use bi_core::region::{Header, Layout, RegionConfig, RegionError, header};
///
/// let layout = Layout::compute(&RegionConfig::new(1 << 17).with_nodes(1)).unwrap();
/// let mut bytes = vec![0u8; layout.size()];
/// bytes[..header::HEADER_LEN].copy_from_slice(&Header::new(layout).encode());
/// bytes[header::offsets::NODES] = 2; // claims two nodes, but the table is for one
/// header::seal(&mut bytes);
/// assert!(matches!(Header::decode(&bytes), Err(RegionError::LayoutMismatch { .. })));
/// ```
pub fn seal(bytes: &mut [u8]) {
    if bytes.len() < HEADER_LEN {
        return;
    }
    let sum = fnv1a(&bytes[..offsets::CHECKSUM]);
    bytes[offsets::CHECKSUM..offsets::CHECKSUM + 8].copy_from_slice(&sum.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(size: usize) -> Vec<u8> {
        let layout = Layout::compute(&RegionConfig::new(size).with_nodes(2)).unwrap();
        let mut bytes = vec![0u8; size];
        bytes[..HEADER_LEN].copy_from_slice(&Header::new(layout).encode());
        bytes
    }

    #[test]
    fn round_trip() {
        let bytes = valid(1 << 17);
        let h = Header::decode(&bytes).unwrap();
        assert_eq!(h.layout().size(), 1 << 17);
        assert_eq!(h.layout().config().nodes(), 2);
        assert_eq!(h.encode()[..], bytes[..HEADER_LEN]);
    }

    #[test]
    fn every_single_byte_change_is_rejected() {
        let bytes = valid(1 << 17);
        for i in 0..HEADER_LEN {
            for flip in [1u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] ^= flip;
                assert!(Header::decode(&b).is_err(), "byte {i} ^ {flip:#x} accepted");
            }
        }
    }

    #[test]
    fn section_table_checks() {
        let base = valid(1 << 17);
        let line = 64u64;
        let set = |b: &mut Vec<u8>, i: usize, off: u64, len: u64| {
            let at = offsets::SECTIONS + 16 * i;
            b[at..at + 8].copy_from_slice(&off.to_le_bytes());
            b[at + 8..at + 16].copy_from_slice(&len.to_le_bytes());
            seal(b);
        };
        let section = |b: &[u8], i: usize| {
            let at = offsets::SECTIONS + 16 * i;
            (u64_at(b, at), u64_at(b, at + 8))
        };
        // misaligned
        let mut b = base.clone();
        let (o, l) = section(&b, 1);
        set(&mut b, 1, o + 8, l);
        assert!(
            matches!(Header::decode(&b), Err(RegionError::BadSection { problem, .. }) if problem.contains("aligned"))
        );
        // past the end
        let mut b = base.clone();
        let (o, _) = section(&b, 5);
        set(&mut b, 5, o, 1 << 20);
        assert!(
            matches!(Header::decode(&b), Err(RegionError::BadSection { problem, .. }) if problem.contains("past"))
        );
        let mut b = base.clone();
        set(&mut b, 5, u64::MAX - 63, 128);
        assert!(matches!(
            Header::decode(&b),
            Err(RegionError::BadSection { .. })
        ));
        // overlap
        let mut b = base.clone();
        let (o, l) = section(&b, 1);
        set(&mut b, 1, o - line, l);
        assert!(
            matches!(Header::decode(&b), Err(RegionError::BadSection { problem, .. }) if problem.contains("overlaps"))
        );
        // well formed but not what the parameters say
        let mut b = base.clone();
        let (o, l) = section(&b, 5);
        set(&mut b, 5, o + line, l - line);
        assert!(matches!(
            Header::decode(&b),
            Err(RegionError::LayoutMismatch {
                section: SectionKind::Heap,
                ..
            })
        ));
    }
}
