//! A writer process stalled past its lease (SIGSTOP, as a paused virtual machine or a
//! starved process is) while another process takes its role over: once it runs again,
//! its handle gives the role up and its writes go to the new writer; nothing written
//! by either is lost.
//!
//! The child is this test binary again, selected by an environment variable and an exact
//! test-name filter. Miri can neither map files nor spawn processes.

use bi::{Pool, SharedMap};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;

const CHILD_ENV: &str = "BI_WRITER_STALL_CHILD";
const CHILD_TEST: &str = "stalled_writer_child_process";
const LEASE: Duration = Duration::from_millis(200);

fn pool(path: &Path, node: usize) -> Pool {
    let mut config = common::pool_config(2, node, LEASE);
    config.write_timeout = Duration::from_millis(100);
    common::open_when_free(|| Pool::open_or_create(path, config.clone()))
}

/// The writer process: writes 1, says whether it is the writer, waits for a line, writes
/// 2, and says how that went and whether it is still the writer.
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
    let mut child = common::child(CHILD_TEST)
        .env(CHILD_ENV, &path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut said = |what: &str| {
        lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.split_once(what).map(|(_, rest)| rest.trim().to_string()))
    };
    assert_eq!(said("writer ").as_deref(), Some("true"));
    let map: SharedMap<u64, u64> = here.map("stall").unwrap();
    assert!(!map.is_writer());
    // The writer stalls for three leases; this process's writes take its role over.
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) takes plain integers and touches no memory of this process.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(LEASE * 3);
    let deadline = Instant::now() + Duration::from_secs(10);
    while map.insert(3, 3).is_err() {
        assert!(Instant::now() < deadline, "the role was never taken over");
    }
    assert!(map.is_writer());
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let outcome = said("after ");
    assert_eq!(
        outcome.as_deref(),
        Some("wrote writer=false"),
        "the stalled writer's write"
    );
    assert!(child.wait().unwrap().success());
    for k in 1..=3 {
        assert_eq!(map.get_fresh(&k).unwrap(), Some(k), "key {k}");
    }
}
