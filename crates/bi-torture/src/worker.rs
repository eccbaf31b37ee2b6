//! A worker process: opens the pool, takes the map's writer role if no live process
//! holds it (or sends its writes to the process that does), and writes until it is
//! killed, journaling every write and what it read back.
//!
//! Keys carry their writer: `worker << 48 | incarnation << 32 | sequence`, each inserted
//! once with [`value_of`] its value, and some removed later. So the check knows, from the
//! journals alone, what the map must hold.

use crate::journal::{Event, Journal, WriteKind, WriteOutcome, now};
use bi::core::mem::MemView;
use bi::{Error, ErrorKind, Pool, SharedMap};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

/// The map every worker writes.
pub const MAP: &str = "torture";

/// How many keys a worker keeps present at most (then it removes as much as it inserts).
const KEYS_PER_WORKER: usize = 4_000;

/// Ballast keys (the filler's) have the top bit set; no worker's key does.
pub const BALLAST: u64 = 1 << 63;

/// The value written under `key`: derived from it, so the check knows it, and long
/// enough to live out of line (a string of 40 bytes).
pub fn value_of(key: u64) -> String {
    format!("{key:016x}-{:023}", key % 1_000_003)
}

/// The key of `worker`'s `incarnation`'s `sequence`th insert.
pub fn key_of(worker: u32, incarnation: u32, sequence: u32) -> u64 {
    (u64::from(worker) << 48) | (u64::from(incarnation & 0xffff) << 32) | u64::from(sequence)
}

/// Whether an error says its write was not applied, and never will be. A writer that
/// died before it answered may have applied the write (its successor never does), so
/// `NoWriter` leaves it open, as a timeout does.
pub fn outcome_of(e: &Error) -> WriteOutcome {
    let kind = e.kind();
    let name = format!("{kind:?}");
    match kind {
        ErrorKind::HeapExhausted | ErrorKind::TooLarge | ErrorKind::InvalidInput => {
            WriteOutcome::Refused(name)
        }
        _ => WriteOutcome::Unknown(name),
    }
}

/// What a worker is told.
pub struct Orders {
    pub worker: u32,
    pub incarnation: u32,
    pub seed: u64,
    /// The pause between two writes.
    pub pace: Duration,
    /// Keys the worker's earlier incarnations may have left in the map ([`inherited`]):
    /// the worker removes them as it removes its own, so the map stays bounded however
    /// often workers are killed.
    pub inherited: Vec<u64>,
}

/// The keys that the journal `events` of a worker's earlier incarnations (in order) may
/// have left present: every key one began to insert, less those whose insert was
/// refused or whose removal was acknowledged.
pub fn inherited(events: &[Event]) -> Vec<u64> {
    let mut keys = std::collections::BTreeSet::new();
    for e in events {
        match e {
            Event::Writing {
                write: WriteKind::Insert,
                key,
            } => {
                keys.insert(*key);
            }
            Event::Wrote {
                write: WriteKind::Insert,
                key,
                outcome: WriteOutcome::Refused(_),
                ..
            }
            | Event::Wrote {
                write: WriteKind::Remove,
                key,
                outcome: WriteOutcome::Done,
                ..
            } => {
                keys.remove(key);
            }
            _ => {}
        }
    }
    keys.into_iter().collect()
}

/// Writes until killed.
pub fn run<M: MemView + 'static>(
    pool: Pool<M>,
    journal: &mut Journal,
    orders: &Orders,
    oracle: impl Fn(&Pool<M>) -> Option<Event>,
) -> Result<(), Error> {
    let map = pool.map::<u64, String>(MAP)?;
    journal.note(&Event::Opened {
        at: now(),
        node: pool.node(),
        writer: map.is_writer(),
    });
    let mut rng = SmallRng::seed_from_u64(orders.seed ^ (u64::from(orders.worker) << 32));
    let mut present: Vec<u64> = Vec::new();
    // Removed first, and never read back as present: each may or may not be there.
    let mut inherited = orders.inherited.clone();
    let mut last_oracle = Instant::now();
    // Larger than the whole pool: every write of it must be refused. Made once.
    let mut huge = None;
    for sequence in 0u32.. {
        // Inserts outnumber removals until a worker holds its share of keys; then as
        // many go as come, so the pool holds a bounded map however long the run.
        let roll = match present.len() + inherited.len() < KEYS_PER_WORKER {
            true => rng.random_range(0..100),
            false => rng.random_range(70..100),
        };
        // Half the inserts, and every removal, take an inherited key out first.
        if roll < 80
            && (roll >= 70 || roll % 2 == 0)
            && let Some(key) = inherited.pop()
        {
            if write(journal, WriteKind::Remove, key, || {
                map.remove(&key).map(drop)
            }) {
                read_back(journal, &map, key, false);
            } else {
                inherited.push(key);
            }
        } else if roll < 70 || (roll < 80 && present.len() >= KEYS_PER_WORKER) {
            let key = key_of(orders.worker, orders.incarnation, sequence);
            if write(journal, WriteKind::Insert, key, || {
                map.insert(key, value_of(key)).map(drop)
            }) {
                present.push(key);
                read_back(journal, &map, key, true);
            }
        } else if roll < 90 && !present.is_empty() {
            let key = present.swap_remove(rng.random_range(0..present.len()));
            if write(journal, WriteKind::Remove, key, || {
                map.remove(&key).map(drop)
            }) {
                read_back(journal, &map, key, false);
            } else {
                // May still be there, or be removed later (a timed-out removal may still
                // be applied): removed again later, never read back as present.
                inherited.push(key);
            }
        } else if roll == 90 && rng.random_ratio(1, 8) {
            let key = key_of(orders.worker, orders.incarnation, sequence);
            let size = pool.region().layout().config().size() as usize;
            let huge: &String = huge.get_or_insert_with(|| "x".repeat(size));
            write(journal, WriteKind::Oversized, key, || {
                map.insert(key, huge.clone()).map(drop)
            });
        } else if !present.is_empty() {
            let key = present[rng.random_range(0..present.len())];
            read_back(journal, &map, key, true);
        }
        if last_oracle.elapsed() > Duration::from_millis(500) {
            if let Some(e) = oracle(&pool) {
                journal.note(&e);
            }
            last_oracle = Instant::now();
        }
        std::thread::sleep(orders.pace);
    }
    Ok(())
}

/// Runs one write and journals it; whether it was acknowledged.
fn write(
    journal: &mut Journal,
    kind: WriteKind,
    key: u64,
    call: impl FnOnce() -> Result<(), Error>,
) -> bool {
    journal.note(&Event::Writing { write: kind, key });
    let start = now();
    crate::stall::in_call(true);
    let result = call();
    crate::stall::in_call(false);
    let end = now();
    let outcome = match &result {
        Ok(()) => WriteOutcome::Done,
        Err(e) => {
            journal.note_error(format!("{kind:?}: {e}"));
            outcome_of(e)
        }
    };
    let done = outcome == WriteOutcome::Done;
    journal.note(&Event::Wrote {
        write: kind,
        key,
        start,
        end,
        outcome,
    });
    done
}

/// Reads `key` back after this process's own acknowledged write: a process reads its
/// own writes (present: the value it wrote; else absent).
fn read_back<M: MemView + 'static>(
    journal: &mut Journal,
    map: &SharedMap<u64, String, M>,
    key: u64,
    present: bool,
) {
    let want = present.then(|| value_of(key));
    match map.get(&key) {
        Ok(found) if found == want => {}
        Ok(_) => journal.note(&Event::OwnWriteUnread {
            key,
            at: now(),
            present,
        }),
        Err(e) => journal.note(&Event::Trouble {
            at: now(),
            what: format!("reading {key}: {e}"),
        }),
    }
}

/// The filler: inserts ballast of `chunk` bytes until the pool refuses it, holds the
/// pool full for `hold`, then removes every ballast key it tried (applied or not).
/// Journals each write; returns how many inserts were acknowledged.
pub fn fill<M: MemView + 'static>(
    pool: Pool<M>,
    journal: &mut Journal,
    chunk: usize,
    hold: Duration,
) -> Result<u64, Error> {
    let map = pool.map::<u64, String>(MAP)?;
    let ballast = "b".repeat(chunk);
    let mut tried = Vec::new();
    let mut acknowledged = 0;
    for i in 0..1u64 << 20 {
        let key = BALLAST | i;
        tried.push(key);
        if write(journal, WriteKind::Insert, key, || {
            map.insert(key, ballast.clone()).map(drop)
        }) {
            acknowledged += 1;
        } else {
            break;
        }
    }
    std::thread::sleep(hold);
    for key in tried {
        // Until it goes: a removal that timed out is tried again.
        for _ in 0..20 {
            if write(journal, WriteKind::Remove, key, || {
                map.remove(&key).map(drop)
            }) {
                break;
            }
        }
    }
    Ok(acknowledged)
}

/// A racer: opens a pool that may not exist yet (several racers at once), inserts its
/// own key, and waits until it reads every racer's key. Whether all of them were seen.
pub fn race<M: MemView + 'static>(pool: Pool<M>, me: u64, racers: u64) -> Result<bool, Error> {
    let map = pool.map::<u64, u64>("race")?;
    map.insert(me, me)?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let mut all = true;
        for r in 0..racers {
            all &= map.get(&r)? == Some(r);
        }
        if all {
            return Ok(true);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restarted_worker_inherits_what_may_be_present() {
        let wrote = |write, key, outcome| Event::Wrote {
            write,
            key,
            start: 0,
            end: 0,
            outcome,
        };
        let insert = |key| Event::Writing {
            write: WriteKind::Insert,
            key,
        };
        let events = [
            insert(1),
            wrote(WriteKind::Insert, 1, WriteOutcome::Done),
            insert(2),
            wrote(
                WriteKind::Insert,
                2,
                WriteOutcome::Refused("HeapExhausted".into()),
            ),
            insert(3),
            wrote(WriteKind::Insert, 3, WriteOutcome::Done),
            wrote(WriteKind::Remove, 3, WriteOutcome::Done),
            insert(4),
            wrote(WriteKind::Insert, 4, WriteOutcome::Done),
            wrote(
                WriteKind::Remove,
                4,
                WriteOutcome::Unknown("Timeout".into()),
            ),
            insert(5), // killed inside the insert
        ];
        assert_eq!(inherited(&events), vec![1, 4, 5]);
    }
}
