//! What the run must show, read from the journals, the supervisor's record of its faults
//! and the map as a fresh process finds it at the end.

use crate::journal::{Event, WriteKind, WriteOutcome};
use crate::worker::{BALLAST, value_of};
use bi::PoolConfig;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// One process the supervisor started: a worker's incarnation, the filler or a racer.
#[derive(Clone, Debug, Serialize)]
pub struct Life {
    /// What it was (`worker 2.5`, `filler 3`, ...).
    pub name: String,
    /// Why it ended on its own, if it did (a worker never should; a filler or a racer
    /// that failed).
    pub failed: Option<String>,
    /// When it started and when it was killed or exited (ns).
    pub started: u64,
    pub ended: Option<u64>,
    /// When it was stopped (SIGSTOP) and continued (SIGCONT).
    pub stops: Vec<(u64, u64)>,
    /// Its journal's events.
    #[serde(skip)]
    pub events: Vec<Event>,
}

/// A fault the supervisor injected, from its start to the moment it was over (a kill:
/// the restart; a stop: the continue; a fill: the filler's exit).
#[derive(Clone, Debug, Serialize)]
pub struct FaultWindow {
    pub kind: String,
    /// The process it struck, if one.
    pub target: Option<String>,
    /// Whether that process held the map's writer role when struck (killed or stopped:
    /// either way the writes sent to it wait).
    pub writer: bool,
    pub start: u64,
    pub end: u64,
}

impl FaultWindow {
    /// Whether the fault stopped a process (and continued it at `end`).
    fn is_stop(&self) -> bool {
        self.kind == "Stop" || self.kind == "StopWriter"
    }
}

/// The bounds the pool documents, for the run's configuration.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Bounds {
    /// How long any write may block while at most one writer is lost during it: the
    /// write timeout, plus one node lease for a handle that takes over a dead writer's
    /// role, plus one pass.
    pub call: Duration,
    /// How much longer for each further writer lost during a write (killed or stopped
    /// while it waits, or within a lease before it began): one node lease, the time it
    /// takes to know that writer gone too. No write can be acknowledged while no writer
    /// lives, so no bound holds that does not grow with the writers lost.
    pub per_writer_lost: Duration,
    /// After a fault is over, every write that starts later than this succeeds (until
    /// the next fault): one node lease and one pass.
    pub recovery: Duration,
    /// How old a line a read returns may be: one pass period plus the skew allowance,
    /// when the process's passes run on time (each process's lateness is added).
    pub staleness: Duration,
    /// The pass period.
    pub period: Duration,
    /// Whether a stopped process may hold a lock that other processes' loads and stores
    /// take: the emulator's per-line locks, which live in the shared file. A write then
    /// waits out the stop of any process that was stopped holding one it needs, on top
    /// of its bound; real memory has no such lock.
    pub stops_hold_memory: bool,
}

impl Bounds {
    /// The bounds of a pool run with `config`, over the emulator's memory if `emulated`.
    pub fn of(config: &PoolConfig, emulated: bool) -> Bounds {
        let lease = Duration::from_nanos(config.runtime.node_lease_ticks());
        Bounds {
            call: config.write_timeout + lease + config.pass_period,
            per_writer_lost: lease,
            recovery: lease + config.pass_period,
            staleness: config.pass_period + Duration::from_nanos(config.runtime.skew_bound()),
            period: config.pass_period,
            stops_hold_memory: emulated,
        }
    }
}

/// What the map held at the end, as read by a fresh process.
pub trait Final {
    /// The value under `key` (the error's words if it could not be read).
    fn value(&self, key: u64) -> Result<Option<String>, String>;
}

/// The totals and every violation.
#[derive(Debug, Default, Serialize)]
pub struct Verdict {
    pub writes_acknowledged: u64,
    pub writes_refused: u64,
    pub writes_unknown: u64,
    pub keys_checked: u64,
    pub own_writes_read_back: u64,
    pub longest_call_ms: f64,
    pub writes_in_quiet_windows: u64,
    pub oracle_stale_reads: u64,
    pub oracle_max_staleness_us: f64,
    /// The longest gap between two passes of any process (the pass period when on time).
    pub longest_pass_gap_us: f64,
    /// The longest time any process's writer took from an update's first store to a
    /// line others may hold to its log append (the staleness bound counts from there).
    pub longest_publish_span_us: f64,
    pub oracle_reuse_hazards: u64,
    /// Loads of reused memory beyond the reads rejected for them, process by process.
    pub oracle_reuse_accepted: u64,
    pub oracle_lost_writes: u64,
    /// Reads by joined readers, and those that found what the journals say.
    pub joined_reads: u64,
    pub joined_reads_checked: u64,
    /// Fillers' ballast keys still in the map at the end (a filler killed, or whose
    /// removals all failed, before it emptied the pool), removed before the room is
    /// measured.
    pub ballast_left_at_end: u64,
    /// What the pool still took at the end (MiB; `supervisor::ROOM_AT_END` asked).
    pub room_at_end_mib: f64,
    pub violations: Vec<String>,
}

/// Checks everything the journals say against the map's final contents.
pub fn check(lives: &[Life], faults: &[FaultWindow], bounds: Bounds, map: &dyn Final) -> Verdict {
    let mut v = Verdict::default();
    // Each key's writes in the order they returned (one process writes a key).
    let mut by_key: BTreeMap<u64, Vec<(WriteKind, WriteOutcome)>> = BTreeMap::new();
    let ms = |ns: u64| ns as f64 / 1e6;
    let spans = publish_spans(lives);
    // When a removal of each key may have begun first (a removal cut short by a kill:
    // any time in its process's life), and the keys joined readers did not find.
    let mut removal_from: BTreeMap<u64, u64> = BTreeMap::new();
    let mut unseen = Vec::new();
    for life in lives {
        if let Some(why) = &life.failed {
            v.violations.push(format!("{}: {why}", life.name));
        }
        // A process opens its pool once: a journal with more openings was written by
        // processes of another run on the same directory, and no verdict holds.
        let opened = life
            .events
            .iter()
            .filter(|e| matches!(e, Event::Opened { .. }))
            .count();
        if opened > 1 {
            v.violations.push(format!(
                "{}: its journal holds {opened} processes' events (another run on this directory?)",
                life.name
            ));
        }
        // A write begun and never returned (the process was killed inside it) may
        // have been applied or not.
        let mut open: Option<(WriteKind, u64)> = None;
        for e in &life.events {
            match e {
                Event::Writing { write, key } => {
                    if let Some((w, k)) = open.replace((*write, *key)) {
                        let killed = WriteOutcome::Unknown("killed".into());
                        by_key.entry(k).or_default().push((w, killed));
                        if w == WriteKind::Remove {
                            note_removal(&mut removal_from, k, life.started);
                        }
                    }
                }
                Event::Wrote {
                    write,
                    key,
                    start,
                    end,
                    outcome,
                } => {
                    match outcome {
                        WriteOutcome::Done => v.writes_acknowledged += 1,
                        WriteOutcome::Refused(_) => v.writes_refused += 1,
                        WriteOutcome::Unknown(_) => v.writes_unknown += 1,
                    }
                    open = None;
                    if *write == WriteKind::Remove {
                        note_removal(&mut removal_from, *key, *start);
                    }
                    by_key
                        .entry(*key)
                        .or_default()
                        .push((*write, outcome.clone()));
                    let stopped = life.stops.iter().any(|&(s, c)| s < *end && c > *start);
                    let took = end.saturating_sub(*start);
                    if !stopped {
                        v.longest_call_ms = v.longest_call_ms.max(ms(took));
                        let bound = call_bound(faults, bounds, *start, *end);
                        if took > bound.as_nanos() as u64 {
                            v.violations.push(format!(
                                "{}: a {write:?} of {key:#x} blocked {:.0} ms (bound {bound:?})",
                                life.name,
                                ms(took),
                            ));
                        }
                    }
                    if *write != WriteKind::Oversized
                        && outcome != &WriteOutcome::Done
                        && quiet(faults, bounds, *start, *end)
                    {
                        v.violations.push(format!(
                            "{}: a {write:?} of {key:#x} failed ({outcome:?}) at {} with no fault for a lease before it",
                            life.name, start
                        ));
                    }
                    if *write != WriteKind::Oversized && quiet(faults, bounds, *start, *end) {
                        v.writes_in_quiet_windows += 1;
                    }
                }
                Event::OwnWriteUnread { key, present, .. } => v.violations.push(format!(
                    "{}: did not read back its own acknowledged {} of {key:#x}",
                    life.name,
                    if *present { "insert" } else { "removal" }
                )),
                Event::Misread { key, at, found } => v.violations.push(format!(
                    "{}: a joined reader read {found:?} under {key:#x} at {at}, which no write stored there",
                    life.name
                )),
                Event::Unseen {
                    key,
                    at,
                    acknowledged,
                } => unseen.push((&life.name, *key, *at, *acknowledged)),
                Event::SlowRead { key, start, end } => {
                    let stopped = life.stops.iter().any(|&(s, c)| s < *end && c > *start);
                    let bound = call_bound(faults, bounds, *start, *end);
                    if !stopped && end.saturating_sub(*start) > bound.as_nanos() as u64 {
                        v.violations.push(format!(
                            "{}: a joined read of {key:#x} blocked {:.0} ms (bound {bound:?})",
                            life.name,
                            ms(end.saturating_sub(*start)),
                        ));
                    }
                }
                Event::Oracle { .. } | Event::JoinedReads { .. } => {}
                Event::Opened { .. } | Event::Trouble { .. } => {}
            }
        }
        if let Some((w, k)) = open {
            let killed = WriteOutcome::Unknown("killed".into());
            by_key.entry(k).or_default().push((w, killed));
            if w == WriteKind::Remove {
                note_removal(&mut removal_from, k, life.started);
            }
        }
        // Each joined reader's totals are in its last report.
        if let Some(Event::JoinedReads { reads, checked, .. }) = life
            .events
            .iter()
            .rev()
            .find(|e| matches!(e, Event::JoinedReads { .. }))
        {
            v.joined_reads += reads;
            v.joined_reads_checked += checked;
        }
        oracle(life, bounds, &spans, &mut v);
        v.own_writes_read_back += life
            .events
            .iter()
            .filter(|e| matches!(e, Event::Wrote { outcome: WriteOutcome::Done, write: WriteKind::Insert | WriteKind::Remove, key, .. } if key & BALLAST == 0))
            .count() as u64;
    }
    for (name, key, at, acknowledged) in unseen {
        if removal_from.get(&key).is_none_or(|&from| from > at) {
            v.violations.push(format!(
                "{name}: a joined reader did not find {key:#x} at {at}, acknowledged at {acknowledged} and never removed before"
            ));
        }
    }
    for (key, writes) in &by_key {
        v.keys_checked += 1;
        match map.value(*key) {
            Ok(found) => v.violations.extend(judge(*key, writes, found)),
            Err(e) => v
                .violations
                .push(format!("the final read of {key:#x} failed: {e}")),
        }
    }
    v
}

/// Notes that a removal of `key` may have begun at `from`.
fn note_removal(removal_from: &mut BTreeMap<u64, u64>, key: u64, from: u64) {
    let earliest = removal_from.entry(key).or_insert(from);
    *earliest = (*earliest).min(from);
}

/// A writer's publish span in one report window: `(from, to, span)`, in ns.
type Span = (u64, u64, u64);

/// Every process's publish spans, window by window (its reports' `publish_span`).
fn publish_spans(lives: &[Life]) -> Vec<Span> {
    let mut out = Vec::new();
    for life in lives {
        let mut from = life.started;
        for e in &life.events {
            if let Event::Oracle {
                at, publish_span, ..
            } = e
            {
                if *publish_span > 0 {
                    out.push((from, *at, *publish_span));
                }
                from = *at;
            }
        }
    }
    out
}

/// Adds what the emulator's oracle counted for `life` (its last report holds its totals)
/// and judges it: no load of reused memory that its read did not reject, no lost
/// write-back, and no read staler than the bound, except while the process was stopped
/// or running its first passes after it was continued (its passes did not run).
///
/// The bound is the documented one lengthened by how late the process's passes ran
/// around the read: a read in the window between two reports was stale at most until the
/// next pass, which ended in that window or, if it was late, in the first later one in
/// which any pass ended (a pass held up longer than a window ends no window in between);
/// so the longer window gap of the two counts. And the bound counts from the update's log
/// append, not from the write-back the oracle dates a stale copy by: the longest
/// publish span of any writer in the time the stale line may have been written back
/// (from the read's staleness before the window to its end) is added too.
fn oracle(life: &Life, bounds: Bounds, spans: &[Span], v: &mut Verdict) {
    let reports: Vec<_> = life
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Oracle {
                at,
                max_staleness,
                pass_gap,
                window_gap,
                stalest_at,
                ..
            } => Some((e, *at, *max_staleness, *pass_gap, *window_gap, *stalest_at)),
            _ => None,
        })
        .collect();
    let settle = bounds.recovery.as_nanos() as u64;
    let mut previous: Option<(u64, u64)> = None; // (at, max_staleness)
    for (i, &(_, at, max_staleness, pass_gap, window_gap, stalest_at)) in reports.iter().enumerate()
    {
        let next_window = reports[i + 1..]
            .iter()
            .map(|r| r.4)
            .find(|&gap| gap > 0)
            .unwrap_or(0);
        let lateness = Duration::from_nanos(window_gap.max(next_window));
        v.longest_pass_gap_us = v.longest_pass_gap_us.max(pass_gap as f64 / 1e3);
        let (since, before) = previous.unwrap_or((life.started, 0));
        let written_from = since.saturating_sub(max_staleness);
        let publishing = spans
            .iter()
            .filter(|&&(from, to, _)| from <= at && to >= written_from)
            .map(|&(_, _, span)| span)
            .max()
            .unwrap_or(0);
        v.longest_publish_span_us = v.longest_publish_span_us.max(publishing as f64 / 1e3);
        let bound = bounds.staleness
            + lateness.saturating_sub(bounds.period)
            + Duration::from_nanos(publishing);
        let stopped = life
            .stops
            .iter()
            .any(|&(s, c)| s <= at && c.saturating_add(settle) >= since);
        if max_staleness > before && !stopped {
            v.oracle_max_staleness_us = v.oracle_max_staleness_us.max(max_staleness as f64 / 1e3);
            if max_staleness > bound.as_nanos() as u64 {
                v.violations.push(format!(
                    "{}: a read returned a line{} {:.0} us stale (bound {:?}: {:?} with passes {:?} apart and a publication {:?} long), between {since} and {at}",
                    life.name,
                    stalest_at.map_or(String::new(), |o| format!(" at pool offset {o}")),
                    max_staleness as f64 / 1e3,
                    bound,
                    bounds.staleness,
                    lateness,
                    Duration::from_nanos(publishing),
                ));
            }
        }
        previous = Some((at, max_staleness));
    }
    let last = reports.last().map(|r| r.0);
    if let Some(&Event::Oracle {
        stale_reads,
        reuse_hazards,
        rejected_reads,
        lost_writes,
        lost_at,
        ..
    }) = last
    {
        v.oracle_stale_reads += stale_reads;
        v.oracle_reuse_hazards += reuse_hazards;
        v.oracle_lost_writes += lost_writes;
        let accepted = reuse_hazards.saturating_sub(rejected_reads);
        v.oracle_reuse_accepted += accepted;
        if accepted > 0 || lost_writes > 0 {
            let place =
                lost_at.map_or(String::new(), |o| format!(" (the last at pool offset {o})"));
            v.violations.push(format!(
                "{}: the oracle counted {reuse_hazards} loads of reused memory ({accepted} beyond the reads rejected) and {lost_writes} lost write-backs{place}",
                life.name
            ));
        }
    }
}

/// How long a write called at `start` that returned at `end` may block: the bound for
/// one writer lost, and a lease more for each further writer struck from a lease
/// before it began until it returned. Where stops hold memory
/// ([`Bounds::stops_hold_memory`]), the length of every stop during the write too.
fn call_bound(faults: &[FaultWindow], bounds: Bounds, start: u64, end: u64) -> Duration {
    let since = start.saturating_sub(bounds.per_writer_lost.as_nanos() as u64);
    let lost = faults
        .iter()
        .filter(|f| f.writer && f.start < end && f.end > since)
        .count() as u32;
    let held: u64 = faults
        .iter()
        .filter(|f| bounds.stops_hold_memory && f.is_stop() && f.start < end && f.end > start)
        .map(|f| f.end - f.start)
        .sum();
    bounds.call + bounds.per_writer_lost * lost.saturating_sub(1) + Duration::from_nanos(held)
}

/// Whether `start .. end` lies in a quiet window: at least one recovery bound after the
/// end of every fault before it, and before the start of the next one.
fn quiet(faults: &[FaultWindow], bounds: Bounds, start: u64, end: u64) -> bool {
    let settle = bounds.recovery.as_nanos() as u64;
    faults
        .iter()
        .all(|f| end < f.start || start > f.end.saturating_add(settle))
}

/// What must be true of `key` after `writes` (in order), holding `found` at the end.
fn judge(key: u64, writes: &[(WriteKind, WriteOutcome)], found: Option<String>) -> Option<String> {
    if writes
        .iter()
        .any(|(_, o)| matches!(o, WriteOutcome::Unknown(_)))
    {
        return None; // either way is right
    }
    let oversized = writes.iter().any(|(w, _)| *w == WriteKind::Oversized);
    if oversized {
        return match (found, writes.iter().any(|(_, o)| *o == WriteOutcome::Done)) {
            (_, true) => Some(format!("an oversized item under {key:#x} was acknowledged")),
            (Some(_), false) => Some(format!(
                "a refused oversized item under {key:#x} was applied"
            )),
            (None, false) => None,
        };
    }
    // Present at the end: the last acknowledged write was an insert.
    let last_done = writes
        .iter()
        .rev()
        .find(|(_, o)| *o == WriteOutcome::Done)
        .map(|(w, _)| *w);
    let ballast = key & BALLAST != 0;
    match (last_done, found) {
        (Some(WriteKind::Insert), None) => Some(format!("acknowledged insert of {key:#x} lost")),
        (Some(WriteKind::Insert), Some(v)) if !ballast && v != value_of(key) => {
            Some(format!("{key:#x} holds another value than written"))
        }
        (Some(WriteKind::Remove), Some(_)) => Some(format!(
            "{key:#x} is present after its acknowledged removal (an insert applied again?)"
        )),
        (None, Some(_)) => Some(format!(
            "{key:#x}: every write of it was refused, yet it is present"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(w: WriteKind) -> (WriteKind, WriteOutcome) {
        (w, WriteOutcome::Done)
    }

    /// A pass period and a staleness bound of 1 ms.
    fn bounds() -> Bounds {
        Bounds {
            call: Duration::from_secs(3),
            per_writer_lost: Duration::from_secs(1),
            recovery: Duration::from_millis(100),
            staleness: Duration::from_millis(1),
            period: Duration::from_millis(1),
            stops_hold_memory: false,
        }
    }

    /// An oracle report at `at` ms of a read `max_staleness` tenths of a millisecond
    /// stale, in a window whose passes ran `window_gap` tenths apart and whose writer
    /// took `publish_span` tenths to log an update.
    fn oracle_report(at: u64, max_staleness: u64, window_gap: u64, publish_span: u64) -> Event {
        let ms = 1_000_000;
        Event::Oracle {
            at: at * ms,
            stale_reads: 1,
            max_staleness: max_staleness * ms / 10,
            reuse_hazards: 0,
            rejected_reads: 0,
            lost_writes: 0,
            // A stop long ago made the longest gap of the process's life large.
            pass_gap: 2_000 * ms,
            window_gap: window_gap * ms / 10,
            publish_span: publish_span * ms / 10,
            lost_at: None,
            stalest_at: Some(4096),
        }
    }
    #[test]
    fn each_kind_of_loss_is_judged_a_violation() {
        let v = Some(value_of(1));
        assert!(judge(1, &[done(WriteKind::Insert)], v.clone()).is_none());
        assert!(judge(1, &[done(WriteKind::Insert)], None).is_some()); // lost
        assert!(judge(1, &[done(WriteKind::Insert)], Some("other".into())).is_some());
        let removed = [done(WriteKind::Insert), done(WriteKind::Remove)];
        assert!(judge(1, &removed, None).is_none());
        assert!(judge(1, &removed, v.clone()).is_some()); // applied twice
        let refused = [(
            WriteKind::Insert,
            WriteOutcome::Refused("HeapExhausted".into()),
        )];
        assert!(judge(1, &refused, v.clone()).is_some()); // applied after all
        let unknown = [(WriteKind::Insert, WriteOutcome::Unknown("Timeout".into()))];
        assert!(judge(1, &unknown, v.clone()).is_none() && judge(1, &unknown, None).is_none());
        let huge = [(
            WriteKind::Oversized,
            WriteOutcome::Refused("TooLarge".into()),
        )];
        assert!(judge(1, &huge, None).is_none());
        assert!(judge(1, &huge, Some("x".into())).is_some());
    }

    /// A map that holds nothing.
    struct Empty;
    impl Final for Empty {
        fn value(&self, _: u64) -> Result<Option<String>, String> {
            Ok(None)
        }
    }

    #[test]
    fn a_write_the_process_was_killed_inside_may_have_gone_either_way() {
        let bounds = bounds();
        let life = |events| Life {
            name: "worker 0.0".into(),
            failed: None,
            started: 0,
            ended: None,
            stops: Vec::new(),
            events,
        };
        let insert = Event::Wrote {
            write: WriteKind::Insert,
            key: 5,
            start: 10,
            end: 20,
            outcome: WriteOutcome::Done,
        };
        let removing = Event::Writing {
            write: WriteKind::Remove,
            key: 5,
        };
        // Inserted, then killed inside its removal: absent is right.
        let killed = life(vec![insert.clone(), removing]);
        assert!(check(&[killed], &[], bounds, &Empty).violations.is_empty());
        // Inserted and nothing else: absent is a loss.
        let lost = check(&[life(vec![insert])], &[], bounds, &Empty);
        assert_eq!(lost.violations.len(), 1, "{:?}", lost.violations);
    }

    /// A key the joined reader missed is lost unless a removal of it may have begun
    /// before the read; a value no write stored is always wrong.
    #[test]
    fn a_joined_reader_finds_what_was_acknowledged_and_only_what_was_written() {
        let bounds = bounds();
        let life = |name: &str, started, events| Life {
            name: name.into(),
            failed: None,
            started,
            ended: None,
            stops: Vec::new(),
            events,
        };
        let wrote = |write, start| Event::Wrote {
            write,
            key: 5,
            start,
            end: start + 10,
            outcome: WriteOutcome::Done,
        };
        let unseen = |at| {
            life(
                "joiner 0.0",
                0,
                vec![Event::Unseen {
                    key: 5,
                    at,
                    acknowledged: 20,
                }],
            )
        };
        // The map holds the key at the end, so only the joined read is judged.
        struct Holds;
        impl Final for Holds {
            fn value(&self, key: u64) -> Result<Option<String>, String> {
                Ok(Some(value_of(key)))
            }
        }
        let judge = |lives: &[Life]| check(lives, &[], bounds, &Holds).violations;
        let inserted = life("worker 0.0", 0, vec![wrote(WriteKind::Insert, 10)]);
        assert_eq!(judge(&[inserted.clone(), unseen(5_000)]).len(), 1);
        // Removed (and inserted again by nobody): a removal begun at 4,000 explains a
        // miss at 5,000, not one at 3,000.
        let removed = life(
            "worker 0.0",
            0,
            vec![
                wrote(WriteKind::Insert, 10),
                wrote(WriteKind::Remove, 4_000),
            ],
        );
        struct Gone;
        impl Final for Gone {
            fn value(&self, _: u64) -> Result<Option<String>, String> {
                Ok(None)
            }
        }
        let judge_gone = |lives: &[Life]| check(lives, &[], bounds, &Gone).violations;
        assert!(judge_gone(&[removed.clone(), unseen(5_000)]).is_empty());
        assert_eq!(judge_gone(&[removed, unseen(3_000)]).len(), 1);
        // A removal cut short by a kill may have begun any time in its process's life.
        let cut_short = life(
            "worker 0.1",
            2_000,
            vec![Event::Writing {
                write: WriteKind::Remove,
                key: 5,
            }],
        );
        assert!(judge_gone(&[inserted.clone(), cut_short.clone(), unseen(3_000)]).is_empty());
        assert_eq!(
            judge_gone(&[inserted.clone(), cut_short, unseen(1_000)]).len(),
            1
        );
        let misread = life(
            "joiner 0.0",
            0,
            vec![Event::Misread {
                key: 5,
                at: 100,
                found: value_of(6),
            }],
        );
        let v = judge(&[inserted, misread]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("which no write stored there"), "{v:?}");
    }

    #[test]
    fn a_stale_read_is_judged_by_the_passes_lateness_around_it() {
        let bounds = bounds();
        let ms = 1_000_000;
        let report =
            |at, max_staleness, window_gap| oracle_report(at, max_staleness, window_gap, 0);
        let judge = |events| {
            let life = Life {
                name: "worker 0.0".into(),
                failed: None,
                started: 0,
                ended: None,
                stops: vec![(10 * ms, 2_010 * ms)],
                events,
            };
            check(&[life], &[], bounds, &Empty).violations
        };
        // 1.5 ms stale while the passes ran 2.5 ms apart in that window: within the bound
        // (1 ms + 2.5 - 1); the same while they ran on time (1 ms): 0.5 ms too stale.
        let settled = report(2_500, 0, 10);
        assert!(judge(vec![settled.clone(), report(3_000, 15, 25)]).is_empty());
        assert_eq!(judge(vec![settled.clone(), report(3_000, 15, 10)]).len(), 1);
        // The late pass ended only in the next window: it still counts.
        let late = vec![
            settled.clone(),
            report(3_000, 15, 10),
            report(3_500, 15, 25),
        ];
        assert!(judge(late).is_empty());
        // Held up longer than a window: it ended two windows later, none in between.
        let held = |between| {
            judge(vec![
                settled.clone(),
                report(3_000, 15, 10),
                report(3_500, 15, between),
                report(4_000, 15, 25),
            ])
        };
        assert!(held(0).is_empty());
        // A pass that ended in between on time was the one that ended the staleness.
        assert_eq!(held(10).len(), 1);
        // Inside the stop and the settling after it, nothing counts.
        assert!(judge(vec![report(1_500, 90, 10), report(2_050, 90, 10)]).is_empty());
    }

    /// A writer descheduled between its write-back and its log append made a read
    /// staler by that long: the writer's publish span in that time is added to the
    /// bound, and one in another time is not.
    #[test]
    fn a_stale_read_is_judged_by_the_writers_publish_span_around_it() {
        let bounds = bounds();
        let report =
            |at, max_staleness, publish_span| oracle_report(at, max_staleness, 10, publish_span);
        let life = |name: &str, events| Life {
            name: name.into(),
            failed: None,
            started: 0,
            ended: None,
            stops: vec![],
            events,
        };
        let judge = |writer_reports| {
            let reader = life("reader", vec![report(500, 0, 0), report(1_000, 25, 0)]);
            let writer = life("writer", writer_reports);
            check(&[reader, writer], &[], bounds, &Empty).violations
        };
        // 2.5 ms stale against a 1 ms bound: the writer took 2 ms to log in that window.
        assert!(judge(vec![report(500, 0, 0), report(1_000, 0, 20)]).is_empty());
        // Only 1 ms there; 2 ms long before: too stale.
        assert_eq!(
            judge(vec![report(100, 0, 20), report(1_000, 0, 10)]).len(),
            1
        );
    }

    #[test]
    fn a_failure_in_a_quiet_window_is_a_violation_and_one_after_a_fault_is_not() {
        let bounds = bounds();
        let faults = [FaultWindow {
            kind: "kill".into(),
            target: None,
            writer: false,
            start: 1_000_000_000,
            end: 2_000_000_000,
        }];
        assert!(!quiet(&faults, bounds, 2_050_000_000, 2_060_000_000)); // settling
        assert!(quiet(&faults, bounds, 2_200_000_000, 2_210_000_000));
        assert!(quiet(&faults, bounds, 100, 200));
        assert!(!quiet(&faults, bounds, 900_000_000, 1_100_000_000)); // overlaps
    }

    /// A client's write that fails because the run's end killed the writer's process
    /// first is no violation: the end of the run is a window of its own.
    #[test]
    fn a_write_the_end_of_the_run_cut_short_is_no_violation() {
        let s = 1_000_000_000u64;
        let failed = |at: u64| Life {
            name: "worker 3.3".into(),
            failed: None,
            started: 0,
            ended: Some(at + 1),
            stops: Vec::new(),
            events: vec![Event::Wrote {
                write: WriteKind::Remove,
                key: 7,
                start: at - 1_000,
                end: at,
                outcome: WriteOutcome::Unknown("NoWriter".into()),
            }],
        };
        let end = FaultWindow {
            kind: "EndOfRun".into(),
            target: None,
            writer: true,
            start: 30 * s,
            end: 30 * s + 50_000_000,
        };
        let judged = |at| check(&[failed(at)], std::slice::from_ref(&end), bounds(), &Empty);
        assert!(judged(30 * s + 10_000_000).violations.is_empty());
        assert_eq!(
            judged(20 * s).violations.len(),
            1,
            "a failure in a quiet time is one"
        );
    }

    /// The violations of one process's write that took 4.5 s (against a 3 s bound),
    /// from 10 s to 14.5 s, under `faults`.
    fn one_long_write(faults: &[FaultWindow], bounds: Bounds) -> Vec<String> {
        let s = 1_000_000_000u64;
        let write = Event::Wrote {
            write: WriteKind::Remove,
            key: 7,
            start: 10 * s,
            end: 14 * s + 500_000_000, // 4.5 s against a 3 s bound
            outcome: WriteOutcome::Done,
        };
        let life = Life {
            name: "worker 0.0".into(),
            failed: None,
            started: 0,
            ended: None,
            stops: Vec::new(),
            events: vec![write],
        };
        check(&[life], faults, bounds, &Empty).violations
    }

    #[test]
    fn a_write_may_block_a_lease_longer_for_each_further_writer_lost_during_it() {
        let bounds = bounds();
        let s = 1_000_000_000u64;
        let writer_struck = |start: u64, end: u64| FaultWindow {
            kind: "KillWriter".into(),
            target: Some("worker 1.0".into()),
            writer: true,
            start,
            end,
        };
        let blocked = |faults: &[FaultWindow]| one_long_write(faults, bounds);
        // One writer lost (or none): 3 s at most.
        assert_eq!(blocked(&[]).len(), 1);
        assert_eq!(blocked(&[writer_struck(11 * s, 11 * s + 1)]).len(), 1);
        // Two writers lost during it: 4 s; three (one a moment before it began): 5 s.
        let two = [
            writer_struck(11 * s, 11 * s + 1),
            writer_struck(12 * s, 12 * s + 1),
        ];
        assert_eq!(blocked(&two).len(), 1);
        let before = writer_struck(9 * s + 500_000_000, 9 * s + 600_000_000);
        let three = [before, two[0].clone(), two[1].clone()];
        assert!(blocked(&three).is_empty(), "{:?}", blocked(&three));
        // A fault that struck another process, or ended long before, counts for nothing.
        let others = [
            FaultWindow {
                writer: false,
                ..two[0].clone()
            },
            writer_struck(2 * s, 2 * s + 1),
            two[1].clone(),
        ];
        assert_eq!(blocked(&others).len(), 1);
    }

    /// Over the emulator a stopped process may hold a line lock a write needs: the write
    /// may wait out the stop. On real memory a stop of a process that is not the writer
    /// holds nothing up.
    #[test]
    fn over_the_emulator_a_write_may_wait_out_any_stop() {
        let s = 1_000_000_000u64;
        let stop = FaultWindow {
            kind: "Stop".into(),
            target: Some("worker 2.0".into()),
            writer: false,
            start: 11 * s,
            end: 13 * s,
        };
        let blocked = |stops_hold_memory: bool, faults: &[FaultWindow]| {
            let bounds = Bounds {
                stops_hold_memory,
                ..bounds()
            };
            one_long_write(faults, bounds).len()
        };
        assert_eq!(blocked(false, std::slice::from_ref(&stop)), 1);
        assert_eq!(blocked(true, std::slice::from_ref(&stop)), 0); // 3 s + the 2 s stop
        let short = FaultWindow {
            end: 11 * s + 500_000_000,
            ..stop.clone()
        };
        assert_eq!(blocked(true, &[short]), 1); // 3.5 s is not enough
        let kill = FaultWindow {
            kind: "Kill".into(),
            ..stop
        };
        assert_eq!(blocked(true, &[kill]), 1); // a killed process holds no lock
    }

    #[test]
    fn a_journal_two_processes_wrote_voids_the_verdict() {
        let opened = |at| Event::Opened {
            at,
            node: 0,
            writer: false,
        };
        let life = |events| Life {
            name: "worker 0.2".into(),
            failed: None,
            started: 0,
            ended: None,
            stops: Vec::new(),
            events,
        };
        let once = check(&[life(vec![opened(1)])], &[], bounds(), &Empty);
        assert!(once.violations.is_empty(), "{:?}", once.violations);
        let twice = check(&[life(vec![opened(1), opened(2)])], &[], bounds(), &Empty);
        assert_eq!(twice.violations.len(), 1, "{:?}", twice.violations);
        assert!(twice.violations[0].contains("another run"));
    }
}
