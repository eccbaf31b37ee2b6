//! The emulator's notion of time: one true clock for the oracle, skewed views for nodes.
//!
//! Staleness is a duration ("this copy has been out of date for 40 ticks"), so the oracle
//! needs a clock every node agrees on. Real machines have no such clock: each node reads
//! its own, and the runtime has to allow for the difference between them (the skew bound
//! `D`). The emulator keeps both: the *true* time, which only the oracle uses, and a
//! per-node *local* time, true time plus a fixed seeded offset in `-D ..= D`, which is what
//! code under test should read.
//!
//! The default source is virtual: a count that moves by one at each emulated memory
//! operation (on any node) and by explicit amounts, so a single-threaded test sees exactly
//! the same times on every run. A real source (nanoseconds since creation) is available for
//! experiments where wall time matters.

use super::config::ClockSource;
use crate::primitive::plain::atomic::{AtomicU64, Ordering};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;

/// The true clock shared by all nodes.
///
/// Virtual time is the sum of explicit advances and one operation counter per node. A
/// node's counter only changes under that node's cache lock, so ticking it is a plain load
/// and store rather than a read-modify-write on a line every node contends for, which
/// keeps the load hit path short; the sum still only moves forward, and a
/// single-threaded program sees exactly one tick per operation.
#[derive(Debug)]
pub(super) struct Clock {
    source: ClockSource,
    /// Explicit advances.
    offset: AtomicU64,
    /// Operations per node (virtual source only).
    ticks: Box<[Ticks]>,
    start: Instant,
}

/// One node's operation counter, alone on its cache lines so nodes do not share them.
#[derive(Debug)]
#[repr(align(128))]
struct Ticks(AtomicU64);

impl Clock {
    pub(super) fn new(source: ClockSource, nodes: usize) -> Clock {
        Clock {
            source,
            offset: AtomicU64::new(0),
            ticks: (0..nodes).map(|_| Ticks(AtomicU64::new(0))).collect(),
            start: Instant::now(),
        }
    }

    /// The current true time.
    pub(super) fn now(&self) -> u64 {
        let base = read(&self.offset);
        match self.source {
            ClockSource::Virtual => self
                .ticks
                .iter()
                .fold(base, |t, n| t.wrapping_add(read(&n.0))),
            ClockSource::Real => base.saturating_add(self.elapsed_ns()),
            ClockSource::Host => base.saturating_add(host_ns()),
        }
    }

    /// Marks one operation of `node`. The caller holds `node`'s cache lock, which is what
    /// makes the unsynchronised increment exact.
    #[inline]
    pub(super) fn tick(&self, node: usize) {
        if self.source == ClockSource::Virtual {
            let t = &self.ticks[node].0;
            t.store(t.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        }
    }

    /// Moves time forward by `dt`.
    pub(super) fn advance(&self, dt: u64) {
        self.offset.fetch_add(dt, Ordering::Relaxed);
    }

    fn elapsed_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Nanoseconds on this host's monotonic clock (`CLOCK_MONOTONIC`): one clock for every
/// process of the host, which only moves forward at the rate of time. The wall clock is
/// no measure of durations: a host's time service steps it (a guest's by half a
/// millisecond now and then), and a duration taken across a step is off by the step.
/// Under Miri, which does not model the system clock everywhere, the time since a
/// process-wide base (as monotonic, within the one process Miri runs).
///
/// ```
/// use bi_core::mem::host_ns;
///
/// let (a, b) = (host_ns(), host_ns());
/// assert!(b >= a);
/// ```
#[cfg(not(miri))]
pub fn host_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes one `timespec` through the pointer, which points to
    // the local `t`, alive and writable for the whole call.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    if r != 0 {
        return 0;
    }
    let (secs, nanos) = (u64::try_from(t.tv_sec), u64::try_from(t.tv_nsec));
    secs.ok().zip(nanos.ok()).map_or(0, |(s, n)| {
        s.saturating_mul(1_000_000_000).saturating_add(n)
    })
}

/// Nanoseconds since a process-wide base (Miri: see the other `host_ns`).
#[cfg(miri)]
pub fn host_ns() -> u64 {
    use std::sync::OnceLock;
    static BASE: OnceLock<Instant> = OnceLock::new();
    let base = *BASE.get_or_init(Instant::now);
    u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// One counter of the true clock.
#[inline]
fn read(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// Draws each node's fixed clock offset from `-bound ..= bound`, reproducibly from `seed`.
pub(super) fn skews(seed: u64, nodes: usize, bound: u64) -> Vec<i64> {
    let bound = i64::try_from(bound).unwrap_or(i64::MAX);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xC10C_C10C_C10C_C10C);
    (0..nodes)
        .map(|_| {
            if bound == 0 {
                0
            } else {
                rng.random_range(-bound..=bound)
            }
        })
        .collect()
}

/// `now` as seen by a node whose clock is `skew` ahead (clamped to the `u64` range).
#[inline]
pub(super) fn local(now: u64, skew: i64) -> u64 {
    now.saturating_add_signed(skew)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_clock_is_deterministic() {
        let c = Clock::new(ClockSource::Virtual, 2);
        assert_eq!(c.now(), 0);
        c.tick(0);
        assert_eq!(c.now(), 1);
        c.tick(1);
        c.tick(0);
        assert_eq!(c.now(), 3);
        c.advance(10);
        assert_eq!(c.now(), 13);
    }

    #[test]
    fn real_clock_moves_forward() {
        let c = Clock::new(ClockSource::Real, 1);
        let a = c.now();
        c.tick(0);
        c.advance(1_000);
        assert!(c.now() >= a + 1_000);
    }

    #[test]
    fn skews_stay_in_bound_and_repeat() {
        let s = skews(3, 8, 50);
        assert!(s.iter().all(|d| (-50..=50).contains(d)));
        assert_eq!(s, skews(3, 8, 50));
        assert_eq!(skews(3, 4, 0), vec![0; 4]);
        assert_eq!(local(5, -10), 0);
        assert_eq!(local(5, 10), 15);
    }
}
