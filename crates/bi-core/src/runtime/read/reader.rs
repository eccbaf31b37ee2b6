//! The read side: reader records, guards and validated copies.
//!
//! A [`Reader`] owns one record (one line) in its node's part of the reader table, whose
//! first word is its [`ReaderState`]: the enter tick while inside a section, "outside"
//! otherwise. The enter tick doubles as the reader's heartbeat for the reader lease: only
//! a reader that stays inside one section too long can hold reclamation back. Only the
//! reader's own thread writes the record, and only into its node's cache: the node's
//! quiescence pass reads it through the same (node-coherent) cache. Nothing on the read
//! path writes back, invalidates or fences (except the documented
//! [`ReaderOrdering::Fence`](crate::runtime::ReaderOrdering::Fence) fallback), so a read section
//! costs what liburcu's memb flavour costs: enter loads the coarse clock word the reader
//! holds directly, stores its state and issues a compiler fence; exit issues a compiler
//! fence and stores "outside".
//!
//! Every validated read goes through one skeleton ([`BiGuard::validated`]): read; on a
//! stale copy, invalidate the lines, fence and read once more.

use crate::mem::MemView;
use crate::primitive::sync::atomic::AtomicU64;
use crate::primitive::sync::atomic::{Ordering, compiler_fence, fence};
use crate::runtime::object::{Fetch, Link, Objects, WordAligned, fetch_with, object_lines};
use crate::runtime::reader_state::ReaderState;
use crate::runtime::{BiError, Fault, NodeInner};
use bytemuck::Pod;
use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::Arc;

/// A registered reader of one node: one per thread (`!Sync`).
///
/// Obtained from [`NodeRuntime::reader`](crate::runtime::NodeRuntime::reader); dropping it frees
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
    /// What `enter` and `exit` touch, held here directly: the view, the node's coarse
    /// clock word and (where the view has one) the state word itself.
    view: V,
    coarse: Option<Arc<AtomicU64>>,
    state: Option<StateWord>,
    fence_on_enter: bool,
    pub(crate) index: usize,
    pub(crate) record: usize,
    /// Open sections (nested guards count; the outermost one enters and leaves).
    depth: Cell<u32>,
    _not_sync: PhantomData<Cell<()>>,
}

/// The reader's state word as the view's own atomic ([`MemView::direct_word`]).
struct StateWord(NonNull<AtomicU64>);

// SAFETY: the word is an atomic, which any thread may store to; the memory it lives in is
// kept alive by the `Reader`'s own clone of the view (see `Reader::new`), wherever the
// reader is moved.
unsafe impl Send for StateWord {}

impl<V: MemView> Reader<V> {
    pub(crate) fn new(inner: Arc<NodeInner<V>>, index: usize, record: usize) -> Reader<V> {
        let view = inner.view.clone();
        // The word lives in the shared memory `view` holds (not inside `view` itself), so
        // it stays put when the reader and its view move.
        let state = view
            .direct_word(record)
            .map(|w| StateWord(NonNull::from(w)));
        Reader {
            view,
            state,
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
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let r = s.nodes[0].reader().unwrap();
    /// assert!(r.index() < s.region.layout().config().readers_per_node() as usize);
    /// ```
    pub fn index(&self) -> usize {
        self.index
    }

    /// Enters a read section; it lasts until the returned guard (and every guard nested
    /// inside it) is dropped.
    ///
    /// Nested `enter` calls only count: the section's enter tick is the outermost one, so
    /// a nested guard protects nothing the outer one does not already protect, and a long
    /// chain of nested sections is one long section for the reader lease.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let r = s.nodes[0].reader().unwrap();
    /// let outer = r.enter();
    /// let inner = r.enter(); // nested: only counts
    /// drop(outer);
    /// assert!(r.is_active());
    /// drop(inner);
    /// assert!(!r.is_active());
    /// ```
    #[inline]
    pub fn enter(&self) -> BiGuard<'_, V> {
        let d = self.depth.get();
        if d == 0 {
            let t = match &self.coarse {
                // Acquire, as in `TickClock::now`.
                Some(word) => word.load(Ordering::Acquire),
                None => self.inner.clock.now(),
            };
            if !self.inner.config.faults.has(Fault::ReaderRecord) {
                self.store_state(ReaderState::inside(t));
            }
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

    /// Declares that this reader reads the structure of `scope`
    /// ([`NodeRuntime::use_scope`](crate::runtime::NodeRuntime::use_scope)). Call it before the
    /// first section that reads the structure.
    ///
    /// ```
    /// use bi_core::runtime::{Scope, testing::Setup};
    ///
    /// let s = Setup::new(2, 0);
    /// let r = s.nodes[1].reader().unwrap();
    /// assert!(r.use_scope(Scope::of_slot(s.slot(0))).unwrap()); // first on this node
    /// let other = s.nodes[1].reader().unwrap();
    /// assert!(!other.use_scope(Scope::of_slot(s.slot(0))).unwrap());
    /// ```
    pub fn use_scope(&self, scope: crate::runtime::Scope) -> Result<bool, BiError> {
        crate::runtime::pass::declare_scope(&self.inner, scope)
    }

    /// Whether a section is open.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let r = s.nodes[0].reader().unwrap();
    /// assert!(!r.is_active());
    /// let g = r.enter();
    /// assert!(r.is_active());
    /// drop(g);
    /// assert!(!r.is_active());
    /// ```
    pub fn is_active(&self) -> bool {
        self.depth.get() > 0
    }

    #[inline(always)]
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
            self.store_state(ReaderState::OUTSIDE);
        }
    }

    /// Stores the state word: one store where the view has the word directly.
    #[inline(always)]
    fn store_state(&self, state: ReaderState) {
        match &self.state {
            // SAFETY: the pointer came from `self.view.direct_word` and points into the
            // shared memory that `self.view` keeps alive for as long as `self` lives.
            Some(word) => unsafe { word.0.as_ref() }.store(state.raw(), Ordering::Release),
            // Errors are impossible here: the record offset was checked at registration.
            None => {
                let _ = self.view.store_u64(self.record, state.raw());
            }
        }
    }
}

impl<V: MemView> Drop for Reader<V> {
    fn drop(&mut self) {
        let _ = self
            .inner
            .view
            .store_u64(self.record, ReaderState::OUTSIDE.raw());
        crate::runtime::share::release_reader(&self.inner, self.index);
    }
}

/// An open read section. Values read through it ([`Shared`]) cannot outlive it.
///
/// ```
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(2, 0);
/// let mut w = s.writer(0);
/// let b = w.alloc(1u64).unwrap();
/// w.publish(s.slot(0), b).unwrap();
/// s.quiesce_all().unwrap();
/// let r = s.nodes[1].reader().unwrap();
/// let g = r.enter();
/// let v = g.load::<u64>(s.slot(0)).unwrap().unwrap();
/// assert_eq!(*v, 1);
/// drop(g); // ends the section (and `v` with it)
/// assert!(!r.is_active());
/// ```
pub struct BiGuard<'r, V: MemView> {
    reader: &'r Reader<V>,
    _not_send: PhantomData<*const ()>,
}

impl<V: MemView> Drop for BiGuard<'_, V> {
    #[inline(always)]
    fn drop(&mut self) {
        self.reader.exit();
    }
}

/// A guard's validated read, with the runtime's state looked up once
/// ([`BiGuard::fetcher`]).
pub struct Fetcher<'g, 'r, V: MemView> {
    guard: &'g BiGuard<'r, V>,
    view: &'g V,
    objects: Objects,
}

impl<V: MemView> Fetcher<'_, '_, V> {
    /// [`BiGuard::fetch_with`]: the validated read of the object `link` names, handed to
    /// `f`, retried once after invalidating its lines.
    #[inline(always)]
    pub fn fetch_with<T: Pod, R>(
        &self,
        link: Link<T>,
        f: impl Fn(&T) -> R,
    ) -> Result<Fetch<R>, BiError> {
        let read = || fetch_with(self.view, self.objects, link, &f);
        self.guard
            .validated(read()?, read, || object_lines(link, self.objects.line))
    }
}

/// A validated copy of a shared object, tied to the guard it was read under.
///
/// ```
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(1, 0);
/// let mut w = s.writer(0);
/// let b = w.alloc([4u16, 5]).unwrap();
/// w.publish(s.slot(0), b).unwrap();
/// let r = s.nodes[0].reader().unwrap();
/// let g = r.enter();
/// let v = g.load::<[u16; 2]>(s.slot(0)).unwrap().unwrap();
/// assert_eq!(v[0] + v[1], 9); // derefs to the copy
/// ```
pub struct Shared<'g, T> {
    /// Word-aligned, whatever `T`'s alignment: shared records are often packed
    /// (alignment 1), and moving them at odd offsets through the read path's return
    /// values costs more than reading them.
    value: WordAligned<T>,
    link: Link<T>,
    _guard: PhantomData<&'g ()>,
}

impl<T> Shared<'_, T> {
    #[inline(always)]
    fn new(value: WordAligned<T>, link: Link<T>) -> Self {
        Shared {
            value,
            link,
            _guard: PhantomData,
        }
    }

    /// The link this object was reached through.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_sealed(6u64).unwrap();
    /// w.publish_link(s.slot(0), link).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// assert_eq!(g.load::<u64>(s.slot(0)).unwrap().unwrap().link(), link);
    /// ```
    pub fn link(&self) -> Link<T> {
        self.link
    }
}

impl<T> Deref for Shared<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value.0
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Shared<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("value", &self.value.0)
            .field("link", &self.link)
            .finish()
    }
}

impl<'r, V: MemView> BiGuard<'r, V> {
    pub(in crate::runtime) fn view(&self) -> &V {
        &self.reader.inner.view
    }

    pub(in crate::runtime) fn inner(&self) -> &NodeInner<V> {
        &self.reader.inner
    }

    /// The mechanisms switched off in this node's runtime (none outside tests; see
    /// [`Fault`](crate::runtime::Fault)), for structures that read through the guard.
    ///
    /// ```
    /// use bi_core::runtime::{Fault, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// let r = s.nodes[0].reader().unwrap();
    /// assert!(!r.enter().faults().has(Fault::SnapshotSum));
    /// ```
    pub fn faults(&self) -> crate::runtime::Faults {
        self.reader.inner.config.faults
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
        let link: Link<T> = Link::from_raw(self.cached_slot_word(slot)?);
        match self.fetch(link)? {
            Fetch::Value(v) => Ok(Some(v)),
            Fetch::Null => Ok(None),
            Fetch::Stale => self.load_fresh(slot),
        }
    }

    /// Like [`load`](Self::load), but first invalidates the slot's line and fences (the
    /// lazy-invalidation path for a resolution failure).
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let r = s.nodes[1].reader().unwrap();
    /// let g = r.enter();
    /// assert!(g.load::<u64>(s.slot(0)).unwrap().is_none()); // caches the empty slot
    /// let mut w = s.writer(0);
    /// let b = w.alloc(3u64).unwrap();
    /// w.publish(s.slot(0), b).unwrap();
    /// assert!(g.load::<u64>(s.slot(0)).unwrap().is_none()); // stale until a pass
    /// assert_eq!(*g.load_fresh::<u64>(s.slot(0)).unwrap().unwrap(), 3);
    /// ```
    pub fn load_fresh<T: Pod>(&self, slot: usize) -> Result<Option<Shared<'_, T>>, BiError> {
        let link: Link<T> = Link::from_raw(self.fresh_slot_word(slot)?);
        self.follow(link)
    }

    /// Reads the object a link found inside another object names. `Ok(None)` for null;
    /// [`BiError::StaleLink`] when it does not validate after one invalidation.
    ///
    /// ```
    /// use bi_core::runtime::{BiError, Link, testing::Setup};
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let link = w.alloc_sealed(12u64).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// assert_eq!(*g.follow(link).unwrap().unwrap(), 12);
    /// assert!(g.follow(Link::<u64>::null()).unwrap().is_none());
    /// let wrong = Link::<u64>::new(link.offset(), link.generation().next());
    /// assert!(matches!(g.follow(wrong), Err(BiError::StaleLink { .. })));
    /// ```
    #[inline]
    pub fn follow<T: Pod>(&self, link: Link<T>) -> Result<Option<Shared<'_, T>>, BiError> {
        match self.fetch(link)? {
            Fetch::Value(v) => Ok(Some(v)),
            Fetch::Null => Ok(None),
            Fetch::Stale => Err(BiError::StaleLink {
                offset: link.offset(),
            }),
        }
    }

    /// The validated read of the object `link` names, retried once after invalidating its
    /// lines: [`Fetch::Stale`] then means the link itself is stale (re-read whatever held
    /// it, from memory). The hit path has no cache operation and no fence.
    ///
    /// ```
    /// use bi_core::runtime::object::Fetch;
    /// use bi_core::runtime::testing::Setup;
    /// use bi_core::runtime::Link;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let b = w.alloc(7u32).unwrap();
    /// let link = b.link();
    /// w.publish(s.slot(0), b).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// assert!(matches!(g.fetch(link).unwrap(), Fetch::Value(v) if *v == 7));
    /// assert!(matches!(g.fetch(Link::<u32>::null()).unwrap(), Fetch::Null));
    /// // The same block under another generation: not this object.
    /// let wrong = Link::<u32>::new(link.offset(), link.generation().next());
    /// assert!(matches!(g.fetch(wrong).unwrap(), Fetch::Stale));
    /// ```
    #[inline(always)]
    pub fn fetch<T: Pod>(&self, link: Link<T>) -> Result<Fetch<Shared<'_, T>>, BiError> {
        self.fetch_with(link, |v| Shared::new(WordAligned(*v), link))
    }

    /// [`fetch`](Self::fetch), handing the validated copy to `f` instead of returning it:
    /// the form for search paths, which need a comparison and the next link, not the
    /// whole object (so the copy stays in registers). `f` runs once per validated copy:
    /// twice if the first copy was stale and the second one validated.
    ///
    /// ```
    /// use bi_core::runtime::object::Fetch;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let b = w.alloc([3u64, 4]).unwrap();
    /// let link = b.link();
    /// w.publish(s.slot(0), b).unwrap();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// assert_eq!(g.fetch_with(link, |v| v[0] + v[1]).unwrap(), Fetch::Value(7));
    /// ```
    #[inline(always)]
    pub fn fetch_with<T: Pod, R>(
        &self,
        link: Link<T>,
        f: impl Fn(&T) -> R,
    ) -> Result<Fetch<R>, BiError> {
        self.fetcher().fetch_with(link, f)
    }

    /// This guard's validated read with the runtime's state (the view, the heap's bounds,
    /// the line size) looked up once: for a caller that reads many objects in one go, a
    /// range scan visiting a hundred tree nodes, so that each read is the tight path
    /// alone.
    ///
    /// ```
    /// use bi_core::runtime::object::Fetch;
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let links: Vec<_> = (0..3u64).map(|v| w.alloc_sealed(v * 10).unwrap()).collect();
    /// let r = s.nodes[0].reader().unwrap();
    /// let g = r.enter();
    /// let reads = g.fetcher();
    /// let sum: u64 = links
    ///     .iter()
    ///     .map(|&l| match reads.fetch_with(l, |v| *v).unwrap() {
    ///         Fetch::Value(v) => v,
    ///         _ => unreachable!(),
    ///     })
    ///     .sum();
    /// assert_eq!(sum, 30);
    /// ```
    #[inline(always)]
    pub fn fetcher(&self) -> Fetcher<'_, 'r, V> {
        let inner = self.inner();
        Fetcher {
            guard: self,
            view: &inner.view,
            objects: inner.objects(),
        }
    }

    /// The one "read, on a stale copy invalidate and fence, read again" skeleton: given
    /// what the caller's first read found, and if that was a stale copy, counts a
    /// mismatch, invalidates the byte range `lines()` names, fences and runs `read` (the
    /// same read) once more. (The first read is the caller's, so that the hit path is
    /// inlined where it is used.)
    #[inline(always)]
    pub(in crate::runtime) fn validated<R>(
        &self,
        first: Fetch<R>,
        read: impl FnOnce() -> Result<Fetch<R>, BiError>,
        lines: impl FnOnce() -> Result<(usize, usize), BiError>,
    ) -> Result<Fetch<R>, BiError> {
        match first {
            Fetch::Stale => self.read_again(read, lines),
            hit => Ok(hit),
        }
    }

    /// The slow path of [`validated`](Self::validated).
    #[cold]
    #[inline(never)]
    pub(in crate::runtime) fn read_again<R>(
        &self,
        read: impl FnOnce() -> Result<Fetch<R>, BiError>,
        lines: impl FnOnce() -> Result<(usize, usize), BiError>,
    ) -> Result<Fetch<R>, BiError> {
        let inner = self.inner();
        inner.stats.mismatches.fetch_add(1, Ordering::Relaxed);
        let (at, len) = lines()?;
        inner.view.invalidate(at, len)?;
        inner.view.fence();
        read()
    }

    /// Invalidates the lines holding each of `offsets` (one word each) and fences once:
    /// for a caller that found a path stale and wants to walk it again.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let r = s.nodes[1].reader().unwrap();
    /// let g = r.enter();
    /// assert!(g.load::<u64>(s.slot(0)).unwrap().is_none());
    /// let mut w = s.writer(0);
    /// let b = w.alloc(3u64).unwrap();
    /// w.publish(s.slot(0), b).unwrap();
    /// g.invalidate_path(&[s.slot(0)]).unwrap();
    /// assert_eq!(*g.load::<u64>(s.slot(0)).unwrap().unwrap(), 3);
    /// ```
    pub fn invalidate_path(&self, offsets: &[usize]) -> Result<(), BiError> {
        let view = self.view();
        for &o in offsets {
            view.invalidate(o, 8)?;
        }
        view.fence();
        Ok(())
    }

    #[inline(always)]
    pub(in crate::runtime) fn cached_slot_word(&self, slot: usize) -> Result<u64, BiError> {
        if !slot.is_multiple_of(8) {
            return Err(BiError::OutOfSection {
                offset: slot,
                section: "8-byte aligned slot",
            });
        }
        Ok(self.view().load_u64(slot)?)
    }

    /// The word at `slot`, read from memory: its line is invalidated and fenced first.
    pub(in crate::runtime) fn fresh_slot_word(&self, slot: usize) -> Result<u64, BiError> {
        let view = self.view();
        view.invalidate(slot, 8)?;
        view.fence();
        self.cached_slot_word(slot)
    }
}
