//! A view that shows every access to an observer first: the one way tests script a
//! schedule (run something at the moment a line is read), kill a host in the middle of
//! an operation, or count what a protocol does, over any other view.

use super::{MemError, MemView};
use crate::line::LineSize;
use crate::primitive::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use bytemuck::Pod;
use std::fmt;
use std::sync::Arc;

/// One access of a view, as its observer sees it before it happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A load at `offset` (of the view's word-sized and validated reads too: they are
    /// made of loads).
    Load(usize),
    /// A store at `offset`.
    Store(usize),
    /// A compare-and-exchange of the word at `offset`.
    CompareExchange(usize),
    /// A write-back of `len` bytes at `offset`.
    WriteBack(usize, usize),
    /// An invalidation of `len` bytes at `offset`.
    Invalidate(usize, usize),
    /// A flush of `len` bytes at `offset`.
    Flush(usize, usize),
    /// A fence.
    Fence,
    /// The heap's note that `len` bytes at `offset` are reused.
    NoteReuse(usize, usize),
    /// A prefetch of the line holding `offset` (it brings a copy into the cache as a
    /// load would, so a host that died makes none).
    Prefetch(usize),
}

/// What an observer does with an access: `Ok` lets it happen; an error is what the
/// access returns instead (a fence, which cannot fail, is skipped).
pub type Observer = dyn Fn(Access) -> Result<(), MemError> + Send + Sync;

/// `view`, with `observe` shown every access before it happens.
///
/// ```
/// use bi_core::mem::{Access, Emulator, EmulatorConfig, MemView, Observed};
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
/// let loads = Arc::new(AtomicUsize::new(0));
/// let counted = loads.clone();
/// let view = Observed::new(emu.node(0), move |a| {
///     if let Access::Load(_) = a {
///         counted.fetch_add(1, Ordering::Relaxed);
///     }
///     Ok(())
/// });
/// view.store(0, &7u64).unwrap();
/// assert_eq!(view.load::<u64>(0).unwrap(), 7);
/// assert_eq!(loads.load(Ordering::Relaxed), 1);
/// ```
#[derive(Clone)]
pub struct Observed<V> {
    view: V,
    observe: Arc<Observer>,
}

impl<V> Observed<V> {
    /// `view`, observed by `observe`.
    pub fn new(
        view: V,
        observe: impl Fn(Access) -> Result<(), MemError> + Send + Sync + 'static,
    ) -> Self {
        Observed {
            view,
            observe: Arc::new(observe),
        }
    }

    /// `view` as a process that dies right before its `n`th access that `counts`
    /// accepts: that access and every later one fail with `error`, and `at_death` runs
    /// once, first (a host that dies with its process loses its cache there). Returns
    /// the view and a flag that says whether it died. The harness of the tests that
    /// kill a writer at every point of a workload.
    ///
    /// ```
    /// use bi_core::mem::{Access, Emulator, EmulatorConfig, MemError, MemView, Observed};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let killed = MemError::BadSize { requested: 0, reason: "killed" };
    /// let stores = |a: &Access| matches!(a, Access::Store(..));
    /// let (view, dead) = Observed::dying(emu.node(0), 2, stores, killed, || {});
    /// view.store(0, &1u64).unwrap();
    /// assert!(view.store(8, &2u64).is_err()); // the second store: killed before it
    /// assert!(view.load::<u64>(0).is_err() && dead.load(std::sync::atomic::Ordering::SeqCst));
    /// ```
    pub fn dying(
        view: V,
        n: usize,
        counts: fn(&Access) -> bool,
        error: MemError,
        at_death: impl Fn() + Send + Sync + 'static,
    ) -> (Self, Arc<AtomicBool>) {
        let dead = Arc::new(AtomicBool::new(false));
        let (seen, died) = (AtomicUsize::new(0), dead.clone());
        let observed = Observed::new(view, move |access| {
            if died.load(Ordering::SeqCst) {
                return Err(error);
            }
            if counts(&access) && seen.fetch_add(1, Ordering::SeqCst) + 1 == n {
                at_death();
                died.store(true, Ordering::SeqCst);
                return Err(error);
            }
            Ok(())
        });
        (observed, dead)
    }

    /// The view underneath.
    pub fn inner(&self) -> &V {
        &self.view
    }
}

impl<V: fmt::Debug> fmt::Debug for Observed<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observed")
            .field("view", &self.view)
            .finish_non_exhaustive()
    }
}

/// Every access goes to the observer, then to the view; the word-sized and validated
/// reads and the reads and writes that bypass the cache keep the trait's defaults, made
/// of the accesses above.
impl<V: MemView> MemView for Observed<V> {
    fn size(&self) -> usize {
        self.view.size()
    }
    fn line_size(&self) -> LineSize {
        self.view.line_size()
    }
    fn load<T: Pod>(&self, offset: usize) -> Result<T, MemError> {
        (self.observe)(Access::Load(offset))?;
        self.view.load(offset)
    }
    fn store<T: Pod>(&self, offset: usize, value: &T) -> Result<(), MemError> {
        (self.observe)(Access::Store(offset))?;
        self.view.store(offset, value)
    }
    fn prefetch(&self, offset: usize) -> Result<(), MemError> {
        (self.observe)(Access::Prefetch(offset))?;
        self.view.prefetch(offset)
    }
    fn wait_doorbell(&self, offset: usize, timeout: std::time::Duration) -> Result<(), MemError> {
        self.view.wait_doorbell(offset, timeout)
    }
    fn ring_doorbell(&self, offset: usize) -> Result<(), MemError> {
        self.view.ring_doorbell(offset)
    }
    fn writeback(&self, offset: usize, len: usize) -> Result<(), MemError> {
        (self.observe)(Access::WriteBack(offset, len))?;
        self.view.writeback(offset, len)
    }
    fn invalidate(&self, offset: usize, len: usize) -> Result<(), MemError> {
        (self.observe)(Access::Invalidate(offset, len))?;
        self.view.invalidate(offset, len)
    }
    fn flush(&self, offset: usize, len: usize) -> Result<(), MemError> {
        (self.observe)(Access::Flush(offset, len))?;
        self.view.flush(offset, len)
    }
    fn fence(&self) {
        if (self.observe)(Access::Fence).is_ok() {
            self.view.fence();
        }
    }
    fn store_fence(&self) {
        if (self.observe)(Access::Fence).is_ok() {
            self.view.store_fence();
        }
    }
    fn note_reuse(&self, offset: usize, len: usize) -> Result<(), MemError> {
        (self.observe)(Access::NoteReuse(offset, len))?;
        self.view.note_reuse(offset, len)
    }
    fn write_back_node(&self, node: usize) -> Result<(), MemError> {
        self.view.write_back_node(node)
    }
    fn compare_exchange_u64(&self, offset: usize, current: u64, new: u64) -> Result<u64, MemError> {
        (self.observe)(Access::CompareExchange(offset))?;
        self.view.compare_exchange_u64(offset, current, new)
    }
}
