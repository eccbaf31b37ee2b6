//! A writer process stalled past its lease (SIGSTOP, as a paused virtual machine or a
//! debugger stops it) keeps its role while it still exists: stopped, it might be inside
//! a write it finishes when it runs again, so no other process may adopt its map
//! meanwhile. Other processes' writes fail while it is stopped; once it runs again it
//! writes as the writer and theirs reach the map through it. Killed while stopped, it
//! is gone, and another process takes the role over at once. Nothing written by either
//! is lost. A writer killed while its lease runs is gone too: a process restarted on
//! this host takes the role at once, without waiting out the lease.
//!
//! The child is this test binary again, selected by an environment variable and an exact
//! test-name filter. Miri can neither map files nor spawn processes.

use bi::{Pool, SharedMap};
use std::io::{BufRead, BufReader, Lines, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Stdio};
use std::time::{Duration, Instant};

mod common;

const CHILD_ENV: &str = "BI_WRITER_STALL_CHILD";
const CHILD_TEST: &str = "stalled_writer_child_process";
const LEASE: Duration = Duration::from_millis(200);
const KILLED_ENV: &str = "BI_KILLED_WRITER_CHILD";
const KILLED_TEST: &str = "killed_writer_child_process";
/// Longer than the test may take: only the kernel can tell this writer is gone.
const LONG_LEASE: Duration = Duration::from_secs(600);

/// The child process running test `test` on the pool at `path` (named in `env`), with
/// its standard input piped and its output's lines.
fn spawn(test: &str, env: &str, path: &Path) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = common::child(test)
        .env(env, path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// What the child says after `what` on the next line that has it (`None` once its
/// output ends).
fn said(lines: &mut Lines<BufReader<ChildStdout>>, what: &str) -> Option<String> {
    lines
        .map_while(Result::ok)
        .find_map(|l| l.split_once(what).map(|(_, rest)| rest.trim().to_string()))
}

fn pool(path: &Path, node: usize) -> Pool {
    let mut config = common::pool_config(2, node, LEASE);
    config.write_timeout = Duration::from_millis(100);
    common::open_when_free(|| Pool::open_or_create(path, config.clone()))
}

/// The writer process: writes 1, says whether it is the writer, waits for a line,
/// writes 2, says how that went and whether it is still the writer, and waits to be
/// killed.
#[test]
fn stalled_writer_child_process() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return; // not the child
    };
    let pool = pool(Path::new(&path), 1);
    let map: SharedMap<u64, u64> = pool.map("stall").unwrap();
    map.insert(1, 1).unwrap();
    println!("writer {}", map.is_writer());
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    match map.insert(2, 2) {
        Ok(_) => println!("after wrote writer={}", map.is_writer()),
        Err(e) => println!("after failed {e}"),
    }
    std::io::stdin().read_line(&mut line).unwrap();
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_writer_stalled_past_its_lease_writes_through_its_successor() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stall.bi");
    let here = pool(&path, 0);
    let (mut child, mut lines) = spawn(CHILD_TEST, CHILD_ENV, &path);
    let mut said = |what: &str| said(&mut lines, what);
    assert_eq!(said("writer ").as_deref(), Some("true"));
    let map: SharedMap<u64, u64> = here.map("stall").unwrap();
    assert!(!map.is_writer());
    let pid = child.id() as libc::pid_t;
    let signal = |sig| {
        // SAFETY: kill(2) takes plain integers and touches no memory of this process.
        unsafe { libc::kill(pid, sig) };
    };
    // The writer stalls for three leases: it still exists, so its role stays its own and
    // this process's writes fail instead of adopting the map under it.
    signal(libc::SIGSTOP);
    std::thread::sleep(LEASE * 3);
    let stalled = Instant::now() + LEASE * 3;
    while Instant::now() < stalled {
        assert!(
            map.insert(3, 3).is_err(),
            "a write succeeded while the writer was stopped"
        );
        assert!(!map.is_writer(), "the role of a stopped writer was taken");
    }
    // It runs again and writes as the writer; this process's writes go through it.
    signal(libc::SIGCONT);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    let outcome = said("after ");
    assert_eq!(
        outcome.as_deref(),
        Some("wrote writer=true"),
        "the stalled writer's write"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while map.insert(3, 3).is_err() {
        assert!(Instant::now() < deadline, "writes never reached the writer");
    }
    assert!(!map.is_writer());
    // Stopped again past its lease, then killed: gone, its role is taken over.
    signal(libc::SIGSTOP);
    std::thread::sleep(LEASE * 3);
    assert!(map.insert(4, 4).is_err() && !map.is_writer());
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while map.insert(4, 4).is_err() {
        assert!(Instant::now() < deadline, "the role was never taken over");
    }
    assert!(map.is_writer());
    drop(stdin);
    for k in 1..=4 {
        assert_eq!(map.get_fresh(&k).unwrap(), Some(k), "key {k}");
    }
}

/// The writer process of the restart test: writes 1 with a long lease, says whether it
/// is the writer, and waits to be killed.
#[test]
fn killed_writer_child_process() {
    let Ok(path) = std::env::var(KILLED_ENV) else {
        return; // not the child
    };
    let pool = Pool::open_or_create(&path, common::pool_config(2, 1, LONG_LEASE)).unwrap();
    let map: SharedMap<u64, u64> = pool.map("restart").unwrap();
    map.insert(1, 1).unwrap();
    println!("writer {}", map.is_writer());
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_writer_restarted_right_after_a_kill_takes_the_role_at_once() {
    if std::env::var(KILLED_ENV).is_ok() || std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("restart.bi");
    let (mut child, mut lines) = spawn(KILLED_TEST, KILLED_ENV, &path);
    assert_eq!(said(&mut lines, "writer ").as_deref(), Some("true"));
    child.kill().unwrap();
    child.wait().unwrap();
    // Restarted on the node the dead writer ran, ten minutes inside its lease: the node
    // and the role are taken at once, and the dead writer's write is there.
    let pool = Pool::open_or_create(&path, common::pool_config(2, 1, LONG_LEASE)).unwrap();
    let map: SharedMap<u64, u64> = pool.map("restart").unwrap();
    assert!(map.is_writer(), "the restarted process is the writer");
    assert_eq!(map.get_fresh(&1).unwrap(), Some(1));
    assert_eq!(map.insert(2, 2).unwrap(), None);
    assert_eq!(map.get(&2).unwrap(), Some(2));
}
