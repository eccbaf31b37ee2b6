//! One switch between real and model-checked synchronisation primitives.
//!
//! Everything in `bi-core` that synchronises threads imports its atomics, fences and
//! locks from here. A normal build uses `std`; a build with `RUSTFLAGS="--cfg loom"` uses
//! the [loom](https://docs.rs/loom) model checker's versions, so the same code can be
//! explored under every interleaving loom considers. A test
//! (`tests/primitive_switch.rs`) reads the sources and fails on a primitive taken from
//! `std` anywhere else, except in the files it lists with the reason.
//!
//! [`plain`] is `std`'s in both builds: the emulator's internals, which loom explores
//! one whole emulated operation at a time.
//!
//! `compiler_fence` is `std`'s in both builds: it only stops the compiler from moving
//! memory accesses across it, which loom (whose every access is already a step) has no
//! notion of. Where a compiler fence is all a reader issues, the ordering comes from the
//! pass's process-wide barrier, which loom cannot model either: under loom the runtime
//! registers no barrier and its readers fence (`runtime::membarrier`).

#[cfg(not(loom))]
pub(crate) mod thread {
    pub(crate) use std::thread::yield_now;
}

#[cfg(loom)]
pub(crate) mod thread {
    pub(crate) use loom::thread::yield_now;
}

#[cfg(not(loom))]
#[allow(unused_imports)] // not every primitive is used by every build
pub(crate) mod sync {
    pub(crate) use std::sync::{Mutex, MutexGuard};
    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{
            AtomicBool, AtomicU64, AtomicUsize, Ordering, compiler_fence, fence,
        };
    }
}

#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) mod sync {
    pub(crate) use loom::sync::{Mutex, MutexGuard};
    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
        pub(crate) use std::sync::atomic::compiler_fence;
    }
}

/// Primitives that stay `std`'s under loom too: for the emulator's internal state, which
/// loom must not explore step by step. Under loom every emulated memory operation holds
/// the machine's one modelled lock (`mem::emulated`), so loom interleaves whole
/// operations (what the protocol is made of), never the words inside one; a fill's
/// eight loads or an oracle update are then not separate points to switch threads at.
/// Outside loom these are the same as [`sync`].
#[allow(unused_imports)]
pub(crate) mod plain {
    pub(crate) use std::sync::Mutex;
    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
    }
}
