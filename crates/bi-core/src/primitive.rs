//! One switch between real and model-checked synchronisation primitives.
//!
//! Everything in `bi-core` that synchronises threads imports its atomics and locks from
//! here. A normal build uses `std`; a build with `RUSTFLAGS="--cfg loom"` uses the
//! [loom](https://docs.rs/loom) model checker's versions, so the same code can be explored
//! under every interleaving loom considers.

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
        pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};
    }
}

#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) mod sync {
    pub(crate) use loom::sync::{Mutex, MutexGuard};
    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};
    }
}
