//! Memory views: one node's window onto shared memory.
//!
//! # Why views
//!
//! Code for non-coherent memory is only as good as its tests, and an ordinary laptop is
//! coherent: every bug in which a node reads a line it forgot to invalidate is invisible
//! there. So the runtime and the data structures never touch shared memory directly; they
//! go through a [`MemView`], and there are two of them:
//!
//! - [`Hardware`]: the real memory and the real cache instructions. Loads and stores are
//!   plain (word-sized, naturally ordered) accesses; `writeback` and `invalidate` issue
//!   `clwb` / `clflushopt` (or their aarch64 equivalents).
//! - [`EmulatedNode`]: one node of an [`Emulator`], a software model of several
//!   non-coherent caches over one backing memory. A load can return a stale line, a store
//!   stays private until written back or evicted, and an oracle counts every stale read and
//!   every read of reused memory, so hazards become numbers a test can assert on.
//!
//! Code generic over `V: MemView` runs unchanged on both; on [`Hardware`] it compiles down
//! to the loads, stores and cache instructions one would write by hand.
//!
//! # Values, not references
//!
//! [`MemView::load`] returns a copy of the value rather than a reference into shared
//! memory. Another node may legitimately write those bytes while we read them (that is the
//! whole subject of this crate), and a Rust reference to memory that changes underneath it
//! is undefined behaviour; a copy made with word-sized atomic loads is not. For the small
//! `Pod` records shared structures are made of, the copy is a handful of moves.
//!
//! # Offsets
//!
//! Every address is a byte offset from the start of the shared memory, because every
//! process may map that memory at a different address. An offset or range that falls
//! outside the memory is a [`MemError`], never a wild access.

mod backing;
mod emulated;
mod hardware;
mod observed;

pub use backing::Backing;
pub use emulated::*;
pub use hardware::Hardware;
pub use observed::{Access, Observed, Observer};

use crate::line::LineSize;
use crate::primitive::sync::atomic::{AtomicU64, Ordering};
use bytemuck::Pod;
use std::fmt;

/// The two readings of a stamped record's stamp ([`MemView::load_stamped`]): before its
/// words were read and after. Equal readings mean the words between them were read while
/// memory (or this node's cache) held one version of the record; what a stamp means is
/// the caller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StampReadings {
    /// The stamp read before the words.
    pub before: u64,
    /// The stamp read again after them.
    pub after: u64,
}

/// An access that the memory cannot serve.
///
/// ```
/// use bi_core::mem::{Emulator, EmulatorConfig, MemError, MemView};
///
/// let node = Emulator::new(EmulatorConfig::new(4096, 1)).node(0);
/// let err = node.load::<u64>(4090).unwrap_err();
/// assert_eq!(err, MemError::OutOfBounds { offset: 4090, len: 8, size: 4096 });
/// assert_eq!(node.load_u64s(4, &mut [0; 2]), Err(MemError::Misaligned { offset: 4 }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemError {
    /// The byte range `offset .. offset + len` does not lie inside memory of `size` bytes.
    OutOfBounds {
        /// First byte of the access.
        offset: usize,
        /// Length of the access in bytes.
        len: usize,
        /// Size of the memory in bytes.
        size: usize,
    },
    /// A word access at an offset that is not a multiple of 8.
    Misaligned {
        /// The offset asked for.
        offset: usize,
    },
    /// The memory could not be allocated or mapped with the requested size.
    BadSize {
        /// The size asked for, in bytes.
        requested: usize,
        /// Why it was refused.
        reason: &'static str,
    },
    /// The view cannot do what was asked (an atomic exchange on a view that has no
    /// direct access to the word, say).
    Unsupported {
        /// What.
        what: &'static str,
    },
}

impl fmt::Display for MemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MemError::OutOfBounds { offset, len, size } => write!(
                f,
                "access of {len} bytes at offset {offset} is outside the {size}-byte shared memory"
            ),
            MemError::Misaligned { offset } => {
                write!(
                    f,
                    "word access at offset {offset}, which is not 8-byte aligned"
                )
            }
            MemError::BadSize { requested, reason } => {
                write!(
                    f,
                    "cannot provide {requested} bytes of shared memory: {reason}"
                )
            }
            MemError::Unsupported { what } => write!(f, "this memory view cannot {what}"),
        }
    }
}

impl std::error::Error for MemError {}

/// Checks that `offset .. offset + len` lies inside memory of `size` bytes.
#[inline]
pub(crate) fn check_range(offset: usize, len: usize, size: usize) -> Result<(), MemError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(MemError::OutOfBounds { offset, len, size }),
    }
}

/// One node's view of shared memory: loads and stores through that node's cache, and the
/// cache operations that move lines between the cache and memory.
///
/// Implementations are cheap to clone handles, `Send + Sync`, and shared by all threads of
/// one node (a node is a coherence domain: its threads see each other's stores at once).
///
/// The contract, on real hardware and in the emulator alike:
///
/// - `load` may return a value older than memory if this node holds a stale copy of the
///   line; it never returns a torn word (8-byte aligned words are single accesses);
/// - `store` changes this node's copy; other nodes may not see it until `writeback`
///   (or an eviction the program does not control) moves the line to memory;
/// - `writeback` copies this node's dirty lines in the range to memory and keeps them;
/// - `invalidate` writes back dirty lines in the range, then drops them, so the next
///   load reads memory (x86 has no user-mode invalidate that discards data);
/// - `flush` is `writeback` followed by `invalidate`, which on x86 is what `invalidate`
///   already does; it is kept separate for architectures that distinguish them;
/// - none of the three waits: a batch of cache operations ends with one `fence`, after
///   which they have all completed and are ordered before later loads and stores.
///
/// Ranges are rounded outward to whole lines; a zero-length range is a no-op.
///
/// ```
/// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
///
/// fn publish<V: MemView>(view: &V, off: usize, value: u64) -> Result<(), bi_core::mem::MemError> {
///     view.store(off, &value)?;
///     view.writeback(off, 8)?;
///     view.fence();
///     Ok(())
/// }
///
/// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
/// publish(&emu.node(0), 64, 42).unwrap();
/// assert_eq!(emu.node(1).load::<u64>(64).unwrap(), 42);
/// ```
pub trait MemView: Clone + Send + Sync {
    /// Size of the shared memory in bytes.
    ///
    /// ```
    /// use bi_core::mem::{Backing, Emulator, EmulatorConfig, Hardware, MemView};
    /// use std::sync::Arc;
    ///
    /// assert_eq!(Emulator::new(EmulatorConfig::new(8192, 2)).node(1).size(), 8192);
    /// assert_eq!(Hardware::new(Arc::new(Backing::anonymous(4096).unwrap())).size(), 4096);
    /// ```
    fn size(&self) -> usize;

    /// The cache-line size this view operates with.
    ///
    /// ```
    /// use bi_core::line::LineSize;
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let cfg = EmulatorConfig::new(4096, 1).line_size(LineSize::new(128).unwrap());
    /// assert_eq!(Emulator::new(cfg).node(0).line_size().get(), 128);
    /// ```
    fn line_size(&self) -> LineSize;

    /// Reads a `T` at `offset` through this node's cache.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let (a, b) = (emu.node(0), emu.node(1));
    /// assert_eq!(b.load::<u32>(64).unwrap(), 0); // b now caches the line
    /// a.store_to_memory(64, &9u32).unwrap();
    /// assert_eq!(b.load::<u32>(64).unwrap(), 0); // stale: b never invalidated
    /// assert_eq!(b.stats().stale_reads, 1);
    /// ```
    fn load<T: Pod>(&self, offset: usize) -> Result<T, MemError>;

    /// Writes `value` at `offset` into this node's cache.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let a = emu.node(0);
    /// a.store(8, &[1u16, 2]).unwrap();
    /// assert_eq!(a.load::<[u16; 2]>(8).unwrap(), [1, 2]); // this node sees it at once
    /// assert!(a.is_dirty(8));
    /// assert_eq!(emu.peek::<[u16; 2]>(8).unwrap(), [0, 0]); // memory does not, yet
    /// ```
    fn store<T: Pod>(&self, offset: usize, value: &T) -> Result<(), MemError>;

    /// Starts writing back this node's dirty lines in `offset .. offset + len`.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let a = emu.node(0);
    /// a.store(0, &5u64).unwrap();
    /// a.writeback(0, 8).unwrap();
    /// a.fence();
    /// assert_eq!(emu.peek::<u64>(0).unwrap(), 5);
    /// assert!(a.is_cached(0) && !a.is_dirty(0)); // the line stays, clean
    /// ```
    fn writeback(&self, offset: usize, len: usize) -> Result<(), MemError>;

    /// Starts writing back and then dropping this node's lines in `offset .. offset + len`.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let (a, b) = (emu.node(0), emu.node(1));
    /// b.load::<u64>(0).unwrap();
    /// a.store_to_memory(0, &3u64).unwrap();
    /// b.invalidate(0, 8).unwrap();
    /// b.fence();
    /// assert_eq!(b.load::<u64>(0).unwrap(), 3);
    /// ```
    fn invalidate(&self, offset: usize, len: usize) -> Result<(), MemError>;

    /// Starts a write-back followed by an invalidation of `offset .. offset + len`.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let a = emu.node(0);
    /// a.store(128, &1u8).unwrap();
    /// a.flush(128, 1).unwrap();
    /// a.fence();
    /// assert!(!a.is_cached(128));
    /// assert_eq!(emu.peek::<u8>(128).unwrap(), 1);
    /// ```
    fn flush(&self, offset: usize, len: usize) -> Result<(), MemError>;

    /// Waits for every cache operation issued so far by this thread and orders it before
    /// later loads and stores.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let a = emu.node(0);
    /// a.fence();
    /// a.fence();
    /// assert_eq!(a.stats().fences, 2);
    /// ```
    fn fence(&self);

    /// Orders every write-back and store this thread issued before every later store
    /// (not before later loads): what a writer needs between writing lines back and
    /// storing the word that publishes them. A full [`fence`](Self::fence) unless the
    /// view has a cheaper one (`sfence` on x86 hardware).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let a = emu.node(0);
    /// a.store_fence();
    /// assert_eq!(a.stats().fences, 1); // the emulator's is a full fence
    /// ```
    fn store_fence(&self) {
        self.fence();
    }

    /// Reads a `T` from memory, not from this node's cache: invalidates its lines,
    /// fences, loads. How a node reads a record that another node owns.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let (a, b) = (emu.node(0), emu.node(1));
    /// b.load::<u64>(0).unwrap();
    /// a.store_to_memory(0, &11u64).unwrap();
    /// assert_eq!(b.load::<u64>(0).unwrap(), 0); // through the stale cache
    /// assert_eq!(b.load_from_memory::<u64>(0).unwrap(), 11);
    /// ```
    fn load_from_memory<T: Pod>(&self, offset: usize) -> Result<T, MemError> {
        self.invalidate(offset, size_of::<T>())?;
        self.fence();
        self.load(offset)
    }

    /// Stores a `T` and makes it reach memory: stores, writes its lines back, fences. How
    /// a node publishes a record it owns.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// emu.node(0).store_to_memory(64, &[1u64, 2]).unwrap();
    /// assert_eq!(emu.peek::<[u64; 2]>(64).unwrap(), [1, 2]);
    /// assert_eq!(emu.node(1).load::<[u64; 2]>(64).unwrap(), [1, 2]);
    /// ```
    fn store_to_memory<T: Pod>(&self, offset: usize, value: &T) -> Result<(), MemError> {
        self.store(offset, value)?;
        self.writeback(offset, size_of::<T>())?;
        self.fence();
        Ok(())
    }

    /// Reads the 8-byte word at `offset` through this node's cache.
    ///
    /// The same as `load::<u64>`; views override it with a faster path for aligned words
    /// (on [`Hardware`] it is one atomic load), which is what hot paths such as a reader
    /// entering its section use.
    ///
    /// ```
    /// use bi_core::region::{Region, RegionConfig};
    /// use bi_core::mem::MemView;
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 20)).unwrap();
    /// let view = region.hardware();
    /// let at = region.layout().heap().offset;
    /// view.store_u64(at, 0xDEAD).unwrap();
    /// assert_eq!(view.load_u64(at).unwrap(), 0xDEAD);
    /// assert_eq!(view.load_u64(at).unwrap(), view.load::<u64>(at).unwrap());
    /// ```
    #[inline]
    fn load_u64(&self, offset: usize) -> Result<u64, MemError> {
        self.load(offset)
    }

    /// Reads the `out.len()` consecutive 8-byte words starting at the 8-byte aligned
    /// `offset` through this node's cache ([`MemError::Misaligned`] otherwise): the
    /// payload of a validated read.
    ///
    /// The words are read after every earlier load of this thread and before every later
    /// one, but not necessarily in order among themselves (a seqlock's data read: the
    /// stamps on both sides are what order them). The default issues one
    /// [`load_u64`](Self::load_u64) per word, in order (so the emulator sees, and its
    /// oracle judges, every word); [`Hardware`] checks the whole range once and then
    /// loads each word with one move.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let a = Emulator::new(EmulatorConfig::new(4096, 1)).node(0);
    /// a.store(64, &[1u64, 2, 3]).unwrap();
    /// let mut out = [0u64; 3];
    /// a.load_u64s(64, &mut out).unwrap();
    /// assert_eq!(out, [1, 2, 3]);
    /// assert!(a.load_u64s(4088, &mut out).is_err()); // runs past the end
    /// ```
    #[inline]
    fn load_u64s(&self, offset: usize, out: &mut [u64]) -> Result<(), MemError> {
        if !offset.is_multiple_of(8) {
            return Err(MemError::Misaligned { offset });
        }
        let len = 8 * out.len();
        for (k, w) in out.iter_mut().enumerate() {
            let at = (8 * k)
                .checked_add(offset)
                .ok_or_else(|| MemError::OutOfBounds {
                    offset,
                    len,
                    size: self.size(),
                })?;
            *w = self.load_u64(at)?;
        }
        Ok(())
    }

    /// Reads a stamped record: the 8-byte word at the aligned `offset` (its stamp) and,
    /// only if `accept(stamp)`, the `out.len()` words after it (as
    /// [`load_u64s`](Self::load_u64s)) and then the stamp again. Returns both readings of
    /// the stamp, or `None` if the first was refused (then nothing else was read).
    ///
    /// This is the shape of every validated read (a seqlock's read side): a caller
    /// trusts the words if the stamps agree with each other and with what it expected.
    /// The default is the three steps above; [`Hardware`] checks the whole range once.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView, StampReadings};
    ///
    /// let a = Emulator::new(EmulatorConfig::new(4096, 1)).node(0);
    /// a.store(0, &[7u64, 10, 20]).unwrap(); // stamp 7, then two words
    /// let mut out = [0u64; 2];
    /// let read = a.load_stamped(0, &mut out, |s| s == 7).unwrap();
    /// assert_eq!(read, Some(StampReadings { before: 7, after: 7 }));
    /// assert_eq!(out, [10, 20]);
    /// assert_eq!(a.load_stamped(0, &mut out, |s| s == 8).unwrap(), None);
    /// ```
    #[inline(always)]
    fn load_stamped(
        &self,
        offset: usize,
        out: &mut [u64],
        accept: impl FnOnce(u64) -> bool,
    ) -> Result<Option<StampReadings>, MemError> {
        let before = self.load_u64(offset)?;
        if !accept(before) {
            return Ok(None);
        }
        self.load_u64s(offset + 8, out)?;
        let after = self.load_u64(offset)?;
        Ok(Some(StampReadings { before, after }))
    }

    /// [`load_stamped`](Self::load_stamped) over a range the caller has checked: a view
    /// that can skip its own bounds check does ([`Hardware`]); the default checks anyway.
    /// A search loop that has already checked a link against the heap, which lies inside
    /// the view, saves a second check per object this way.
    ///
    /// # Safety
    ///
    /// `offset` is a multiple of 8 and the `out.len() + 1` words from `offset` lie inside
    /// the view (`offset + 8 * (out.len() + 1) <= self.size()`).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView, StampReadings};
    ///
    /// let a = Emulator::new(EmulatorConfig::new(4096, 1)).node(0);
    /// a.store(0, &[7u64, 10]).unwrap();
    /// let mut out = [0u64; 1];
    /// // SAFETY: words 0 and 1 lie inside the 4096-byte view.
    /// let read = unsafe { a.load_stamped_unchecked(0, &mut out, |s| s == 7) }.unwrap();
    /// assert_eq!(read, Some(StampReadings { before: 7, after: 7 }));
    /// assert_eq!(out, [10]);
    /// ```
    #[inline(always)]
    unsafe fn load_stamped_unchecked(
        &self,
        offset: usize,
        out: &mut [u64],
        accept: impl FnOnce(u64) -> bool,
    ) -> Result<Option<StampReadings>, MemError> {
        self.load_stamped(offset, out, accept)
    }

    /// Writes the 8-byte word `value` at `offset` into this node's cache.
    ///
    /// The same as `store(offset, &value)`; on [`Hardware`] an aligned word is one atomic
    /// store (release ordering).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let a = Emulator::new(EmulatorConfig::new(4096, 1)).node(0);
    /// a.store_u64(8, u64::MAX).unwrap();
    /// assert_eq!(a.load::<[u32; 2]>(8).unwrap(), [u32::MAX; 2]);
    /// ```
    #[inline]
    fn store_u64(&self, offset: usize, value: u64) -> Result<(), MemError> {
        self.store(offset, &value)
    }

    /// Writes the words `words` at the aligned `offset` into this node's cache, in order:
    /// the counterpart of [`load_u64s`](Self::load_u64s). [`Hardware`] checks the whole
    /// range once, then stores each word (release ordering).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let a = Emulator::new(EmulatorConfig::new(4096, 1)).node(0);
    /// a.store_u64s(64, &[1, 2, 3]).unwrap();
    /// assert_eq!(a.load::<[u64; 3]>(64).unwrap(), [1, 2, 3]);
    /// assert!(a.store_u64s(4088, &[1, 2]).is_err()); // runs past the end
    /// assert!(a.store_u64s(4, &[1]).is_err()); // not a word
    /// ```
    #[inline]
    fn store_u64s(&self, offset: usize, words: &[u64]) -> Result<(), MemError> {
        if !offset.is_multiple_of(8) {
            return Err(MemError::Misaligned { offset });
        }
        let len = 8 * words.len();
        match offset.checked_add(len) {
            Some(end) if end <= self.size() => {}
            _ => {
                return Err(MemError::OutOfBounds {
                    offset,
                    len,
                    size: self.size(),
                });
            }
        }
        for (k, &w) in words.iter().enumerate() {
            self.store_u64(offset + 8 * k, w)?;
        }
        Ok(())
    }

    /// The 8-byte word at the aligned `offset` as an atomic this process may access
    /// directly, if the view has one: [`Hardware`] does (its memory is mapped in this
    /// process and a load or store is the processor's own), the emulator does not (every
    /// access goes through its cache model). A reader keeps its state word this way, so
    /// that entering and leaving a section is one store each.
    ///
    /// A load or store through the word means exactly what [`load_u64`](Self::load_u64)
    /// or [`store_u64`](Self::store_u64) at `offset` means on this view.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    /// use bi_core::region::{Region, RegionConfig};
    /// use std::sync::atomic::Ordering;
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 20)).unwrap();
    /// let view = region.hardware();
    /// let at = region.layout().heap().offset;
    /// view.direct_word(at).unwrap().store(5, Ordering::Release);
    /// assert_eq!(view.load_u64(at).unwrap(), 5);
    /// assert!(Emulator::new(EmulatorConfig::new(4096, 1)).node(0).direct_word(0).is_none());
    /// ```
    fn direct_word(&self, offset: usize) -> Option<&AtomicU64> {
        let _ = offset;
        None
    }

    /// Replaces the 8-byte word at the aligned `offset` with `new` if it holds `current`,
    /// atomically **among the threads and processes of this node** (one host, coherent
    /// with itself), and returns the word it found. Nothing makes it atomic with respect
    /// to other nodes: it is for records only one node's processes use (its reader
    /// records). The default goes through [`direct_word`](Self::direct_word) (a
    /// processor compare-and-exchange on [`Hardware`]); the emulator does it under its
    /// node cache's lock; a view with neither says [`MemError::Unsupported`].
    ///
    /// ```
    /// use bi_core::mem::MemView;
    /// use bi_core::region::{Region, RegionConfig};
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 20)).unwrap();
    /// let view = region.hardware();
    /// let at = region.layout().heap().offset;
    /// assert_eq!(view.compare_exchange_u64(at, 0, 9).unwrap(), 0); // swapped
    /// assert_eq!(view.compare_exchange_u64(at, 0, 10).unwrap(), 9); // not swapped
    /// assert_eq!(view.load_u64(at).unwrap(), 9);
    /// ```
    fn compare_exchange_u64(&self, offset: usize, current: u64, new: u64) -> Result<u64, MemError> {
        check_range(offset, 8, self.size())?;
        if !offset.is_multiple_of(8) {
            return Err(MemError::Misaligned { offset });
        }
        match self.direct_word(offset) {
            Some(w) => Ok(
                match w.compare_exchange(current, new, Ordering::SeqCst, Ordering::SeqCst) {
                    Ok(v) | Err(v) => v,
                },
            ),
            None => Err(MemError::Unsupported {
                what: "exchange a word atomically",
            }),
        }
    }

    /// Asks for the line holding `offset` to be brought into this node's cache ahead of
    /// a load that will need it, without waiting for it: a hint, which a view may ignore
    /// (the default does). A batch of lookups issues its lines this way before reading
    /// any, so their trips to memory overlap. Like any prefetch, it may fill a line with
    /// an older version than a later load would want: readers validate what they read
    /// as they always do.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// let a = emu.node(0);
    /// MemView::prefetch(&a, 200).unwrap();
    /// assert!(a.is_cached(192));
    /// assert!(MemView::prefetch(&a, 4096).is_err()); // outside the memory
    /// ```
    #[inline]
    fn prefetch(&self, offset: usize) -> Result<(), MemError> {
        check_range(offset, 1, self.size())
    }

    /// Sleeps for up to `timeout`, or until a thread or process of this host calls
    /// [`ring_doorbell`](Self::ring_doorbell) on the same `offset`: how a server that
    /// polls memory naps without missing a client of its own host that is waiting for
    /// it. The word at `offset` must not change while anyone sleeps on it (a header's
    /// magic, say). A wake-up says nothing about memory: the caller polls as it would
    /// after any nap. Nothing crosses hosts (nodes without coherence can only be polled),
    /// and a ring just before the sleep starts may be missed, so callers keep their
    /// timeouts short enough to poll by. The default sleeps the whole `timeout`;
    /// [`Hardware`] on Linux waits on the word with a futex (shared, so processes
    /// mapping one region file wake each other).
    ///
    /// ```
    /// use bi_core::mem::MemView;
    /// use bi_core::region::{Region, RegionConfig};
    /// use std::time::Duration;
    ///
    /// let region = Region::anonymous(RegionConfig::new(1 << 20)).unwrap();
    /// let view = region.hardware();
    /// let at = region.layout().heap().offset;
    /// std::thread::scope(|t| {
    ///     // Without a ring it would sleep a minute.
    ///     let sleeper = t.spawn(|| view.wait_doorbell(at, Duration::from_secs(60)));
    ///     for _ in 0..5000 {
    ///         view.ring_doorbell(at).unwrap(); // until the sleeper has heard it
    ///         std::thread::sleep(Duration::from_millis(1));
    ///         if sleeper.is_finished() {
    ///             break;
    ///         }
    ///     }
    ///     # #[cfg(target_os = "linux")]
    ///     assert!(sleeper.is_finished());
    /// });
    /// ```
    fn wait_doorbell(&self, offset: usize, timeout: std::time::Duration) -> Result<(), MemError> {
        check_range(offset, 8, self.size())?;
        std::thread::sleep(timeout);
        Ok(())
    }

    /// Wakes whoever of this host sleeps in [`wait_doorbell`](Self::wait_doorbell) on
    /// `offset` (the default does nothing: its sleepers wake at their timeouts).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1));
    /// emu.node(0).ring_doorbell(64).unwrap(); // no sleeper: nothing happens
    /// assert!(emu.node(0).ring_doorbell(4096).is_err());
    /// ```
    fn ring_doorbell(&self, offset: usize) -> Result<(), MemError> {
        check_range(offset, 8, self.size())
    }

    /// Tells the memory that `offset .. offset + len` now holds a *new* object: a heap
    /// calls it when it hands out memory that held an object before.
    ///
    /// Real memory has nothing to do here (the default does nothing). The
    /// [`Emulator`]'s oracle bumps the incarnation of every line in the range, so any copy
    /// of the old object still sitting in another node's cache is counted as a reuse
    /// hazard the moment it is read (the calling node's own copies are evicted first: it
    /// is about to write the new object over them).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let (a, b) = (emu.node(0), emu.node(1));
    /// b.load::<u64>(0).unwrap(); // b caches the old object
    /// a.note_reuse(0, 64).unwrap(); // a's heap hands the memory out again
    /// b.load::<u64>(0).unwrap();
    /// assert_eq!(b.stats().reuse_hazards, 1);
    /// ```
    fn note_reuse(&self, offset: usize, len: usize) -> Result<(), MemError> {
        check_range(offset, len, self.size())
    }

    /// Makes the dirty lines that node `node`'s cache holds reach memory, as that cache
    /// would by evicting them at some later moment: what a process does before it goes
    /// on from memory that a killed process of node `node`, on this host, wrote.
    ///
    /// The default does nothing, which is right where the nodes of one host share
    /// coherent caches (several processes of one machine): a store a killed process
    /// made is in memory for every other process of the host at once. The [`Emulator`]
    /// gives each node a cache of its own under one kernel, as a NUMA machine with
    /// cross-socket coherence switched off does; this writes back `node`'s dirty lines
    /// there. On such a machine the hardware view does nothing yet: writing a socket's
    /// dirty lines back needs code running on that socket.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    /// let (a, b) = (emu.node(0), emu.node(1));
    /// a.store(64, &7u64).unwrap(); // a's process is killed before it writes the line back
    /// assert_eq!(b.load_from_memory::<u64>(64).unwrap(), 0);
    /// b.write_back_node(0).unwrap();
    /// assert_eq!(b.load_from_memory::<u64>(64).unwrap(), 7);
    /// ```
    fn write_back_node(&self, node: usize) -> Result<(), MemError> {
        let _ = node;
        Ok(())
    }
}
