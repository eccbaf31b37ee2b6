//! The emulated hardware an input chooses.
//!
//! [`Events`] is the emulator's seed and the rates of its random events (evictions,
//! adjacent and random prefetch, write-backs that land early), one byte per rate, and
//! [`Skew`] the bound of its per-node clock skew. [`machine`] wires a region and an
//! emulator over its memory with them. The collection targets run on
//! `bi_collections::testing`'s machine instead, which scales the same bytes the same
//! way; [`CollectionInput`] decodes its bytes and the steps after them.
//!
//! Everything here decodes field by field in the order written: the inputs kept in
//! `regressions/` depend on that order.

use arbitrary::{Arbitrary, Unstructured};
use bi_collections::testing::Hardware;
use bi_core::mem::{Emulator, EmulatorConfig};
use bi_core::region::{Region, RegionConfig};

/// The emulator's seed and the rates of its random events, as the input chooses them.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct Events {
    /// The seed of every random event.
    pub seed: u64,
    /// Evictions per access: 0 to 0.2.
    pub eviction: u8,
    /// Adjacent-line prefetch: `(b % 4) * 0.1`.
    pub adjacent_prefetch: u8,
    /// Random prefetch: `(b % 4) * 0.02`.
    pub random_prefetch: u8,
    /// Late write-backs (`EmulatorConfig::late_writebacks`): `(b % 4) * 0.05` (0: a
    /// write-back lands when asked).
    pub late_writebacks: u8,
}

impl Events {
    /// `config` with this seed and these rates.
    pub fn apply(&self, config: EmulatorConfig) -> EmulatorConfig {
        config
            .seed(self.seed)
            .eviction_rate(f64::from(self.eviction) / 255.0 * 0.2)
            .adjacent_prefetch_rate(f64::from(self.adjacent_prefetch % 4) * 0.1)
            .random_prefetch_rate(f64::from(self.random_prefetch % 4) * 0.02)
            .late_writebacks(f64::from(self.late_writebacks % 4) * 0.05)
    }
}

/// The bound of each node's clock skew, as the input chooses it: up to 31 ticks.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct Skew(pub u8);

impl Skew {
    /// The emulator's per-node bound, in ticks.
    pub fn ticks(self) -> u64 {
        u64::from(self.0 % 32)
    }

    /// The bound the runtime is told: two nodes' clocks may be this far apart.
    pub fn bound(self) -> u64 {
        2 * self.ticks()
    }
}

/// A region of `nodes` nodes from `config`, and an emulator over its memory with the
/// region's size and line size, `events`, and whatever `tune` adds (a clock skew, a
/// cache size).
///
/// # Panics
///
/// On impossible parameters.
pub fn machine(
    config: RegionConfig,
    nodes: usize,
    events: &Events,
    tune: impl FnOnce(EmulatorConfig) -> EmulatorConfig,
) -> (Region, Emulator) {
    let region = Region::anonymous(config.with_nodes(nodes as u32)).expect("region");
    let layout = region.layout();
    let emulator =
        tune(events.apply(EmulatorConfig::new(layout.size(), nodes).line_size(layout.line_size())));
    let emu = Emulator::over(region.backing().clone(), emulator).expect("emulator");
    (region, emu)
}

/// The input of a target that runs a collection on `bi_collections::testing`'s machine:
/// the bytes of its [`Hardware`] (seed, eviction, adjacent and random prefetch, skew,
/// heap size and late write-backs, in the order of its fields; it scales them as
/// [`Events`] and [`Skew`] do), then steps until the data runs out or `MAX` are read.
#[derive(Debug)]
pub struct CollectionInput<S, const MAX: usize> {
    /// The machine.
    pub hardware: Hardware,
    /// What runs on it.
    pub steps: Vec<S>,
}

impl<'a, S: Arbitrary<'a>, const MAX: usize> Arbitrary<'a> for CollectionInput<S, MAX> {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let hardware = Hardware {
            seed: u.arbitrary()?,
            eviction: u.arbitrary()?,
            adjacent_prefetch: u.arbitrary()?,
            random_prefetch: u.arbitrary()?,
            skew: u.arbitrary()?,
            heap_kib: u.arbitrary()?,
            late_writebacks: u.arbitrary()?,
        };
        Ok(CollectionInput {
            hardware,
            steps: crate::steps(u, MAX)?,
        })
    }
}
