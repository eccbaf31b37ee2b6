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
//! 7. The shared collections on three emulated nodes: a `BiTree` written in batches on
//!    node 0 and by a delegated client on node 2, then a `BiHashMap`; readers on nodes 1
//!    and 2 may see a stale value between passes (never one superseded before their
//!    node's last pass) and always find a key that was inserted before they looked.
//! 8. The graph engine: PageRank on a Kronecker graph in the three modes, on real memory
//!    and on the emulator; on-demand references give exactly the message-passing result.
//!
//! Parts 5, 7 and 8 check what they show; the tour exits with an error if a check fails.
//!
//! ```sh
//! cargo run --release --example tour
//! cargo run --release --example tour -- --seed 7 --quick
//! ```

use bi::alloc::NodeHeap;
use bi::collections::delegate::{DelegationClient, DelegationLayout, DelegationServer};
use bi::collections::map::{BiHashMap, MapReadHandle, MapWriteHandle};
use bi::collections::tree::{BiTree, TreeReadHandle, TreeWriteHandle};
use bi::collections::{ApplyBatch, Op, Refresh};
use bi::core::cache::{CacheOps, Instruction};
use bi::core::heap::Heap;
use bi::core::mem::{Backing, EmulatedNode, Emulator, EmulatorConfig, MemView, NodeStats};
use bi::core::ptr::ShPtr;
use bi::core::region::{Region, RegionConfig};
use bi::core::runtime::testing::Setup;
use bi::core::runtime::{NodeRuntime, RuntimeConfig};
use bi::graph::generate::Kronecker;
use bi::graph::{
    Backend, EdgeList, EngineConfig, Mode, PageRank, Partitioner, RunOptions, RunStats,
    run_detailed,
};
use clap::Parser;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::error::Error;
use std::time::{Duration, Instant};

/// An end-to-end tour of Bounded Incoherence on built-in data.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Seed for the emulator's adversarial events.
    #[arg(long, default_value_t = 2026)]
    seed: u64,
    /// Measure cache operations on fewer, smaller buffers; fewer rounds and a smaller
    /// graph.
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
    collections_run(args.seed, args.quick)?;
    graph_run(args.seed, args.quick)?;
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

/// Keys the writers update at random (`0..SHARED_KEYS`); fresh keys of the writer and of
/// the delegated client live above, in ranges of their own.
const SHARED_KEYS: u64 = 1024;
/// First key inserted fresh by the writer (one per round, never removed).
const FRESH_KEYS: u64 = 1 << 32;
/// First key inserted fresh by the delegated client (one per delegated batch).
const DELEGATED_KEYS: u64 = 2 << 32;
/// Word 1 of a map value: its key, scrambled, so a torn value would show.
const MAP_TAG: u64 = 0x5eed_5eed_5eed_5eed;

/// What the writers published, to judge what the readers see.
struct Published {
    /// Per key, every value it had (`None`: removed) and when it was published.
    history: HashMap<u64, Vec<(Option<u64>, u64)>>,
    /// True time at which each node's last pass started.
    pass_start: Vec<u64>,
    /// The runtime's clock skew bound.
    skew: u64,
    /// Lookups judged.
    lookups: u64,
    /// Lookups that returned a value already replaced (or removed).
    stale: u64,
    /// Longest time since such a value was replaced, in ticks.
    max_stale: u64,
}

impl Published {
    fn new(nodes: usize, skew: u64) -> Published {
        Published {
            history: HashMap::new(),
            pass_start: vec![0; nodes],
            skew,
            lookups: 0,
            stale: 0,
            max_stale: 0,
        }
    }

    /// `ops` became visible (published) by `at`.
    fn record(&mut self, ops: &[Op<u64, u64>], at: u64) {
        for op in ops {
            let (key, value) = match *op {
                Op::Insert(k, v) => (k, Some(v)),
                Op::Remove(k) => (k, None),
            };
            self.history.entry(key).or_default().push((value, at));
        }
    }

    /// The current value of every present key, in key order.
    fn contents(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<_> = self
            .history
            .iter()
            .filter_map(|(&k, h)| h.last().and_then(|&(v, _)| v).map(|v| (k, v)))
            .collect();
        out.sort_unstable();
        out
    }

    /// Judges the value `seen` of `key` that a reader on `node` returned at `now`.
    ///
    /// Allowed: the current value, or an older one replaced after the node's last pass
    /// began (less the skew bound). Never allowed: missing a key that is present (lazy
    /// invalidation re-reads on a miss), or a value that was never published.
    fn judge(&mut self, node: usize, key: u64, seen: Option<u64>, now: u64) -> Result<(), String> {
        self.lookups += 1;
        let versions = self.history.get(&key).map_or(&[][..], Vec::as_slice);
        let current = versions.last().and_then(|&(v, _)| v);
        if seen == current {
            return Ok(());
        }
        if seen.is_none() {
            return Err(format!(
                "node {node} did not find key {key}, published with value {current:?}"
            ));
        }
        let Some(i) = versions.iter().rposition(|&(v, _)| v == seen) else {
            return Err(format!(
                "node {node} read key {key} as {seen:?}, a value never published"
            ));
        };
        let replaced = versions[i + 1].1;
        if replaced + self.skew < self.pass_start[node] {
            return Err(format!(
                "node {node} read key {key} as {seen:?}, replaced at tick {replaced}, \
                 before its pass of tick {}",
                self.pass_start[node]
            ));
        }
        self.stale += 1;
        self.max_stale = self.max_stale.max(now.saturating_sub(replaced));
        Ok(())
    }
}

/// Key-value pairs in key order.
type Entries = Vec<(u64, u64)>;

/// A shared structure the tour drives: one writer on node 0, readers on nodes 1 and 2.
trait Driven {
    /// Applies the writer's own batch (values are sequence numbers) and publishes it.
    fn apply(&mut self, ops: &[Op<u64, u64>]) -> Result<(), Box<dyn Error>>;
    /// Work between the writer's batch and the reads of round `round`: delegated
    /// updates, recorded in `published`; returns how many were applied.
    fn between(
        &mut self,
        round: u64,
        seq: &mut u64,
        emu: &Emulator,
        published: &mut Published,
    ) -> Result<usize, Box<dyn Error>>;
    /// Looks `key` up with the reader on node `1 + reader`.
    fn lookup(&self, reader: usize, key: u64) -> Result<Option<u64>, Box<dyn Error>>;
    /// Gives back retired memory whose grace period is over; returns the bytes freed.
    fn reclaim(&mut self) -> Result<usize, Box<dyn Error>>;
    /// Bytes retired and not yet given back.
    fn retired_bytes(&mut self) -> usize;
    /// Bytes the writer's heap hands out, and its capacity.
    fn heap_use(&mut self) -> (usize, usize);
    /// Every entry, in key order, as the writer and as a reader (after a pass) see it.
    fn contents(&mut self) -> Result<[Entries; 2], Box<dyn Error>>;
}

type TreeWriter = TreeWriteHandle<u64, u64, EmulatedNode, NodeHeap>;

/// The tree, its writer behind a delegation server on node 0, a delegated client on node
/// 2, and readers on nodes 1 and 2.
struct TreeParts {
    server: DelegationServer<EmulatedNode, u64, u64, TreeWriter>,
    client: DelegationClient<EmulatedNode, u64, u64>,
    readers: [TreeReadHandle<u64, u64, EmulatedNode>; 2],
    rng: SmallRng,
}

impl Driven for TreeParts {
    fn apply(&mut self, ops: &[Op<u64, u64>]) -> Result<(), Box<dyn Error>> {
        self.server.structure_mut().apply_batch(ops)?;
        Ok(())
    }

    fn between(
        &mut self,
        round: u64,
        seq: &mut u64,
        emu: &Emulator,
        published: &mut Published,
    ) -> Result<usize, Box<dyn Error>> {
        if !round.is_multiple_of(4) {
            return Ok(0);
        }
        // The client on node 2 sends three updates of shared keys and one fresh key;
        // the writer's node serves them as one batch.
        let mut ops: Vec<Op<u64, u64>> = (0..3)
            .map(|_| {
                *seq += 1;
                Op::Insert(self.rng.random_range(0..SHARED_KEYS), *seq)
            })
            .collect();
        let fresh = DELEGATED_KEYS + round;
        *seq += 1;
        ops.push(Op::Insert(fresh, *seq));
        self.client.send_batch(&ops)?;
        let served = self.server.serve_once(64)?;
        published.record(&ops, emu.now());
        if served.ops != ops.len() || self.client.poll_applied()? != self.client.sent() {
            return Err("a delegated batch was not applied and acknowledged at once".into());
        }
        // The client's own node finds its acknowledged key at once: it reads the key's
        // path from memory once the writer acknowledged (what a shared handle does).
        self.readers[1].refresh(&fresh)?;
        let seen = self.readers[1].get(&fresh)?; // through the cache: the refresh suffices
        published.judge(2, fresh, seen, emu.now())?;
        Ok(ops.len())
    }

    /// The fresh read: a miss re-reads the root slot from memory, so a key published
    /// before the lookup is always found (`get` answers from the node's cache, misses too).
    fn lookup(&self, reader: usize, key: u64) -> Result<Option<u64>, Box<dyn Error>> {
        Ok(self.readers[reader].get_fresh(&key)?)
    }

    fn reclaim(&mut self) -> Result<usize, Box<dyn Error>> {
        Ok(self.server.structure_mut().reclaim()?.freed_bytes)
    }

    fn retired_bytes(&mut self) -> usize {
        self.server.structure_mut().writer().retired_bytes()
    }

    fn heap_use(&mut self) -> (usize, usize) {
        let stats = self.server.structure_mut().writer().heap().stats();
        (stats.live, stats.capacity)
    }

    fn contents(&mut self) -> Result<[Entries; 2], Box<dyn Error>> {
        let tree = self.server.structure();
        tree.check_invariants()
            .map_err(|e| format!("tree invariants: {e}"))?;
        Ok([tree.iter()?, self.readers[0].enter().iter()?])
    }
}

type MapWriter = MapWriteHandle<u64, [u64; 2], EmulatedNode, NodeHeap>;

/// The hash map, its writer on node 0 and readers on nodes 1 and 2.
struct MapParts {
    writer: MapWriter,
    readers: [MapReadHandle<u64, [u64; 2], EmulatedNode>; 2],
}

impl MapParts {
    fn value(key: u64, seq: u64) -> [u64; 2] {
        [seq, key ^ MAP_TAG]
    }

    fn seq_of(key: u64, value: [u64; 2]) -> Result<u64, Box<dyn Error>> {
        if value[1] == key ^ MAP_TAG {
            Ok(value[0])
        } else {
            Err(format!("key {key} read with a torn value {value:?}").into())
        }
    }
}

impl Driven for MapParts {
    fn apply(&mut self, ops: &[Op<u64, u64>]) -> Result<(), Box<dyn Error>> {
        let ops: Vec<_> = ops
            .iter()
            .map(|op| match *op {
                Op::Insert(k, v) => Op::Insert(k, MapParts::value(k, v)),
                Op::Remove(k) => Op::Remove(k),
            })
            .collect();
        self.writer.apply_batch(&ops)?;
        Ok(())
    }

    fn between(
        &mut self,
        _round: u64,
        _seq: &mut u64,
        _emu: &Emulator,
        _published: &mut Published,
    ) -> Result<usize, Box<dyn Error>> {
        Ok(0)
    }

    /// The fresh read: a miss is checked again from memory, so a key published before
    /// the lookup is always found (`get` answers from the node's cache, misses too).
    fn lookup(&self, reader: usize, key: u64) -> Result<Option<u64>, Box<dyn Error>> {
        self.readers[reader]
            .get_fresh(&key)?
            .map(|v| MapParts::seq_of(key, v))
            .transpose()
    }

    fn reclaim(&mut self) -> Result<usize, Box<dyn Error>> {
        Ok(self.writer.reclaim()?.freed_bytes)
    }

    fn retired_bytes(&mut self) -> usize {
        self.writer.writer().retired_bytes()
    }

    fn heap_use(&mut self) -> (usize, usize) {
        let stats = self.writer.writer().heap().stats();
        (stats.live, stats.capacity)
    }

    fn contents(&mut self) -> Result<[Entries; 2], Box<dyn Error>> {
        let mut present: Vec<(u64, u64)> = Vec::new();
        let mut read: Vec<(u64, u64)> = Vec::new();
        let keys: Vec<u64> = {
            let view = self.readers[0].enter();
            let mut all = Vec::new();
            for entry in view.iter() {
                let (k, v) = entry?;
                all.push(k);
                read.push((k, MapParts::seq_of(k, v)?));
            }
            all
        };
        for k in keys {
            if let Some(v) = self.writer.get(&k) {
                present.push((k, MapParts::seq_of(k, v)?));
            }
        }
        present.sort_unstable();
        read.sort_unstable();
        if present.len() != self.writer.len() {
            return Err("the writer holds keys the reader did not list".into());
        }
        Ok([present, read])
    }
}

/// The shape of one driven run.
struct Workload {
    rounds: u64,
    /// Random updates of shared keys per writer batch (plus one fresh key).
    batch: usize,
    /// Random lookups per reader per round (plus the round's fresh key).
    lookups: usize,
    /// Ticks between passes on every node.
    period: u64,
}

/// What a driven run measured.
struct Tally {
    writer_ops: u64,
    delegated_ops: u64,
    fresh_lookups: u64,
    passes: u64,
    peak_retired: usize,
    freed: usize,
    oracle: NodeStats,
    mismatches: u64,
}

/// Runs `work` on `parts`: each round the writer applies a batch, the structure's
/// in-between work runs, both readers look keys up, and every `period` ticks each node
/// runs a pass and the writer reclaims. Every lookup is judged.
fn drive(
    s: &Setup,
    parts: &mut dyn Driven,
    work: &Workload,
    rng: &mut SmallRng,
    published: &mut Published,
    seq: &mut u64,
) -> Result<Tally, Box<dyn Error>> {
    s.emu.reset_stats();
    let mismatches_before: u64 = s.nodes.iter().map(NodeRuntime::mismatches).sum();
    let mut t = Tally {
        writer_ops: 0,
        delegated_ops: 0,
        fresh_lookups: 0,
        passes: 0,
        peak_retired: 0,
        freed: 0,
        oracle: NodeStats::default(),
        mismatches: 0,
    };
    let mut next_pass = s.emu.now() + work.period;
    for round in 0..work.rounds {
        let mut ops: Vec<Op<u64, u64>> = (0..work.batch)
            .map(|_| {
                let key = rng.random_range(0..SHARED_KEYS);
                *seq += 1;
                if rng.random_bool(0.25) {
                    Op::Remove(key)
                } else {
                    Op::Insert(key, *seq)
                }
            })
            .collect();
        let fresh = FRESH_KEYS + round;
        *seq += 1;
        ops.push(Op::Insert(fresh, *seq));
        parts.apply(&ops)?;
        published.record(&ops, s.emu.now());
        t.writer_ops += ops.len() as u64;
        t.delegated_ops += parts.between(round, seq, &s.emu, published)? as u64;
        for reader in 0..2 {
            for _ in 0..work.lookups {
                let key = rng.random_range(0..SHARED_KEYS);
                let seen = parts.lookup(reader, key)?;
                published.judge(reader + 1, key, seen, s.emu.now())?;
            }
            // The key inserted just now: in no version the node has cached, found by
            // re-reading on the miss.
            let seen = parts.lookup(reader, fresh)?;
            published.judge(reader + 1, fresh, seen, s.emu.now())?;
            t.fresh_lookups += 1;
        }
        t.peak_retired = t.peak_retired.max(parts.retired_bytes());
        if s.emu.now() >= next_pass {
            for (n, node) in s.nodes.iter().enumerate() {
                published.pass_start[n] = s.emu.now();
                node.quiesce()?;
            }
            t.freed += parts.reclaim()?;
            t.passes += 1;
            next_pass = s.emu.now() + work.period;
        }
    }
    t.oracle = s.emu.total_stats();
    t.mismatches = s.nodes.iter().map(NodeRuntime::mismatches).sum::<u64>() - mismatches_before;
    Ok(t)
}

/// Prints a driven run's figures and checks what must hold.
fn report(
    name: &str,
    parts: &mut dyn Driven,
    s: &Setup,
    t: &Tally,
    published: &Published,
) -> Result<(), Box<dyn Error>> {
    let (live, capacity) = parts.heap_use();
    println!(
        "  {name}: {} writer ops in batches on node 0{}; {} passes",
        t.writer_ops,
        if t.delegated_ops > 0 {
            format!(
                ", {} delegated from node 2 (acknowledged, then found on node 2)",
                t.delegated_ops
            )
        } else {
            String::new()
        },
        t.passes
    );
    println!(
        "    readers on nodes 1-2: {} lookups, {} returned a replaced value (max {} ticks after \
         it was replaced, never one replaced before the node's last pass); {} fresh keys found \
         at once",
        published.lookups, published.stale, published.max_stale, t.fresh_lookups
    );
    println!(
        "    reclamation: at most {} B retired and waiting, {} B given back ({:.1}x over); heap live {} B of {} B",
        t.peak_retired,
        t.freed,
        t.freed as f64 / t.peak_retired.max(1) as f64,
        live,
        capacity
    );
    println!(
        "    oracle: {} stale loads from caches, {} reuse hazards ({} reads rejected by generation \
         and retried), {} lost writes",
        t.oracle.stale_reads, t.oracle.reuse_hazards, t.mismatches, t.oracle.lost_writes
    );
    s.quiesce_all()?;
    let [written, read] = parts.contents()?;
    let expected = published.contents();
    if written != expected || read != expected {
        return Err(format!("{name}: the final contents differ from what was published").into());
    }
    if t.oracle.reuse_hazards > t.mismatches || t.oracle.lost_writes != 0 {
        return Err(format!("{name}: reused memory was read or a write was lost").into());
    }
    // Given back at least as much as ever waited at once: memory came back as it went
    // (a map rewrites most lines in place and retires little, a tree retires every
    // replaced path).
    if t.freed == 0 || t.peak_retired > t.freed {
        return Err(format!("{name}: retired memory was not reclaimed as it went").into());
    }
    println!(
        "    final contents ({} keys) identical for the writer, a reader and the record of what was published",
        expected.len()
    );
    Ok(())
}

/// Part 7: the shared tree and hash map on three emulated nodes.
fn collections_run(seed: u64, quick: bool) -> Result<(), Box<dyn Error>> {
    let work = Workload {
        rounds: if quick { 1_000 } else { 4_000 },
        batch: 8,
        lookups: 16,
        period: 10_000,
    };
    header(&format!(
        "7. shared collections: 3 emulated nodes, evictions and prefetches on, a pass every {} ticks",
        work.period
    ));
    let runtime = RuntimeConfig::default();
    let s = Setup::with(
        RegionConfig::new(8 << 20).with_nodes(3),
        |c| {
            c.seed(seed)
                .cache_lines(1024)
                .eviction_rate(0.002)
                .adjacent_prefetch_rate(0.1)
                .random_prefetch_rate(0.01)
        },
        runtime.clone(),
    );
    let layout = *s.region.layout();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut published = Published::new(3, runtime.skew_bound());
    let mut seq = 0u64;

    // The tree, filled with every shared key in one batch.
    let tree = BiTree::<u64, u64>::at(s.slot(0));
    let mut handle = tree.write_handle(s.nodes[0].writer(NodeHeap::for_node(&layout, 0)?)?)?;
    let fill: Vec<Op<u64, u64>> = (0..SHARED_KEYS)
        .map(|k| {
            seq += 1;
            Op::Insert(k, seq)
        })
        .collect();
    handle.apply_batch(&fill)?;
    published.record(&fill, s.emu.now());
    // The delegation area: node 2's arena (node 2 allocates nothing else).
    let area = NodeHeap::for_node(&layout, 2)?.arena();
    let need = DelegationLayout::<u64, u64>::required_bytes(1, 16, layout.line_size())?;
    let channels = DelegationLayout::<u64, u64>::new(
        area.start..area.start + need,
        1,
        16,
        layout.line_size(),
    )?;
    let server = DelegationServer::new(s.emu.node(0), channels, handle)?;
    let client = DelegationClient::new(s.emu.node(2), channels, 0)?;
    let mut parts = TreeParts {
        server,
        client,
        readers: [
            tree.read_handle(&s.nodes[1])?,
            tree.read_handle(&s.nodes[2])?,
        ],
        rng: SmallRng::seed_from_u64(seed ^ 0xde1e_9a7e),
    };
    let t = drive(&s, &mut parts, &work, &mut rng, &mut published, &mut seq)?;
    report("BiTree<u64, u64>", &mut parts, &s, &t, &published)?;

    // The same writer, handed over to a hash map in another root slot.
    let TreeParts {
        server, readers, ..
    } = parts;
    drop(readers);
    let writer = server.into_structure().into_writer();
    let mut published = Published::new(3, runtime.skew_bound());
    let map = BiHashMap::<u64, [u64; 2]>::at(s.slot(1));
    let mut writer = map.write_handle(writer)?;
    let fill: Vec<Op<u64, [u64; 2]>> = (0..SHARED_KEYS)
        .map(|k| {
            seq += 1;
            Op::Insert(k, MapParts::value(k, seq))
        })
        .collect();
    writer.apply_batch(&fill)?;
    let fill_seq: Vec<Op<u64, u64>> = fill
        .iter()
        .map(|op| match *op {
            Op::Insert(k, v) => Op::Insert(k, v[0]),
            Op::Remove(k) => Op::Remove(k),
        })
        .collect();
    published.record(&fill_seq, s.emu.now());
    let mut parts = MapParts {
        writer,
        readers: [map.read_handle(&s.nodes[1])?, map.read_handle(&s.nodes[2])?],
    };
    let t = drive(&s, &mut parts, &work, &mut rng, &mut published, &mut seq)?;
    report("BiHashMap<u64, [u64; 2]>", &mut parts, &s, &t, &published)?;
    println!(
        "  (a reuse hazard is a load that returned bytes of a block reused since its line was \
         cached; each such line carries an older generation than the link the reader followed, \
         so the read is rejected, the lines invalidated and the read retried: no lookup returned \
         a value built from them, as the checks of every lookup and of the final contents show)\n"
    );
    Ok(())
}

/// One row of the PageRank table.
struct GraphRow {
    backend: &'static str,
    mode: Mode,
    stats: RunStats,
    ranks: Vec<f64>,
    oracle: Option<NodeStats>,
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Stock => "stock",
        Mode::BiOnDemand => "bi-on-demand",
        Mode::BiPeriodic => "bi-periodic",
    }
}

/// PageRank of `graph` in the three modes on `nodes` nodes of `backend`, until the L1
/// change between supersteps falls below 1e-10.
fn pagerank_modes(
    graph: &EdgeList,
    nodes: usize,
    backend: Backend,
    label: &'static str,
    seed: u64,
    options: &RunOptions,
) -> Result<Vec<GraphRow>, Box<dyn Error>> {
    let program = PageRank::new(graph.num_vertices(), Some(1e-10));
    [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic]
        .into_iter()
        .map(|mode| {
            let config = EngineConfig {
                nodes,
                partitioner: Partitioner::Random,
                mode,
                backend,
                seed,
                max_iterations: 2_000,
                tolerance: program.tolerance,
                // The "stale" column: how many supersteps old the periodic mode's reads were.
                measure_staleness: true,
                ..EngineConfig::default()
            };
            let run = run_detailed(&program, graph, &config, options)?;
            let ranks = PageRank::ranks(graph, &run.run.values);
            Ok(GraphRow {
                backend: label,
                mode,
                stats: run.run.stats,
                ranks,
                oracle: run.emulator,
            })
        })
        .collect()
}

/// Part 8: the graph engine.
fn graph_run(seed: u64, quick: bool) -> Result<(), Box<dyn Error>> {
    let (scale, emulated_scale) = if quick { (12, 8) } else { (14, 10) };
    header(&format!(
        "8. the graph engine: PageRank on a Kronecker graph, 2 nodes, three modes (scale {scale} on \
         real memory, scale {emulated_scale} on the emulator)"
    ));
    let graph = Kronecker::graph500(scale, seed).generate()?;
    let small = Kronecker::graph500(emulated_scale, seed).generate()?;
    println!(
        "  graphs: {} vertices / {} edges, and {} / {} for the emulator",
        graph.num_vertices(),
        graph.edges.len(),
        small.num_vertices(),
        small.edges.len()
    );
    let mut rows = pagerank_modes(
        &graph,
        2,
        Backend::Hardware,
        "hardware",
        seed,
        &RunOptions::default(),
    )?;
    // Emulated supersteps are short: passes every 200 us keep bi-periodic's replicas
    // within a few supersteps of their masters.
    let emulated = RunOptions {
        quiescence_period: Duration::from_micros(200),
        ..RunOptions::default()
    };
    rows.extend(pagerank_modes(
        &small,
        2,
        Backend::Emulated { seed },
        "emulated",
        seed,
        &emulated,
    )?);
    println!(
        "  {:<9} {:<13} {:>5} {:>10} {:>6} {:>12} {:>12} {:>9} {:>6} {:>9} {:>6}",
        "backend",
        "mode",
        "steps",
        "time/step",
        "repl.",
        "written back",
        "invalidated",
        "messages",
        "stale",
        "L1 stock",
        "oracle"
    );
    let mut failures = Vec::new();
    for group in rows.chunks(3) {
        let stock = &group[0];
        for row in group {
            let l1: f64 = row
                .ranks
                .iter()
                .zip(&stock.ranks)
                .map(|(a, b)| (a - b).abs())
                .sum();
            let oracle = row
                .oracle
                .map_or("-".to_string(), |o| format!("{}", o.stale_reads));
            println!(
                "  {:<9} {:<13} {:>5} {:>10} {:>6.3} {:>12} {:>12} {:>9} {:>6} {:>9.1e} {:>6}",
                row.backend,
                mode_name(row.mode),
                row.stats.iterations,
                format!("{:.2?}", row.stats.time_per_iteration),
                row.stats.replication_factor,
                row.stats.lines_written_back,
                row.stats.lines_invalidated,
                row.stats.messages_sent,
                row.stats.max_staleness,
                l1,
                oracle
            );
            let bits = |r: &[f64]| r.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            match row.mode {
                Mode::BiOnDemand if bits(&row.ranks) != bits(&stock.ranks) => {
                    failures.push(format!("{}: on-demand differs from stock", row.backend))
                }
                Mode::BiPeriodic if l1 > 1e-7 => failures.push(format!(
                    "{}: periodic is {l1:.1e} (L1) from stock",
                    row.backend
                )),
                _ => {}
            }
            if let Some(o) = row.oracle {
                if o.reuse_hazards != 0 || o.lost_writes != 0 {
                    failures.push(format!("{}: reuse hazards or lost writes", row.backend));
                }
                if row.mode != Mode::BiPeriodic && o.stale_reads != 0 {
                    failures.push(format!("{}: stale reads in an exact mode", row.backend));
                }
            }
        }
    }
    println!(
        "  (\"stale\": most supersteps a replica lagged; \"oracle\": stale loads the emulator counted)"
    );
    println!(
        "  on-demand equals stock bit for bit on both backends; periodic is within 1e-7 (L1) of it"
    );
    let ranks = &rows[1].ranks;
    let mut in_degree = vec![0u32; graph.num_vertices()];
    for &(_, v) in &graph.edges {
        in_degree[v as usize] += 1;
    }
    let mut order: Vec<usize> = (0..ranks.len()).collect();
    order.sort_by(|&a, &b| ranks[b].total_cmp(&ranks[a]).then(a.cmp(&b)));
    println!("  top 5 (hardware, on-demand):");
    for &v in order.iter().take(5) {
        println!(
            "    vertex {:>6}  rank {:.6}  in-degree {:>5}",
            graph.ids[v], ranks[v], in_degree[v]
        );
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; ").into())
    }
}
