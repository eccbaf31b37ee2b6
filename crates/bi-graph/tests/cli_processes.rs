//! `bi-graph --processes`: partitions as processes over a region file, as a user runs it.
#![cfg(feature = "cli")]
#![cfg(target_os = "linux")] // reads /proc to find and kill partition processes
#![cfg(not(miri))] // spawns processes

mod common;
use common::{bi_graph, run_ok, stderr};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The values a run writes, as threads and as processes, must be the same bytes.
fn same_as_threads(dir: &Path, program: &[&str], rest: &[&str]) {
    let threads = dir.join("threads.txt");
    let processes = dir.join("processes.txt");
    let mut a: Vec<&str> = program.to_vec();
    a.extend(rest);
    let mut b = a.clone();
    a.extend(["--output", threads.to_str().unwrap()]);
    b.extend(["--processes", "--output", processes.to_str().unwrap()]);
    run_ok(&a);
    run_ok(&b);
    let (t, p) = (
        std::fs::read(&threads).unwrap(),
        std::fs::read(&processes).unwrap(),
    );
    assert!(!t.is_empty());
    assert!(t == p, "{program:?} {rest:?}: processes and threads differ");
}

#[test]
fn processes_give_the_values_of_threads() {
    let dir = tempfile::tempdir().unwrap();
    for mode in ["stock", "bi-on-demand"] {
        let common = ["--scale", "11", "--nodes", "3", "--mode", mode];
        same_as_threads(dir.path(), &["pagerank", "--iterations", "15"], &common);
        same_as_threads(dir.path(), &["wcc"], &common);
        same_as_threads(dir.path(), &["sssp", "--source", "3"], &common);
    }
    // Each process one emulated node over the file.
    let emulated = ["--scale", "9", "--nodes", "2", "--backend", "emulated"];
    same_as_threads(dir.path(), &["wcc", "--mode", "bi-on-demand"], &emulated);
    // The periodic mode reads stale values: its ranks only agree with the others.
    let out = run_ok(&[
        "pagerank",
        "--scale",
        "10",
        "--nodes",
        "2",
        "--mode",
        "all",
        "--processes",
        "--json",
    ]);
    let json = String::from_utf8_lossy(&out.stdout);
    assert_eq!(json.matches("\"agrees\": true").count(), 3, "{json}");
    // Each process's phases reach the launcher with its report.
    assert_eq!(json.matches("\"gather_apply\": ").count(), 3, "{json}");
    assert!(!json.contains("\"gather_apply\": 0,"), "{json}");
}

#[test]
fn an_existing_region_file_is_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let region = dir.path().join("taken.bi");
    std::fs::write(&region, b"someone's data").unwrap();
    let out = bi_graph(&[
        "wcc",
        "--scale",
        "8",
        "--processes",
        "--region",
        region.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("exists"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&region).unwrap(), b"someone's data");
    // Without --processes a region makes no sense.
    assert!(
        !bi_graph(&["wcc", "--region", region.to_str().unwrap()])
            .status
            .success()
    );
}

/// A launcher of a run over `region` that lasts until it is stopped, and its partition
/// processes once they are all running.
// The caller waits for (or kills) the launcher.
#[allow(clippy::zombie_processes)]
fn endless_run(nodes: usize, region: &Path) -> (Child, Vec<u32>) {
    let launcher = Command::new(env!("CARGO_BIN_EXE_bi-graph"))
        .args([
            "pagerank",
            "--scale",
            "9",
            "--processes",
            "--iterations",
            "1000000000",
        ])
        .args([
            "--nodes",
            &nodes.to_string(),
            "--region",
            region.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let children = children_of(launcher.id());
        if children.len() == nodes {
            // Let them reach their supersteps.
            std::thread::sleep(Duration::from_millis(300));
            return (launcher, children);
        }
        assert!(Instant::now() < deadline, "the partitions did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn children_of(pid: u32) -> Vec<u32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn running(pid: u32) -> bool {
    // Gone, or a zombie waiting for whoever adopted it.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

fn kill(pid: u32) {
    let status = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn wait_with_deadline(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the run hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_killed_partition_stops_the_run_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let region = dir.path().join("run.bi");
    let (mut launcher, children) = endless_run(3, &region);
    kill(children[1]);
    let status = wait_with_deadline(&mut launcher, Duration::from_secs(30));
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(launcher.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        err.contains("partition 1 was killed by signal 9"),
        "the error names the partition and what happened: {err}"
    );
    for pid in children {
        assert!(!running(pid), "partition process {pid} still runs");
    }
    assert!(!region.exists(), "the launcher removes its region file");
}

#[test]
fn partitions_stop_when_their_launcher_dies() {
    let dir = tempfile::tempdir().unwrap();
    let region = dir.path().join("run.bi");
    let (mut launcher, children) = endless_run(2, &region);
    kill(launcher.id());
    let _ = launcher.wait();
    let deadline = Instant::now() + Duration::from_secs(30);
    while children.iter().any(|&pid| running(pid)) {
        if Instant::now() >= deadline {
            // Stopped here, so that the failure does not leave them spinning.
            children.iter().for_each(|&pid| kill(pid));
            panic!("partitions outlived their launcher");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !region.exists(),
        "the partitions of a killed launcher remove its region file"
    );
}
