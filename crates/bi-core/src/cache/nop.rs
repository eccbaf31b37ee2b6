//! The no-op backend: coherent-only targets, and Miri (which cannot run inline assembly).

use super::Probe;
use crate::line::LineSize;
use std::sync::atomic::{Ordering, fence as atomic_fence};

pub(super) fn probe() -> Probe {
    Probe {
        supported: 0,
        line: LineSize::X86,
    }
}

#[inline(always)]
pub(super) fn store_fence() {
    atomic_fence(Ordering::SeqCst);
}

#[inline(always)]
pub(super) fn fence() {
    atomic_fence(Ordering::SeqCst);
}
