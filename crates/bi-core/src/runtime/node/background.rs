//! The periodic pass thread.
//!
//! An operating-system thread with its own flags and counters, so `std`'s atomics, not
//! the loom switch's: a loom model runs its passes on its own threads, never this one.

use crate::mem::MemView;
use crate::runtime::{BiError, NodeInner};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running background pass thread; dropping it (or calling [`stop`](Background::stop))
/// stops and joins the thread.
///
/// ```
/// use bi_core::runtime::testing::Setup;
/// use std::time::Duration;
///
/// let s = Setup::new(1, 0);
/// let bg = s.nodes[0].start_background(Duration::from_micros(100));
/// while bg.passes() < 2 {
///     std::thread::yield_now();
/// }
/// assert_eq!(bg.stop(), 0); // no pass failed
/// ```
#[derive(Debug)]
pub struct Background {
    stop: Arc<AtomicBool>,
    passes: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
    taken: Arc<AtomicBool>,
    /// The longest time, in nanoseconds, from the start of one completed pass to the end of
    /// the next completed one.
    span: Arc<AtomicU64>,
    /// The same since [`take_longest_span`](Background::take_longest_span) last asked.
    recent: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    pub(crate) fn start<V: MemView + 'static>(
        inner: Arc<NodeInner<V>>,
        period: Duration,
    ) -> Background {
        let stop = Arc::new(AtomicBool::new(false));
        let passes = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let taken = Arc::new(AtomicBool::new(false));
        let span = Arc::new(AtomicU64::new(0));
        let recent = Arc::new(AtomicU64::new(0));
        let (s, p, e, t) = (stop.clone(), passes.clone(), errors.clone(), taken.clone());
        let (longest, longest_recent) = (span.clone(), recent.clone());
        let thread = std::thread::Builder::new()
            .name(format!("bi-pass-{}", inner.node))
            .spawn(move || {
                // The start of the last pass that completed: a pass that failed may have
                // dropped nothing, so the span runs on to the next one that completes.
                let mut previous_start: Option<Instant> = None;
                while !s.load(Ordering::Acquire) {
                    let start = Instant::now();
                    let outcome = crate::runtime::pass::quiesce(&inner);
                    if outcome.is_ok() {
                        if let Some(before) = previous_start {
                            let ns = u64::try_from(before.elapsed().as_nanos()).unwrap_or(u64::MAX);
                            longest.fetch_max(ns, Ordering::Relaxed);
                            longest_recent.fetch_max(ns, Ordering::Relaxed);
                        }
                        previous_start = Some(start);
                    }
                    match outcome {
                        Ok(_) => p.fetch_add(1, Ordering::Release),
                        Err(BiError::NodeTaken { .. }) => {
                            // Another process runs this node now: stop passing for it.
                            e.fetch_add(1, Ordering::Release);
                            t.store(true, Ordering::Release);
                            break;
                        }
                        Err(_) => e.fetch_add(1, Ordering::Release),
                    };
                    // Passes start a period apart (not a period after the last one
                    // ended): a line stays stale for the period, not period plus pass.
                    std::thread::park_timeout(period.saturating_sub(start.elapsed()));
                }
            })
            .ok();
        Background {
            stop,
            passes,
            errors,
            taken,
            span,
            recent,
            thread,
        }
    }

    /// The longest time so far from the start of one pass to the end of the next: how long
    /// a line another node wrote back could stay stale here (add the clock skew bound to
    /// compare times taken on two nodes). It is about two periods while the thread gets
    /// the processor when it asks; on an oversubscribed machine, or where a pass itself
    /// is slow, it is what the staleness bound really was. A pass that failed counts as
    /// none (it may have dropped nothing): the span runs from the last completed pass's
    /// start to the next completed pass's end. Zero before two passes completed.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(1, 0);
    /// let bg = s.nodes[0].start_background(Duration::from_micros(100));
    /// while bg.passes() < 3 {
    ///     std::thread::yield_now();
    /// }
    /// assert!(bg.longest_span() > Duration::ZERO);
    /// ```
    pub fn longest_span(&self) -> Duration {
        Duration::from_nanos(self.span.load(Ordering::Relaxed))
    }

    /// The longest span, as [`longest_span`](Self::longest_span) measures it, of the
    /// passes that ended since this was last called (since the thread started, the first
    /// time); each call starts a new window. What the staleness bound was over a
    /// stretch of time: a process stopped and continued long ago (a debugger, a paused
    /// machine) makes the longest span of its life large for good, not this one.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(1, 0);
    /// let bg = s.nodes[0].start_background(Duration::from_micros(100));
    /// while bg.passes() < 3 {
    ///     std::thread::yield_now();
    /// }
    /// let window = bg.take_longest_span();
    /// assert!(window > Duration::ZERO && window <= bg.longest_span());
    /// ```
    pub fn take_longest_span(&self) -> Duration {
        Duration::from_nanos(self.recent.swap(0, Ordering::Relaxed))
    }

    /// Passes completed so far.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(1, 0);
    /// let bg = s.nodes[0].start_background(Duration::from_micros(100));
    /// while bg.passes() == 0 {
    ///     std::thread::yield_now();
    /// }
    /// assert!(s.nodes[0].record().unwrap().passes >= 1);
    /// ```
    pub fn passes(&self) -> u64 {
        self.passes.load(Ordering::Acquire)
    }

    /// Passes that returned an error so far.
    pub(crate) fn errors(&self) -> u64 {
        self.errors.load(Ordering::Acquire)
    }

    /// Whether the thread stopped because another process claimed this node
    /// ([`BiError::NodeTaken`]): this runtime no longer runs the node.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(1, 0);
    /// let bg = s.nodes[0].start_background(Duration::from_micros(100));
    /// while bg.passes() == 0 {
    ///     std::thread::yield_now();
    /// }
    /// assert!(!bg.node_taken()); // this runtime still runs node 0
    /// ```
    pub fn node_taken(&self) -> bool {
        self.taken.load(Ordering::Acquire)
    }

    /// Whether the thread could be started.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(1, 0);
    /// let bg = s.nodes[0].start_background(Duration::from_millis(1));
    /// assert!(bg.is_running());
    /// ```
    pub fn is_running(&self) -> bool {
        self.thread.is_some()
    }

    /// Stops and joins the thread; returns the number of failed passes.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    /// use std::time::Duration;
    ///
    /// let s = Setup::new(1, 0);
    /// let bg = s.nodes[0].start_background(Duration::from_micros(100));
    /// while bg.passes() == 0 {
    ///     std::thread::yield_now();
    /// }
    /// assert_eq!(bg.stop(), 0);
    /// let after = s.nodes[0].record().unwrap().passes;
    /// std::thread::sleep(Duration::from_millis(2));
    /// assert_eq!(s.nodes[0].record().unwrap().passes, after); // no more passes
    /// ```
    pub fn stop(mut self) -> u64 {
        self.halt();
        self.errors()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Examples of the crate-private items above, as tests.
#[cfg(test)]
mod private_examples {
    #[test]
    fn errors_example() {
        use crate::runtime::testing::Setup;
        use std::time::Duration;

        let s = Setup::new(1, 0);
        let bg = s.nodes[0].start_background(Duration::from_micros(100));
        // A node whose passes fail never gets there: fail, do not wait forever.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while bg.passes() < 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "{} passes, {} failed",
                bg.passes(),
                bg.errors()
            );
            std::thread::yield_now();
        }
        assert_eq!(bg.errors(), 0);
    }
}
