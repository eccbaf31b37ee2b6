//! Choosing when a program starts whether its nodes run on the hardware or over the
//! non-coherence emulator.
//!
//! On a coherent machine every hazard of sharing without coherence is invisible: a
//! program that forgot a write-back or an invalidation runs correctly there. A program
//! that opens its pools with [`Pool::open_emulated`] instead of [`Pool::open`] runs each
//! of its processes' nodes over an emulated cache of its own, with memory in the region
//! file and the oracle's history beside it, so stale reads, reuse hazards and lost
//! writes happen, and are counted, across processes. `BI_EMULATE=<seed>` asks a program
//! that reads it ([`Emulation::from_env`]) to do so, on adversarial hardware
//! ([`EmulatorConfig::adversarial`]) seeded with `<seed>`:
//!
//! ```sh
//! BI_EMULATE=7 cargo run --release --example shared_map
//! ```
//!
//! The choice changes the pool's view type, so such a program is generic over it:
//!
//! ```
//! use bi::core::mem::MemView;
//! use bi::{Emulation, Pool, PoolConfig};
//!
//! fn work<M: MemView + 'static>(pool: Pool<M>) -> Result<u64, bi::Error> {
//!     let mut w = pool.map_writer::<u64, u64>("counts")?;
//!     w.insert(1, 41)?;
//!     Ok(w.get(&1).map_or(0, |v| v + 1))
//! }
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("counts.bi");
//! let answer = match Emulation::from_env()? {
//!     Some(emulation) => work(Pool::open_emulated(&path, PoolConfig::default(), emulation.machine())?),
//!     None => work(Pool::open_or_create(&path, PoolConfig::default())?),
//! }?;
//! assert_eq!(answer, 42);
//! # Ok::<(), bi::Error>(())
//! ```

#[cfg(doc)]
use crate::Pool;
use crate::PoolError;
use crate::error::Error;
use bi_core::mem::EmulatorConfig;

/// Emulated hardware for a program's pools, from `BI_EMULATE` ([`from_env`](Self::from_env)).
///
/// ```
/// use bi::Emulation;
/// use bi::core::mem::EmulatorConfig;
///
/// let e = Emulation { seed: 7 };
/// let machine = (e.machine())(EmulatorConfig::new(1 << 16, 2));
/// assert_eq!(machine.seed_value(), 7);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Emulation {
    /// Seeds the emulated caches' events (each node draws from its own stream).
    pub seed: u64,
}

impl Emulation {
    /// The variable [`from_env`](Self::from_env) reads.
    pub const VAR: &'static str = "BI_EMULATE";

    /// `Some` when `BI_EMULATE` holds a seed, `None` when it is unset or empty; an error
    /// for anything else ([`parse`](Self::parse)), so a typo does not silently run on the
    /// hardware.
    pub fn from_env() -> Result<Option<Emulation>, Error> {
        match std::env::var(Self::VAR) {
            Err(std::env::VarError::NotPresent) => Ok(None),
            Ok(v) => Emulation::parse(&v),
            Err(std::env::VarError::NotUnicode(v)) => Err(bad(&v.to_string_lossy()).into()),
        }
    }

    /// What a value of `BI_EMULATE` asks for: a seed (a decimal number), or nothing (an
    /// empty value) to run on the hardware. An [`ErrorKind::InvalidInput`](crate::ErrorKind)
    /// otherwise (its cause: [`PoolError::BadEnvironment`]).
    ///
    /// ```
    /// use bi::{Emulation, ErrorKind, PoolError};
    ///
    /// assert_eq!(Emulation::parse("12").unwrap(), Some(Emulation { seed: 12 }));
    /// assert_eq!(Emulation::parse(" ").unwrap(), None);
    /// let err = Emulation::parse("yes").unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::InvalidInput);
    /// assert!(matches!(err.cause(), PoolError::BadEnvironment { .. }));
    /// ```
    pub fn parse(value: &str) -> Result<Option<Emulation>, Error> {
        let v = value.trim();
        if v.is_empty() {
            return Ok(None);
        }
        v.parse()
            .map(|seed| Some(Emulation { seed }))
            .map_err(|_| bad(value).into())
    }

    /// How far each node's clock is off true time at most, in nanoseconds: drawn per
    /// node from the seed, so every process of a run agrees on each node's offset.
    pub const CLOCK_SKEW_NS: u64 = 100_000;

    /// The machine to give [`Pool::open_emulated`]: this seed, adversarial events, and
    /// node clocks skewed by up to [`CLOCK_SKEW_NS`](Self::CLOCK_SKEW_NS) each (the pool
    /// allows for two of them differing by twice that: [`skew_bound`](Self::skew_bound)).
    pub fn machine(self) -> impl Fn(EmulatorConfig) -> EmulatorConfig + Copy {
        move |c| {
            c.seed(self.seed)
                .adversarial()
                .clock_skew(Self::CLOCK_SKEW_NS)
        }
    }

    /// The skew bound `D` a pool opened on [`machine`](Self::machine) runs with: two
    /// node clocks differ by up to twice each one's offset (nanoseconds).
    ///
    /// ```
    /// use bi::{Emulation, Pool, PoolConfig};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let e = Emulation { seed: 3 };
    /// let pool = Pool::open_emulated(dir.path().join("p.bi"), PoolConfig::default(), e.machine())
    ///     .unwrap();
    /// assert_eq!(pool.runtime().config().skew_bound(), Emulation::skew_bound());
    /// ```
    pub fn skew_bound() -> u64 {
        2 * Self::CLOCK_SKEW_NS
    }
}

fn bad(value: &str) -> PoolError {
    PoolError::BadEnvironment {
        var: Emulation::VAR,
        value: value.to_owned(),
        expected: "a seed (a decimal number), or nothing to run on the hardware",
    }
}
