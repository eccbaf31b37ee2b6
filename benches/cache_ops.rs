//! Per-line cost of cache operations: the serialising `clflush` against batched
//! `clflushopt` / `clwb` loops closed by one `mfence`, and the cost of reading lines that
//! were flushed just before.
//!
//! Why: Bounded Incoherence writes back and invalidates whole batches of lines, and its
//! design rests on a batch costing a few ns per line when the instructions are weakly
//! ordered and fenced once, against over a hundred ns per line for `clflush`. These
//! groups measure that on the machine at hand:
//!
//! - `flush/<state>`: `clflush` per line; `clflushopt` over the buffer + one `mfence`;
//!   `clwb` over the buffer + one `mfence`; on contiguous buffers of 4 KiB .. 16 MiB whose
//!   lines were beforehand read (`clean`), written (`dirty`) or flushed (`uncached`);
//! - `read/random`: dependent random reads of one word per line over the same working
//!   sets, with the lines `cached` (read once before) or `flushed` (each line flushed and
//!   fenced before the timed pass).
//!
//! Setup (dirtying, reading, flushing) is excluded from the timing with `iter_custom`;
//! throughput is in lines, so criterion reports time per line. After the groups, a plain
//! table of the ratio batched/`clflush` per size and state is printed (and one of random
//! reads, flushed against cached), measured with a simple timed loop (median of several
//! runs) in the same process, because absolute numbers drift between runs and only
//! same-run ratios are comparable.
//!
//! Quick mode: `BI_BENCH_QUICK=1` or `cargo bench --bench cache_ops -- --quick` (sizes
//! 4 KiB, 64 KiB, 1 MiB, 16 MiB and short measurement times).
//!
//! The measuring thread plays node 0 (`BI_PIN`). The buffers are anonymous memory bound to
//! `BI_MEMBIND`'s NUMA nodes, or, with `BI_REGION`, windows of one region in that file or
//! device (so the flushes go to that memory). The tables are written as findings: the
//! per-line costs as figure `fig3`, the reads as `fig11`, and the ratios at the largest
//! size.

mod common;

use bi_core::cache::{CacheOps, Instruction};
use bi_core::mem::Backing;
use bi_core::region::{Region, RegionConfig};
use bi_kit::bench::{Figure, Findings, Series, Settings};
use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use rand::seq::SliceRandom;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const NAME: &str = "cache_ops";

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// What the lines hold when the timed flush loop starts.
#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    /// Every line read: cached and clean (as far as the cache holds them).
    Clean,
    /// Every line written: cached and dirty.
    Dirty,
    /// Every line flushed and fenced: not cached.
    Uncached,
}

impl State {
    const ALL: [State; 3] = [State::Clean, State::Dirty, State::Uncached];

    fn name(self) -> &'static str {
        match self {
            State::Clean => "clean",
            State::Dirty => "dirty",
            State::Uncached => "uncached",
        }
    }
}

/// One flush variant under test.
#[derive(Clone, Copy)]
struct Method {
    name: &'static str,
    ops: CacheOps,
    /// `true`: run the ops' write-back (clwb keeps lines); `false`: flush (drop lines).
    writeback: bool,
}

impl Method {
    /// One instruction per line over `words`, then one fence; this is the timed part.
    #[inline]
    fn run(&self, words: &[AtomicU64]) {
        if self.writeback {
            self.ops.writeback_of(words);
        } else {
            self.ops.flush_of(words);
        }
        self.ops.fence();
    }
}

/// Where the buffers live.
struct Memory {
    settings: Settings,
    /// `BI_REGION`'s region, whose heap every buffer starts at; `None`: each buffer is
    /// fresh anonymous memory.
    region: Option<Region>,
}

impl Memory {
    /// The memory for buffers of up to `largest` bytes.
    fn new(settings: Settings, largest: usize) -> Memory {
        let region = settings.region_file(NAME).map(|_| {
            let config = RegionConfig::new(largest + 4 * MIB).with_nodes(1);
            common::region(&settings, NAME, config)
        });
        Memory { settings, region }
    }

    /// `bytes` of memory, as the backing and the index of the first word in it: the
    /// region's heap from its first whole page, or fresh anonymous memory bound to
    /// `BI_MEMBIND`'s nodes.
    fn take(&self, bytes: usize) -> (Arc<Backing>, usize) {
        match &self.region {
            Some(region) => {
                let heap = region.layout().heap();
                let start = heap.offset.next_multiple_of(4 * KIB);
                if start + bytes > heap.end() {
                    eprintln!("{NAME}: the region's heap holds no {bytes} bytes");
                    std::process::exit(2);
                }
                (region.backing().clone(), start / 8)
            }
            None => {
                let mem = Arc::new(Backing::anonymous(bytes).expect("bench buffer"));
                common::bind(&self.settings, NAME, &mem);
                (mem, 0)
            }
        }
    }
}

/// A buffer of whole lines and the helpers that put its lines into a [`State`].
struct Buffer {
    mem: Arc<Backing>,
    /// The buffer's first word in `mem`.
    first: usize,
    line_words: usize,
    lines: usize,
    setup_ops: CacheOps,
}

impl Buffer {
    fn new(bytes: usize, setup_ops: CacheOps, memory: &Memory) -> Buffer {
        let (mem, first) = memory.take(bytes);
        let line = setup_ops.line_size().get();
        let buf = Buffer {
            mem,
            first,
            line_words: line / 8,
            lines: bytes / line,
            setup_ops,
        };
        // Touch every page so page faults never land in a timed region.
        for (i, w) in buf.words().iter().enumerate() {
            w.store(i as u64, Ordering::Relaxed);
        }
        buf
    }

    fn words(&self) -> &[AtomicU64] {
        &self.mem.words()[self.first..self.first + self.lines * self.line_words]
    }

    /// The first word of line `i`.
    fn line_word(&self, i: usize) -> &AtomicU64 {
        &self.words()[i * self.line_words]
    }

    fn prepare(&self, state: State) {
        match state {
            State::Clean => {
                let mut sum = 0u64;
                for i in 0..self.lines {
                    sum = sum.wrapping_add(self.line_word(i).load(Ordering::Relaxed));
                }
                black_box(sum);
            }
            State::Dirty => {
                for i in 0..self.lines {
                    self.line_word(i).fetch_add(1, Ordering::Relaxed);
                }
            }
            State::Uncached => self.evict(),
        }
    }

    /// Flush every line and wait.
    fn evict(&self) {
        self.setup_ops.flush_of(self.words());
        self.setup_ops.fence();
    }

    /// Links the lines into one random cycle: line `i`'s first word holds the next index.
    fn make_chain(&self, seed: u64) {
        let mut order: Vec<usize> = (0..self.lines).collect();
        order.shuffle(&mut bi_kit::rng(seed, "chain"));
        for k in 0..order.len() {
            let next = order[(k + 1) % order.len()];
            self.line_word(order[k])
                .store(next as u64, Ordering::Relaxed);
        }
    }

    /// Follows the chain for one full cycle (every line read once, each read depending on
    /// the previous one, so the latencies add up instead of overlapping).
    #[inline]
    fn chase(&self) -> u64 {
        let mut at = 0usize;
        for _ in 0..self.lines {
            at = self.line_word(at).load(Ordering::Relaxed) as usize;
        }
        at as u64
    }
}

struct Config {
    quick: bool,
    test_mode: bool,
    sizes: Vec<usize>,
    memory: Memory,
}

impl Config {
    fn from_env(settings: Settings) -> Config {
        let args: Vec<String> = std::env::args().collect();
        let has = |flag: &str| args.iter().any(|a| a == flag);
        let quick = has("--quick") || std::env::var("BI_BENCH_QUICK").is_ok_and(|v| v == "1");
        let test_mode = has("--test");
        let sizes = if test_mode {
            vec![4 * KIB]
        } else if quick {
            vec![4 * KIB, 64 * KIB, MIB, 16 * MIB]
        } else {
            vec![
                4 * KIB,
                16 * KIB,
                64 * KIB,
                256 * KIB,
                MIB,
                4 * MIB,
                16 * MIB,
            ]
        };
        let largest = sizes.iter().copied().max().unwrap_or(4 * KIB);
        Config {
            quick,
            test_mode,
            sizes,
            memory: Memory::new(settings, largest),
        }
    }
}

fn size_label(bytes: usize) -> String {
    if bytes >= MIB {
        format!("{}MiB", bytes / MIB)
    } else {
        format!("{}KiB", bytes / KIB)
    }
}

/// The three variants of the paper's flush comparison that this processor supports.
fn methods() -> Vec<Method> {
    let mut v = Vec::new();
    if let Ok(ops) = CacheOps::clflush_only() {
        v.push(Method {
            name: "clflush",
            ops,
            writeback: false,
        });
    }
    if let Ok(ops) = CacheOps::with_instructions(Instruction::Clflushopt, Instruction::Clflushopt) {
        v.push(Method {
            name: "clflushopt+mfence",
            ops,
            writeback: false,
        });
    }
    if let Ok(ops) = CacheOps::with_instructions(Instruction::Clwb, Instruction::Clflushopt) {
        v.push(Method {
            name: "clwb+mfence",
            ops,
            writeback: true,
        });
    }
    v
}

fn configure_group(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    cfg: &Config,
) {
    group.sampling_mode(SamplingMode::Flat);
    if cfg.quick {
        group.sample_size(10);
        group.warm_up_time(Duration::from_millis(100));
        group.measurement_time(Duration::from_millis(300));
    } else {
        group.sample_size(20);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
    }
}

fn bench_flush(c: &mut Criterion, cfg: &Config, methods: &[Method], setup_ops: CacheOps) {
    for state in State::ALL {
        let mut group = c.benchmark_group(format!("flush/{}", state.name()));
        configure_group(&mut group, cfg);
        for &size in &cfg.sizes {
            let buf = Buffer::new(size, setup_ops, &cfg.memory);
            group.throughput(Throughput::Elements(buf.lines as u64));
            for m in methods {
                group.bench_function(BenchmarkId::new(m.name, size_label(size)), |b| {
                    b.iter_custom(|iters| {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            buf.prepare(state);
                            let t = Instant::now();
                            m.run(buf.words());
                            total += t.elapsed();
                        }
                        total
                    })
                });
            }
        }
        group.finish();
    }
}

fn bench_random_reads(c: &mut Criterion, cfg: &Config, setup_ops: CacheOps) {
    let mut group = c.benchmark_group("read/random");
    configure_group(&mut group, cfg);
    for &size in &cfg.sizes {
        let buf = Buffer::new(size, setup_ops, &cfg.memory);
        buf.make_chain(size as u64);
        group.throughput(Throughput::Elements(buf.lines as u64));
        for flushed in [false, true] {
            let name = if flushed { "flushed" } else { "cached" };
            group.bench_function(BenchmarkId::new(name, size_label(size)), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        if flushed {
                            buf.evict();
                        } else {
                            black_box(buf.chase()); // warm: as cached as the cache allows
                        }
                        let t = Instant::now();
                        black_box(buf.chase());
                        total += t.elapsed();
                    }
                    total
                })
            });
        }
    }
    group.finish();
}

/// Median nanoseconds per line of `m` on `buf` prepared in `state`, over `runs` runs.
fn median_ns_per_line(buf: &Buffer, m: &Method, state: State, runs: usize) -> f64 {
    let mut v: Vec<f64> = (0..runs)
        .map(|_| {
            buf.prepare(state);
            let t = Instant::now();
            m.run(buf.words());
            t.elapsed().as_nanos() as f64 / buf.lines as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One cell of the per-line cost table.
struct Cost {
    size: usize,
    state: State,
    method: &'static str,
    ns: f64,
}

/// Prints the per-line cost table and returns its cells (none without `clflush`).
fn print_ratio_table(cfg: &Config, methods: &[Method], setup_ops: CacheOps) -> Vec<Cost> {
    let mut costs = Vec::new();
    let Some(base) = methods.iter().find(|m| m.name == "clflush") else {
        println!("clflush is not available here: no ratio table");
        return costs;
    };
    let others: Vec<&Method> = methods.iter().filter(|m| m.name != "clflush").collect();
    let runs = if cfg.test_mode {
        1
    } else if cfg.quick {
        5
    } else {
        11
    };
    println!();
    println!("Per-line cost, ns (median of {runs} runs), and ratio batched / clflush");
    print!("{:>8} {:>9} {:>10}", "size", "state", "clflush");
    for m in &others {
        print!(" {:>18} {:>7}", m.name, "ratio");
    }
    println!();
    for &size in &cfg.sizes {
        let buf = Buffer::new(size, setup_ops, &cfg.memory);
        for state in State::ALL {
            let base_ns = median_ns_per_line(&buf, base, state, runs);
            costs.push(Cost {
                size,
                state,
                method: base.name,
                ns: base_ns,
            });
            print!(
                "{:>8} {:>9} {:>10.1}",
                size_label(size),
                state.name(),
                base_ns
            );
            for m in &others {
                let ns = median_ns_per_line(&buf, m, state, runs);
                costs.push(Cost {
                    size,
                    state,
                    method: m.name,
                    ns,
                });
                print!(" {:>18.1} {:>7.3}", ns, ns / base_ns);
            }
            println!();
        }
    }
    costs
}

/// Median nanoseconds per line of one dependent random pass over `buf`, after either a
/// warming pass or a flush of every line.
fn median_read_ns_per_line(buf: &Buffer, flushed: bool, runs: usize) -> f64 {
    let mut v: Vec<f64> = (0..runs)
        .map(|_| {
            if flushed {
                buf.evict();
            } else {
                black_box(buf.chase());
            }
            let t = Instant::now();
            black_box(buf.chase());
            t.elapsed().as_nanos() as f64 / buf.lines as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Prints the random-read table and returns its rows: size, cached and flushed ns per
/// line.
fn print_read_table(cfg: &Config, setup_ops: CacheOps) -> Vec<(usize, f64, f64)> {
    let mut rows = Vec::new();
    let runs = if cfg.test_mode { 1 } else { 5 };
    println!();
    println!("Random dependent reads, ns per line (median of {runs} runs)");
    println!(
        "{:>8} {:>10} {:>10} {:>7}",
        "size", "cached", "flushed", "ratio"
    );
    for &size in &cfg.sizes {
        let buf = Buffer::new(size, setup_ops, &cfg.memory);
        buf.make_chain(size as u64);
        let warm = median_read_ns_per_line(&buf, false, runs);
        let cold = median_read_ns_per_line(&buf, true, runs);
        rows.push((size, warm, cold));
        println!(
            "{:>8} {:>10.1} {:>10.1} {:>7.2}",
            size_label(size),
            warm,
            cold,
            cold / warm
        );
    }
    rows
}

/// Adds the tables to `f`: `fig3` (ns per line by size, a series per method and state),
/// `fig11` (reads, cached and flushed) and the ratios at the largest size.
fn add_findings(f: &mut Findings, costs: &[Cost], reads: &[(usize, f64, f64)]) {
    let kib = |size: usize| size as f64 / KIB as f64;
    let largest = costs.iter().map(|c| c.size).max();
    for c in costs.iter().filter(|c| Some(c.size) == largest) {
        let base = costs
            .iter()
            .find(|b| b.size == c.size && b.state == c.state && b.method == "clflush");
        if let Some(base) = base.filter(|_| c.method != "clflush") {
            f.ratio(
                format!(
                    "{} / clflush per line, {} lines, {}",
                    c.method,
                    c.state.name(),
                    size_label(c.size)
                ),
                c.ns / base.ns,
                None,
            );
        }
    }
    let mut series: Vec<Series> = Vec::new();
    for c in costs {
        let name = format!("{} ({})", c.method, c.state.name());
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((kib(c.size), c.ns)),
            None => series.push(Series {
                name,
                points: vec![(kib(c.size), c.ns)],
            }),
        }
    }
    if !series.is_empty() {
        f.figure(Figure {
            id: "fig3".into(),
            title: "Per-line cost of flushing a buffer: clflush vs batched clflushopt / clwb"
                .into(),
            x_label: "buffer size, KiB".into(),
            y_label: "ns per line".into(),
            log_x: true,
            series,
        });
    }
    if let Some(&(size, warm, cold)) = reads.iter().max_by_key(|r| r.0) {
        f.ratio(
            format!(
                "random read of a flushed line / of a cached line, {}",
                size_label(size)
            ),
            cold / warm,
            None,
        );
        let points = |pick: fn(&(usize, f64, f64)) -> f64| {
            reads.iter().map(|r| (kib(r.0), pick(r))).collect()
        };
        f.figure(Figure {
            id: "fig11".into(),
            title: "Dependent random reads, lines cached vs flushed just before".into(),
            x_label: "working set, KiB".into(),
            y_label: "ns per line".into(),
            log_x: true,
            series: vec![
                Series {
                    name: "cached".into(),
                    points: points(|r| r.1),
                },
                Series {
                    name: "flushed".into(),
                    points: points(|r| r.2),
                },
            ],
        });
    }
}

fn main() {
    let settings = Settings::load(NAME);
    // Before pinning: the findings name the CPUs the machine gives this process.
    let mut findings = Findings::new(NAME, &settings);
    common::pin(&settings, NAME, 0);
    let cfg = Config::from_env(settings);
    let detected = CacheOps::detect();
    println!(
        "cache ops: write-back {}, invalidate {}, line {}",
        detected.writeback_instruction(),
        detected.invalidate_instruction(),
        detected.line_size()
    );
    let methods = methods();
    if methods.is_empty() || detected.is_nop() {
        println!("no x86 flush instructions on this target: nothing to measure");
        common::write(&findings);
        return;
    }
    let mut c = bi_kit::bench::criterion(cfg.quick);
    if cfg.quick {
        c = c
            .warm_up_time(Duration::from_millis(100))
            .measurement_time(Duration::from_millis(300));
    }
    bench_flush(&mut c, &cfg, &methods, detected);
    bench_random_reads(&mut c, &cfg, detected);
    c.final_summary();
    let costs = print_ratio_table(&cfg, &methods, detected);
    let reads = print_read_table(&cfg, detected);
    add_findings(&mut findings, &costs, &reads);
    common::write(&findings);
}
