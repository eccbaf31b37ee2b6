//! Real cache instructions: write back, invalidate and flush byte ranges, and fence.
//!
//! # Why
//!
//! Between nodes without cache coherence, the program itself moves lines between its
//! cache and memory. A writer *writes back* what it changed so other nodes can see it; a
//! reader *invalidates* what another node may have changed so its next load goes to
//! memory. Both are per line, and both are cheap only when batched:
//!
//! - **Batch, then fence once.** `clflush` is ordered with respect to every other
//!   `clflush` and store, so a loop of them pays the full memory round trip per line
//!   (well over 100 ns per line on the machines we measured). `clflushopt` and `clwb` are
//!   only weakly ordered: a loop issues them back to back, the processor overlaps the
//!   write-backs, and a single fence at the end waits for all of them (a few ns per line).
//!   So every range operation here issues one instruction per line with **no fence in the
//!   loop**, and [`CacheOps::fence`] is a separate call that the caller makes once per
//!   batch, after the last range.
//! - **x86 has no user-mode pure invalidate.** `invd` is privileged and would discard the
//!   whole cache; what user code has is `clflush`/`clflushopt`, which write a dirty line
//!   back *and then* drop it. So [`CacheOps::invalidate`] never loses data: a dirty line
//!   reaches memory before it leaves the cache, and invalidate and flush are the same
//!   instruction on x86. aarch64's `dc civac` behaves the same way (clean, then
//!   invalidate).
//! - **`clwb` keeps the line, `clflushopt` drops it.** After `clwb` (or `dc cvac`) the
//!   clean line stays cached, so the writer's own next read is still a hit; after
//!   `clflushopt` the next read goes to memory. Writers therefore prefer `clwb` for
//!   write-back, and only invalidation uses a dropping instruction.
//! - **The fence must wait for the flushes.** On x86 `sfence` orders the flushes but does
//!   not wait for them to complete, so a timed loop ending in `sfence` measures only the
//!   issue rate; [`CacheOps::fence`] is `mfence`, which waits. On aarch64 it is `dsb sy`.
//!
//! # How
//!
//! [`CacheOps::detect`] probes the processor once (memoised) and picks, on x86_64:
//! write-back = `clwb`, else `clflushopt`, else `clflush`; invalidate and flush =
//! `clflushopt`, else `clflush`. The `clwb` and `clflushopt` support bits come from CPUID
//! (leaf 7), and the line size from the CLFLUSH line size in CPUID leaf 1. On aarch64
//! write-back is `dc cvac`, invalidate and flush `dc civac`, the fence `dsb sy`, and the
//! line size the smallest data-cache line from `CTR_EL0`. Elsewhere (and under Miri, which
//! cannot execute inline assembly) the backend is [`Instruction::Nop`]: range operations do
//! nothing and the fence is a sequentially consistent atomic fence. That is correct on a
//! cache-coherent machine, which is the only kind those targets can be.
//!
//! A byte range `ptr .. ptr + len` is widened outward to whole lines (see
//! [`line_starts`]); a zero-length range touches no line.
//!
//! ```
//! use bi_core::cache::CacheOps;
//!
//! let ops = CacheOps::detect();
//! let data = vec![7u8; 1000];
//! ops.writeback_of(&data[..]); // one instruction per line, no fence yet
//! ops.invalidate_of(&data[10..20]);
//! ops.fence(); // one fence for the whole batch
//! assert!(data.iter().all(|&b| b == 7));
//! ```

use crate::line::LineSize;
use std::fmt;
use std::sync::OnceLock;

/// A cache-line instruction (or the absence of one) that a [`CacheOps`] issues per line.
///
/// ```
/// use bi_core::cache::{CacheOps, Instruction};
///
/// let ops = CacheOps::detect();
/// assert!(ops.writeback_instruction().is_supported());
/// assert!(Instruction::ALL.contains(&ops.invalidate_instruction()));
/// assert_eq!(Instruction::Clwb.to_string(), "clwb");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Instruction {
    /// x86 `clflush`: writes a dirty line back and drops it; ordered with every other
    /// `clflush` and store, so a loop of them is serialised.
    Clflush,
    /// x86 `clflushopt`: like `clflush` but weakly ordered, so a loop overlaps; needs a
    /// fence to complete.
    Clflushopt,
    /// x86 `clwb`: writes a dirty line back and may keep it cached (clean); weakly
    /// ordered.
    Clwb,
    /// aarch64 `dc cvac`: clean (write back) to the point of coherence, keeping the line.
    DcCvac,
    /// aarch64 `dc civac`: clean and invalidate to the point of coherence.
    DcCivac,
    /// Nothing: the backend for cache-coherent targets (and Miri).
    Nop,
}

impl Instruction {
    /// Every instruction, in declaration order.
    pub const ALL: [Instruction; 6] = [
        Instruction::Clflush,
        Instruction::Clflushopt,
        Instruction::Clwb,
        Instruction::DcCvac,
        Instruction::DcCivac,
        Instruction::Nop,
    ];

    /// The assembly mnemonic (`"nop"` for [`Instruction::Nop`]).
    ///
    /// ```
    /// use bi_core::cache::Instruction;
    ///
    /// assert_eq!(Instruction::DcCivac.name(), "dc civac");
    /// assert_eq!(Instruction::Nop.name(), "nop");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Instruction::Clflush => "clflush",
            Instruction::Clflushopt => "clflushopt",
            Instruction::Clwb => "clwb",
            Instruction::DcCvac => "dc cvac",
            Instruction::DcCivac => "dc civac",
            Instruction::Nop => "nop",
        }
    }

    /// Whether the instruction removes the line from the cache, so the next load reads
    /// memory. Only such instructions can invalidate. [`Instruction::Nop`] counts as
    /// dropping: on the coherent targets it serves, every load already sees memory.
    ///
    /// ```
    /// use bi_core::cache::Instruction;
    ///
    /// assert!(Instruction::Clflushopt.drops_line());
    /// assert!(!Instruction::Clwb.drops_line()); // writes back, keeps the line
    /// assert!(!Instruction::DcCvac.drops_line());
    /// ```
    pub const fn drops_line(self) -> bool {
        matches!(
            self,
            Instruction::Clflush
                | Instruction::Clflushopt
                | Instruction::DcCivac
                | Instruction::Nop
        )
    }

    /// Whether a loop of this instruction is serialised (each one waits for the previous).
    ///
    /// ```
    /// use bi_core::cache::Instruction;
    ///
    /// assert!(Instruction::Clflush.is_serialising());
    /// assert!(!Instruction::Clflushopt.is_serialising());
    /// ```
    pub const fn is_serialising(self) -> bool {
        matches!(self, Instruction::Clflush)
    }

    /// Whether this build, on this processor, can execute the instruction.
    ///
    /// [`Instruction::Nop`] is always supported. Under Miri nothing else is.
    ///
    /// ```
    /// use bi_core::cache::Instruction;
    ///
    /// assert!(Instruction::Nop.is_supported());
    /// // x86 and aarch64 instructions never both run on one processor.
    /// assert!(!(Instruction::Clflush.is_supported() && Instruction::DcCvac.is_supported()));
    /// ```
    pub fn is_supported(self) -> bool {
        self == Instruction::Nop || probe().supported & (1 << self as u32) != 0
    }
}

impl fmt::Display for Instruction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a [`CacheOps`] with the requested instructions cannot be built.
///
/// ```
/// use bi_core::cache::{CacheError, CacheOps, Instruction};
///
/// // `clwb` keeps lines, so it can never invalidate (if it runs here at all).
/// let e = CacheOps::with_instructions(Instruction::Nop, Instruction::Clwb).unwrap_err();
/// assert!(matches!(
///     e,
///     CacheError::CannotInvalidate(Instruction::Clwb) | CacheError::Unsupported(_)
/// ));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheError {
    /// This processor (or this build: another architecture, or Miri) cannot execute it.
    Unsupported(Instruction),
    /// The instruction keeps the line cached, so it cannot serve as an invalidation.
    CannotInvalidate(Instruction),
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::Unsupported(i) => write!(f, "`{i}` is not supported on this processor"),
            CacheError::CannotInvalidate(i) => {
                write!(f, "`{i}` keeps the line cached and cannot invalidate it")
            }
        }
    }
}

impl std::error::Error for CacheError {}

/// Start addresses of the lines that the byte range `addr .. addr + len` touches, in
/// ascending order: the start rounds down to a line boundary, the end rounds up, and a
/// zero-length range yields nothing.
///
/// This is exactly the iteration every range operation of [`CacheOps`] performs, one
/// instruction per yielded address.
///
/// ```
/// use bi_core::cache::line_starts;
/// use bi_core::line::LineSize;
///
/// let line = LineSize::new(64).unwrap();
/// let v: Vec<usize> = line_starts(line, 1000, 50).collect();
/// assert_eq!(v, [960, 1024]); // bytes 1000..1050 straddle a boundary at 1024
/// assert_eq!(line_starts(line, 1000, 0).count(), 0);
/// ```
#[inline]
pub fn line_starts(
    line: LineSize,
    addr: usize,
    len: usize,
) -> impl ExactSizeIterator<Item = usize> + DoubleEndedIterator + Clone {
    let size = line.get();
    // No overflow: every index is at most `line_of(usize::MAX)`, whose start is
    // `align_down(usize::MAX)`.
    line.lines(addr, len).map(move |i| i * size)
}

/// The cache operations of one processor: which instruction writes back, which
/// invalidates, and the line size they step by.
///
/// Cheap to copy. See the [module documentation](self) for why range operations never
/// fence and what each instruction does to the line.
///
/// ```
/// use bi_core::cache::{CacheOps, Instruction};
///
/// let ops = CacheOps::detect();
/// assert!(ops.invalidate_instruction().drops_line());
/// // Forcing an instruction the processor lacks is an error, not a crash.
/// if !Instruction::Clwb.is_supported() {
///     assert!(CacheOps::with_instructions(Instruction::Clwb, Instruction::Nop).is_err());
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheOps {
    writeback: Instruction,
    invalidate: Instruction,
    line: LineSize,
}

impl CacheOps {
    /// The best instructions this processor offers (probed once, then memoised).
    ///
    /// x86_64: write-back `clwb` > `clflushopt` > `clflush`, invalidate `clflushopt` >
    /// `clflush`. aarch64: `dc cvac` and `dc civac`. Other targets and Miri:
    /// [`Instruction::Nop`].
    ///
    /// ```
    /// use bi_core::cache::CacheOps;
    ///
    /// let ops = CacheOps::detect();
    /// assert_eq!(ops, CacheOps::detect()); // probed once
    /// assert_eq!(ops, CacheOps::default());
    /// assert!(ops.line_size().get() >= 8);
    /// ```
    pub fn detect() -> CacheOps {
        static DETECTED: OnceLock<CacheOps> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            let pick = |prefs: &[Instruction]| {
                prefs
                    .iter()
                    .copied()
                    .find(|i| i.is_supported())
                    .unwrap_or(Instruction::Nop)
            };
            use Instruction::*;
            CacheOps {
                writeback: pick(&[Clwb, Clflushopt, Clflush, DcCvac]),
                invalidate: pick(&[Clflushopt, Clflush, DcCivac]),
                line: probe().line,
            }
        })
    }

    /// `clflush` for everything: the serialising peer that benchmarks compare the batched
    /// instructions against. An error where `clflush` does not exist (not x86, or Miri).
    ///
    /// ```
    /// use bi_core::cache::{CacheOps, Instruction};
    ///
    /// match CacheOps::clflush_only() {
    ///     Ok(ops) => assert_eq!(ops.writeback_instruction(), Instruction::Clflush),
    ///     Err(_) => assert!(!Instruction::Clflush.is_supported()), // not x86
    /// }
    /// ```
    pub fn clflush_only() -> Result<CacheOps, CacheError> {
        CacheOps::with_instructions(Instruction::Clflush, Instruction::Clflush)
    }

    /// Forces specific instructions, with the detected line size.
    ///
    /// Errors if this processor cannot execute either instruction, or if `invalidate`
    /// keeps lines cached (`clwb`, `dc cvac`). [`Instruction::Nop`] is accepted for either
    /// role; it is only correct where the memory is cache-coherent.
    ///
    /// ```
    /// use bi_core::cache::{CacheError, CacheOps, Instruction};
    ///
    /// let e = CacheOps::with_instructions(Instruction::Nop, Instruction::DcCvac).unwrap_err();
    /// assert!(matches!(
    ///     e,
    ///     CacheError::CannotInvalidate(_) | CacheError::Unsupported(_)
    /// ));
    /// let nop = CacheOps::with_instructions(Instruction::Nop, Instruction::Nop).unwrap();
    /// assert!(nop.is_nop());
    /// ```
    pub fn with_instructions(
        writeback: Instruction,
        invalidate: Instruction,
    ) -> Result<CacheOps, CacheError> {
        for i in [writeback, invalidate] {
            if !i.is_supported() {
                return Err(CacheError::Unsupported(i));
            }
        }
        if !invalidate.drops_line() {
            return Err(CacheError::CannotInvalidate(invalidate));
        }
        Ok(CacheOps {
            writeback,
            invalidate,
            line: probe().line,
        })
    }

    /// The no-op backend with the given line size: range operations do nothing and
    /// [`fence`](CacheOps::fence) is an atomic fence. Correct only on cache-coherent
    /// memory; useful to measure or test code paths without cache instructions.
    ///
    /// ```
    /// use bi_core::cache::{CacheOps, Instruction};
    /// use bi_core::line::LineSize;
    ///
    /// let ops = CacheOps::nop(LineSize::X86);
    /// assert!(ops.is_nop());
    /// assert_eq!(ops.invalidate_instruction(), Instruction::Nop);
    /// ```
    pub const fn nop(line: LineSize) -> CacheOps {
        CacheOps {
            writeback: Instruction::Nop,
            invalidate: Instruction::Nop,
            line,
        }
    }

    /// The instruction [`writeback`](CacheOps::writeback) issues per line.
    ///
    /// ```
    /// use bi_core::cache::{CacheOps, Instruction};
    ///
    /// let ops = CacheOps::detect();
    /// let w = ops.writeback_instruction();
    /// assert!(w.is_supported());
    /// assert!(w != Instruction::DcCivac); // never picked for write-back
    /// ```
    pub const fn writeback_instruction(&self) -> Instruction {
        self.writeback
    }

    /// The instruction [`invalidate`](CacheOps::invalidate) and
    /// [`flush`](CacheOps::flush) issue per line.
    ///
    /// ```
    /// use bi_core::cache::CacheOps;
    ///
    /// assert!(CacheOps::detect().invalidate_instruction().drops_line());
    /// ```
    pub const fn invalidate_instruction(&self) -> Instruction {
        self.invalidate
    }

    /// The line size range operations step by.
    ///
    /// ```
    /// use bi_core::cache::CacheOps;
    /// use bi_core::line::LineSize;
    ///
    /// assert_eq!(CacheOps::nop(LineSize::new(128).unwrap()).line_size().get(), 128);
    /// ```
    pub const fn line_size(&self) -> LineSize {
        self.line
    }

    /// Whether both operations are [`Instruction::Nop`].
    ///
    /// ```
    /// use bi_core::cache::{CacheOps, Instruction};
    /// use bi_core::line::LineSize;
    ///
    /// assert!(CacheOps::nop(LineSize::X86).is_nop());
    /// if Instruction::Clflush.is_supported() {
    ///     assert!(!CacheOps::detect().is_nop()); // x86 has real instructions
    /// }
    /// ```
    pub fn is_nop(&self) -> bool {
        self.writeback == Instruction::Nop && self.invalidate == Instruction::Nop
    }

    /// Starts writing back every line that `ptr .. ptr + len` touches (dirty lines go to
    /// memory; with `clwb` or `dc cvac` they stay cached). Does not wait: call
    /// [`fence`](CacheOps::fence) after the batch.
    ///
    /// # Safety
    ///
    /// `ptr .. ptr + len` must be memory mapped readable in this process for the duration
    /// of the call (cache instructions fault on unmapped addresses like a load would). The
    /// range's lines are then mapped too, since pages are whole lines. The contents are
    /// never changed.
    ///
    /// ```
    /// use bi_core::cache::CacheOps;
    ///
    /// let data = [7u8; 256];
    /// let ops = CacheOps::detect();
    /// // SAFETY: `data` is mapped and readable for the whole call.
    /// unsafe { ops.writeback(data.as_ptr(), data.len()) };
    /// ops.fence();
    /// assert_eq!(data, [7; 256]); // contents never change
    /// ```
    #[inline]
    pub unsafe fn writeback(&self, ptr: *const u8, len: usize) {
        // SAFETY: forwarded from this function's contract.
        unsafe { each_line(self.writeback, self.line, ptr, len) }
    }

    /// Starts invalidating every line that `ptr .. ptr + len` touches: dirty lines are
    /// written back first, then dropped, so the next load reads memory. Does not wait:
    /// call [`fence`](CacheOps::fence) after the batch.
    ///
    /// # Safety
    ///
    /// As for [`writeback`](CacheOps::writeback): the range must be mapped readable. No
    /// data is lost, because a dirty line is written back before it is dropped.
    ///
    /// ```
    /// use bi_core::cache::CacheOps;
    ///
    /// let mut data = vec![0u64; 32];
    /// data[5] = 99; // dirty in this cache
    /// let ops = CacheOps::detect();
    /// // SAFETY: `data` is mapped and readable for the whole call.
    /// unsafe { ops.invalidate(data.as_ptr().cast(), 8 * data.len()) };
    /// ops.fence();
    /// assert_eq!(data[5], 99); // written back before being dropped
    /// ```
    #[inline]
    pub unsafe fn invalidate(&self, ptr: *const u8, len: usize) {
        // SAFETY: forwarded from this function's contract.
        unsafe { each_line(self.invalidate, self.line, ptr, len) }
    }

    /// Starts writing back and then dropping every line that `ptr .. ptr + len` touches.
    /// On x86 and aarch64 the invalidating instruction already writes back, so this issues
    /// the same single instruction per line as [`invalidate`](CacheOps::invalidate).
    ///
    /// # Safety
    ///
    /// As for [`writeback`](CacheOps::writeback).
    ///
    /// ```
    /// use bi_core::cache::CacheOps;
    ///
    /// let data = [1u32; 64];
    /// let ops = CacheOps::detect();
    /// // SAFETY: `data` is mapped and readable for the whole call.
    /// unsafe { ops.flush(data.as_ptr().cast(), 4 * data.len()) };
    /// ops.fence();
    /// assert_eq!(data.iter().sum::<u32>(), 64);
    /// ```
    #[inline]
    pub unsafe fn flush(&self, ptr: *const u8, len: usize) {
        // SAFETY: forwarded from this function's contract.
        unsafe { each_line(self.invalidate, self.line, ptr, len) }
    }

    /// Waits until every cache operation this thread issued has completed, and orders
    /// them before later loads and stores: `mfence` on x86 (not `sfence`, which does not
    /// wait for flushes), `dsb sy` on aarch64, an atomic `SeqCst` fence elsewhere.
    ///
    /// ```
    /// use bi_core::cache::CacheOps;
    /// use bi_core::line::LineSize;
    ///
    /// let ops = CacheOps::nop(LineSize::X86);
    /// let x = [3u8; 64];
    /// ops.flush_of(&x);
    /// ops.fence(); // still a real fence on the no-op backend
    /// assert_eq!(x[0], 3);
    /// ```
    #[inline]
    pub fn fence(&self) {
        imp::fence();
    }

    /// Waits until every write-back and store this thread issued has completed before
    /// any later store: `sfence` on x86 (cheaper than `mfence`: later loads may pass
    /// it), a full fence elsewhere. What a publication needs between writing an object
    /// back and storing the word that links to it; not enough before a load that must
    /// miss an invalidated line (use [`fence`](Self::fence)).
    ///
    /// ```
    /// use bi_core::cache::CacheOps;
    ///
    /// let ops = CacheOps::detect();
    /// let mut x = [0u8; 64];
    /// x[0] = 1;
    /// ops.writeback_of(&x);
    /// ops.store_fence();
    /// assert_eq!(x[0], 1);
    /// ```
    #[inline]
    pub fn store_fence(&self) {
        imp::store_fence();
    }

    /// [`writeback`](CacheOps::writeback) over the memory of `value` (a slice, an array of
    /// atomics, any value); safe because a reference proves the memory is mapped.
    ///
    /// ```
    /// use bi_core::cache::CacheOps;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    ///
    /// let words: Vec<AtomicU64> = (0..16).map(AtomicU64::new).collect();
    /// let ops = CacheOps::detect();
    /// ops.writeback_of(&words[..]);
    /// ops.fence();
    /// assert_eq!(words[15].load(Ordering::Relaxed), 15);
    /// ```
    #[inline]
    pub fn writeback_of<T: ?Sized>(&self, value: &T) {
        // SAFETY: `value` is a live reference, so its `size_of_val` bytes are mapped
        // readable for the whole call; the instruction does not change them.
        unsafe { self.writeback((value as *const T).cast(), size_of_val(value)) }
    }

    /// [`invalidate`](CacheOps::invalidate) over the memory of `value`; safe because a
    /// reference proves the memory is mapped and invalidation writes dirty lines back
    /// before dropping them, so the contents never change.
    ///
    /// ```
    /// use bi_core::cache::CacheOps;
    ///
    /// let record = (1u64, 2u64);
    /// let ops = CacheOps::detect();
    /// ops.invalidate_of(&record);
    /// ops.fence();
    /// assert_eq!(record, (1, 2));
    /// ```
    #[inline]
    pub fn invalidate_of<T: ?Sized>(&self, value: &T) {
        // SAFETY: as in `writeback_of`; invalidation preserves the contents.
        unsafe { self.invalidate((value as *const T).cast(), size_of_val(value)) }
    }

    /// [`flush`](CacheOps::flush) over the memory of `value`.
    ///
    /// ```
    /// use bi_core::cache::CacheOps;
    ///
    /// let s = String::from("write me back");
    /// let ops = CacheOps::detect();
    /// ops.flush_of(s.as_bytes());
    /// ops.fence();
    /// assert_eq!(s, "write me back");
    /// ```
    #[inline]
    pub fn flush_of<T: ?Sized>(&self, value: &T) {
        // SAFETY: as in `writeback_of`; flushing preserves the contents.
        unsafe { self.flush((value as *const T).cast(), size_of_val(value)) }
    }
}

impl Default for CacheOps {
    fn default() -> Self {
        CacheOps::detect()
    }
}

/// Issues `instr` once per line of `ptr .. ptr + len`, with no fence.
///
/// The dispatch on the instruction is outside the loop, so each loop body is one
/// instruction plus the address increment.
///
/// # Safety
///
/// `ptr .. ptr + len` is mapped readable in this process, and `instr` is supported (every
/// `CacheOps` is built only from supported instructions).
#[inline]
unsafe fn each_line(instr: Instruction, line: LineSize, ptr: *const u8, len: usize) {
    match instr {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        Instruction::Clflush => for_each_line(line, ptr, len, |p| {
            // SAFETY: `p` is the start of a line of the caller's mapped range, and the
            // instruction is supported (both by this function's contract).
            unsafe { imp::clflush(p) }
        }),
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        Instruction::Clflushopt => for_each_line(line, ptr, len, |p| {
            // SAFETY: as for `Clflush`.
            unsafe { imp::clflushopt(p) }
        }),
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        Instruction::Clwb => for_each_line(line, ptr, len, |p| {
            // SAFETY: as for `Clflush`.
            unsafe { imp::clwb(p) }
        }),
        #[cfg(all(target_arch = "aarch64", not(miri)))]
        Instruction::DcCvac => for_each_line(line, ptr, len, |p| {
            // SAFETY: `p` is the start of a line of the caller's mapped range.
            unsafe { imp::dc_cvac(p) }
        }),
        #[cfg(all(target_arch = "aarch64", not(miri)))]
        Instruction::DcCivac => for_each_line(line, ptr, len, |p| {
            // SAFETY: as for `DcCvac`.
            unsafe { imp::dc_civac(p) }
        }),
        // `Nop`, and instructions that no `CacheOps` of this build can hold.
        _ => {
            let _ = (line, ptr, len);
        }
    }
}

/// Calls `op` with the start of every line that `ptr .. ptr + len` touches. Generic, so
/// each call site inlines into a plain loop of one instruction per line.
#[cfg(all(any(target_arch = "x86_64", target_arch = "aarch64"), not(miri)))]
#[inline(always)]
fn for_each_line(line: LineSize, ptr: *const u8, len: usize, mut op: impl FnMut(*const u8)) {
    for a in line_starts(line, ptr.addr(), len) {
        op(ptr.with_addr(a));
    }
}

/// What the processor supports, probed once.
#[derive(Clone, Copy, Debug)]
struct Probe {
    /// Bit `i as u32` set when `Instruction` `i` is supported.
    supported: u32,
    line: LineSize,
}

fn probe() -> Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    *PROBE.get_or_init(imp::probe)
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
#[path = "x86_64.rs"]
mod imp;

#[cfg(all(target_arch = "aarch64", not(miri)))]
#[path = "aarch64.rs"]
mod imp;

/// The no-op backend: coherent-only targets, and Miri (which cannot run inline assembly).
#[cfg(not(any(
    all(target_arch = "x86_64", not(miri)),
    all(target_arch = "aarch64", not(miri))
)))]
#[path = "nop.rs"]
mod imp;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn starts(line: usize, addr: usize, len: usize) -> Vec<usize> {
        line_starts(LineSize::new(line).unwrap(), addr, len).collect()
    }

    #[test]
    fn zero_length_touches_no_line() {
        for l in [32, 64, 128] {
            assert!(starts(l, 0, 0).is_empty());
            assert!(starts(l, 12345, 0).is_empty());
            assert!(starts(l, usize::MAX, 0).is_empty());
        }
    }

    #[test]
    fn rounding_outward_for_32_64_128() {
        for l in [32usize, 64, 128] {
            let base = 10 * l;
            // Aligned single line.
            assert_eq!(starts(l, base, l), [base]);
            // One byte anywhere in a line.
            assert_eq!(starts(l, base + l - 1, 1), [base]);
            // Misaligned start, aligned end.
            assert_eq!(starts(l, base + 3, l - 3), [base]);
            // Aligned start, misaligned end: spills into the next line.
            assert_eq!(starts(l, base, l + 1), [base, base + l]);
            // Two bytes straddling a boundary.
            assert_eq!(starts(l, base + l - 1, 2), [base, base + l]);
            // Misaligned both ends, spanning several lines.
            assert_eq!(
                starts(l, base + 1, 3 * l),
                [base, base + l, base + 2 * l, base + 3 * l]
            );
            // Count matches the closed-form line count.
            for (addr, len) in [(base + 5, 7 * l), (base, 16 * l), (base + l / 2, 1)] {
                let n = starts(l, addr, len).len();
                let first = addr / l;
                let last = (addr + len - 1) / l;
                assert_eq!(n, last - first + 1, "line {l} addr {addr} len {len}");
            }
        }
    }

    #[test]
    fn top_of_address_space_does_not_overflow() {
        let line = LineSize::X86;
        let v: Vec<usize> = line_starts(line, usize::MAX - 10, 100).collect();
        assert_eq!(v, [line.align_down(usize::MAX)]);
    }

    #[test]
    fn with_instructions_checks_support_and_role() {
        for i in Instruction::ALL {
            match CacheOps::with_instructions(i, Instruction::Nop) {
                Ok(ops) => {
                    assert!(i.is_supported());
                    assert_eq!(ops.writeback_instruction(), i);
                }
                Err(e) => assert_eq!(e, CacheError::Unsupported(i)),
            }
            match CacheOps::with_instructions(Instruction::Nop, i) {
                Ok(ops) => {
                    assert!(i.is_supported() && i.drops_line());
                    assert_eq!(ops.invalidate_instruction(), i);
                }
                Err(CacheError::Unsupported(j)) => assert!(j == i && !i.is_supported()),
                Err(CacheError::CannotInvalidate(j)) => assert!(j == i && !i.drops_line()),
            }
        }
        assert!(
            !CacheError::Unsupported(Instruction::Clwb)
                .to_string()
                .is_empty()
        );
    }

    #[test]
    fn detect_is_memoised_and_consistent() {
        let a = CacheOps::detect();
        assert_eq!(a, CacheOps::detect());
        assert!(a.writeback_instruction().is_supported());
        assert!(a.invalidate_instruction().is_supported());
        assert!(a.invalidate_instruction().drops_line());
        assert_eq!(CacheOps::default(), a);
    }

    #[test]
    #[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
    fn nop_backend_without_asm() {
        let ops = CacheOps::detect();
        assert!(ops.is_nop());
        assert!(CacheOps::clflush_only().is_err());
        let data = [1u64; 20];
        ops.writeback_of(&data);
        ops.flush_of(&data[3..]);
        ops.fence();
        assert_eq!(data, [1u64; 20]);
    }

    #[test]
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    fn x86_detection_prefers_weakly_ordered() {
        let ops = CacheOps::detect();
        assert_eq!(ops.line_size(), LineSize::X86);
        let expect_wb = [
            Instruction::Clwb,
            Instruction::Clflushopt,
            Instruction::Clflush,
        ]
        .into_iter()
        .find(|i| i.is_supported())
        .unwrap();
        assert_eq!(ops.writeback_instruction(), expect_wb);
        let expect_inv = if Instruction::Clflushopt.is_supported() {
            Instruction::Clflushopt
        } else {
            Instruction::Clflush
        };
        assert_eq!(ops.invalidate_instruction(), expect_inv);
        assert!(CacheOps::clflush_only().is_ok());
        assert!(!Instruction::DcCvac.is_supported());
    }

    /// Every supported combination of instructions, plus the no-op backend.
    fn all_supported_ops() -> Vec<CacheOps> {
        let mut v = vec![CacheOps::detect(), CacheOps::nop(LineSize::X86)];
        for wb in Instruction::ALL {
            for inv in Instruction::ALL {
                if let Ok(ops) = CacheOps::with_instructions(wb, inv) {
                    v.push(ops);
                }
            }
        }
        v
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "issues cache instructions through inline asm, which Miri cannot run"
    )]
    fn data_survives_writeback_invalidate_flush() {
        for ops in all_supported_ops() {
            let mut buf = vec![0u8; 4096 + 7];
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (i * 31 % 251) as u8;
            }
            let expect = buf.clone();
            // Misaligned sub-ranges, spanning lines, and zero-length ones.
            for (start, len) in [(0, buf.len()), (3, 200), (63, 2), (100, 0), (4096, 7)] {
                let r = &buf[start..start + len];
                ops.writeback_of(r);
                ops.invalidate_of(r);
                ops.flush_of(r);
            }
            ops.fence();
            assert_eq!(buf, expect, "{ops:?}");

            // Modify, write back, invalidate, fence, read again.
            for b in buf.iter_mut().skip(5).step_by(3) {
                *b = b.wrapping_add(1);
            }
            let expect = buf.clone();
            ops.writeback_of(&buf[..]);
            ops.fence();
            ops.invalidate_of(&buf[1..]);
            ops.fence();
            assert_eq!(buf, expect, "{ops:?}");

            // Atomic words: store, flush, fence, load.
            let words: Vec<AtomicU64> = (0..64).map(AtomicU64::new).collect();
            for w in &words {
                w.fetch_add(1000, Ordering::Relaxed);
            }
            ops.flush_of(&words[..]);
            ops.fence();
            for (i, w) in words.iter().enumerate() {
                assert_eq!(w.load(Ordering::Relaxed), i as u64 + 1000);
            }
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "issues cache instructions through inline asm, which Miri cannot run"
    )]
    fn raw_pointer_ops_on_misaligned_ranges() {
        let ops = CacheOps::detect();
        let buf = vec![0xA5u8; 1024];
        let p = buf.as_ptr();
        for (off, len) in [(0, 0), (1, 1), (31, 66), (65, 127), (1000, 24)] {
            // SAFETY: `off + len <= buf.len()`, so the range lies inside the live vector.
            unsafe {
                ops.writeback(p.add(off), len);
                ops.invalidate(p.add(off), len);
                ops.flush(p.add(off), len);
            }
        }
        ops.fence();
        assert!(buf.iter().all(|&b| b == 0xA5));
    }

    #[test]
    fn instruction_names_and_roles() {
        assert_eq!(Instruction::Clwb.to_string(), "clwb");
        assert_eq!(Instruction::DcCivac.name(), "dc civac");
        assert!(!Instruction::Clwb.drops_line());
        assert!(!Instruction::DcCvac.drops_line());
        assert!(Instruction::Clflush.is_serialising());
        assert!(!Instruction::Clflushopt.is_serialising());
        let nop = CacheOps::nop(LineSize::new(128).unwrap());
        assert!(nop.is_nop());
        assert_eq!(nop.line_size().get(), 128);
    }
}
