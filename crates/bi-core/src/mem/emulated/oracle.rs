//! Backing memory with a history: the oracle that tells a stale copy from a fresh one.
//!
//! On real hardware a stale read is silent: the bytes look like any other bytes. To make
//! it countable, the emulator routes every transfer between a node cache and memory
//! through this module, which keeps three numbers per memory line:
//!
//! - a *version*, bumped by every write-back that reaches memory (including the ones
//!   evictions cause), so a cached copy that remembers the version it was filled with is
//!   stale exactly when memory's version has moved past it;
//! - the true time of the last write-back, used to date staleness;
//! - an *incarnation*, bumped when the heap reports that the memory was reused, so a copy
//!   from before the reuse can be recognised even if its bytes happen to match.
//!
//! A fill must read the bytes and the version as one snapshot, and a write-back must store
//! the bytes and bump the version as one step; otherwise a copy could claim a version its
//! bytes do not have. Both therefore run under a lock, striped by line so unrelated lines
//! do not contend. Readers that only want to compare versions (the load hit path) read
//! the metadata atomics without the lock: a race there only means the load is judged
//! against a version that is one write-back newer or older, which is the same uncertainty
//! a real concurrent load has.
//!
//! The metadata costs 24 bytes per memory line.

use crate::line::LineSize;
use crate::mem::{Backing, MemError, check_range};
use crate::primitive::sync::Mutex;
use crate::primitive::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};

/// How many locks serialise fills and write-backs (line `n` uses lock `n % STRIPES`).
const STRIPES: usize = 64;

#[derive(Debug)]
struct LineMeta {
    version: AtomicU64,
    written_at: AtomicU64,
    incarnation: AtomicU64,
}

impl LineMeta {
    fn new() -> LineMeta {
        LineMeta {
            version: AtomicU64::new(0),
            written_at: AtomicU64::new(0),
            incarnation: AtomicU64::new(0),
        }
    }
}

/// What a fill saw in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Snapshot {
    pub(super) version: u64,
    pub(super) incarnation: u64,
}

/// What a write-back did to memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Written {
    /// The line's new version, now also the writer's copy's version.
    pub(super) version: u64,
    /// The memory's incarnation (the written copy is now part of it).
    pub(super) incarnation: u64,
    /// Whether another node's write-back landed after the writer's copy was filled, so
    /// this whole-line write overwrote bytes the writer never saw.
    pub(super) lost_update: bool,
}

/// Backing memory plus per-line versions, write-back times and incarnations.
#[derive(Debug)]
pub(super) struct Oracle {
    backing: Arc<Backing>,
    line: LineSize,
    meta: Box<[LineMeta]>,
    stripes: Box<[Mutex<()>]>,
}

impl Oracle {
    /// `backing.size()` must be a multiple of the line size (checked by the caller).
    pub(super) fn new(backing: Arc<Backing>, line: LineSize) -> Oracle {
        let lines = backing.size() / line.get();
        Oracle {
            backing,
            line,
            meta: (0..lines).map(|_| LineMeta::new()).collect(),
            stripes: (0..STRIPES.min(lines.max(1)))
                .map(|_| Mutex::new(()))
                .collect(),
        }
    }

    pub(super) fn backing(&self) -> &Arc<Backing> {
        &self.backing
    }

    /// Number of lines in memory.
    pub(super) fn lines(&self) -> usize {
        self.meta.len()
    }

    fn lock(&self, line: usize) -> impl Sized + '_ {
        self.stripes[line % self.stripes.len()]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Copies memory line `line` into `dst` (one line long) and returns its version and
    /// incarnation as of that copy.
    pub(super) fn fill(&self, line: usize, dst: &mut [u8]) -> Snapshot {
        let _g = self.lock(line);
        self.backing
            .load_bytes(line * self.line.get(), dst)
            .expect("cached lines lie inside memory");
        let m = &self.meta[line];
        Snapshot {
            version: m.version.load(Ordering::Relaxed),
            incarnation: m.incarnation.load(Ordering::Relaxed),
        }
    }

    /// Copies a whole line to memory at time `now`; `copy_version` is the version the
    /// writer's copy was filled with (or last wrote back).
    pub(super) fn write_back(
        &self,
        line: usize,
        src: &[u8],
        copy_version: u64,
        now: u64,
    ) -> Written {
        let _g = self.lock(line);
        self.backing
            .store_bytes(line * self.line.get(), src)
            .expect("cached lines lie inside memory");
        let m = &self.meta[line];
        let old = m.version.load(Ordering::Relaxed);
        let version = old + 1;
        m.version.store(version, Ordering::Relaxed);
        m.written_at.store(now, Ordering::Relaxed);
        Written {
            version,
            incarnation: m.incarnation.load(Ordering::Relaxed),
            lost_update: copy_version < old,
        }
    }

    /// The current version of `line`.
    #[inline]
    pub(super) fn version(&self, line: usize) -> u64 {
        self.meta[line].version.load(Ordering::Relaxed)
    }

    /// The current incarnation of `line`.
    #[inline]
    pub(super) fn incarnation(&self, line: usize) -> u64 {
        self.meta[line].incarnation.load(Ordering::Relaxed)
    }

    /// When `line` was last written back.
    #[inline]
    pub(super) fn written_at(&self, line: usize) -> u64 {
        self.meta[line].written_at.load(Ordering::Relaxed)
    }

    /// Starts a new incarnation of every line touched by `offset .. offset + len`.
    pub(super) fn bump_incarnation(&self, offset: usize, len: usize) -> Result<(), MemError> {
        check_range(offset, len, self.backing.size())?;
        for line in self.line.lines(offset, len) {
            let _g = self.lock(line);
            self.meta[line].incarnation.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_back_bumps_version_and_detects_lost_updates() {
        let line = LineSize::new(32).unwrap();
        let o = Oracle::new(Arc::new(Backing::anonymous(128).unwrap()), line);
        assert_eq!(o.lines(), 4);
        let mut buf = [0u8; 32];
        let snap = o.fill(1, &mut buf);
        assert_eq!(
            snap,
            Snapshot {
                version: 0,
                incarnation: 0
            }
        );
        let w = o.write_back(1, &[7; 32], snap.version, 5);
        assert_eq!((w.version, w.lost_update), (1, false));
        assert_eq!((o.version(1), o.written_at(1)), (1, 5));
        // A second writer whose copy predates the first write-back loses that update.
        let w2 = o.write_back(1, &[9; 32], snap.version, 6);
        assert!(w2.lost_update);
        o.fill(1, &mut buf);
        assert_eq!(buf, [9; 32]);
        o.bump_incarnation(40, 30).unwrap(); // lines 1 and 2
        assert_eq!(
            (o.incarnation(0), o.incarnation(1), o.incarnation(2)),
            (0, 1, 1)
        );
        assert!(o.bump_incarnation(120, 16).is_err());
    }
}
