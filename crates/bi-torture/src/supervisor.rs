//! The supervisor: starts the workers, injects the seeded faults, keeps the record of
//! every process's life and of every fault, samples memory, and at the end reads the map
//! as a fresh process and checks it.

use crate::check::{self, Bounds, FaultWindow, Final, Life, Verdict};
use crate::journal::{self, now};
use crate::worker::MAP;
use bi::core::mem::MemView;
use bi::inspect::PoolReport;
use bi::{Emulation, Pool, PoolConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What the run is asked to do.
pub struct Plan {
    pub seconds: u64,
    pub seed: u64,
    pub workers: u32,
    /// Joined readers (each joins the node of a running process; on the hardware only).
    pub joiners: u32,
    pub dir: PathBuf,
    pub pace: Duration,
    /// The faults to draw from (a run that looks for one defect narrows it).
    pub faults: Vec<Fault>,
    /// The pool every process opens.
    pub config: PoolConfig,
}

/// The faults the schedule draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, clap::ValueEnum)]
pub enum Fault {
    /// SIGKILL of a worker, restarted at once.
    Kill,
    /// SIGKILL of the process holding the map's writer role, restarted at once.
    KillWriter,
    /// SIGSTOP of a worker for a while (shorter or longer than a lease), then SIGCONT.
    Stop,
    /// The same for the writer.
    StopWriter,
    /// A process fills the pool until it refuses, holds it full, then frees it.
    Fill,
    /// Three processes open a pool that does not exist yet, at once.
    RaceOpen,
}

/// Every fault.
pub const FAULTS: [Fault; 6] = [
    Fault::Kill,
    Fault::KillWriter,
    Fault::Stop,
    Fault::StopWriter,
    Fault::Fill,
    Fault::RaceOpen,
];

/// What the run prints as JSON.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub seed: u64,
    pub seconds: f64,
    pub emulated: bool,
    pub workers: u32,
    pub faults: BTreeMap<String, u64>,
    pub longest_stop_ms: f64,
    /// Every fault, in order: what, which process, from when to when (ns).
    pub fault_log: Vec<FaultWindow>,
    pub bounds: Bounds,
    pub max_worker_rss_mib: f64,
    /// Extents of the pool granted to structures at the end (of `heap.extents`).
    pub pool_extents_granted: usize,
    /// The files of stacks taken while a write outlasted its bound (`stall`).
    pub stall_stacks: Vec<PathBuf>,
    pub verdict: Verdict,
}

/// A running worker or joined reader.
struct Running {
    kind: Kind,
    /// Which of its kind (a worker's keys carry it).
    index: u32,
    incarnation: u32,
    child: Child,
    life: usize,
}

/// What a restarted process is again.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Worker,
    Joiner,
}

struct Supervisor {
    plan: Plan,
    exe: PathBuf,
    pool: PathBuf,
    lives: Vec<Life>,
    journals: Vec<PathBuf>,
    faults: Vec<FaultWindow>,
    counts: BTreeMap<String, u64>,
    running: Vec<Running>,
    longest_stop: Duration,
    max_rss: u64,
    extra: u32,
}

/// Runs the plan and checks it.
pub fn run(plan: Plan) -> std::io::Result<Summary> {
    let _dir = take_dir(&plan.dir)?;
    let pool = plan.dir.join("torture.bi");
    let mut s = Supervisor {
        exe: std::env::current_exe()?,
        pool,
        lives: Vec::new(),
        journals: Vec::new(),
        faults: Vec::new(),
        counts: BTreeMap::new(),
        running: Vec::new(),
        longest_stop: Duration::ZERO,
        max_rss: 0,
        extra: 0,
        plan,
    };
    let started = Instant::now();
    // Every worker starts at once on a pool that does not exist yet.
    for worker in 0..s.plan.workers {
        s.spawn(Kind::Worker, worker, 0)?;
    }
    for joiner in 0..s.plan.joiners {
        s.spawn(Kind::Joiner, joiner, 0)?;
    }
    let mut rng = SmallRng::seed_from_u64(s.plan.seed);
    let lease = Duration::from_nanos(s.plan.config.runtime.node_lease_ticks());
    let end = Duration::from_secs(s.plan.seconds);
    while started.elapsed() < end {
        s.sleep_sampling(Duration::from_millis(rng.random_range(100..800)));
        s.restart_exited()?;
        let fault = s.plan.faults[rng.random_range(0..s.plan.faults.len())];
        *s.counts.entry(format!("{fault:?}")).or_default() += 1;
        let start = now();
        let mut target = None;
        let mut writer = false;
        match fault {
            Fault::Kill | Fault::KillWriter => {
                let at = match fault {
                    Fault::Kill => Some(rng.random_range(0..s.running.len())),
                    _ => s.writer(),
                };
                if let Some(at) = at {
                    target = Some(s.lives[s.running[at].life].name.clone());
                    writer = s.writer() == Some(at);
                    s.kill_and_restart(at)?;
                }
            }
            Fault::Stop | Fault::StopWriter => {
                let at = match fault {
                    Fault::Stop => Some(rng.random_range(0..s.running.len())),
                    _ => s.writer(),
                };
                // Half the stops end inside a lease, half past it.
                let length = lease.mul_f64(rng.random_range(0.05..2.5));
                if let Some(at) = at {
                    target = Some(s.lives[s.running[at].life].name.clone());
                    writer = s.writer() == Some(at);
                    s.stop_for(at, length);
                }
            }
            Fault::Fill => s.fill(lease)?,
            Fault::RaceOpen => s.race()?,
        }
        s.faults.push(FaultWindow {
            kind: format!("{fault:?}"),
            target,
            writer,
            start,
            end: now(),
        });
    }
    let seconds = started.elapsed().as_secs_f64();
    // Let the last fault settle, then end every worker: all killed first, then reaped.
    // A client's write in flight when the writer's process goes first fails for that;
    // the end of the run is a window of its own, so no check counts it against a
    // quiet time.
    s.sleep_sampling(lease * 2);
    let ending = now();
    for r in &mut s.running {
        let _ = r.child.kill();
    }
    for r in &mut s.running {
        let _ = r.child.wait();
        s.lives[r.life].ended = Some(now());
    }
    s.faults.push(FaultWindow {
        kind: "EndOfRun".into(),
        target: None,
        writer: true,
        start: ending,
        end: now(),
    });
    for (life, journal) in s.lives.iter_mut().zip(&s.journals) {
        life.events = journal::read(journal).unwrap_or_default();
    }
    let emulated = Emulation::from_env().ok().flatten().is_some();
    let bounds = Bounds::of(&s.plan.config, emulated);
    let report = PoolReport::read(&s.pool).ok();
    let mut verdict = final_check(&s, bounds)?;
    if s.max_rss > WORKER_RSS_BOUND {
        verdict.violations.push(format!(
            "a worker's resident memory reached {} MiB (bound {} MiB)",
            s.max_rss >> 20,
            WORKER_RSS_BOUND >> 20
        ));
    }
    Ok(Summary {
        seed: s.plan.seed,
        seconds,
        emulated,
        workers: s.plan.workers,
        faults: s.counts.clone(),
        longest_stop_ms: s.longest_stop.as_secs_f64() * 1e3,
        fault_log: s.faults.clone(),
        bounds,
        max_worker_rss_mib: s.max_rss as f64 / (1 << 20) as f64,
        pool_extents_granted: report.map_or(0, |r| r.heap.granted),
        stall_stacks: stall_files(&s.plan.dir),
        verdict,
    })
}

/// The stack files the workers wrote into `dir`, in name order.
fn stall_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("stall-"))
        })
        .collect();
    files.sort();
    files
}

/// Opens the pool as a fresh process (on the hardware or over the emulator, as the
/// workers did) and checks the journals against what it reads.
fn final_check(s: &Supervisor, bounds: Bounds) -> std::io::Result<Verdict> {
    let io = |e: bi::Error| std::io::Error::other(e.to_string());
    match Emulation::from_env().map_err(io)? {
        Some(e) => {
            let pool =
                Pool::open_emulated(&s.pool, s.plan.config.clone(), e.machine()).map_err(io)?;
            verdict_from(s, bounds, pool)
        }
        None => {
            let pool = Pool::open(&s.pool, s.plan.config.clone()).map_err(io)?;
            verdict_from(s, bounds, pool)
        }
    }
}

fn verdict_from<M: MemView + 'static>(
    s: &Supervisor,
    bounds: Bounds,
    pool: Pool<M>,
) -> std::io::Result<Verdict> {
    struct Read<M: MemView + 'static>(bi::SharedMap<u64, String, M>);
    impl<M: MemView + 'static> Final for Read<M> {
        fn value(&self, key: u64) -> Result<Option<String>, String> {
            self.0.get_fresh(&key).map_err(|e| e.to_string())
        }
    }
    /// A map the final process could not open: every key's read fails with why.
    struct Unopened(String);
    impl Final for Unopened {
        fn value(&self, _: u64) -> Result<Option<String>, String> {
            Err(self.0.clone())
        }
    }
    match pool.map::<u64, String>(MAP) {
        Ok(map) => {
            let mut v = check::check(&s.lives, &s.faults, bounds, &Read(map.clone()));
            room_left(&map, &mut v);
            Ok(v)
        }
        // Still a verdict, with everything the journals show, and one violation for the
        // keys nobody could read.
        Err(e) => {
            let why = format!("the final process could not open the map: {e}");
            let mut v = check::check(&s.lives, &s.faults, bounds, &Unopened(why.clone()));
            let before = v.violations.len();
            v.violations.retain(|m| !m.starts_with("the final read of"));
            let unread = before - v.violations.len();
            v.violations
                .push(format!("{why} ({unread} keys unchecked)"));
            Ok(v)
        }
    }
}

/// How much resident memory a process of the run may use: it maps the 32 MiB pool,
/// keeps at most its share of keys, and makes a value of the pool's size for its
/// oversized writes (a write copies it once more); a process whose memory grows with the
/// writes it made (a leak, a heap left bloated by freed memory) passes it within the hour.
pub const WORKER_RSS_BOUND: u64 = 512 << 20;

/// How much the pool must still take at the end, once every fill is over: a pool whose
/// memory leaked (retired objects never given back, extents lost) refuses it.
pub const ROOM_AT_END: usize = 8 << 20;

/// Writes [`ROOM_AT_END`] bytes of ballast into the map in the filler's chunks (which a
/// delegated write carries too), then removes them; a refusal is a violation. Ballast a
/// filler left behind is removed first (and counted): it is data, not a leak. A refused
/// chunk is tried again for [`ROOM_PATIENCE`], the time the writer's passes take to give
/// back what the removals retired; memory that never comes back is a leak.
fn room_left<M: MemView + 'static>(map: &bi::SharedMap<u64, String, M>, v: &mut Verdict) {
    const CHUNK: usize = 128 << 10;
    let left: Vec<u64> = match map.reads() {
        Ok(r) => r
            .enter()
            .iter()
            .filter_map(|e| e.ok().map(|(k, _)| k))
            .filter(|k| k & crate::worker::BALLAST != 0)
            .collect(),
        Err(_) => Vec::new(),
    };
    v.ballast_left_at_end = left.len() as u64;
    for key in &left {
        let _ = map.remove(key);
    }
    let ballast = "e".repeat(CHUNK);
    // Ballast keys of the final process: apart from every filler's.
    let keys = (0..(ROOM_AT_END / CHUNK) as u64).map(|i| crate::worker::BALLAST | 1 << 40 | i);
    let mut written = 0;
    'chunks: for key in keys.clone() {
        let patience = Instant::now() + ROOM_PATIENCE;
        loop {
            match map.insert(key, ballast.clone()) {
                Ok(_) => {
                    written += CHUNK;
                    break;
                }
                Err(_) if Instant::now() < patience => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => {
                    v.violations.push(format!(
                        "at the end the pool took only {} KiB of {} KiB more: {e}",
                        written >> 10,
                        ROOM_AT_END >> 10
                    ));
                    break 'chunks;
                }
            }
        }
    }
    v.room_at_end_mib = written as f64 / (1 << 20) as f64;
    for key in keys {
        let _ = map.remove(&key);
    }
}

/// How long a chunk of [`room_left`] is tried again: a few of the longest pass periods a
/// run uses, so that memory retired just before is given back.
const ROOM_PATIENCE: Duration = Duration::from_secs(5);

impl Supervisor {
    /// This program again as the process `role`, on the pool at `pool`, journaling to
    /// `journal`.
    fn command(&self, role: &str, pool: &Path, journal: &Path) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.arg(role)
            .arg("--pool")
            .arg(pool)
            .arg("--journal")
            .arg(journal)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        cmd
    }

    /// A new life and its journal's path.
    fn new_life(&mut self, name: String) -> (usize, PathBuf) {
        let journal = self
            .plan
            .dir
            .join(format!("{}.journal", name.replace(' ', "-")));
        self.lives.push(Life {
            name,
            failed: None,
            started: now(),
            ended: None,
            stops: Vec::new(),
            events: Vec::new(),
        });
        self.journals.push(journal.clone());
        (self.lives.len() - 1, journal)
    }

    fn spawn(&mut self, kind: Kind, index: u32, incarnation: u32) -> std::io::Result<()> {
        let role = match kind {
            Kind::Worker => "worker",
            Kind::Joiner => "joiner",
        };
        let (life, journal) = self.new_life(format!("{role} {index}.{incarnation}"));
        // A worker derives its own from the run's seed, its index and incarnation.
        let seed = match kind {
            Kind::Worker => self.plan.seed,
            Kind::Joiner => self.plan.seed ^ (u64::from(index) << 40) ^ u64::from(incarnation),
        };
        let mut command = self.command(role, &self.pool, &journal);
        command.arg("--seed").arg(seed.to_string());
        if kind == Kind::Worker {
            command
                .arg("--worker")
                .arg(index.to_string())
                .arg("--incarnation")
                .arg(incarnation.to_string())
                .arg("--pace-us")
                .arg(self.plan.pace.as_micros().to_string());
        }
        let child = command.spawn()?;
        self.running.push(Running {
            kind,
            index,
            incarnation,
            child,
            life,
        });
        Ok(())
    }

    fn kill_and_restart(&mut self, at: usize) -> std::io::Result<()> {
        let mut r = self.running.swap_remove(at);
        let _ = r.child.kill();
        let _ = r.child.wait();
        self.lives[r.life].ended = Some(now());
        self.spawn(r.kind, r.index, r.incarnation + 1)
    }

    /// A worker that exited on its own (it should not): restarted, and said.
    fn restart_exited(&mut self) -> std::io::Result<()> {
        let mut i = 0;
        while i < self.running.len() {
            if let Ok(Some(status)) = self.running[i].child.try_wait() {
                let r = self.running.swap_remove(i);
                self.lives[r.life].ended = Some(now());
                self.lives[r.life].failed = Some(format!("exited by itself ({status}); restarted"));
                *self.counts.entry("exited by itself".into()).or_default() += 1;
                self.spawn(r.kind, r.index, r.incarnation + 1)?;
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// The running worker that holds the map's writer role, as the region says.
    fn writer(&self) -> Option<usize> {
        let report = PoolReport::read(&self.pool).ok()?;
        let node = report
            .structures
            .iter()
            .find(|s| s.name == MAP)?
            .writer_node?;
        // A joined reader's journal names the node it joined, which it does not run.
        self.running.iter().position(|r| {
            r.kind == Kind::Worker
                && journal::read(&self.journals[r.life])
                    .unwrap_or_default()
                    .iter()
                    .any(|e| matches!(e, journal::Event::Opened { node: n, .. } if *n == node))
        })
    }

    fn stop_for(&mut self, at: usize, length: Duration) {
        let pid = self.running[at].child.id() as libc::pid_t;
        let from = now();
        signal(pid, libc::SIGSTOP);
        std::thread::sleep(length);
        signal(pid, libc::SIGCONT);
        let life = self.running[at].life;
        self.lives[life].stops.push((from, now()));
        self.longest_stop = self.longest_stop.max(length);
    }

    fn fill(&mut self, lease: Duration) -> std::io::Result<()> {
        self.extra += 1;
        let (life, journal) = self.new_life(format!("filler {}", self.extra));
        let mut child = self
            .command("fill", &self.pool, &journal)
            .arg("--hold-ms")
            .arg(lease.as_millis().to_string())
            .spawn()?;
        let status = wait_for(&mut child, Duration::from_secs(120));
        self.lives[life].ended = Some(now());
        if !status {
            self.lives[life].failed = Some("failed (its errors are in its journal)".into());
        }
        Ok(())
    }

    fn race(&mut self) -> std::io::Result<()> {
        self.extra += 1;
        let path = self.plan.dir.join(format!("race-{}.bi", self.extra));
        let _ = std::fs::remove_file(&path);
        let racers = 3;
        let mut children = Vec::new();
        for me in 0..racers {
            let (life, journal) = self.new_life(format!("racer {}.{me}", self.extra));
            let child = self
                .command("race", &path, &journal)
                .arg("--me")
                .arg(me.to_string())
                .arg("--racers")
                .arg(racers.to_string())
                .spawn()?;
            children.push((life, child));
        }
        for (life, mut child) in children {
            if !wait_for(&mut child, Duration::from_secs(60)) {
                self.lives[life].failed = Some("did not see every racer's key".into());
            }
            self.lives[life].ended = Some(now());
        }
        let _ = std::fs::remove_file(&path);
        Ok(())
    }

    /// Sleeps `length`, sampling the workers' memory every 100 ms.
    fn sleep_sampling(&mut self, length: Duration) {
        let until = Instant::now() + length;
        loop {
            for r in &self.running {
                self.max_rss = self.max_rss.max(rss(r.child.id()));
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
    }
}

/// Takes `dir` for this run until the returned file is dropped, and clears what an
/// earlier run left there (its pool, race pools, journals and stack files: a worker reads
/// its earlier incarnations' journals, and journals are appended to). Fails if another run holds it:
/// two runs on one directory would share journals and unlink each other's pool.
fn take_dir(dir: &Path) -> std::io::Result<std::fs::File> {
    let path = dir.join("run.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    // SAFETY: flock(2) takes a descriptor this function owns (open for the call) and
    // integer flags; it touches no memory of this process.
    let taken = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if taken != 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.kind() {
            std::io::ErrorKind::WouldBlock => std::io::Error::new(
                std::io::ErrorKind::ResourceBusy,
                format!("another run is using {}", dir.display()),
            ),
            _ => e,
        });
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let left = name.ends_with(".journal")
            || name == "torture.bi"
            || (name.starts_with("race-") && name.ends_with(".bi"))
            || (name.starts_with("stall-") && name.ends_with(".txt"));
        if left {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(lock)
}

/// Whether `child` exited successfully within `limit` (killed if not).
fn wait_for(child: &mut Child, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Ok(Some(status)) = child.try_wait() {
            return status.success();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

fn signal(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill(2) takes plain integers and touches no memory of this process; a pid
    // that exited meanwhile gets ESRCH, which is ignored.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// A process's resident set, in bytes (0 if it cannot be read).
fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool that cannot take [`ROOM_AT_END`] more is a violation; one that can is not,
    /// and is left as it was, but for the ballast a filler left behind, which is removed
    /// (and counted) first.
    #[test]
    fn a_pool_without_room_at_the_end_is_a_violation() {
        let dir = tempfile::tempdir().unwrap();
        let room = |size: usize| {
            let path = dir.path().join(format!("room-{size}.bi"));
            let pool = Pool::open_or_create(&path, PoolConfig::with_size(size)).unwrap();
            let map = pool.map::<u64, String>(MAP).unwrap();
            map.insert(1, "kept".into()).unwrap();
            let left = (0..32).map(|i| crate::worker::BALLAST | i);
            if size > 12 << 20 {
                map.extend(left.clone().map(|k| (k, "b".repeat(128 << 10))))
                    .unwrap();
            }
            let mut v = Verdict::default();
            room_left(&map, &mut v);
            assert!(left.into_iter().all(|k| map.get(&k).unwrap().is_none()));
            assert_eq!(map.get(&1).unwrap().as_deref(), Some("kept"));
            assert_eq!(map.get(&(crate::worker::BALLAST | 1 << 40)).unwrap(), None);
            v
        };
        let small = room(12 << 20);
        assert_eq!(small.violations.len(), 1, "{:?}", small.violations);
        assert!(small.room_at_end_mib < 8.0);
        let large = room(32 << 20);
        assert!(large.violations.is_empty(), "{:?}", large.violations);
        assert_eq!(large.room_at_end_mib, 8.0);
        assert_eq!(
            (small.ballast_left_at_end, large.ballast_left_at_end),
            (0, 32)
        );
    }

    #[test]
    fn a_second_run_on_one_directory_is_refused_and_a_later_one_starts_clean() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("worker-0.0.journal");
        std::fs::write(&journal, "opened 1 0 1\n").unwrap();
        std::fs::write(dir.path().join("race-3.bi"), "x").unwrap();
        std::fs::write(dir.path().join("stall-worker-0.0-1.txt"), "x").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        let first = take_dir(dir.path()).unwrap();
        // What the earlier run left is gone; what is not a run's file stays.
        assert!(!journal.exists() && !dir.path().join("race-3.bi").exists());
        assert!(stall_files(dir.path()).is_empty());
        assert!(dir.path().join("notes.txt").exists());
        std::fs::write(&journal, "opened 2 0 1\n").unwrap();
        let e = take_dir(dir.path()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ResourceBusy);
        assert!(e.to_string().contains("another run"), "{e}");
        // Refused without touching the running one's journals.
        assert!(journal.exists());
        drop(first);
        let _again = take_dir(dir.path()).unwrap();
        assert!(!journal.exists());
    }
}
