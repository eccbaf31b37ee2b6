//! How fast the non-coherence emulator serves loads that hit the node's cache.
//!
//! Every test of the runtime and the collections runs its shared-memory accesses through
//! the emulator, so its hit path bounds how large those tests can be. This bench measures
//! emulated `load::<u64>` calls per second on one thread over a working set that fits the
//! node's cache (so every load after the first pass is a hit), with no random events.
//!
//! The measuring thread plays node 0 (`BI_PIN`); `BI_NODES` sets the emulated machine's
//! nodes (2 by default). `BI_BENCH_QUICK=1` (or `-- --quick`) shortens the run. The rate
//! is written as findings (an absolute rate, with no target).

mod common;

use bi_kit::bench::{self as kit, Findings, Settings};

use bi::core::mem::{Emulator, EmulatorConfig, MemView};
use criterion::Throughput;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Bytes of the emulated memory.
const SIZE: usize = 1 << 20;
/// Lines read in a loop: half of the default 512-line cache.
const WORKING_LINES: usize = 256;
/// Loads per criterion iteration.
const BATCH: usize = 4096;

/// Offsets of one 8-byte word in each working line, visited in a scattered order.
fn offsets() -> Vec<usize> {
    (0..BATCH)
        .map(|i| (i * 97 % WORKING_LINES) * 64 + (i % 8) * 8)
        .collect()
}

fn load_all<V: MemView>(view: &V, offs: &[usize]) -> u64 {
    let mut sum = 0u64;
    for &off in offs {
        sum = sum.wrapping_add(view.load::<u64>(off).expect("in bounds"));
    }
    sum
}

/// Loads per second, timed plainly over `duration`.
fn plain_rate(view: &impl MemView, offs: &[usize], duration: Duration) -> f64 {
    let start = Instant::now();
    let mut loads = 0u64;
    while start.elapsed() < duration {
        black_box(load_all(view, black_box(offs)));
        loads += offs.len() as u64;
    }
    loads as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let settings = Settings::load("emulator");
    // Before pinning: the findings name the CPUs the machine gives this process.
    let mut findings = Findings::new("emulator", &settings);
    let quick = kit::quick();
    common::pin(&settings, "emulator", 0);
    let emu = Emulator::new(EmulatorConfig::new(SIZE, settings.nodes_or(2)));
    let node = emu.node(0);
    let offs = offsets();
    load_all(&node, &offs); // fill the working set
    emu.reset_stats();

    let mut c = bi_kit::bench::criterion(quick);
    if quick {
        c = c
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_millis(500))
            .sample_size(10);
    }
    let mut group = c.benchmark_group("emulator");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("load_u64_hit", |b| {
        b.iter(|| load_all(&node, black_box(&offs)))
    });
    group.finish();

    let stats = node.stats();
    assert_eq!(stats.misses, 0, "the working set must stay cached: {stats}");

    let rate = plain_rate(
        &node,
        &offs,
        Duration::from_millis(if quick { 300 } else { 2_000 }),
    );
    println!(
        "emulator hit path: {:.1} million loads/s per thread",
        rate / 1e6
    );
    c.final_summary();

    findings.ratio(
        "emulated load hits per second per thread, millions (a rate, not a ratio)",
        rate / 1e6,
        None,
    );
    common::write(&findings);
}
