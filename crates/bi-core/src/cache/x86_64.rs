//! x86_64 backend: CPUID probing, `clflush`, `clflushopt`, `clwb`, `mfence` and `sfence`.

use super::{Instruction, Probe};
use crate::line::LineSize;
use core::arch::asm;
use core::arch::x86_64::{__cpuid, __cpuid_count};
use std::sync::atomic::{Ordering, compiler_fence};

pub(super) fn probe() -> Probe {
    // SAFETY: CPUID exists on every x86_64 processor and only reads identification
    // registers. (The intrinsics are safe functions on recent toolchains and unsafe on
    // older ones, hence the `allow`.)
    #[allow(unused_unsafe)]
    let (leaf1, leaf7) = unsafe {
        let max = __cpuid(0).eax;
        let leaf7 = if max >= 7 { __cpuid_count(7, 0).ebx } else { 0 };
        (__cpuid(1), leaf7)
    };
    let mut supported = 0;
    if leaf1.edx & (1 << 19) != 0 {
        supported |= 1 << Instruction::Clflush as u32;
    }
    if leaf7 & (1 << 23) != 0 {
        supported |= 1 << Instruction::Clflushopt as u32;
    }
    if leaf7 & (1 << 24) != 0 {
        supported |= 1 << Instruction::Clwb as u32;
    }
    // CPUID.1:EBX[15:8] is the CLFLUSH line size in units of 8 bytes.
    let bytes = ((leaf1.ebx >> 8) & 0xff) as usize * 8;
    let line = LineSize::new(bytes).unwrap_or(LineSize::X86);
    Probe { supported, line }
}

/// # Safety
/// `p` is mapped readable; the processor supports `clflush`.
#[inline(always)]
pub(super) unsafe fn clflush(p: *const u8) {
    // SAFETY: by this function's contract. The asm is not marked `nomem`, so the
    // compiler keeps earlier stores to the line before it.
    unsafe { asm!("clflush [{}]", in(reg) p, options(nostack, preserves_flags)) }
}

/// # Safety
/// `p` is mapped readable; the processor supports `clflushopt`.
#[inline(always)]
pub(super) unsafe fn clflushopt(p: *const u8) {
    // SAFETY: by this function's contract; see `clflush`.
    unsafe { asm!("clflushopt [{}]", in(reg) p, options(nostack, preserves_flags)) }
}

/// # Safety
/// `p` is mapped readable; the processor supports `clwb`.
#[inline(always)]
pub(super) unsafe fn clwb(p: *const u8) {
    // SAFETY: by this function's contract; see `clflush`.
    unsafe { asm!("clwb [{}]", in(reg) p, options(nostack, preserves_flags)) }
}

/// `sfence`: orders every earlier store and `clwb` / `clflushopt` before every later
/// store (the write-backs complete first), not before later loads.
#[inline(always)]
pub(super) fn store_fence() {
    compiler_fence(Ordering::SeqCst);
    // SAFETY: `sfence` is part of SSE, which every x86_64 processor has; it touches no
    // memory and no registers.
    unsafe { asm!("sfence", options(nostack, preserves_flags)) }
    compiler_fence(Ordering::SeqCst);
}

#[inline(always)]
pub(super) fn fence() {
    compiler_fence(Ordering::SeqCst);
    // SAFETY: `mfence` is part of SSE2, which every x86_64 processor has; it touches
    // no memory and no registers.
    unsafe { asm!("mfence", options(nostack, preserves_flags)) }
    compiler_fence(Ordering::SeqCst);
}
