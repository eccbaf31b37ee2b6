//! What a worker writes down, one line per event, and how the check reads it back.
//!
//! Each process appends to a journal of its own with one `write` per line, so a process
//! killed at any moment leaves every line it finished (the kernel keeps them) and at
//! most a torn last line, which [`read`] skips. Times are nanoseconds of the system
//! clock, the one clock every process of the run shares.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

/// Now, in nanoseconds on the host's monotonic clock, which every process of the run
/// reads alike (and the emulator's oracle too, so staleness and windows agree).
pub fn now() -> u64 {
    bi::core::mem::host_ns()
}

/// What a write of the map did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Acknowledged: it is applied.
    Done,
    /// Refused with an error whose kind says it was not applied (heap exhausted, too
    /// large, no writer: the successor reported it failed), never applied later.
    Refused(String),
    /// Failed with an error that leaves it open (a timeout: the writer may be alive and
    /// slow): applied or not.
    Unknown(String),
}

/// Which write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// Insert a new key (each key is inserted once).
    Insert,
    /// Remove a key this process inserted.
    Remove,
    /// Insert a value larger than the pool: must be refused.
    Oversized,
}

impl WriteKind {
    fn word(self) -> &'static str {
        match self {
            WriteKind::Insert => "insert",
            WriteKind::Remove => "remove",
            WriteKind::Oversized => "oversized",
        }
    }

    fn of(word: &str) -> Option<WriteKind> {
        match word {
            "insert" => Some(WriteKind::Insert),
            "remove" => Some(WriteKind::Remove),
            "oversized" => Some(WriteKind::Oversized),
            _ => None,
        }
    }
}

/// One line of a journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A write of `key` is about to be called: if no `Wrote` line follows (the process
    /// was killed inside the call), it may have been applied or not.
    Writing { write: WriteKind, key: u64 },
    /// The process opened the pool as `node`, holding the map's writer role or not.
    Opened { at: u64, node: usize, writer: bool },
    /// A write of `key`, called at `start`, returned at `end`.
    Wrote {
        write: WriteKind,
        key: u64,
        start: u64,
        end: u64,
        outcome: WriteOutcome,
    },
    /// The process did not read its own write of `key` back (`present`: what it wrote
    /// last leaves the key present).
    OwnWriteUnread { key: u64, at: u64, present: bool },
    /// What the emulator's oracle counted for the process's node so far.
    Oracle {
        at: u64,
        stale_reads: u64,
        max_staleness: u64,
        reuse_hazards: u64,
        /// Reads the process's runtime rejected (their stamps did not match): a load of
        /// reused memory is caught when the read that made it is rejected.
        rejected_reads: u64,
        lost_writes: u64,
        /// The longest gap between two of the process's passes so far (ns): what a read
        /// may be stale by (plus the skew allowance).
        pass_gap: u64,
        /// The longest gap between two of the process's passes that ended since its last
        /// report (ns): its passes' lateness in that window, which a stop long ago does
        /// not inflate.
        window_gap: u64,
        /// The longest time the process's writer took since its last report from an
        /// update's first store to a line other nodes may hold to the log append (ns):
        /// how much later than the write-back the staleness bound starts counting.
        publish_span: u64,
        /// The pool offset of the line of the last lost write-back, if any.
        lost_at: Option<u64>,
        /// The pool offset of the line whose copy was `max_staleness` stale, if any.
        stalest_at: Option<u64>,
    },
    /// Something the process could not do (the words of the error).
    Trouble { at: u64, what: String },
    /// A joined reader read `found` under `key`, which no write stored there.
    Misread { key: u64, at: u64, found: String },
    /// A joined reader did not find `key`, whose insert was acknowledged at
    /// `acknowledged` and whose removal no journal had begun.
    Unseen {
        key: u64,
        at: u64,
        acknowledged: u64,
    },
    /// A joined reader's read of `key` took from `start` to `end`.
    SlowRead { key: u64, start: u64, end: u64 },
    /// A joined reader's totals so far: reads, and reads that found what the journals
    /// say.
    JoinedReads { at: u64, reads: u64, checked: u64 },
}

impl Event {
    fn line(&self) -> String {
        match self {
            Event::Writing { write, key } => format!("writing {} {key}", write.word()),
            Event::Opened { at, node, writer } => {
                format!("opened {at} {node} {}", u8::from(*writer))
            }
            Event::Wrote {
                write,
                key,
                start,
                end,
                outcome,
            } => {
                let w = write.word();
                let o = match outcome {
                    WriteOutcome::Done => "done".to_string(),
                    WriteOutcome::Refused(k) => format!("refused:{k}"),
                    WriteOutcome::Unknown(k) => format!("unknown:{k}"),
                };
                format!("wrote {w} {key} {start} {end} {o}")
            }
            Event::OwnWriteUnread { key, at, present } => {
                format!("unread {key} {at} {}", u8::from(*present))
            }
            Event::Oracle {
                at,
                stale_reads,
                max_staleness,
                reuse_hazards,
                rejected_reads,
                lost_writes,
                pass_gap,
                window_gap,
                publish_span,
                lost_at,
                stalest_at,
            } => {
                let offset = |o: &Option<u64>| o.map_or("-".to_string(), |o| o.to_string());
                format!(
                    "oracle {at} {stale_reads} {max_staleness} {reuse_hazards} {rejected_reads} {lost_writes} {pass_gap} {window_gap} {publish_span} {} {}",
                    offset(lost_at),
                    offset(stalest_at)
                )
            }
            Event::Trouble { at, what } => format!("trouble {at} {}", what.replace('\n', " ")),
            Event::Misread { key, at, found } => {
                format!("misread {key} {at} {}", found.replace(['\n', ' '], "_"))
            }
            Event::Unseen {
                key,
                at,
                acknowledged,
            } => format!("unseen {key} {at} {acknowledged}"),
            Event::SlowRead { key, start, end } => format!("slow-read {key} {start} {end}"),
            Event::JoinedReads { at, reads, checked } => {
                format!("joined-reads {at} {reads} {checked}")
            }
        }
    }

    fn parse(line: &str) -> Option<Event> {
        let mut w = line.split(' ');
        let tag = w.next()?;
        let mut num = || w.next()?.parse::<u64>().ok();
        Some(match tag {
            "opened" => Event::Opened {
                at: num()?,
                node: num()? as usize,
                writer: num()? != 0,
            },
            "unread" => Event::OwnWriteUnread {
                key: num()?,
                at: num()?,
                present: num()? != 0,
            },
            "oracle" => Event::Oracle {
                at: num()?,
                stale_reads: num()?,
                max_staleness: num()?,
                reuse_hazards: num()?,
                rejected_reads: num()?,
                lost_writes: num()?,
                pass_gap: num()?,
                window_gap: num()?,
                publish_span: num()?,
                lost_at: num(),
                stalest_at: num(),
            },
            "misread" => {
                let mut parts = line.splitn(4, ' ').skip(1);
                Event::Misread {
                    key: parts.next()?.parse().ok()?,
                    at: parts.next()?.parse().ok()?,
                    found: parts.next().unwrap_or("").to_string(),
                }
            }
            "unseen" => Event::Unseen {
                key: num()?,
                at: num()?,
                acknowledged: num()?,
            },
            "slow-read" => Event::SlowRead {
                key: num()?,
                start: num()?,
                end: num()?,
            },
            "joined-reads" => Event::JoinedReads {
                at: num()?,
                reads: num()?,
                checked: num()?,
            },
            "trouble" => {
                let mut parts = line.splitn(3, ' ');
                parts.next();
                Event::Trouble {
                    at: parts.next()?.parse().ok()?,
                    what: parts.next().unwrap_or("").to_string(),
                }
            }
            "writing" => {
                let mut parts = line.split(' ').skip(1);
                Event::Writing {
                    write: WriteKind::of(parts.next()?)?,
                    key: parts.next()?.parse().ok()?,
                }
            }
            "wrote" => {
                let mut parts = line.split(' ').skip(1);
                let write = WriteKind::of(parts.next()?)?;
                let key = parts.next()?.parse().ok()?;
                let start = parts.next()?.parse().ok()?;
                let end = parts.next()?.parse().ok()?;
                let outcome = match parts.next()?.split_once(':') {
                    None => WriteOutcome::Done,
                    Some(("refused", k)) => WriteOutcome::Refused(k.to_string()),
                    Some(("unknown", k)) => WriteOutcome::Unknown(k.to_string()),
                    Some(_) => return None,
                };
                Event::Wrote {
                    write,
                    key,
                    start,
                    end,
                    outcome,
                }
            }
            _ => return None,
        })
    }
}

/// A journal being written.
pub struct Journal {
    file: File,
    /// The words of the last error noted, so that a run of one error is noted once.
    last_error: String,
}

impl Journal {
    /// Creates the journal at `path` (appending if it exists).
    pub fn create(path: &Path) -> std::io::Result<Journal> {
        Ok(Journal {
            file: OpenOptions::new().create(true).append(true).open(path)?,
            last_error: String::new(),
        })
    }

    /// Appends `event` with one write.
    pub fn note(&mut self, event: &Event) {
        let mut line = event.line();
        line.push('\n');
        // A journal that cannot be written makes the run's check incomplete, not wrong:
        // the check only trusts what it reads.
        let _ = self.file.write_all(line.as_bytes());
    }

    /// Notes an error's words, unless they are those of the last error noted.
    pub fn note_error(&mut self, what: String) {
        if what != self.last_error {
            self.note(&Event::Trouble {
                at: now(),
                what: what.clone(),
            });
            self.last_error = what;
        }
    }
}

/// Every whole line of the journal at `path`, parsed (a torn or unknown line skipped).
pub fn read(path: &Path) -> std::io::Result<Vec<Event>> {
    let file = File::open(path)?;
    Ok(BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| Event::parse(&l))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_reads_back_as_written() {
        let events = [
            Event::Writing {
                write: WriteKind::Remove,
                key: 9,
            },
            Event::Opened {
                at: 1,
                node: 3,
                writer: true,
            },
            Event::Wrote {
                write: WriteKind::Remove,
                key: 7 << 48,
                start: 5,
                end: 9,
                outcome: WriteOutcome::Refused("HeapExhausted".into()),
            },
            Event::Wrote {
                write: WriteKind::Insert,
                key: 1,
                start: 5,
                end: 9,
                outcome: WriteOutcome::Done,
            },
            Event::OwnWriteUnread {
                key: 4,
                at: 2,
                present: false,
            },
            Event::Oracle {
                at: 1,
                stale_reads: 2,
                max_staleness: 3,
                reuse_hazards: 4,
                rejected_reads: 6,
                lost_writes: 5,
                pass_gap: 7,
                window_gap: 3,
                publish_span: 9,
                lost_at: Some(4096),
                stalest_at: Some(8192),
            },
            Event::Oracle {
                at: 1,
                stale_reads: 0,
                max_staleness: 0,
                reuse_hazards: 0,
                rejected_reads: 0,
                lost_writes: 0,
                pass_gap: 7,
                window_gap: 0,
                publish_span: 0,
                lost_at: None,
                stalest_at: None,
            },
            Event::Trouble {
                at: 8,
                what: "no free node: all 16 taken".into(),
            },
            Event::Misread {
                key: 3,
                at: 4,
                found: "0000000000000003-another_key".into(),
            },
            Event::Unseen {
                key: 5,
                at: 9,
                acknowledged: 2,
            },
            Event::SlowRead {
                key: 6,
                start: 1,
                end: 900,
            },
            Event::JoinedReads {
                at: 7,
                reads: 10,
                checked: 9,
            },
        ];
        for e in events {
            assert_eq!(Event::parse(&e.line()), Some(e));
        }
        assert_eq!(Event::parse("wrote insert 12 3"), None); // torn
    }
}
