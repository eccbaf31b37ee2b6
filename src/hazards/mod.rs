//! The hazard catalog: every way non-coherent caches break a shared structure, each shown
//! by the shipped code with one mechanism switched off.
//!
//! A protocol that passes its tests proves little if the tests could not have failed. So
//! each row of this catalog names one mechanism of the protocol (a [`Fault`] switch of
//! the runtime, the collections, the channel or the graph engine) and runs one program
//! over the shipped code under the non-coherence emulator twice, with the same seeds and
//! the same adversarial event rates:
//!
//! - **broken**: with that mechanism switched off, and
//! - **bi**: with every mechanism on,
//!
//! and counts occurrences of the hazard in each, with the emulator's oracle where the
//! hazard is invisible in the values (stale reads, reuse hazards, lost writes) and by
//! checking the values where it is not (a torn object, a key that is never found). A
//! correct catalog has `broken > 0` and `bi == 0` for every row, and every switch has a
//! row; the test suite asserts both, and the `hazards` example prints the table (`--json`
//! for one object per line).
//!
//! Names: a row is named after its hazard (what goes wrong: `publish_before_writeback`),
//! its switch after the mechanism (`Fault::PublishOrder`), and the file that holds the
//! row after the switch (`publish_order.rs`), or after the family of switches its rows
//! share (`snapshot.rs` for `SnapshotSum` and `SnapshotRecollect`). A few files hold rows
//! of unrelated switches that share one program; `tests/hazard_names.rs` lists them and
//! checks the rest.
//!
//! The catalog needs the `hazards` feature (it switches mechanisms off, so it is never
//! part of a default build).
//!
//! ```
//! let rows = bi::hazards::run_all(2);
//! for row in &rows {
//!     assert!(row.broken > 0, "{} never showed up in its broken variant", row.hazard);
//!     assert_eq!(row.bi, 0, "{} showed up under the real protocol", row.hazard);
//! }
//! ```

mod adopt;
mod chain_miss;
mod channel_tail;
mod dead_writer_stores;
mod delegation;
mod extent_table_read;
mod frontier_marks;
mod graph_barrier;
mod joined_scopes;
mod journal_write_back;
mod lazy;
mod line_stamp;
mod linked_creation;
mod live_process;
mod liveness;
mod lock_lapse;
mod lock_writeback;
mod log_back_pressure;
mod logged_slots;
mod node_claim;
mod own_writes;
mod parcel;
mod publish_order;
mod record_lines;
mod region_barrier_read;
mod reuse_under_reader;
mod rewrite_journal;
mod scope_refresh;
mod second_bank_start;
mod second_invalidation;
mod share_record;
mod skew_bound;
mod snapshot;
mod stamp_order;
mod tag_path;
mod type_confusion;
mod value_banks;
mod writer_lease;
mod written_log;

use bi_core::mem::EmulatorConfig;
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{Fault, RuntimeConfig};

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
    /// The mechanism the broken variant switched off.
    pub fault: Fault,
    /// What is counted.
    pub counts: &'static str,
    /// Occurrences with the mechanism switched off.
    pub broken: u64,
    /// Occurrences with every mechanism on.
    pub bi: u64,
    /// How many seeds each variant ran with.
    pub seeds: u64,
}

impl HazardRow {
    /// The row as one line of JSON:
    /// `{"hazard": "...", "fault": "...", "broken": n, "bi": n, "seeds": n}`.
    ///
    /// ```
    /// use bi::core::runtime::Fault;
    /// use bi::hazards::HazardRow;
    ///
    /// let row = HazardRow {
    ///     hazard: "publish_before_writeback",
    ///     fault: Fault::PublishOrder,
    ///     counts: "torn objects",
    ///     broken: 3,
    ///     bi: 0,
    ///     seeds: 2,
    /// };
    /// assert_eq!(
    ///     row.to_json(),
    ///     r#"{"hazard": "publish_before_writeback", "fault": "PublishOrder", "broken": 3, "bi": 0, "seeds": 2}"#
    /// );
    /// ```
    pub fn to_json(&self) -> String {
        format!(
            "{{\"hazard\": \"{}\", \"fault\": \"{:?}\", \"broken\": {}, \"bi\": {}, \"seeds\": {}}}",
            self.hazard, self.fault, self.broken, self.bi, self.seeds
        )
    }
}

/// Which variant of a hazard's program to run.
///
/// ```
/// use bi::core::runtime::Fault;
/// use bi::hazards::Variant;
///
/// assert!(Variant::Broken.config(Fault::PublishOrder).faults().has(Fault::PublishOrder));
/// assert_eq!(Variant::Bi.config(Fault::PublishOrder).faults(), Default::default());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The shipped code with the row's mechanism switched off.
    Broken,
    /// The shipped code with every mechanism on.
    Bi,
}

impl Variant {
    /// The runtime configuration this variant runs a row with: leases long enough that
    /// no party is ever excluded by accident (rows about leases shorten them), and
    /// `fault` switched on for [`Broken`](Variant::Broken).
    pub fn config(self, fault: Fault) -> RuntimeConfig {
        let patient = RuntimeConfig::default()
            .node_lease(u64::MAX / 4)
            .reader_lease(u64::MAX / 4);
        match self {
            Variant::Broken => patient.fault(fault),
            Variant::Bi => patient,
        }
    }
}

/// A hazard of the catalog.
///
/// ```
/// use bi::core::runtime::Fault;
/// use bi::hazards::{run, Hazard};
///
/// // A row is any program over the shipped code that counts a hazard for a configuration
/// // and a seed.
/// let toy = Hazard {
///     name: "toy",
///     fault: Fault::PublishOrder,
///     counts: "ones",
///     run: |config, _seed| u64::from(config.faults().has(Fault::PublishOrder)),
/// };
/// let row = run(&toy, 3);
/// assert_eq!((row.broken, row.bi, row.seeds), (3, 0, 3));
/// ```
pub struct Hazard {
    /// Short name (`snake_case`).
    pub name: &'static str,
    /// The mechanism whose absence the row shows.
    pub fault: Fault,
    /// What the count is.
    pub counts: &'static str,
    /// Runs the program once with a configuration ([`Variant::config`]) and a seed and
    /// returns how often the hazard occurred.
    pub run: fn(RuntimeConfig, u64) -> u64,
}

/// Every hazard of the catalog: first the design's list, then one row for each further
/// mechanism.
///
/// ```
/// use bi::core::runtime::Fault;
///
/// let hazards = bi::hazards::catalog();
/// assert_eq!(hazards[0].name, "stale_beyond_bound");
/// // Every switch has a row.
/// assert!(Fault::ALL.iter().all(|f| hazards.iter().any(|h| h.fault == *f)));
/// ```
pub fn catalog() -> Vec<Hazard> {
    vec![
        logged_slots::HAZARD,
        second_invalidation::HAZARD,
        type_confusion::HAZARD,
        line_stamp::HAZARD,
        publish_order::HAZARD,
        lazy::MAP,
        lazy::TREE,
        own_writes::HAZARD,
        own_writes::TREE,
        chain_miss::HAZARD,
        tag_path::HAZARD,
        record_lines::HAZARD,
        channel_tail::HAZARD,
        log_back_pressure::HAZARD,
        delegation::TAKEOVER,
        delegation::GUARDS,
        snapshot::SUM,
        snapshot::RECOLLECT,
        parcel::WRITEBACK,
        parcel::INVALIDATE,
        graph_barrier::HAZARD,
        frontier_marks::HAZARD,
        value_banks::HAZARD,
        second_bank_start::HAZARD,
        region_barrier_read::HAZARD,
        skew_bound::HAZARD,
        stamp_order::HAZARD,
        scope_refresh::HAZARD,
        extent_table_read::HAZARD,
        lock_writeback::HAZARD,
        lock_lapse::HAZARD,
        node_claim::HAZARD,
        adopt::QUARANTINE,
        adopt::ANNOUNCE,
        rewrite_journal::HAZARD,
        journal_write_back::HAZARD,
        dead_writer_stores::HAZARD,
        joined_scopes::HAZARD,
        writer_lease::HAZARD,
        writer_lease::RENEWED_BY_A_PASS,
        writer_lease::LOST_AGAIN,
        live_process::HAZARD,
        share_record::HAZARD,
        type_confusion::RETIRED,
        reuse_under_reader::HAZARD,
        reuse_under_reader::UNRECORDED,
        liveness::HAZARD,
        liveness::STUCK_READER,
        linked_creation::HAZARD,
        written_log::HAZARD,
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
    let count = |v: Variant| {
        (0..seeds)
            .map(|s| (hazard.run)(v.config(hazard.fault), s))
            .sum()
    };
    HazardRow {
        hazard: hazard.name,
        fault: hazard.fault,
        counts: hazard.counts,
        broken: count(Variant::Broken),
        bi: count(Variant::Bi),
        seeds,
    }
}

/// The emulator configuration every hazard starts from: two nodes and adversarial
/// hardware ([`hostile`]), seeded.
pub(crate) fn adversarial(size: usize, nodes: usize, seed: u64) -> EmulatorConfig {
    hostile(EmulatorConfig::new(size, nodes).seed(seed))
}

/// The shipped graph engine's PageRank over a small random graph (30 vertices, 90 edges,
/// drawn with `seed`) on three emulated nodes ([`Mode::BiOnDemand`], cut by
/// `partitioner`, run with `options`): the number of vertices whose rank differs from the
/// same run over the machine's coherent memory.
///
/// [`Mode::BiOnDemand`]: bi_graph::Mode::BiOnDemand
pub(crate) fn pagerank_against_coherent(
    partitioner: bi_graph::Partitioner,
    options: &bi_graph::RunOptions,
    seed: u64,
) -> u64 {
    use bi_graph::{Backend, EngineConfig, Mode, PageRank, generate::Uniform};
    let graph = Uniform::new(30, 90, seed).generate().expect("graph");
    let engine = |backend| EngineConfig {
        nodes: 3,
        partitioner,
        mode: Mode::BiOnDemand,
        backend,
        seed,
        max_iterations: 10,
        tolerance: None,
        ..EngineConfig::default()
    };
    let coherent = bi_graph::pagerank(&graph, &engine(Backend::Hardware))
        .expect("coherent run")
        .values;
    let program = PageRank::new(graph.num_vertices(), None);
    let emulated = bi_graph::run_detailed(
        &program,
        &graph,
        &engine(Backend::Emulated { seed }),
        options,
    )
    .expect("emulated run");
    let ranks = PageRank::ranks(&graph, &emulated.run.values);
    ranks.iter().zip(&coherent).filter(|(a, b)| a != b).count() as u64
}

/// `config` on adversarial hardware ([`EmulatorConfig::adversarial`]) with small caches.
pub(crate) fn hostile(config: EmulatorConfig) -> EmulatorConfig {
    config.cache_lines(64).adversarial()
}

/// Two emulated nodes with one runtime each over a 256 KiB region, the emulator adjusted
/// by `emulator` (which starts from the seed).
pub(crate) fn two_runtimes(
    config: RuntimeConfig,
    seed: u64,
    emulator: impl FnOnce(EmulatorConfig) -> EmulatorConfig,
) -> Setup {
    Setup::with(
        RegionConfig::new(1 << 18).with_nodes(2),
        |c| emulator(c.seed(seed)),
        config,
    )
}
