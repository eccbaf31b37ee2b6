//! Partitions as processes of one machine that exchange through files of one directory:
//! the [`Collective`] of partitions launched as processes
//! ([`Placement::Processes`](crate::Placement::Processes)) while they read a graph in
//! shares, before the region they will share exists.
//!
//! Step `s` of a group tagged `t` is a file per partition, `t.s.p` (an all-to-all: one
//! per receiver, `t.s.p.q`), written under a temporary name and renamed into place, so a
//! reader finds a whole file or none. A partition waits until every partition's file of
//! its step exists. Whoever watches the group stops it by creating `abort` in the
//! directory ([`FileGroup::abort`]); a waiting partition also stops when its parent
//! process changes (the launcher that would stop it is gone).
//!
//! What a step sends is gone once it is read: a receiver removes the all-to-all files
//! sent to it, and a partition removes its gathered file of step `s` once every
//! partition has written step `s + 1` (by then all have read step `s`).

use super::share::Collective;
use crate::error::GraphError;
use std::cell::Cell;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file whose presence stops a group.
const ABORT: &str = "abort";

/// One partition's member of a group exchanging through a directory.
#[derive(Debug)]
pub struct FileGroup {
    dir: PathBuf,
    tag: String,
    part: usize,
    parts: usize,
    step: Cell<u64>,
    /// This partition's gathered file of the last step, removed after the next one.
    last: Cell<Option<u64>>,
    parent: Option<u32>,
}

fn io(file: &Path, source: std::io::Error) -> GraphError {
    GraphError::Io {
        file: file.to_path_buf(),
        source,
    }
}

fn parent_id() -> Option<u32> {
    #[cfg(unix)]
    return Some(std::os::unix::process::parent_id());
    #[cfg(not(unix))]
    None
}

impl FileGroup {
    /// Partition `partition` of `partitions` exchanging in `dir` (which must exist),
    /// under `tag`: the members of one group use one tag, and a later group in the same
    /// directory another.
    ///
    /// # Errors
    ///
    /// [`GraphError::InvalidArgument`] when `partition` is not below `partitions` or
    /// `tag` could name another file; [`GraphError::Io`] when `dir` is not a directory.
    pub fn join(
        dir: impl Into<PathBuf>,
        tag: &str,
        partition: usize,
        partitions: usize,
    ) -> Result<FileGroup, GraphError> {
        let dir = dir.into();
        if partition >= partitions {
            return Err(GraphError::InvalidArgument {
                reason: format!("partition {partition} of a group of {partitions}"),
            });
        }
        if tag.is_empty() || !tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(GraphError::InvalidArgument {
                reason: format!("{tag:?} is not a group's tag (letters, digits and '-')"),
            });
        }
        if !dir.is_dir() {
            let source = std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory");
            return Err(io(&dir, source));
        }
        Ok(FileGroup {
            dir,
            tag: tag.to_owned(),
            part: partition,
            parts: partitions,
            step: Cell::new(0),
            last: Cell::new(None),
            parent: parent_id(),
        })
    }

    /// Stops every group exchanging in `dir`: each member waiting, or about to, returns
    /// [`GraphError::Aborted`].
    ///
    /// # Errors
    ///
    /// [`GraphError::Io`] when the marker cannot be created.
    pub fn abort(dir: &Path) -> Result<(), GraphError> {
        let path = dir.join(ABORT);
        std::fs::write(&path, b"").map_err(|e| io(&path, e))
    }

    fn name(&self, step: u64, from: usize, to: Option<usize>) -> PathBuf {
        let t = &self.tag;
        self.dir.join(match to {
            Some(q) => format!("{t}.{step}.{from}.{q}"),
            None => format!("{t}.{step}.{from}"),
        })
    }

    fn write(&self, path: &Path, words: &[u64]) -> Result<(), GraphError> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".part");
        let tmp = PathBuf::from(tmp);
        let mut f = std::fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
        f.write_all(bytemuck::cast_slice(words))
            .map_err(|e| io(&tmp, e))?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(|e| io(path, e))
    }

    fn stopped(&self) -> Result<(), GraphError> {
        if self.dir.join(ABORT).exists() || (self.parent.is_some() && self.parent != parent_id()) {
            return Err(GraphError::Aborted);
        }
        Ok(())
    }

    /// Waits until every one of `paths` exists.
    fn wait(&self, paths: &[PathBuf]) -> Result<(), GraphError> {
        let mut pause = Duration::from_micros(50);
        for path in paths {
            while !path.exists() {
                self.stopped()?;
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(10));
            }
        }
        // Checked once more after the files: an abort made before the last of them was
        // written is seen here, whatever the files say.
        self.stopped()
    }

    fn read(path: &Path) -> Result<Vec<u64>, GraphError> {
        let mut f = std::fs::File::open(path).map_err(|e| io(path, e))?;
        let len = f.metadata().map_err(|e| io(path, e))?.len();
        let words = usize::try_from(len / 8).map_err(|_| GraphError::Exchange {
            what: "an exchanged file does not fit this address space",
        })?;
        if len % 8 != 0 {
            return Err(GraphError::Exchange {
                what: "an exchanged file is not whole words",
            });
        }
        let mut out = vec![0u64; words];
        f.read_exact(bytemuck::cast_slice_mut(&mut out))
            .map_err(|e| io(path, e))?;
        Ok(out)
    }

    /// The next step's number.
    fn next(&self) -> u64 {
        let s = self.step.get();
        self.step.set(s + 1);
        s
    }

    /// Every partition's `mine` on partition 0 (`Some`, in partition order); the others
    /// send theirs and go on at once (`None`).
    ///
    /// # Errors
    ///
    /// As [`Collective::all_gather`].
    pub fn gather(&self, mine: &[u64]) -> Result<Option<Vec<Vec<u64>>>, GraphError> {
        let s = self.next();
        self.write(&self.name(s, self.part, Some(0)), mine)?;
        if self.part != 0 {
            return Ok(None);
        }
        let all: Vec<PathBuf> = (0..self.parts).map(|q| self.name(s, q, Some(0))).collect();
        self.wait(&all)?;
        let mut out = Vec::with_capacity(self.parts);
        for path in &all {
            out.push(Self::read(path)?);
            let _ = std::fs::remove_file(path);
        }
        Ok(Some(out))
    }

    /// Removes this partition's gathered file of an earlier step: call once every
    /// partition has written a later step.
    fn forget_last(&self) {
        if let Some(s) = self.last.take() {
            let _ = std::fs::remove_file(self.name(s, self.part, None));
        }
    }
}

impl Collective for FileGroup {
    fn partition(&self) -> usize {
        self.part
    }

    fn partitions(&self) -> usize {
        self.parts
    }

    fn all_gather(&self, mine: &[u64]) -> Result<Vec<u64>, GraphError> {
        let s = self.next();
        self.write(&self.name(s, self.part, None), mine)?;
        let all: Vec<PathBuf> = (0..self.parts).map(|q| self.name(s, q, None)).collect();
        self.wait(&all)?;
        self.forget_last();
        self.last.set(Some(s));
        let mut out = Vec::new();
        for path in &all {
            out.extend(Self::read(path)?);
        }
        Ok(out)
    }

    fn all_to_all(&self, out: Vec<Vec<u64>>) -> Result<Vec<u64>, GraphError> {
        if out.len() != self.parts {
            return Err(GraphError::Exchange {
                what: "an all-to-all needs one list per partition",
            });
        }
        let s = self.next();
        for (q, words) in out.into_iter().enumerate() {
            self.write(&self.name(s, self.part, Some(q)), &words)?;
        }
        let all: Vec<PathBuf> = (0..self.parts)
            .map(|q| self.name(s, q, Some(self.part)))
            .collect();
        self.wait(&all)?;
        self.forget_last();
        let mut arrived = Vec::new();
        for path in &all {
            arrived.extend(Self::read(path)?);
            let _ = std::fs::remove_file(path);
        }
        Ok(arrived)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// The members of a group of `parts`, each on a thread, running `each` together.
    fn together<T: Send>(
        dir: &Path,
        parts: usize,
        each: impl Fn(&FileGroup) -> T + Sync,
    ) -> Vec<T> {
        std::thread::scope(|s| {
            let each = &each;
            let handles: Vec<_> = (0..parts)
                .map(|p| s.spawn(move || each(&FileGroup::join(dir, "t", p, parts).unwrap())))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// Every collective gives every member what one process holding all the members'
    /// words would compute, and what an exchange sent is gone once it is read.
    #[test]
    fn members_exchange_as_one_process_would() {
        let dir = tempfile::tempdir().unwrap();
        let results = together(dir.path(), 3, |g| {
            let p = g.partition() as u64;
            // Lengths differ from member to member.
            let gathered = g.all_gather(&vec![p; p as usize + 1]).unwrap();
            let out = (0..3).map(|q| vec![p * 10 + q; q as usize]).collect();
            let arrived = g.all_to_all(out).unwrap();
            let mut bits = [1 << p, 1 << (p + 8)];
            g.or_all(&mut bits).unwrap();
            let mut counts = [p as u32, 7];
            g.sum_all(&mut counts).unwrap();
            let first = g.gather(&[p + 100]).unwrap();
            (gathered, arrived, bits, counts, first)
        });
        for (p, (gathered, arrived, bits, counts, first)) in results.into_iter().enumerate() {
            assert_eq!(gathered, [0, 1, 1, 2, 2, 2]);
            let q = p as u64;
            let sent_here: Vec<u64> = (0..3).flat_map(|r| vec![r * 10 + q; p]).collect();
            assert_eq!(arrived, sent_here, "partition {p}");
            assert_eq!(bits, [0b111, 0b111 << 8]);
            assert_eq!(counts, [3, 21]);
            match p {
                0 => assert_eq!(first, Some(vec![vec![100], vec![101], vec![102]])),
                _ => assert_eq!(first, None),
            }
        }
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            left.iter().all(|name| name.split('.').count() == 3),
            "an all-to-all's or a gather's files are left: {left:?}"
        );
        assert!(
            left.len() <= 3,
            "at most the last gathered step's files are left: {left:?}"
        );
    }

    /// A member waiting for the others returns once the group is aborted, and one that
    /// joins an aborted group stops at its first exchange.
    #[test]
    fn an_aborted_group_stops_its_waiting_members() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        std::thread::scope(|s| {
            let waiting = s.spawn(|| {
                let g = FileGroup::join(dir.path(), "t", 0, 2).unwrap();
                g.all_gather(&[1])
            });
            std::thread::sleep(Duration::from_millis(50));
            FileGroup::abort(dir.path()).unwrap();
            assert!(matches!(waiting.join().unwrap(), Err(GraphError::Aborted)));
        });
        assert!(started.elapsed() < Duration::from_secs(30));
        // Even with every member's file there: the abort decides.
        let results = together(dir.path(), 2, |g| g.all_gather(&[7]));
        assert!(
            results
                .iter()
                .all(|r| matches!(r, Err(GraphError::Aborted)))
        );
    }

    #[test]
    fn what_names_no_group_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let bad = |r: Result<FileGroup, GraphError>| match r {
            Err(GraphError::InvalidArgument { reason }) => reason,
            other => panic!("{other:?}"),
        };
        bad(FileGroup::join(dir.path(), "t", 2, 2));
        for tag in ["", "a.b", "../x", "a/b", "a b"] {
            assert!(bad(FileGroup::join(dir.path(), tag, 0, 2)).contains("tag"));
        }
        for tag in ["read", "BiOnDemand-run-bi", "x9"] {
            FileGroup::join(dir.path(), tag, 0, 2).unwrap();
        }
        let missing = dir.path().join("missing");
        assert!(matches!(
            FileGroup::join(&missing, "t", 0, 2),
            Err(GraphError::Io { .. })
        ));
    }
}
