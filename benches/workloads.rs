//! Whole workloads, as conc-map-bench runs them: `bi`'s map used the way a service uses
//! it (`Pool::open`, then `pool.map::<u64, u64>`, one handle shared by the threads) against
//! dashmap, papaya and `RwLock<HashMap>`, under `bustle`'s harness (the workload
//! generator behind conc-map-bench, not written here).
//!
//! Reported, every contestant in the same run:
//! - **Mixes** (bustle's `Workload`, capacity 2^20, prefilled to 75%, 0.75 x capacity
//!   operations): read-only; 98% reads, 1% inserts, 1% removes; bustle's
//!   `Mix::read_heavy()` and `Mix::uniform()`; at 1 and 2 threads. About 60% of a
//!   mix's reads are for keys that are absent, as in caches and de-duplication tables.
//!   Million operations per second, the median of the interleaved runs (one in quick
//!   mode, three otherwise), and the ratios bi / dashmap and bi / papaya.
//! - **One lookup** (criterion, one thread, 786,432 keys loaded): a present key and an
//!   absent one, each a fresh random key per call; bi's batched lookup
//!   ([`SharedMap::get_many`](bi::SharedMap::get_many)) per key, against a loop of
//!   single lookups.
//! - **Bulk load**: 2^20 keys into an empty map (bi through `extend`, the peers a loop
//!   of inserts).
//! - **Memory per entry**: each contestant loads 786,432 entries in a child process of
//!   its own; the growth of its resident set (the pool's mapped pages included) divided
//!   by the entries, for `u64 -> u64` and for `String -> String` (20-byte keys,
//!   100-byte values).
//!
//! The ratios with a target (issue 32) are printed beside it and written as findings
//! (`BI_REPORT_DIR`). `BI_BENCH_QUICK=1` (or `-- --quick`) runs one round of the mixes
//! and criterion's short measurement. bi's pools are files in a temporary directory and
//! their passes run every `BI_PERIOD` (1 ms by default); bustle spawns its own threads,
//! so `BI_PIN`, `BI_MEMBIND` and `BI_REGION` do not apply here (`TMPDIR` places the
//! pools). `BI_WORKLOADS_ONLY=lookups` (or `mixes`, `load`, `memory`) runs one part,
//! for profiling, and writes no findings.

mod common;

use bi::{Pool, PoolConfig, SharedMap};
use bi_kit::bench::{self as kit, Findings, Settings, Target};
use bustle::{Collection, CollectionHandle, Mix, Workload};
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

const NAME: &str = "workloads";
/// bustle's table capacity, as a power of two.
const CAPACITY_LOG2: u8 = 20;
/// The share of the capacity loaded before a mix runs.
const PREFILL: f64 = 0.75;
/// Keys loaded for the one-lookup and memory figures (75% of 2^20, as bustle's prefill).
const KEYS: usize = 786_432;
/// A pool large enough for every mix (the region is a sparse file: what is not used is
/// never touched).
const POOL_BYTES: usize = 1 << 30;
/// The child-process mode of this binary: `contestant:u64` or `contestant:string`.
const MEMORY_VAR: &str = "BI_WORKLOADS_MEMORY";

/// Where bi's pools are made, and the period of their passes.
struct PoolPlace {
    dir: tempfile::TempDir,
    period: Duration,
    made: AtomicUsize,
}

static PLACE: OnceLock<PoolPlace> = OnceLock::new();

/// A fresh pool in the bench's directory, as a service opens one.
fn fresh_pool() -> Pool {
    let place = PLACE.get_or_init(|| PoolPlace {
        dir: tempfile::tempdir().expect("a temporary directory"),
        period: PoolConfig::default().pass_period,
        made: AtomicUsize::new(0),
    });
    let n = place.made.fetch_add(1, Ordering::Relaxed);
    let path = place.dir.path().join(format!("pool-{n}.bi"));
    let config = PoolConfig {
        pass_period: place.period,
        ..PoolConfig::with_size(POOL_BYTES)
    };
    Pool::open_or_create(path, config).expect("a pool")
}

/// `bi`'s map: one pool per table and one handle (this process is the writer), a clone
/// of it per thread, as a service shares one handle.
struct BiTable {
    _pool: Pool,
    map: SharedMap<u64, u64>,
}

struct BiHandle(SharedMap<u64, u64>);

impl Collection for BiTable {
    type Handle = BiHandle;
    fn with_capacity(capacity: usize) -> Self {
        let pool = fresh_pool();
        let writer = pool
            .map_with_capacity::<u64, u64>("workload", capacity)
            .expect("the map");
        BiTable {
            _pool: pool,
            map: writer,
        }
    }
    fn pin(&self) -> BiHandle {
        BiHandle(self.map.clone())
    }
}

impl CollectionHandle for BiHandle {
    type Key = u64;
    fn get(&mut self, key: &u64) -> bool {
        self.0.get(key).expect("get").is_some()
    }
    fn insert(&mut self, key: &u64) -> bool {
        self.0.insert(*key, *key).expect("insert").is_none()
    }
    fn remove(&mut self, key: &u64) -> bool {
        self.0.remove(key).expect("remove").is_some()
    }
    fn update(&mut self, key: &u64) -> bool {
        self.0
            .update(*key, |v| v.wrapping_add(1))
            .expect("update")
            .is_some()
    }
}

struct DashTable(Arc<dashmap::DashMap<u64, u64>>);

impl Collection for DashTable {
    type Handle = Self;
    fn with_capacity(capacity: usize) -> Self {
        DashTable(Arc::new(dashmap::DashMap::with_capacity(capacity)))
    }
    fn pin(&self) -> Self {
        DashTable(self.0.clone())
    }
}

impl CollectionHandle for DashTable {
    type Key = u64;
    fn get(&mut self, key: &u64) -> bool {
        self.0.get(key).is_some()
    }
    fn insert(&mut self, key: &u64) -> bool {
        self.0.insert(*key, *key).is_none()
    }
    fn remove(&mut self, key: &u64) -> bool {
        self.0.remove(key).is_some()
    }
    fn update(&mut self, key: &u64) -> bool {
        self.0
            .get_mut(key)
            .map(|mut v| *v = v.wrapping_add(1))
            .is_some()
    }
}

struct PapayaTable(Arc<papaya::HashMap<u64, u64>>);

impl Collection for PapayaTable {
    type Handle = Self;
    fn with_capacity(capacity: usize) -> Self {
        PapayaTable(Arc::new(papaya::HashMap::with_capacity(capacity)))
    }
    fn pin(&self) -> Self {
        PapayaTable(self.0.clone())
    }
}

impl CollectionHandle for PapayaTable {
    type Key = u64;
    fn get(&mut self, key: &u64) -> bool {
        self.0.pin().get(key).is_some()
    }
    fn insert(&mut self, key: &u64) -> bool {
        self.0.pin().insert(*key, *key).is_none()
    }
    fn remove(&mut self, key: &u64) -> bool {
        self.0.pin().remove(key).is_some()
    }
    fn update(&mut self, key: &u64) -> bool {
        self.0.pin().update(*key, |v| v.wrapping_add(1)).is_some()
    }
}

struct LockTable(Arc<RwLock<HashMap<u64, u64>>>);

impl Collection for LockTable {
    type Handle = Self;
    fn with_capacity(capacity: usize) -> Self {
        LockTable(Arc::new(RwLock::new(HashMap::with_capacity(capacity))))
    }
    fn pin(&self) -> Self {
        LockTable(self.0.clone())
    }
}

impl CollectionHandle for LockTable {
    type Key = u64;
    fn get(&mut self, key: &u64) -> bool {
        self.0.read().unwrap().get(key).is_some()
    }
    fn insert(&mut self, key: &u64) -> bool {
        self.0.write().unwrap().insert(*key, *key).is_none()
    }
    fn remove(&mut self, key: &u64) -> bool {
        self.0.write().unwrap().remove(key).is_some()
    }
    fn update(&mut self, key: &u64) -> bool {
        self.0
            .write()
            .unwrap()
            .get_mut(key)
            .map(|v| *v = v.wrapping_add(1))
            .is_some()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Contestant {
    Bi,
    DashMap,
    Papaya,
    RwLockHashMap,
}

const CONTESTANTS: [Contestant; 4] = [
    Contestant::Bi,
    Contestant::DashMap,
    Contestant::Papaya,
    Contestant::RwLockHashMap,
];

impl Contestant {
    fn name(self) -> &'static str {
        match self {
            Contestant::Bi => "bi",
            Contestant::DashMap => "dashmap",
            Contestant::Papaya => "papaya",
            Contestant::RwLockHashMap => "RwLock<HashMap>",
        }
    }

    fn parse(s: &str) -> Option<Contestant> {
        CONTESTANTS.into_iter().find(|c| c.name() == s)
    }

    /// Million operations per second of `workload`.
    fn run(self, workload: &Workload) -> f64 {
        let m = match self {
            Contestant::Bi => workload.run_silently::<BiTable>(),
            Contestant::DashMap => workload.run_silently::<DashTable>(),
            Contestant::Papaya => workload.run_silently::<PapayaTable>(),
            Contestant::RwLockHashMap => workload.run_silently::<LockTable>(),
        };
        m.throughput / 1e6
    }
}

/// The mixes, by name.
fn mixes() -> [(&'static str, Mix); 4] {
    let only = |read, insert, remove| Mix {
        read,
        insert,
        remove,
        update: 0,
        upsert: 0,
    };
    [
        ("read-only", only(100, 0, 0)),
        ("98% reads", only(98, 1, 1)),
        ("read_heavy", Mix::read_heavy()),
        ("uniform", Mix::uniform()),
    ]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if let Ok(what) = std::env::var(MEMORY_VAR) {
        return memory_child(&what);
    }
    let settings = Settings::load(NAME);
    let mut findings = Findings::new(NAME, &settings);
    let quick = kit::quick();
    let period = settings.period_or(PoolConfig::default().pass_period);
    let _ = PLACE.set(PoolPlace {
        dir: tempfile::tempdir().expect("a temporary directory"),
        period,
        made: AtomicUsize::new(0),
    });

    // A profiling aid: `BI_WORKLOADS_ONLY=lookups` (or mixes, load, memory) runs one
    // part and writes no findings.
    let only = std::env::var("BI_WORKLOADS_ONLY").ok();
    let part = |name: &str| only.as_deref().is_none_or(|o| o == name);
    if part("lookups") {
        lookups(quick, &mut findings);
    }
    if part("mixes") {
        mixes_table(quick, &mut findings);
    }
    if part("load") {
        bulk_load(&mut findings);
    }
    if part("memory") {
        memory(&mut findings);
    }
    if only.is_none() {
        common::write(&findings);
    }
}

/// The mixes at 1 and 2 threads, every contestant, interleaved runs.
fn mixes_table(quick: bool, findings: &mut Findings) {
    let rounds = if quick { 1 } else { 3 };
    // Profiling aids: `BI_WORKLOADS_MIX=uniform` runs one mix, `BI_WORKLOADS_WHO=bi` one
    // contestant, `BI_WORKLOADS_THREADS=2` one thread count, `BI_WORKLOADS_OPS=8` eight
    // times the capacity in operations instead of bustle's 0.75 (the table then shows
    // only what ran).
    let one_mix = std::env::var("BI_WORKLOADS_MIX").ok();
    let who = std::env::var("BI_WORKLOADS_WHO").ok();
    let count = std::env::var("BI_WORKLOADS_THREADS").ok();
    let ops: Option<f64> = std::env::var("BI_WORKLOADS_OPS")
        .ok()
        .and_then(|o| o.parse().ok());
    if one_mix.is_some() || who.is_some() || count.is_some() || ops.is_some() {
        for (name, mix) in mixes() {
            if one_mix.as_deref().is_some_and(|m| m != name) {
                continue;
            }
            for threads in [1, 2] {
                if count.as_deref().is_some_and(|n| n != threads.to_string()) {
                    continue;
                }
                let mut w = Workload::new(threads, mix);
                w.initial_capacity_log2(CAPACITY_LOG2)
                    .prefill_fraction(PREFILL);
                if let Some(ops) = ops {
                    w.operations(ops);
                }
                for c in CONTESTANTS {
                    if who
                        .as_deref()
                        .is_some_and(|n| Contestant::parse(n) != Some(c))
                    {
                        continue;
                    }
                    println!(
                        "  {name:<12} {threads:>3}  {:<16} {:>8.2}",
                        c.name(),
                        c.run(&w)
                    );
                }
            }
        }
        return;
    }
    let mut figures: HashMap<(usize, usize, Contestant), Vec<f64>> = HashMap::new();
    for _ in 0..rounds {
        for (m, (_, mix)) in mixes().into_iter().enumerate() {
            for threads in [1, 2] {
                let mut w = Workload::new(threads, mix);
                w.initial_capacity_log2(CAPACITY_LOG2)
                    .prefill_fraction(PREFILL);
                for c in CONTESTANTS {
                    let mops = c.run(&w);
                    figures.entry((m, threads, c)).or_default().push(mops);
                }
            }
        }
    }
    println!(
        "\nbustle mixes, capacity 2^{CAPACITY_LOG2}, {:.0}% prefilled, million operations per second (median of {rounds}):",
        PREFILL * 100.0
    );
    println!(
        "  {:<12} {:>3}  {:>8} {:>8} {:>8} {:>16}  {:>10} {:>10}",
        "mix", "thr", "bi", "dashmap", "papaya", "RwLock<HashMap>", "bi/dashmap", "bi/papaya"
    );
    for (m, (name, _)) in mixes().into_iter().enumerate() {
        for threads in [1, 2] {
            let f = |c| median(figures[&(m, threads, c)].clone());
            let (bi, dash, papaya, lock) = (
                f(Contestant::Bi),
                f(Contestant::DashMap),
                f(Contestant::Papaya),
                f(Contestant::RwLockHashMap),
            );
            println!(
                "  {name:<12} {threads:>3}  {bi:>8.2} {dash:>8.2} {papaya:>8.2} {lock:>16.2}  {:>10.2} {:>10.2}",
                bi / dash,
                bi / papaya
            );
            let target = match name {
                "read-only" => Some(Target::AtLeast(1.0)),
                "98% reads" => Some(Target::AtLeast(0.8)),
                "uniform" => Some(Target::AtLeast(0.3)),
                _ => None,
            };
            findings.ratio(
                format!("bi / papaya operations per second, {name}, {threads} thread(s)"),
                bi / papaya,
                target,
            );
            findings.ratio(
                format!("bi / dashmap operations per second, {name}, {threads} thread(s)"),
                bi / dash,
                None,
            );
        }
    }
}

/// A splitmix64 step: the bench's keys, the same for every contestant.
fn key(i: u64) -> u64 {
    let mut x = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Present keys are `key(0..KEYS)`, absent ones `key(KEYS..2 * KEYS)`.
fn probe(i: u64, absent: bool) -> u64 {
    key((i % KEYS as u64) + if absent { KEYS as u64 } else { 0 })
}

/// One lookup of a present and an absent key, for each contestant; bi's batched
/// lookup per key.
fn lookups(quick: bool, findings: &mut Findings) {
    let pool = fresh_pool();
    let bi = pool
        .map_with_capacity::<u64, u64>("lookups", KEYS)
        .expect("the map");
    bi.extend((0..KEYS as u64).map(|i| (key(i), i)))
        .expect("load");
    let dash = dashmap::DashMap::with_capacity(KEYS);
    let papaya = papaya::HashMap::with_capacity(KEYS);
    let mut lock = HashMap::with_capacity(KEYS);
    {
        let p = papaya.pin();
        for i in 0..KEYS as u64 {
            dash.insert(key(i), i);
            p.insert(key(i), i);
            lock.insert(key(i), i);
        }
    }
    let lock = RwLock::new(lock);
    // A stride through the keys that is not a power of two, so that successive lookups
    // land on unrelated lines.
    const STRIDE: u64 = 7_919;
    let mut c = kit::criterion(quick);
    let mut medians: HashMap<(&str, bool), f64> = HashMap::new();
    for absent in [false, true] {
        let kind = if absent { "absent" } else { "present" };
        let mut g = c.benchmark_group(format!("lookup_{kind}"));
        let mut i = 0u64;
        let mut next = move || {
            i = i.wrapping_add(STRIDE);
            probe(i, absent)
        };
        g.bench_function("bi", |b| {
            b.iter(|| black_box(bi.get(&next()).expect("get")))
        });
        g.bench_function("dashmap", |b| {
            b.iter(|| black_box(dash.get(&next()).map(|v| *v)))
        });
        g.bench_function("papaya", |b| {
            b.iter(|| black_box(papaya.pin().get(&next()).copied()))
        });
        g.bench_function("RwLock<HashMap>", |b| {
            b.iter(|| black_box(lock.read().unwrap().get(&next()).copied()))
        });
        g.finish();
        // The same, timed by hand for the table and the findings.
        let (runs, n) = if quick { (5, 200_000) } else { (11, 1_000_000) };
        let mut time = |name: &'static str, mut one: Box<dyn FnMut(u64) + '_>| {
            let ns = kit::median_ns(runs, n, |n| {
                for i in 0..n {
                    one(probe(i.wrapping_mul(STRIDE), absent));
                }
            });
            medians.insert((name, absent), ns);
        };
        time(
            "bi",
            Box::new(|k| {
                black_box(bi.get(&k).expect("get"));
            }),
        );
        time(
            "dashmap",
            Box::new(|k| {
                black_box(dash.get(&k).map(|v| *v));
            }),
        );
        time(
            "papaya",
            Box::new(|k| {
                black_box(papaya.pin().get(&k).copied());
            }),
        );
        time(
            "RwLock<HashMap>",
            Box::new(|k| {
                black_box(lock.read().unwrap().get(&k).copied());
            }),
        );
    }
    c.final_summary();

    // Batched lookups: 16 keys a call, per key, against a loop of single lookups.
    const BATCH: usize = 16;
    let (runs, n) = if quick { (5, 20_000) } else { (11, 100_000) };
    let batched = kit::median_ns(runs, n, |n| {
        let mut keys = [0u64; BATCH];
        let mut out = Vec::with_capacity(BATCH);
        for i in 0..n {
            for (j, k) in keys.iter_mut().enumerate() {
                *k = probe((i * BATCH as u64 + j as u64).wrapping_mul(STRIDE), false);
            }
            bi.get_many(&keys, &mut out).expect("get_many");
            black_box(&out);
        }
    }) / BATCH as f64;
    let papaya_loop = kit::median_ns(runs, n, |n| {
        let p = papaya.pin();
        for i in 0..n {
            for j in 0..BATCH as u64 {
                let k = probe((i * BATCH as u64 + j).wrapping_mul(STRIDE), false);
                black_box(p.get(&k).copied());
            }
        }
    }) / BATCH as f64;

    println!("\none lookup at {KEYS} keys, one thread, ns (median of {runs} runs of {n}):");
    println!("  {:<16} {:>8} {:>8}", "contestant", "present", "absent");
    for c in CONTESTANTS {
        println!(
            "  {:<16} {:>8.1} {:>8.1}",
            c.name(),
            medians[&(c.name(), false)],
            medians[&(c.name(), true)]
        );
    }
    let (bi_hit, bi_miss) = (medians[&("bi", false)], medians[&("bi", true)]);
    let papaya_hit = medians[&("papaya", false)];
    println!(
        "  bi absent / bi present           {:.2}  (target <= 1.50)",
        bi_miss / bi_hit
    );
    println!(
        "  bi present / papaya present      {:.2}  (target <= 1.00)",
        bi_hit / papaya_hit
    );
    println!(
        "  bi get_many, per key             {batched:.1} ns: {:.2}x faster than bi's get, {:.2}x than papaya's loop (target >= 2 each)",
        bi_hit / batched,
        papaya_loop / batched
    );
    findings.ratio(
        "bi absent-key lookup / present-key lookup",
        bi_miss / bi_hit,
        Some(Target::AtMost(1.5)),
    );
    findings.ratio(
        "bi present-key lookup / papaya's",
        bi_hit / papaya_hit,
        Some(Target::AtMost(1.0)),
    );
    findings.ratio(
        "bi get loop / get_many, per key",
        bi_hit / batched,
        Some(Target::AtLeast(2.0)),
    );
    findings.ratio(
        "papaya get loop / bi get_many, per key",
        papaya_loop / batched,
        Some(Target::AtLeast(2.0)),
    );
}

/// Loading 2^20 keys into an empty map: bi through `extend`, papaya through a loop of
/// inserts under one guard.
fn bulk_load(findings: &mut Findings) {
    let n = 1u64 << CAPACITY_LOG2;
    let pool = fresh_pool();
    let bi = pool.map::<u64, u64>("load").expect("the map");
    let start = Instant::now();
    bi.extend((0..n).map(|i| (key(i), i))).expect("load");
    let bi_s = start.elapsed().as_secs_f64();
    let papaya = papaya::HashMap::new();
    let start = Instant::now();
    {
        let p = papaya.pin();
        for i in 0..n {
            p.insert(key(i), i);
        }
    }
    let papaya_s = start.elapsed().as_secs_f64();
    black_box(&papaya);
    println!(
        "\nloading {n} keys into an empty map: bi {bi_s:.3} s, papaya {papaya_s:.3} s, ratio {:.2}  (target <= 2.00)",
        bi_s / papaya_s
    );
    findings.ratio(
        format!("bi / papaya, loading {n} keys"),
        bi_s / papaya_s,
        Some(Target::AtMost(2.0)),
    );
}

/// Bytes of memory per entry for each contestant, each measured in a child process.
fn memory(findings: &mut Findings) {
    println!("\nmemory per entry, {KEYS} entries, resident-set growth / entries, bytes:");
    println!(
        "  {:<16} {:>10} {:>16}",
        "contestant", "u64 -> u64", "String -> String"
    );
    let mut per: HashMap<(Contestant, &str), f64> = HashMap::new();
    for c in CONTESTANTS {
        for kind in ["u64", "string"] {
            per.insert((c, kind), child_bytes(c, kind));
        }
        println!(
            "  {:<16} {:>10.1} {:>16.1}",
            c.name(),
            per[&(c, "u64")],
            per[&(c, "string")]
        );
    }
    for (kind, what) in [("u64", "u64 -> u64"), ("string", "String -> String")] {
        let r = per[&(Contestant::Bi, kind)] / per[&(Contestant::Papaya, kind)];
        println!("  bi / papaya, {what:<18} {r:.2}  (target <= 1.50)");
        findings.ratio(
            format!("bi / papaya memory per entry, {what}"),
            r,
            Some(Target::AtMost(1.5)),
        );
    }
}

/// Runs this binary as a child that loads `c`'s map with `kind` entries and prints its
/// bytes per entry.
fn child_bytes(c: Contestant, kind: &str) -> f64 {
    let out = std::process::Command::new(std::env::current_exe().expect("this bench"))
        .env(MEMORY_VAR, format!("{}:{kind}", c.name()))
        .output()
        .expect("a child process");
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim().parse().unwrap_or_else(|_| {
        panic!(
            "the memory child of {} ({kind}) printed {text:?}: {}",
            c.name(),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The resident set of this process, in bytes.
fn resident() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as f64
}

/// A 20-byte key and a 100-byte value for entry `i`.
fn strings(i: u64) -> (String, String) {
    (
        format!("{:020}", key(i) % 10u64.pow(19)),
        format!("{i:0100}"),
    )
}

/// The child: loads `KEYS` entries into one contestant's map and prints bytes per entry.
fn memory_child(what: &str) {
    let (name, kind) = what.split_once(':').expect("contestant:kind");
    let c = Contestant::parse(name).expect("a contestant");
    let strings_too = kind == "string";
    let before = resident();
    let n = KEYS as u64;
    // Each arm keeps its map alive until the resident set is read.
    let after = match (c, strings_too) {
        (Contestant::Bi, false) => {
            let pool = fresh_pool();
            let m = pool.map::<u64, u64>("m").expect("map");
            m.extend((0..n).map(|i| (key(i), i))).expect("load");
            resident()
        }
        (Contestant::Bi, true) => {
            let pool = fresh_pool();
            let m = pool.map::<String, String>("m").expect("map");
            m.extend((0..n).map(strings)).expect("load");
            resident()
        }
        (Contestant::DashMap, false) => keep(fill(dashmap::DashMap::new(), n, |m, i| {
            m.insert(key(i), i);
        })),
        (Contestant::DashMap, true) => keep(fill(dashmap::DashMap::new(), n, |m, i| {
            let (k, v) = strings(i);
            m.insert(k, v);
        })),
        (Contestant::Papaya, false) => keep(fill(papaya::HashMap::new(), n, |m, i| {
            m.pin().insert(key(i), i);
        })),
        (Contestant::Papaya, true) => keep(fill(papaya::HashMap::new(), n, |m, i| {
            let (k, v) = strings(i);
            m.pin().insert(k, v);
        })),
        (Contestant::RwLockHashMap, false) => keep(fill(RwLock::new(HashMap::new()), n, |m, i| {
            m.write().unwrap().insert(key(i), i);
        })),
        (Contestant::RwLockHashMap, true) => keep(fill(RwLock::new(HashMap::new()), n, |m, i| {
            let (k, v) = strings(i);
            m.write().unwrap().insert(k, v);
        })),
    };
    println!("{}", (after - before) / n as f64);
}

fn fill<T>(map: T, n: u64, mut put: impl FnMut(&T, u64)) -> T {
    for i in 0..n {
        put(&map, i);
    }
    map
}

/// The resident set with `map` still alive.
fn keep<T>(map: T) -> f64 {
    let r = resident();
    black_box(&map);
    r
}
