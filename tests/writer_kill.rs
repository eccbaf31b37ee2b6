//! The writer process of a shared map is killed with SIGKILL at random points of its
//! workload, 50 times in a row, and restarted each time; a reader in another process
//! (this one, as another node) reads throughout.
//!
//! After every kill: every write the killed writer acknowledged (printed after `insert`
//! returned) is in the map, as the reader sees it, and the reader never got an error.
//! At the end, the last writer's heap holds the map and nothing else once a grace period
//! has passed: memory retired or leaked across all restarts is given back (bound: the
//! live bytes are at most 64 bytes per key plus 256 KiB for the bucket array's slack).
//!
//! The child is this test binary again, selected by an environment variable and an exact
//! test-name filter. Miri can neither map files nor spawn processes.
//!
//! With `BI_EMULATE=<seed>` every process runs its node over the non-coherence emulator
//! ([`bi::Emulation`]): a killed writer then loses whatever its emulated cache had not
//! written back, as a dead host would, and this process reports its oracle's counts and
//! checks that no write-back overwrote newer bytes.

use bi::core::mem::MemView;
use bi::{Emulation, Pool, PoolConfig};
use rand::Rng;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod common;

const CHILD_ENV: &str = "BI_WRITER_KILL_CHILD";
const START_ENV: &str = "BI_WRITER_KILL_START";
const FINAL_ENV: &str = "BI_WRITER_KILL_FINAL";
const CHILD_TEST: &str = "writer_child_process";
const WRITER_NODE: usize = 1;
const KILLS: usize = 50;
/// Node and reader lease: long enough that a busy test machine never stalls a live
/// process past it (a live node taken for dead has its readers' memory reclaimed, and its
/// structures adopted while it still writes them).
const LEASE: Duration = Duration::from_millis(150);

fn config(node: usize) -> PoolConfig {
    common::pool_config(2, node, LEASE)
}

/// Opens a pool on the hardware, or over the emulator when `BI_EMULATE` asks, and runs
/// `then` with it.
macro_rules! with_pool {
    (|$open:ident| $then:expr) => {
        match Emulation::from_env().expect("BI_EMULATE") {
            Some(e) => {
                let $open = |p: &Path, c| Pool::open_emulated(p, c, e.machine());
                $then
            }
            None => {
                let $open = |p: &Path, c| Pool::open_or_create(p, c);
                $then
            }
        }
    };
}

/// Opens the pool as the writer's node, waiting for a killed predecessor's claim to lapse.
fn open_writer_pool<M: MemView + 'static>(
    path: &Path,
    open: impl Fn(&Path, PoolConfig) -> Result<Pool<M>, bi::Error>,
) -> Pool<M> {
    common::open_when_free(|| open(path, config(WRITER_NODE)))
}

/// The writer process: adopts the map, inserts `k -> k` from the start key on, printing
/// `ack k` after each insert returned, until killed (or, as the final writer, reports
/// its heap once the grace period for what the dead writers left has passed).
#[test]
fn writer_child_process() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return; // not the child
    };
    with_pool!(|open| writer(open_writer_pool(Path::new(&path), open)));
}

fn writer<M: MemView + 'static>(pool: Pool<M>) {
    let mut w = pool.map_writer::<u64, u64>("kills").expect("adopt the map");
    println!("adopted {}", w.len());
    if std::env::var(FINAL_ENV).is_ok() {
        // Wait for the grace, then give back everything that passed it.
        std::thread::sleep(LEASE * 4);
        w.reclaim().expect("reclaim");
        std::thread::sleep(LEASE * 4);
        w.reclaim().expect("reclaim");
        let live = bi::core::heap::Heap::stats(w.writer().heap()).live;
        println!("final keys={} live={live}", w.len());
        return;
    }
    let start: u64 = std::env::var(START_ENV).unwrap().parse().unwrap();
    // A steady pace, so the parent's kills land at varied points of an insert, and the
    // map stays small.
    for k in start.. {
        w.insert(k, k).expect("insert");
        println!("ack {k}");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Starts a writer process; its standard error goes to a file next to the region.
fn spawn(path: &Path, start: u64, last: bool) -> std::process::Child {
    let err = std::fs::File::create(path.with_extension("stderr")).unwrap();
    let mut cmd = common::child(CHILD_TEST);
    cmd.env(CHILD_ENV, path)
        .env(START_ENV, start.to_string())
        .stdout(Stdio::piped())
        .stderr(err);
    if last {
        cmd.env(FINAL_ENV, "1");
    }
    cmd.spawn().expect("spawn the writer")
}

#[test]
#[cfg_attr(miri, ignore)]
fn fifty_writer_kills_lose_no_acknowledged_write() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("kills.bi");
    match Emulation::from_env().expect("BI_EMULATE") {
        None => drop(kill_and_check(
            &path,
            Pool::open_or_create(&path, config(0)).unwrap(),
        )),
        Some(e) => {
            let pool = Pool::open_emulated(&path, config(0), e.machine()).unwrap();
            let stats = kill_and_check(&path, pool).emulator_stats();
            eprintln!(
                "oracle (reader node): loads={} stale_reads={} max_staleness_ns={} \
                 reuse_hazards={} lost_writes={}",
                stats.loads,
                stats.stale_reads,
                stats.max_staleness,
                stats.reuse_hazards,
                stats.lost_writes
            );
            assert!(stats.loads > 0, "the reader read through the emulator");
            assert!(
                stats.stale_reads > 0,
                "the reader saw the writers only through write-backs"
            );
            assert_eq!(stats.lost_writes, 0, "a write-back overwrote newer bytes");
            assert_eq!(
                stats.reuse_hazards, 0,
                "a load returned bytes of reused memory"
            );
        }
    }
}

/// Runs the kills with `reader_pool` as the reading node; returns its pool (the emulated
/// one's counts are read after the last writer).
fn kill_and_check<M: MemView + 'static>(path: &Path, reader_pool: Pool<M>) -> Pool<M> {
    let reader = reader_pool.map_reader::<u64, u64>("kills").unwrap();
    // Keys below this were acknowledged; the reader thread checks them continuously.
    let acked = AtomicU64::new(0);
    let (errors, stop) = (AtomicU64::new(0), AtomicBool::new(false));
    let mut rng = bi_kit::rng(0, "kill times");
    let mut next = 0u64;
    /// Stops the reader thread however the main thread leaves the scope (a failed check
    /// included), so the scope can end.
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|scope| {
        let _stop = StopOnDrop(&stop);
        scope.spawn(|| {
            let reader = reader_pool.map_reader::<u64, u64>("kills").unwrap();
            let mut probe = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let n = acked.load(Ordering::Acquire);
                if n > 0 {
                    probe = (probe + 7919) % n;
                    if reader.get(&probe).is_err() {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                std::thread::yield_now();
            }
        });
        for kill in 0..KILLS {
            let mut child = spawn(path, next, false);
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            let adopted = lines.by_ref().find_map(|l| {
                let l = l.ok()?;
                // (libtest prints the test's name on the same line, before it.)
                let (_, n) = l.split_once("adopted ")?;
                Some(n.trim().parse::<u64>().unwrap())
            });
            let Some(adopted) = adopted else {
                let err = std::fs::read_to_string(path.with_extension("stderr")).unwrap();
                panic!("restart {kill}: the writer did not start:\n{err}");
            };
            assert!(adopted >= next, "restart {kill}: the adopted map lost keys");
            // Let it write for a random while, then kill it wherever it is.
            let deadline = Instant::now() + Duration::from_millis(rng.random_range(5..40));
            let mut last = None;
            for l in lines.by_ref() {
                if let Some(k) = l.unwrap().strip_prefix("ack ") {
                    last = Some(k.parse::<u64>().unwrap());
                }
                if Instant::now() > deadline {
                    break;
                }
            }
            child.kill().unwrap();
            // Acknowledgements already printed still count.
            for l in lines.map_while(Result::ok) {
                if let Some(k) = l.strip_prefix("ack ") {
                    last = Some(k.parse::<u64>().unwrap());
                }
            }
            child.wait().unwrap();
            if let Some(k) = last {
                next = next.max(k + 1);
            }
            acked.store(next, Ordering::Release);
            // Every acknowledged key is visible to the reader (within the staleness bound).
            let by = Instant::now() + Duration::from_secs(5);
            for k in 0..next {
                while reader.get(&k).unwrap() != Some(k) {
                    assert!(
                        Instant::now() < by,
                        "restart {kill}: key {k} acknowledged but lost"
                    );
                    std::thread::yield_now();
                }
            }
        }
    });
    assert_eq!(errors.load(Ordering::Relaxed), 0, "the reader got errors");
    assert!(
        next > KILLS as u64,
        "the writers wrote too little: {next} keys"
    );

    // A last writer adopts and reports its heap after the grace period.
    let child = spawn(path, next, true);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("final"))
        .expect("final report");
    let field = |name: &str| -> usize {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .unwrap()
            .parse()
            .unwrap()
    };
    let (keys, live) = (field("keys"), field("live"));
    assert!(keys as u64 >= next);
    assert!(
        live <= keys * 64 + (256 << 10),
        "live {live} bytes for {keys} keys after {KILLS} kills"
    );
    reader_pool
}
