//! What a read section costs: `BiGuard` enter + exit against `crossbeam_epoch::pin()` +
//! drop and against the floor, a pair of plain thread-local stores with a compiler fence.
//!
//! Bounded Incoherence puts no cache operation and no fence on the read path: entering
//! reads the node's coarse clock and stores one word into the reader's own record; leaving
//! stores it again. The ordering that reclamation needs is paid by the quiescence pass
//! (`membarrier`), as in liburcu's memb flavour. So a section should cost about as much as
//! the two-store floor, and well under an epoch pin, which issues a full fence.
//!
//! Runs on the `Hardware` view over anonymous memory, or over `BI_REGION`'s file or device;
//! the measuring thread plays node 0 (`BI_PIN`). `BI_BENCH_QUICK=1` (or `-- --quick`)
//! shortens the run. After criterion's groups it prints a plain table of median ns per
//! section and the ratios, measured in the same run, and writes them as findings.

mod common;

use bi_kit::bench::{self as kit, Findings, Settings, Target};

use bi::core::region::RegionConfig;
use bi::core::runtime::{NodeRuntime, RuntimeConfig, TickClock};
use criterion::Throughput;
use std::cell::Cell;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering, compiler_fence};

/// Sections per measured iteration.
const BATCH: u64 = 1_000;

thread_local! {
    static RECORD: (AtomicU64, AtomicU64) = const { (AtomicU64::new(0), AtomicU64::new(0)) };
    static TICKS: Cell<u64> = const { Cell::new(0) };
}

/// The floor: what any reader registration costs at least.
#[inline(never)]
fn plain_stores(n: u64) {
    RECORD.with(|(enter, exit)| {
        for i in 0..n {
            enter.store(i, Ordering::Relaxed);
            compiler_fence(Ordering::SeqCst);
            black_box(());
            compiler_fence(Ordering::SeqCst);
            exit.store(i, Ordering::Release);
        }
    });
}

#[inline(never)]
fn epoch_pins(n: u64) {
    for _ in 0..n {
        let guard = crossbeam_epoch::pin();
        black_box(&guard);
        drop(guard);
    }
}

fn main() {
    let settings = Settings::load("read_section");
    // Before pinning: the findings name the CPUs the machine gives this process.
    let mut findings = Findings::new("read_section", &settings);
    let quick = kit::quick();
    common::pin(&settings, "read_section", 0);
    let nodes = settings.nodes_or(1) as u32;
    let region = common::region(
        &settings,
        "read_section",
        RegionConfig::new(1 << 20).with_nodes(nodes),
    );
    let runtime = NodeRuntime::new(
        region.hardware(),
        *region.layout(),
        0,
        RuntimeConfig::default(),
        Arc::new(TickClock::new()),
    )
    .expect("runtime");
    let reader = runtime.reader().expect("reader slot");
    let bi_sections = |n: u64| {
        for _ in 0..n {
            let guard = reader.enter();
            black_box(&guard);
            drop(guard);
        }
    };

    let mut c = kit::criterion(quick);
    {
        let mut g = c.benchmark_group("read_section");
        g.throughput(Throughput::Elements(BATCH));
        g.bench_function("two_plain_stores", |b| b.iter(|| plain_stores(BATCH)));
        g.bench_function("crossbeam_epoch_pin", |b| b.iter(|| epoch_pins(BATCH)));
        g.bench_function("bi_guard", |b| b.iter(|| bi_sections(BATCH)));
        g.finish();
    }
    c.final_summary();

    let (runs, sections) = if quick {
        (5, 2_000_000)
    } else {
        (11, 10_000_000)
    };
    let floor = kit::median_ns(runs, sections, plain_stores);
    let epoch = kit::median_ns(runs, sections, epoch_pins);
    let bi = kit::median_ns(runs, sections, bi_sections);
    println!(
        "read section, ns per enter+exit (median of {runs} runs of {sections}), reader ordering {:?}",
        runtime.reader_ordering()
    );
    println!("  two plain stores      {floor:6.2}");
    println!("  crossbeam_epoch::pin  {epoch:6.2}");
    println!("  BiGuard               {bi:6.2}");
    println!(
        "  ratio BiGuard / epoch pin     {:.2}  (target <= 0.50)",
        bi / epoch
    );
    println!("  ratio BiGuard / plain stores  {:.2}", bi / floor);

    findings.ratio(
        "BiGuard enter+exit / crossbeam-epoch pin",
        bi / epoch,
        Some(Target::AtMost(0.5)),
    );
    findings.ratio("BiGuard enter+exit / two plain stores", bi / floor, None);
    common::write(&findings);
}
