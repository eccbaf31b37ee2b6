//! The stacks of every process of a run, taken while a write outlasts the bound the check
//! holds it to: what the blocked call waits for, and what the others were doing then.
//!
//! A call blocked past its bound is a violation, but its journal lines say only how long
//! it took. So each worker runs a watcher thread: when the call in progress has run
//! longer than it is given (the bound of a call during which one more writer was lost
//! than the check allows for by default: faults the worker cannot see lengthen the
//! bound), it asks `gdb` (if the machine has it) for the backtrace of every thread of
//! every process that opened the run's pool (found by the `--pool` argument on their
//! command lines), into `DIR/stall-NAME-MS.txt`, which the summary lists. A call during
//! which the watcher itself did not run on time (its process was stopped, or starved)
//! is not judged: the check excludes a stopped process's calls too. Attaching stops each
//! process for a moment, so a run takes at most [`MOST_DUMPS`] of them.

use crate::journal::now;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// When the call in progress began (nanoseconds since the epoch); 0 between calls.
static CALL_STARTED: AtomicU64 = AtomicU64::new(0);

/// How many stack files a run's directory holds at most.
const MOST_DUMPS: usize = 10;

/// How often the watcher looks.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// Marks a call begun (`entering`) or ended.
pub fn in_call(entering: bool) {
    let at = if entering { now().max(1) } else { 0 };
    CALL_STARTED.store(at, Ordering::Relaxed);
}

/// Starts the watcher of this process's calls: a call longer than `bound` has the stacks
/// of the processes that opened `pool` written into `pool`'s directory, under `name`.
/// The supervisor lists the files in its summary.
pub fn watch(pool: PathBuf, name: String, bound: Duration) {
    let spawned = std::thread::Builder::new()
        .name("stall-watch".into())
        .spawn(move || {
            // The call last dumped or found disturbed: not looked at again.
            let mut done_with = 0;
            let mut looked = now();
            loop {
                std::thread::sleep(LOOK_EVERY);
                let started = CALL_STARTED.load(Ordering::Relaxed);
                let at = now();
                let late = at.saturating_sub(looked) > (LOOK_EVERY * 3).as_nanos() as u64;
                looked = at;
                if late {
                    done_with = started;
                }
                let over = at.saturating_sub(started) > bound.as_nanos() as u64;
                if started == 0 || started == done_with || !over {
                    continue;
                }
                done_with = started;
                dump(&pool, &name, started);
            }
        });
    // Without the watcher the run goes on; only the diagnosis of a stall is lost.
    if let Err(e) = spawned {
        eprintln!("bi-torture: no stall watcher: {e}");
    }
}

/// Writes the stacks, unless the run already holds [`MOST_DUMPS`] files of them.
fn dump(pool: &Path, name: &str, started: u64) -> Option<()> {
    let dir = pool.parent()?;
    let earlier = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("stall-"))
        .count();
    if earlier >= MOST_DUMPS {
        return None;
    }
    let waited_ms = now().saturating_sub(started) / 1_000_000;
    let file = dir.join(format!(
        "stall-{}-{}.txt",
        name.replace(' ', "-"),
        started / 1_000_000
    ));
    let mut text = format!("{name}: a call blocked for {waited_ms} ms so far\n");
    for pid in openers(pool) {
        text += &format!("\n===== process {pid}: {}\n", command_line(pid).join(" "));
        let out = Command::new("gdb")
            .args([
                "-p",
                &pid.to_string(),
                "-batch",
                "-ex",
                "thread apply all bt",
            ])
            .output();
        match out {
            Ok(out) => text += &String::from_utf8_lossy(&out.stdout),
            Err(e) => text += &format!("(no stacks: {e})\n"),
        }
    }
    std::fs::write(&file, text).ok()
}

/// The processes whose command line names `pool` after `--pool`, this one first.
fn openers(pool: &Path) -> Vec<u32> {
    let me = std::process::id();
    let mut pids = vec![me];
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    let wanted = pool.as_os_str().to_string_lossy();
    for pid in entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        let args = command_line(pid);
        let opens = args.windows(2).any(|w| w[0] == "--pool" && w[1] == wanted);
        if pid != me && opens {
            pids.push(pid);
        }
    }
    pids
}

/// A process's arguments (empty if it is gone).
fn command_line(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_past_its_bound_leaves_the_stacks_of_its_process() {
        let dir = tempfile::tempdir().unwrap();
        let pool = dir.path().join("torture.bi");
        watch(pool.clone(), "worker 9.0".into(), Duration::from_millis(50));
        let files = || {
            std::fs::read_dir(dir.path())
                .unwrap()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect::<Vec<_>>()
        };
        // Calls within the bound leave nothing.
        for _ in 0..3 {
            in_call(true);
            std::thread::sleep(Duration::from_millis(10));
            in_call(false);
        }
        std::thread::sleep(LOOK_EVERY * 2);
        assert!(files().is_empty());
        in_call(true);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while files().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        // The file is written whole once the stacks are in.
        std::thread::sleep(Duration::from_millis(200));
        in_call(false);
        let found = files();
        assert_eq!(found.len(), 1, "{found:?}");
        let name = found[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("stall-worker-9.0-"), "{name}");
        let text = std::fs::read_to_string(&found[0]).unwrap();
        assert!(text.starts_with("worker 9.0: a call blocked for"), "{text}");
        let me = format!("===== process {}:", std::process::id());
        assert!(text.contains(&me), "{text}");
    }

    #[test]
    fn the_openers_of_a_pool_are_found_by_their_command_lines() {
        let dir = tempfile::tempdir().unwrap();
        let pool = dir.path().join("torture.bi");
        // A shell running a loop keeps its own command line.
        let opener = |pool: &Path| {
            Command::new("sh")
                .args(["-c", "while :; do sleep 0.1; done", "sh", "--pool"])
                .arg(pool)
                .spawn()
                .unwrap()
        };
        let mut child = opener(&pool);
        let mut other = opener(&dir.path().join("another.bi"));
        // The children's command lines are theirs once they have exec'd.
        while command_line(child.id()).first().map(String::as_str) != Some("sh")
            || command_line(other.id()).first().map(String::as_str) != Some("sh")
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let found = openers(&pool);
        child.kill().unwrap();
        other.kill().unwrap();
        let _ = (child.wait(), other.wait());
        assert_eq!(found[0], std::process::id());
        assert!(found.contains(&child.id()), "{found:?}");
        assert!(!found.contains(&other.id()), "{found:?}");
    }
}
