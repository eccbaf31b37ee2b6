//! A joined reader: a process that joins the node another process of the run runs and
//! reads through it, checking what it reads against the workers' journals.
//!
//! It writes nothing and runs no pass: its reads are safe only through its runner's
//! passes, and its runner is killed, stopped and replaced like any worker (and so is
//! it). What it checks:
//!
//! - every value it reads is the one written under its key ([`value_of`]): a read of
//!   reused memory that its stamps did not reject shows as another key's value, or none;
//! - a key whose insert a worker's journal acknowledges, more than [`SETTLED`] ago, and
//!   that no journal has begun to remove, is present.
//!
//! The keys come from the journals of the run's directory that changed lately (a
//! removal is journaled in the same journal as the insert, or a later incarnation's,
//! which changed later still).

use crate::journal::{Event, Journal, WriteKind, WriteOutcome, now};
use crate::worker::{MAP, value_of};
use bi::core::mem::MemView;
use bi::{Error, ErrorKind, Pool};
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

/// How long after its acknowledgement an insert is looked for: long past the staleness
/// bound, so that only a key that is really missing is reported.
pub const SETTLED: Duration = Duration::from_secs(1);

/// Journals changed longer ago than this are not read again.
const RECENT: Duration = Duration::from_secs(10);

/// A read slower than this is journaled (the check judges it against the call bound).
const SLOW: Duration = Duration::from_millis(100);

/// Keys read per look at the journals.
const PER_ROUND: usize = 64;

/// What the recent worker journals say: acknowledged inserts (key, when) and every key
/// a removal was begun for.
#[derive(Default)]
struct Known {
    acknowledged: BTreeMap<u64, u64>,
    removing: BTreeSet<u64>,
}

/// Reads the worker journals of `dir` changed in the last [`RECENT`].
fn known(dir: &Path) -> Known {
    let mut k = Known::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return k;
    };
    let now = SystemTime::now();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let recent = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).unwrap_or_default() < RECENT);
        if !(name.starts_with("worker-") && name.ends_with(".journal") && recent) {
            continue;
        }
        for e in crate::journal::read(&entry.path()).unwrap_or_default() {
            match e {
                Event::Wrote {
                    write: WriteKind::Insert,
                    key,
                    end,
                    outcome: WriteOutcome::Done,
                    ..
                } => {
                    k.acknowledged.insert(key, end);
                }
                Event::Writing {
                    write: WriteKind::Remove,
                    key,
                } => {
                    k.removing.insert(key);
                }
                _ => {}
            }
        }
    }
    k
}

/// How long a joined reader waits for a worker to create the map: a joiner may join a
/// node whose runner has not created it yet (the first workers and joiners start at
/// once on a pool that does not exist).
const MAP_WAIT: Duration = Duration::from_secs(10);

/// Opens the map, waiting while no worker has created it yet.
fn open_map<M: MemView + 'static>(
    pool: &Pool<M>,
    journal: &mut Journal,
) -> Result<bi::collections::map::MapReadHandle<u64, String, M>, Error> {
    let deadline = Instant::now() + MAP_WAIT;
    loop {
        match pool.map_reader::<u64, String>(MAP) {
            Err(e) if e.kind() == ErrorKind::NotFound && Instant::now() < deadline => {
                journal.note_error(format!("opening {MAP:?}: {e}"));
                std::thread::sleep(Duration::from_millis(50));
            }
            opened => return opened,
        }
    }
}

/// Reads through the joined node until killed.
pub fn read<M: MemView + 'static>(
    pool: Pool<M>,
    journal: &mut Journal,
    dir: &Path,
    seed: u64,
) -> Result<(), Error> {
    let map = open_map(&pool, journal)?;
    journal.note(&Event::Opened {
        at: now(),
        node: pool.node(),
        writer: false,
    });
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut reads, mut checked) = (0u64, 0u64);
    loop {
        let k = known(dir);
        let settled = now().saturating_sub(SETTLED.as_nanos() as u64);
        let candidates: Vec<(u64, u64)> = k
            .acknowledged
            .iter()
            .filter(|&(key, &at)| at < settled && !k.removing.contains(key))
            .map(|(&key, &at)| (key, at))
            .collect();
        for &(key, acknowledged) in candidates.choose_multiple(&mut rng, PER_ROUND) {
            let start = now();
            let took = Instant::now();
            crate::stall::in_call(true);
            let found = map.get(&key);
            crate::stall::in_call(false);
            let elapsed = took.elapsed();
            reads += 1;
            if elapsed > SLOW {
                journal.note(&Event::SlowRead {
                    key,
                    start,
                    end: now(),
                });
            }
            match found {
                Ok(Some(v)) if v == value_of(key) => checked += 1,
                Ok(Some(v)) => journal.note(&Event::Misread {
                    key,
                    at: start,
                    found: v.chars().take(48).collect(),
                }),
                // Absent: a removal begun since the journals were read explains it.
                Ok(None) if !known(dir).removing.contains(&key) => journal.note(&Event::Unseen {
                    key,
                    at: start,
                    acknowledged,
                }),
                Ok(None) => checked += 1,
                Err(e) => journal.note_error(format!("reading {key:#x}: {e}")),
            }
        }
        journal.note(&Event::JoinedReads {
            at: now(),
            reads,
            checked,
        });
        std::thread::sleep(Duration::from_millis(rng.random_range(100..300)));
    }
}
