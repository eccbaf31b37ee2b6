//! What the tests, benches and fuzz targets of bi share, so that each is written once:
//!
//! - [`bench`](mod@bench): the quick-mode switch every bench honours, criterion shortened for it,
//!   and the median timing the benches' plain tables print;
//! - [`report`]: the `bench-report` command's parts: every bench run in quick mode, its
//!   findings assembled into one report with plots;
//! - [`prop`]: proptest settings that shrink to a handful of cases under Miri (where
//!   every case is interpreted) and persist no failures there (Miri's isolation forbids
//!   the file system);
//! - [`seeds`] and [`rng`]: the seeds a randomized test runs (fewer under Miri, one alone
//!   with `BI_SEED` to rerun a failure), and a generator for each named stream of a seed,
//!   so that tests keep their streams apart without constants of their own;
//! - [`under_miri`] and [`LATE_WRITEBACKS`]: a workload's size, and the emulator's rate
//!   of late write-backs, scaled down under Miri.
//!
//! Emulated machines are wired by `bi_core::runtime::testing::Setup`, which the library
//! itself documents with; this crate holds only what is not part of any library.

pub mod bench;
pub mod prop;
pub mod report;
mod seed;

pub use seed::{rng, seeds};

/// `full` normally, `miri` when interpreted by Miri: a workload's size.
///
/// ```
/// let steps = bi_kit::under_miri(2_000, 60);
/// assert_eq!(steps, if cfg!(miri) { 60 } else { 2_000 });
/// ```
pub const fn under_miri<T: Copy>(full: T, miri: T) -> T {
    if cfg!(miri) { miri } else { full }
}

/// The emulator's rate of late write-backs in workloads that want them: off under Miri,
/// where the extra bookkeeping of every store would take minutes.
pub const LATE_WRITEBACKS: f64 = under_miri(0.05, 0.0);

/// A temporary directory for region files, in `/dev/shm` when the machine has one (region
/// files belong in memory, and it keeps the tests off the disk).
///
/// ```
/// let dir = bi_kit::region_dir("bi-doc");
/// assert!(dir.path().is_dir());
/// ```
pub fn region_dir(prefix: &str) -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    let builder = tempfile::Builder::new().prefix(prefix).to_owned();
    if shm.is_dir()
        && let Ok(dir) = builder.tempdir_in(shm)
    {
        return dir;
    }
    builder.tempdir().expect("temporary directory")
}
