//! Object layout: one stamp word per line, generation-tagged links, and the one
//! validated read.
//!
//! An object of type `T: Pod` occupies a heap block of whole lines, and every line starts
//! with one 8-byte [`Stamp`]:
//!
//! ```text
//! line 0:  stamp (generation | FREED | TRACKED) | payload bytes 0 .. L-8
//! line i:  stamp (generation | TRACKED)          | payload bytes i(L-8) .. (i+1)(L-8)
//! ```
//!
//! Nothing else lives in the object: the block's length is the heap's (its size class,
//! remembered by the writer that allocated it), the time an object was logged is its ring
//! entry's, and the payload's size is the type's. A 64-byte line carries 56 bytes of
//! payload, so a tree node of a few words is one line: one cache miss per level, as in a
//! coherent tree.
//!
//! # Why every line carries the generation
//!
//! A reader can tell, line by line, whether the copy it holds belongs to the incarnation
//! its link names: a prefetched line of an older incarnation, or an older version of a
//! later line, shows a different stamp. The generation of a reused block is one more than
//! every stamp found in its lines, so no stale line of any earlier object ever matches.
//!
//! # Why partial write-backs are harmless
//!
//! A dirty line may reach memory at any moment (eviction), so other nodes can see any
//! prefix of a writer's stores to it. Each line is therefore written in the order
//! stamp := [`Stamp::INVALID`], payload, stamp := the object's stamp. A line whose stamp
//! matches a link was completely written; a line caught half way holds `INVALID` (which
//! matches no link) or an older stamp (which matches only the older link). Retiring sets
//! FREED in line 0's stamp with one word store: a reader sees the flag or not, never
//! half of it.
//!
//! # The read
//!
//! `fetch_with` is the read path's one validated read: bounds check, load the stamp,
//! compare with the link, copy the payload words, load the stamp again (a line dropped
//! and refilled while it was copied shows a newer stamp). No cache operation, no fence. It answers
//! [`Fetch::Value`], [`Fetch::Null`] or [`Fetch::Stale`]; what to do about a stale copy
//! (invalidate, fence, read again) is the guard's business and written once there.

use crate::mem::{MemError, MemView, StampReadings};
use crate::region::Section;
use crate::runtime::BiError;
use crate::runtime::fault::{Fault, Faults};
use bytemuck::{Pod, Zeroable};
use std::fmt;
use std::marker::PhantomData;

/// Names a line array in a [`Link`]: `Link<Lines<T>>` is an array of lines each holding
/// one `T` (see the [line arrays](crate::runtime::lines)). Never instantiated.
///
/// ```
/// use bi_core::runtime::{Fetch, Link, lines::Lines, testing::Setup};
///
/// let s = Setup::new(1, 0);
/// let mut w = s.writer(0);
/// let array: Link<Lines<[u64; 2]>> = w.alloc_lines(&[[1, 2], [3, 4]]).unwrap();
/// let r = s.nodes[0].reader().unwrap();
/// let g = r.enter();
/// let second = g.line(array, 1).unwrap();
/// assert_eq!(g.fetch_with(second, |v| v[1]).unwrap(), Fetch::Value(4));
/// ```
pub struct Lines<T> {
    _never: std::convert::Infallible,
    _record: std::marker::PhantomData<fn() -> T>,
}

/// Bytes of the stamp at the start of every line.
pub(crate) const STAMP_BYTES: usize = 8;
/// Most lines one object may span (a log entry packs the line count in 16 bits).
pub const MAX_OBJECT_LINES: usize = 0xFFFF;
/// Most lines one line array ([`Lines`](crate::runtime::lines::Lines)) may have (2^24: a GiB of
/// 64-byte lines).
pub const MAX_LINES: usize = 1 << 24;
/// Payload bytes that the validated read reads through its one-line fast path (a 64-byte
/// line's payload).
pub(crate) const ONE_LINE_PAYLOAD: usize = 56;

const OFFSET_BITS: u32 = 48;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// Bits of the generation a [`Link`] carries.
const LINK_GENERATION_MASK: u64 = 0xFFFF;

/// The incarnation number of a heap block: bumped at every reuse and every rewrite, so
/// that a stale copy of any line never matches a newer link.
///
/// ```
/// use bi_core::runtime::object::Generation;
///
/// let g = Generation::new(0x1_0005);
/// assert_eq!(g.next().get(), 0x1_0006);
/// assert_eq!(g.link_bits().get(), 5); // a link keeps the low 16 bits
/// assert_eq!(Generation::MAX.next(), Generation::MAX); // saturates
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Generation(u64);

impl Generation {
    /// The largest generation (a block that reaches it keeps it; see `next`).
    pub const MAX: Generation = Generation(Stamp::GENERATION - 1);

    /// The generation `g` (clamped to [`MAX`](Self::MAX)).
    ///
    /// ```
    /// use bi_core::runtime::object::Generation;
    ///
    /// assert_eq!(Generation::new(3).get(), 3);
    /// assert_eq!(Generation::new(u64::MAX), Generation::MAX); // clamped
    /// ```
    pub const fn new(g: u64) -> Generation {
        Generation(if g > Self::MAX.0 { Self::MAX.0 } else { g })
    }

    /// The number.
    ///
    /// ```
    /// use bi_core::runtime::object::Generation;
    ///
    /// assert_eq!(Generation::default().get(), 0);
    /// assert_eq!(Generation::new(9).next().get(), 10);
    /// ```
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The next generation (saturating).
    ///
    /// ```
    /// use bi_core::runtime::object::Generation;
    ///
    /// let g = Generation::new(0xFFFF);
    /// assert!(g.next() > g);
    /// assert_eq!(g.next().link_bits().get(), 0); // links keep 16 bits and wrap
    /// ```
    #[must_use]
    pub const fn next(self) -> Generation {
        Generation::new(self.0 + 1)
    }

    /// The bits of this generation a [`Link`] carries.
    ///
    /// ```
    /// use bi_core::runtime::Link;
    /// use bi_core::runtime::object::Generation;
    ///
    /// let g = Generation::new(0x2_0003);
    /// let link: Link<u64> = Link::new(64, g.link_bits());
    /// assert_eq!(link.generation(), g.link_bits());
    /// assert_eq!(g.link_bits().get(), 3);
    /// ```
    pub const fn link_bits(self) -> LinkGeneration {
        LinkGeneration::new(self.0)
    }
}

/// The bits of a [`Generation`] a [`Link`] carries (the low 16): what a line's
/// [`Stamp`] is matched against when the link is followed.
///
/// ```
/// use bi_core::runtime::LinkGeneration;
///
/// assert_eq!(LinkGeneration::new(0x1_0005).get(), 5); // 16 bits kept
/// assert_eq!(LinkGeneration::new(0xFFFF).next(), LinkGeneration::new(0)); // and wraps
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct LinkGeneration(u64);

impl LinkGeneration {
    /// The low 16 bits of `bits`.
    pub const fn new(bits: u64) -> LinkGeneration {
        LinkGeneration(bits & LINK_GENERATION_MASK)
    }

    /// The bits, as a number below 2^16.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The next value of the 16 bits (wrapping): a link that names another generation
    /// of the same block.
    #[must_use]
    pub const fn next(self) -> LinkGeneration {
        LinkGeneration::new(self.0 + 1)
    }
}

/// The word at the start of every line of an object: its [`Generation`] and two flags,
/// FREED (line 0 only: the object was retired) and TRACKED (writers log the object in the
/// modified ring when they publish it).
///
/// The matching rule lives here and nowhere else: a link names the object whose line
/// stamps carry the link's generation bits and no FREED mark
/// ([`matches`](Self::matches)).
///
/// ```
/// use bi_core::runtime::Link;
/// use bi_core::runtime::object::{Generation, Stamp};
///
/// let s = Stamp::new(Generation::new(7), false);
/// let link: Link<u64> = Link::new(4096, Generation::new(7).link_bits());
/// assert!(s.matches(link.generation()));
/// assert!(!s.freed().matches(link.generation()));
/// assert!(!Stamp::INVALID.matches(link.generation()));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Stamp(u64);

impl Stamp {
    /// A stamp no link matches: written first into a line being rewritten.
    pub const INVALID: Stamp = Stamp(u64::MAX);
    /// What a rewrite in place adds to a stamp's stored word
    /// ([`next_version`](Self::next_version)): a structure that keeps the sum of its
    /// lines' stamps advances it by this much per line it rewrites, without reading
    /// them.
    ///
    /// ```
    /// use bi_core::runtime::object::{Generation, Stamp};
    ///
    /// let s = Stamp::new(Generation::new(9), true);
    /// assert_eq!(s.next_version().unwrap().raw() - s.raw(), Stamp::REWRITE_STEP);
    /// ```
    pub const REWRITE_STEP: u64 = VERSION_STEP;
    const FREED: u64 = 1 << 63;
    const TRACKED: u64 = 1 << 62;
    const GENERATION: u64 = Self::TRACKED - 1;

    /// The stamp of a live object of generation `g`.
    ///
    /// ```
    /// use bi_core::runtime::object::{Generation, Stamp};
    ///
    /// let s = Stamp::new(Generation::new(5), true);
    /// assert_eq!(s.generation(), Generation::new(5));
    /// assert!(s.is_tracked() && !s.is_freed());
    /// ```
    pub const fn new(g: Generation, tracked: bool) -> Stamp {
        Stamp(g.0 | if tracked { Self::TRACKED } else { 0 })
    }

    /// The stamp as stored.
    ///
    /// ```
    /// use bi_core::runtime::object::{Generation, Stamp};
    ///
    /// let s = Stamp::new(Generation::new(5), false);
    /// assert_eq!(Stamp::from_raw(s.raw()), s);
    /// assert!(Stamp::from_raw(u64::MAX).is_invalid());
    /// ```
    pub const fn from_raw(raw: u64) -> Stamp {
        Stamp(raw)
    }

    /// The stored word.
    ///
    /// ```
    /// use bi_core::runtime::object::{Generation, Stamp};
    ///
    /// assert_eq!(Stamp::new(Generation::new(5), false).raw(), 5);
    /// assert_eq!(Stamp::INVALID.raw(), u64::MAX);
    /// ```
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// Whether a link carrying `link_generation` names this line's object: the
    /// generation bits agree and the object is not FREED (so never for
    /// [`INVALID`](Self::INVALID)).
    ///
    /// ```
    /// use bi_core::runtime::object::{Generation, Stamp};
    ///
    /// let s = Stamp::new(Generation::new(0x1_0002), false);
    /// let two = Generation::new(2).link_bits();
    /// assert!(s.matches(two)); // links carry the low 16 bits
    /// assert!(!s.matches(two.next()));
    /// assert!(!s.freed().matches(two));
    /// ```
    #[inline(always)]
    pub const fn matches(self, link_generation: LinkGeneration) -> bool {
        self.0 & (Self::FREED | LINK_GENERATION_MASK) == link_generation.0
    }

    /// The generation (meaningless for [`INVALID`](Self::INVALID)).
    ///
    /// ```
    /// use bi_core::runtime::object::{Generation, Stamp};
    ///
    /// let g = Generation::new(77);
    /// assert_eq!(Stamp::new(g, true).freed().generation(), g); // flags aside
    /// ```
    pub const fn generation(self) -> Generation {
        Generation(self.0 & Self::GENERATION)
    }

    /// Whether this is the stamp of a line being rewritten.
    ///
    /// ```
    /// use bi_core::runtime::object::{Generation, Stamp};
    ///
    /// assert!(Stamp::INVALID.is_invalid());
    /// assert!(!Stamp::new(Generation::MAX, true).freed().is_invalid());
    /// ```
    pub const fn is_invalid(self) -> bool {
        self.0 == Self::INVALID.0
    }

    /// Whether the object was retired.
    ///
    /// ```
    /// use bi_core::runtime::object::{Generation, Stamp};
    ///
    /// let s = Stamp::new(Generation::new(1), false);
    /// assert!(!s.is_freed() && s.freed().is_freed());
    /// assert!(!Stamp::INVALID.is_freed());
    /// ```
    pub const fn is_freed(self) -> bool {
        self.0 & Self::FREED != 0 && !self.is_invalid()
    }

    /// Whether writers log the object when publishing it.
    ///
    /// ```
    /// use bi_core::runtime::object::{Generation, Stamp};
    ///
    /// assert!(Stamp::new(Generation::new(1), true).is_tracked());
    /// assert!(!Stamp::new(Generation::new(1), false).is_tracked());
    /// assert!(!Stamp::INVALID.is_tracked());
    /// ```
    pub const fn is_tracked(self) -> bool {
        self.0 & Self::TRACKED != 0 && !self.is_invalid()
    }

    /// The same stamp with the FREED mark.
    ///
    /// ```
    /// use bi_core::runtime::object::{Generation, Stamp};
    ///
    /// let s = Stamp::new(Generation::new(4), true);
    /// let f = s.freed();
    /// assert!(f.is_freed() && f.is_tracked());
    /// assert_eq!(f.generation(), s.generation());
    /// ```
    #[must_use]
    pub const fn freed(self) -> Stamp {
        Stamp(self.0 | Self::FREED)
    }

    /// The stamp of the next version of a line rewritten in place
    /// ([`lines`](crate::runtime::lines)): the generation advances by one step above the bits a
    /// link carries, so links to the line keep matching while every older copy of it
    /// shows a different stamp. `None` once the generation is exhausted (after 2^46
    /// rewrites of one line): a rewrite that could not be told apart from an older
    /// version must not happen.
    ///
    /// ```
    /// use bi_core::runtime::object::{Generation, Stamp};
    ///
    /// let s = Stamp::new(Generation::new(7), true);
    /// let t = s.next_version().unwrap();
    /// assert_ne!(s, t);
    /// assert!(t.matches(Generation::new(7).link_bits()) && t.is_tracked());
    /// ```
    #[must_use]
    pub const fn next_version(self) -> Option<Stamp> {
        let g = (self.0 & Self::GENERATION) + VERSION_STEP;
        if self.is_invalid() || g > Generation::MAX.0 {
            None
        } else {
            Some(Stamp((self.0 & !Self::GENERATION) | g))
        }
    }
}

/// How far a line's generation advances when the line is rewritten in place: past the
/// bits a [`Link`] carries.
const VERSION_STEP: u64 = LINK_GENERATION_MASK + 1;

/// A shared, generation-tagged reference to a `T`: the offset of the object in the low
/// 48 bits and the low 16 bits of its generation in the top 16. Zero is null.
///
/// A `Link` is plain data: store it in slots and inside objects.
///
/// ```
/// use bi_core::runtime::{Link, LinkGeneration};
///
/// let l: Link<u64> = Link::new(4096, LinkGeneration::new(7));
/// assert_eq!((l.offset(), l.generation().get()), (4096, 7));
/// assert!(Link::<u64>::null().is_null());
/// assert_eq!(Link::<u64>::from_raw(l.raw()), l);
/// ```
#[repr(transparent)]
pub struct Link<T> {
    raw: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T> Link<T> {
    /// A link to the object at `offset` (its low 48 bits) of generation `generation`.
    ///
    /// ```
    /// use bi_core::runtime::{Link, LinkGeneration};
    ///
    /// let l: Link<u32> = Link::new(128, LinkGeneration::new(9));
    /// assert_eq!((l.offset(), l.generation().get()), (128, 9));
    /// ```
    pub const fn new(offset: usize, generation: LinkGeneration) -> Link<T> {
        Link::from_raw((generation.0 << OFFSET_BITS) | (offset as u64 & OFFSET_MASK))
    }

    /// The null link.
    ///
    /// ```
    /// use bi_core::runtime::Link;
    ///
    /// let l = Link::<u64>::null();
    /// assert!(l.is_null());
    /// assert_eq!(l.raw(), 0);
    /// ```
    pub const fn null() -> Link<T> {
        Link::from_raw(0)
    }

    /// From the stored representation.
    ///
    /// ```
    /// use bi_core::runtime::Link;
    ///
    /// let l = Link::<u64>::from_raw((3 << 48) | 4096);
    /// assert_eq!((l.offset(), l.generation().get()), (4096, 3));
    /// ```
    pub const fn from_raw(raw: u64) -> Link<T> {
        Link {
            raw,
            _t: PhantomData,
        }
    }

    /// The stored representation.
    ///
    /// ```
    /// use bi_core::runtime::{Link, LinkGeneration};
    ///
    /// let l = Link::<u64>::new(64, LinkGeneration::new(1));
    /// assert_eq!(l.raw(), (1 << 48) | 64);
    /// ```
    pub const fn raw(self) -> u64 {
        self.raw
    }

    /// Whether this is the null link.
    ///
    /// ```
    /// use bi_core::runtime::{Link, LinkGeneration};
    ///
    /// assert!(Link::<u8>::from_raw(0).is_null());
    /// let zero = LinkGeneration::new(0);
    /// assert!(!Link::<u8>::new(64, zero).is_null()); // generation 0 at a nonzero offset
    /// ```
    pub const fn is_null(self) -> bool {
        self.raw == 0
    }

    /// Offset of the object.
    ///
    /// ```
    /// use bi_core::runtime::{Link, LinkGeneration};
    ///
    /// assert_eq!(Link::<u64>::new(8192, LinkGeneration::new(5)).offset(), 8192);
    /// ```
    pub const fn offset(self) -> usize {
        (self.raw & OFFSET_MASK) as usize
    }

    /// The bits of the object's generation this link carries.
    ///
    /// ```
    /// use bi_core::runtime::{Link, LinkGeneration};
    ///
    /// let g = LinkGeneration::new(0xABCD);
    /// assert_eq!(Link::<u64>::new(64, g).generation(), g);
    /// ```
    pub const fn generation(self) -> LinkGeneration {
        LinkGeneration(self.raw >> OFFSET_BITS)
    }

    /// The same link, typed as a link to `U`.
    ///
    /// ```
    /// use bi_core::runtime::{Link, LinkGeneration};
    ///
    /// let l: Link<[u64; 2]> = Link::new(64, LinkGeneration::new(2));
    /// let c: Link<u64> = l.cast();
    /// assert_eq!(c.raw(), l.raw());
    /// ```
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
            write!(f, "Link({}@g{})", self.offset(), self.generation().get())
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
        if line < 2 * STAMP_BYTES {
            return Err(BiError::BadConfig {
                reason: "the runtime needs lines of at least 16 bytes",
            });
        }
        let per = line - STAMP_BYTES;
        let lines = if size <= per { 1 } else { size.div_ceil(per) };
        if lines > MAX_OBJECT_LINES || size > u32::MAX as usize {
            return Err(BiError::TooLarge { bytes: size });
        }
        Ok(Shape { line, size, lines })
    }

    /// The shape of `n` lines of `line_payload` bytes each, one record per line (a
    /// [line array](crate::runtime::lines)).
    pub(crate) fn of_lines(n: usize, line_payload: usize, line: usize) -> Result<Shape, BiError> {
        let one = Shape::new(line_payload, line)?;
        if one.lines != 1 || n == 0 || n > MAX_LINES {
            return Err(BiError::TooLarge {
                bytes: n.saturating_mul(line),
            });
        }
        Ok(Shape {
            line,
            size: n * one.per_line(),
            lines: n,
        })
    }

    pub(crate) fn bytes(&self) -> usize {
        self.lines * self.line
    }

    /// Payload bytes per line.
    pub(crate) fn per_line(&self) -> usize {
        self.line - STAMP_BYTES
    }

    /// For each line: (offset of its payload within the block, payload range in `T`).
    pub(crate) fn chunks(&self) -> impl Iterator<Item = (usize, std::ops::Range<usize>)> + '_ {
        let per = self.per_line();
        (0..self.lines).map(move |i| {
            let start = (i * per).min(self.size);
            let end = ((i + 1) * per).min(self.size);
            (i * self.line + STAMP_BYTES, start..end)
        })
    }
}

/// The byte range an object of type `T` at `link` spans (what a stale copy of it
/// invalidates).
pub(crate) fn object_lines<T>(link: Link<T>, line: usize) -> Result<(usize, usize), BiError> {
    Ok((link.offset(), Shape::new(size_of::<T>(), line)?.bytes()))
}

/// Checks that `offset .. offset + len` lies in `section`.
#[inline(always)]
pub(crate) fn check_in(
    section: Section,
    offset: usize,
    len: usize,
    name: &'static str,
) -> Result<(), BiError> {
    if section.contains(offset, len) {
        Ok(())
    } else {
        Err(out_of(offset, name))
    }
}

#[cold]
fn out_of(offset: usize, section: &'static str) -> BiError {
    BiError::OutOfSection { offset, section }
}

/// Stores `bytes` (payload) at `at` word by word (the last word zero-padded).
pub(crate) fn store_words<V: MemView>(view: &V, at: usize, bytes: &[u8]) -> Result<(), BiError> {
    let (whole, tail) = bytes.as_chunks::<8>();
    for (k, w) in whole.iter().enumerate() {
        view.store_u64(at + 8 * k, u64::from_ne_bytes(*w))?;
    }
    if !tail.is_empty() {
        let mut w = [0u8; 8];
        w[..tail.len()].copy_from_slice(tail);
        view.store_u64(at + 8 * whole.len(), u64::from_ne_bytes(w))?;
    }
    Ok(())
}

/// Writes a whole object (stamps and payload) into `view`'s cache, in the order that
/// makes partial write-backs harmless (see the module docs). `bytes.len() == shape.size`.
/// ([`Fault::StampOrder`] writes each line's stamp before its payload instead.)
pub(crate) fn write_object<V: MemView>(
    view: &V,
    offset: usize,
    shape: &Shape,
    stamp: Stamp,
    bytes: &[u8],
    faults: Faults,
) -> Result<(), BiError> {
    let stamp_first = faults.has(Fault::StampOrder);
    for (i, (payload_at, range)) in shape.chunks().enumerate() {
        let line_at = offset + i * shape.line;
        let first = if stamp_first { stamp } else { Stamp::INVALID };
        view.store_u64(line_at, first.raw())?;
        store_words(view, offset + payload_at, &bytes[range])?;
        if !stamp_first {
            view.store_u64(line_at, stamp.raw())?;
        }
    }
    Ok(())
}

/// [`write_object`] for a value of a type known here: an object that fits one line
/// leaves the value's storage as whole words through one checked run
/// ([`MemView::store_u64s`]), between the line's two stamp stores, the mirror of the
/// read's fast path in [`copy_stamped`].
#[inline(always)]
pub(crate) fn write_value<V: MemView, T: Pod>(
    view: &V,
    offset: usize,
    shape: &Shape,
    stamp: Stamp,
    value: &T,
    faults: Faults,
) -> Result<(), BiError> {
    let size = size_of::<T>();
    if size > ONE_LINE_PAYLOAD || size + STAMP_BYTES > shape.line {
        return write_object(
            view,
            offset,
            shape,
            stamp,
            bytemuck::bytes_of(value),
            faults,
        );
    }
    let mut words = [0u64; ONE_LINE_PAYLOAD / 8];
    bytemuck::bytes_of_mut(&mut words)[..size].copy_from_slice(bytemuck::bytes_of(value));
    let stamp_first = faults.has(Fault::StampOrder);
    let first = if stamp_first { stamp } else { Stamp::INVALID };
    view.store_u64(offset, first.raw())?;
    view.store_u64s(offset + STAMP_BYTES, &words[..size.div_ceil(8)])?;
    if !stamp_first {
        view.store_u64(offset, stamp.raw())?;
    }
    Ok(())
}

/// Where objects live and how a read checks them: the heap's bounds, the line size, and
/// the mechanisms a test switched off. Three words passed by value, so a search loop keeps
/// them in registers (without the `faults` feature the switches take no space at all).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Objects {
    pub(crate) heap: Section,
    pub(crate) line: usize,
    pub(crate) faults: Faults,
}

impl Objects {
    /// Whether a line stamped `stamp` may be read as line 0 of the object a link of
    /// generation `link_generation` names: the generations agree and the object is not
    /// FREED. ([`Fault::LineStamp`] admits any stamp; [`Fault::FreedMark`] ignores the
    /// FREED mark.)
    #[inline(always)]
    pub(crate) fn admits(self, stamp: u64, link_generation: LinkGeneration) -> bool {
        Stamp(stamp).matches(link_generation)
            || self.faults.has(Fault::LineStamp)
            || (self.faults.has(Fault::FreedMark)
                && Stamp(stamp & !Stamp::FREED).matches(link_generation))
    }

    /// Whether a stamp read again (after a line's payload, or in a later line) agrees
    /// with the one the read validated first. ([`Fault::LineStamp`]: always.)
    #[inline(always)]
    pub(crate) fn agrees(self, again: u64, first: u64) -> bool {
        again == first || self.faults.has(Fault::LineStamp)
    }
}

/// What a validated read found.
///
/// ```
/// use bi_core::runtime::{Fetch, Link, testing::Setup};
///
/// let s = Setup::new(1, 0);
/// let mut w = s.writer(0);
/// let link = w.alloc_sealed(3u64).unwrap();
/// let r = s.nodes[0].reader().unwrap();
/// let g = r.enter();
/// assert_eq!(g.fetch_with(link, |v| *v).unwrap(), Fetch::Value(3));
/// assert_eq!(g.fetch_with(Link::<u64>::null(), |v| *v).unwrap(), Fetch::Null);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fetch<T> {
    /// The object the link names, copied whole.
    Value(T),
    /// The link was null.
    Null,
    /// This node's copy of some line belongs to another incarnation (an old copy, a
    /// line being rewritten, a retired object): invalidate and read again, or the link
    /// itself is stale.
    Stale,
}

impl<T> Fetch<T> {
    /// The value, converted.
    ///
    /// ```
    /// use bi_core::runtime::Fetch;
    ///
    /// assert_eq!(Fetch::Value(2).map(|v| v * 10), Fetch::Value(20));
    /// assert_eq!(Fetch::<u8>::Stale.map(|v| v + 1), Fetch::Stale);
    /// ```
    #[inline(always)]
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Fetch<U> {
        match self {
            Fetch::Value(v) => Fetch::Value(f(v)),
            Fetch::Null => Fetch::Null,
            Fetch::Stale => Fetch::Stale,
        }
    }
}

/// A value kept at an 8-byte boundary: shared records are often packed (alignment 1),
/// and moving them at odd offsets through the read path's return values (behind an enum
/// tag) costs more than reading them.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(8))]
pub(crate) struct WordAligned<T>(pub(crate) T);

/// The validated read of the object `link` names (see the module docs): on a hit, one
/// bounds check, the stamp, the payload words and the stamp again, with no cache
/// operation and no fence; then `f` looks at the validated copy. A link outside the heap
/// is an error, not a stale copy.
///
/// `f` lets a caller take out just what it needs (a key comparison and the next link, on
/// a search path), so that the copy never leaves this inlined function and stays in
/// registers.
#[inline(always)]
pub(crate) fn fetch_with<V: MemView, T: Pod, R>(
    view: &V,
    objects: Objects,
    link: Link<T>,
    f: impl FnOnce(&T) -> R,
) -> Result<Fetch<R>, BiError> {
    fetch_stamped(view, objects, link, |v, _| f(v))
}

/// [`fetch_with`], handing `f` the stamp the copy validated under as well.
#[inline(always)]
pub(crate) fn fetch_stamped<V: MemView, T: Pod, R>(
    view: &V,
    objects: Objects,
    link: Link<T>,
    f: impl FnOnce(&T, Stamp) -> R,
) -> Result<Fetch<R>, BiError> {
    if link.is_null() {
        return Ok(Fetch::Null);
    }
    Ok(match copy_stamped(view, objects, link, f)? {
        Some(r) => Fetch::Value(r),
        None => Fetch::Stale,
    })
}

/// The validated read of the object a non-null `link` names, handed to `f` with the
/// stamp it validated under; `None` if the copy is stale. A search loop calls this
/// directly: an `Option` beside the error is all it looks at before following the link
/// `f` found, and the copy never leaves this function.
#[inline(always)]
pub(crate) fn copy_stamped<V: MemView, T: Pod, R>(
    view: &V,
    objects: Objects,
    link: Link<T>,
    f: impl FnOnce(&T, Stamp) -> R,
) -> Result<Option<R>, BiError> {
    let size = size_of::<T>();
    if size > ONE_LINE_PAYLOAD || size + STAMP_BYTES > objects.line {
        return Ok(fetch_lines(view, objects, link)?.map(|(v, stamp)| f(&v.0, stamp)));
    }
    let at = link.offset();
    check_in(objects.heap, at, objects.line, "heap")?;
    if !at.is_multiple_of(8) {
        return Err(MemError::Misaligned { offset: at }.into());
    }
    let mut words = [0u64; ONE_LINE_PAYLOAD / 8];
    let n = size.div_ceil(8);
    // A stale line is rejected on its stamp, before anything else is read from it.
    // SAFETY: `at` is 8-aligned (checked above) and the stamp and `n` words,
    // `STAMP_BYTES + 8 * n <= objects.line` bytes (the first check of this function),
    // lie in `at .. at + objects.line`, inside the heap (`check_in` above). The heap lies
    // inside `view`: `Objects` are made only by `NodeInner::objects`, for the view that
    // `NodeRuntime::new` found at least as large as the layout the heap is part of.
    let read = unsafe {
        view.load_stamped_unchecked(at, &mut words[..n], |s| {
            objects.admits(s, link.generation())
        })
    }?;
    let stamp = match read {
        Some(StampReadings { before, after }) if objects.agrees(after, before) => Stamp(before),
        _ => return Ok(None),
    };
    // Whole words into the value's (word-aligned, word-padded) storage, so that reading
    // its fields reads exactly the words written here.
    let mut value = WordAligned(T::zeroed());
    // SAFETY: `WordAligned<T>` is 8-aligned and its size is `size_of::<T>()` rounded up
    // to a multiple of 8, so `n = size.div_ceil(8)` words fit in `value`, which does not
    // overlap the local `words`; every bit pattern is a valid `T` (`T: Pod`), and the
    // bytes written past `T` are padding.
    unsafe { std::ptr::copy_nonoverlapping(words.as_ptr(), (&raw mut value).cast::<u64>(), n) };
    Ok(Some(f(&value.0, stamp)))
}

/// [`fetch_with`] for an object of several lines: each line's stamp is checked before and
/// after its payload is copied, and must equal line 0's (returned with the copy).
#[inline(never)]
fn fetch_lines<V: MemView, T: Pod>(
    view: &V,
    objects: Objects,
    link: Link<T>,
) -> Result<Option<(WordAligned<T>, Stamp)>, BiError> {
    let shape = Shape::new(size_of::<T>(), objects.line)?;
    let at = link.offset();
    check_in(objects.heap, at, shape.bytes(), "heap")?;
    let stamp = view.load_u64(at)?;
    if !objects.admits(stamp, link.generation()) {
        return Ok(None);
    }
    let mut value = WordAligned(T::zeroed());
    let out = bytemuck::bytes_of_mut(&mut value.0);
    let whole = visit_lines(view, objects, at, &shape, stamp, |start, chunk| {
        out[start..start + chunk.len()].copy_from_slice(chunk);
        true
    })?;
    Ok(whole.map(|_| (value, Stamp(stamp))))
}

/// Hands the payload of the object at `at` (the lines of `shape`, each stamped `stamp`)
/// to `f` in pieces, in order: `f(start, bytes)` gets the bytes at `start` of the
/// payload. Every line's stamp is read before and after its pieces are read and must
/// equal `stamp`. `f` returns whether to go on.
///
/// `Ok(None)` when a line did not validate: `f` may already have seen bytes of that line
/// (from a copy being rewritten or refilled), so the caller discards everything `f`
/// gathered. `Ok(Some(done))` otherwise, `done` false if `f` stopped early; every piece
/// `f` saw then belongs to the incarnation `stamp` names.
pub(crate) fn visit_lines<V: MemView>(
    view: &V,
    objects: Objects,
    at: usize,
    shape: &Shape,
    stamp: u64,
    mut f: impl FnMut(usize, &[u8]) -> bool,
) -> Result<Option<bool>, BiError> {
    let mut words = [0u64; 16];
    for (i, (payload_at, range)) in shape.chunks().enumerate() {
        let line_at = at + i * shape.line;
        if i > 0 && !objects.agrees(view.load_u64(line_at)?, stamp) {
            return Ok(None);
        }
        let (mut from, mut done, mut go_on) = (at + payload_at, range.start, true);
        while go_on && done < range.end {
            let take = (range.end - done).min(8 * words.len());
            let w = &mut words[..take.div_ceil(8)];
            view.load_u64s(from, w)?;
            go_on = f(done, &bytemuck::cast_slice(w)[..take]);
            done += take;
            from += take.next_multiple_of(8);
        }
        if !objects.agrees(view.load_u64(line_at)?, stamp) {
            return Ok(None);
        }
        if !go_on {
            return Ok(Some(false));
        }
    }
    Ok(Some(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_cover_the_payload_exactly() {
        for line in [16usize, 32, 64, 128] {
            for size in [0usize, 1, 8, 24, 31, 32, 33, 56, 57, 100, 1000] {
                let s = Shape::new(size, line).unwrap();
                let mut next = 0;
                for (i, (at, r)) in s.chunks().enumerate() {
                    assert_eq!(r.start, next);
                    next = r.end;
                    assert_eq!(at, i * line + STAMP_BYTES);
                    assert!(r.len() <= line - STAMP_BYTES);
                }
                assert_eq!(next, size);
                assert_eq!(s.lines, size.max(1).div_ceil(line - STAMP_BYTES));
            }
        }
        assert_eq!(
            Shape::new(56, 64).unwrap().lines,
            1,
            "56 bytes fit one line"
        );
        assert_eq!(Shape::new(57, 64).unwrap().lines, 2);
        assert!(Shape::new(8, 8).is_err());
        assert!(matches!(
            Shape::new(usize::MAX / 2, 64),
            Err(BiError::TooLarge { .. })
        ));
    }

    #[test]
    fn link_packs_offset_and_generation() {
        let l: Link<u32> = Link::new(0xFFFF_FFFF_FFFF, LinkGeneration::new(0x1_2345));
        assert_eq!(l.offset(), 0xFFFF_FFFF_FFFF);
        assert_eq!(l.generation().get(), 0x2345);
        let raw: u64 = bytemuck::cast(l);
        assert_eq!(raw, l.raw());
    }

    #[test]
    fn stamps_match_only_live_objects_of_their_generation() {
        for g in [0u64, 1, 0xFFFF, 0x1_0000, Generation::MAX.get()] {
            let g = Generation::new(g);
            for tracked in [false, true] {
                let s = Stamp::new(g, tracked);
                assert_eq!((s.generation(), s.is_tracked()), (g, tracked));
                assert!(s.matches(g.link_bits()));
                assert!(!s.matches(g.next().link_bits()) || g == Generation::MAX);
                assert!(!s.is_freed() && s.freed().is_freed());
                assert!(!s.freed().matches(g.link_bits()));
                assert_eq!(s.freed().generation(), g);
                assert_ne!(s, Stamp::INVALID);
            }
        }
        for bits in [0u64, 1, 0xFFFF] {
            assert!(!Stamp::INVALID.matches(LinkGeneration::new(bits)));
        }
        assert!(!Stamp::INVALID.is_freed() && !Stamp::INVALID.is_tracked());
        // Retiring twice leaves the object retired.
        let s = Stamp::new(Generation::new(3), false).freed();
        assert_eq!(s.freed(), s);
    }

    #[test]
    fn generations_count_up_and_links_carry_their_low_bits() {
        for g in [0u64, 1, 9, 0xFFFF, 0x1_0000] {
            assert_eq!(Generation::new(g).get(), g);
            assert_eq!(Generation::new(g).next().get(), g + 1);
        }
        assert_eq!(LinkGeneration::new(5).next().get(), 6);
        assert_eq!(LinkGeneration::new(0xFFFF).next().get(), 0);
        assert_eq!(Generation::MAX.next(), Generation::MAX);
    }

    #[test]
    fn a_rewrite_advances_the_generation_past_the_link_bits_and_keeps_the_flags() {
        for g in [0u64, 7, 0x1_0000, 0x3_0005] {
            for tracked in [false, true] {
                let s = Stamp::new(Generation::new(g), tracked);
                let t = s.next_version().unwrap();
                assert_eq!(t.generation().get(), g + VERSION_STEP);
                assert_eq!(t.is_tracked(), tracked);
                assert!(t.matches(Generation::new(g).link_bits()));
            }
        }
        // The last version a line can take is taken; the one after it is refused.
        let last = Generation::MAX.get() - VERSION_STEP;
        let t = Stamp::new(Generation::new(last), false).next_version();
        assert_eq!(t.map(|t| t.generation()), Some(Generation::MAX));
        assert!(
            Stamp::new(Generation::new(last + 1), false)
                .next_version()
                .is_none()
        );
        assert!(Stamp::INVALID.next_version().is_none());
    }

    #[test]
    fn links_compare_hash_and_show_by_offset_and_generation() {
        use std::collections::hash_map::DefaultHasher;
        use std::hash::{Hash, Hasher};
        let hash = |l: &Link<u64>| {
            let mut h = DefaultHasher::new();
            l.hash(&mut h);
            h.finish()
        };
        let a: Link<u64> = Link::new(640, LinkGeneration::new(3));
        let b: Link<u64> = Link::new(640, LinkGeneration::new(4));
        #[allow(clippy::clone_on_copy)]
        let c = a.clone();
        assert_eq!((c, hash(&c)), (a, hash(&a)));
        assert_ne!(hash(&a), hash(&b));
        let shown = format!("{a:?}");
        assert!(shown.contains("640") && shown.contains('3'), "{shown}");
    }

    #[test]
    fn line_arrays_hold_one_record_a_line_up_to_their_limit() {
        let s = Shape::of_lines(3, 8, 64).unwrap();
        assert_eq!((s.lines, s.size, s.bytes()), (3, 3 * 56, 3 * 64));
        assert_eq!(Shape::of_lines(MAX_LINES, 8, 64).unwrap().lines, MAX_LINES);
        assert!(matches!(
            Shape::of_lines(MAX_LINES + 1, 8, 64),
            Err(BiError::TooLarge { .. })
        ));
        assert!(Shape::of_lines(0, 8, 64).is_err());
        assert!(
            Shape::of_lines(1, 57, 64).is_err(),
            "a record of more than a line"
        );
    }
}
