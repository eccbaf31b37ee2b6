//! aarch64 backend: `dc cvac`, `dc civac` and `dsb sy`, line size from `CTR_EL0`.

use super::{Instruction, Probe};
use crate::line::LineSize;
use core::arch::asm;
use std::sync::atomic::{Ordering, compiler_fence};

pub(super) fn probe() -> Probe {
    let ctr: u64;
    // SAFETY: reading CTR_EL0 has no side effects; Linux allows (or emulates) it at
    // EL0.
    unsafe { asm!("mrs {}, ctr_el0", out(reg) ctr, options(nomem, nostack, preserves_flags)) }
    // CTR_EL0.DminLine (bits 19:16) is log2 of the smallest data line in 4-byte words.
    let dmin = ((ctr >> 16) & 0xf) as u32;
    let line = LineSize::new(4usize << dmin).unwrap_or(LineSize::X86);
    let supported = (1 << Instruction::DcCvac as u32) | (1 << Instruction::DcCivac as u32);
    Probe { supported, line }
}

/// # Safety
/// `p` is mapped readable.
#[inline(always)]
pub(super) unsafe fn dc_cvac(p: *const u8) {
    // SAFETY: by this function's contract; Linux enables EL0 cache maintenance
    // (SCTLR_EL1.UCI). Not `nomem`, so earlier stores stay before it.
    unsafe { asm!("dc cvac, {}", in(reg) p, options(nostack, preserves_flags)) }
}

/// # Safety
/// `p` is mapped readable.
#[inline(always)]
pub(super) unsafe fn dc_civac(p: *const u8) {
    // SAFETY: as for `dc_cvac`.
    unsafe { asm!("dc civac, {}", in(reg) p, options(nostack, preserves_flags)) }
}

/// A full `dsb sy`: a store-only barrier is not documented to wait for cache
/// maintenance on every implementation.
#[inline(always)]
pub(super) fn store_fence() {
    fence();
}

#[inline(always)]
pub(super) fn fence() {
    compiler_fence(Ordering::SeqCst);
    // SAFETY: `dsb sy` is a barrier available at EL0; it touches no memory.
    unsafe { asm!("dsb sy", options(nostack, preserves_flags)) }
    compiler_fence(Ordering::SeqCst);
}
