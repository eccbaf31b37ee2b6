//! Object layout and generation-tagged links.
//!
//! An object of type `T: Pod` occupies a heap block of whole lines:
//!
//! ```text
//! line 0:  generation u64 | logged_time u64 | size u32 | flags u32 | block_len u64 | payload...
//! line i:  stamp u64 (= generation)                                                | payload...
//! ```
//!
//! The payload bytes of `T` are scattered over the lines after the header or stamp and
//! gathered back on read. Every line carries the generation, so a reader can tell, line by
//! line, whether the copy it holds belongs to the incarnation its link names: a prefetched
//! line of an older incarnation, or an older version of a later line, shows a different
//! stamp.
//!
//! Writes to each line go stamp := [`INVALID`], payload, stamp := generation. A dirty line
//! may reach memory at any moment (eviction), so other nodes can see any prefix of these
//! stores; with this order, a line whose stamp matches is complete, and a partly written
//! line matches no link at all.

use super::BiError;
use crate::mem::MemView;
use crate::region::Section;
use bytemuck::{Pod, Zeroable};
use std::fmt;
use std::marker::PhantomData;

/// Bytes of the header at the start of line 0.
pub const HEADER_BYTES: usize = 32;
/// Bytes of the stamp at the start of every later line.
pub const STAMP_BYTES: usize = 8;
/// A stamp no link can match: written first into a line being rewritten.
pub const INVALID: u64 = u64::MAX;
/// Header flag: writers log this object in the modified ring when publishing it.
pub const TRACKED: u32 = 1;
/// Header flag: the object was retired.
pub const FREED: u32 = 2;
/// Most lines one object may span (a log entry packs the line count in 16 bits).
pub const MAX_OBJECT_LINES: usize = 0xFFFF;

const OFFSET_BITS: u32 = 48;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;

/// The header at the start of an object's first line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct ObjectHeader {
    /// Incarnation of the block (bumped on every reuse and every rewrite).
    pub generation: u64,
    /// Writer time at which the object was last logged.
    pub logged_time: u64,
    /// Payload bytes (`size_of::<T>()`).
    pub size: u32,
    /// [`TRACKED`], [`FREED`].
    pub flags: u32,
    /// Bytes of the heap block holding the object.
    pub block_len: u64,
}

/// A shared, generation-tagged reference to a `T`: the offset of the object in the low
/// 48 bits and the low 16 bits of its generation in the top 16. Zero is null.
///
/// A `Link` is plain data: store it in slots and inside objects.
///
/// ```
/// use bi_core::runtime::Link;
///
/// let l: Link<u64> = Link::new(4096, 7);
/// assert_eq!((l.offset(), l.generation()), (4096, 7));
/// assert!(Link::<u64>::null().is_null());
/// assert_eq!(Link::<u64>::from_raw(l.raw()), l);
/// ```
#[repr(transparent)]
pub struct Link<T> {
    raw: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T> Link<T> {
    /// A link to the object at `offset` with generation `generation` (only its low 16
    /// bits are kept).
    pub const fn new(offset: usize, generation: u64) -> Link<T> {
        Link::from_raw(((generation & 0xFFFF) << OFFSET_BITS) | (offset as u64 & OFFSET_MASK))
    }

    /// The null link.
    pub const fn null() -> Link<T> {
        Link::from_raw(0)
    }

    /// From the stored representation.
    pub const fn from_raw(raw: u64) -> Link<T> {
        Link {
            raw,
            _t: PhantomData,
        }
    }

    /// The stored representation.
    pub const fn raw(self) -> u64 {
        self.raw
    }

    /// Whether this is the null link.
    pub const fn is_null(self) -> bool {
        self.raw == 0
    }

    /// Offset of the object.
    pub const fn offset(self) -> usize {
        (self.raw & OFFSET_MASK) as usize
    }

    /// Low 16 bits of the object's generation.
    pub const fn generation(self) -> u64 {
        self.raw >> OFFSET_BITS
    }

    /// The same link, typed as a link to `U`.
    pub const fn cast<U>(self) -> Link<U> {
        Link::from_raw(self.raw)
    }
}

impl<T> Clone for Link<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Link<T> {}
impl<T> PartialEq for Link<T> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}
impl<T> Eq for Link<T> {}
impl<T> std::hash::Hash for Link<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.raw.hash(state)
    }
}
impl<T> Default for Link<T> {
    fn default() -> Self {
        Link::null()
    }
}
impl<T> fmt::Debug for Link<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_null() {
            f.write_str("Link(null)")
        } else {
            write!(f, "Link({}@g{})", self.offset(), self.generation())
        }
    }
}

// SAFETY: `Link<T>` is `repr(transparent)` over a `u64` (the `PhantomData` is a
// zero-sized, alignment-1 field), so the all-zero bit pattern is a valid value (null).
unsafe impl<T> Zeroable for Link<T> {}
// SAFETY: as above, `Link<T>` has exactly the layout of a `u64`: no padding, every bit
// pattern valid, no interior references; it is `Copy` and `'static` whenever `T` is.
unsafe impl<T: 'static> Pod for Link<T> {}

/// Geometry of an object of `size` payload bytes for line size `line`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) line: usize,
    pub(crate) size: usize,
    pub(crate) lines: usize,
}

impl Shape {
    pub(crate) fn new(size: usize, line: usize) -> Result<Shape, BiError> {
        if line < HEADER_BYTES {
            return Err(BiError::BadConfig {
                reason: "the runtime needs lines of at least 32 bytes",
            });
        }
        let first = line - HEADER_BYTES;
        let lines = if size <= first {
            1
        } else {
            1 + (size - first).div_ceil(line - STAMP_BYTES)
        };
        if lines > MAX_OBJECT_LINES || size > u32::MAX as usize {
            return Err(BiError::TooLarge { bytes: size });
        }
        Ok(Shape { line, size, lines })
    }

    pub(crate) fn bytes(&self) -> usize {
        self.lines * self.line
    }

    /// For each line: (offset of its payload within the block, payload range in `T`).
    pub(crate) fn chunks(&self) -> impl Iterator<Item = (usize, std::ops::Range<usize>)> + '_ {
        let mut at = 0usize;
        (0..self.lines).map(move |i| {
            let (start, room) = if i == 0 {
                (HEADER_BYTES, self.line - HEADER_BYTES)
            } else {
                (i * self.line + STAMP_BYTES, self.line - STAMP_BYTES)
            };
            let end = (at + room).min(self.size);
            let r = at..end;
            at = end;
            (start, r)
        })
    }
}

/// Checks that `offset .. offset + len` lies in `section`.
pub(crate) fn check_in(
    section: Section,
    offset: usize,
    len: usize,
    name: &'static str,
) -> Result<(), BiError> {
    if section.contains(offset, len) {
        Ok(())
    } else {
        Err(BiError::OutOfSection {
            offset,
            section: name,
        })
    }
}

/// Stores `bytes` (payload) at `at` word by word (the last word zero-padded).
fn store_words<V: MemView>(view: &V, at: usize, bytes: &[u8]) -> Result<(), BiError> {
    for (k, chunk) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        view.store(at + 8 * k, &u64::from_ne_bytes(w))?;
    }
    Ok(())
}

/// Loads `out.len()` payload bytes from `at` word by word.
fn load_words<V: MemView>(view: &V, at: usize, out: &mut [u8]) -> Result<(), BiError> {
    let (whole, tail) = out.as_chunks_mut::<8>();
    for (k, chunk) in whole.iter_mut().enumerate() {
        *chunk = view.load_u64(at + 8 * k)?.to_ne_bytes();
    }
    if !tail.is_empty() {
        let w = view.load_u64(at + 8 * whole.len())?;
        tail.copy_from_slice(&w.to_ne_bytes()[..tail.len()]);
    }
    Ok(())
}

/// Writes a whole object (header and stamped payload) into `view`'s cache, in the order
/// that makes partial write-backs harmless (see the module docs).
pub(crate) fn write_object<V: MemView, T: Pod>(
    view: &V,
    offset: usize,
    shape: &Shape,
    header: ObjectHeader,
    value: &T,
) -> Result<(), BiError> {
    let bytes = bytemuck::bytes_of(value);
    for (i, (payload_at, range)) in shape.chunks().enumerate() {
        let line_at = offset + i * shape.line;
        if i == 0 {
            let mut h = header;
            h.generation = INVALID;
            view.store(line_at, &h)?;
        } else {
            view.store(line_at, &INVALID)?;
        }
        store_words(view, offset + payload_at, &bytes[range])?;
        view.store(line_at, &header.generation)?;
    }
    Ok(())
}

/// Why a read did not produce a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mismatch {
    /// A line's stamp, the header's generation, size or FREED mark did not fit the link.
    Stale,
}

/// Reads the object `link` names, checking every line against the link's generation.
/// No cache operation.
pub(crate) fn read_object<V: MemView, T: Pod>(
    view: &V,
    heap: Section,
    link: Link<T>,
    shape: &Shape,
) -> Result<Result<(T, ObjectHeader), Mismatch>, BiError> {
    let offset = link.offset();
    check_in(heap, offset, shape.bytes(), "heap")?;
    let header: ObjectHeader = view.load(offset)?;
    if header.generation & 0xFFFF != link.generation()
        || header.generation == INVALID
        || header.flags & FREED != 0
        || header.size as usize != shape.size
    {
        return Ok(Err(Mismatch::Stale));
    }
    let mut value = T::zeroed();
    let out = bytemuck::bytes_of_mut(&mut value);
    for (i, (payload_at, range)) in shape.chunks().enumerate() {
        let line_at = offset + i * shape.line;
        if i > 0 {
            let stamp = view.load_u64(line_at)?;
            if stamp != header.generation {
                return Ok(Err(Mismatch::Stale));
            }
        }
        load_words(view, offset + payload_at, &mut out[range])?;
        // Re-check: a line dropped and refilled while we copied shows a new stamp.
        let again = view.load_u64(line_at)?;
        if again != header.generation {
            return Ok(Err(Mismatch::Stale));
        }
    }
    Ok(Ok((value, header)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_cover_the_payload_exactly() {
        for line in [32usize, 64, 128] {
            for size in [0usize, 1, 8, 24, 31, 32, 33, 56, 100, 1000] {
                let s = Shape::new(size, line).unwrap();
                let mut next = 0;
                for (i, (at, r)) in s.chunks().enumerate() {
                    assert_eq!(r.start, next);
                    next = r.end;
                    assert!(at >= i * line && at + r.len() <= (i + 1) * line);
                }
                assert_eq!(next, size);
            }
        }
        assert!(Shape::new(8, 16).is_err());
        assert!(matches!(
            Shape::new(usize::MAX / 2, 64),
            Err(BiError::TooLarge { .. })
        ));
    }

    #[test]
    fn link_packs_offset_and_generation() {
        let l: Link<u32> = Link::new(0xFFFF_FFFF_FFFF, 0x1_2345);
        assert_eq!(l.offset(), 0xFFFF_FFFF_FFFF);
        assert_eq!(l.generation(), 0x2345);
        let raw: u64 = bytemuck::cast(l);
        assert_eq!(raw, l.raw());
    }
}
