//! What an emulated machine looks like: memory size, nodes, cache shape, event rates.
//!
//! A test of non-coherent code is only as adversarial as the machine it runs on, so every
//! knob that decides *when* a line moves between a cache and memory without the program
//! asking (capacity evictions, prefetches, clock skew) is a field here, and a seed makes
//! the resulting schedule reproducible. The configuration is plain data, checked once by
//! [`EmulatorConfig::validate`] (which [`Emulator::try_new`](super::Emulator::try_new)
//! calls), so a bad value is a typed [`EmulatorError`] rather than a surprise later.

use crate::line::LineSize;
use crate::mem::MemError;
use std::fmt;

/// Where the oracle's time comes from.
///
/// ```
/// use bi_core::mem::{ClockSource, Emulator, EmulatorConfig};
///
/// let emu = Emulator::new(EmulatorConfig::new(4096, 1).clock(ClockSource::Virtual));
/// assert_eq!(emu.now(), 0);
/// emu.advance(10);
/// assert_eq!(emu.now(), 10);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClockSource {
    /// A deterministic counter: it advances by one at every emulated memory operation and
    /// by `dt` at every [`Emulator::advance`](super::Emulator::advance). Same program, same
    /// times.
    #[default]
    Virtual,
    /// Nanoseconds since the emulator was created (plus any explicit advance). Times, and
    /// so staleness figures, vary from run to run.
    Real,
    /// Nanoseconds of the host's monotonic clock ([`host_ns`](super::host_ns), plus any
    /// explicit advance): the one true clock several processes emulating nodes of one
    /// region agree on ([`Emulator::over_shared`](super::Emulator::over_shared)).
    Host,
}

/// The description of an emulated machine, built with chained setters.
///
/// Defaults: 64-byte lines, seed 0, a 512-line cache per node (64 sets of 8 ways), no
/// random events, no clock skew, a virtual clock, and the last 16 invalidated lines
/// remembered for random prefetch.
///
/// ```
/// use bi_core::line::LineSize;
/// use bi_core::mem::{Emulator, EmulatorConfig};
///
/// let cfg = EmulatorConfig::new(1 << 16, 4)
///     .line_size(LineSize::new(128).unwrap())
///     .seed(7)
///     .cache_geometry(16, 4)
///     .eviction_rate(0.01)
///     .adjacent_prefetch_rate(0.5)
///     .random_prefetch_rate(0.01)
///     .clock_skew(100);
/// let emu = Emulator::try_new(cfg).unwrap();
/// assert_eq!(emu.config().cache_lines_per_node(), 64);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct EmulatorConfig {
    pub(super) size: usize,
    pub(super) nodes: usize,
    pub(super) line: LineSize,
    pub(super) seed: u64,
    pub(super) sets: usize,
    pub(super) ways: usize,
    pub(super) eviction_rate: f64,
    pub(super) adjacent_prefetch_rate: f64,
    pub(super) random_prefetch_rate: f64,
    pub(super) clock_skew: u64,
    pub(super) clock: ClockSource,
    pub(super) recent_invalidations: usize,
    pub(super) early_landing_rate: f64,
}

impl EmulatorConfig {
    /// A machine of `nodes` nodes sharing `size` bytes, with the defaults listed on the
    /// type. Nothing is checked until the emulator is built.
    ///
    /// ```
    /// use bi_core::line::LineSize;
    /// use bi_core::mem::EmulatorConfig;
    ///
    /// let c = EmulatorConfig::new(1 << 16, 2);
    /// assert_eq!((c.size(), c.nodes(), c.line(), c.seed_value()), (1 << 16, 2, LineSize::X86, 0));
    /// assert_eq!(c.cache_sets_and_ways(), (64, 8));
    /// ```
    pub fn new(size: usize, nodes: usize) -> EmulatorConfig {
        EmulatorConfig {
            size,
            nodes,
            line: LineSize::default(),
            seed: 0,
            sets: 64,
            ways: 8,
            eviction_rate: 0.0,
            adjacent_prefetch_rate: 0.0,
            random_prefetch_rate: 0.0,
            clock_skew: 0,
            clock: ClockSource::Virtual,
            recent_invalidations: 16,
            early_landing_rate: 0.0,
        }
    }

    /// Sets the cache-line size (the size must be a multiple of it).
    ///
    /// ```
    /// use bi_core::line::LineSize;
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let cfg = EmulatorConfig::new(4096, 1).line_size(LineSize::new(32).unwrap());
    /// assert_eq!(cfg.line().get(), 32);
    /// let bad = EmulatorConfig::new(4000, 1).line_size(LineSize::new(64).unwrap());
    /// assert!(Emulator::try_new(bad).is_err()); // 4000 is not a whole number of lines
    /// ```
    pub fn line_size(mut self, line: LineSize) -> EmulatorConfig {
        self.line = line;
        self
    }

    /// Seeds every random choice: events, eviction victims and clock skews.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let skews = |seed| {
    ///     let emu = Emulator::new(EmulatorConfig::new(4096, 4).clock_skew(1000).seed(seed));
    ///     (0..4).map(|n| emu.node(n).clock_skew()).collect::<Vec<_>>()
    /// };
    /// assert_eq!(skews(1), skews(1)); // same seed, same machine
    /// ```
    pub fn seed(mut self, seed: u64) -> EmulatorConfig {
        self.seed = seed;
        self
    }

    /// Gives each node's cache `sets` sets of `ways` lines each. Line `n` can live only in
    /// set `n % sets`, so few sets or ways force capacity evictions.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1).cache_geometry(1, 2));
    /// let a = emu.node(0);
    /// for line in 0..3 {
    ///     a.load::<u8>(line * 64).unwrap();
    /// }
    /// assert_eq!(a.stats().evictions, 1); // two ways: the third line pushed one out
    /// ```
    pub fn cache_geometry(mut self, sets: usize, ways: usize) -> EmulatorConfig {
        self.sets = sets;
        self.ways = ways;
        self
    }

    /// Gives each node's cache room for exactly `lines` lines, as the largest
    /// associativity up to 8 that divides `lines` (so 4 lines are one fully associative
    /// set, 512 lines are 64 sets of 8 ways, and a prime above 8 is direct-mapped).
    ///
    /// ```
    /// use bi_core::mem::EmulatorConfig;
    ///
    /// let cfg = EmulatorConfig::new(4096, 1).cache_lines(4);
    /// assert_eq!(cfg.cache_sets_and_ways(), (1, 4));
    /// assert_eq!(EmulatorConfig::new(4096, 1).cache_lines(24).cache_sets_and_ways(), (3, 8));
    /// ```
    pub fn cache_lines(mut self, lines: usize) -> EmulatorConfig {
        let ways = (1..=8.min(lines.max(1)))
            .rev()
            .find(|&w| lines.is_multiple_of(w))
            .unwrap_or(1);
        self.ways = if lines == 0 { 0 } else { ways };
        self.sets = lines / ways;
        self
    }

    /// Hostile hardware that a program still runs on at a usable pace: at each access a
    /// one-in-a-hundred eviction, a one-in-five fill of the next line on a miss, a
    /// one-in-twenty refill of a line just invalidated, and write-backs that land late
    /// (at the next fence, or one in twenty earlier). The hazard catalog and programs run
    /// with `BI_EMULATE` use it.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 16, 2).seed(4).adversarial());
    /// assert_eq!(emu.config().seed_value(), 4);
    /// ```
    pub fn adversarial(self) -> EmulatorConfig {
        self.eviction_rate(0.01)
            .adjacent_prefetch_rate(0.2)
            .random_prefetch_rate(0.05)
            .late_writebacks(0.05)
    }

    /// Every random event at the one rate `p`: evictions, adjacent and random prefetches,
    /// and write-backs that land early (for tests that turn one knob).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(1 << 16, 1).cache_lines(4).every_event(1.0));
    /// let a = emu.node(0);
    /// for i in 0..10 {
    ///     a.load::<u64>(i * 64).unwrap();
    /// }
    /// assert!(a.stats().evictions > 0 && a.stats().prefetches > 0);
    /// ```
    pub fn every_event(self, p: f64) -> EmulatorConfig {
        self.eviction_rate(p)
            .adjacent_prefetch_rate(p)
            .random_prefetch_rate(p)
            .late_writebacks(p)
    }

    /// Probability, at each load and store, that the node evicts one random slot of its
    /// cache (writing it back first if it is dirty).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// // One slot, emptied at every access: the line never stays.
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1).cache_lines(1).eviction_rate(1.0));
    /// let a = emu.node(0);
    /// for _ in 0..10 {
    ///     a.load::<u64>(0).unwrap();
    /// }
    /// assert!(a.stats().evictions > 0);
    /// assert!(Emulator::try_new(EmulatorConfig::new(4096, 1).eviction_rate(2.0)).is_err());
    /// ```
    pub fn eviction_rate(mut self, p: f64) -> EmulatorConfig {
        self.eviction_rate = p;
        self
    }

    /// Probability, at each miss, that the node also fills the next line.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let a = Emulator::new(EmulatorConfig::new(4096, 1).adjacent_prefetch_rate(1.0)).node(0);
    /// a.load::<u64>(0).unwrap();
    /// assert!(a.is_cached(64)); // the next line came along
    /// ```
    pub fn adjacent_prefetch_rate(mut self, p: f64) -> EmulatorConfig {
        self.adjacent_prefetch_rate = p;
        self
    }

    /// Probability, at each load and store, that the node refills one of the lines it
    /// invalidated recently (the hazard of a prefetch landing right after an invalidate).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let a = Emulator::new(EmulatorConfig::new(4096, 1).random_prefetch_rate(1.0)).node(0);
    /// a.load::<u64>(0).unwrap();
    /// a.invalidate(0, 64).unwrap();
    /// a.fence();
    /// a.load::<u64>(1024).unwrap();
    /// assert!(a.is_cached(0)); // refilled right after its invalidation
    /// ```
    pub fn random_prefetch_rate(mut self, p: f64) -> EmulatorConfig {
        self.random_prefetch_rate = p;
        self
    }

    /// Makes write-backs late, as the hardware's are: a write-back only *starts* one
    /// (`clwb`); it reaches memory at the node's next fence at the latest, and earlier,
    /// one pending line at random, with probability `p` at each load and store. So the
    /// write-backs of lines not separated by a fence land in any order, and code that
    /// publishes a pointer before the fence that completes its object's write-back is
    /// caught. `0` (the default) turns it off: a write-back lands when asked.
    /// Invalidation still writes a dirty line back at once.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2).late_writebacks(0.0001));
    /// let (a, b) = (emu.node(0), emu.node(1));
    /// a.store(0, &7u64).unwrap();
    /// a.writeback(0, 8).unwrap();
    /// assert_eq!(b.load::<u64>(0).unwrap(), 0); // started, not landed
    /// a.fence();
    /// b.invalidate(0, 8).unwrap();
    /// assert_eq!(b.load::<u64>(0).unwrap(), 7);
    /// assert!(Emulator::try_new(EmulatorConfig::new(4096, 1).late_writebacks(-1.0)).is_err());
    /// ```
    pub fn late_writebacks(mut self, p: f64) -> EmulatorConfig {
        self.early_landing_rate = p;
        self
    }

    /// Gives each node a fixed clock offset drawn from `-bound ..= bound` (see
    /// [`EmulatedNode::local_time`](super::EmulatedNode::local_time)).
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 2).clock_skew(20).seed(2));
    /// emu.advance(100);
    /// let (a, b) = (emu.node(0).local_time(), emu.node(1).local_time());
    /// assert!(a.abs_diff(b) <= 40); // two nodes differ by up to twice the bound
    /// ```
    pub fn clock_skew(mut self, bound: u64) -> EmulatorConfig {
        self.clock_skew = bound;
        self
    }

    /// Chooses the oracle's time source.
    ///
    /// ```
    /// use bi_core::mem::{ClockSource, Emulator, EmulatorConfig};
    ///
    /// let emu = Emulator::new(EmulatorConfig::new(4096, 1).clock(ClockSource::Real));
    /// std::thread::sleep(std::time::Duration::from_millis(1));
    /// assert!(emu.now() >= 1_000_000); // nanoseconds
    /// ```
    pub fn clock(mut self, source: ClockSource) -> EmulatorConfig {
        self.clock = source;
        self
    }

    /// How many recently invalidated lines each node remembers as candidates for random
    /// prefetch.
    ///
    /// ```
    /// use bi_core::mem::{Emulator, EmulatorConfig, MemView};
    ///
    /// let cfg = EmulatorConfig::new(4096, 1).random_prefetch_rate(1.0).recent_invalidations(0);
    /// let a = Emulator::new(cfg).node(0);
    /// a.load::<u64>(0).unwrap();
    /// a.invalidate(0, 64).unwrap();
    /// a.load::<u64>(1024).unwrap();
    /// assert!(!a.is_cached(0)); // nothing remembered, nothing refilled
    /// ```
    pub fn recent_invalidations(mut self, lines: usize) -> EmulatorConfig {
        self.recent_invalidations = lines;
        self
    }

    /// Size of the shared memory in bytes.
    ///
    /// ```
    /// use bi_core::mem::EmulatorConfig;
    ///
    /// assert_eq!(EmulatorConfig::new(8192, 1).size(), 8192);
    /// ```
    pub fn size(&self) -> usize {
        self.size
    }

    /// Number of nodes.
    ///
    /// ```
    /// use bi_core::mem::EmulatorConfig;
    ///
    /// assert_eq!(EmulatorConfig::new(8192, 5).nodes(), 5);
    /// ```
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The cache-line size.
    ///
    /// ```
    /// use bi_core::line::LineSize;
    /// use bi_core::mem::EmulatorConfig;
    ///
    /// let l = LineSize::new(256).unwrap();
    /// assert_eq!(EmulatorConfig::new(8192, 1).line_size(l).line(), l);
    /// ```
    pub fn line(&self) -> LineSize {
        self.line
    }

    /// The seed of all random choices.
    ///
    /// ```
    /// use bi_core::mem::EmulatorConfig;
    ///
    /// assert_eq!(EmulatorConfig::new(4096, 1).seed(42).seed_value(), 42);
    /// ```
    pub fn seed_value(&self) -> u64 {
        self.seed
    }

    /// `(sets, ways)` of each node's cache.
    ///
    /// ```
    /// use bi_core::mem::EmulatorConfig;
    ///
    /// assert_eq!(EmulatorConfig::new(4096, 1).cache_geometry(4, 2).cache_sets_and_ways(), (4, 2));
    /// ```
    pub fn cache_sets_and_ways(&self) -> (usize, usize) {
        (self.sets, self.ways)
    }

    /// Lines each node's cache holds (`sets * ways`).
    ///
    /// ```
    /// use bi_core::mem::EmulatorConfig;
    ///
    /// assert_eq!(EmulatorConfig::new(4096, 1).cache_lines_per_node(), 512);
    /// assert_eq!(EmulatorConfig::new(4096, 1).cache_geometry(4, 2).cache_lines_per_node(), 8);
    /// ```
    pub fn cache_lines_per_node(&self) -> usize {
        self.sets.saturating_mul(self.ways)
    }

    /// The bound `D` of the per-node clock offsets.
    ///
    /// ```
    /// use bi_core::mem::EmulatorConfig;
    ///
    /// assert_eq!(EmulatorConfig::new(4096, 1).clock_skew_bound(), 0);
    /// assert_eq!(EmulatorConfig::new(4096, 1).clock_skew(30).clock_skew_bound(), 30);
    /// ```
    pub fn clock_skew_bound(&self) -> u64 {
        self.clock_skew
    }

    /// Checks the configuration without building anything.
    ///
    /// ```
    /// use bi_core::mem::{EmulatorConfig, EmulatorError};
    ///
    /// assert!(EmulatorConfig::new(4096, 2).validate().is_ok());
    /// let bad = EmulatorConfig::new(100, 2).validate();
    /// assert!(matches!(bad, Err(EmulatorError::BadSize { .. })));
    /// assert_eq!(EmulatorConfig::new(4096, 0).validate(), Err(EmulatorError::NoNodes));
    /// assert!(matches!(
    ///     EmulatorConfig::new(4096, 1).eviction_rate(1.5).validate(),
    ///     Err(EmulatorError::BadRate { .. })
    /// ));
    /// ```
    pub fn validate(&self) -> Result<(), EmulatorError> {
        let line = self.line.get();
        if self.size == 0 || !self.size.is_multiple_of(line) {
            return Err(EmulatorError::BadSize {
                size: self.size,
                line,
            });
        }
        if self.nodes == 0 {
            return Err(EmulatorError::NoNodes);
        }
        if self.sets == 0 || self.ways == 0 || self.sets.checked_mul(self.ways).is_none() {
            return Err(EmulatorError::BadCache {
                sets: self.sets,
                ways: self.ways,
            });
        }
        for (name, value) in [
            ("eviction", self.eviction_rate),
            ("adjacent prefetch", self.adjacent_prefetch_rate),
            ("random prefetch", self.random_prefetch_rate),
            ("early landing", self.early_landing_rate),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(EmulatorError::BadRate { name, value });
            }
        }
        Ok(())
    }

    /// Whether any random event can happen (if not, the hot path draws no random numbers).
    pub(super) fn has_events(&self) -> bool {
        self.eviction_rate > 0.0
            || self.adjacent_prefetch_rate > 0.0
            || self.random_prefetch_rate > 0.0
            || self.early_landing_rate > 0.0
    }
}

/// A configuration or request the emulator cannot honour.
///
/// ```
/// use bi_core::mem::{Emulator, EmulatorConfig, EmulatorError};
///
/// let emu = Emulator::new(EmulatorConfig::new(4096, 2));
/// assert_eq!(emu.try_node(2).unwrap_err(), EmulatorError::NoSuchNode { node: 2, nodes: 2 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EmulatorError {
    /// The memory size is zero or not a multiple of the line size.
    BadSize {
        /// The size asked for.
        size: usize,
        /// The line size it must be a multiple of.
        line: usize,
    },
    /// The machine has no nodes.
    NoNodes,
    /// A cache with zero sets or zero ways, or too many lines to count.
    BadCache {
        /// Sets asked for.
        sets: usize,
        /// Ways asked for.
        ways: usize,
    },
    /// An event rate outside `0.0 ..= 1.0` (or NaN).
    BadRate {
        /// Which rate.
        name: &'static str,
        /// The value given.
        value: f64,
    },
    /// [`Emulator::over`](super::Emulator::over) was given memory of another size than the
    /// configuration describes.
    BackingSize {
        /// Size of the backing memory.
        backing: usize,
        /// Size in the configuration.
        config: usize,
    },
    /// The backing memory could not be allocated.
    Memory(MemError),
    /// A node index at or past the number of nodes.
    NoSuchNode {
        /// The index asked for.
        node: usize,
        /// The number of nodes.
        nodes: usize,
    },
}

impl fmt::Display for EmulatorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EmulatorError::BadSize { size, line } => {
                write!(
                    f,
                    "memory size {size} is not a non-zero multiple of the {line}-byte line"
                )
            }
            EmulatorError::NoNodes => write!(f, "an emulated machine needs at least one node"),
            EmulatorError::BadCache { sets, ways } => {
                write!(f, "a cache of {sets} sets of {ways} ways cannot hold lines")
            }
            EmulatorError::BadRate { name, value } => {
                write!(f, "{name} rate {value} is not a probability in 0..=1")
            }
            EmulatorError::BackingSize { backing, config } => {
                write!(
                    f,
                    "backing memory holds {backing} bytes but the configuration says {config}"
                )
            }
            EmulatorError::Memory(e) => write!(f, "backing memory: {e}"),
            EmulatorError::NoSuchNode { node, nodes } => {
                write!(
                    f,
                    "node {node} does not exist: the machine has {nodes} nodes"
                )
            }
        }
    }
}

impl std::error::Error for EmulatorError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EmulatorError::Memory(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_lines_picks_an_exact_geometry() {
        for (lines, expect) in [
            (1, (1, 1)),
            (4, (1, 4)),
            (8, (1, 8)),
            (12, (2, 6)),
            (13, (13, 1)),
        ] {
            assert_eq!(
                EmulatorConfig::new(64, 1)
                    .cache_lines(lines)
                    .cache_sets_and_ways(),
                expect
            );
        }
        assert!(
            EmulatorConfig::new(64, 1)
                .cache_lines(0)
                .validate()
                .is_err()
        );
    }

    #[test]
    fn rejects_bad_configurations() {
        let ok = EmulatorConfig::new(4096, 2);
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(
            EmulatorConfig::new(0, 1).validate(),
            Err(EmulatorError::BadSize { size: 0, line: 64 })
        );
        assert!(ok.clone().cache_geometry(0, 4).validate().is_err());
        assert!(ok.clone().cache_geometry(usize::MAX, 4).validate().is_err());
        assert!(
            ok.clone()
                .adjacent_prefetch_rate(f64::NAN)
                .validate()
                .is_err()
        );
        assert!(ok.clone().random_prefetch_rate(-0.1).validate().is_err());
        assert!(ok.clone().eviction_rate(1.0).validate().is_ok());
    }
}
