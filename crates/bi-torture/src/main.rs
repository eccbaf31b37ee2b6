//! `bi-torture`: many processes on one pool under a seeded schedule of faults, checked
//! for what a service must never see.
//!
//! The supervisor starts the workers at once on a pool that does not exist yet; each
//! opens it, takes the map's writer role if no live process holds it (or writes through
//! the one that does), and inserts, removes and reads back its own keys, journaling each
//! write's outcome. Meanwhile the supervisor kills processes (the writer included) and
//! restarts them at once, stops them with SIGSTOP for less or more than a lease, fills
//! the pool until it refuses and frees it, and has three processes create another pool
//! at the same moment. Oversized items are written now and then. A joined reader joins
//! the node another process runs and checks what it reads against the journals; it is
//! killed, stopped and restarted like the workers, and so are its runners. With
//! `BI_EMULATE=<seed>` every process runs its node over the non-coherence emulator with
//! adversarial caches and skewed node clocks (and no process joins another's node: an emulated cache is one
//! process's).
//!
//! At the end a fresh process reads the map and the check requires: no acknowledged
//! write lost; no removed key back (an insert applied twice); no refused write applied;
//! each process reads its own writes; a joined reader reads only values that were
//! written and finds every settled insert; no call blocks past the write timeout plus a
//! lease; every write in a quiet window (a lease after the last fault) succeeds; no
//! process's resident memory past 512 MiB; the pool still takes 8 MiB at the end; and,
//! emulated, no stale read older than the bound, no reused memory read, no lost
//! write-back. Each violation is printed with the seed that reproduces the schedule;
//! the exit status is 1 if there was any.
//!
//! ```sh
//! cargo run --release -p bi-torture -- --seconds 60 --seed 1
//! BI_EMULATE=7 cargo run --release -p bi-torture -- --seconds 60 --seed 1 --json torture.json
//! ```

mod check;
mod joiner;
mod journal;
mod stall;
mod supervisor;
mod worker;

use bi::{Emulation, Pool, PoolConfig};
use clap::{Parser, Subcommand};
use journal::{Event, Journal, now};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    version,
    about = "A torture run for a shared pool: many processes, seeded faults, nothing lost"
)]
struct Cli {
    #[command(subcommand)]
    role: Option<Role>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(clap::Args)]
struct RunArgs {
    /// How long to inject faults.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Seeds the fault schedule and the workers' choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How many worker processes.
    #[arg(long, default_value_t = 4)]
    workers: u32,
    /// How many joined readers (none under `BI_EMULATE`).
    #[arg(long, default_value_t = 1)]
    joiners: u32,
    /// Each worker's pause between writes, in microseconds.
    #[arg(long, default_value_t = 1000)]
    pace_us: u64,
    /// Where the pool and the journals go (a new temporary directory if not given;
    /// kept when given).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also write the summary to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw only these faults (comma-separated; all of them by default).
    #[arg(long, value_enum, value_delimiter = ',')]
    faults: Vec<supervisor::Fault>,
}

/// The processes the supervisor starts (not for people).
#[derive(Subcommand)]
enum Role {
    #[command(hide = true)]
    Worker {
        #[command(flatten)]
        files: Files,
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        worker: u32,
        #[arg(long)]
        incarnation: u32,
        #[arg(long)]
        pace_us: u64,
    },
    #[command(hide = true)]
    Joiner {
        #[command(flatten)]
        files: Files,
        #[arg(long)]
        seed: u64,
    },
    #[command(hide = true)]
    Fill {
        #[command(flatten)]
        files: Files,
        #[arg(long)]
        hold_ms: u64,
    },
    #[command(hide = true)]
    Race {
        #[command(flatten)]
        files: Files,
        #[arg(long)]
        me: u64,
        #[arg(long)]
        racers: u64,
    },
}

/// The pool a process opens and the journal it writes.
#[derive(clap::Args)]
struct Files {
    #[arg(long)]
    pool: PathBuf,
    #[arg(long)]
    journal: PathBuf,
}

/// The pool every process of the run opens: 32 MiB, 16 nodes (a killed process's node
/// stays claimed for a lease), the default leases, pass period and write timeout; under
/// `BI_EMULATE`, the skew bound of the emulated machine's node clocks.
fn pool_config() -> PoolConfig {
    let mut config = PoolConfig::with_size(32 << 20);
    config.region = config.region.with_nodes(16);
    if let Ok(Some(_)) = Emulation::from_env() {
        config.runtime = config.runtime.skew(Emulation::skew_bound());
    }
    config
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.role {
        None => supervise(cli.run),
        Some(role) => match serve(role) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("bi-torture: {e}");
                ExitCode::from(2)
            }
        },
    }
}

fn supervise(args: RunArgs) -> ExitCode {
    let temp;
    let dir = match args.dir {
        Some(d) => d,
        None => match tempdir() {
            Ok(d) => {
                temp = d;
                temp.0.clone()
            }
            Err(e) => {
                eprintln!("bi-torture: no temporary directory: {e}");
                return ExitCode::from(2);
            }
        },
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("bi-torture: {}: {e}", dir.display());
        return ExitCode::from(2);
    }
    let plan = supervisor::Plan {
        seconds: args.seconds,
        seed: args.seed,
        workers: args.workers.max(1),
        joiners: match Emulation::from_env() {
            Ok(None) => args.joiners,
            _ => 0,
        },
        dir,
        pace: Duration::from_micros(args.pace_us),
        faults: match args.faults.is_empty() {
            true => supervisor::FAULTS.to_vec(),
            false => args.faults,
        },
        config: pool_config(),
    };
    let summary = match supervisor::run(plan) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bi-torture: {e}");
            return ExitCode::from(2);
        }
    };
    let json = serde_json::to_string_pretty(&summary).unwrap_or_default();
    if let Some(path) = &args.json
        && let Err(e) = std::fs::write(path, &json)
    {
        eprintln!("bi-torture: {}: {e}", path.display());
    }
    let v = &summary.verdict;
    println!(
        "seed {}: {:.0} s, faults {:?}, writes: {} acknowledged, {} refused, {} unknown; {} keys checked; longest call {:.0} ms; worker RSS up to {:.0} MiB",
        summary.seed,
        summary.seconds,
        summary.faults,
        v.writes_acknowledged,
        v.writes_refused,
        v.writes_unknown,
        v.keys_checked,
        v.longest_call_ms,
        summary.max_worker_rss_mib,
    );
    println!(
        "the pool took {:.0} MiB more at the end ({} ballast keys a filler left removed first)",
        v.room_at_end_mib, v.ballast_left_at_end
    );
    if v.joined_reads > 0 {
        println!(
            "joined readers: {} reads, {} found what the journals say",
            v.joined_reads, v.joined_reads_checked
        );
    }
    if summary.emulated {
        println!(
            "oracle: {} stale reads (oldest outside stops {:.0} us), {} loads of reused memory ({} beyond the reads rejected), {} lost write-backs",
            v.oracle_stale_reads,
            v.oracle_max_staleness_us,
            v.oracle_reuse_hazards,
            v.oracle_reuse_accepted,
            v.oracle_lost_writes
        );
    }
    for violation in &v.violations {
        println!("VIOLATION (seed {}): {violation}", summary.seed);
    }
    for file in &summary.stall_stacks {
        println!(
            "stacks of the run's processes during a blocked write: {}",
            file.display()
        );
    }
    println!("{json}");
    match v.violations.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(1),
    }
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir() -> std::io::Result<TempDir> {
    let dir = std::env::temp_dir().join(format!("bi-torture-{}-{}", std::process::id(), now()));
    std::fs::create_dir_all(&dir)?;
    Ok(TempDir(dir))
}

/// Opens the pool (making it if missing) on the hardware or over the emulator, retrying
/// while every node is claimed (a killed process's claim lapses after its lease), and
/// runs `then` with it.
fn with_pool<T>(
    path: &Path,
    journal: &mut Journal,
    then: impl FnOnce(&mut Journal, PoolEither) -> Result<T, bi::Error>,
) -> Result<T, bi::Error> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let emulation = Emulation::from_env()?;
    loop {
        let opened = match emulation {
            Some(e) => {
                Pool::open_emulated(path, pool_config(), e.machine()).map(PoolEither::Emulated)
            }
            None => Pool::open_or_create(path, pool_config()).map(PoolEither::Hardware),
        };
        match opened {
            Ok(pool) => return then(journal, pool),
            Err(e) if e.kind() == bi::ErrorKind::Busy && Instant::now() < deadline => {
                journal.note(&Event::Trouble {
                    at: now(),
                    what: format!("opening: {e}"),
                });
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Joins the node of a process that runs one (drawn with `seed` among the live ones),
/// retrying for up to ten seconds while none does or the one drawn stops running.
fn join_a_runner(path: &Path, journal: &mut Journal, seed: u64) -> Result<Pool, bi::Error> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(seed);
    // While no node runs, the last one drawn is asked again (and refuses).
    let mut node = 0;
    loop {
        let live: Vec<usize> = bi::inspect::PoolReport::read(path)
            .map(|r| r.nodes.iter().filter(|n| n.live).map(|n| n.node).collect())
            .unwrap_or_default();
        if let Some(&n) = rand::seq::IndexedRandom::choose(live.as_slice(), &mut rng) {
            node = n;
        }
        let config = PoolConfig {
            join: Some(node),
            ..pool_config()
        };
        match Pool::open(path, config) {
            Ok(pool) => return Ok(pool),
            Err(e) if Instant::now() < deadline => {
                journal.note_error(format!("joining node {node}: {e}"));
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    }
}

/// A pool on the hardware or over the emulator.
enum PoolEither {
    Hardware(Pool),
    Emulated(Pool<bi::core::mem::EmulatedNode>),
}

fn emulated_oracle(pool: &Pool<bi::core::mem::EmulatedNode>) -> Option<Event> {
    let s = pool.emulator_stats();
    Some(Event::Oracle {
        at: now(),
        stale_reads: s.stale_reads,
        max_staleness: s.max_staleness,
        reuse_hazards: s.reuse_hazards,
        rejected_reads: pool.runtime().mismatches(),
        lost_writes: s.lost_writes,
        pass_gap: pool.longest_pass_gap().as_nanos() as u64,
        window_gap: pool.take_longest_pass_gap().as_nanos() as u64,
        publish_span: pool.runtime().take_longest_publish_span().as_nanos() as u64,
        lost_at: s.last_lost_line.map(|o| o as u64),
        stalest_at: s.stalest_line.map(|o| o as u64),
    })
}

/// Has the stacks of the run's processes written down if a call of this one outlasts
/// the bound the check holds it to with one writer more lost than it allows by default
/// ([`stall`]).
fn watch_stalls(pool: &Path, journal: &Path) {
    let name = journal
        .file_stem()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let bounds = check::Bounds::of(&pool_config(), false);
    stall::watch(pool.to_owned(), name, bounds.call + bounds.per_writer_lost);
}

fn serve(role: Role) -> Result<(), Box<dyn std::error::Error>> {
    match role {
        Role::Worker {
            files: Files { pool, journal },
            seed,
            worker,
            incarnation,
            pace_us,
        } => {
            // What this worker's earlier incarnations left: their journals lie beside
            // this one's, named by the same rule.
            let mut earlier_events = Vec::new();
            for earlier in 0..incarnation {
                let name = format!("worker-{worker}.{earlier}.journal");
                if let Some(path) = journal.parent().map(|d| d.join(name))
                    && let Ok(events) = journal::read(&path)
                {
                    earlier_events.extend(events);
                }
            }
            let inherited = worker::inherited(&earlier_events);
            let mut j = Journal::create(&journal)?;
            watch_stalls(&pool, &journal);
            let orders = worker::Orders {
                worker,
                incarnation,
                seed: seed ^ u64::from(incarnation).rotate_left(17),
                pace: Duration::from_micros(pace_us),
                inherited,
            };
            Ok(with_pool(&pool, &mut j, |j, p| match p {
                PoolEither::Hardware(p) => worker::run(p, j, &orders, |_| None),
                PoolEither::Emulated(p) => worker::run(p, j, &orders, emulated_oracle),
            })?)
        }
        Role::Joiner {
            files: Files { pool, journal },
            seed,
        } => {
            let mut j = Journal::create(&journal)?;
            watch_stalls(&pool, &journal);
            let p = join_a_runner(&pool, &mut j, seed)?;
            let dir = pool.parent().unwrap_or(Path::new("."));
            Ok(joiner::read(p, &mut j, dir, seed)?)
        }
        Role::Fill {
            files: Files { pool, journal },
            hold_ms,
        } => {
            let mut j = Journal::create(&journal)?;
            watch_stalls(&pool, &journal);
            let hold = Duration::from_millis(hold_ms);
            with_pool(&pool, &mut j, |j, p| match p {
                PoolEither::Hardware(p) => worker::fill(p, j, 128 << 10, hold),
                PoolEither::Emulated(p) => worker::fill(p, j, 128 << 10, hold),
            })?;
            Ok(())
        }
        Role::Race {
            files: Files { pool, journal },
            me,
            racers,
        } => {
            let mut j = Journal::create(&journal)?;
            let all = with_pool(&pool, &mut j, |_, p| match p {
                PoolEither::Hardware(p) => worker::race(p, me, racers),
                PoolEither::Emulated(p) => worker::race(p, me, racers),
            })?;
            match all {
                true => Ok(()),
                false => Err(format!("racer {me} never saw every racer's key").into()),
            }
        }
    }
}
