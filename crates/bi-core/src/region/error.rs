//! Everything that can go wrong when creating, opening or using a region.
//!
//! A region file is input from outside the program: another process, another version of
//! this crate, a truncated copy, a stray file with the right name. Every way it can be
//! wrong is a distinct [`RegionError`] variant carrying the values that disagree, so a
//! caller can react (re-create, refuse, report) and a person reading the message can see
//! what was found and what was expected.

use super::section::{MAGIC, Section, SectionKind};
use crate::mem::{EmulatorError, MemError};
use crate::ptr::PtrError;
use std::fmt;
use std::path::PathBuf;

/// An error creating, opening, validating or using a [`Region`](super::Region).
///
/// ```
/// use bi_core::region::{Header, RegionError};
///
/// let err = Header::decode(&[0u8; 16]).unwrap_err();
/// assert!(matches!(err, RegionError::Truncated { .. }));
/// println!("{err}"); // "region is truncated: 16 bytes available, at least 152 needed"
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum RegionError {
    /// A file operation failed.
    Io {
        /// The file concerned.
        path: PathBuf,
        /// What was being done (`"open"`, `"set the length of"`, `"map"`, ...).
        op: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// [`Region::create`](super::Region::create) found a file already there: an existing
    /// region is never overwritten unless asked ([`Region::fresh`](super::Region::fresh)).
    AlreadyExists {
        /// The file.
        path: PathBuf,
    },
    /// The shared memory could not be allocated or accessed.
    Mem(MemError),
    /// An emulated view of the region could not be made
    /// ([`Region::emulated`](super::Region::emulated)).
    Emulator(EmulatorError),
    /// A layout parameter (from a [`RegionConfig`](super::RegionConfig) or a stored
    /// header) is out of its allowed range.
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
        /// Its value.
        value: u64,
        /// What is allowed.
        reason: &'static str,
    },
    /// The line size is not a power of two in `8..=4096`.
    BadLineSize {
        /// The line size found.
        found: u64,
    },
    /// The bytes do not start with the region magic: not a region at all.
    BadMagic {
        /// The first eight bytes found.
        found: [u8; 8],
    },
    /// The header was written by a format version this code does not read.
    UnsupportedVersion {
        /// The version in the header.
        found: u32,
        /// The version this code reads and writes.
        supported: u32,
    },
    /// Fewer bytes are available than the header (or the size it declares) needs.
    Truncated {
        /// Bytes available (file length or buffer length).
        available: u64,
        /// Bytes needed.
        needed: u64,
    },
    /// The region's size cannot hold the sections its parameters call for plus a minimal
    /// heap.
    TooSmall {
        /// The region size.
        size: u64,
        /// The smallest size that fits the layout.
        needed: u64,
    },
    /// The header's checksum does not match its contents: the header is corrupt.
    ChecksumMismatch {
        /// The checksum stored in the header.
        stored: u64,
        /// The checksum computed over the header's bytes.
        computed: u64,
    },
    /// A stored section is malformed on its own: misaligned, outside the region, or
    /// overlapping the section before it.
    BadSection {
        /// Which section.
        section: SectionKind,
        /// Where the header places it.
        stored: Section,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A stored section differs from the one computed from the stored parameters.
    LayoutMismatch {
        /// Which section.
        section: SectionKind,
        /// Where the header places it.
        stored: Section,
        /// Where the parameters place it.
        expected: Section,
    },
    /// A view of a different size than the region was used to access it.
    ViewMismatch {
        /// The view's size in bytes.
        view_size: usize,
        /// The region's size in bytes.
        region_size: usize,
    },
    /// A root name is empty.
    RootNameEmpty,
    /// A root name is longer than a directory entry holds.
    RootNameTooLong {
        /// The name's length in bytes.
        len: usize,
        /// The longest name an entry holds, in bytes.
        max: usize,
    },
    /// Every entry of the root directory is in use.
    RootDirectoryFull {
        /// Number of entries in the directory.
        entries: usize,
    },
    /// A root exists under this name, but for a type of another size or alignment.
    RootTypeMismatch {
        /// The root's name.
        name: String,
        /// `(size_of, align_of)` recorded with the root.
        stored: (u64, u64),
        /// `(size_of, align_of)` of the type asked for.
        requested: (u64, u64),
    },
    /// A root names a structure of another kind or other types than asked for (or a plain
    /// object where a structure was asked for, or the reverse: fingerprint 0).
    StructureTypeMismatch {
        /// The root's name.
        name: String,
        /// The fingerprint recorded with the root (0: a plain object).
        stored: u64,
        /// The fingerprint asked for (0: a plain object).
        requested: u64,
    },
    /// A root directory entry is unreadable (corrupt, or torn by a concurrent update that
    /// never finished).
    CorruptRoot {
        /// Index of the entry in the directory.
        index: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A type cannot be recorded in a root entry (its size does not fit in 32 bits).
    RootTypeTooLarge {
        /// `size_of` of the type.
        size: usize,
    },
    /// A pointer is null, out of range or misaligned.
    Ptr(PtrError),
}

impl fmt::Display for RegionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use RegionError::*;
        match self {
            Io { path, op, source } => {
                write!(f, "cannot {op} region file {}: {source}", path.display())
            }
            AlreadyExists { path } => write!(
                f,
                "region file {} already exists (open it, or replace it explicitly)",
                path.display()
            ),
            Mem(e) => write!(f, "region memory: {e}"),
            Emulator(e) => write!(f, "emulated view of the region: {e}"),
            InvalidParameter {
                name,
                value,
                reason,
            } => {
                write!(f, "invalid region parameter {name} = {value}: {reason}")
            }
            BadLineSize { found } => {
                write!(
                    f,
                    "line size {found} is not a power of two between 8 and 4096"
                )
            }
            BadMagic { found } => write!(
                f,
                "not a region: magic is {:?}, expected {:?}",
                String::from_utf8_lossy(found),
                String::from_utf8_lossy(&MAGIC)
            ),
            UnsupportedVersion { found, supported } => write!(
                f,
                "region format version {found} is not supported (this build reads version \
                 {supported})"
            ),
            Truncated { available, needed } => write!(
                f,
                "region is truncated: {available} bytes available, at least {needed} needed"
            ),
            TooSmall { size, needed } => write!(
                f,
                "region of {size} bytes is too small for its layout: at least {needed} bytes \
                 needed"
            ),
            ChecksumMismatch { stored, computed } => write!(
                f,
                "region header is corrupt: checksum {stored:#018x} stored, {computed:#018x} \
                 computed"
            ),
            BadSection {
                section,
                stored,
                problem,
            } => {
                write!(
                    f,
                    "region section {section} at {stored} is malformed: {problem}"
                )
            }
            LayoutMismatch {
                section,
                stored,
                expected,
            } => write!(
                f,
                "region section {section} is stored at {stored} but its parameters place it at \
                 {expected}"
            ),
            ViewMismatch {
                view_size,
                region_size,
            } => write!(
                f,
                "a view of {view_size} bytes cannot access a region of {region_size} bytes"
            ),
            RootNameEmpty => write!(f, "root name is empty"),
            RootNameTooLong { len, max } => {
                write!(
                    f,
                    "root name of {len} bytes is longer than the {max} bytes allowed"
                )
            }
            RootDirectoryFull { entries } => {
                write!(
                    f,
                    "root directory is full (all {entries} entries are in use)"
                )
            }
            RootTypeMismatch {
                name,
                stored,
                requested,
            } => write!(
                f,
                "root {name:?} holds a type of size {} and alignment {}, but a type of size {} \
                 and alignment {} was asked for",
                stored.0, stored.1, requested.0, requested.1
            ),
            StructureTypeMismatch {
                name,
                stored,
                requested,
            } => write!(
                f,
                "root {name:?} was made for other types (fingerprint {stored:#x}) than asked \
                 for ({requested:#x}; 0 is a plain object)"
            ),
            CorruptRoot { index, reason } => {
                write!(f, "root directory entry {index} is corrupt: {reason}")
            }
            RootTypeTooLarge { size } => {
                write!(
                    f,
                    "a type of {size} bytes is too large to be recorded as a root"
                )
            }
            Ptr(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RegionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RegionError::Io { source, .. } => Some(source),
            RegionError::Mem(e) => Some(e),
            RegionError::Emulator(e) => Some(e),
            RegionError::Ptr(e) => Some(e),
            _ => None,
        }
    }
}

impl From<EmulatorError> for RegionError {
    fn from(e: EmulatorError) -> Self {
        RegionError::Emulator(e)
    }
}

impl From<MemError> for RegionError {
    fn from(e: MemError) -> Self {
        RegionError::Mem(e)
    }
}

impl From<PtrError> for RegionError {
    fn from(e: PtrError) -> Self {
        RegionError::Ptr(e)
    }
}
