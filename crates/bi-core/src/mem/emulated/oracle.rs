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
//! The metadata (24 bytes per memory line, then one lock word per stripe) lives in words
//! of its own [`Backing`]: process memory for an emulator inside one process, or a file
//! that every process emulating a node of the same region maps, so that a write-back in
//! one process dates the copies another process holds. The stripe locks are words there
//! too (plain atomics: under loom the emulator's machine lock already serialises every
//! operation), holding the locker's process id; a waiter that finds the holder's process gone
//! (killed in the middle of a write-back, as a test of a crashing writer does) takes the
//! lock over.

use crate::line::LineSize;
use crate::mem::{Backing, MemError, check_range};
use crate::primitive::plain::atomic::{AtomicU64, Ordering};
use crate::primitive::thread::yield_now;
use std::sync::Arc;

/// How many locks serialise fills and write-backs (line `n` uses lock `n % STRIPES`).
const STRIPES: usize = 64;

/// Metadata words per memory line: version, written-at time, incarnation.
const WORDS_PER_LINE: usize = 3;

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
    /// this whole-line write overwrote bytes the writer never saw (lost, unless the
    /// writer had stored every byte of the line itself: the node cache judges that).
    pub(super) lost_update: bool,
}

/// One line's metadata words.
struct LineMeta<'a> {
    version: &'a AtomicU64,
    written_at: &'a AtomicU64,
    incarnation: &'a AtomicU64,
}

/// Holds one stripe's lock word; unlocks when dropped.
struct Stripe<'a>(&'a AtomicU64);

impl Drop for Stripe<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

/// Backing memory plus per-line versions, write-back times and incarnations.
#[derive(Debug)]
pub(super) struct Oracle {
    backing: Arc<Backing>,
    line: LineSize,
    lines: usize,
    stripes: usize,
    /// `WORDS_PER_LINE` words per line, then `stripes` lock words.
    meta: Meta,
}

/// Where the metadata words live: a backing (process memory, or a file other processes
/// map); under loom, plain words loom does not step through (the machine lock
/// serialises every operation, see `primitive::plain`, and a model is one process).
#[derive(Debug)]
struct Meta {
    #[cfg(not(loom))]
    words: Arc<Backing>,
    #[cfg(loom)]
    words: Box<[AtomicU64]>,
}

impl Meta {
    #[cfg_attr(loom, allow(clippy::needless_pass_by_value))]
    fn new(backing: Arc<Backing>) -> Meta {
        #[cfg(not(loom))]
        return Meta { words: backing };
        #[cfg(loom)]
        Meta {
            words: (0..backing.size() / 8).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    #[inline]
    fn words(&self) -> &[AtomicU64] {
        #[cfg(not(loom))]
        return self.words.words();
        #[cfg(loom)]
        &self.words
    }
}

impl Oracle {
    /// Bytes of metadata an oracle over `size` bytes of `line`-byte lines keeps.
    pub(super) fn meta_bytes(size: usize, line: LineSize) -> usize {
        let lines = size / line.get();
        8 * (WORDS_PER_LINE * lines + STRIPES.min(lines.max(1)))
    }

    /// An oracle with its metadata in this process's memory. `backing.size()` must be a
    /// multiple of the line size (checked by the caller).
    pub(super) fn new(backing: Arc<Backing>, line: LineSize) -> Result<Oracle, MemError> {
        let meta = Backing::anonymous(Self::meta_bytes(backing.size(), line))?;
        Ok(Oracle::with_meta(backing, line, Arc::new(meta)))
    }

    /// An oracle keeping its metadata in `meta` (at least
    /// [`meta_bytes`](Self::meta_bytes) long; zeroed when no other oracle used it yet).
    pub(super) fn with_meta(backing: Arc<Backing>, line: LineSize, meta: Arc<Backing>) -> Oracle {
        let lines = backing.size() / line.get();
        let stripes = STRIPES.min(lines.max(1));
        Oracle {
            backing,
            line,
            lines,
            stripes,
            meta: Meta::new(meta),
        }
    }

    pub(super) fn backing(&self) -> &Arc<Backing> {
        &self.backing
    }

    /// Number of lines in memory.
    pub(super) fn lines(&self) -> usize {
        self.lines
    }

    #[inline]
    fn meta(&self, line: usize) -> LineMeta<'_> {
        let w = &self.meta.words()[WORDS_PER_LINE * line..WORDS_PER_LINE * (line + 1)];
        LineMeta {
            version: &w[0],
            written_at: &w[1],
            incarnation: &w[2],
        }
    }

    /// Takes the stripe lock of `line`.
    fn lock(&self, line: usize) -> Stripe<'_> {
        let word = &self.meta.words()[WORDS_PER_LINE * self.lines + line % self.stripes];
        let me = locker_id();
        let mut spins = 0u32;
        loop {
            match word.compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Stripe(word),
                Err(holder) if holder != 0 && spins >= 1 << 16 && gone(holder) => {
                    // The holder died inside its fill or write-back: take its lock over.
                    if word
                        .compare_exchange(holder, me, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                    {
                        return Stripe(word);
                    }
                }
                Err(_) => {}
            }
            spins = spins.saturating_add(1);
            yield_now();
        }
    }

    /// Copies memory line `line` into `dst` (one line long) and returns its version and
    /// incarnation as of that copy.
    pub(super) fn fill(&self, line: usize, dst: &mut [u8]) -> Snapshot {
        let _g = self.lock(line);
        self.backing
            .load_bytes(line * self.line.get(), dst)
            .expect("cached lines lie inside memory");
        let m = self.meta(line);
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
        let m = self.meta(line);
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
        self.meta(line).version.load(Ordering::Relaxed)
    }

    /// The current incarnation of `line`.
    #[inline]
    pub(super) fn incarnation(&self, line: usize) -> u64 {
        self.meta(line).incarnation.load(Ordering::Relaxed)
    }

    /// When `line` was last written back.
    #[inline]
    pub(super) fn written_at(&self, line: usize) -> u64 {
        self.meta(line).written_at.load(Ordering::Relaxed)
    }

    /// Starts a new incarnation of every line touched by `offset .. offset + len`.
    pub(super) fn bump_incarnation(&self, offset: usize, len: usize) -> Result<(), MemError> {
        check_range(offset, len, self.backing.size())?;
        for line in self.line.lines(offset, len) {
            let _g = self.lock(line);
            let m = self.meta(line);
            m.incarnation
                .store(m.incarnation.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// What a stripe lock word holds while this process has it: its process id (never 0).
fn locker_id() -> u64 {
    u64::from(std::process::id()).max(1)
}

/// Whether the process `id` that holds a stripe lock no longer exists.
fn gone(id: u64) -> bool {
    #[cfg(miri)]
    {
        let _ = id;
        false
    }
    #[cfg(not(miri))]
    {
        let Ok(pid) = libc::pid_t::try_from(id) else {
            return false;
        };
        // SAFETY: `kill` with signal 0 sends nothing; it only checks that `pid` names a
        // process. It takes plain integers and touches no memory of ours.
        let r = unsafe { libc::kill(pid, 0) };
        r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_back_bumps_version_and_detects_lost_updates() {
        let line = LineSize::new(32).unwrap();
        let o = Oracle::new(Arc::new(Backing::anonymous(128).unwrap()), line).unwrap();
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

    #[test]
    #[cfg_attr(miri, ignore = "spawns a process")]
    fn a_lock_held_by_a_dead_process_is_taken_over() {
        let line = LineSize::new(64).unwrap();
        let o = Oracle::new(Arc::new(Backing::anonymous(256).unwrap()), line).unwrap();
        // A process that has exited: its id names no process any more (ids are not
        // reused this fast).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = u64::from(child.id());
        child.wait().unwrap();
        let lock = &o.meta.words()[WORDS_PER_LINE * o.lines + 1 % o.stripes];
        lock.store(dead, Ordering::Relaxed);
        let mut buf = [0u8; 64];
        o.fill(1, &mut buf); // would wait forever for a live holder
        assert_eq!(lock.load(Ordering::Relaxed), 0, "released after the fill");
        lock.store(locker_id(), Ordering::Relaxed);
        assert!(!gone(locker_id()), "this process is alive");
        lock.store(0, Ordering::Relaxed);
    }
}
