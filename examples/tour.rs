//! A tour of bi on built-in data.
//!
//! 1. The emulator makes the effects of non-coherent caches visible as counts: stale
//!    reads, stores seen out of order, lost updates, a prefetch refilling an invalidated
//!    line, a read of reused memory.
//! 2. A seeded run with random evictions and prefetches, twice, to show it is repeatable.
//! 3. What the real cache instructions cost per line on this machine, batched against
//!    serialised.
//! 4. A shared region with a named root, read back through the hardware view.
//! 5. The Bounded Incoherence runtime on three emulated nodes with adversarial hardware: a
//!    writer publishes and retires versions of a record, readers on the other nodes read
//!    it; staleness stays within the bound, memory is reclaimed, no reused memory is read.
//! 6. The hazard catalog in brief: each hazard under a broken protocol and under BI.
//!
//! ```sh
//! cargo run --release --example tour
//! cargo run --release --example tour -- --seed 7 --quick
//! ```

use bi::alloc::NodeHeap;
use bi::core::cache::{CacheOps, Instruction};
use bi::core::heap::Heap;
use bi::core::mem::{Backing, Emulator, EmulatorConfig, MemView, NodeStats};
use bi::core::ptr::ShPtr;
use bi::core::region::{Region, RegionConfig};
use bi::core::runtime::{NodeRuntime, RuntimeConfig};
use clap::Parser;
use std::error::Error;
use std::time::Instant;

/// An end-to-end tour of Bounded Incoherence on built-in data.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Seed for the emulator's adversarial events.
    #[arg(long, default_value_t = 2026)]
    seed: u64,
    /// Measure cache operations on fewer, smaller buffers.
    #[arg(long)]
    quick: bool,
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    println!("bi tour: Bounded Incoherence on one coherent machine\n");
    effects()?;
    seeded_runs(args.seed)?;
    cache_costs(args.quick)?;
    region_roots()?;
    runtime_run(args.seed)?;
    hazards(if args.quick { 2 } else { 8 });
    Ok(())
}

fn header(title: &str) {
    println!("== {title}");
}

/// Part 1: each effect of non-coherent caches, shown with the emulator.
fn effects() -> Result<(), Box<dyn Error>> {
    header("1. what non-coherent caches do (emulated, two nodes)");
    let emu = Emulator::new(EmulatorConfig::new(4096, 2));
    let (a, b) = (emu.node(0), emu.node(1));

    // Stale read until invalidation.
    b.load::<u64>(0)?; // B caches the line holding offset 0
    a.store(0, &1u64)?;
    a.writeback(0, 8)?;
    a.fence();
    emu.advance(1_000);
    let stale = b.load::<u64>(0)?;
    b.invalidate(0, 8)?;
    b.fence();
    let fresh = b.load::<u64>(0)?;
    let s = emu.stats(1);
    println!(
        "  stale read:  A wrote 1 and wrote it back; B read {stale} until it invalidated, then {fresh} \
         (stale reads {}, max staleness {} ticks)",
        s.stale_reads, s.max_staleness
    );

    // Stores seen in the opposite order.
    let (a0, a1) = (128, 256);
    b.load::<u64>(a0)?; // B holds a0's line, not a1's
    a.store(a0, &10u64)?;
    a.store(a1, &11u64)?;
    a.writeback(a0, 8)?;
    a.writeback(a1, 8)?;
    a.fence();
    let (seen0, seen1) = (b.load::<u64>(a0)?, b.load::<u64>(a1)?);
    println!("  reordering:  A stored a0=10 then a1=11; B sees a0={seen0}, a1={seen1}");

    // Two nodes writing one line: a lost update.
    a.store(512, &0xAAu8)?;
    b.store(513, &0xBBu8)?;
    a.writeback(512, 1)?;
    b.writeback(513, 1)?;
    a.fence();
    b.fence();
    emu.node(0).invalidate(512, 2)?;
    let both: [u8; 2] = emu.node(0).load(512)?;
    println!(
        "  lost update: A wrote byte 512, B wrote byte 513 of the same line; memory holds {:#04x} {:#04x} \
         (A's byte was overwritten by B's stale copy of the line)",
        both[0], both[1]
    );

    // A prefetch refills a line just after it was invalidated.
    b.invalidate(1024, 8)?;
    b.fence();
    b.prefetch(1024)?; // the hardware may bring the line back at any time
    a.store(1024, &99u64)?;
    a.writeback(1024, 8)?;
    a.fence();
    println!(
        "  prefetch:    B invalidated, a prefetch refilled the line, then A wrote 99: B reads {}",
        b.load::<u64>(1024)?
    );

    // Reuse: memory reallocated while a stale copy survives.
    b.load::<u64>(2048)?;
    emu.bump_incarnation(2048, 64)?; // a heap reports that it reused this memory
    b.load::<u64>(2048)?;
    println!(
        "  reuse:       reuse hazards on B after the memory was reused: {}",
        emu.stats(1).reuse_hazards
    );
    println!();
    Ok(())
}

/// Part 2: seeded runs with random events: staleness is bounded by how often the reader
/// invalidates, and the same seed gives the same run.
fn seeded_runs(seed: u64) -> Result<(), Box<dyn Error>> {
    header(&format!(
        "2. seeded runs with random evictions and prefetches (seed {seed}): a writer updates \
         32 hot lines, a reader reads them and invalidates every P operations"
    ));
    const HOT: usize = 32;
    let run = |period: Option<u64>| -> Result<NodeStats, Box<dyn Error>> {
        let cfg = EmulatorConfig::new(64 * 1024, 2)
            .seed(seed)
            .cache_lines(256)
            .eviction_rate(0.002)
            .adjacent_prefetch_rate(0.2)
            .random_prefetch_rate(0.05);
        let emu = Emulator::new(cfg);
        let (w, r) = (emu.node(0), emu.node(1));
        for round in 0..20_000u64 {
            let line = (round as usize * 7) % HOT;
            w.store(line * 64, &round)?;
            w.writeback(line * 64, 8)?;
            w.fence();
            r.load::<u64>((round as usize * 13) % HOT * 64)?;
            if period.is_some_and(|p| round % p == p - 1) {
                r.invalidate(0, HOT * 64)?;
                r.fence();
            }
        }
        Ok(emu.stats(1))
    };
    for period in [Some(16), Some(256), None] {
        let s = run(period)?;
        let label = period.map_or("never".to_string(), |p| p.to_string());
        println!(
            "  P = {label:>5}: {} loads, {} misses, {} stale reads, max staleness {} ticks, {} evictions, {} prefetches",
            s.loads, s.misses, s.stale_reads, s.max_staleness, s.evictions, s.prefetches
        );
    }
    println!(
        "  same seed, same statistics: {}\n",
        run(Some(256))? == run(Some(256))?
    );
    Ok(())
}

/// Part 3: per-line cost of the real cache instructions.
fn cache_costs(quick: bool) -> Result<(), Box<dyn Error>> {
    let detected = CacheOps::detect();
    header(&format!(
        "3. real cache operations on this machine (write back: {:?}, invalidate: {:?}, line {})",
        detected.writeback_instruction(),
        detected.invalidate_instruction(),
        detected.line_size()
    ));
    let sizes: &[usize] = if quick {
        &[64 << 10]
    } else {
        &[64 << 10, 1 << 20]
    };
    let peers = [
        ("clflush, serialised", CacheOps::clflush_only()),
        (
            "clflushopt + 1 fence",
            CacheOps::with_instructions(Instruction::Clflushopt, Instruction::Clflushopt),
        ),
        (
            "clwb + 1 fence",
            CacheOps::with_instructions(Instruction::Clwb, Instruction::Clflushopt),
        ),
    ];
    for &size in sizes {
        let mem = Backing::anonymous(size)?;
        let lines = size / detected.line_size().get();
        let mut base = None;
        for (name, ops) in &peers {
            let Ok(ops) = ops else {
                println!("  {:>5} KiB  {name:<22} not supported here", size >> 10);
                continue;
            };
            let ns = median_ns_per_line(&mem, ops, lines, if quick { 5 } else { 11 });
            let ratio = base
                .map(|b: f64| format!("  ({:.2}x of clflush)", ns / b))
                .unwrap_or_default();
            base.get_or_insert(ns);
            println!(
                "  {:>5} KiB  {name:<22} {ns:7.1} ns/line (write back modified lines){ratio}",
                size >> 10
            );
        }
    }
    println!("  (absolute figures vary between runs; the ratios are the point)\n");
    Ok(())
}

fn median_ns_per_line(mem: &Backing, ops: &CacheOps, lines: usize, runs: usize) -> f64 {
    let mut samples: Vec<f64> = (0..runs)
        .map(|i| {
            for w in mem.words().iter().step_by(8) {
                w.store(i as u64, std::sync::atomic::Ordering::Relaxed); // dirty every line
            }
            let start = Instant::now();
            ops.writeback_of(mem.words());
            ops.fence();
            start.elapsed().as_nanos() as f64 / lines as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Part 4: a region with a named root.
fn region_roots() -> Result<(), Box<dyn Error>> {
    header("4. a shared region with a named root");
    let region = Region::anonymous(RegionConfig::default())?;
    let view = region.hardware();
    let counter: ShPtr<u64> = ShPtr::new(region.layout().heap().offset as u64);
    counter.store(&view, &41)?;
    region.set_root(&view, "counter", counter)?;
    let found: ShPtr<u64> = region.root(&view, "counter")?.ok_or("root not found")?;
    println!(
        "  region of {} KiB; root \"counter\" -> offset {} holding {}",
        region.layout().size() >> 10,
        found.offset(),
        found.load(&view)?
    );
    Ok(())
}

/// Part 5: the runtime on three emulated nodes.
fn runtime_run(seed: u64) -> Result<(), Box<dyn Error>> {
    const PERIOD: u64 = 2_000; // ticks between passes on every node
    const VERSIONS: u64 = 2_000;
    header(&format!(
        "5. the BI runtime: 3 emulated nodes, evictions and prefetches on, a pass every {PERIOD} ticks"
    ));
    let region = Region::anonymous(RegionConfig::new(1 << 20).with_nodes(3))?;
    let layout = *region.layout();
    let cfg = EmulatorConfig::new(layout.size(), 3)
        .seed(seed)
        .cache_lines(512)
        .eviction_rate(0.005)
        .adjacent_prefetch_rate(0.2)
        .random_prefetch_rate(0.02);
    let emu = Emulator::over(region.backing().clone(), cfg)?;
    let runtime = RuntimeConfig::default();
    let nodes: Vec<_> = (0..3)
        .map(|n| NodeRuntime::emulated(emu.node(n), layout, runtime.clone()))
        .collect::<Result<_, _>>()?;
    let mut writer = nodes[0].writer(NodeHeap::for_node(&layout, 0)?)?;
    let readers = [nodes[1].reader()?, nodes[2].reader()?];
    let slot = layout.root_entry(0).ok_or("no root entry")?.offset;

    // published[v] = when version v was published (true time).
    let mut published = vec![0u64];
    let (mut next_pass, mut reads, mut max_stale, mut peak_retired) = (0, 0u64, 0u64, 0usize);
    while (published.len() as u64) <= VERSIONS {
        let v = published.len() as u64;
        let record = writer.alloc([v; 12])?; // a 96-byte record, two lines
        let old = writer.publish(slot, record)?;
        published.push(emu.now());
        if !old.is_null() {
            writer.retire(old)?;
        }
        peak_retired = peak_retired.max(writer.retired_bytes());
        for reader in &readers {
            let guard = reader.enter();
            if let Some(seen) = guard.load::<[u64; 12]>(slot)? {
                assert!(seen.iter().all(|&w| w == seen[0]), "a torn record");
                if let Some(&superseded) = published.get(seen[0] as usize + 1) {
                    max_stale = max_stale.max(emu.now().saturating_sub(superseded));
                }
                reads += 1;
            }
        }
        if emu.now() >= next_pass {
            for n in &nodes {
                n.quiesce()?;
            }
            writer.reclaim()?;
            next_pass = emu.now() + PERIOD;
        }
    }
    let total = emu.total_stats();
    println!(
        "  {VERSIONS} versions published, {reads} reads on two other nodes; max staleness {max_stale} ticks \
         (bound: period {PERIOD} + pass time)"
    );
    println!(
        "  retired-but-unreclaimed peak {peak_retired} B; heap live {} B of {} B; \
         reuse hazards read by any node: {}",
        writer.heap().stats().live,
        writer.heap().stats().capacity,
        total.reuse_hazards
    );
    println!(
        "  oracle: {} stale reads served from caches (allowed: bounded), {} lines written back, {} invalidated\n",
        total.stale_reads, total.lines_written_back, total.lines_invalidated
    );
    Ok(())
}

/// Part 6: the hazard catalog with a few seeds.
fn hazards(seeds: u64) {
    header(&format!(
        "6. the hazard catalog ({seeds} seeds; `--example hazards` runs more)"
    ));
    for row in bi::hazards::run_all(seeds) {
        println!(
            "  {:<28} broken {:>6}   bi {:>2}",
            row.hazard, row.broken, row.bi
        );
    }
}
