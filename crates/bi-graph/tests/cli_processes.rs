//! `bi-graph --processes`: partitions as processes over a region file, as a user runs it.
#![cfg(feature = "cli")]
#![cfg(target_os = "linux")] // reads /proc to find and kill partition processes
#![cfg(not(miri))] // spawns processes

mod common;
use common::{ShareCase, bi_graph, run_ok, share_cases, stderr, stdout};
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

/// With an edge list cut by endpoints, each partition's process reads only its share of
/// the file, and partition 0 reports: the values and the messages are those of one
/// process, in every mode, and nothing is left beside the region's path.
#[test]
fn processes_reading_their_shares_give_the_values_of_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let region = runs.join("run.bi");
    let mut cases = share_cases(dir.path());
    // The oblivious cut places an edge after all before it: each process loads the
    // whole graph, as without an input file.
    cases.push(ShareCase {
        program: vec!["wcc".into()],
        partition: "oblivious",
        input: cases[0].input.clone(),
    });
    for case in &cases {
        let (program, partition) = (&case.program, case.partition);
        let one = dir.path().join("one.txt");
        let processes = dir.path().join("processes.txt");
        let mut a = case.args();
        a.extend(["--nodes", "4", "--mode", "all", "--json"]);
        let mut b = a.clone();
        a.extend(["--output", one.to_str().unwrap()]);
        b.extend(["--processes", "--region", region.to_str().unwrap()]);
        b.extend(["--output", processes.to_str().unwrap()]);
        let whole = stdout(&run_ok(&a));
        let shared = stdout(&run_ok(&b));
        let (x, y) = (
            std::fs::read(&one).unwrap(),
            std::fs::read(&processes).unwrap(),
        );
        assert!(!x.is_empty());
        assert!(x == y, "{program:?} {partition}: the processes differ");
        // Per mode: the messages, the cut's replication, the edges gathered, and the
        // lines the on-demand mode writes back (the other modes' depend on timing).
        for key in ["messages", "replication", "edges_gathered", "supersteps"] {
            let (w, s) = (figures(&whole, key), figures(&shared, key));
            assert_eq!(w.len(), 3, "{key} for each mode: {whole}");
            assert_eq!(s, w, "{program:?} {partition}: {key}");
        }
        let written_back = |json: &str| figures(json, "written_back")[1].clone();
        assert_eq!(written_back(&shared), written_back(&whole));
        assert_ne!(written_back(&shared), "0");
        nothing_left(&runs, &format!("{program:?} {partition}"));
    }
}

/// The figures after `"key": ` in a JSON summary, one per mode.
fn figures(json: &str, key: &str) -> Vec<String> {
    let tag = format!("\"{key}\": ");
    json.split(&tag)
        .skip(1)
        .map(|rest| rest.split([',', '}']).next().unwrap().to_owned())
        .collect()
}

/// A share that cannot be read stops every partition, wherever it waits, with the
/// line's number in the whole file; nothing is left behind.
#[test]
fn a_bad_line_in_one_share_stops_every_partition() {
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("graph.txt");
    let mut text: String = (0..4000)
        .map(|i| format!("{i} {}\n", (i * 7) % 4000))
        .collect();
    text.push_str("12 not-a-vertex\n");
    std::fs::write(&graph, text).unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let region = runs.join("run.bi");
    let out = bi_graph(&[
        "wcc",
        "--input",
        graph.to_str().unwrap(),
        "--nodes",
        "3",
        "--processes",
        "--region",
        region.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("graph.txt:4001:"),
        "the line is numbered in the whole file: {err}"
    );
    assert!(err.contains("exited with status 1 (its error is on its standard error)"));
    assert!(
        err.contains("partition 2"),
        "the reading partition is named: {err}"
    );
    nothing_left(&runs, "a bad line");
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
/// With `input`, the partitions read their shares of it.
fn endless_run(nodes: usize, region: &Path, input: Option<&Path>) -> (Child, Vec<u32>) {
    let graph = match input {
        Some(path) => ["--input", path.to_str().unwrap()],
        None => ["--scale", "9"],
    };
    let launcher = Command::new(env!("CARGO_BIN_EXE_bi-graph"))
        .args(["pagerank", "--processes", "--iterations", "1000000000"])
        .args(graph)
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

/// A graph file whose partitions' processes run long enough to be killed.
fn long_input(dir: &Path) -> std::path::PathBuf {
    let graph = dir.join("graph.txt");
    run_ok(&[
        "generate",
        "--scale",
        "9",
        "--output",
        graph.to_str().unwrap(),
    ]);
    graph
}

/// Runs `case` over a region in a directory of its own, with the processes loading the
/// whole graph and reading their shares of a file; nothing may be left in the
/// directory afterwards.
fn whole_and_in_shares(case: impl Fn(&Path, Option<&Path>)) {
    let dir = tempfile::tempdir().unwrap();
    let input = long_input(dir.path());
    for shares in [false, true] {
        let runs = dir.path().join(format!("runs-{shares}"));
        std::fs::create_dir(&runs).unwrap();
        case(&runs.join("run.bi"), shares.then_some(&*input));
        nothing_left(&runs, &format!("shares {shares}"));
    }
}

fn nothing_left(dir: &Path, what: &str) {
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
    assert!(left.is_empty(), "{what}: left {left:?}");
}

#[test]
fn a_killed_partition_stops_the_run_with_a_clear_error() {
    whole_and_in_shares(a_killed_partition_stops);
}

fn a_killed_partition_stops(region: &Path, input: Option<&Path>) {
    let (mut launcher, children) = endless_run(3, region, input);
    kill(children[1]);
    let status = wait_with_deadline(&mut launcher, Duration::from_secs(30));
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(launcher.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        err.contains("partition 1 was killed by signal 9"),
        "the error names the partition and what happened: {err}"
    );
    assert!(
        !err.contains("signal 9 (its error"),
        "a killed process wrote none: {err}"
    );
    // The others stopped on their own, before the launcher's grace ran out.
    assert!(
        err.contains("stopped because another partition failed"),
        "{err}"
    );
    for pid in children {
        assert!(!running(pid), "partition process {pid} still runs");
    }
    assert!(!region.exists(), "the launcher removes its region file");
}

#[test]
fn partitions_stop_when_their_launcher_dies() {
    whole_and_in_shares(partitions_stop_without_launcher);
}

fn partitions_stop_without_launcher(region: &Path, input: Option<&Path>) {
    let (mut launcher, children) = endless_run(2, region, input);
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
