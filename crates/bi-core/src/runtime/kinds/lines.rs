//! Line arrays: objects whose lines are small records, each rewritten in place by its
//! writer, one version at a time.
//!
//! # Why
//!
//! Copy-on-write costs a reader one more line per lookup whenever the record it wants
//! lives behind a link. A hash table whose buckets are whole lines holding their keys and
//! values (as CLHT's are) answers a lookup from the one line the hash names, but only if
//! a bucket can change without being copied. A line array makes that safe: the array is
//! allocated, published and retired like any object, and between those, its writer
//! rewrites single lines in place.
//!
//! # Layout
//!
//! `n` lines, each the usual 8-byte [`Stamp`] followed by one record `T` of at most one
//! line's payload (56 bytes with 64-byte lines). Record `i` is line `i`;
//! [`BiGuard::line`] names it with a `Link<T>` that carries the array's generation, so
//! the ordinary validated read ([`BiGuard::fetch_with`]) reads it.
//!
//! # Versions
//!
//! A rewrite gives the line the next version of its stamp ([`Stamp::next_version`]):
//! the generation advances above the bits a link carries, so the array's links keep
//! matching while no older copy of the line shows the new stamp. The line is written in
//! the order of every object write, stamp := [`Stamp::INVALID`], record, stamp := the new
//! version, so memory only ever holds the old version whole, a line whose stamp matches
//! nothing, or the new version whole. A reader that finds the same matching stamp before
//! and after copying the record copied one version whole, even if its copy of the line
//! was dropped and refilled meanwhile (the refill shows another version).
//!
//! # What readers see, and when
//!
//! A reader may hold an old version of a line until its node's next pass: every rewrite
//! is written back, fenced and logged in the modified ring, exactly like a slot store, so
//! the pass invalidates the line, and a reader that must see the latest version (a
//! lookup that missed) invalidates the line itself and fences before reading
//! ([`BiGuard::fetch_via`] with [`Via::Fresh`]). A record that
//! links to new objects is rewritten only after they were written back and fenced (the
//! rewrite fences first when sealed objects wait).
//!
//! The grace argument is unchanged: rewriting a line never reuses memory, and the array
//! itself is retired (FREED mark on line 0, freed ring) only after the slot that held it
//! was republished; the block is reused only after two passes of every node, with a
//! generation above every version any of its lines ever had.
//!
//! ```
//! use bi_core::runtime::testing::Setup;
//! use bi_core::runtime::{Via, Fetch};
//!
//! let s = Setup::new(2, 7);
//! let mut w = s.writer(0);
//! let array = w.alloc_lines(&[[1u64, 2], [3, 4], [5, 6]]).unwrap();
//! w.publish_lines(s.slot(0), array).unwrap();
//! w.rewrite_lines(&[(array, 1, [30, 40])]).unwrap();
//!
//! let r = s.nodes[1].reader().unwrap();
//! let g = r.enter();
//! let line = g.line(array, 1).unwrap();
//! // Node 1 has not passed: read from memory, as a lookup that missed would.
//! let sum = g.fetch_via(Via::Fresh, line, |v| v[0] + v[1]).unwrap();
//! assert_eq!(sum, Fetch::Value(70));
//! ```

use crate::heap::Heap;
use crate::mem::MemView;
use crate::runtime::BiError;
use crate::runtime::lazy::Via;
use crate::runtime::object::{Link, Shape, Stamp, write_value};
use crate::runtime::reader::BiGuard;
use crate::runtime::writer::{RewriteScratch, Writer};
use bytemuck::Pod;

pub use crate::runtime::object::{Lines, MAX_LINES};

/// The link of record `i` of `array` for lines of `line` bytes (not checked against the
/// array's length; a read checks the line's stamp).
fn line_link<T>(array: Link<Lines<T>>, i: usize, line: usize) -> Result<Link<T>, BiError> {
    let at = i
        .checked_mul(line)
        .and_then(|o| o.checked_add(array.offset()))
        .filter(|&o| o < 1 << 48)
        .ok_or_else(|| BiError::OutOfSection {
            offset: i,
            section: "line array (index)",
        })?;
    Ok(Link::new(at, array.generation()))
}

impl<T> Link<Lines<T>> {
    /// The link of the array's first line (record 0): the array's own offset and
    /// generation, so a null array gives a null link. A record that links to another
    /// array (a hash chain's next overflow line) is followed with it.
    ///
    /// ```
    /// use bi_core::runtime::{Fetch, Link, lines::Lines, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[7u64, 8]).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// assert_eq!(a.first_line(), g.line(a, 0).unwrap());
    /// assert_eq!(g.fetch_with(a.first_line(), |v| *v).unwrap(), Fetch::Value(7));
    /// assert!(Link::<Lines<u64>>::null().first_line().is_null());
    /// ```
    #[inline(always)]
    pub fn first_line(self) -> Link<T> {
        Link::new(self.offset(), self.generation())
    }
}

impl<V: MemView, H: Heap> Writer<V, H> {
    /// Record `i` of a live array this writer allocated, read back from this node's cache
    /// ([`read_own`](Self::read_own)): a writer needs no private copy of its lines.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[10u64, 20, 30]).unwrap();
    /// assert_eq!(w.read_own_line(a, 2).unwrap(), 30);
    /// w.rewrite_lines(&[(a, 2, 31)]).unwrap();
    /// assert_eq!(w.read_own_line(a, 2).unwrap(), 31);
    /// ```
    #[inline]
    pub fn read_own_line<T: Pod>(&self, array: Link<Lines<T>>, i: usize) -> Result<T, BiError> {
        self.read_own(line_link(array, i, self.inner.line)?)
    }

    /// Asks for record `i` of a live array this writer allocated (a software prefetch):
    /// a batch of writes asks for the lines of its next keys while it works on this one,
    /// so that their trips to memory overlap. A hint only: nothing is read or checked.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[10u64, 20, 30]).unwrap();
    /// w.prefetch_line(a, 2);
    /// w.prefetch_line(a, 1 << 60); // out of any section: ignored
    /// assert_eq!(w.read_own_line(a, 2).unwrap(), 30);
    /// ```
    #[inline(always)]
    pub fn prefetch_line<T: Pod>(&self, array: Link<Lines<T>>, i: usize) {
        if let Ok(link) = line_link(array, i, self.inner.line) {
            let _ = self.inner.view.prefetch(link.offset());
        }
    }

    /// Allocates a line array holding `records` (one per line), immutable from now on
    /// like a [sealed](Writer::seal) object but written back at once (where `seal`
    /// leaves that to the next publication); no fence yet (the next publication or
    /// rewrite fences once). Publish it with
    /// [`publish_lines`](Self::publish_lines).
    ///
    /// [`BiError::TooLarge`] when a `T` does not fit one line's payload, or for no
    /// records or more than [`MAX_LINES`].
    ///
    /// ```
    /// use bi_core::runtime::{BiError, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[[0u64; 7]; 4]).unwrap(); // 56 bytes: one 64-byte line each
    /// assert_eq!(w.lines_len(a).unwrap(), 4);
    /// assert!(matches!(w.alloc_lines(&[[0u64; 8]]), Err(BiError::TooLarge { .. })));
    /// assert!(w.alloc_lines::<u64>(&[]).is_err());
    /// ```
    pub fn alloc_lines<T: Pod>(&mut self, records: &[T]) -> Result<Link<Lines<T>>, BiError> {
        self.alloc_lines_with(records, true)
    }

    /// Lines of a live array this writer allocated (the block's, at least as many as were
    /// allocated).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[1u32, 2, 3]).unwrap();
    /// assert!(w.lines_len(a).unwrap() >= 3);
    /// ```
    pub fn lines_len<T>(&self, array: Link<Lines<T>>) -> Result<usize, BiError> {
        Ok(self.own_block(array)?.0 / self.inner.line)
    }

    /// Rewrites lines of live arrays this writer allocated, in place, as one batch: each
    /// line gets its next version (see the [module docs](self)); then one write-back per
    /// line, **one** fence and one append of the lines to the modified ring. A line named
    /// twice gets the last record given for it.
    ///
    /// Everything is checked before anything is written: on an error nothing changed.
    /// More lines than the modified ring holds is [`BiError::LogFull`]: split the batch
    /// into pieces of at most [`ring_capacity`](Self::ring_capacity) lines.
    /// Without waiting for ring space.
    pub(crate) fn try_rewrite_lines<T: Pod>(
        &mut self,
        updates: &[(Link<Lines<T>>, usize, T)],
    ) -> Result<(), BiError> {
        if updates.is_empty() {
            return Ok(());
        }
        let line = self.inner.line;
        let one = Shape::new(size_of::<T>(), line)?;
        if one.lines != 1 {
            return Err(BiError::TooLarge {
                bytes: size_of::<T>(),
            });
        }
        self.open_journal()?;
        // Taken out for the call, put back to keep its allocations.
        let mut scratch = std::mem::take(&mut self.rewrite);
        let done = self.rewrite_with(updates, one, &mut scratch);
        self.rewrite = scratch;
        done
    }

    /// [`try_rewrite_lines`](Self::try_rewrite_lines) of records of shape `one`, with
    /// `scratch`'s vectors for its lists.
    fn rewrite_with<T: Pod>(
        &mut self,
        updates: &[(Link<Lines<T>>, usize, T)],
        one: Shape,
        scratch: &mut RewriteScratch,
    ) -> Result<(), BiError> {
        let line = self.inner.line;
        // (line offset, update index), every index checked; then, per line, the last
        // update given for it (a stable sort keeps the updates of a line in order).
        let RewriteScratch { order, last, lines } = scratch;
        order.clear();
        last.clear();
        lines.clear();
        let mut known: Option<(u64, usize)> = None;
        for (k, (array, i, _)) in updates.iter().enumerate() {
            let len = match known {
                Some((raw, len)) if raw == array.raw() => len,
                _ => self.lines_len(*array)?,
            };
            known = Some((array.raw(), len));
            if *i >= len {
                return Err(BiError::OutOfSection {
                    offset: *i,
                    section: "line array (index)",
                });
            }
            order.push((array.offset() + i * line, k));
        }
        order.sort_by_key(|&(at, _)| at);
        for (n, &(at, k)) in order.iter().enumerate() {
            if order.get(n + 1).is_some_and(|&(next, _)| next == at) {
                continue;
            }
            let now = Stamp::from_raw(self.inner.view.load_u64(at)?);
            let stamp = now
                .next_version()
                .ok_or_else(|| BiError::VersionsExhausted { offset: at })?;
            last.push((at, k, stamp));
        }
        lines.extend(last.iter().map(|&(at, _, _)| at));
        Self::reserve(&self.inner, &mut self.modified, lines.len())?;
        self.settle()?;
        self.start_publish_span();
        let view = &self.inner.view;
        for &(at, k, stamp) in last.iter() {
            let bytes = bytemuck::bytes_of(&updates[k].2);
            self.journal_line(at, stamp, bytes)?;
            write_value(
                view,
                at,
                &one,
                stamp,
                &updates[k].2,
                self.inner.config.faults,
            )?;
            view.writeback(at, line)?;
        }
        self.fence_and_log_lines(lines)
    }

    /// Rewrites lines of live arrays this writer allocated, in place, as one batch: each
    /// line gets its next version (see the [module docs](self)); then one write-back per
    /// line, **one** fence and one append of the lines to the modified ring, waiting for
    /// ring space if the ring is full. A line named twice gets the last record given for
    /// it.
    ///
    /// Everything is checked before anything is written: on an error nothing changed.
    /// More lines than the modified ring holds is [`BiError::LogFull`]: split the batch
    /// into pieces of at most [`ring_capacity`](Self::ring_capacity) lines.
    ///
    /// ```
    /// use bi_core::runtime::{Via, Fetch, testing::Setup};
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[1u64, 2]).unwrap();
    /// w.publish_lines(s.slot(0), a).unwrap();
    /// w.rewrite_lines(&[(a, 1, 20)]).unwrap();
    /// s.quiesce_all().unwrap();
    /// let r = s.nodes[1].reader().unwrap();
    /// let g = r.enter();
    /// let line = g.line(a, 1).unwrap();
    /// assert_eq!(g.fetch_via(Via::Cached, line, |v| *v).unwrap(), Fetch::Value(20));
    /// ```
    pub fn rewrite_lines<T: Pod>(
        &mut self,
        updates: &[(Link<Lines<T>>, usize, T)],
    ) -> Result<(), BiError> {
        self.wait(|w| w.try_rewrite_lines(updates))
    }

    /// Publishes `array` into the `u64` slot at `slot`, with the protocol of
    /// [`publish_link`](Self::publish_link). Returns the link that was there; retire the
    /// old array with [`try_retire_lines`](Self::try_retire_lines).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let first = w.alloc_lines(&[1u64]).unwrap();
    /// assert!(w.publish_lines(s.slot(0), first).unwrap().is_null());
    /// let second = w.alloc_lines(&[1u64, 2]).unwrap();
    /// let old = w.publish_lines(s.slot(0), second).unwrap();
    /// assert_eq!(old, first);
    /// w.try_retire_lines(&[old]).unwrap();
    /// ```
    pub fn publish_lines<T>(
        &mut self,
        slot: usize,
        array: Link<Lines<T>>,
    ) -> Result<Link<Lines<T>>, BiError> {
        self.wait(|w| Ok(Link::from_raw(w.try_publish_raw(slot, array.raw())?)))
    }

    /// Retires arrays (unpublish them first) like [`try_retire_all`](Self::try_retire_all):
    /// FREED mark, freed ring, reclaimed after a grace period. Without waiting for ring
    /// space.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[1u64, 2]).unwrap();
    /// w.try_retire_lines(&[a]).unwrap();
    /// assert_eq!(w.retired_blocks(), 1);
    /// assert!(w.read_own_line(a, 0).is_err()); // FREED
    /// ```
    pub fn try_retire_lines<T>(&mut self, arrays: &[Link<Lines<T>>]) -> Result<(), BiError> {
        self.try_retire_links(arrays)
    }

    /// Gives back an array that never became reachable from a published slot or record.
    ///
    /// ```
    /// use bi_core::heap::Heap;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[1u64, 2, 3]).unwrap();
    /// w.discard_lines(a).unwrap();
    /// assert_eq!(w.heap().stats().live, 0);
    /// ```
    pub fn discard_lines<T>(&mut self, array: Link<Lines<T>>) -> Result<(), BiError> {
        self.discard_block(array)
    }

    /// The stamp line `i` of a live array this writer allocated carries now, from this
    /// node's cache: what every rewrite of the line advances
    /// ([`Stamp::next_version`]). A structure that keeps the sum of its lines' stamps
    /// somewhere readers find it lets them tell a whole version from a mix of two
    /// ([`BiGuard::fetch_stamped_via`]).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[1u64, 2]).unwrap();
    /// let before = w.line_stamp(a, 1).unwrap();
    /// w.rewrite_lines(&[(a, 1, 3)]).unwrap();
    /// assert_eq!(w.line_stamp(a, 1).unwrap(), before.next_version().unwrap());
    /// assert_eq!(w.line_stamp(a, 0).unwrap(), before); // line 0 was not rewritten
    /// assert!(w.line_stamp(a, 9).is_err());
    /// ```
    pub fn line_stamp<T>(&self, array: Link<Lines<T>>, i: usize) -> Result<Stamp, BiError> {
        if i >= self.lines_len(array)? {
            return Err(BiError::OutOfSection {
                offset: i,
                section: "line array (index)",
            });
        }
        let at = line_link(array, i, self.inner.line)?.offset();
        Ok(Stamp::from_raw(self.inner.view.load_u64(at)?))
    }
}

impl<V: MemView> BiGuard<'_, V> {
    /// The link of record `i` of `array`: read it with [`fetch_with`](Self::fetch_with)
    /// or [`fetch_via`](Self::fetch_via). The index is not checked against the array's
    /// length (a reader does not know it); the read checks that the line lies in the heap
    /// and carries the array's generation.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[1u64, 2]).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// let l = g.line(a, 1).unwrap();
    /// assert_eq!(l.offset(), a.offset() + s.region.layout().line_size().get());
    /// assert_eq!(*g.follow(l).unwrap().unwrap(), 2);
    /// ```
    #[inline(always)]
    pub fn line<T>(&self, array: Link<Lines<T>>, i: usize) -> Result<Link<T>, BiError> {
        line_link(array, i, self.inner().line)
    }

    /// Asks for the first line of the object `link` names to be brought into this
    /// node's cache, without waiting ([`MemView::prefetch`](crate::mem::MemView::prefetch)):
    /// a batch of lookups issues every line it will read before reading any. A null link,
    /// or one outside the heap, is ignored (the read that follows reports it).
    ///
    /// ```
    /// use bi_core::runtime::{Via, Fetch, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[1u64, 2]).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// let l = g.line(a, 1).unwrap();
    /// g.prefetch(l);
    /// assert_eq!(g.fetch_via(Via::Cached, l, |v| *v).unwrap(), Fetch::Value(2));
    /// ```
    #[inline(always)]
    pub fn prefetch<T>(&self, link: Link<T>) {
        if !link.is_null() {
            let _ = self.inner().view.prefetch(link.offset());
        }
    }

    /// [`fetch_with`](Self::fetch_with) through the cache ([`Via::Cached`]) or from
    /// memory ([`Via::Fresh`]: the object's lines are invalidated and fenced first, so
    /// an older version that still validates is not what is read).
    ///
    /// ```
    /// use bi_core::runtime::{Via, Fetch, testing::Setup};
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[1u64]).unwrap();
    /// s.quiesce_all().unwrap();
    /// let r = s.nodes[1].reader().unwrap();
    /// let g = r.enter();
    /// let l = g.line(a, 0).unwrap();
    /// assert_eq!(g.fetch_via(Via::Cached, l, |v| *v).unwrap(), Fetch::Value(1));
    /// w.rewrite_lines(&[(a, 0, 2)]).unwrap();
    /// assert_eq!(g.fetch_via(Via::Cached, l, |v| *v).unwrap(), Fetch::Value(1)); // cached
    /// assert_eq!(g.fetch_via(Via::Fresh, l, |v| *v).unwrap(), Fetch::Value(2));
    /// ```
    #[inline(always)]
    pub fn fetch_via<T: Pod, R>(
        &self,
        entry: Via,
        link: Link<T>,
        f: impl Fn(&T) -> R,
    ) -> Result<crate::runtime::Fetch<R>, BiError> {
        self.enter_via(entry, link)?;
        self.fetch_with(link, f)
    }

    /// [`fetch_via`](Self::fetch_via), returning the stamp the copy validated under
    /// beside `f`'s result. Two reads of a line that return one stamp read one version of
    /// it, and a rewritten line never shows an earlier stamp again: the ground of a
    /// snapshot read (read every line twice from memory; equal stamps mean memory held
    /// all of them at once).
    ///
    /// ```
    /// use bi_core::runtime::{Via, Fetch, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[5u64]).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// let l = g.line(a, 0).unwrap();
    /// let Fetch::Value((v, stamp)) = g.fetch_stamped_via(Via::Fresh, l, |v| *v).unwrap() else {
    ///     panic!("a live line")
    /// };
    /// assert_eq!((v, stamp), (5, w.line_stamp(a, 0).unwrap()));
    /// ```
    pub fn fetch_stamped_via<T: Pod, R>(
        &self,
        entry: Via,
        link: Link<T>,
        f: impl Fn(&T) -> R,
    ) -> Result<crate::runtime::Fetch<(R, Stamp)>, BiError> {
        self.enter_via(entry, link)?;
        let inner = self.inner();
        let objects = inner.objects();
        let read =
            || crate::runtime::object::fetch_stamped(&inner.view, objects, link, |v, s| (f(v), s));
        self.validated(read()?, read, || {
            crate::runtime::object::object_lines(link, inner.line)
        })
    }

    /// Drops this node's copies of the first `n` lines of `array` and fences: what is
    /// read of them next comes from memory as it is now or later.
    ///
    /// ```
    /// use bi_core::runtime::{Via, Fetch, testing::Setup};
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[1u64, 2]).unwrap();
    /// let r = s.nodes[1].reader().unwrap();
    /// let g = r.enter();
    /// let l = g.line(a, 1).unwrap();
    /// assert_eq!(g.fetch_via(Via::Cached, l, |v| *v).unwrap(), Fetch::Value(2));
    /// w.rewrite_lines(&[(a, 1, 20)]).unwrap();
    /// g.refresh_lines(a, 2).unwrap();
    /// assert_eq!(g.fetch_via(Via::Cached, l, |v| *v).unwrap(), Fetch::Value(20));
    /// ```
    pub fn refresh_lines<T>(&self, array: Link<Lines<T>>, n: usize) -> Result<(), BiError> {
        let inner = self.inner();
        let len = n
            .checked_mul(inner.line)
            .ok_or_else(|| BiError::OutOfSection {
                offset: n,
                section: "line array (index)",
            })?;
        crate::runtime::object::check_in(inner.layout.heap(), array.offset(), len, "heap")?;
        inner.view.invalidate(array.offset(), len)?;
        inner.view.fence();
        Ok(())
    }

    /// Drops this node's copies of the lines holding each of `offsets` (slots, or the
    /// first lines of objects) and fences once: what is read of them next comes from
    /// memory as it is now or later. Offsets outside the region are an error, nothing
    /// after them dropped.
    ///
    /// ```
    /// use bi_core::runtime::{Via, Fetch, testing::Setup};
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w = s.writer(0);
    /// let a = w.alloc_lines(&[1u64, 2]).unwrap();
    /// let r = s.nodes[1].reader().unwrap();
    /// let g = r.enter();
    /// let (l0, l1) = (g.line(a, 0).unwrap(), g.line(a, 1).unwrap());
    /// assert_eq!(g.fetch_via(Via::Cached, l1, |v| *v).unwrap(), Fetch::Value(2));
    /// w.rewrite_lines(&[(a, 1, 20)]).unwrap();
    /// g.drop_lines([l0.offset(), l1.offset()]).unwrap();
    /// assert_eq!(g.fetch_via(Via::Cached, l1, |v| *v).unwrap(), Fetch::Value(20));
    /// ```
    pub fn drop_lines(&self, offsets: impl IntoIterator<Item = usize>) -> Result<(), BiError> {
        let inner = self.inner();
        let dropped = offsets
            .into_iter()
            .try_for_each(|at| inner.view.invalidate(at, 1));
        inner.view.fence();
        Ok(dropped?)
    }

    /// With [`Via::Fresh`], drops this node's copy of the object `link` names and
    /// fences.
    #[inline(always)]
    fn enter_via<T>(&self, entry: Via, link: Link<T>) -> Result<(), BiError> {
        if let Via::Fresh = entry
            && !link.is_null()
        {
            let inner = self.inner();
            let (at, len) = crate::runtime::object::object_lines(link, inner.line)?;
            inner.view.invalidate(at, len)?;
            inner.view.fence();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Fetch;
    use crate::runtime::object::Stamp;
    use crate::runtime::testing::Setup;

    type Rec = [u64; 3];

    /// A reader's node keeps its copy of a line rewritten in place until its guard drops
    /// the line: by the array's first lines (`refresh_lines`) or by the lines' offsets
    /// (`drop_lines`); a range or an offset outside the heap or region is an error.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn a_guard_reads_a_rewritten_line_anew_once_it_drops_it() {
        use crate::runtime::Via;
        let s = Setup::new(2, 0);
        let mut w = s.writer(0);
        let a = w.alloc_lines(&[1u64, 2, 3]).unwrap();
        let r = s.nodes[1].reader().unwrap();
        let g = r.enter();
        let at = |i| g.line(a, i).unwrap();
        let cached = |i| g.fetch_via(Via::Cached, at(i), |v| *v).unwrap();
        assert_eq!((cached(1), cached(2)), (Fetch::Value(2), Fetch::Value(3)));
        w.rewrite_lines(&[(a, 1, 20), (a, 2, 30)]).unwrap();
        // Still the old copies: nothing dropped them.
        assert_eq!((cached(1), cached(2)), (Fetch::Value(2), Fetch::Value(3)));
        g.refresh_lines(a, 2).unwrap(); // lines 0 and 1 only
        assert_eq!((cached(1), cached(2)), (Fetch::Value(20), Fetch::Value(3)));
        g.drop_lines([at(2).offset()]).unwrap();
        assert_eq!(cached(2), Fetch::Value(30));
        assert!(g.refresh_lines(a, usize::MAX).is_err());
        assert!(g.refresh_lines(a, 1 << 30).is_err());
        assert!(g.drop_lines([usize::MAX - 8]).is_err());
    }

    fn read(
        g: &BiGuard<'_, crate::mem::EmulatedNode>,
        a: Link<Lines<Rec>>,
        i: usize,
        e: Via,
    ) -> Fetch<Rec> {
        g.fetch_via(e, g.line(a, i).unwrap(), |r| *r).unwrap()
    }

    /// Every index is checked against its own array's length before anything is
    /// written, also in a batch that names arrays of different lengths; a batch of
    /// distinct lines rewrites every one of them; a stamp is asked of lines that exist
    /// only; and no index leads past the links' offset width.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn indices_are_checked_against_their_own_array_and_a_batch_rewrites_every_line() {
        use crate::runtime::Via;
        let s = Setup::new(2, 0);
        let mut w = s.writer(0);
        let long = w.alloc_lines(&[1u64, 2, 3, 4, 5]).unwrap();
        let short = w.alloc_lines(&[6u64, 7]).unwrap();
        assert_eq!(
            (w.lines_len(long).unwrap(), w.lines_len(short).unwrap()),
            (5, 2)
        );
        // Index 3 exists in the first array only.
        assert!(matches!(
            w.try_rewrite_lines(&[(long, 3, 40), (short, 3, 99)]),
            Err(BiError::OutOfSection { .. })
        ));
        assert!(matches!(
            w.try_rewrite_lines(&[(short, 1, 70), (long, 1, 20), (short, 3, 99)]),
            Err(BiError::OutOfSection { .. })
        ));
        assert_eq!(w.read_own_line(long, 3).unwrap(), 4, "nothing changed");
        assert_eq!(w.read_own_line(short, 1).unwrap(), 7, "nothing changed");
        // One batch of distinct lines over both arrays: each gets its record.
        w.try_rewrite_lines(&[(long, 4, 50), (long, 0, 10), (short, 1, 70), (long, 2, 30)])
            .unwrap();
        let r = s.nodes[1].reader().unwrap();
        let g = r.enter();
        let fresh = |a, i| {
            g.fetch_via(Via::Fresh, g.line(a, i).unwrap(), |v| *v)
                .unwrap()
        };
        let long_now: Vec<_> = (0..5).map(|i| fresh(long, i)).collect();
        assert_eq!(long_now, [10, 2, 30, 4, 50].map(Fetch::Value));
        assert_eq!(
            (fresh(short, 0), fresh(short, 1)),
            (Fetch::Value(6), Fetch::Value(70))
        );
        // Stamps: of the last line, not of the one past it.
        assert!(w.line_stamp(short, 1).is_ok());
        assert!(matches!(
            w.line_stamp(short, 2),
            Err(BiError::OutOfSection { .. })
        ));
        // A line link is at most 2^48 - 1 bytes in: the next would wrap to offset 0.
        let line = s.region.layout().line_size().get();
        let last = ((1usize << 48) - long.offset()) / line - 1;
        assert_eq!(g.line(long, last).unwrap().offset(), (1 << 48) - line);
        assert!(matches!(
            g.line(long, last + 1),
            Err(BiError::OutOfSection { .. })
        ));
    }

    /// A prefetch, the writer's or a reader's, brings a line its node does not hold into
    /// the node's cache (the emulator counts it); a null link asks for nothing.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
    )]
    fn a_prefetch_brings_the_line_into_its_nodes_cache() {
        let s = Setup::new(2, 0);
        let mut w = s.writer(0);
        let a = w.alloc_lines(&[1u64, 2, 3]).unwrap();
        let prefetches = |node| s.emu.stats(node).prefetches;
        let line = s.region.layout().line_size().get();
        s.nodes[0].view().invalidate(a.offset(), 3 * line).unwrap();
        let before = prefetches(0); // the writer's allocations prefetch too
        w.prefetch_line(a, 2);
        assert_eq!(prefetches(0), before + 1);
        let r = s.nodes[1].reader().unwrap();
        let g = r.enter();
        g.prefetch(Link::<u64>::null());
        assert_eq!(prefetches(1), 0);
        g.prefetch(g.line(a, 1).unwrap());
        assert_eq!(prefetches(1), 1);
    }

    /// A discarded array's memory goes back to the heap at once (it was never published).
    #[test]
    fn a_discarded_array_gives_its_memory_back() {
        use crate::heap::Heap;
        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let a = w.alloc_lines(&[1u64, 2, 3]).unwrap();
        assert!(w.heap().stats().live >= 3 * 64);
        w.discard_lines(a).unwrap();
        assert_eq!(w.heap().stats().live, 0);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test, minutes interpreted: its object copies run in others"
    )]
    fn a_cached_old_version_lasts_until_a_pass_and_a_fresh_read_sees_the_new_one() {
        let s = Setup::new(2, 3);
        let mut w = s.writer(0);
        let a = w.alloc_lines(&[[1u64; 3], [2; 3]]).unwrap();
        w.publish_lines(s.slot(0), a).unwrap();
        s.quiesce_all().unwrap();
        let r = s.nodes[1].reader().unwrap();
        // Node 1 caches version 0 of line 1.
        assert_eq!(read(&r.enter(), a, 1, Via::Cached), Fetch::Value([2; 3]));
        w.rewrite_lines(&[(a, 1, [20; 3])]).unwrap();
        let g = r.enter();
        // The old version is whole and still matches the link: bounded staleness.
        assert_eq!(read(&g, a, 1, Via::Cached), Fetch::Value([2; 3]));
        assert_eq!(read(&g, a, 1, Via::Fresh), Fetch::Value([20; 3]));
        drop(g);
        // The rewrite was logged: after a pass, the cached read sees it too.
        w.rewrite_lines(&[(a, 0, [10; 3])]).unwrap();
        s.nodes[1].quiesce().unwrap();
        let g = r.enter();
        assert_eq!(read(&g, a, 0, Via::Cached), Fetch::Value([10; 3]));
        assert_eq!(read(&g, a, 1, Via::Cached), Fetch::Value([20; 3]));
    }

    #[test]
    fn every_rewrite_gets_a_new_stamp_that_still_matches_the_link() {
        let s = Setup::new(1, 1);
        let mut w = s.writer(0);
        let a = w.alloc_lines(&[[0u64; 3]]).unwrap();
        let view = s.nodes[0].view();
        let mut stamps = vec![view.load_u64(a.offset()).unwrap()];
        for v in 1..5u64 {
            // A line named twice gets its last record.
            w.rewrite_lines(&[(a, 0, [v; 3]), (a, 0, [v + 100; 3])])
                .unwrap();
            let st = view.load_u64(a.offset()).unwrap();
            assert!(Stamp::from_raw(st).matches(a.generation()));
            assert!(!stamps.contains(&st));
            stamps.push(st);
        }
        let r = s.nodes[0].reader().unwrap();
        assert_eq!(read(&r.enter(), a, 0, Via::Fresh), Fetch::Value([104; 3]));
    }

    #[test]
    fn bad_rewrites_are_typed_errors_and_change_nothing() {
        let s = Setup::new(2, 2);
        let mut w = s.writer(0);
        let a = w.alloc_lines(&[[7u64; 3]]).unwrap();
        let past = w.lines_len(a).unwrap();
        assert!(matches!(
            w.try_rewrite_lines(&[(a, 0, [8; 3]), (a, past, [9; 3])]),
            Err(BiError::OutOfSection { .. })
        ));
        let foreign: Link<Lines<Rec>> = Link::new(a.offset(), a.generation().next());
        assert!(matches!(
            w.try_rewrite_lines(&[(foreign, 0, [9; 3])]),
            Err(BiError::StaleLink { .. })
        ));
        assert!(matches!(
            w.alloc_lines::<Rec>(&[]),
            Err(BiError::TooLarge { .. })
        ));
        assert!(matches!(
            w.alloc_lines(&[[0u64; 8]]),
            Err(BiError::TooLarge { .. })
        ));
        let r = s.nodes[1].reader().unwrap();
        assert_eq!(read(&r.enter(), a, 0, Via::Fresh), Fetch::Value([7; 3]));
        // Exhausted versions are refused before anything is written.
        let top = Stamp::new(crate::runtime::Generation::MAX, false);
        assert_eq!(top.next_version(), None);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "a protocol test, minutes interpreted: its object copies run in others"
    )]
    fn a_retired_array_is_reused_under_a_generation_above_all_its_versions() {
        let s = Setup::new(2, 5);
        let mut w = s.writer(0);
        let a = w.alloc_lines(&[[1u64; 3], [2; 3]]).unwrap();
        w.publish_lines(s.slot(0), a).unwrap();
        for v in 0..3 {
            w.rewrite_lines(&[(a, 1, [v; 3])]).unwrap();
        }
        let r = s.nodes[1].reader().unwrap();
        assert_eq!(read(&r.enter(), a, 1, Via::Fresh), Fetch::Value([2; 3]));
        let view = s.nodes[0].view();
        let last = Stamp::from_raw(view.load_u64(a.offset() + 64).unwrap());
        let empty: Link<Lines<Rec>> = Link::null();
        w.publish_lines(s.slot(0), empty).unwrap();
        w.try_retire_lines(&[a]).unwrap();
        for _ in 0..3 {
            s.emu.advance(1_000);
            s.quiesce_all().unwrap();
            w.reclaim().unwrap();
        }
        assert_eq!(w.retired_blocks(), 0);
        let b = w.alloc_lines(&[[5u64; 3], [6; 3]]).unwrap();
        assert_eq!(b.offset(), a.offset(), "the bump heap reuses the block");
        let stamp = |i: usize| Stamp::from_raw(view.load_u64(a.offset() + 64 * i).unwrap());
        assert!(stamp(0).generation() > last.generation());
        assert_eq!(stamp(0), stamp(1));
        // The old link matches none of the new lines.
        let old = r.enter();
        assert_eq!(read(&old, a, 0, Via::Fresh), Fetch::Stale);
        assert_eq!(read(&old, a, 1, Via::Fresh), Fetch::Stale);
    }

    #[test]
    #[cfg_attr(miri, ignore = "writes 70,000 emulated lines")]
    fn an_array_longer_than_one_log_entry_is_retired_in_pieces() {
        use crate::region::RegionConfig;
        use crate::runtime::RuntimeConfig;
        let s = Setup::with(
            RegionConfig::new(16 << 20).with_nodes(1),
            |c| c.seed(1),
            RuntimeConfig::default(),
        );
        let mut w = s.writer(0);
        let n = crate::runtime::object::MAX_OBJECT_LINES + 5_000;
        let a = w.alloc_lines(&vec![[1u64]; n]).unwrap();
        w.publish_lines(s.slot(0), a).unwrap();
        w.publish_lines(s.slot(0), Link::<Lines<[u64; 1]>>::null())
            .unwrap();
        let before = w.ring_usage();
        w.try_retire_lines(&[a]).unwrap();
        let after = w.ring_usage();
        assert_eq!(
            after.1 - before.1,
            2,
            "two freed entries: {before:?} -> {after:?}"
        );
        for _ in 0..3 {
            s.emu.advance(1_000);
            s.quiesce_all().unwrap();
            w.reclaim().unwrap();
        }
        assert_eq!(w.retired_blocks(), 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "sleeps while another thread reads")]
    fn a_fresh_reader_waits_for_a_writer_caught_between_the_stores_of_a_rewrite() {
        use crate::runtime::Search;
        let s = Setup::new(2, 1);
        let mut w = s.writer(0);
        let a = w.alloc_lines(&[[1u64; 3]]).unwrap();
        w.publish_lines(s.slot(0), a).unwrap();
        let view = s.nodes[0].view();
        let stamp = view.load_u64(a.offset()).unwrap();
        let put = |raw: u64| {
            view.store_u64(a.offset(), raw).unwrap();
            view.writeback(a.offset(), 64).unwrap();
            view.fence();
        };
        // The writer stopped after the first store of a rewrite: memory holds INVALID.
        put(Stamp::INVALID.raw());
        std::thread::scope(|t| {
            t.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(30));
                put(stamp);
            });
            let r = s.nodes[1].reader().unwrap();
            let g = r.enter();
            let found = g.lazy(|e| {
                Ok::<_, BiError>(match g.fetch_via(e, g.line(a, 0)?, |x| *x)? {
                    Fetch::Value(v) => Search::Found(v),
                    _ => Search::Stale,
                })
            });
            assert_eq!(found.unwrap(), Some([1; 3]));
        });
    }
}

/// Examples of the crate-private items above, as tests.
#[cfg(test)]
mod private_examples {
    #[test]
    fn try_rewrite_lines_example() {
        use crate::runtime::testing::Setup;

        let s = Setup::new(1, 0);
        let mut w = s.writer(0);
        let a = w.alloc_lines(&[1u64, 2]).unwrap();
        assert!(w.try_rewrite_lines(&[(a, 0, 5), (a, 9, 6)]).is_err()); // line 9 does not exist
        assert_eq!(w.read_own_line(a, 0).unwrap(), 1); // nothing changed
        w.try_rewrite_lines(&[(a, 0, 5), (a, 0, 7)]).unwrap(); // the last record wins
        assert_eq!(w.read_own_line(a, 0).unwrap(), 7);
    }
}
