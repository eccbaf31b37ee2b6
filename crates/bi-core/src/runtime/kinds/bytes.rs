//! Byte strings: immutable objects of any length, read line by line under the stamp
//! protocol.
//!
//! # Why
//!
//! Keys and values of a fixed size sit inside the objects that hold them (a tree node, a
//! bucket line). A string, or a value of a megabyte, cannot: it lives in an object of its
//! own, whose length only the object knows. A byte string is that object.
//!
//! # Layout
//!
//! An ordinary object (see [`object`](crate::runtime::object)) whose payload is the length (8
//! bytes) followed by the bytes: with 64-byte lines, line 0 holds the length and the
//! first 48 bytes, every further line 56 more. At most
//! [`MAX_OBJECT_LINES`](crate::runtime::object::MAX_OBJECT_LINES) lines (3.6 MB of bytes with
//! 64-byte lines).
//!
//! # Reads
//!
//! A reader reads line 0 (its stamp must match the link), learns the length, and reads
//! the other lines, each checked against line 0's stamp before and after it is read: so a
//! byte string is returned whole, from the incarnation its link names, or not at all (a
//! torn or reused string is [`Fetch::Stale`]). A stale copy is invalidated (line 0, then
//! the lines the length read from memory names), fenced and read once more, as for every
//! object. Comparing with a probe streams the lines and stops at the first difference,
//! without copying the string out.
//!
//! # Writes
//!
//! [`Writer::alloc_bytes`] writes a new string in the usual order (stamp := INVALID,
//! payload, stamp), and, like a [sealed](Writer::seal) object, leaves its write-back to
//! the next publication or line rewrite, which fences once for everything written since
//! the last. A string is retired like any object, once no published object links to it.
//!
//! ```
//! use bi_core::runtime::{Fetch, testing::Setup};
//!
//! let s = Setup::new(2, 5);
//! let mut w = s.writer(0);
//! let name = w.alloc_bytes(b"a string longer than one line's payload of 56 bytes").unwrap();
//! w.publish_bytes(s.slot(0), name).unwrap();
//!
//! let r = s.nodes[1].reader().unwrap();
//! let g = r.enter();
//! let mut out = Vec::new();
//! assert_eq!(g.read_bytes(name, &mut out).unwrap(), Fetch::Value(()));
//! assert_eq!(&out[..8], b"a string");
//! assert_eq!(g.compare_bytes(name, b"a string").unwrap(), Fetch::Value(std::cmp::Ordering::Less));
//! ```

use crate::heap::Heap;
use crate::mem::{MemView, StampReadings};
use crate::runtime::BiError;
use crate::runtime::object::{
    Fetch, Link, ONE_LINE_PAYLOAD, Objects, STAMP_BYTES, Shape, check_in, visit_lines,
};
use crate::runtime::reader::BiGuard;
use crate::runtime::writer::Writer;
use std::cmp::Ordering;

/// Bytes of the length word at the start of a byte string's payload.
const LEN_BYTES: usize = 8;

/// Names a byte string in a [`Link`]: `Link<Bytes>` (see the [module docs](self)).
/// Never instantiated.
///
/// ```
/// use bi_core::runtime::{Bytes, Link, testing::Setup};
///
/// let s = Setup::new(1, 0);
/// let mut w = s.writer(0);
/// let link: Link<Bytes> = w.alloc_bytes(b"hello").unwrap();
/// assert_eq!(w.read_own_bytes(link).unwrap(), b"hello");
/// ```
pub struct Bytes {
    _never: std::convert::Infallible,
}

/// The shape of a byte string of `len` bytes.
fn shape_of(len: usize, line: usize) -> Result<Shape, BiError> {
    Shape::new(
        len.checked_add(LEN_BYTES)
            .ok_or_else(|| BiError::TooLarge { bytes: len })?,
        line,
    )
}

/// Most bytes of a string whose length and bytes fit one 64-byte line's payload.
const ONE_LINE_BYTES: usize = ONE_LINE_PAYLOAD - LEN_BYTES;

/// The read path's fast case: a string of at most [`ONE_LINE_BYTES`] bytes, read as the
/// words of its one line between two reads of the stamp (as any one-line object is),
/// with no per-piece bookkeeping. `None` for a longer string (or lines under 64 bytes):
/// read it piece by piece.
#[inline(always)]
fn one_line<V: MemView>(
    view: &V,
    objects: Objects,
    link: Link<Bytes>,
) -> Result<Option<Fetch<[u64; ONE_LINE_PAYLOAD / 8]>>, BiError> {
    if link.is_null() || objects.line < STAMP_BYTES + ONE_LINE_PAYLOAD {
        return Ok(None);
    }
    let at = link.offset();
    check_in(objects.heap, at, objects.line, "heap")?;
    let mut words = [0u64; ONE_LINE_PAYLOAD / 8];
    let read = view.load_stamped(at, &mut words, |s| objects.admits(s, link.generation()))?;
    Ok(match read {
        Some(StampReadings { before, after }) if objects.agrees(after, before) => {
            (words[0] <= ONE_LINE_BYTES as u64).then_some(Fetch::Value(words))
        }
        _ => Some(Fetch::Stale),
    })
}

/// The bytes of a one-line string's words.
fn bytes_of(words: &[u64; ONE_LINE_PAYLOAD / 8]) -> &[u8] {
    // `one_line` checked the length against the payload.
    &bytemuck::cast_slice(&words[1..])[..words[0] as usize]
}

/// One validated read of the byte string at `link`, handing its bytes to `f` in pieces
/// (`f(start, bytes)`, in order; `f` returns whether to go on). The answer is its length,
/// or [`Fetch::Stale`] (and then `f` may have seen bytes that must be discarded).
fn visit_bytes<V: MemView>(
    view: &V,
    objects: Objects,
    link: Link<Bytes>,
    mut f: impl FnMut(usize, &[u8]) -> bool,
) -> Result<Fetch<usize>, BiError> {
    if link.is_null() {
        return Ok(Fetch::Null);
    }
    let (heap, line) = (objects.heap, objects.line);
    let at = link.offset();
    check_in(heap, at, line, "heap")?;
    let stamp = view.load_u64(at)?;
    if !objects.admits(stamp, link.generation()) {
        return Ok(Fetch::Stale);
    }
    let len = view.load_u64(at + STAMP_BYTES)?;
    // A length no byte string can have: this line was not written as one (a link of
    // another type, or a copy being rewritten); the stamp check after the read decides.
    let Some(shape) = usize::try_from(len)
        .ok()
        .and_then(|n| shape_of(n, line).ok())
    else {
        return Ok(Fetch::Stale);
    };
    check_in(heap, at, shape.bytes(), "heap")?;
    let whole = visit_lines(view, objects, at, &shape, stamp, |start, piece| {
        // The payload's first word is the length: hand on only the bytes after it.
        let skip = LEN_BYTES.saturating_sub(start).min(piece.len());
        piece.len() == skip || f(start + skip - LEN_BYTES, &piece[skip..])
    })?;
    Ok(match whole {
        Some(_) => Fetch::Value(shape.size - LEN_BYTES),
        None => Fetch::Stale,
    })
}

impl<V: MemView, H: Heap> Writer<V, H> {
    /// Allocates a byte string holding `bytes`, immutable from now on. Its lines reach
    /// memory with the next publication or line rewrite (until then no other node can
    /// reach it); give it back with [`discard_bytes`](Self::discard_bytes) if it never
    /// became reachable, retire it with [`try_retire_bytes`](Self::try_retire_bytes) once
    /// it is no longer.
    ///
    /// [`BiError::TooLarge`] past [`MAX_OBJECT_LINES`](crate::runtime::object::MAX_OBJECT_LINES)
    /// lines.
    ///
    /// ```
    /// use bi_core::runtime::{BiError, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let empty = w.alloc_bytes(b"").unwrap();
    /// assert_eq!(w.read_own_bytes(empty).unwrap(), b"");
    /// let big = vec![7u8; 50_000]; // about 900 lines
    /// let link = w.alloc_bytes(&big).unwrap();
    /// assert_eq!(w.read_own_bytes(link).unwrap(), big);
    /// assert!(matches!(w.alloc_bytes(&vec![0; 8 << 20]), Err(BiError::TooLarge { .. })));
    /// ```
    pub fn alloc_bytes(&mut self, bytes: &[u8]) -> Result<Link<Bytes>, BiError> {
        let shape = shape_of(bytes.len(), self.inner.line)?;
        let mut payload = Vec::with_capacity(shape.size);
        payload.extend_from_slice(&(bytes.len() as u64).to_ne_bytes());
        payload.extend_from_slice(bytes);
        let (block, generation) = self.alloc_block(&shape)?;
        if let Err(e) = self.write_block(block, &shape, self.stamp(generation), &payload) {
            let _ = self.heap.free(block);
            return Err(e);
        }
        self.unwritten.push((block.offset, block.len));
        self.unfenced = true;
        Ok(Link::new(block.offset, generation.link_bits()))
    }

    /// Reads back one of this writer's live byte strings from this node's cache (see
    /// [`read_own`](Self::read_own)): [`BiError::StaleLink`] if `link` is not one.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_bytes(b"kept").unwrap();
    /// assert_eq!(w.read_own_bytes(link).unwrap(), b"kept");
    /// w.try_retire_bytes(&[link]).unwrap();
    /// assert!(w.read_own_bytes(link).is_err()); // FREED
    /// ```
    pub fn read_own_bytes(&self, link: Link<Bytes>) -> Result<Vec<u8>, BiError> {
        let inner = &self.inner;
        let mut out = Vec::new();
        match visit_bytes(&inner.view, inner.objects(), link, |_, b| {
            out.extend_from_slice(b);
            true
        })? {
            Fetch::Value(_) => Ok(out),
            Fetch::Null | Fetch::Stale => Err(BiError::StaleLink {
                offset: link.offset(),
            }),
        }
    }

    /// The bytes a live byte string occupies in the heap (its lines, stamps included):
    /// what [`adopt`](Self::adopt) takes for it. Reads its length from this node's cache.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let short = w.alloc_bytes(b"short").unwrap();
    /// assert_eq!(w.string_bytes(short).unwrap(), 64); // length and bytes fit one line
    /// let long = w.alloc_bytes(&[0; 100]).unwrap();
    /// assert_eq!(w.string_bytes(long).unwrap(), 128);
    /// ```
    pub fn string_bytes(&self, link: Link<Bytes>) -> Result<usize, BiError> {
        let inner = &self.inner;
        match visit_bytes(&inner.view, inner.objects(), link, |_, _| false)? {
            Fetch::Value(len) => Ok(shape_of(len, inner.line)?.bytes()),
            Fetch::Null | Fetch::Stale => Err(BiError::StaleLink {
                offset: link.offset(),
            }),
        }
    }

    /// How `probe` orders against one of this writer's live byte strings (read from this
    /// node's cache, without copying it out).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::cmp::Ordering;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_bytes(b"banana").unwrap();
    /// assert_eq!(w.compare_own_bytes(link, b"apple").unwrap(), Ordering::Less);
    /// assert_eq!(w.compare_own_bytes(link, b"banana").unwrap(), Ordering::Equal);
    /// assert_eq!(w.compare_own_bytes(link, b"bananas").unwrap(), Ordering::Greater);
    /// ```
    pub fn compare_own_bytes(&self, link: Link<Bytes>, probe: &[u8]) -> Result<Ordering, BiError> {
        let inner = &self.inner;
        match compare(&inner.view, inner.objects(), link, probe)? {
            Fetch::Value(o) => Ok(o),
            Fetch::Null | Fetch::Stale => Err(BiError::StaleLink {
                offset: link.offset(),
            }),
        }
    }

    /// Publishes `link` into the `u64` slot at `slot`, with the protocol of
    /// [`publish_link`](Self::publish_link) (which settles the string's lines first).
    /// Returns the link that was there.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let first = w.alloc_bytes(b"one").unwrap();
    /// assert!(w.publish_bytes(s.slot(0), first).unwrap().is_null());
    /// let second = w.alloc_bytes(b"two").unwrap();
    /// assert_eq!(w.publish_bytes(s.slot(0), second).unwrap(), first);
    /// ```
    pub fn publish_bytes(
        &mut self,
        slot: usize,
        link: Link<Bytes>,
    ) -> Result<Link<Bytes>, BiError> {
        self.wait(|w| Ok(Link::from_raw(w.try_publish_raw(slot, link.raw())?)))
    }

    /// Retires byte strings no published object links to any more (like
    /// [`try_retire_all`](Self::try_retire_all)). Without waiting for ring space.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_bytes(b"old").unwrap();
    /// w.try_retire_bytes(&[link]).unwrap();
    /// assert_eq!(w.retired_blocks(), 1);
    /// ```
    pub fn try_retire_bytes(&mut self, links: &[Link<Bytes>]) -> Result<(), BiError> {
        self.try_retire_links(links)
    }

    /// Gives back a byte string that never became reachable from a published object.
    ///
    /// ```
    /// use bi_core::heap::Heap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_bytes(b"unused").unwrap();
    /// w.discard_bytes(link).unwrap();
    /// assert_eq!(w.heap().stats().live, 0);
    /// ```
    pub fn discard_bytes(&mut self, link: Link<Bytes>) -> Result<(), BiError> {
        self.discard_block(link)
    }
}

/// How `probe` orders against the byte string at `link` (one validated read).
#[inline]
fn compare<V: MemView>(
    view: &V,
    objects: Objects,
    link: Link<Bytes>,
    probe: &[u8],
) -> Result<Fetch<Ordering>, BiError> {
    if let Some(read) = one_line(view, objects, link)? {
        return Ok(read.map(|w| probe.cmp(bytes_of(&w))));
    }
    let mut order = Ordering::Equal;
    let read = visit_bytes(view, objects, link, |start, stored| {
        let mine = probe.get(start..).unwrap_or_default();
        let n = mine.len().min(stored.len());
        order = mine[..n].cmp(&stored[..n]);
        if order == Ordering::Equal && n < stored.len() {
            order = Ordering::Less; // the probe ended first
        }
        order == Ordering::Equal
    })?;
    Ok(read.map(|len| order.then(probe.len().cmp(&len))))
}

impl<V: MemView> BiGuard<'_, V> {
    /// Copies the byte string `link` names into `out` (replacing its contents): a
    /// validated read, line by line, retried once after invalidating the string's lines.
    /// [`Fetch::Stale`] then means the link itself is stale.
    ///
    /// ```
    /// use bi_core::runtime::{Fetch, Link, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_bytes(&[1, 2, 3]).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// let mut out = vec![9; 10];
    /// assert_eq!(g.read_bytes(link, &mut out).unwrap(), Fetch::Value(()));
    /// assert_eq!(out, [1, 2, 3]);
    /// assert_eq!(g.read_bytes(Link::null(), &mut out).unwrap(), Fetch::Null);
    /// ```
    pub fn read_bytes(&self, link: Link<Bytes>, out: &mut Vec<u8>) -> Result<Fetch<()>, BiError> {
        self.twice(link, |view, objects| {
            out.clear();
            if let Some(read) = one_line(view, objects, link)? {
                return Ok(read.map(|w| out.extend_from_slice(bytes_of(&w))));
            }
            Ok(visit_bytes(view, objects, link, |_, b| {
                out.extend_from_slice(b);
                true
            })?
            .map(|_| ()))
        })
    }

    /// How `probe` orders against the byte string `link` names (`probe.cmp(stored)`),
    /// read line by line up to the first difference and never copied out; retried once
    /// like [`read_bytes`](Self::read_bytes).
    ///
    /// ```
    /// use bi_core::runtime::{Fetch, testing::Setup};
    /// use std::cmp::Ordering;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_bytes(b"middle").unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// assert_eq!(g.compare_bytes(link, b"mid").unwrap(), Fetch::Value(Ordering::Less));
    /// assert_eq!(g.compare_bytes(link, b"middle").unwrap(), Fetch::Value(Ordering::Equal));
    /// assert_eq!(g.compare_bytes(link, b"z").unwrap(), Fetch::Value(Ordering::Greater));
    /// ```
    #[inline]
    pub fn compare_bytes(
        &self,
        link: Link<Bytes>,
        probe: &[u8],
    ) -> Result<Fetch<Ordering>, BiError> {
        self.twice(link, |view, objects| compare(view, objects, link, probe))
    }

    /// Runs `attempt` through the cache; if it finds a stale copy, the guard's one
    /// read-again step ([`validated`](BiGuard::validated)) drops the string's lines as
    /// memory has them now ([`string_lines`](Self::string_lines)) and runs it once more.
    #[inline(always)]
    fn twice<R>(
        &self,
        link: Link<Bytes>,
        mut attempt: impl FnMut(&V, Objects) -> Result<Fetch<R>, BiError>,
    ) -> Result<Fetch<R>, BiError> {
        let inner = self.inner();
        let objects = inner.objects();
        let first = attempt(&inner.view, objects)?;
        self.validated(
            first,
            || attempt(&inner.view, objects),
            || self.string_lines(link),
        )
    }

    /// The byte range of the string at `link` as memory has it now, for the read again
    /// after a stale copy: its line 0 is dropped and fenced first, since the length that
    /// says how many lines follow must come from memory, not from the stale copy.
    #[cold]
    #[inline(never)]
    fn string_lines(&self, link: Link<Bytes>) -> Result<(usize, usize), BiError> {
        let inner = self.inner();
        let (heap, line) = (inner.layout.heap(), inner.line);
        let at = link.offset();
        check_in(heap, at, line, "heap")?;
        inner.view.invalidate(at, line)?;
        inner.view.fence();
        let len = inner.view.load_u64(at + STAMP_BYTES)?;
        let span = usize::try_from(len)
            .ok()
            .and_then(|n| shape_of(n, line).ok())
            .map_or(line, |s| s.bytes())
            .min(heap.end().saturating_sub(at));
        Ok((at, span))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::testing::Setup;

    #[test]
    fn lengths_around_line_boundaries_round_trip() {
        let s = Setup::new(2, 3);
        let mut w = s.writer(0);
        let r = s.nodes[1].reader().unwrap();
        // Under Miri every byte is an emulated access and each length costs some 20 s:
        // there, the lengths either side of the first line's end and of the second's.
        let lengths: &[usize] = if cfg!(miri) {
            &[0, 48, 49, 104, 105]
        } else {
            &[0, 1, 7, 8, 47, 48, 49, 55, 56, 57, 104, 105, 1000, 70_000]
        };
        for &len in lengths {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            let link = w.alloc_bytes(&bytes).unwrap();
            w.publish_bytes(s.slot(0), link).unwrap();
            assert_eq!(w.read_own_bytes(link).unwrap(), bytes);
            let g = r.enter();
            let mut out = Vec::new();
            assert_eq!(g.read_bytes(link, &mut out).unwrap(), Fetch::Value(()));
            assert_eq!(out, bytes, "len {len}");
            assert_eq!(
                g.compare_bytes(link, &bytes).unwrap(),
                Fetch::Value(Ordering::Equal)
            );
            let mut longer = bytes.clone();
            longer.push(0);
            assert_eq!(
                g.compare_bytes(link, &longer).unwrap(),
                Fetch::Value(Ordering::Greater)
            );
            if let Some((last, head)) = bytes.split_last() {
                assert_eq!(
                    g.compare_bytes(link, head).unwrap(),
                    Fetch::Value(Ordering::Less)
                );
                let mut bigger = head.to_vec();
                bigger.push(last.wrapping_add(1));
                let want = if *last == u8::MAX {
                    Ordering::Less
                } else {
                    Ordering::Greater
                };
                assert_eq!(g.compare_bytes(link, &bigger).unwrap(), Fetch::Value(want));
            }
        }
    }

    /// A string of up to 48 bytes is read in one pass over its line, as a one-line
    /// object is (the emulator's count of loads is the same for 1 byte and for 48), a
    /// longer one piece by piece; a null link is no string.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn a_string_that_fits_one_line_is_read_in_one_pass() {
        let s = Setup::new(2, 0);
        let mut w = s.writer(0);
        let r = s.nodes[1].reader().unwrap();
        let mut loads_to_read = |len: usize| {
            let link = w.alloc_bytes(&vec![7u8; len]).unwrap();
            w.publish_bytes(s.slot(0), link).unwrap();
            let g = r.enter();
            let mut out = Vec::new();
            assert_eq!(g.read_bytes(link, &mut out).unwrap(), Fetch::Value(()));
            let before = s.emu.stats(1).loads;
            assert_eq!(g.read_bytes(link, &mut out).unwrap(), Fetch::Value(()));
            assert_eq!(out, vec![7u8; len]);
            s.emu.stats(1).loads - before
        };
        let short = loads_to_read(1);
        assert_eq!(loads_to_read(48), short);
        assert!(loads_to_read(49) > short);
        let g = r.enter();
        let mut out = vec![1];
        assert_eq!(g.read_bytes(Link::null(), &mut out).unwrap(), Fetch::Null);
    }

    /// With lines of 32 bytes (a string's first line holds 16 of its bytes) and of 128,
    /// strings of every length around the line ends read back whole.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn strings_round_trip_on_lines_of_32_and_128_bytes() {
        use crate::region::RegionConfig;
        use crate::runtime::RuntimeConfig;
        for line in [32, 128] {
            let region = RegionConfig::new(1 << 18)
                .with_nodes(2)
                .with_line_size(line);
            let s = Setup::with(region, |c| c.seed(3), RuntimeConfig::default());
            let mut w = s.writer(0);
            let r = s.nodes[1].reader().unwrap();
            for len in [0, 1, 15, 16, 17, 40, 48, 49, 56, 57, 112, 120, 121, 300] {
                let bytes: Vec<u8> = (0..len).map(|i| (i * 3 + len) as u8).collect();
                let link = w.alloc_bytes(&bytes).unwrap();
                w.publish_bytes(s.slot(0), link).unwrap();
                let g = r.enter();
                let mut out = Vec::new();
                assert_eq!(g.read_bytes(link, &mut out).unwrap(), Fetch::Value(()));
                assert_eq!(out, bytes, "{len} bytes on {line}-byte lines");
            }
        }
    }

    /// A one-line string retired while a reader is between the two reads of its stamp
    /// (the reader's copy of the line evicted in between, so the second read sees
    /// memory) is read as stale, not as the words read in between.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn a_string_retired_between_the_reads_of_its_stamp_is_stale() {
        use crate::mem::{Access, Observed};
        use crate::primitive::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
        use crate::runtime::object::Stamp;
        use crate::runtime::{EmulatedClock, NodeRuntime, RuntimeConfig};
        use std::sync::Arc;
        let mut s = Setup::new(3, 0);
        let mut w = s.writer(0);
        let link = w.alloc_bytes(b"a short string").unwrap();
        w.publish_bytes(s.slot(0), link).unwrap();
        let at = link.offset();
        drop(s.nodes.remove(1));
        let (host, retirer) = (s.emu.node(1), s.emu.node(2));
        // 0: not yet; 1: armed; 2: done.
        let state = Arc::new(AtomicUsize::new(0));
        let armed = state.clone();
        let evict = host.clone();
        let view = Observed::new(host.clone(), move |a| {
            if a == Access::Load(at + 8)
                && armed
                    .compare_exchange(1, 2, AtomicOrdering::SeqCst, AtomicOrdering::SeqCst)
                    .is_ok()
            {
                let stamp: u64 = retirer.load(at).unwrap();
                retirer
                    .store(at, &Stamp::from_raw(stamp).freed().raw())
                    .unwrap();
                retirer.writeback(at, 64).unwrap();
                retirer.fence();
                evict.evict(at).unwrap();
            }
            Ok(())
        });
        let layout = *s.region.layout();
        let clock = Arc::new(EmulatedClock::new(host));
        let rt = NodeRuntime::new(view, layout, 1, RuntimeConfig::default(), clock).unwrap();
        let r = rt.reader().unwrap();
        let g = r.enter();
        let mut out = Vec::new();
        assert_eq!(g.read_bytes(link, &mut out).unwrap(), Fetch::Value(()));
        state.store(1, AtomicOrdering::SeqCst);
        assert_eq!(g.read_bytes(link, &mut out).unwrap(), Fetch::Stale);
        assert_eq!(
            state.load(AtomicOrdering::SeqCst),
            2,
            "the retirement came between"
        );
    }

    #[test]
    fn a_reused_string_is_never_returned() {
        let s = Setup::new(2, 11);
        let mut w = s.writer(0);
        let first = w.alloc_bytes(&[1u8; 200]).unwrap();
        w.publish_bytes(s.slot(0), first).unwrap();
        let r = s.nodes[1].reader().unwrap();
        {
            let g = r.enter();
            let mut out = Vec::new();
            assert_eq!(g.read_bytes(first, &mut out).unwrap(), Fetch::Value(()));
        }
        // Node 1 holds the old lines; the block is retired, reclaimed and reused.
        w.publish_bytes(s.slot(0), Link::<Bytes>::null()).unwrap();
        w.try_retire_bytes(&[first]).unwrap();
        for _ in 0..3 {
            s.quiesce_all().unwrap();
            w.reclaim().unwrap();
        }
        let second = w.alloc_bytes(&[2u8; 200]).unwrap();
        assert_eq!(second.offset(), first.offset(), "the block was reused");
        w.publish_bytes(s.slot(0), second).unwrap();
        let g = r.enter();
        let mut out = Vec::new();
        // The old link names a dead incarnation: never the new bytes.
        assert_eq!(g.read_bytes(first, &mut out).unwrap(), Fetch::Stale);
        assert_eq!(g.read_bytes(second, &mut out).unwrap(), Fetch::Value(()));
        assert_eq!(out, [2u8; 200]);
    }

    /// A reader whose node holds lines of a string's block from before its reuse (a
    /// prefetcher brought them in after the node's pass) finds the new string stale
    /// there once, drops every line of it (its length read from memory) and reads it
    /// whole on the second attempt.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn old_lines_of_a_reused_block_are_dropped_and_the_string_read_again() {
        let s = Setup::new(2, 0);
        let mut w = s.writer(0);
        let first = w.alloc_bytes(&[1u8; 200]).unwrap();
        w.publish_bytes(s.slot(0), first).unwrap();
        w.publish_bytes(s.slot(0), Link::<Bytes>::null()).unwrap();
        w.try_retire_bytes(&[first]).unwrap();
        for _ in 0..3 {
            s.quiesce_all().unwrap();
            w.reclaim().unwrap();
        }
        assert_eq!(w.retired_blocks(), 0);
        // After node 1's last pass: its prefetcher brings the block's later lines in.
        let line = s.region.layout().line_size().get();
        for i in 1..4 {
            s.nodes[1]
                .view()
                .prefetch(first.offset() + i * line)
                .unwrap();
        }
        let second = w.alloc_bytes(&[2u8; 200]).unwrap();
        assert_eq!(second.offset(), first.offset(), "the block was reused");
        w.publish_bytes(s.slot(0), second).unwrap();
        let r = s.nodes[1].reader().unwrap();
        let before = s.nodes[1].mismatches();
        let g = r.enter();
        let mut out = Vec::new();
        assert_eq!(g.read_bytes(second, &mut out).unwrap(), Fetch::Value(()));
        assert_eq!(out, [2u8; 200]);
        assert_eq!(s.nodes[1].mismatches(), before + 1, "one stale attempt");
    }

    /// An order is decided by the first byte that differs, also when the probe is
    /// shorter than the stored string's first piece; a probe that ends first is less.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn a_short_probe_is_ordered_against_a_long_string_by_its_bytes() {
        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let long = w.alloc_bytes(&[b'm'; 100]).unwrap();
        let r = s.nodes[0].reader().unwrap();
        let g = r.enter();
        let order = |probe: &[u8]| g.compare_bytes(long, probe).unwrap();
        assert_eq!(order(b"z"), Fetch::Value(Ordering::Greater));
        assert_eq!(order(b"a"), Fetch::Value(Ordering::Less));
        assert_eq!(order(b"mm"), Fetch::Value(Ordering::Less));
        assert_eq!(order(b""), Fetch::Value(Ordering::Less));
        assert_eq!(order(&[b'm'; 101]), Fetch::Value(Ordering::Greater));
    }

    /// What a writer's adoption takes for a live string is its lines, stamps included;
    /// a string discarded before publication gives its memory back at once.
    #[test]
    fn a_strings_lines_are_what_it_occupies_and_a_discard_frees_them() {
        use crate::heap::Heap;
        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let line = s.region.layout().line_size().get();
        let short = w.alloc_bytes(b"short").unwrap();
        let long = w.alloc_bytes(&[0; 100]).unwrap();
        assert_eq!(w.string_bytes(short).unwrap(), line);
        assert_eq!(w.string_bytes(long).unwrap(), 2 * line);
        let live = w.heap().stats().live;
        w.discard_bytes(long).unwrap();
        assert!(w.heap().stats().live <= live - 2 * line);
    }

    #[test]
    fn a_link_of_another_type_is_not_a_string() {
        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let other = w.alloc_sealed([u64::MAX; 3]).unwrap();
        let as_bytes = Link::<Bytes>::new(other.offset(), other.generation());
        let r = s.nodes[0].reader().unwrap();
        let g = r.enter();
        let mut out = Vec::new();
        assert_eq!(g.read_bytes(as_bytes, &mut out).unwrap(), Fetch::Stale);
        assert!(w.read_own_bytes(as_bytes).is_err());
    }
}
