//! What a write through a shared handle costs: the writer process's own insert against
//! a synchronous insert from another node's handle, which travels to the writer's
//! serving thread and back with the old value (issue target: remote <= 3x local).
//!
//! Pools of one region file (nodes of this process, on the hardware view): in a temporary
//! directory, or where `BI_REGION` says (on a machine without coherence between nodes,
//! the shared memory). Each node's threads run on its `BI_PIN` CPUs: the measuring
//! thread moves to the node whose handle it calls, and the writer's serving thread and
//! every pool's background pass (every `BI_PERIOD`) start on their node's CPUs. Keys
//! cycle over 4,096, so every insert after the first lap replaces a value. Reported:
//! the plain write handle's `insert` (`MapWriteHandle`, on a third node), the writer's
//! shared handle (the same insert behind the lock its serving thread shares) and the
//! remote handle; then the same for `String -> String` with 35-byte keys and 100-byte
//! values, which cross in the remote node's parcel area. `BI_BENCH_QUICK=1` (or `-- --quick`) shortens the run. After
//! criterion's groups it prints a table of median ns per insert and the ratios, measured
//! in the same run, and writes them as findings.

mod common;

use bi_kit::bench::{self as kit, Findings, Settings, Target};

use bi::{Pool, PoolConfig};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

const NAME: &str = "shared_writes";
const KEYS: u64 = 4096;

fn main() {
    let settings = Settings::load(NAME);
    // Before pinning: the findings name the CPUs the machine gives this process.
    let mut findings = Findings::new(NAME, &settings);
    let quick = kit::quick();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = match settings.region_file(NAME) {
        Some(path) => {
            // A fresh region there, which the pools then open.
            common::region(&settings, NAME, PoolConfig::default().region);
            path
        }
        None => dir.path().join("shared_writes.bi"),
    };
    let pin = |node| common::pin(&settings, NAME, node);
    let [writer_pool, remote_pool, plain_pool] = pools(&settings, &path, 0);
    pin(0); // the writer's serving thread starts on its node's CPUs
    let local = writer_pool
        .map::<u64, u64>("shared")
        .expect("writer handle");
    let remote = remote_pool
        .map::<u64, u64>("shared")
        .expect("remote handle");
    let mut plain = plain_pool
        .map_writer::<u64, u64>("plain")
        .expect("plain writer");
    assert!(local.is_writer() && !remote.is_writer());

    let mut c = kit::criterion(quick);
    {
        let mut g = c.benchmark_group("shared_insert");
        let mut i = 0u64;
        g.bench_function("plain_write_handle", |b| {
            pin(2);
            b.iter(|| {
                i += 1;
                black_box(plain.insert(i % KEYS, i).expect("insert"))
            })
        });
        g.bench_function("writer_shared_handle", |b| {
            pin(0);
            b.iter(|| {
                i += 1;
                black_box(local.insert(i % KEYS, i).expect("insert"))
            })
        });
        g.bench_function("remote_shared_handle", |b| {
            pin(1);
            b.iter(|| {
                i += 1;
                black_box(remote.insert(i % KEYS, i).expect("insert"))
            })
        });
        g.finish();
    }
    c.final_summary();

    let (runs, n) = if quick { (5, 20_000) } else { (11, 100_000) };
    pin(2);
    let p = kit::median_ns(runs, n, |n| {
        for i in 0..n {
            black_box(plain.insert(i % KEYS, i).expect("insert"));
        }
    });
    pin(0);
    let l = kit::median_ns(runs, n, |n| {
        for i in 0..n {
            black_box(local.insert(i % KEYS, i).expect("insert"));
        }
    });
    pin(1);
    let r = kit::median_ns(runs, n, |n| {
        for i in 0..n {
            black_box(remote.insert(i % KEYS, i).expect("insert"));
        }
    });
    println!("synchronous insert, ns (median of {runs} runs of {n}), {KEYS} keys");
    println!("  plain write handle (writer's node)   {p:8.0}");
    println!("  writer's shared handle               {l:8.0}");
    println!("  remote shared handle (another node)  {r:8.0}");
    println!(
        "  ratio remote / plain local insert    {:.2}  (target <= 3.00)",
        r / p
    );
    println!("  ratio remote / writer's shared       {:.2}", r / l);
    let strings = strings(&settings, &path, runs, n / 4);
    pin(1);
    let latency = latencies(&remote, quick);
    latency.print();

    findings.ratio(
        "remote synchronous insert / local insert",
        r / p,
        Some(Target::AtMost(3.0)),
    );
    findings.ratio(
        "remote synchronous insert / writer's shared-handle insert",
        r / l,
        None,
    );
    findings.ratio(
        "remote synchronous insert / local insert, 35-byte string keys, 100-byte values",
        strings,
        None,
    );
    latency.record(&mut findings);
    common::write(&findings);
}

/// One remote insert at a time, timed one by one: back to back, then one every 2 ms
/// (the serving thread has gone idle in between), and what the serving thread cost
/// while idle.
struct Latencies {
    back_to_back: (f64, f64, usize),
    paced: (f64, f64, usize),
    /// The serving thread's share of a core while warm and once cold.
    idle_cpu: Option<(f64, f64)>,
}

/// Remote insert latencies through `remote`: p50 and p99 in microseconds, back to back
/// and paced; and the serving thread's share of a core over a second without requests.
fn latencies(remote: &bi::SharedMap<u64, u64>, quick: bool) -> Latencies {
    let (n, paced_n) = if quick {
        (20_000, 500)
    } else {
        (100_000, 2_500)
    };
    let timed = |n: u64, gap: Option<Duration>| {
        let mut us = Vec::with_capacity(n as usize);
        let mut next = Instant::now();
        for i in 0..n {
            if let Some(gap) = gap {
                next += gap;
                if let Some(wait) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
            }
            let start = Instant::now();
            black_box(remote.insert(i % KEYS, i).expect("insert"));
            us.push(start.elapsed().as_secs_f64() * 1e6);
        }
        us.sort_by(f64::total_cmp);
        let at = |q: f64| us[((us.len() - 1) as f64 * q).round() as usize];
        (at(0.5), at(0.99), us.len())
    };
    let back_to_back = timed(n, None);
    let paced = timed(paced_n, Some(Duration::from_millis(2)));
    // The serving thread's share of a core over `span` from now.
    let share = |span: Duration| {
        let before = serving_cpu_ns()?;
        let start = Instant::now();
        std::thread::sleep(span);
        let after = serving_cpu_ns()?;
        Some(after.saturating_sub(before) as f64 / start.elapsed().as_nanos() as f64)
    };
    // Warm: within the first 100 ms after a request (less the spin and yields); cold:
    // long after.
    black_box(remote.insert(0, 0).expect("insert"));
    std::thread::sleep(Duration::from_millis(5));
    let warm = share(Duration::from_millis(80));
    std::thread::sleep(Duration::from_millis(200));
    let cold = share(Duration::from_secs(1));
    let idle_cpu = warm.zip(cold);
    Latencies {
        back_to_back,
        paced,
        idle_cpu,
    }
}

impl Latencies {
    fn print(&self) {
        let (b50, b99, bn) = self.back_to_back;
        let (p50, p99, pn) = self.paced;
        println!("remote insert latency, us (one at a time)");
        println!("  back to back ({bn})        p50 {b50:7.1}  p99 {b99:7.1}  (targets 3 / 30)");
        println!("  one every 2 ms ({pn})      p50 {p50:7.1}  p99 {p99:7.1}  (targets 20 / 200)");
        match self.idle_cpu {
            Some((warm, cold)) => println!(
                "  serving thread while idle: {:.1}% of a core warm (within 100 ms of a request), {:.2}% cold",
                warm * 100.0,
                cold * 100.0
            ),
            None => println!("  serving thread while idle: not measured (no /proc)"),
        }
    }

    fn record(&self, findings: &mut Findings) {
        let (b50, b99, _) = self.back_to_back;
        let (p50, p99, _) = self.paced;
        let at_most = |t| Some(Target::AtMost(t));
        findings.ratio("remote insert p50, back to back, us", b50, at_most(3.0));
        findings.ratio("remote insert p99, back to back, us", b99, at_most(30.0));
        findings.ratio("remote insert p50, one every 2 ms, us", p50, at_most(20.0));
        findings.ratio("remote insert p99, one every 2 ms, us", p99, at_most(200.0));
        if let Some((warm, cold)) = self.idle_cpu {
            findings.ratio(
                "serving thread's share of a core, idle and warm",
                warm,
                None,
            );
            findings.ratio(
                "serving thread's share of a core, idle and cold",
                cold,
                None,
            );
        }
    }
}

/// CPU time of the map's serving thread (named `bi-serve-shared`), from the kernel's
/// scheduler statistics; `None` where there are none.
fn serving_cpu_ns() -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == "bi-serve-shared" {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            return stat.split_whitespace().next()?.parse().ok();
        }
    }
    None
}

/// Three pools of the region file at `path`, running nodes `first`, `first + 1` and
/// `first + 2`: the writer's, a remote's and a plain writer's (a node has one writer).
/// Each is opened on its node's CPUs (so its background pass runs there) and its
/// mapping bound to `BI_MEMBIND`'s NUMA nodes.
fn pools(settings: &Settings, path: &Path, first: usize) -> [Pool; 3] {
    let period = settings.period_or(PoolConfig::default().pass_period);
    [0, 1, 2].map(|i| {
        let node = first + i;
        common::pin(settings, NAME, node);
        let config = PoolConfig {
            node: Some(node),
            pass_period: period,
            ..PoolConfig::default()
        };
        let pool = Pool::open_or_create(path, config).expect("a pool of the bench's region");
        common::bind(settings, NAME, pool.region().backing());
        pool
    })
}

/// The same comparison for string keys and values longer than their 16-byte words: the
/// ratio remote / plain local insert.
fn strings(settings: &Settings, path: &Path, runs: usize, n: u64) -> f64 {
    let [writer_pool, remote_pool, plain_pool] = pools(settings, path, 3);
    let pin = |node| common::pin(settings, NAME, node);
    pin(3); // the writer's serving thread starts on its node's CPUs
    let shared = writer_pool.map::<String, String>("strings");
    let _local = shared.expect("string writer handle");
    let remote = remote_pool
        .map::<String, String>("strings")
        .expect("string remote handle");
    let mut plain = plain_pool
        .map_writer::<String, String>("plain strings")
        .expect("plain string writer");
    let keys: Vec<String> = (0..KEYS).map(|k| format!("customer-{k:026}")).collect();
    let value = "v".repeat(100);
    let key = |i: u64| keys[(i % KEYS) as usize].clone();
    pin(5);
    let p = kit::median_ns(runs, n, |n| {
        for i in 0..n {
            black_box(plain.insert(key(i), value.clone()).expect("insert"));
        }
    });
    pin(4);
    let r = kit::median_ns(runs, n, |n| {
        for i in 0..n {
            black_box(remote.insert(key(i), value.clone()).expect("insert"));
        }
    });
    println!(
        "synchronous insert of 35-byte keys and 100-byte values, ns (median of {runs} runs of {n})"
    );
    println!("  plain write handle (writer's node)   {p:8.0}");
    println!("  remote shared handle (another node)  {r:8.0}");
    println!("  ratio remote / plain local insert    {:.2}", r / p);
    r / p
}
