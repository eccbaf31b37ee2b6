//! Slot arrays: runtime-sized objects whose payload is `n` link slots, updated in place by
//! their writer one slot at a time.
//!
//! # Why
//!
//! A hash table's bucket array is the one shared object that must *not* be copied on
//! every update: copying a million-slot array to change one bucket would make every
//! insert cost megabytes. So the array is allocated once (per resize), published through
//! an ordinary slot, and then each bucket is a slot of its own that the writer updates
//! with the same protocol as any other slot: store the link, write the slot's line back,
//! fence, log the line in the modified ring (so every node's pass invalidates it). Readers
//! read *one* slot of the array, never the whole array.
//!
//! # Layout
//!
//! A slot array is an object like any other ([`object`](crate::runtime::object)): every line
//! starts with its 8-byte stamp, and the payload is `n + 1` words scattered over the rest
//! of the lines: first the number of slots `n`, then the slots. Stamp and line sizes are
//! multiples of 8, so every slot lies wholly inside one line and is read and written with
//! one 8-byte access.
//!
//! # Why reading one slot is sound
//!
//! A retired array's block may be reused once its grace period has passed, and a reader's
//! node may still cache (or prefetch) lines of it. A reader therefore validates, for the
//! slot it reads, that the slot's line belongs to the incarnation its link names:
//!
//! 1. line 0's stamp must match the link (its generation, no FREED mark), and still be
//!    the same after the slot count was read (so the count belongs to this incarnation:
//!    [`BiGuard::load_slots`] / [`BiGuard::slots`] do this once per section and keep the
//!    whole stamp);
//! 2. the stamp of the slot's line must equal that stamp both *before* and *after* the
//!    slot word is read. Memory only ever moves
//!    forward through generations (a reused block gets one more than every stamp it
//!    holds, see `Writer::alloc`), so a line that shows the generation on both sides of
//!    the read gave a word of that incarnation, even if it was dropped and refilled in
//!    between.
//!
//! A mismatch means an old copy: the reader invalidates the line, fences and tries once
//! more; a second mismatch means the array link itself is stale, and the caller re-reads
//! the slot that holds it, read from memory past its cached copy.
//!
//! Updating a slot in place keeps the grace argument of the [runtime](crate::runtime) valid,
//! because that argument never needed slots to be immutable, only that:
//!
//! - every slot store is written back and its line logged in the modified ring *before*
//!   anything it unlinks is retired (the same `store_link` path as
//!   [`Writer::publish_link`]), so each node's pass invalidates the slot's line, wherever
//!   the slot lives, and later sections on that node see the replacement;
//! - the slot's line has a single writer: the array's count and stamps are written by
//!   its allocating writer only, and so are its slots (this writer checks that it
//!   allocated the array);
//! - the array itself is retired like any object (FREED mark, freed ring) only after the
//!   slot that held it was republished, so readers still inside a section that reached
//!   it are protected by the same two passes, and after reuse the stamps no longer match.
//!
//! A modified-ring entry for a slot line may outlive the array and name a line of a later
//! object: invalidating a line is always harmless.
//!
//! Words of an array need not be links: [`Writer::publish_word_in`] and
//! [`BiGuard::load_word_in`] store and read plain counters with the same protocol (a hash
//! map keeps its length this way).
//!
//! ```
//! use bi_core::runtime::testing::Setup;
//!
//! let s = Setup::new(2, 7);
//! let mut w = s.writer(0);
//! let array = w.alloc_slots(16).unwrap();
//! w.publish_slots(s.slot(0), array).unwrap();
//! let v = w.alloc(42u64).unwrap();
//! w.publish_in(array, 9, v).unwrap();
//! s.quiesce_all().unwrap();
//!
//! let r = s.nodes[1].reader().unwrap();
//! let g = r.enter();
//! let a = g.load_slots(s.slot(0)).unwrap().unwrap();
//! assert_eq!(a.len(), 16);
//! assert_eq!(*g.load_in::<u64>(&a, 9).unwrap().unwrap(), 42);
//! assert!(g.load_in::<u64>(&a, 3).unwrap().is_none());
//! ```

use crate::heap::Heap;
use crate::mem::MemView;
use crate::runtime::BiError;
use crate::runtime::object::{Fetch, Link, STAMP_BYTES, Shape, Stamp, check_in};
use crate::runtime::reader::{BiGuard, Shared};
use crate::runtime::writer::{BiBox, Unpublished, Writer};
use bytemuck::Pod;
use std::marker::PhantomData;

/// Names a slot array in a [`Link`]: `Link<SlotArray>` is a link to an array of link
/// slots (see the [module docs](self)). Never instantiated.
///
/// ```
/// use bi_core::runtime::{Link, SlotArray, testing::Setup};
///
/// let s = Setup::new(1, 0);
/// let mut w = s.writer(0);
/// let a: Link<SlotArray> = w.alloc_slots(4).unwrap();
/// assert_eq!(w.word_in(a, 3).unwrap(), 0); // four null slots
/// assert!(w.word_in(a, 4).is_err());
/// ```
#[derive(Debug)]
pub enum SlotArray {}

/// A slot array validated under a guard: its link, full generation and length.
///
/// Obtained from [`BiGuard::load_slots`] or [`BiGuard::slots`]; it cannot outlive the
/// section.
///
/// ```
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 0);
/// let mut w = s.writer(0);
/// let a = w.alloc_slots(3).unwrap();
/// w.publish_slots(s.slot(0), a).unwrap();
/// s.quiesce_all().unwrap();
/// let r = s.nodes[1].reader().unwrap();
/// let g = r.enter();
/// let array = g.load_slots(s.slot(0)).unwrap().unwrap();
/// assert_eq!((array.link(), array.len(), array.is_empty()), (a, 3, false));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SlotArrayRef<'g> {
    link: Link<SlotArray>,
    stamp: Stamp,
    len: usize,
    _guard: PhantomData<&'g ()>,
}

impl SlotArrayRef<'_> {
    /// The link the array was reached through.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots(2).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// assert_eq!(g.slots(a).unwrap().unwrap().link(), a);
    /// ```
    pub fn link(&self) -> Link<SlotArray> {
        self.link
    }

    /// Number of slots (from the array's first payload word).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots(50).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// assert_eq!(g.slots(a).unwrap().unwrap().len(), 50);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array has no slot.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots(0).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// assert!(g.slots(a).unwrap().unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Where payload word `j` of an object at `base` lives: (line index, offset of the word).
fn word_position(line: usize, base: usize, j: usize) -> (usize, usize) {
    let per = (line - STAMP_BYTES) / 8;
    let l = j / per;
    (l, base + l * line + STAMP_BYTES + 8 * (j % per))
}

/// Where slot `i` of an array at `base` lives (payload word 0 is the slot count).
fn slot_position(line: usize, base: usize, i: usize) -> (usize, usize) {
    word_position(line, base, i + 1)
}

/// Payload bytes of an array of `n` slots (the count word and the slots).
fn array_bytes(n: usize) -> Result<usize, BiError> {
    n.checked_add(1)
        .and_then(|w| w.checked_mul(8))
        .filter(|&b| b <= u32::MAX as usize)
        .ok_or_else(|| BiError::TooLarge { bytes: usize::MAX })
}

impl<V: MemView, H: Heap> Writer<V, H> {
    /// The most slots one array may hold with this runtime's line size (an object spans
    /// at most [`MAX_OBJECT_LINES`](crate::runtime::object::MAX_OBJECT_LINES) lines).
    #[cfg(test)]
    pub(crate) fn max_slots(&self) -> usize {
        crate::runtime::object::MAX_OBJECT_LINES * ((self.inner.line - STAMP_BYTES) / 8) - 1
    }

    /// Allocates an array of `n` null slots, immutable from now on like a
    /// [sealed](Writer::seal) object, but written back at once (where `seal` leaves that
    /// to the next publication); no fence yet (the next publication fences once). Publish it with
    /// [`publish_slots`](Self::publish_slots).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots(100).unwrap();
    /// assert_eq!(w.word_in(a, 99).unwrap(), 0); // null
    /// assert!(w.word_in(a, 100).is_err());
    /// ```
    pub fn alloc_slots(&mut self, n: usize) -> Result<Link<SlotArray>, BiError> {
        self.alloc_slots_with(n, |_| 0)
    }

    /// Allocates and seals an array holding `words` (raw links or counters): the way to
    /// build a whole array (a resized bucket array) before publishing it, without logging
    /// every slot.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots_from(&[5, 0, 7]).unwrap();
    /// assert_eq!((w.word_in(a, 0).unwrap(), w.word_in(a, 2).unwrap()), (5, 7));
    /// assert!(w.word_in(a, 3).is_err());
    /// ```
    pub fn alloc_slots_from(&mut self, words: &[u64]) -> Result<Link<SlotArray>, BiError> {
        self.alloc_slots_with(words.len(), |i| words[i])
    }

    fn alloc_slots_with(
        &mut self,
        n: usize,
        word: impl Fn(usize) -> u64,
    ) -> Result<Link<SlotArray>, BiError> {
        let shape = Shape::new(array_bytes(n)?, self.inner.line)?;
        let (block, generation) = self.alloc_block(&shape)?;
        let mut bytes = Vec::with_capacity(shape.size);
        bytes.extend_from_slice(&(n as u64).to_ne_bytes());
        for i in 0..n {
            bytes.extend_from_slice(&word(i).to_ne_bytes());
        }
        let written = self
            .write_block(block, &shape, self.stamp(generation), &bytes)
            .and_then(|()| Ok(self.inner.view.writeback(block.offset, block.len)?));
        if let Err(e) = written {
            let _ = self.heap.free(block);
            return Err(e);
        }
        self.unfenced = true;
        Ok(Link::new(block.offset, generation.link_bits()))
    }

    /// The block length and slot count of an array this writer allocated and has not
    /// retired.
    fn own_array(&self, array: Link<SlotArray>) -> Result<(usize, usize), BiError> {
        let (len, _) = self.own_block(array)?;
        let at = array.offset();
        let (_, count_at) = word_position(self.inner.line, at, 0);
        let n = self.inner.view.load_u64(count_at)? as usize;
        match array_bytes(n).and_then(|b| Shape::new(b, self.inner.line)) {
            Ok(shape) if shape.bytes() <= len => Ok((len, n)),
            _ => Err(BiError::StaleLink { offset: at }),
        }
    }

    /// Offset of slot `i` of `array`.
    fn slot_offset(&self, array: Link<SlotArray>, i: usize) -> Result<usize, BiError> {
        let (_, n) = self.own_array(array)?;
        if i >= n {
            return Err(BiError::OutOfSection {
                offset: i,
                section: "slot array (index)",
            });
        }
        Ok(slot_position(self.inner.line, array.offset(), i).1)
    }

    /// Number of slots of an array this writer allocated.
    #[cfg(test)]
    pub(crate) fn slots_len(&self, array: Link<SlotArray>) -> Result<usize, BiError> {
        Ok(self.own_array(array)?.1)
    }

    /// The link now in slot `i` (this writer's own, always current, view).
    #[cfg(test)]
    pub(crate) fn slot_in<T>(&self, array: Link<SlotArray>, i: usize) -> Result<Link<T>, BiError> {
        Ok(Link::from_raw(self.word_in(array, i)?))
    }

    /// The raw word now in slot `i`.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots(4).unwrap();
    /// w.publish_word_in(a, 1, 33).unwrap();
    /// assert_eq!(w.word_in(a, 1).unwrap(), 33);
    /// ```
    pub fn word_in(&self, array: Link<SlotArray>, i: usize) -> Result<u64, BiError> {
        let at = self.slot_offset(array, i)?;
        Ok(self.inner.view.load(at)?)
    }

    /// Publishes `array` into the `u64` slot at `slot` (a root slot, or a slot inside an
    /// object): same protocol as [`publish_link`](Self::publish_link). Returns the link
    /// that was there; retire the old array with [`retire_slots`](Self::retire_slots).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w = s.writer(0);
    /// let first = w.alloc_slots(8).unwrap();
    /// assert!(w.publish_slots(s.slot(0), first).unwrap().is_null());
    /// let bigger = w.alloc_slots(16).unwrap();
    /// let old = w.publish_slots(s.slot(0), bigger).unwrap();
    /// assert_eq!(old, first);
    /// w.retire_slots(old).unwrap();
    /// ```
    pub fn publish_slots(
        &mut self,
        slot: usize,
        array: Link<SlotArray>,
    ) -> Result<Link<SlotArray>, BiError> {
        self.wait(|w| Ok(Link::from_raw(w.try_publish_raw(slot, array.raw())?)))
    }

    /// Stores `link` into slot `i` of `array` without waiting for ring space: stores it,
    /// writes the slot's line back, fences and logs the line, exactly as
    /// [`try_publish_link`](Self::try_publish_link). Returns the old link.
    #[cfg(test)]
    pub(crate) fn try_publish_link_in<T: Pod>(
        &mut self,
        array: Link<SlotArray>,
        i: usize,
        link: Link<T>,
    ) -> Result<Link<T>, BiError> {
        let at = self.slot_offset(array, i)?;
        self.try_publish_link(at, link)
    }

    /// Stores `link` into slot `i` of `array`: stores it, writes the slot's line back,
    /// fences and logs the line, exactly as [`publish_link`](Self::publish_link), waiting
    /// for ring space if the ring is full. Returns the old link.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots(4).unwrap();
    /// let (x, y) = (w.alloc_sealed(1u64).unwrap(), w.alloc_sealed(2u64).unwrap());
    /// w.publish_link_in(a, 3, x).unwrap();
    /// assert_eq!(w.publish_link_in(a, 3, y).unwrap(), x); // the old link, to retire
    /// ```
    pub fn publish_link_in<T: Pod>(
        &mut self,
        array: Link<SlotArray>,
        i: usize,
        link: Link<T>,
    ) -> Result<Link<T>, BiError> {
        let at = self.slot_offset(array, i)?;
        self.publish_link(at, link)
    }

    /// Publishes a new object into slot `i` of `array` (as [`publish`](Self::publish)).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots(2).unwrap();
    /// let b = w.alloc(4u64).unwrap();
    /// let failed = w.publish_in(a, 2, b).unwrap_err(); // index out of range
    /// assert!(w.publish_in(a, 1, failed.bibox).unwrap().is_null());
    /// ```
    pub fn publish_in<T: Pod>(
        &mut self,
        array: Link<SlotArray>,
        i: usize,
        new: BiBox<T>,
    ) -> Result<Link<T>, Unpublished<T>> {
        match self.slot_offset(array, i) {
            Ok(at) => self.publish(at, new),
            Err(error) => Err(Unpublished { error, bibox: new }),
        }
    }

    /// Stores a plain word (a counter) into slot `i` of `array`, with the protocol of
    /// [`publish_link_in`](Self::publish_link_in). Returns the old word.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots(1).unwrap();
    /// w.publish_slots(s.slot(0), a).unwrap();
    /// assert_eq!(w.publish_word_in(a, 0, 10).unwrap(), 0);
    /// assert_eq!(w.publish_word_in(a, 0, 11).unwrap(), 10);
    /// s.quiesce_all().unwrap();
    /// let r = s.nodes[1].reader().unwrap();
    /// let g = r.enter();
    /// let array = g.load_slots(s.slot(0)).unwrap().unwrap();
    /// assert_eq!(g.load_word_in(&array, 0).unwrap(), 11);
    /// ```
    pub fn publish_word_in(
        &mut self,
        array: Link<SlotArray>,
        i: usize,
        word: u64,
    ) -> Result<u64, BiError> {
        let at = self.slot_offset(array, i)?;
        self.wait(|w| {
            Self::reserve(&w.inner, &mut w.modified, 1)?;
            w.store_link(at, word, None, false)
        })
    }

    /// Stores several words (raw links or counters) into slots of `array` as one batch:
    /// every store, one write-back per touched line, **one** fence, one append of the
    /// touched lines to the modified ring. Returns the old words in order.
    ///
    /// All indices are checked before anything is stored; on an error nothing was
    /// stored. More touched lines than the modified ring holds is [`BiError::LogFull`]:
    /// split the batch (see [`ring_capacity`](Self::ring_capacity)). Without waiting for
    /// ring space.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots(8).unwrap();
    /// w.publish_slots(s.slot(0), a).unwrap();
    /// let old = w.try_publish_words_in(a, &[(0, 10), (7, 70)]).unwrap();
    /// assert_eq!(old, [0, 0]);
    /// assert_eq!((w.word_in(a, 0).unwrap(), w.word_in(a, 7).unwrap()), (10, 70));
    /// ```
    pub fn try_publish_words_in(
        &mut self,
        array: Link<SlotArray>,
        updates: &[(usize, u64)],
    ) -> Result<Vec<u64>, BiError> {
        if updates.is_empty() {
            return Ok(Vec::new());
        }
        let (_, n) = self.own_array(array)?;
        let line = self.inner.line;
        let mut offsets = Vec::with_capacity(updates.len());
        for &(i, _) in updates {
            if i >= n {
                return Err(BiError::OutOfSection {
                    offset: i,
                    section: "slot array (index)",
                });
            }
            offsets.push(slot_position(line, array.offset(), i).1);
        }
        let mut lines: Vec<usize> = offsets.iter().map(|&at| at - at % line).collect();
        lines.sort_unstable();
        lines.dedup();
        Self::reserve(&self.inner, &mut self.modified, lines.len())?;
        self.settle()?;
        self.start_publish_span();
        let view = &self.inner.view;
        let mut old = Vec::with_capacity(updates.len());
        for (&at, &(_, word)) in offsets.iter().zip(updates) {
            old.push(view.load::<u64>(at)?);
            view.store(at, &word)?;
        }
        for &l in &lines {
            view.writeback(l, line)?;
        }
        self.fence_and_log_lines(&lines)?;
        Ok(old)
    }

    /// [`try_publish_words_in`](Self::try_publish_words_in), waiting for ring space.
    #[cfg(test)]
    pub(crate) fn publish_words_in(
        &mut self,
        array: Link<SlotArray>,
        updates: &[(usize, u64)],
    ) -> Result<Vec<u64>, BiError> {
        self.wait(|w| w.try_publish_words_in(array, updates))
    }

    /// Retires an array (unpublish it first): FREED mark, freed ring, reclaimed after a
    /// grace period, like [`retire`](Self::retire). The objects its slots link to are
    /// not retired.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots(4).unwrap();
    /// w.retire_slots(a).unwrap();
    /// assert_eq!(w.retired_blocks(), 1);
    /// assert!(w.retire_slots(a).is_err());
    /// ```
    pub fn retire_slots(&mut self, array: Link<SlotArray>) -> Result<(), BiError> {
        if self.own_array(array).is_err() {
            return Err(self.not_retirable(array));
        }
        self.wait(|w| w.try_retire_links(&[array]))
    }

    /// Gives back an array that never became reachable from a published slot.
    #[cfg(test)]
    pub(crate) fn discard_slots(&mut self, array: Link<SlotArray>) -> Result<(), BiError> {
        self.own_array(array)?;
        self.discard_block(array)
    }
}

/// Reads slot `i` of `array`, checking its line's stamp before and after. No cache
/// operation.
#[inline(always)]
fn read_slot<V: MemView>(
    view: &V,
    line: usize,
    array: &SlotArrayRef<'_>,
    i: usize,
) -> Result<Fetch<u64>, BiError> {
    let base = array.link.offset();
    let (l, at) = slot_position(line, base, i);
    let stamp_at = base + l * line;
    if view.load_u64(stamp_at)? != array.stamp.raw() {
        return Ok(Fetch::Stale);
    }
    let word = view.load_u64(at)?;
    if view.load_u64(stamp_at)? != array.stamp.raw() {
        return Ok(Fetch::Stale);
    }
    Ok(Fetch::Value(word))
}

/// Reads and validates the array `link` names: its stamp, its slot count, its stamp again.
fn read_array<'g, V: MemView>(
    view: &V,
    heap: crate::region::Section,
    line: usize,
    link: Link<SlotArray>,
) -> Result<Fetch<SlotArrayRef<'g>>, BiError> {
    if link.is_null() {
        return Ok(Fetch::Null);
    }
    let at = link.offset();
    check_in(heap, at, line, "heap")?;
    let stamp = Stamp::from_raw(view.load_u64(at)?);
    if !stamp.matches(link.generation()) {
        return Ok(Fetch::Stale);
    }
    let len = view.load_u64(word_position(line, at, 0).1)? as usize;
    // The words of line 0 may come from different fills of the line: the count is
    // trusted only if the stamp is still there after it was read.
    if view.load_u64(at)? != stamp.raw() {
        return Ok(Fetch::Stale);
    }
    let shape = Shape::new(array_bytes(len)?, line)?;
    check_in(heap, at, shape.bytes(), "heap")?;
    Ok(Fetch::Value(SlotArrayRef {
        link,
        stamp,
        len,
        _guard: PhantomData,
    }))
}

impl<'r, V: MemView> BiGuard<'r, V> {
    /// Reads the array link stored in the `u64` slot at `slot` and validates the array
    /// (stamp and slot count). `Ok(None)` for null. On a mismatch it invalidates line 0,
    /// fences and reads once more, then retries from the slot read afresh from memory.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let r = s.nodes[1].reader().unwrap();
    /// assert!(r.enter().load_slots(s.slot(0)).unwrap().is_none());
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots(5).unwrap();
    /// w.publish_slots(s.slot(0), a).unwrap();
    /// s.quiesce_all().unwrap();
    /// assert_eq!(r.enter().load_slots(s.slot(0)).unwrap().unwrap().len(), 5);
    /// ```
    pub fn load_slots(&self, slot: usize) -> Result<Option<SlotArrayRef<'_>>, BiError> {
        let link = Link::<SlotArray>::from_raw(self.cached_slot_word(slot)?);
        match self.fetch_slots(link)? {
            Fetch::Value(a) => Ok(Some(a)),
            Fetch::Null => Ok(None),
            Fetch::Stale => self.load_slots_fresh(slot),
        }
    }

    /// Like [`load_slots`](Self::load_slots), but first invalidates the slot's line and
    /// fences (lazy invalidation). [`BiError::StaleLink`] if the array still does not
    /// validate.
    pub(crate) fn load_slots_fresh(
        &self,
        slot: usize,
    ) -> Result<Option<SlotArrayRef<'_>>, BiError> {
        let link = Link::<SlotArray>::from_raw(self.fresh_slot_word(slot)?);
        self.slots(link)
    }

    /// Validates an array reached through a link found elsewhere. `Ok(None)` for null,
    /// [`BiError::StaleLink`] when it does not validate after one invalidation.
    ///
    /// ```
    /// use bi_core::runtime::{BiError, Link, SlotArray, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots(2).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// assert_eq!(g.slots(a).unwrap().unwrap().len(), 2);
    /// let wrong = Link::<SlotArray>::new(a.offset(), a.generation().next());
    /// assert!(matches!(g.slots(wrong), Err(BiError::StaleLink { .. })));
    /// ```
    pub fn slots(&self, link: Link<SlotArray>) -> Result<Option<SlotArrayRef<'_>>, BiError> {
        match self.fetch_slots(link)? {
            Fetch::Value(a) => Ok(Some(a)),
            Fetch::Null => Ok(None),
            Fetch::Stale => Err(BiError::StaleLink {
                offset: link.offset(),
            }),
        }
    }

    /// The validated read of an array, retried once after invalidating its line 0.
    fn fetch_slots(&self, link: Link<SlotArray>) -> Result<Fetch<SlotArrayRef<'_>>, BiError> {
        let inner = self.inner();
        let heap = inner.layout.heap();
        let read = || read_array(self.view(), heap, inner.line, link);
        self.validated(read()?, read, || Ok((link.offset(), inner.line)))
    }

    fn check_index(array: &SlotArrayRef<'_>, i: usize) -> Result<(), BiError> {
        if i < array.len {
            Ok(())
        } else {
            Err(BiError::OutOfSection {
                offset: i,
                section: "slot array (index)",
            })
        }
    }

    /// Reads slot `i` of `array`, retrying once after invalidating its line;
    /// [`BiError::StaleLink`] (for the array) if it still does not validate.
    #[inline]
    fn word_checked(&self, array: &SlotArrayRef<'_>, i: usize) -> Result<u64, BiError> {
        Self::check_index(array, i)?;
        let line = self.inner().line;
        let base = array.link.offset();
        let read = || read_slot(self.view(), line, array, i);
        let f = self.validated(read()?, read, || {
            Ok((base + slot_position(line, base, i).0 * line, line))
        })?;
        match f {
            Fetch::Value(w) => Ok(w),
            _ => Err(BiError::StaleLink { offset: base }),
        }
    }

    /// Reads slot `i` of `array` and the object its link names, with no cache operation
    /// on a hit. `Ok(None)` for a null slot.
    ///
    /// If the slot's line does not belong to the array's incarnation even after one
    /// invalidation, the array is stale: [`BiError::StaleLink`] (re-read the slot that
    /// holds the array). If the object does not validate, the slot is re-read fresh
    /// ([`load_in_fresh`](Self::load_in_fresh)).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots(4).unwrap();
    /// w.publish_slots(s.slot(0), a).unwrap();
    /// let b = w.alloc([1u32, 2]).unwrap();
    /// w.publish_in(a, 1, b).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// let array = g.load_slots(s.slot(0)).unwrap().unwrap();
    /// assert_eq!(*g.load_in::<[u32; 2]>(&array, 1).unwrap().unwrap(), [1, 2]);
    /// assert!(g.load_in::<[u32; 2]>(&array, 4).is_err()); // out of range
    /// ```
    #[inline]
    pub fn load_in<T: Pod>(
        &self,
        array: &SlotArrayRef<'_>,
        i: usize,
    ) -> Result<Option<Shared<'_, T>>, BiError> {
        let link = Link::<T>::from_raw(self.word_checked(array, i)?);
        match self.fetch(link)? {
            Fetch::Value(v) => Ok(Some(v)),
            Fetch::Null => Ok(None),
            Fetch::Stale => self.load_in_fresh(array, i),
        }
    }

    /// Like [`load_in`](Self::load_in), but first invalidates the slot's line and fences:
    /// the lazy-invalidation path for a lookup that missed.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots(2).unwrap();
    /// w.publish_slots(s.slot(0), a).unwrap();
    /// s.quiesce_all().unwrap();
    /// let r = s.nodes[1].reader().unwrap();
    /// let g = r.enter();
    /// let array = g.load_slots(s.slot(0)).unwrap().unwrap();
    /// assert!(g.load_in::<u64>(&array, 0).unwrap().is_none()); // caches the null slot
    /// let b = w.alloc(6u64).unwrap();
    /// w.publish_in(a, 0, b).unwrap();
    /// assert_eq!(*g.load_in_fresh::<u64>(&array, 0).unwrap().unwrap(), 6);
    /// ```
    pub fn load_in_fresh<T: Pod>(
        &self,
        array: &SlotArrayRef<'_>,
        i: usize,
    ) -> Result<Option<Shared<'_, T>>, BiError> {
        let link = Link::<T>::from_raw(self.word_in_fresh(array, i)?);
        self.follow(link)
    }

    /// The link in slot `i` of `array`, without reading the object it names.
    #[cfg(test)]
    pub(crate) fn link_in<T>(
        &self,
        array: &SlotArrayRef<'_>,
        i: usize,
    ) -> Result<Link<T>, BiError> {
        Ok(Link::from_raw(self.word_checked(array, i)?))
    }

    /// The plain word in slot `i` of `array` (a counter stored with
    /// [`Writer::publish_word_in`]).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_slots_from(&[0, 42]).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// let array = g.slots(a).unwrap().unwrap();
    /// assert_eq!(g.load_word_in(&array, 1).unwrap(), 42);
    /// ```
    pub fn load_word_in(&self, array: &SlotArrayRef<'_>, i: usize) -> Result<u64, BiError> {
        self.word_checked(array, i)
    }

    /// Like [`load_word_in`](Self::load_word_in) after invalidating the slot's line.
    pub(crate) fn word_in_fresh(&self, array: &SlotArrayRef<'_>, i: usize) -> Result<u64, BiError> {
        Self::check_index(array, i)?;
        let (_, at) = slot_position(self.inner().line, array.link.offset(), i);
        let view = self.view();
        view.invalidate(at, 8)?;
        view.fence();
        self.word_checked(array, i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer's own view of its arrays: each slot holds what was last published into
    /// it and a publication hands back what it replaced; a link of another type whose
    /// first word claims more slots than its block holds is no array of this writer's.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn a_writer_reads_its_slots_as_published_and_refuses_a_counterfeit_array() {
        use crate::runtime::testing::Setup;
        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let a = w.alloc_slots(4).unwrap();
        let (x, y) = (w.alloc_sealed(1u64).unwrap(), w.alloc_sealed(2u64).unwrap());
        assert!(w.try_publish_link_in(a, 1, x).unwrap().is_null());
        assert_eq!(w.slot_in::<u64>(a, 1).unwrap(), x);
        assert_eq!(w.try_publish_link_in(a, 1, y).unwrap(), x);
        assert_eq!(w.slot_in::<u64>(a, 1).unwrap(), y);
        assert!(w.slot_in::<u64>(a, 0).unwrap().is_null());
        let other = w.alloc_sealed([100u64, 0, 0]).unwrap(); // 100 slots would take 15 lines
        let counterfeit = Link::<SlotArray>::new(other.offset(), other.generation());
        assert!(matches!(
            w.slots_len(counterfeit),
            Err(BiError::StaleLink { .. })
        ));
        assert!(w.word_in(counterfeit, 50).is_err());
    }

    /// Words published in one batch, over several lines of the array, reach a node that
    /// cached the old ones at its next pass (the batch writes back and logs each line it
    /// touched); the batch hands back the words it replaced; a fresh load finds an array
    /// published since the node's last pass; a discarded array's memory goes back.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn words_published_in_a_batch_reach_other_nodes_at_their_next_pass() {
        use crate::heap::Heap;
        use crate::runtime::testing::Setup;
        let s = Setup::new(2, 0);
        let mut w = s.writer(0);
        let r = s.nodes[1].reader().unwrap();
        {
            let g = r.enter();
            assert!(g.load_slots(s.slot(0)).unwrap().is_none()); // the slot is cached
        }
        let a = w.alloc_slots(20).unwrap();
        w.publish_slots(s.slot(0), a).unwrap();
        {
            let g = r.enter();
            assert!(g.load_slots(s.slot(0)).unwrap().is_none(), "no pass yet");
            let fresh = g.load_slots_fresh(s.slot(0)).unwrap().unwrap();
            assert_eq!(fresh.link(), a);
            // Node 1 caches every line of the array.
            assert!((0..20).all(|i| g.load_word_in(&fresh, i).unwrap() == 0));
        }
        let touched = [(0, 10), (6, 60), (7, 70), (19, 190)];
        assert_eq!(w.publish_words_in(a, &touched).unwrap(), [0; 4]);
        assert_eq!(
            w.publish_words_in(a, &[(6, 61), (19, 191)]).unwrap(),
            [60, 190]
        );
        s.nodes[1].quiesce().unwrap();
        let g = r.enter();
        let array = g.load_slots(s.slot(0)).unwrap().unwrap();
        let seen: Vec<u64> = [0, 6, 7, 19]
            .iter()
            .map(|&i| g.load_word_in(&array, i).unwrap())
            .collect();
        assert_eq!(seen, [10, 61, 70, 191]);
        drop(g);
        // A link published into a slot is the link a reader finds there.
        let x = w.alloc_sealed(5u64).unwrap();
        w.publish_link_in(a, 3, x).unwrap();
        s.nodes[1].quiesce().unwrap();
        let g = r.enter();
        let array = g.load_slots(s.slot(0)).unwrap().unwrap();
        assert_eq!(g.link_in::<u64>(&array, 3).unwrap(), x);
        drop(g);
        let b = w.alloc_slots(64).unwrap();
        let live = w.heap().stats().live;
        w.discard_slots(b).unwrap();
        assert!(w.heap().stats().live < live);
    }

    /// The largest array `max_slots` names is one an object may span: it is granted,
    /// one slot more is refused; an array of no slot is empty and one of one is not.
    #[test]
    #[cfg_attr(miri, ignore = "writes 65,535 emulated lines")]
    fn the_largest_array_spans_the_most_lines_an_object_may() {
        use crate::region::RegionConfig;
        use crate::runtime::RuntimeConfig;
        use crate::runtime::testing::Setup;
        let region = RegionConfig::new(4 << 20).with_nodes(1).with_line_size(32);
        let s = Setup::with(region, |c| c, RuntimeConfig::default());
        let mut w = s.writer(0);
        let max = w.max_slots();
        assert!(matches!(
            w.alloc_slots(max + 1),
            Err(BiError::TooLarge { .. })
        ));
        let a = w.alloc_slots(max).unwrap();
        assert_eq!(w.slots_len(a).unwrap(), max);
        assert_eq!(
            w.heap().stats().live,
            crate::runtime::object::MAX_OBJECT_LINES * 32
        );
        let (none, one) = (w.alloc_slots(0).unwrap(), w.alloc_slots(1).unwrap());
        let r = s.nodes[0].reader().unwrap();
        let g = r.enter();
        assert!(g.slots(none).unwrap().unwrap().is_empty());
        assert!(!g.slots(one).unwrap().unwrap().is_empty());
    }

    #[test]
    fn word_positions_follow_the_object_layout() {
        for line in [16usize, 32, 64, 128] {
            for n in [1usize, 3, 7, 8, 100] {
                let shape = Shape::new(n * 8, line).unwrap();
                let mut expected = Vec::new();
                for (payload_at, range) in shape.chunks() {
                    for k in 0..range.len() / 8 {
                        expected.push(payload_at + 8 * k);
                    }
                }
                assert_eq!(expected.len(), n);
                for (i, &at) in expected.iter().enumerate() {
                    let (l, got) = word_position(line, 0, i);
                    assert_eq!(got, at, "line {line} n {n} i {i}");
                    assert_eq!(l, at / line);
                }
            }
        }
    }
}

/// Examples of the crate-private items above, as tests.
#[cfg(test)]
mod private_examples {
    #[test]
    fn max_slots_example() {
        use crate::runtime::testing::Setup;

        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let max = w.max_slots();
        assert!(max > 0);
        assert!(w.alloc_slots(max + 1).is_err()); // more lines than an object may span
    }

    #[test]
    fn slots_len_example() {
        use crate::runtime::testing::Setup;

        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let a = w.alloc_slots(12).unwrap();
        assert_eq!(w.slots_len(a).unwrap(), 12);
    }

    #[test]
    fn slot_in_example() {
        use crate::runtime::testing::Setup;

        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let a = w.alloc_slots(4).unwrap();
        let v = w.alloc_sealed(1u64).unwrap();
        w.publish_link_in(a, 2, v).unwrap();
        assert_eq!(w.slot_in::<u64>(a, 2).unwrap(), v);
        assert!(w.slot_in::<u64>(a, 4).is_err()); // no such slot
    }

    #[test]
    fn try_publish_link_in_example() {
        use crate::runtime::testing::Setup;

        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let a = w.alloc_slots(4).unwrap();
        let v = w.alloc_sealed(9u64).unwrap();
        assert!(w.try_publish_link_in(a, 0, v).unwrap().is_null());
        assert_eq!(w.slot_in::<u64>(a, 0).unwrap(), v);
    }

    #[test]
    fn publish_words_in_example() {
        use crate::runtime::testing::Setup;

        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let a = w.alloc_slots(4).unwrap();
        assert!(w.publish_words_in(a, &[(0, 1), (9, 2)]).is_err()); // 9 is out of range
        assert_eq!(w.word_in(a, 0).unwrap(), 0); // nothing was stored
        assert_eq!(w.publish_words_in(a, &[(0, 1), (3, 2)]).unwrap(), [0, 0]);
    }

    #[test]
    fn discard_slots_example() {
        use crate::heap::Heap;
        use crate::runtime::testing::Setup;

        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let a = w.alloc_slots(64).unwrap();
        w.discard_slots(a).unwrap();
        assert_eq!(w.heap().stats().live, 0);
    }

    #[test]
    fn load_slots_fresh_example() {
        use crate::runtime::testing::Setup;

        let s = Setup::new(2, 0);
        let r = s.nodes[1].reader().unwrap();
        let g = r.enter();
        assert!(g.load_slots(s.slot(0)).unwrap().is_none()); // now cached
        let mut w = s.writer(0);
        let a = w.alloc_slots(5).unwrap();
        w.publish_slots(s.slot(0), a).unwrap();
        assert!(g.load_slots(s.slot(0)).unwrap().is_none()); // no pass yet
        assert_eq!(g.load_slots_fresh(s.slot(0)).unwrap().unwrap().link(), a);
    }

    #[test]
    fn link_in_example() {
        use crate::runtime::testing::Setup;

        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let a = w.alloc_slots(2).unwrap();
        let v = w.alloc_sealed(3u64).unwrap();
        w.publish_link_in(a, 1, v).unwrap();
        let r = s.nodes[0].reader().unwrap();
        let g = r.enter();
        let array = g.slots(a).unwrap().unwrap();
        assert_eq!(g.link_in::<u64>(&array, 1).unwrap(), v);
    }

    #[test]
    fn word_in_fresh_example() {
        use crate::runtime::testing::Setup;

        let s = Setup::new(2, 0);
        let mut w = s.writer(0);
        let a = w.alloc_slots(1).unwrap();
        s.quiesce_all().unwrap();
        let r = s.nodes[1].reader().unwrap();
        let g = r.enter();
        let array = g.slots(a).unwrap().unwrap();
        assert_eq!(g.load_word_in(&array, 0).unwrap(), 0); // now cached
        w.publish_word_in(a, 0, 5).unwrap();
        assert_eq!(g.word_in_fresh(&array, 0).unwrap(), 5);
    }
}
