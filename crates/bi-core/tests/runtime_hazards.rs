//! The cases that make reclamation hard without coherence, each driven in the emulator at
//! its worst moment, with the oracle watching: (a) a reader re-fetches a freed object's
//! lines after its node's first pass; (b) a prefetch refills a line between the last pass
//! and reuse; (c) a multi-line object whose first line is fresh and a later line stale;
//! (d) skewed clocks. Then measured bounds: staleness of a slot under periodic passes,
//! and retired-but-unreclaimed memory over many publish/retire cycles.
//!
//! Every reuse hazard the oracle can count comes from a load of a line of an older
//! incarnation; the reader's generation check stops at the first line whose stamp does
//! not match, so "hazards <= rejected reads" means every such load was caught. Where the
//! schedule lets the protocol keep such lines out of caches altogether, the tests assert
//! zero hazards.

use bi_core::mem::MemView;
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, Link, RuntimeConfig};
mod common;

use common::Val;

/// Early-landing rate of late write-backs (none under Miri, which checks the unsafe code
/// and not the protocol, and would take minutes longer).
const LATE: f64 = bi_kit::LATE_WRITEBACKS;

const LINES: usize = 4;

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .node_lease(10_000_000)
        .reader_lease(10_000_000)
}

fn setup(seed: u64, track: bool) -> Setup {
    Setup::with(
        RegionConfig::new(1 << 18).with_nodes(2),
        |c| c.seed(seed),
        config().track_objects(track),
    )
}

fn publish(
    w: &mut bi_core::runtime::Writer<bi_core::mem::EmulatedNode, bi_core::heap::BumpHeap>,
    slot: usize,
    id: u64,
) -> Link<Val> {
    let b = w.alloc(Val::new(id)).unwrap();
    w.publish(slot, b).unwrap()
}

/// (a) Reader on node 1 holds X's link across its node's pass and re-fetches X's lines
/// after the pass invalidated them. The grace rule must wait for it to leave and for one
/// more invalidation; the negative control frees after the first pass (the rule "reader
/// sections plus one pass") and the oracle sees the reuse.
#[test]
fn a_refetch_after_the_first_pass_is_dropped_before_reuse() {
    let s = setup(10, true);
    let (n1, x_off) = {
        let mut w = s.writer(0);
        publish(&mut w, s.slot(0), 1);
        s.quiesce_all().unwrap();
        let r = s.nodes[1].reader().unwrap();
        let g = r.enter();
        let x = g.load::<Val>(s.slot(0)).unwrap().unwrap().link();
        let old = publish(&mut w, s.slot(0), 2);
        assert_eq!(old, x);
        w.retire(x).unwrap();
        let first = s.quiesce_all().unwrap();
        assert_eq!(first[1].freed, 1);
        // Re-fetch every line of X after the pass (a reader still walking it, or the
        // prefetcher following it).
        let n1 = s.emu.node(1);
        for i in 0..LINES {
            n1.prefetch(x.offset() + 64 * i).unwrap();
        }
        assert!(matches!(g.follow(x), Err(BiError::StaleLink { .. })));
        for _ in 0..3 {
            s.quiesce_all().unwrap();
            assert_eq!(w.reclaim().unwrap().freed_blocks, 0, "reader still inside");
        }
        drop(g);
        let drain = s.quiesce_all().unwrap();
        assert!(drain[1].drained >= 1);
        for i in 0..LINES {
            assert!(!n1.is_cached(x.offset() + 64 * i), "second invalidation");
        }
        s.quiesce_all().unwrap();
        assert_eq!(w.reclaim().unwrap().freed_blocks, 1);
        // Reuse X's block and publish it.
        let b = w.alloc(Val::new(3)).unwrap();
        assert_eq!(b.offset(), x.offset(), "the block is reused");
        w.publish(s.slot(0), b).unwrap();
        s.quiesce_all().unwrap();
        assert_eq!(r.enter().load::<Val>(s.slot(0)).unwrap().unwrap().id, 3);
        (n1, x.offset())
    };
    assert_eq!(s.emu.total_stats().reuse_hazards, 0);
    let _ = (n1, x_off);

    // Negative control: same schedule, but the block is freed right after the first
    // pass (as if the reader's exit were enough). The re-fetched lines survive into the
    // reuse and the oracle counts them.
    let s = setup(10, true);
    let mut w = s.writer(0);
    publish(&mut w, s.slot(0), 1);
    s.quiesce_all().unwrap();
    let r = s.nodes[1].reader().unwrap();
    let g = r.enter();
    let x = g.load::<Val>(s.slot(0)).unwrap().unwrap().link();
    publish(&mut w, s.slot(0), 2);
    s.quiesce_all().unwrap();
    let n1 = s.emu.node(1);
    for i in 0..LINES {
        n1.prefetch(x.offset() + 64 * i).unwrap();
    }
    drop(g);
    // Broken reuse: the writer's node hands X's block out again at once and overwrites it.
    let a = s.emu.node(0);
    a.note_reuse(x.offset(), LINES * 64).unwrap();
    for i in 0..LINES {
        a.store(x.offset() + 64 * i, &u64::MAX).unwrap();
    }
    a.writeback(x.offset(), LINES * 64).unwrap();
    a.fence();
    let _: u64 = n1.load(x.offset() + 64).unwrap();
    assert!(s.emu.stats(1).reuse_hazards > 0, "negative control");
}

/// (b) After the last pass that could matter, the prefetcher refills a line of the freed
/// block on the reader's node; then the block is reused and published. With tracked
/// objects the reader's next pass drops the line with the slot, so the oracle sees
/// nothing; untracked, the reader may meet the stale line, and the generation check
/// rejects it (the oracle counts the load; the value returned is still right).
#[test]
fn a_prefetch_between_the_last_pass_and_reuse_is_harmless() {
    for track in [true, false] {
        let s = setup(11, track);
        let mut w = s.writer(0);
        publish(&mut w, s.slot(0), 1);
        s.quiesce_all().unwrap();
        let r = s.nodes[1].reader().unwrap();
        let x = r.enter().load::<Val>(s.slot(0)).unwrap().unwrap().link();
        let old = publish(&mut w, s.slot(0), 2);
        w.retire(old).unwrap();
        for _ in 0..3 {
            s.quiesce_all().unwrap();
        }
        assert_eq!(r.enter().load::<Val>(s.slot(0)).unwrap().unwrap().id, 2);
        assert_eq!(w.reclaim().unwrap().freed_blocks, 1);
        // Worst moment: after every pass, before reuse.
        let n1 = s.emu.node(1);
        for i in 0..LINES {
            n1.prefetch(x.offset() + 64 * i).unwrap();
        }
        let b = w.alloc(Val::new(3)).unwrap();
        assert_eq!(b.offset(), x.offset());
        w.publish(s.slot(0), b).unwrap();
        if !track {
            // Let the reader see the new link before its pass (as an eviction of the slot
            // line would): it walks into the prefetched lines.
            n1.evict(s.slot(0)).unwrap();
            let v: Val = *r.enter().load::<Val>(s.slot(0)).unwrap().unwrap();
            assert_eq!((v.id, v.valid()), (3, true));
            assert!(s.nodes[1].mismatches() >= 1);
            let hazards = s.emu.stats(1).reuse_hazards;
            assert!(hazards >= 1 && hazards <= s.nodes[1].mismatches());
        } else {
            // Before its pass the reader still sees the old (live) object: bounded
            // staleness. After its pass, the new one, from fresh lines.
            assert_eq!(r.enter().load::<Val>(s.slot(0)).unwrap().unwrap().id, 2);
            s.quiesce_all().unwrap();
            let v: Val = *r.enter().load::<Val>(s.slot(0)).unwrap().unwrap();
            assert_eq!((v.id, v.valid()), (3, true));
            assert_eq!(s.emu.total_stats().reuse_hazards, 0);
        }
    }
}

/// Records (one a line) of an array longer than one freed-ring entry covers (65,535
/// lines: 4 MiB of 64-byte lines).
const RECORDS: usize = 70_000;

/// Room for such arrays, and log rings of `entries` entries.
fn large(seed: u64, entries: u32) -> Setup {
    let region = RegionConfig::new(32 << 20)
        .with_nodes(2)
        .with_log_ring_entries(entries);
    Setup::with(region, |c| c.seed(seed), config())
}

/// A line array longer than one freed-ring entry covers is retired in several entries:
/// every node's pass drops every line of it, the first and the last alike, once and then
/// once more, and nothing else. Node 1 reads the
/// array's first and last records, the array is retired and its block handed out again
/// for a new array; node 1 then reads the new records without a stale copy of the old
/// ones anywhere.
#[test]
#[cfg_attr(miri, ignore = "a 4 MiB array written line by line")]
fn every_line_of_a_retired_array_longer_than_one_entry_is_dropped() {
    let s = large(14, 1024);
    let mut w = s.writer(0);
    let old = w.alloc_lines(&vec![1u64; RECORDS]).unwrap();
    w.publish_lines(s.slot(0), old).unwrap();
    // Node 1's first pass drops its whole heap, and the next drops it once more: both
    // come before its reads, so that the passes below count only the retirement.
    s.quiesce_all().unwrap();
    s.quiesce_all().unwrap();
    let r = s.nodes[1].reader().unwrap();
    let ends = |a| {
        let g = r.enter();
        let record = |i| *g.follow(g.line(a, i).unwrap()).unwrap().unwrap();
        [record(0), record(RECORDS - 1)]
    };
    assert_eq!(ends(old), [1, 1]);
    let n1 = s.emu.node(1);
    let line = s.region.layout().line_size().get();
    let cached = || [0, RECORDS - 1].map(|i| n1.is_cached(old.offset() + i * line));
    assert_eq!(cached(), [true, true]);
    let small = w.alloc_lines(&[0u64]).unwrap();
    w.publish_lines(s.slot(0), small).unwrap();
    w.try_retire_lines(&[old]).unwrap();
    let passes: Vec<_> = (0..3)
        .map(|_| s.quiesce_all().unwrap()[1].clone())
        .collect();
    // Two freed entries; each line of the array dropped (and the slot's line), then
    // each once more after the readers left; then nothing.
    assert_eq!(
        (passes[0].freed, passes[0].invalidated_lines),
        (2, RECORDS + 1)
    );
    assert_eq!(passes[1].invalidated_lines, RECORDS);
    assert_eq!(passes[2].invalidated_lines, 0);
    assert_eq!(cached(), [false, false]);
    assert_eq!(w.reclaim().unwrap().freed_blocks, 1);
    let new = w.alloc_lines(&vec![2u64; RECORDS]).unwrap();
    assert_eq!(new.offset(), old.offset(), "the block is reused");
    w.publish_lines(s.slot(0), new).unwrap();
    assert_eq!(ends(new), [2, 2]);
    assert_eq!(s.emu.total_stats().reuse_hazards, 0);
}

/// Such an array needs two freed entries: with room for one only, its retirement is
/// refused before anything is written (the array is still the writer's, unmarked), and
/// succeeds once the passes have made room.
#[test]
#[cfg_attr(miri, ignore = "a 4 MiB array written line by line")]
fn a_retirement_the_freed_ring_has_no_room_for_changes_nothing() {
    let s = large(15, 8);
    let mut w = s.writer(0);
    let array = w.alloc_lines(&vec![1u64; RECORDS]).unwrap();
    for _ in 0..7 {
        let small = w.alloc_sealed(0u64).unwrap();
        w.retire(small).unwrap();
    }
    assert!(matches!(
        w.try_retire_lines(&[array]),
        Err(BiError::LogFull { .. })
    ));
    assert_eq!(w.read_own_line(array, 0).unwrap(), 1);
    assert_eq!(w.retired_blocks(), 7);
    for _ in 0..3 {
        s.quiesce_all().unwrap();
    }
    w.try_retire_lines(&[array]).unwrap();
    assert_eq!(w.retired_blocks(), 8);
}

/// (c) A multi-line object whose header line is fresh while its third line is a stale
/// copy of the block's previous incarnation.
#[test]
fn a_fresh_first_line_with_a_stale_later_line_is_never_accepted() {
    let s = setup(12, false);
    let mut w = s.writer(0);
    publish(&mut w, s.slot(0), 1);
    s.quiesce_all().unwrap();
    let old = publish(&mut w, s.slot(0), 2);
    w.retire(old).unwrap();
    for _ in 0..3 {
        s.quiesce_all().unwrap();
    }
    assert_eq!(w.reclaim().unwrap().freed_blocks, 1);
    let n1 = s.emu.node(1);
    n1.prefetch(old.offset() + 2 * 64).unwrap(); // only line 2
    let b = w.alloc(Val::new(3)).unwrap();
    w.publish(s.slot(0), b).unwrap();
    s.quiesce_all().unwrap(); // untracked: the pass drops the slot, not the object
    assert!(!n1.is_cached(old.offset()));
    assert!(n1.is_cached(old.offset() + 2 * 64));
    let r = s.nodes[1].reader().unwrap();
    let v: Val = *r.enter().load::<Val>(s.slot(0)).unwrap().unwrap();
    assert_eq!((v.id, v.valid()), (3, true));
    assert_eq!(
        s.nodes[1].mismatches(),
        1,
        "the stale line was rejected once"
    );
    assert_eq!(
        s.emu.stats(1).reuse_hazards,
        1,
        "and that was the only old load"
    );
}

struct Outcome {
    invalid: u64,
    observed_staleness: u64,
    max_pass: u64,
    max_gap: u64,
    max_retired_blocks: usize,
    freed: usize,
    hazards: u64,
    mismatches: u64,
    stale_errors: u64,
}

/// Runs every pass that is due (each node passes every `period` ticks of its own clock)
/// and records how long passes take and how long the harness went without checking.
struct Scheduler {
    next: Vec<u64>,
    last_check: u64,
    period: u64,
    max_pass: u64,
    max_gap: u64,
}

impl Scheduler {
    fn new(s: &Setup, period: u64) -> Scheduler {
        Scheduler {
            next: s.nodes.iter().map(|n| n.clock().now()).collect(),
            last_check: s.emu.now(),
            period,
            max_pass: 0,
            max_gap: 0,
        }
    }

    fn run_due(&mut self, s: &Setup) {
        self.max_gap = self.max_gap.max(s.emu.now() - self.last_check);
        for (k, node) in s.nodes.iter().enumerate() {
            if node.clock().now() >= self.next[k] {
                let rep = node.quiesce().unwrap();
                self.max_pass = self.max_pass.max(rep.end - rep.start);
                self.next[k] = rep.start + self.period;
            }
        }
        self.last_check = s.emu.now();
    }
}

/// A writer on node 0 replaces the object in a slot every `publish_every` steps and
/// retires the old one; readers on every node read, some holding their section for a
/// while and following their old link again mid-way (re-fetching freed lines); every
/// node passes every `period` ticks of its own clock.
fn workload(s: &Setup, steps: u64, period: u64, publish_every: u64, seed: u64) -> Outcome {
    use rand::Rng;
    let mut rng = bi_kit::rng(seed, "workload");
    let nodes = s.nodes.len();
    let mut w = s.writer(0);
    let readers: Vec<_> = s.nodes.iter().map(|n| n.reader().unwrap()).collect();
    let mut held: Vec<Option<(bi_core::runtime::BiGuard<'_, _>, Link<Val>, u64)>> =
        (0..nodes).map(|_| None).collect();
    let mut sched = Scheduler::new(s, period);
    let mut superseded_at = vec![]; // index id - 1: when value `id` was replaced
    let mut id = 0u64;
    let mut out = Outcome {
        invalid: 0,
        observed_staleness: 0,
        max_pass: 0,
        max_gap: 0,
        max_retired_blocks: 0,
        freed: 0,
        hazards: 0,
        mismatches: 0,
        stale_errors: 0,
    };
    for step in 0..steps {
        sched.run_due(s);
        if step % publish_every == 0 {
            id += 1;
            let b = w.alloc(Val::new(id)).unwrap();
            sched.run_due(s);
            let old = w.publish(s.slot(0), b).unwrap();
            superseded_at.push(u64::MAX);
            if id >= 2 {
                superseded_at[(id - 2) as usize] = s.emu.now(); // value id - 1 replaced
            }
            sched.run_due(s);
            if !old.is_null() {
                w.retire(old).unwrap();
            }
            out.max_retired_blocks = out.max_retired_blocks.max(w.retired_blocks());
            if id.is_multiple_of(4) {
                sched.run_due(s);
                out.freed += w.reclaim().unwrap().freed_blocks;
            }
            sched.run_due(s);
        }
        let n = rng.random_range(0..nodes);
        match held[n].take() {
            Some((g, link, until)) => {
                // Walk the old link again mid-section (re-fetch).
                match g.follow(link) {
                    Ok(Some(v)) => out.invalid += u64::from(!v.valid()),
                    Ok(None) => unreachable!(),
                    Err(BiError::StaleLink { .. }) => out.stale_errors += 1,
                    Err(e) => panic!("{e}"),
                }
                if step < until {
                    held[n] = Some((g, link, until));
                }
            }
            None => {
                let g = readers[n].enter();
                match g.load::<Val>(s.slot(0)) {
                    Ok(Some(v)) => {
                        out.invalid += u64::from(!v.valid());
                        let since = superseded_at[v.id as usize - 1];
                        let now = s.emu.now();
                        if since < now {
                            out.observed_staleness = out.observed_staleness.max(now - since);
                        }
                        let link = v.link();
                        if rng.random_bool(0.2) {
                            let until = step + rng.random_range(1..50);
                            held[n] = Some((g, link, until));
                        }
                    }
                    Ok(None) => {}
                    Err(BiError::StaleLink { .. }) => out.stale_errors += 1,
                    Err(e) => panic!("{e}"),
                }
            }
        }
        sched.run_due(s);
        s.emu.advance(rng.random_range(0..20));
    }
    drop(held);
    out.max_pass = sched.max_pass;
    out.max_gap = sched.max_gap;
    out.hazards = s.emu.total_stats().reuse_hazards;
    out.mismatches = s.nodes.iter().map(|n| n.mismatches()).sum();
    out
}

fn adversarial(seed: u64, skew: u64, evictions: f64, prefetch: bool) -> Setup {
    let (adjacent, random) = if prefetch { (0.3, 0.05) } else { (0.0, 0.0) };
    // Smaller under Miri, where every line of a whole-heap invalidation costs.
    let (size, entries) = if cfg!(miri) {
        (1 << 17, 128)
    } else {
        (1 << 19, 1024)
    };
    Setup::with(
        RegionConfig::new(size)
            .with_nodes(3)
            .with_log_ring_entries(entries),
        |c| {
            c.seed(seed)
                .eviction_rate(evictions)
                .adjacent_prefetch_rate(adjacent)
                .random_prefetch_rate(random)
                .late_writebacks(LATE)
                .clock_skew(skew)
        },
        config().skew(2 * skew),
    )
}

/// (d) Clock skew up to `D`, random evictions, adjacent and random prefetches, and long
/// sections that re-fetch freed objects: no invalid value is ever returned, and every
/// load of an older incarnation the oracle counts was rejected by the generation check.
/// (Such loads cannot be prevented: a prefetcher may refill a freed block's line after
/// every invalidation and before reuse, and a reader whose slot line is not cached sees a
/// new link before its pass. With the prefetchers off, the oracle counts none.)
#[test]
fn skewed_clocks_and_adversarial_hardware_never_expose_a_reused_object() {
    let steps = bi_kit::under_miri(3_000, 60);
    for seed in bi_kit::seeds(4, 1) {
        for (skew, evictions, prefetch) in [(0, 0.0, false), (40, 0.0, false), (40, 0.02, true)] {
            let s = adversarial(seed, skew, evictions, prefetch);
            let o = workload(&s, steps, 400, 3, seed);
            println!(
                "seed {seed} skew {skew} evictions {evictions} prefetch {prefetch}: hazards {} rejected {} stale-link {} freed {}",
                o.hazards, o.mismatches, o.stale_errors, o.freed
            );
            assert_eq!(o.invalid, 0);
            assert!(o.freed > 0, "memory is reclaimed");
            assert!(
                o.hazards <= o.mismatches,
                "every old-incarnation load was rejected"
            );
            if !prefetch {
                assert_eq!(o.hazards, 0, "seed {seed} skew {skew}");
            }
        }
    }
}

/// Staleness of the slot as observed by readers (true ticks since the value they got was
/// replaced) never exceeds `period + D + pass duration + gap`, where `gap` is the longest
/// the single-threaded harness went between checking whether a pass is due (the
/// emulated stand-in for a timer's granularity).
#[test]
fn measured_staleness_stays_within_period_plus_skew_plus_pass() {
    let steps = bi_kit::under_miri(4_000, 60);
    for seed in bi_kit::seeds(3, 1) {
        for period in [200u64, 1_000] {
            let skew = 30;
            let s = adversarial(seed, skew, 0.01, true);
            let o = workload(&s, steps, period, 5, seed);
            let bound = period + 2 * skew + o.max_pass + o.max_gap;
            println!(
                "seed {seed} period {period}: observed staleness {} (oracle, node 1: {}) <= bound {bound} (pass {}, gap {})",
                o.observed_staleness,
                s.emu.stats(1).max_staleness,
                o.max_pass,
                o.max_gap
            );
            assert!(o.observed_staleness <= bound);
            assert!(s.emu.total_stats().max_staleness <= bound, "oracle agrees");
            assert_eq!(o.invalid, 0);
        }
    }
}

/// Many publish/retire cycles with a pass on every node every `P` cycles and a reclaim
/// every `R` cycles: retired-but-unreclaimed blocks stay below `3 P + R + 4` (one pass to
/// see a retirement, one to drain it, one more because the retirement may land just after
/// a pass starts, plus the reclaim interval) and the heap, which holds only a few hundred
/// blocks, never runs out.
#[test]
fn retired_memory_stays_bounded_over_many_cycles() {
    let cycles: u64 = if cfg!(miri) {
        300
    } else if cfg!(debug_assertions) {
        100_000
    } else {
        1_000_000
    };
    const P: u64 = 8;
    const R: u64 = 4;
    let s = Setup::with(
        RegionConfig::new(1 << 18).with_nodes(2),
        |c| c.seed(13).adjacent_prefetch_rate(0.1),
        config().skew(4),
    );
    let mut w = s.writer(0);
    let r = s.nodes[1].reader().unwrap();
    let mut max_blocks = 0;
    let bound = (3 * P + R + 4) as usize;
    for c in 1..=cycles {
        let b = w.alloc(c).unwrap(); // fails with OutOfMemory if reclamation lags
        let old = w.publish(s.slot(0), b).unwrap();
        if !old.is_null() {
            w.retire(old).unwrap();
        }
        if c.is_multiple_of(P) {
            s.quiesce_all().unwrap();
            let g = r.enter();
            let v = *g.load::<u64>(s.slot(0)).unwrap().unwrap();
            assert_eq!(v, c);
        }
        if c.is_multiple_of(R) {
            w.reclaim().unwrap();
        }
        max_blocks = max_blocks.max(w.retired_blocks());
        assert!(
            w.retired_blocks() <= bound,
            "cycle {c}: {} retired",
            w.retired_blocks()
        );
    }
    let block = s.region.layout().line_size().get();
    println!(
        "{cycles} cycles: at most {max_blocks} retired blocks ({} bytes), bound {bound} blocks; heap peak {} bytes",
        max_blocks * block,
        bi_core::heap::Heap::stats(w.heap()).peak
    );
    assert_eq!(s.emu.total_stats().reuse_hazards, 0);
}

/// A clock running `ahead` ticks in front of its emulated node's.
struct Ahead {
    node: bi_core::mem::EmulatedNode,
    ahead: u64,
}

impl bi_core::runtime::Clock for Ahead {
    fn now(&self) -> u64 {
        self.node.local_time() + self.ahead
    }
}

/// (d), scripted, with its negative control: node 1's clock runs 5 000 ticks ahead.
/// Configured with `D` covering that, the writer waits for node 1 to actually pass after
/// the retirement; configured with `D = 0` (skew beyond `D`), node 1's earlier pass looks
/// later than the retirement, the block is reused while node 1 still caches it, and the
/// oracle sees node 1 read the old incarnation.
#[test]
fn skew_within_d_is_safe_and_skew_beyond_d_is_not() {
    use bi_core::runtime::{NodeRuntime, ReaderOrdering};
    use std::sync::Arc;
    for (d, expect_hazard) in [(5_000u64, false), (0, true)] {
        let mut s = setup(14, true);
        // Node runtimes of our own (node 1's with its skewed clock) replace the setup's.
        s.nodes.clear();
        let cfg = config().skew(d).reader_ordering(ReaderOrdering::Emulated);
        let layout = *s.region.layout();
        let clock = Arc::new(Ahead {
            node: s.emu.node(1),
            ahead: 5_000,
        });
        let n1 = NodeRuntime::new(s.emu.node(1), layout, 1, cfg.clone(), clock).unwrap();
        let n0 = NodeRuntime::emulated(s.emu.node(0), layout, cfg).unwrap();
        let heap = bi_core::heap::BumpHeap::new(s.arena(0), layout.line_size()).unwrap();
        let mut w = n0.writer(heap).unwrap();
        let b = w.alloc(Val::new(1)).unwrap();
        w.publish(s.slot(0), b).unwrap();
        n0.quiesce().unwrap();
        n1.quiesce().unwrap();
        n1.quiesce().unwrap(); // node 1's last pass before the retirement
        let r = n1.reader().unwrap();
        let x = r.enter().load::<Val>(s.slot(0)).unwrap().unwrap().link(); // node 1 caches X
        s.emu.advance(100);
        let b = w.alloc(Val::new(2)).unwrap();
        let old = w.publish(s.slot(0), b).unwrap();
        assert_eq!(old, x);
        w.retire(x).unwrap();
        for _ in 0..2 {
            n0.quiesce().unwrap(); // only the writer's node passes
        }
        let freed = w.reclaim().unwrap().freed_blocks;
        assert_eq!(freed == 1, expect_hazard, "D = {d}");
        if freed == 1 {
            let b = w.alloc(Val::new(3)).unwrap();
            assert_eq!(b.offset(), x.offset());
            w.publish(s.slot(0), b).unwrap();
            // Node 1 still holds the old slot and X's lines: it reads the old incarnation.
            let _ = r.enter().load::<Val>(s.slot(0));
            assert!(s.emu.stats(1).reuse_hazards > 0, "negative control");
        } else {
            s.emu.advance(d + 1_000); // time for passes to start D after the retirement
            n1.quiesce().unwrap();
            n1.quiesce().unwrap();
            n0.quiesce().unwrap();
            assert_eq!(w.reclaim().unwrap().freed_blocks, 1);
            let b = w.alloc(Val::new(3)).unwrap();
            w.publish(s.slot(0), b).unwrap();
            let v: Val = *r.enter().load::<Val>(s.slot(0)).unwrap().unwrap();
            assert!(v.valid() && v.id >= 2);
            assert_eq!(s.emu.total_stats().reuse_hazards, 0);
        }
    }
}

/// A line rewritten in place reaches memory half written when the writer's cache evicts
/// it between the rewrite's stores, and a reader's cache may lose its good copy of the
/// line between the read's first stamp load and its payload: the payload then comes from
/// the half-written line. The second stamp load shows it (the rewrite marks the line
/// invalid first): the read is stale, never a torn value. Scripted: the writer's view
/// evicts at the rewrite's second payload store and, right then, the reader reads, its
/// view dropping the line at its first payload load.
#[test]
#[cfg_attr(
    miri,
    ignore = "a protocol test with no unsafe code of its own: the emulator runs under Miri in the others"
)]
fn a_line_evicted_half_rewritten_is_never_read_torn() {
    use bi_core::heap::BumpHeap;
    use bi_core::mem::{Access, Observed};
    use bi_core::runtime::{EmulatedClock, Fetch, NodeRuntime, Via};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex, OnceLock};
    type Words = [u64; 4];
    let mut s = setup(61, false);
    s.nodes.clear(); // both nodes run here with scripted views
    let layout = *s.region.layout();
    let line = layout.line_size().get();
    // The line array's link, once allocated.
    let array = Arc::new(OnceLock::<u64>::new());
    let at = Arc::new(OnceLock::<usize>::new());
    // The reader: drops the line from its cache when armed, at its first payload load.
    let reader_armed = Arc::new(AtomicBool::new(false));
    let (armed, at_r, node1) = (reader_armed.clone(), at.clone(), s.emu.node(1));
    let reader_view = Observed::new(s.emu.node(1), move |a| {
        if let Some(&at) = at_r.get()
            && a == Access::Load(at + 8)
            && armed.swap(false, Ordering::SeqCst)
        {
            node1.invalidate(at, line).unwrap();
        }
        Ok(())
    });
    let clock = |n| Arc::new(EmulatedClock::new(s.emu.node(n)));
    let reader_rt = Arc::new(NodeRuntime::new(reader_view, layout, 1, config(), clock(1)).unwrap());
    // The writer: at the rewrite's second payload store, its cache writes the line back
    // (an eviction), then the reader reads.
    let writer_armed = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (armed, at_w, array_w, node0, reader_in, seen_in) = (
        writer_armed.clone(),
        at.clone(),
        array.clone(),
        s.emu.node(0),
        reader_rt.clone(),
        seen.clone(),
    );
    let writer_view = Observed::new(s.emu.node(0), move |a| {
        if let Some(&at) = at_w.get()
            && a == Access::Store(at + 16)
            && armed.swap(false, Ordering::SeqCst)
        {
            node0.writeback(at, line).unwrap();
            reader_armed.store(true, Ordering::SeqCst);
            let r = reader_in.reader().unwrap();
            let g = r.enter();
            let link = g
                .line(Link::from_raw(array_w.get().copied().unwrap()), 0)
                .unwrap();
            let got = g.fetch_via(Via::Cached, link, |v: &Words| *v).unwrap();
            seen_in.lock().unwrap().push(got);
        }
        Ok(())
    });
    let writer_rt = NodeRuntime::new(writer_view, layout, 0, config(), clock(0)).unwrap();
    let mut w = writer_rt
        .writer(BumpHeap::new(s.arena(0), layout.line_size()).unwrap())
        .unwrap();
    let a = w.alloc_lines(&[[1u64; 4]]).unwrap();
    w.publish_lines(s.slot(0), a).unwrap();
    writer_rt.quiesce().unwrap();
    reader_rt.quiesce().unwrap();
    array.set(a.raw()).unwrap();
    at.set(a.offset()).unwrap();
    // The reader's cache holds the published line.
    {
        let r = reader_rt.reader().unwrap();
        let g = r.enter();
        let link = g.line(a, 0).unwrap();
        assert_eq!(
            g.fetch_via(Via::Cached, link, |v| *v).unwrap(),
            Fetch::Value([1u64; 4])
        );
    }
    writer_armed.store(true, Ordering::SeqCst);
    w.rewrite_lines(&[(a, 0, [2u64; 4])]).unwrap();
    assert!(!writer_armed.load(Ordering::SeqCst), "the script ran");
    assert_eq!(*seen.lock().unwrap(), [Fetch::Stale]);
}
