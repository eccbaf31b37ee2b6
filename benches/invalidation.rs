//! Load throughput under periodic invalidation of the whole working set, normalized to
//! the same loads without invalidation (the paper's Figure 12).
//!
//! Why: a Bounded Incoherence node bounds how long a stale line can live by invalidating,
//! once per period, the shared lines it may hold stale; at worst that is all the shared
//! data its readers read. Readers pay for it indirectly: the loads after an invalidation
//! miss and go to memory. The cost depends on the period, on how
//! much of the working set the caches would otherwise hold, and on whether the
//! invalidation runs on the loading core (which then also spends its own time issuing the
//! instructions) or on another core of the node. This bench measures that trade-off on the
//! machine at hand, for working sets of 32 KiB to 64 MiB and periods of 100 us, 1 ms,
//! 10 ms and 100 ms (plus `BI_PERIOD` when set), and for the worst case, "aggressive",
//! where every line is invalidated right after it is loaded.
//!
//! How:
//!
//! - The loads: one 8-byte load per cache line (per 64 bytes on x86), walking the working
//!   set sequentially and wrapping around, summed so that they are not optimised away. The
//!   loads are independent of each other, so the walk measures load throughput (lines
//!   loaded per ns), not latency; each load touches a new line, so every line an invalidation dropped
//!   costs one miss. Throughput is loads per ns of the time the loader had its CPU: the
//!   time it waited on the run queue for it (`/proc/thread-self/schedstat`, where the
//!   kernel has it) is taken off the elapsed time, so that other work on a shared
//!   machine weighs less on the result.
//! - The memory: one buffer, in `BI_REGION`'s region when set (the heap from its first
//!   whole page) and in anonymous memory otherwise, with every page touched before the
//!   first measurement and bound with `BI_MEMBIND` when set; each working set is a prefix
//!   of it.
//! - Same core: the load loop reads the clock every 4,096 loads and, when a period has
//!   elapsed, invalidates the whole working set itself (`clflushopt` or whatever
//!   `CacheOps::detect` picks, one instruction per line) and fences. The time this takes is
//!   time the loader does not load, so it counts against the throughput.
//! - Other core: a second thread, pinned to another CPU of node 0, invalidates the whole
//!   working set and fences once per period while the loader only loads. It parks until
//!   about a millisecond before each deadline and spins for the rest, so that short periods
//!   are kept.
//! - Aggressive (same core only): every line is invalidated right after its load, with one
//!   fence per 4,096 loads.
//! - Deadlines are one period apart. When an invalidation runs past the next deadline
//!   (64 MiB take milliseconds), that deadline is not caught up: the next one is set a
//!   period after the invalidation ended, so the loader still loads between two of them.
//!
//! Each measurement runs for at least several periods (quick mode: 0.1 s or 4 periods, so
//! 0.4 s at 100 ms; full mode: 0.3 s or 10 periods), after one untimed pass that caches
//! what the caches can hold. Each measurement under invalidation is paired with one
//! without invalidation (quick mode 0.1 s, full mode 0.3 s) taken just before it, and the
//! table gives, per working set and invalidation, the median over the runs (3 in quick
//! mode, 5 in full mode) of the pairs' ratios; its first row is the median throughput
//! without invalidation. Only ratios of the same run are meaningful: absolute throughput
//! drifts between runs, and more so on a machine shared with other work.
//!
//! Placement: the loader runs on the first CPU of node 0 and the other-core invalidator on
//! its second CPU (with `BI_PIN`: node 0's set; without it, CPUs 0 and 1). On a machine with
//! one CPU the other-core series is not measured.
//!
//! Before the table, a small criterion group measures one pass over a 2 MiB working set
//! without invalidation and with a 1 ms same-core period. `BI_BENCH_QUICK=1` (or
//! `-- --quick`) shortens the run. With `BI_REPORT_DIR` set, the series are written as
//! figure `fig12` of the findings.

use bi_core::cache::CacheOps;
mod common;

use bi_core::mem::Backing;
use bi_core::region::RegionConfig;
use bi_kit::bench::{self as kit, CpuSet, Figure, Findings, Series, Settings, SettingsError};
use criterion::{BenchmarkId, Throughput};
use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// Loads between two reads of the clock.
const CHECK: usize = 4096;

/// The working set of the criterion group.
const CRITERION_SET: usize = 2 * MIB;

/// What invalidates the working set while it is loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Invalidation {
    /// Nothing: the baseline.
    None,
    /// The loader itself, every period.
    SameCore(Duration),
    /// A thread on another CPU of the node, every period.
    OtherCore(Duration),
    /// The loader, each line right after loading it.
    Aggressive,
}

impl Invalidation {
    fn period(self) -> Option<Duration> {
        match self {
            Invalidation::SameCore(p) | Invalidation::OtherCore(p) => Some(p),
            Invalidation::None | Invalidation::Aggressive => None,
        }
    }

    /// The series' legend: `1 ms, same core`.
    fn name(self) -> String {
        match self {
            Invalidation::None => "no invalidation".into(),
            Invalidation::SameCore(p) => format!("{}, same core", period_label(p)),
            Invalidation::OtherCore(p) => format!("{}, other core", period_label(p)),
            Invalidation::Aggressive => "aggressive, same core".into(),
        }
    }
}

/// `100 us`, `1 ms`, `1.5 ms`.
fn period_label(p: Duration) -> String {
    let ns = p.as_nanos();
    if ns >= 1_000_000_000 {
        format!("{} s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        format!("{} ms", ns as f64 / 1e6)
    } else if ns >= 1_000 {
        format!("{} us", ns as f64 / 1e3)
    } else {
        format!("{ns} ns")
    }
}

fn size_label(bytes: usize) -> String {
    if bytes >= MIB {
        format!("{}MiB", bytes / MIB)
    } else {
        format!("{}KiB", bytes / KIB)
    }
}

/// Invalidation deadlines, one period apart. A deadline that has passed by the time the
/// previous invalidation ends is not caught up: the next one is a period after that end.
struct Schedule {
    period: Duration,
    due: Instant,
}

impl Schedule {
    fn new(period: Duration, start: Instant) -> Schedule {
        Schedule {
            period,
            due: start + period,
        }
    }

    /// Moves to the next deadline after an invalidation that ended at `now`.
    fn advance(&mut self, now: Instant) {
        self.due += self.period;
        if self.due <= now {
            self.due = now + self.period;
        }
    }
}

/// What the loader invalidates itself.
#[derive(Clone, Copy)]
enum Own {
    Nothing,
    Every(Duration),
    EachLine,
}

/// The load loop over one working set.
struct Loader<'a> {
    /// The working set as words; its length is a multiple of `stride`.
    set: &'a [AtomicU64],
    /// Words per line.
    stride: usize,
    ops: CacheOps,
    /// The word the next load reads.
    at: usize,
    sum: u64,
}

impl<'a> Loader<'a> {
    fn new(set: &'a [AtomicU64], ops: CacheOps) -> Loader<'a> {
        let stride = ops.line_size().get() / size_of::<AtomicU64>();
        assert!(!set.is_empty() && set.len().is_multiple_of(stride));
        Loader {
            set,
            stride,
            ops,
            at: 0,
            sum: 0,
        }
    }

    /// Loads per pass over the working set.
    fn lines(&self) -> usize {
        self.set.len() / self.stride
    }

    /// `n` loads, one per line, going on from where the previous call stopped and wrapping
    /// at the end of the working set; with `EACH_LINE`, each line is invalidated right after
    /// its load (not fenced: the caller fences).
    #[inline(never)]
    fn load<const EACH_LINE: bool>(&mut self, mut n: usize) {
        let mut sum = self.sum;
        while n > 0 {
            let rest = &self.set[self.at..];
            let take = (rest.len() / self.stride).min(n);
            for line in rest[..take * self.stride].chunks_exact(self.stride) {
                sum = sum.wrapping_add(line[0].load(Ordering::Relaxed));
                if EACH_LINE {
                    self.ops.invalidate_of(&line[0]);
                }
            }
            self.at += take * self.stride;
            if self.at == self.set.len() {
                self.at = 0;
            }
            n -= take;
        }
        self.sum = black_box(sum);
    }

    /// Loads until `max_loads` loads are done or the clock passes `until` (read every
    /// [`CHECK`] loads), invalidating as `own` says; returns the number of loads.
    fn run(&mut self, own: Own, max_loads: u64, until: Instant) -> u64 {
        let mut schedule = match own {
            Own::Every(period) => Some(Schedule::new(period, Instant::now())),
            Own::Nothing | Own::EachLine => None,
        };
        let mut done = 0u64;
        while done < max_loads {
            let n = (max_loads - done).min(CHECK as u64) as usize;
            if let Own::EachLine = own {
                self.load::<true>(n);
                self.ops.fence();
            } else {
                self.load::<false>(n);
            }
            done += n as u64;
            let now = Instant::now();
            if now >= until {
                break;
            }
            if let Some(s) = schedule.as_mut()
                && now >= s.due
            {
                self.ops.invalidate_of(self.set);
                self.ops.fence();
                s.advance(Instant::now());
            }
        }
        done
    }

    /// One untimed pass, so that the caches hold what they can of the working set.
    fn warm(&mut self) {
        let lines = self.lines() as u64;
        self.run(Own::Nothing, lines, far_future());
    }

    /// Loads per ns over `time` of loading, not counting the time the thread waited for
    /// its CPU.
    fn throughput(&mut self, own: Own, time: Duration) -> f64 {
        let waited = run_delay_ns();
        let start = Instant::now();
        let loads = self.run(own, u64::MAX, start + time);
        let wall = start.elapsed().as_nanos() as f64;
        let waited = match (waited, run_delay_ns()) {
            (Some(a), Some(b)) => b.saturating_sub(a) as f64,
            _ => 0.0,
        };
        loads as f64 / (wall - waited).max(wall / 10.0)
    }
}

/// Nanoseconds the calling thread has waited on a run queue for a CPU
/// (`/proc/thread-self/schedstat`, Linux), if the kernel reports it. A wait is counted
/// when the thread gets the CPU back, so it is complete whenever the thread reads it.
fn run_delay_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().nth(1)?.parse().ok()
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

/// The other-core invalidator: after `start`, invalidates `set` and fences once per
/// `period` until `stop` is set (and the thread unparked, so that a long wait ends).
/// Between deadlines it parks until about a millisecond before the next one, then spins.
fn invalidate_every(
    ops: CacheOps,
    set: &[AtomicU64],
    period: Duration,
    start: &Barrier,
    stop: &AtomicBool,
) {
    start.wait();
    let mut schedule = Schedule::new(period, Instant::now());
    loop {
        loop {
            if stop.load(Ordering::Acquire) {
                return;
            }
            let now = Instant::now();
            if now >= schedule.due {
                break;
            }
            let left = schedule.due - now;
            if left > Duration::from_millis(2) {
                std::thread::park_timeout(left - Duration::from_millis(1));
            } else {
                std::hint::spin_loop();
            }
        }
        ops.invalidate_of(set);
        ops.fence();
        schedule.advance(Instant::now());
    }
}

/// Where the threads run and what they invalidate with.
struct Machine {
    ops: CacheOps,
    /// The other-core invalidator's CPU (`None`: not pinned).
    invalidator_cpu: Option<usize>,
    /// Whether there is another CPU for the other-core placement.
    other_core: bool,
}

/// Loads per ns over `set` under `inv`, for `time`, after one untimed pass.
fn measure(m: &Machine, set: &[AtomicU64], inv: Invalidation, time: Duration) -> f64 {
    let mut loader = Loader::new(set, m.ops);
    loader.warm();
    match inv {
        Invalidation::None => loader.throughput(Own::Nothing, time),
        Invalidation::SameCore(p) => loader.throughput(Own::Every(p), time),
        Invalidation::Aggressive => loader.throughput(Own::EachLine, time),
        Invalidation::OtherCore(p) => {
            let start = Barrier::new(2);
            let stop = AtomicBool::new(false);
            std::thread::scope(|s| {
                let invalidator = s.spawn(|| {
                    if let Some(cpu) = m.invalidator_cpu {
                        pin_to(cpu).expect("pinning the invalidator (it worked before)");
                    }
                    invalidate_every(m.ops, set, p, &start, &stop);
                });
                start.wait();
                let t = loader.throughput(Own::Nothing, time);
                stop.store(true, Ordering::Release);
                invalidator.thread().unpark();
                t
            })
        }
    }
}

/// Pins the calling thread to `cpu` alone.
fn pin_to(cpu: usize) -> Result<(), SettingsError> {
    Settings {
        pin: vec![CpuSet {
            spec: cpu.to_string(),
            cpus: vec![cpu],
        }],
        ..Settings::default()
    }
    .pin_thread(0)
}

/// Whether pinning worked; a failure is fatal with `BI_PIN` (the placement was asked
/// for) and a note without it (the default placement was only a guess).
fn pinned(result: Result<(), SettingsError>, explicit: bool, who: &str) -> bool {
    match result {
        Ok(()) => true,
        Err(e) if explicit => {
            eprintln!("invalidation: pinning the {who}: {e}");
            std::process::exit(2);
        }
        Err(e) => {
            println!("note: cannot pin the {who} ({e}); it runs unpinned");
            false
        }
    }
}

/// The loader's and the other-core invalidator's CPUs: the first two of node 0's set with
/// `BI_PIN` (the one after the first if the set has one CPU); else CPUs 0 and 1 when the
/// machine has two, and nothing pinned when it has one.
fn placement(settings: &Settings, cpus_here: usize) -> (Option<usize>, Option<usize>) {
    match settings.pin.first() {
        Some(node0) => {
            let loader = node0.cpus[0];
            let other = node0.cpus.get(1).copied().unwrap_or(loader + 1);
            (Some(loader), Some(other))
        }
        None if cpus_here >= 2 => (Some(0), Some(1)),
        None => (None, None),
    }
}

struct Plan {
    sizes: Vec<usize>,
    /// Every invalidation measured, the baseline excluded.
    cases: Vec<Invalidation>,
    runs: usize,
    /// The shortest measurement.
    min_time: Duration,
    /// Periods each measurement spans at least.
    periods: u32,
}

impl Plan {
    fn new(quick: bool, test_mode: bool, settings: &Settings, other_core: bool) -> Plan {
        let mut periods = vec![
            Duration::from_micros(100),
            Duration::from_millis(1),
            Duration::from_millis(10),
            Duration::from_millis(100),
        ];
        if let Some(p) = settings.period
            && !periods.contains(&p)
        {
            periods.push(p);
            periods.sort();
        }
        let mut cases = Vec::new();
        for &p in &periods {
            cases.push(Invalidation::SameCore(p));
            if other_core {
                cases.push(Invalidation::OtherCore(p));
            }
        }
        cases.push(Invalidation::Aggressive);
        let sizes = if test_mode {
            vec![32 * KIB]
        } else {
            [
                32 * KIB,
                128 * KIB,
                512 * KIB,
                2 * MIB,
                8 * MIB,
                32 * MIB,
                64 * MIB,
            ]
            .into()
        };
        let (runs, min_time, periods) = if test_mode {
            (1, Duration::from_millis(5), 0)
        } else if quick {
            (3, Duration::from_millis(100), 4)
        } else {
            (5, Duration::from_millis(300), 10)
        };
        Plan {
            sizes,
            cases,
            runs,
            min_time,
            periods,
        }
    }

    fn time(&self, inv: Invalidation) -> Duration {
        match inv.period() {
            Some(p) => self.min_time.max(p * self.periods),
            None => self.min_time,
        }
    }
}

/// The medians of one working set: the baseline (loads per ns) and each case's
/// throughput divided by it, in the plan's order.
struct Row {
    baseline: f64,
    normalized: Vec<f64>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Each case's measurement is paired with one without invalidation just before it, so
/// that a slower or faster stretch of the machine moves both; the row holds the median
/// of the pairs' ratios.
fn measure_size(m: &Machine, plan: &Plan, set: &[AtomicU64]) -> Row {
    let mut base = Vec::new();
    let mut ratios = vec![Vec::new(); plan.cases.len()];
    for _ in 0..plan.runs {
        for (i, &inv) in plan.cases.iter().enumerate() {
            let plain = measure(m, set, Invalidation::None, plan.min_time);
            ratios[i].push(measure(m, set, inv, plan.time(inv)) / plain);
            base.push(plain);
        }
    }
    Row {
        baseline: median(base),
        normalized: ratios.into_iter().map(median).collect(),
    }
}

fn bench_criterion(c: &mut criterion::Criterion, ops: CacheOps, set: &[AtomicU64]) {
    let mut loader = Loader::new(set, ops);
    let lines = loader.lines() as u64;
    let mut g = c.benchmark_group("loads");
    g.throughput(Throughput::Elements(lines));
    let cases = [
        ("none", Own::Nothing),
        ("1ms_same_core", Own::Every(Duration::from_millis(1))),
    ];
    for (name, own) in cases {
        let id = BenchmarkId::new(name, size_label(set.len() * 8));
        g.bench_function(id, |b| {
            b.iter_custom(|iters| {
                loader.warm();
                let start = Instant::now();
                loader.run(own, iters * lines, far_future());
                start.elapsed()
            })
        });
    }
    g.finish();
}

fn print_table(plan: &Plan, rows: &[Row], line: usize) {
    println!();
    println!(
        "Load throughput under invalidation of the whole working set / the same loads without \
         invalidation, median of {} paired runs (one 8-byte load per {}-byte line, sequential)",
        plan.runs, line
    );
    print!("{:<24}", "working set");
    for &s in &plan.sizes {
        print!(" {:>7}", size_label(s));
    }
    println!();
    print!("{:<24}", "none, loads per ns");
    for r in rows {
        print!(" {:>7.3}", r.baseline);
    }
    println!();
    for (i, inv) in plan.cases.iter().enumerate() {
        print!("{:<24}", inv.name());
        for r in rows {
            print!(" {:>7.3}", r.normalized[i]);
        }
        println!();
    }
}

fn record(findings: &mut Findings, plan: &Plan, rows: &[Row]) {
    let series = plan
        .cases
        .iter()
        .enumerate()
        .map(|(i, inv)| Series {
            name: inv.name(),
            points: plan
                .sizes
                .iter()
                .zip(rows)
                .map(|(&s, r)| ((s / KIB) as f64, r.normalized[i]))
                .collect(),
        })
        .collect();
    findings.figure(Figure {
        id: "fig12".into(),
        title: "Load throughput under periodic invalidation of the working set".into(),
        x_label: "working set (KiB)".into(),
        y_label: "load throughput / no invalidation".into(),
        log_x: true,
        series,
    });
    let value = |inv: Invalidation, size: usize| {
        let i = plan.cases.iter().position(|&c| c == inv)?;
        let j = plan.sizes.iter().position(|&s| s == size)?;
        Some(rows[j].normalized[i])
    };
    let (smallest, largest) = (plan.sizes[0], plan.sizes[plan.sizes.len() - 1]);
    let ms = Duration::from_millis(1);
    let us100 = Duration::from_micros(100);
    for (inv, size) in [
        (Invalidation::SameCore(ms), largest),
        (Invalidation::OtherCore(ms), largest),
        (Invalidation::SameCore(us100), smallest),
        (Invalidation::Aggressive, smallest),
    ] {
        if let Some(v) = value(inv, size) {
            let what = format!(
                "load throughput, {} / no invalidation, {} working set",
                inv.name(),
                size_label(size)
            );
            findings.ratio(what, v, None);
        }
    }
}

fn main() {
    let settings = Settings::load("invalidation");
    // Before pinning: the findings name the CPUs the machine gives this process.
    let mut findings = Findings::new("invalidation", &settings);
    let quick = kit::quick();
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    // As criterion decides: without `--bench` (cargo test) or with `--test`, run once.
    let test_mode = has("--test") || !has("--bench");

    let ops = CacheOps::detect();
    println!(
        "cache ops: invalidate {}, line {}",
        ops.invalidate_instruction(),
        ops.line_size()
    );
    if ops.is_nop() {
        println!("no cache invalidation instruction on this target: nothing to measure");
        return;
    }

    let cpus_here = std::thread::available_parallelism().map_or(1, |n| n.get());
    let explicit = !settings.pin.is_empty();
    let (loader_cpu, invalidator_cpu) = placement(&settings, cpus_here);
    let loader_cpu = loader_cpu.filter(|&c| pinned(pin_to(c), explicit, "loader"));
    let invalidator_cpu = invalidator_cpu.filter(|&c| {
        let tried = std::thread::spawn(move || pin_to(c))
            .join()
            .expect("the pinning thread");
        pinned(tried, explicit, "other-core invalidator")
    });
    let other_core = explicit || cpus_here >= 2;
    let cpu = |c: Option<usize>| c.map_or("unpinned".to_owned(), |c| format!("CPU {c}"));
    if other_core {
        println!(
            "loader on {}, other-core invalidator on {}",
            cpu(loader_cpu),
            cpu(invalidator_cpu)
        );
    } else {
        println!("one CPU: the other-core placement is not measured");
    }
    let machine = Machine {
        ops,
        invalidator_cpu,
        other_core,
    };
    let plan = Plan::new(quick, test_mode, &settings, machine.other_core);

    let largest = plan.sizes.iter().copied().max().unwrap_or(0);
    let bytes = largest.max(CRITERION_SET);
    // `BI_REGION`'s region (the working sets start at its heap's first whole page), or
    // anonymous memory; bound to `BI_MEMBIND`'s nodes either way.
    let (mem, first) = match settings.region_file("invalidation") {
        Some(_) => {
            let config = RegionConfig::new(bytes + 4 * MIB).with_nodes(1);
            let region = common::region(&settings, "invalidation", config);
            let start = region.layout().heap().offset.next_multiple_of(4 * KIB);
            (region.backing().clone(), start / 8)
        }
        None => {
            let mem = std::sync::Arc::new(Backing::anonymous(bytes).expect("bench buffer"));
            common::bind(&settings, "invalidation", &mem);
            (mem, 0)
        }
    };
    let words = &mem.words()[first..first + bytes / 8];
    // Write every word, so that page faults never land in a measurement.
    for (i, w) in words.iter().enumerate() {
        w.store(i as u64, Ordering::Relaxed);
    }
    let prefix = |bytes: usize| &words[..bytes / size_of::<AtomicU64>()];

    let mut c = kit::criterion(quick);
    bench_criterion(&mut c, ops, prefix(CRITERION_SET));
    c.final_summary();

    let rows: Vec<Row> = plan
        .sizes
        .iter()
        .map(|&s| measure_size(&machine, &plan, prefix(s)))
        .collect();
    print_table(&plan, &rows, ops.line_size().get());

    record(&mut findings, &plan, &rows);
    findings.write().expect("writing the findings");
}
