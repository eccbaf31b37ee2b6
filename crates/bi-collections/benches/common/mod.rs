//! What the benches of this crate share: placing their regions and background passes as
//! the machine [`Settings`] say (`BI_REGION`, `BI_MEMBIND`, `BI_PIN`).

// Each bench uses only part of this module.
#![allow(dead_code)]

use bi_core::mem::{Hardware, MemView};
use bi_core::region::{Region, RegionConfig};
use bi_core::runtime::{Background, Clock, NodeRuntime, RuntimeConfig, TickClock};
use bi_kit::bench::Settings;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A fresh region named `name` (distinct for each region of a bench, e.g. `tree-64K`): in
/// `BI_REGION`'s file or device when set (replacing what it held), else in anonymous
/// memory; bound to `BI_MEMBIND`'s NUMA nodes.
pub fn region(settings: &Settings, name: &str, config: RegionConfig) -> Region {
    region_at(settings, settings.region_file(name), config)
}

/// A fresh region in `file` when given (replacing what it held), else in anonymous
/// memory; bound to `BI_MEMBIND`'s NUMA nodes.
pub fn region_at(settings: &Settings, file: Option<PathBuf>, config: RegionConfig) -> Region {
    let region = Region::fresh(file.as_deref(), config).unwrap_or_else(|e| panic!("region: {e}"));
    let backing = region.backing();
    settings
        .bind_memory(backing.base_ptr().addr(), backing.size())
        .expect("BI_MEMBIND");
    region
}

/// A runtime for each node of `region`, on the hardware, sharing one clock (the default
/// runtime configuration).
pub fn hardware_nodes(region: &Region) -> Vec<NodeRuntime<Hardware>> {
    let layout = *region.layout();
    let clock: Arc<dyn Clock> = Arc::new(TickClock::new());
    (0..layout.config().nodes() as usize)
        .map(|k| {
            NodeRuntime::new(
                region.hardware(),
                layout,
                k,
                RuntimeConfig::default(),
                clock.clone(),
            )
            .expect("runtime")
        })
        .collect()
}

/// Whether `BI_REGION` gives each region of a bench a file of its own (it names a
/// directory), so that a bench may hold several regions there at once. A single file or
/// device holds one region at a time: creating a second one replaces the first, under a
/// mapping that still uses it.
pub fn file_per_region(settings: &Settings) -> bool {
    settings.region.as_deref().is_some_and(Path::is_dir)
}

/// Starts a background pass every `period` on each of `nodes`, each pass thread on its
/// node's CPUs (the calling thread is pinned to the node while it starts the thread,
/// which inherits them), then pins the calling thread to node `home`.
pub fn start_passes<V: MemView + 'static>(
    settings: &Settings,
    nodes: &[NodeRuntime<V>],
    period: Duration,
    home: usize,
) -> Vec<Background> {
    let passes = nodes
        .iter()
        .map(|rt| {
            settings.pin_thread(rt.node()).expect("BI_PIN");
            rt.start_background(period)
        })
        .collect();
    settings.pin_thread(home).expect("BI_PIN");
    passes
}
