//! The read side: reader records, guards and validated copies.
//!
//! A [`Reader`] owns one record (one line) in its node's part of the reader table, whose
//! first word is its state: `(enter_tick << 1) | 1` inside a section, 0 outside. The enter
//! tick doubles as the reader's heartbeat for the reader lease: only a reader that stays
//! inside one section too long can hold reclamation back. Only the reader's own thread
//! writes the record, and only into its node's cache: the
//! node's quiescence pass reads it through the same (node-coherent) cache. Nothing on the
//! read path writes back, invalidates or fences (except the documented
//! [`ReaderOrdering::Fence`](super::ReaderOrdering::Fence) fallback), so a read section
//! costs a clock load, two stores and two compiler fences.

use super::object::{Link, Mismatch, Shape, read_object};
use super::{BiError, NodeInner};
use crate::mem::MemView;
use crate::primitive::sync::atomic::AtomicU64;
use bytemuck::Pod;
use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{Ordering, compiler_fence, fence};

/// A registered reader of one node: one per thread (`!Sync`).
///
/// Obtained from [`NodeRuntime::reader`](super::NodeRuntime::reader); dropping it frees
/// its record for another thread.
///
/// ```
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 1);
/// let reader = s.nodes[1].reader().unwrap();
/// let guard = reader.enter();
/// assert!(guard.load::<u64>(s.slot(0)).unwrap().is_none()); // nothing published yet
/// ```
pub struct Reader<V: MemView> {
    pub(crate) inner: Arc<NodeInner<V>>,
    /// Copies of what `enter` and `exit` touch, one pointer away instead of two.
    view: V,
    coarse: Option<Arc<AtomicU64>>,
    fence_on_enter: bool,
    pub(crate) index: usize,
    pub(crate) record: usize,
    depth: Cell<u32>,
    _not_sync: PhantomData<Cell<()>>,
}

impl<V: MemView> Reader<V> {
    pub(crate) fn new(inner: Arc<NodeInner<V>>, index: usize, record: usize) -> Reader<V> {
        Reader {
            view: inner.view.clone(),
            coarse: inner.clock.coarse_word(),
            fence_on_enter: inner.fence_on_enter,
            inner,
            index,
            record,
            depth: Cell::new(0),
            _not_sync: PhantomData,
        }
    }

    /// This reader's index within its node.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Enters a read section; it lasts until the returned guard (and every guard nested
    /// inside it) is dropped.
    ///
    /// Nested `enter` calls only count: the section's enter tick is the outermost one, so
    /// a nested guard protects nothing the outer one does not already protect, and a long
    /// chain of nested sections is one long section for the reader lease.
    #[inline]
    pub fn enter(&self) -> BiGuard<'_, V> {
        let d = self.depth.get();
        if d == 0 {
            let t = match &self.coarse {
                // Acquire, as in `TickClock::now`.
                Some(word) => word.load(Ordering::Acquire),
                None => self.inner.clock.now(),
            };
            let view = &self.view;
            // Errors are impossible here: the record offset was checked at registration.
            let _ = view.store_u64(self.record, (t << 1) | 1);
            if self.fence_on_enter {
                fence(Ordering::SeqCst);
            } else {
                compiler_fence(Ordering::SeqCst);
            }
        }
        self.depth.set(d + 1);
        BiGuard {
            reader: self,
            _not_send: PhantomData,
        }
    }

    /// Whether a section is open.
    pub fn is_active(&self) -> bool {
        self.depth.get() > 0
    }

    fn exit(&self) {
        let d = self.depth.get();
        self.depth.set(d.saturating_sub(1));
        if d == 1 {
            // Every load of the section must complete before the record says "out". With
            // membarrier (or the emulator's lock) the pass's barrier provides that, so a
            // compiler fence suffices (as in liburcu's memb flavour); the fence fallback
            // needs a release fence (free on x86).
            if self.fence_on_enter {
                fence(Ordering::Release);
            } else {
                compiler_fence(Ordering::SeqCst);
            }
            let view = &self.view;
            let _ = view.store_u64(self.record, 0);
        }
    }
}

impl<V: MemView> Drop for Reader<V> {
    fn drop(&mut self) {
        let _ = self.inner.view.store_u64(self.record, 0);
        self.inner.release_reader(self.index);
    }
}

/// An open read section. Values read through it ([`Shared`]) cannot outlive it.
pub struct BiGuard<'r, V: MemView> {
    reader: &'r Reader<V>,
    _not_send: PhantomData<*const ()>,
}

impl<V: MemView> Drop for BiGuard<'_, V> {
    fn drop(&mut self) {
        self.reader.exit();
    }
}

/// A validated copy of a shared object, tied to the guard it was read under.
pub struct Shared<'g, T> {
    value: T,
    link: Link<T>,
    _guard: PhantomData<&'g ()>,
}

impl<T> Shared<'_, T> {
    /// The link this object was reached through.
    pub fn link(&self) -> Link<T> {
        self.link
    }
}

impl<T> Deref for Shared<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Shared<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("value", &self.value)
            .field("link", &self.link)
            .finish()
    }
}

impl<'r, V: MemView> BiGuard<'r, V> {
    pub(super) fn view(&self) -> &V {
        &self.reader.inner.view
    }

    pub(super) fn inner(&self) -> &NodeInner<V> {
        &self.reader.inner
    }

    /// Reads the link stored in the `u64` slot at `slot` and the object it names.
    ///
    /// `Ok(None)` for a null link. When the object does not validate even after
    /// invalidating its lines, the link itself is stale; `load` then retries once from a
    /// freshly fetched slot ([`load_fresh`](Self::load_fresh)) and reports
    /// [`BiError::StaleLink`] if that fails too.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 1);
    /// let mut w = s.writer(0);
    /// let b = w.alloc(41u64).unwrap();
    /// w.publish(s.slot(0), b).unwrap();
    /// s.nodes[1].quiesce().unwrap();
    /// let r = s.nodes[1].reader().unwrap();
    /// let g = r.enter();
    /// assert_eq!(*g.load::<u64>(s.slot(0)).unwrap().unwrap(), 41);
    /// ```
    #[inline]
    pub fn load<T: Pod>(&self, slot: usize) -> Result<Option<Shared<'_, T>>, BiError> {
        let link: Link<T> = Link::from_raw(self.slot_word(slot)?);
        match self.resolve(link)? {
            Ok(v) => Ok(v),
            Err(Mismatch::Stale) => self.load_fresh(slot),
        }
    }

    /// Like [`load`](Self::load), but first invalidates the slot's line and fences (the
    /// lazy-invalidation path for a resolution failure).
    pub fn load_fresh<T: Pod>(&self, slot: usize) -> Result<Option<Shared<'_, T>>, BiError> {
        let view = self.view();
        view.invalidate(slot, 8)?;
        view.fence();
        let link: Link<T> = Link::from_raw(self.slot_word(slot)?);
        match self.resolve(link)? {
            Ok(v) => Ok(v),
            Err(Mismatch::Stale) => Err(BiError::StaleLink {
                offset: link.offset(),
            }),
        }
    }

    /// Reads the object a link found inside another object names. `Ok(None)` for null;
    /// [`BiError::StaleLink`] when it does not validate after one invalidation.
    #[inline]
    pub fn follow<T: Pod>(&self, link: Link<T>) -> Result<Option<Shared<'_, T>>, BiError> {
        match self.resolve(link)? {
            Ok(v) => Ok(v),
            Err(Mismatch::Stale) => Err(BiError::StaleLink {
                offset: link.offset(),
            }),
        }
    }

    /// Invalidates the lines holding each of `offsets` (one word each) and fences once:
    /// for a caller that found a path stale and wants to walk it again.
    pub fn invalidate_path(&self, offsets: &[usize]) -> Result<(), BiError> {
        let view = self.view();
        for &o in offsets {
            view.invalidate(o, 8)?;
        }
        view.fence();
        Ok(())
    }

    pub(super) fn slot_word(&self, slot: usize) -> Result<u64, BiError> {
        if !slot.is_multiple_of(8) {
            return Err(BiError::OutOfSection {
                offset: slot,
                section: "8-byte aligned slot",
            });
        }
        Ok(self.view().load_u64(slot)?)
    }

    /// Reads and validates; on a mismatch invalidates the object's lines, fences and reads
    /// once more. The hit path has no cache operation.
    #[allow(clippy::type_complexity)]
    #[inline(always)]
    pub(super) fn resolve<T: Pod>(
        &self,
        link: Link<T>,
    ) -> Result<Result<Option<Shared<'_, T>>, Mismatch>, BiError> {
        if link.is_null() {
            return Ok(Ok(None));
        }
        let inner = &self.reader.inner;
        let shape = Shape::new(size_of::<T>(), inner.line)?;
        let heap = inner.layout.heap();
        let view = self.view();
        let mut r = read_object(view, heap, link, &shape)?;
        if r.is_err() {
            inner.stats.mismatches.fetch_add(1, Ordering::Relaxed);
            view.invalidate(link.offset(), shape.bytes())?;
            view.fence();
            r = read_object(view, heap, link, &shape)?;
        }
        Ok(r.map(|value| {
            Some(Shared {
                value,
                link,
                _guard: PhantomData,
            })
        }))
    }
}
