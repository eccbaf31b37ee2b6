//! A ready-made emulated machine with a runtime per node, for examples and tests, and
//! for model-checking code that uses the library.
//!
//! Not part of the protocol: it wires a [`Region`], an [`Emulator`] over the region's
//! memory and one [`NodeRuntime`] per node, and splits the heap into one [`BumpHeap`]
//! arena per node. Its constructors panic on impossible parameters (they are test
//! fixtures).
//!
//! # Model-checking your code with loom
//!
//! Built with `RUSTFLAGS="--cfg loom"`, the library's synchronisation goes through
//! [loom](https://docs.rs/loom) and the emulator makes each memory operation of a node
//! one step loom schedules (its own internals are not explored: see `primitive`), so a
//! loom model of code over an emulated machine explores the orders in which nodes'
//! operations, passes included, can interleave on hardware without coherence.
//! [`Setup::model`] is a machine small enough for that (two nodes; the collections run on
//! it) and `model_builder` (under `cfg(loom)`) a loom builder with settings that suit it.
//! A model of one map insert racing one lookup, with a pass on each node, explores some
//! 5,600 interleavings in 12 to 14 seconds on a two-core machine, with two preemptions:
//!
//! ```ignore
//! // tests/loom_map.rs of a crate that depends on bi (and on loom under cfg(loom))
//! #![cfg(loom)]
//! use bi::collections::map::BiHashMap;
//! use bi::core::runtime::RuntimeConfig;
//! use bi::core::runtime::testing::{Setup, model_builder};
//!
//! #[test]
//! fn insert_races_lookup() {
//!     model_builder().check(|| {
//!         let s = loom::sync::Arc::new(Setup::model(RuntimeConfig::default()));
//!         let map = BiHashMap::<u64, u64>::at(s.slot(0));
//!         let mut w = map.write_handle(s.writer(0)).unwrap();
//!         let r = map.read_handle(&s.nodes[1]).unwrap();
//!         let s2 = s.clone();
//!         let writer = loom::thread::spawn(move || {
//!             w.insert(1, 10).unwrap();
//!             s2.nodes[0].quiesce().unwrap();
//!         });
//!         let got = r.get(&1).unwrap();
//!         assert!(got.is_none() || got == Some(10));
//!         s.nodes[1].quiesce().unwrap();
//!         writer.join().unwrap();
//!         s.nodes[1].quiesce().unwrap();
//!         assert_eq!(r.get(&1).unwrap(), Some(10));
//!     });
//! }
//! ```
//!
//! Run it with
//! `RUSTFLAGS="--cfg loom" cargo test --release --test loom_map` (a separate
//! `--target-dir` keeps the normal build's artifacts).

use super::{BiError, NodeRuntime, PassReport, RuntimeConfig, Writer};
use crate::heap::BumpHeap;
use crate::mem::{Access, EmulatedNode, Emulator, EmulatorConfig, MemError, MemView, Observed};
use crate::primitive::sync::atomic::Ordering;
use crate::region::{Region, RegionConfig};
use crate::runtime::EmulatedClock;
use std::ops::Range;
use std::sync::Arc;

/// An emulated machine, its region and a runtime per node.
///
/// ```
/// use bi_core::runtime::testing::Setup;
///
/// let s = Setup::new(3, 1);
/// assert_eq!(s.nodes.len(), 3);
/// assert!(s.arena(0).end <= s.arena(1).start);
/// ```
#[derive(Debug)]
pub struct Setup {
    /// The region (layout and memory).
    pub region: Region,
    /// The emulator over the region's memory.
    pub emu: Emulator,
    /// One runtime per node.
    pub nodes: Vec<NodeRuntime<EmulatedNode>>,
}

impl Setup {
    /// `nodes` nodes, a 256 KiB region, seed `seed`, no random hardware events, no skew,
    /// leases of a million ticks.
    ///
    /// # Panics
    ///
    /// On impossible parameters.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(4, 7);
    /// assert_eq!(s.region.layout().config().nodes(), 4);
    /// assert_eq!(s.region.layout().size(), 1 << 18);
    /// ```
    pub fn new(nodes: usize, seed: u64) -> Setup {
        Setup::with(
            RegionConfig::new(1 << 18).with_nodes(nodes as u32),
            |c| c.seed(seed),
            RuntimeConfig::default()
                .node_lease(1_000_000)
                .reader_lease(1_000_000),
        )
    }

    /// The smallest machine the runtime accepts: two nodes, one reader each, 32-byte
    /// lines, eight-entry log rings, one root entry and the minimal heap, with no random
    /// hardware events (what loom models run on, where every emulated operation is a
    /// model step).
    ///
    /// # Panics
    ///
    /// On an invalid runtime configuration.
    ///
    /// ```
    /// use bi_core::runtime::{RuntimeConfig, testing::Setup};
    ///
    /// let s = Setup::smallest(RuntimeConfig::default());
    /// assert_eq!(s.nodes.len(), 2);
    /// assert_eq!(s.region.layout().line_size().get(), 32);
    /// let _reader = s.nodes[0].reader().unwrap();
    /// assert!(s.nodes[0].reader().is_err()); // one reader per node
    /// ```
    pub fn smallest(runtime: RuntimeConfig) -> Setup {
        Setup::small(32, runtime)
    }

    /// The smallest machine the collections run on, for loom models of code that uses
    /// them (see the [module](self) docs): as [`smallest`](Self::smallest), with 64-byte
    /// lines and room for a small map or tree.
    ///
    /// # Panics
    ///
    /// On an invalid runtime configuration.
    ///
    /// ```
    /// use bi_core::runtime::{RuntimeConfig, testing::Setup};
    ///
    /// let s = Setup::model(RuntimeConfig::default());
    /// assert_eq!(s.region.layout().line_size().get(), 64);
    /// let mut w = s.writer(0);
    /// let b = w.alloc([7u64; 6]).unwrap(); // a bucket's worth
    /// w.publish(s.slot(0), b).unwrap();
    /// s.nodes[1].quiesce().unwrap();
    /// let r = s.nodes[1].reader().unwrap();
    /// assert_eq!(*r.enter().load::<[u64; 6]>(s.slot(0)).unwrap().unwrap(), [7; 6]);
    /// ```
    pub fn model(runtime: RuntimeConfig) -> Setup {
        Setup::small(64, runtime)
    }

    fn small(line: usize, runtime: RuntimeConfig) -> Setup {
        let config = RegionConfig::new(0)
            .with_line_size(line)
            .with_nodes(2)
            .with_readers_per_node(1)
            .with_log_ring_entries(8)
            .with_root_entries(1);
        // A collection's first table and a few nodes, in each node's arena.
        let room = if line >= 64 { 16 << 10 } else { 0 };
        let size = config.min_size().expect("minimal region") + room;
        Setup::with(config.with_size(size), |c| c, runtime)
    }

    /// A machine from a region configuration, an adjustment of the emulator
    /// configuration (which starts from the region's size and node count) and a runtime
    /// configuration.
    ///
    /// # Panics
    ///
    /// On impossible parameters.
    ///
    /// ```
    /// use bi_core::region::RegionConfig;
    /// use bi_core::runtime::{RuntimeConfig, testing::Setup};
    ///
    /// let s = Setup::with(
    ///     RegionConfig::new(1 << 18).with_nodes(3).with_line_size(128),
    ///     |c| c.seed(5).clock_skew(10),
    ///     RuntimeConfig::default().skew(20),
    /// );
    /// assert_eq!(s.nodes.len(), 3);
    /// assert_eq!(s.nodes[2].config().skew_bound(), 20);
    /// ```
    pub fn with(
        region: RegionConfig,
        emulator: impl FnOnce(EmulatorConfig) -> EmulatorConfig,
        runtime: RuntimeConfig,
    ) -> Setup {
        let region = Region::anonymous(region).expect("region configuration");
        let nodes = region.layout().config().nodes() as usize;
        let cfg = emulator(
            EmulatorConfig::new(region.layout().size(), nodes)
                .line_size(region.layout().line_size()),
        );
        let emu = Emulator::over(region.backing().clone(), cfg).expect("emulator configuration");
        let nodes = (0..nodes)
            .map(|n| {
                NodeRuntime::emulated(emu.node(n), *region.layout(), runtime.clone())
                    .expect("runtime configuration")
            })
            .collect();
        Setup { region, emu, nodes }
    }

    /// Node `n`'s share of the heap.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let heap = s.region.layout().heap();
    /// assert!(s.arena(0).start >= heap.offset && s.arena(1).end <= heap.end());
    /// assert_eq!(s.arena(0).end, s.arena(1).start);
    /// ```
    pub fn arena(&self, n: usize) -> Range<usize> {
        let heap = self.region.layout().heap();
        let line = self.region.layout().line_size().get();
        let nodes = self.region.layout().config().nodes() as usize;
        let per = heap.len / nodes / line * line;
        heap.offset + n * per..heap.offset + (n + 1) * per
    }

    /// The writer of node `n`, with a [`BumpHeap`] over its arena.
    ///
    /// # Panics
    ///
    /// If the node already has a writer.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w = s.writer(1);
    /// let b = w.alloc(1u64).unwrap();
    /// assert!(s.arena(1).contains(&b.offset()));
    /// w.discard(b).unwrap();
    /// ```
    pub fn writer(&self, n: usize) -> Writer<EmulatedNode, BumpHeap> {
        let heap = BumpHeap::new(self.arena(n), self.region.layout().line_size()).expect("arena");
        self.nodes[n].writer(heap).expect("one writer per node")
    }

    /// Offset of the `i`-th root directory slot, a convenient place for test slots.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let dir = s.region.layout().root_directory();
    /// assert!(dir.contains(s.slot(0), 8) && dir.contains(s.slot(1), 8));
    /// assert!(s.slot(1) > s.slot(0));
    /// ```
    pub fn slot(&self, i: usize) -> usize {
        self.region
            .layout()
            .root_entry(i)
            .expect("root directory entry")
            .offset
    }

    /// Node `n`'s host dies: its runtime is abandoned (its node claim and any writer
    /// role stay in the region, as a killed process leaves them), its cache is lost
    /// without writing anything back, its lease runs out, and a new process runs node `n`
    /// with `config` (whose node lease is the one waited for). Forget the dead process's
    /// handles (`std::mem::forget`) before: dropping them would clean up as only a
    /// living process does.
    ///
    /// # Panics
    ///
    /// If the new runtime cannot be made.
    ///
    /// ```
    /// use bi_core::runtime::{RuntimeConfig, testing::Setup};
    ///
    /// let mut s = Setup::new(2, 0);
    /// let w = s.writer(1);
    /// std::mem::forget(w); // the dead process's handle
    /// let config = RuntimeConfig::default().node_lease(1_000_000).reader_lease(1_000_000);
    /// s.crash_and_restart(1, config);
    /// assert!(s.nodes[1].holds_claim().unwrap());
    /// assert_eq!(s.nodes[1].quiesce().unwrap().pass, 1); // a new process
    /// ```
    pub fn crash_and_restart(&mut self, n: usize, config: RuntimeConfig) {
        std::mem::forget(self.nodes.remove(n));
        self.emu.node(n).crash();
        self.emu
            .advance(config.node_lease_ticks().saturating_mul(2));
        let layout = *self.region.layout();
        let fresh = NodeRuntime::emulated(self.emu.node(n), layout, config).expect("runtime");
        self.nodes.insert(n, fresh);
    }

    /// Node `n`'s process is killed before its `store`-th store (a store or a
    /// compare-and-exchange, counted from the start of a new runtime for node `n`) while
    /// `work` runs as that process (given the setup, whose `nodes` lack node `n` meanwhile,
    /// and the process's runtime); its host stays up, so the dirty lines of its cache
    /// stay and may still reach memory (where [`crash_and_restart`](Self::crash_and_restart)
    /// loses them). Then the node's lease runs out while every other node passes, and a
    /// new process runs node `n` with `config`. `work` forgets the handles it makes
    /// (`std::mem::forget`: a killed process runs no destructor). Returns what `work`
    /// returned (`None` if the killed process could not even start its runtime) and
    /// whether the kill came.
    ///
    /// # Panics
    ///
    /// If the new runtime cannot be made, or another node's pass fails.
    ///
    /// ```
    /// use bi_core::heap::BumpHeap;
    /// use bi_core::runtime::{RuntimeConfig, testing::Setup};
    ///
    /// let mut s = Setup::new(2, 0);
    /// let config = RuntimeConfig::default().node_lease(1_000_000).reader_lease(1_000_000);
    /// let (published, killed) = s.kill_process_at_store(0, 3, config, |s, rt| {
    ///     let line = s.region.layout().line_size();
    ///     let mut w = rt.writer(BumpHeap::new(s.arena(0), line).unwrap()).unwrap();
    ///     let published = w.alloc(7u64).map(|b| w.publish(s.slot(0), b).is_ok());
    ///     std::mem::forget(w);
    ///     published.unwrap_or(false)
    /// });
    /// assert!(killed && published != Some(true)); // killed starting, or publishing
    /// assert!(s.nodes[0].holds_claim().unwrap()); // a new process runs node 0
    /// ```
    pub fn kill_process_at_store<R>(
        &mut self,
        n: usize,
        store: usize,
        config: RuntimeConfig,
        work: impl FnOnce(&Setup, &NodeRuntime<Observed<EmulatedNode>>) -> R,
    ) -> (Option<R>, bool) {
        self.kill_at_store(n, store, config, |_| {}, work)
    }

    /// [`kill_process_at_store`](Self::kill_process_at_store), but the whole host dies:
    /// `at_death` runs first (the hardware's last acts, such as an eviction that wrote a
    /// line back), then the host's cache is lost, with every store that had not reached
    /// memory.
    ///
    /// ```
    /// use bi_core::heap::BumpHeap;
    /// use bi_core::runtime::{RuntimeConfig, testing::Setup};
    ///
    /// let mut s = Setup::new(2, 0);
    /// let config = RuntimeConfig::default().node_lease(1_000_000).reader_lease(1_000_000);
    /// let slot = s.slot(0);
    /// // Killed before the publication's slot store: the object stays unpublished.
    /// let (_, killed) = s.kill_host_at_store(0, 3, config, |_| {}, |s, rt| {
    ///     let line = s.region.layout().line_size();
    ///     let mut w = rt.writer(BumpHeap::new(s.arena(0), line).unwrap()).unwrap();
    ///     let _ = w.alloc(7u64).map(|b| w.publish(slot, b));
    ///     std::mem::forget(w);
    /// });
    /// assert!(killed);
    /// assert_eq!(s.emu.peek::<u64>(slot).unwrap(), 0);
    /// ```
    pub fn kill_host_at_store<R>(
        &mut self,
        n: usize,
        store: usize,
        config: RuntimeConfig,
        at_death: impl Fn(&EmulatedNode) + Send + Sync + 'static,
        work: impl FnOnce(&Setup, &NodeRuntime<Observed<EmulatedNode>>) -> R,
    ) -> (Option<R>, bool) {
        let at_death = move |host: &EmulatedNode| {
            at_death(host);
            host.crash();
        };
        self.kill_at_store(n, store, config, at_death, work)
    }

    /// The two kills above: `at_death` runs on the host when the kill comes.
    fn kill_at_store<R>(
        &mut self,
        n: usize,
        store: usize,
        config: RuntimeConfig,
        at_death: impl Fn(&EmulatedNode) + Send + Sync + 'static,
        work: impl FnOnce(&Setup, &NodeRuntime<Observed<EmulatedNode>>) -> R,
    ) -> (Option<R>, bool) {
        const KILLED: MemError = MemError::BadSize {
            requested: 0,
            reason: "the process was killed",
        };
        drop(self.nodes.remove(n));
        let host = self.emu.node(n);
        let stores = |a: &Access| matches!(a, Access::Store(..) | Access::CompareExchange(..));
        let dying_host = host.clone();
        let (view, dead) = Observed::dying(host.clone(), store, stores, KILLED, move || {
            at_death(&dying_host)
        });
        let clock = Arc::new(EmulatedClock::new(host));
        let layout = *self.region.layout();
        let done = NodeRuntime::new(view, layout, n, config.clone(), clock)
            .ok()
            .map(|rt| {
                let done = work(self, &rt);
                std::mem::forget(rt);
                done
            });
        for _ in 0..4 {
            self.emu.advance(config.node_lease_ticks() / 2);
            for other in &self.nodes {
                other.quiesce().expect("another node's pass");
            }
        }
        let fresh = NodeRuntime::emulated(self.emu.node(n), layout, config).expect("runtime");
        self.nodes.insert(n, fresh);
        (done, dead.load(Ordering::SeqCst))
    }

    /// Makes node `n`'s share record name process `pid` of this host as the process
    /// that runs it, as if that process had claimed it (the runtime in this process keeps
    /// running it): other nodes then judge node `n`'s runner by whether `pid` still
    /// exists, as they judge a runner in another process (`runtime::node::process`).
    /// False, writing nothing, if `pid` is no process of this host.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// # if cfg!(miri) { return; } // no processes under Miri
    /// let s = Setup::new(2, 0);
    /// let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
    /// assert!(s.run_node_in(0, child.id()).unwrap());
    /// child.kill().unwrap();
    /// child.wait().unwrap();
    /// assert!(!s.run_node_in(0, child.id()).unwrap()); // gone
    /// ```
    pub fn run_node_in(&self, n: usize, pid: u32) -> Result<bool, BiError> {
        let Some(started) = super::process::started(pid) else {
            return Ok(false);
        };
        let view = self.nodes[n].view();
        let layout = self.region.layout();
        let at = layout
            .node_record(n)
            .ok_or_else(|| BiError::BadNode { node: n })?
            .offset;
        let holder = view.load_from_memory::<super::NodeRecord>(at)?.holder;
        let record = super::share::ShareRecord {
            pid: u64::from(pid),
            started,
            ..super::share::ShareRecord::of_this_process(holder, 0)
        };
        view.store_to_memory(at + super::share::SHARE_SLOT * layout.slot_size(), &record)?;
        Ok(true)
    }

    /// Makes node `n`'s reader record `record` held by process `pid` (this host's kernel
    /// is asked about it as about any holder): a record of a live process is never
    /// taken, one of a gone process is taken over. Returns the record's index.
    ///
    /// # Errors
    ///
    /// [`BiError::BadNode`] for a node or record the layout does not have.
    pub fn hold_reader_record_in(
        &self,
        n: usize,
        record: usize,
        pid: u32,
    ) -> Result<usize, BiError> {
        let at = self
            .region
            .layout()
            .reader_record(n, record)
            .ok_or_else(|| BiError::BadNode { node: n })?
            .offset;
        let word = super::reader_state::ReaderHolder::new(pid, 0x5eed).word();
        self.nodes[n]
            .view()
            .store_to_memory(at + super::share::HOLDER_AT, &word)?;
        Ok(record)
    }

    /// Runs one pass on every node, in order.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(3, 0);
    /// let reports = s.quiesce_all().unwrap();
    /// assert_eq!(reports.len(), 3);
    /// assert!(reports.iter().all(|r| r.pass == 1));
    /// ```
    pub fn quiesce_all(&self) -> Result<Vec<PassReport>, BiError> {
        self.nodes.iter().map(|n| n.quiesce()).collect()
    }
}

/// Publishes a line array of 16 words at `slot` with `w` and rewrites its lines until
/// the writer's modified ring refuses more (no node passes meanwhile); returns the array.
/// The ring stays full until every live node passes or its lease lapses.
///
/// # Panics
///
/// If the ring takes twice its entries in rewrites without refusing one.
///
/// ```
/// use bi_core::runtime::testing::{Setup, fill_modified_ring};
/// use bi_core::runtime::BiError;
///
/// let s = Setup::new(2, 0);
/// let mut w = s.writer(0);
/// let a = fill_modified_ring(&mut w, s.slot(0));
/// assert!(matches!(w.rewrite_lines(&[(a, 0, 1)]), Err(BiError::LogFull { .. })));
/// s.quiesce_all().unwrap();
/// w.rewrite_lines(&[(a, 0, 1)]).unwrap();
/// ```
pub fn fill_modified_ring<V: MemView, H: crate::heap::Heap>(
    w: &mut Writer<V, H>,
    slot: usize,
) -> crate::runtime::Link<crate::runtime::Lines<u64>> {
    let a = w.alloc_lines(&[0u64; 16]).expect("room for the array");
    w.publish_lines(slot, a).expect("the array published");
    // A ring that never refuses is a bug the calling test should report, not wait on.
    let most = 2 * w.inner.layout.config().log_ring_entries() as usize;
    let refused = (0..most).any(|i| w.try_rewrite_lines(&[(a, i % 16, i as u64)]).is_err());
    assert!(
        refused,
        "the modified ring took {most} rewrites without a pass"
    );
    a
}

/// A loom builder for models over [`Setup::model`]: at most two preemptions unless
/// `LOOM_MAX_PREEMPTIONS` says otherwise (every interleaving with up to two, a few
/// thousand for an insert racing a lookup with a pass per node), and a branch budget a
/// pass fits in.
#[cfg(loom)]
pub fn model_builder() -> loom::model::Builder {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.max_branches = 1_000_000;
    builder
}
