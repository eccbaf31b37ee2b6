//! The hardware view: real shared memory and real cache instructions.
//!
//! The view holds the base address and length of the memory directly (the [`Backing`] is
//! kept alive beside them), so an aligned, in-bounds word load or store is one bounds
//! check and one atomic access: no pointer chase, no match on the kind of memory. Words
//! are `AtomicU64`, so a concurrent write by another thread or process is a race between
//! atomics (well defined), never a data race on plain memory; on x86_64 those aligned
//! atomic accesses are ordinary moves. The cache operations check the range against the
//! memory, then issue one instruction per line through [`CacheOps`]; [`MemView::fence`] is
//! the ops' fence.

use super::{Backing, MemError, MemView, StampReadings, check_range};
use crate::cache::CacheOps;
use crate::line::LineSize;
use crate::primitive::sync::atomic::{AtomicU64, Ordering, fence};
use bytemuck::Pod;
use std::sync::Arc;

/// One node's view of real shared memory: plain loads and stores, and the processor's own
/// cache instructions.
///
/// Cheap to clone (an `Arc`, a pointer and a few bytes); clones share the memory.
///
/// ```
/// use bi_core::mem::{Backing, Hardware, MemView};
/// use std::sync::Arc;
///
/// let view = Hardware::new(Arc::new(Backing::anonymous(4096).unwrap()));
/// view.store(128, &0xfeed_u64).unwrap();
/// view.writeback(128, 8).unwrap(); // publish
/// view.fence();
/// view.invalidate(128, 8).unwrap(); // drop our copy, next load reads memory
/// view.fence();
/// assert_eq!(view.load::<u64>(128).unwrap(), 0xfeed);
/// assert!(view.writeback(4090, 8).is_err()); // out of bounds: an error, not a fault
/// ```
#[derive(Clone, Debug)]
pub struct Hardware {
    /// `mem`'s words: the first of `words` atomic words that live as long as `mem`.
    base: *const AtomicU64,
    /// Number of words at `base`.
    words: usize,
    mem: Arc<Backing>,
    ops: CacheOps,
}

// SAFETY: `base` points into the memory `mem` owns (heap words or a shared mapping), which
// is only ever accessed through atomic words, from any thread; `Backing` itself is
// `Send + Sync`, and the pointer is never used after `mem` (held by the same value) is
// dropped. So moving or sharing a `Hardware` between threads is as sound as sharing the
// `Arc<Backing>` it carries.
unsafe impl Send for Hardware {}
// SAFETY: see `Send`: every access through `base` is an atomic operation.
unsafe impl Sync for Hardware {}

impl Hardware {
    /// A view of `mem` using the processor's best instructions ([`CacheOps::detect`]).
    ///
    /// ```
    /// use bi_core::mem::{Backing, Hardware, MemView};
    /// use std::sync::Arc;
    ///
    /// let view = Hardware::new(Arc::new(Backing::anonymous(4096).unwrap()));
    /// view.store_to_memory(64, &1234u64).unwrap();
    /// assert_eq!(view.load_from_memory::<u64>(64).unwrap(), 1234);
    /// ```
    pub fn new(mem: Arc<Backing>) -> Hardware {
        Hardware::with_ops(mem, CacheOps::detect())
    }

    /// A view of `mem` using the given instructions (for example
    /// [`CacheOps::clflush_only`] as a baseline, or [`CacheOps::nop`] on coherent memory).
    pub(crate) fn with_ops(mem: Arc<Backing>, ops: CacheOps) -> Hardware {
        let words = mem.words();
        Hardware {
            base: words.as_ptr(),
            words: words.len(),
            mem,
            ops,
        }
    }

    /// The shared memory.
    ///
    /// ```
    /// use bi_core::mem::{Backing, Hardware, MemView};
    /// use std::sync::Arc;
    ///
    /// let mem = Arc::new(Backing::anonymous(4096).unwrap());
    /// let view = Hardware::new(mem.clone());
    /// view.store(0, &3u64).unwrap();
    /// assert!(Arc::ptr_eq(view.backing(), &mem));
    /// assert_eq!(mem.word(0).unwrap().load(std::sync::atomic::Ordering::Acquire), 3);
    /// ```
    pub fn backing(&self) -> &Arc<Backing> {
        &self.mem
    }

    /// The cache instructions this view issues.
    ///
    /// ```
    /// use bi_core::cache::CacheOps;
    /// use bi_core::mem::{Backing, Hardware, MemView};
    /// use std::sync::Arc;
    ///
    /// let view = Hardware::new(Arc::new(Backing::anonymous(4096).unwrap()));
    /// assert_eq!(view.ops().line_size(), view.line_size());
    /// assert_eq!(view.ops(), CacheOps::detect());
    /// ```
    pub fn ops(&self) -> CacheOps {
        self.ops
    }

    /// Start of `offset .. offset + len` in this process, after checking the range.
    #[inline]
    fn range_ptr(&self, offset: usize, len: usize) -> Result<*const u8, MemError> {
        check_range(offset, len, self.size())?;
        // Stays inside (or one past the end of) the backing allocation: checked above.
        Ok(self.base.cast::<u8>().wrapping_add(offset))
    }

    /// The word at byte `offset`, if `offset` is a multiple of 8 inside the memory: the
    /// one bounds check of an aligned access.
    #[inline(always)]
    fn word(&self, offset: usize) -> Option<&AtomicU64> {
        let index = offset / 8;
        if offset.is_multiple_of(8) && index < self.words {
            // SAFETY: `index < self.words`, so `base + index` is inside the word array
            // of `self.mem`, which `self` keeps alive for at least the returned borrow.
            Some(unsafe { &*self.base.add(index) })
        } else {
            None
        }
    }

    /// The slow path of `load_u64`: an unaligned or out-of-range offset.
    #[cold]
    #[inline(never)]
    fn load_u64_unaligned(&self, offset: usize) -> Result<u64, MemError> {
        self.load(offset)
    }

    /// The index of the word at `offset`, if the run of `words` words starting there is
    /// aligned and inside the memory: the one bounds check of a run.
    #[inline(always)]
    fn run(&self, offset: usize, words: usize) -> Result<usize, MemError> {
        let first = offset / 8;
        if offset.is_multiple_of(8) && first <= self.words && words <= self.words - first {
            Ok(first)
        } else {
            // The error path never touches the caller's buffer, so it stays local to the
            // caller (and in registers).
            Err(self.words_error(offset, words))
        }
    }

    /// Loads words `first .. first + out.len()` with relaxed ordering (the caller orders
    /// them with a fence).
    ///
    /// # Safety
    ///
    /// `first + out.len() <= self.words` (as [`run`](Self::run) checks).
    #[inline(always)]
    unsafe fn load_run(&self, first: usize, out: &mut [u64]) {
        for (k, w) in out.iter_mut().enumerate() {
            // SAFETY: `first + k < first + out.len() <= self.words` (the caller's
            // contract): inside the word array of `self.mem`, alive as long as `self`.
            *w = unsafe { &*self.base.add(first + k) }.load(Ordering::Relaxed);
        }
    }

    /// The stamped read of [`MemView::load_stamped`] at word `first`: the stamp, the
    /// `out.len()` words after it if `accept` takes the stamp, then the stamp again.
    ///
    /// # Safety
    ///
    /// `first + out.len() < self.words` (as [`run`](Self::run) checks for
    /// `out.len() + 1` words).
    #[inline(always)]
    unsafe fn stamped_run(
        &self,
        first: usize,
        out: &mut [u64],
        accept: impl FnOnce(u64) -> bool,
    ) -> Option<StampReadings> {
        // SAFETY: `first < self.words` (the caller's contract): inside the word array of
        // `self.mem`, alive as long as `self`.
        let stamp = unsafe { &*self.base.add(first) };
        let before = stamp.load(Ordering::Acquire);
        if !accept(before) {
            return None;
        }
        // SAFETY: words `first + 1 ..= first + out.len()`, inside by the same contract.
        unsafe { self.load_run(first + 1, out) };
        // The words before every later load, the stamp's second reading included.
        fence(Ordering::Acquire);
        let after = stamp.load(Ordering::Relaxed);
        Some(StampReadings { before, after })
    }

    /// Why `run` refused `offset .. offset + 8 * words`.
    #[cold]
    #[inline(never)]
    fn words_error(&self, offset: usize, words: usize) -> MemError {
        if offset.is_multiple_of(8) {
            MemError::OutOfBounds {
                offset,
                len: words.saturating_mul(8),
                size: self.size(),
            }
        } else {
            MemError::Misaligned { offset }
        }
    }

    /// The slow path of `store_u64`.
    #[cold]
    #[inline(never)]
    fn store_u64_unaligned(&self, offset: usize, value: u64) -> Result<(), MemError> {
        self.store(offset, &value)
    }
}

impl MemView for Hardware {
    fn wait_doorbell(&self, offset: usize, timeout: std::time::Duration) -> Result<(), MemError> {
        check_range(offset, 8, self.size())?;
        match self.word(offset) {
            #[cfg(all(target_os = "linux", not(miri), not(loom)))]
            Some(word) => futex::wait(word, timeout),
            _ => std::thread::sleep(timeout),
        }
        Ok(())
    }

    fn ring_doorbell(&self, offset: usize) -> Result<(), MemError> {
        check_range(offset, 8, self.size())?;
        #[cfg(all(target_os = "linux", not(miri), not(loom)))]
        if let Some(word) = self.word(offset) {
            futex::wake(word);
        }
        Ok(())
    }

    #[inline]
    fn size(&self) -> usize {
        self.words * 8
    }

    #[inline(always)]
    fn prefetch(&self, offset: usize) -> Result<(), MemError> {
        let Some(word) = self.word(offset & !7) else {
            return Err(MemError::OutOfBounds {
                offset,
                len: 1,
                size: self.size(),
            });
        };
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        // SAFETY: a prefetch only hints the cache; the address is inside the memory
        // (checked above), and no prefetch ever faults.
        unsafe {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(word).cast::<i8>());
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        let _ = word;
        Ok(())
    }

    #[inline]
    fn line_size(&self) -> LineSize {
        self.ops.line_size()
    }

    #[inline]
    fn load<T: Pod>(&self, offset: usize) -> Result<T, MemError> {
        let mut value = T::zeroed();
        self.mem
            .load_bytes(offset, bytemuck::bytes_of_mut(&mut value))?;
        Ok(value)
    }

    #[inline]
    fn store<T: Pod>(&self, offset: usize, value: &T) -> Result<(), MemError> {
        self.mem.store_bytes(offset, bytemuck::bytes_of(value))
    }

    #[inline(always)]
    fn load_u64(&self, offset: usize) -> Result<u64, MemError> {
        match self.word(offset) {
            Some(word) => Ok(word.load(Ordering::Acquire)),
            None => self.load_u64_unaligned(offset),
        }
    }

    #[inline(always)]
    fn load_u64s(&self, offset: usize, out: &mut [u64]) -> Result<(), MemError> {
        let first = self.run(offset, out.len())?;
        // SAFETY: `run` checked that words `first .. first + out.len()` are in memory.
        unsafe { self.load_run(first, out) };
        // Orders the words before every later load (the stamp read after them); they
        // come after every earlier acquire load (the stamp read before them).
        fence(Ordering::Acquire);
        Ok(())
    }

    #[inline(always)]
    fn load_stamped(
        &self,
        offset: usize,
        out: &mut [u64],
        accept: impl FnOnce(u64) -> bool,
    ) -> Result<Option<StampReadings>, MemError> {
        let first = self.run(offset, out.len() + 1)?;
        // SAFETY: `run` checked that words `first ..= first + out.len()` are in memory.
        unsafe { Ok(self.stamped_run(first, out, accept)) }
    }

    #[inline(always)]
    unsafe fn load_stamped_unchecked(
        &self,
        offset: usize,
        out: &mut [u64],
        accept: impl FnOnce(u64) -> bool,
    ) -> Result<Option<StampReadings>, MemError> {
        debug_assert!(self.run(offset, out.len() + 1).is_ok());
        // SAFETY: the caller's contract: `offset` is 8-aligned and words
        // `offset / 8 ..= offset / 8 + out.len()` lie inside the memory, which `self.mem`
        // keeps alive as long as `self`.
        unsafe { Ok(self.stamped_run(offset / 8, out, accept)) }
    }

    #[inline(always)]
    fn store_u64(&self, offset: usize, value: u64) -> Result<(), MemError> {
        match self.word(offset) {
            Some(word) => {
                word.store(value, Ordering::Release);
                Ok(())
            }
            None => self.store_u64_unaligned(offset, value),
        }
    }

    #[inline(always)]
    fn store_u64s(&self, offset: usize, words: &[u64]) -> Result<(), MemError> {
        let first = self.run(offset, words.len())?;
        for (k, &w) in words.iter().enumerate() {
            // SAFETY: `run` checked that words `first .. first + words.len()` are in
            // memory, which `self.mem` keeps alive as long as `self`.
            unsafe { &*self.base.add(first + k) }.store(w, Ordering::Release);
        }
        Ok(())
    }

    #[inline]
    fn direct_word(&self, offset: usize) -> Option<&AtomicU64> {
        self.word(offset)
    }

    #[inline]
    fn writeback(&self, offset: usize, len: usize) -> Result<(), MemError> {
        let ptr = self.range_ptr(offset, len)?;
        // SAFETY: `offset .. offset + len` lies inside the backing memory (checked by
        // `range_ptr`), which is mapped readable in this process for as long as `self.mem`
        // lives, and `self` holds it for the whole call.
        unsafe { self.ops.writeback(ptr, len) };
        Ok(())
    }

    #[inline]
    fn invalidate(&self, offset: usize, len: usize) -> Result<(), MemError> {
        let ptr = self.range_ptr(offset, len)?;
        // SAFETY: as in `writeback`: the checked range is inside memory kept mapped by
        // `self.mem`.
        unsafe { self.ops.invalidate(ptr, len) };
        Ok(())
    }

    #[inline]
    fn flush(&self, offset: usize, len: usize) -> Result<(), MemError> {
        let ptr = self.range_ptr(offset, len)?;
        // SAFETY: as in `writeback`: the checked range is inside memory kept mapped by
        // `self.mem`.
        unsafe { self.ops.flush(ptr, len) };
        Ok(())
    }

    #[inline]
    fn fence(&self) {
        self.ops.fence();
    }

    #[inline]
    fn store_fence(&self) {
        self.ops.store_fence();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytemuck::{Pod, Zeroable};

    fn view(size: usize) -> Hardware {
        Hardware::new(Arc::new(Backing::anonymous(size).unwrap()))
    }

    fn assert_send_sync_clone<T: Send + Sync + Clone>() {}

    #[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
    #[repr(C)]
    struct Rec {
        a: u64,
        b: u32,
        c: u16,
        d: u16,
    }

    #[test]
    fn is_send_sync_clone() {
        assert_send_sync_clone::<Hardware>();
    }

    #[test]
    fn round_trip_values_of_several_sizes_and_alignments() {
        let v = view(4096);
        v.store(0, &0x0123_4567_89ab_cdef_u64).unwrap();
        v.store(13, &0xdead_beef_u32).unwrap(); // unaligned
        v.store(100, &[7u8; 3]).unwrap();
        let rec = Rec {
            a: 1,
            b: 2,
            c: 3,
            d: 4,
        };
        v.store(1000, &rec).unwrap();
        assert_eq!(v.load::<u64>(0).unwrap(), 0x0123_4567_89ab_cdef);
        assert_eq!(v.load::<u32>(13).unwrap(), 0xdead_beef);
        assert_eq!(v.load::<[u8; 3]>(100).unwrap(), [7; 3]);
        assert_eq!(v.load::<Rec>(1000).unwrap(), rec);
        // Clones share the memory.
        let w = v.clone();
        w.store(2000, &99u16).unwrap();
        assert_eq!(v.load::<u16>(2000).unwrap(), 99);
        assert_eq!(v.size(), 4096);
    }

    #[test]
    fn out_of_bounds_is_an_error() {
        let v = view(256);
        let oob = |offset, len| MemError::OutOfBounds {
            offset,
            len,
            size: 256,
        };
        assert_eq!(v.load::<u64>(252).unwrap_err(), oob(252, 8));
        assert_eq!(v.store(256, &1u8).unwrap_err(), oob(256, 1));
        assert_eq!(v.writeback(200, 57).unwrap_err(), oob(200, 57));
        assert_eq!(v.invalidate(usize::MAX, 2).unwrap_err(), oob(usize::MAX, 2));
        assert_eq!(v.flush(1, usize::MAX).unwrap_err(), oob(1, usize::MAX));
        // Empty ranges at the very end are in bounds.
        assert!(v.writeback(256, 0).is_ok());
        assert!(v.load::<[u8; 0]>(256).is_ok());
    }

    #[test]
    fn word_runs_and_stamped_reads_check_their_range_once() {
        let v = view(256);
        for i in 0..32u64 {
            v.store_u64(8 * i as usize, 100 + i).unwrap();
        }
        let mut out = [0u64; 3];
        v.load_u64s(16, &mut out).unwrap();
        assert_eq!(out, [102, 103, 104]);
        assert_eq!(
            v.load_u64s(12, &mut out).unwrap_err(),
            MemError::Misaligned { offset: 12 }
        );
        assert!(matches!(
            v.load_u64s(240, &mut out),
            Err(MemError::OutOfBounds { offset: 240, .. })
        ));
        // A stamped read: refused stamps read nothing else; accepted ones read both stamps.
        assert_eq!(v.load_stamped(64, &mut out, |s| s == 7).unwrap(), None);
        assert_eq!(
            v.load_stamped(64, &mut out, |s| s == 108).unwrap(),
            Some(StampReadings {
                before: 108,
                after: 108
            })
        );
        assert_eq!(out, [109, 110, 111]);
        out = [0; 3];
        // SAFETY: words 8 ..= 11 (bytes 64 .. 96) lie inside the 256-byte view.
        let unchecked = unsafe { v.load_stamped_unchecked(64, &mut out, |s| s == 108) };
        assert_eq!(
            unchecked.unwrap(),
            Some(StampReadings {
                before: 108,
                after: 108
            })
        );
        assert_eq!(out, [109, 110, 111]);
        assert!(v.load_stamped(232, &mut out, |_| true).is_err());
        assert!(v.load_stamped(usize::MAX - 7, &mut out, |_| true).is_err());
        // A run of stores: all of it or, refused, none of it.
        v.store_u64s(200, &[1, 2, 3]).unwrap();
        v.load_u64s(200, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3]);
        assert!(matches!(
            v.store_u64s(240, &[9, 9, 9]),
            Err(MemError::OutOfBounds { offset: 240, .. })
        ));
        assert_eq!(v.load_u64(240).unwrap(), 130);
        assert_eq!(
            v.store_u64s(204, &[9]).unwrap_err(),
            MemError::Misaligned { offset: 204 }
        );
        assert!(v.store_u64s(usize::MAX - 7, &[9]).is_err());
        // The reader's state word is the view's own atomic.
        let w = v.direct_word(40).unwrap();
        w.store(5, Ordering::Relaxed);
        assert_eq!(v.load_u64(40).unwrap(), 5);
        assert!(v.direct_word(41).is_none() && v.direct_word(256).is_none());
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "issues cache instructions through inline asm, which Miri cannot run"
    )]
    fn cache_ops_on_valid_ranges_keep_data() {
        let mut views = vec![view(8192)];
        if let Ok(ops) = CacheOps::clflush_only() {
            views.push(Hardware::with_ops(views[0].backing().clone(), ops));
        }
        for v in views {
            for i in 0..1024u64 {
                v.store(i as usize * 8, &(i * 3 + 1)).unwrap();
            }
            for (off, len) in [
                (0, 8192),
                (1, 1),
                (63, 2),
                (100, 1000),
                (8191, 1),
                (8192, 0),
            ] {
                v.writeback(off, len).unwrap();
                v.invalidate(off, len).unwrap();
                v.flush(off, len).unwrap();
            }
            v.fence();
            for i in 0..1024u64 {
                assert_eq!(v.load::<u64>(i as usize * 8).unwrap(), i * 3 + 1);
            }
        }
    }

    #[test]
    fn nop_ops_work_everywhere() {
        let mem = Arc::new(Backing::anonymous(512).unwrap());
        let v = Hardware::with_ops(mem, CacheOps::nop(LineSize::new(32).unwrap()));
        v.store(40, &5u64).unwrap();
        v.writeback(0, 512).unwrap();
        v.invalidate(33, 100).unwrap();
        v.flush(0, 0).unwrap();
        v.fence();
        assert_eq!(v.load::<u64>(40).unwrap(), 5);
        assert_eq!(v.line_size().get(), 32);
        assert!(v.ops().is_nop());
    }
}

/// The doorbell of [`Hardware`] on Linux: a shared futex on the 32-bit half of a region
/// word that sits at the word's address, so the threads of every process mapping the
/// region meet on it.
#[cfg(all(target_os = "linux", not(miri), not(loom)))]
mod futex {
    use super::{AtomicU64, Ordering};
    use std::time::Duration;

    /// The half of `word` at its own address, and its value.
    fn half(word: &AtomicU64) -> (*const u32, u32) {
        let v = word.load(Ordering::Relaxed);
        let first = if cfg!(target_endian = "little") {
            v
        } else {
            v >> 32
        };
        (std::ptr::from_ref(word).cast::<u32>(), first as u32)
    }

    /// Sleeps until woken or `timeout` passed (at once, if the word changed).
    pub(super) fn wait(word: &AtomicU64, timeout: Duration) {
        let (addr, value) = half(word);
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().try_into().unwrap_or(libc::time_t::MAX),
            tv_nsec: timeout.subsec_nanos().into(),
        };
        // SAFETY: `addr` is the 4-aligned address of the first half of a live, 8-aligned
        // atomic word of the mapping (borrowed for the call); FUTEX_WAIT only reads it,
        // atomically, and sleeps; `ts` outlives the call. Any error (a signal, the value
        // changed, a timeout) just ends the nap.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                addr,
                libc::FUTEX_WAIT,
                value,
                &raw const ts,
                std::ptr::null::<u32>(),
                0u32,
            );
        }
    }

    /// Wakes every sleeper on `word`.
    pub(super) fn wake(word: &AtomicU64) {
        let (addr, _) = half(word);
        // SAFETY: as in `wait`: a live, aligned word of the mapping; FUTEX_WAKE neither
        // reads nor writes it (it only names the wait queue).
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                addr,
                libc::FUTEX_WAKE,
                i32::MAX,
                std::ptr::null::<libc::timespec>(),
                std::ptr::null::<u32>(),
                0u32,
            );
        }
    }
}

/// Examples of the crate-private items above, as tests.
#[cfg(test)]
mod private_examples {
    #[test]
    fn with_ops_example() {
        use crate::cache::CacheOps;
        use crate::line::LineSize;
        use crate::mem::{Backing, Hardware, MemView};
        use std::sync::Arc;

        let mem = Arc::new(Backing::anonymous(1024).unwrap());
        let view = Hardware::with_ops(mem, CacheOps::nop(LineSize::new(128).unwrap()));
        assert_eq!(view.line_size().get(), 128);
        assert!(view.flush(0, 1024).is_ok());
    }
}
