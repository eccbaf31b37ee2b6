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
        let later = line - STAMP_BYTES;
        // Small objects (the common case on the read path) need no division.
        let lines = if size <= first {
            1
        } else if size - first <= later {
            2
        } else {
            1 + (size - first).div_ceil(later)
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

/// Loads the header at `at` (one load, so a stale copy costs one look at an old line)
/// and returns it if its generation's low 16 bits are `expected` and it is not a line
/// being rewritten.
pub(crate) fn load_header_if<V: MemView>(
    view: &V,
    at: usize,
    expected: u64,
) -> Result<Option<ObjectHeader>, BiError> {
    let h: ObjectHeader = view.load(at)?;
    Ok((h.generation & 0xFFFF == expected && h.generation != INVALID).then_some(h))
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
    write_object_bytes(view, offset, shape, header, bytemuck::bytes_of(value))
}

/// [`write_object`] for a payload given as bytes (`bytes.len() == shape.size`).
pub(crate) fn write_object_bytes<V: MemView>(
    view: &V,
    offset: usize,
    shape: &Shape,
    header: ObjectHeader,
    bytes: &[u8],
) -> Result<(), BiError> {
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

/// Reads and validates the object `link` names: its header (generation, size, not
/// FREED), then each line's payload, checking each line's stamp before and after the copy
/// (a line dropped and refilled while we copied shows a new stamp). This is the read
/// path's hit case, so it loads only the header words it checks and copies whole words.
#[inline(always)]
pub(crate) fn read_object<V: MemView, T: Pod>(
    view: &V,
    heap: Section,
    link: Link<T>,
    shape: &Shape,
) -> Result<Result<T, Mismatch>, BiError> {
    let offset = link.offset();
    check_in(heap, offset, shape.bytes(), "heap")?;
    // Header words 0 (generation) and 2 (size, flags); see `ObjectHeader`.
    // A stale line is rejected on its first word, before anything else is read from it.
    let generation = view.load_u64(offset)?;
    if generation & 0xFFFF != link.generation() || generation == INVALID {
        return Ok(Err(Mismatch::Stale));
    }
    let [size, flags]: [u32; 2] = bytemuck::cast(view.load_u64(offset + 16)?);
    if flags & FREED != 0 || size as usize != shape.size {
        return Ok(Err(Mismatch::Stale));
    }
    let mut value = T::zeroed();
    let out = bytemuck::bytes_of_mut(&mut value);
    let mut done = (shape.line - HEADER_BYTES).min(shape.size);
    view.load_words(offset + HEADER_BYTES, &mut out[..done])?;
    if view.load_u64(offset)? != generation {
        return Ok(Err(Mismatch::Stale));
    }
    let mut line_at = offset;
    while done < shape.size {
        line_at += shape.line;
        if view.load_u64(line_at)? != generation {
            return Ok(Err(Mismatch::Stale));
        }
        let end = (done + shape.line - STAMP_BYTES).min(shape.size);
        view.load_words(line_at + STAMP_BYTES, &mut out[done..end])?;
        if view.load_u64(line_at)? != generation {
            return Ok(Err(Mismatch::Stale));
        }
        done = end;
    }
    Ok(Ok(value))
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
