//! A ready-made emulated machine with a runtime per node, for examples and tests.
//!
//! Not part of the protocol: it wires a [`Region`], an [`Emulator`] over the region's
//! memory and one [`NodeRuntime`] per node, and splits the heap into one [`BumpHeap`]
//! arena per node. Its constructors panic on impossible parameters (they are test
//! fixtures).

use super::{BiError, NodeRuntime, PassReport, RuntimeConfig, Writer};
use crate::heap::BumpHeap;
use crate::mem::{EmulatedNode, Emulator, EmulatorConfig};
use crate::region::{Region, RegionConfig};
use std::ops::Range;

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
    pub fn smallest(runtime: RuntimeConfig) -> Setup {
        let config = RegionConfig::new(0)
            .with_line_size(32)
            .with_nodes(2)
            .with_readers_per_node(1)
            .with_log_ring_entries(8)
            .with_root_entries(1);
        let size = config.min_size().expect("minimal region");
        Setup::with(config.with_size(size), |c| c, runtime)
    }

    /// A machine from a region configuration, an adjustment of the emulator
    /// configuration (which starts from the region's size and node count) and a runtime
    /// configuration.
    ///
    /// # Panics
    ///
    /// On impossible parameters.
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
    pub fn writer(&self, n: usize) -> Writer<EmulatedNode, BumpHeap> {
        let heap = BumpHeap::new(self.arena(n), self.region.layout().line_size()).expect("arena");
        self.nodes[n].writer(heap).expect("one writer per node")
    }

    /// Offset of the `i`-th root directory slot, a convenient place for test slots.
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
    pub fn crash_and_restart(&mut self, n: usize, config: RuntimeConfig) {
        std::mem::forget(self.nodes.remove(n));
        self.emu.node(n).crash();
        self.emu
            .advance(config.node_lease_ticks().saturating_mul(2));
        let layout = *self.region.layout();
        let fresh = NodeRuntime::emulated(self.emu.node(n), layout, config).expect("runtime");
        self.nodes.insert(n, fresh);
    }

    /// Runs one pass on every node, in order.
    pub fn quiesce_all(&self) -> Result<Vec<PassReport>, BiError> {
        self.nodes.iter().map(|n| n.quiesce()).collect()
    }
}
