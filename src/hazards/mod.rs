//! The hazard catalog: every way non-coherent caches break a shared structure, each with a
//! negative control.
//!
//! A protocol that passes its tests proves little if the tests could not have failed. So
//! for each hazard this module runs two programs under the non-coherence emulator with the
//! same seeds and the same adversarial event rates:
//!
//! - **broken**: a deliberately wrong variant (it skips a write-back, an invalidation, a
//!   grace period, a check) that exhibits the hazard, and
//! - **bi**: the real protocol,
//!
//! and counts occurrences of the hazard in each, with the emulator's oracle where the
//! hazard is invisible in the values (stale reads, reuse hazards, lost writes) and by
//! checking the values where it is not (a torn object, a key that is never found). A
//! correct catalog has `broken > 0` and `bi == 0` for every row; the test suite asserts
//! exactly that, and the `hazards` example prints the table (`--json` for one object per
//! line).
//!
//! ```
//! let rows = bi::hazards::run_all(2);
//! for row in &rows {
//!     assert!(row.broken > 0, "{} never showed up in its broken variant", row.hazard);
//!     assert_eq!(row.bi, 0, "{} showed up under the real protocol", row.hazard);
//! }
//! ```

mod clock_skew;
mod dangling_reference;
mod log_overflow;
mod lost_update;
mod prefetch_after_invalidate;
mod resolution_failure;
mod spinning_reader;
mod stale_beyond_bound;
mod torn_object;
mod type_confusion;

use bi_core::mem::EmulatorConfig;
use bi_core::region::RegionConfig;
use bi_core::runtime::RuntimeConfig;
use bi_core::runtime::testing::Setup;

/// One row of the catalog: a hazard counted over `seeds` runs of each variant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HazardRow {
    /// Short name of the hazard (`snake_case`).
    pub hazard: &'static str,
    /// What is counted.
    pub counts: &'static str,
    /// Occurrences under the deliberately broken variant.
    pub broken: u64,
    /// Occurrences under the real protocol.
    pub bi: u64,
    /// How many seeds each variant ran with.
    pub seeds: u64,
}

impl HazardRow {
    /// The row as one line of JSON:
    /// `{"hazard": "...", "broken": n, "bi": n, "seeds": n}`.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"hazard\": \"{}\", \"broken\": {}, \"bi\": {}, \"seeds\": {}}}",
            self.hazard, self.broken, self.bi, self.seeds
        )
    }
}

/// Which variant of a hazard's program to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The deliberately broken protocol.
    Broken,
    /// The real protocol.
    Bi,
}

/// A hazard of the catalog.
pub struct Hazard {
    /// Short name (`snake_case`).
    pub name: &'static str,
    /// What the count is.
    pub counts: &'static str,
    /// Runs one variant with one seed and returns how often the hazard occurred.
    pub run: fn(Variant, u64) -> u64,
}

/// Every hazard of the catalog, in the order of the design's list.
pub fn catalog() -> Vec<Hazard> {
    vec![
        stale_beyond_bound::HAZARD,
        resolution_failure::HAZARD,
        dangling_reference::HAZARD,
        type_confusion::HAZARD,
        prefetch_after_invalidate::HAZARD,
        torn_object::HAZARD,
        lost_update::HAZARD,
        spinning_reader::HAZARD,
        log_overflow::HAZARD,
        clock_skew::HAZARD,
    ]
}

/// Runs every hazard's two variants over seeds `0..seeds`.
pub fn run_all(seeds: u64) -> Vec<HazardRow> {
    catalog().iter().map(|h| run(h, seeds)).collect()
}

/// Runs one hazard's two variants over seeds `0..seeds`.
pub fn run(hazard: &Hazard, seeds: u64) -> HazardRow {
    let count = |v| (0..seeds).map(|s| (hazard.run)(v, s)).sum();
    HazardRow {
        hazard: hazard.name,
        counts: hazard.counts,
        broken: count(Variant::Broken),
        bi: count(Variant::Bi),
        seeds,
    }
}

/// The emulator configuration every hazard starts from: two nodes and adversarial
/// hardware (random evictions, adjacent-line and random prefetches), seeded.
pub(crate) fn adversarial(size: usize, nodes: usize, seed: u64) -> EmulatorConfig {
    EmulatorConfig::new(size, nodes)
        .seed(seed)
        .cache_lines(64)
        .eviction_rate(0.01)
        .adjacent_prefetch_rate(0.2)
        .random_prefetch_rate(0.05)
}

/// Leases so long that no node or reader is ever excluded: the runtime hazards are about
/// grace periods, not about crashed parties.
pub(crate) fn patient() -> RuntimeConfig {
    RuntimeConfig::default()
        .node_lease(u64::MAX / 4)
        .reader_lease(u64::MAX / 4)
}

/// Two emulated nodes with one runtime each over a 256 KiB region, the emulator adjusted
/// by `emulator` (which starts from the seed).
pub(crate) fn two_runtimes(
    seed: u64,
    emulator: impl FnOnce(EmulatorConfig) -> EmulatorConfig,
) -> Setup {
    Setup::with(
        RegionConfig::new(1 << 18).with_nodes(2),
        |c| emulator(c.seed(seed)),
        patient(),
    )
}
