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
///
/// ```
/// use bi::hazards::{catalog, run};
///
/// let torn = catalog().into_iter().find(|h| h.name == "publish_before_writeback").unwrap();
/// let row = run(&torn, 1);
/// assert_eq!((row.hazard, row.seeds), ("publish_before_writeback", 1));
/// assert!(row.broken > 0 && row.bi == 0);
/// ```
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
    ///
    /// ```
    /// use bi::hazards::HazardRow;
    ///
    /// let row = HazardRow {
    ///     hazard: "lost_update",
    ///     counts: "lost writes",
    ///     broken: 3,
    ///     bi: 0,
    ///     seeds: 2,
    /// };
    /// assert_eq!(row.to_json(), r#"{"hazard": "lost_update", "broken": 3, "bi": 0, "seeds": 2}"#);
    /// ```
    pub fn to_json(&self) -> String {
        format!(
            "{{\"hazard\": \"{}\", \"broken\": {}, \"bi\": {}, \"seeds\": {}}}",
            self.hazard, self.broken, self.bi, self.seeds
        )
    }
}

/// Which variant of a hazard's program to run.
///
/// ```
/// use bi::hazards::{catalog, Variant};
///
/// let torn = catalog().into_iter().find(|h| h.name == "publish_before_writeback").unwrap();
/// assert!((torn.run)(Variant::Broken, 0) > 0);
/// assert_eq!((torn.run)(Variant::Bi, 0), 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The deliberately broken protocol.
    Broken,
    /// The real protocol.
    Bi,
}

/// A hazard of the catalog.
///
/// ```
/// use bi::hazards::{run, Hazard, Variant};
///
/// // A catalog row is any program counting a hazard per variant and seed.
/// let toy = Hazard {
///     name: "toy",
///     counts: "ones",
///     run: |v, _seed| u64::from(v == Variant::Broken),
/// };
/// let row = run(&toy, 3);
/// assert_eq!((row.broken, row.bi, row.seeds), (3, 0, 3));
/// ```
pub struct Hazard {
    /// Short name (`snake_case`).
    pub name: &'static str,
    /// What the count is.
    pub counts: &'static str,
    /// Runs one variant with one seed and returns how often the hazard occurred.
    pub run: fn(Variant, u64) -> u64,
}

/// Every hazard of the catalog, in the order of the design's list.
///
/// ```
/// let hazards = bi::hazards::catalog();
/// assert_eq!(hazards.len(), 10);
/// assert_eq!(hazards[0].name, "stale_beyond_bound");
/// assert!(hazards.iter().all(|h| !h.counts.is_empty()));
/// ```
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
///
/// ```
/// let rows = bi::hazards::run_all(1);
/// assert_eq!(rows.len(), bi::hazards::catalog().len());
/// assert!(rows.iter().all(|r| r.seeds == 1 && r.bi == 0));
/// ```
pub fn run_all(seeds: u64) -> Vec<HazardRow> {
    catalog().iter().map(|h| run(h, seeds)).collect()
}

/// Runs one hazard's two variants over seeds `0..seeds`.
///
/// ```
/// use bi::hazards::{catalog, run};
///
/// let lost = catalog().into_iter().find(|h| h.name == "two_nodes_one_line").unwrap();
/// let row = run(&lost, 2);
/// assert_eq!(row.hazard, "two_nodes_one_line");
/// assert!(row.broken > 0, "the broken variant loses writes");
/// assert_eq!(row.bi, 0, "the real protocol loses none");
/// ```
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
/// hardware (random evictions, adjacent-line and random prefetches, late write-backs),
/// seeded.
pub(crate) fn adversarial(size: usize, nodes: usize, seed: u64) -> EmulatorConfig {
    EmulatorConfig::new(size, nodes)
        .seed(seed)
        .cache_lines(64)
        .eviction_rate(0.01)
        .adjacent_prefetch_rate(0.2)
        .random_prefetch_rate(0.05)
        .late_writebacks(0.05)
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
