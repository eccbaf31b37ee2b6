//! The superstep barrier, which a failing partition can break so no one waits forever.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

/// The barrier was broken because some partition failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Aborted;

impl From<Aborted> for crate::error::GraphError {
    fn from(_: Aborted) -> Self {
        crate::error::GraphError::Aborted
    }
}

/// Where partitions meet between phases, and how one that failed releases the others.
pub(crate) trait Barrier: Sync {
    /// Waits until every partition arrives, or until the barrier is aborted.
    fn wait(&self) -> Result<(), Aborted>;
    /// Breaks the barrier: every current and future `wait` returns [`Aborted`].
    fn abort(&self);
    /// Whether the barrier was broken.
    fn is_aborted(&self) -> bool;
}

/// A reusable barrier for `n` threads with an abort switch.
#[derive(Debug)]
pub(crate) struct PhaseBarrier {
    n: usize,
    state: Mutex<(usize, u64)>,
    cv: Condvar,
    aborted: AtomicBool,
}

impl PhaseBarrier {
    pub fn new(n: usize) -> Self {
        PhaseBarrier {
            n,
            state: Mutex::new((0, 0)),
            cv: Condvar::new(),
            aborted: AtomicBool::new(false),
        }
    }
}

impl Barrier for PhaseBarrier {
    fn wait(&self) -> Result<(), Aborted> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if self.is_aborted() {
            return Err(Aborted);
        }
        state.0 += 1;
        if state.0 == self.n {
            state.0 = 0;
            state.1 = state.1.wrapping_add(1);
            self.cv.notify_all();
            return Ok(());
        }
        let generation = state.1;
        while state.1 == generation {
            if self.is_aborted() {
                return Err(Aborted);
            }
            state = self.cv.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        Ok(())
    }

    fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        let _guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.cv.notify_all();
    }

    fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_all_and_aborts() {
        let b = PhaseBarrier::new(2);
        std::thread::scope(|s| {
            let h = s.spawn(|| (b.wait(), b.wait()));
            assert_eq!(b.wait(), Ok(()));
            assert_eq!(b.wait(), Ok(()));
            assert_eq!(h.join().unwrap(), (Ok(()), Ok(())));
        });
        std::thread::scope(|s| {
            let h = s.spawn(|| b.wait());
            b.abort();
            assert_eq!(h.join().unwrap(), Err(Aborted));
        });
        assert_eq!(b.wait(), Err(Aborted));
    }
}
