//! What the root crate's benches share: placing their shared memory and threads as the
//! machine [`Settings`] say, and writing their findings. A setting the system refuses
//! (a CPU set, a NUMA node, a region file) is printed, naming the bench, and the bench
//! exits with status 2.

// Each bench uses only part of this module.
#![allow(dead_code)]

use bi_core::mem::Backing;
use bi_core::region::{Region, RegionConfig};
use bi_kit::bench::{Findings, Settings};

/// Prints `message` under the bench's name and exits with status 2.
fn fail(bench: &str, message: impl std::fmt::Display) -> ! {
    eprintln!("{bench}: {message}");
    std::process::exit(2)
}

/// A fresh region for bench `bench`: in `BI_REGION`'s file or device when set (replacing
/// what it held), else in anonymous memory; bound to `BI_MEMBIND`'s NUMA nodes.
pub fn region(settings: &Settings, bench: &str, config: RegionConfig) -> Region {
    let region = Region::fresh(settings.region_file(bench).as_deref(), config)
        .unwrap_or_else(|e| fail(bench, format_args!("region: {e}")));
    bind(settings, bench, region.backing());
    region
}

/// Binds `backing` to `BI_MEMBIND`'s NUMA nodes (nothing without it).
pub fn bind(settings: &Settings, bench: &str, backing: &Backing) {
    settings
        .bind_memory(backing.base_ptr().addr(), backing.size())
        .unwrap_or_else(|e| fail(bench, e));
}

/// Pins the calling thread to node `node`'s CPUs (nothing without `BI_PIN`). Threads it
/// starts afterwards inherit the same CPUs.
pub fn pin(settings: &Settings, bench: &str, node: usize) {
    settings.pin_thread(node).unwrap_or_else(|e| fail(bench, e));
}

/// Writes `findings` where `BI_REPORT_DIR` says (nothing without it).
pub fn write(findings: &Findings) {
    if let Err(e) = findings.write() {
        let path = findings.path().unwrap_or_default();
        fail(
            &findings.bench,
            format_args!("cannot write the findings to {}: {e}", path.display()),
        );
    }
}
