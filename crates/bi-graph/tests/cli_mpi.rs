//! `mpirun -np 4 bi-graph ... --mpi`: partitions as MPI ranks, with the stock mode's
//! messages over MPI, give the values of the single-process run.
#![cfg(all(feature = "cli", feature = "mpi"))]
#![cfg(not(miri))] // spawns processes

mod common;
use common::{messages, share_cases};
use std::process::Command;

/// Runs `program`; returns what it printed.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} runs (is MPI installed?): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn four_ranks_give_the_values_of_one_process() {
    let exe = env!("CARGO_BIN_EXE_bi-graph");
    let dir = tempfile::tempdir().unwrap();
    for program in [&["pagerank"][..], &["wcc"], &["sssp", "--source", "5"]] {
        let one = dir.path().join("one.txt");
        let ranks = dir.path().join("ranks.txt");
        let common = ["--scale", "11", "--mode", "stock"];
        let mut a: Vec<&str> = program.to_vec();
        a.extend(common);
        let mut b = a.clone();
        a.extend(["--nodes", "4", "--output", one.to_str().unwrap()]);
        run(exe, &a);
        let mut m = vec!["-np", "4", exe];
        b.extend(["--mpi", "--output", ranks.to_str().unwrap()]);
        m.extend(b);
        run("mpirun", &m);
        let (x, y) = (std::fs::read(&one).unwrap(), std::fs::read(&ranks).unwrap());
        assert!(!x.is_empty());
        assert!(x == y, "{program:?}: four ranks differ from one process");
    }
}

/// Ranks reading only their share of a file (`--input` with `--mpi`) give the values,
/// the replication and the messages of one process reading all of it, for each cut that
/// places edges by their endpoints, weighted or not.
#[test]
fn four_ranks_reading_their_shares_of_a_file_give_the_values_of_one_process() {
    let exe = env!("CARGO_BIN_EXE_bi-graph");
    let dir = tempfile::tempdir().unwrap();
    let cases = share_cases(dir.path());
    for case in &cases {
        let (program, partition) = (&case.program, case.partition);
        let one = dir.path().join("one.txt");
        let ranks = dir.path().join("ranks.txt");
        let mut a = case.args();
        a.extend(["--mode", "stock"]);
        let mut b = a.clone();
        a.extend(["--nodes", "4", "--output", one.to_str().unwrap()]);
        let whole = run(exe, &a);
        let mut m = vec!["-np", "4", exe];
        b.extend(["--mpi", "--output", ranks.to_str().unwrap()]);
        m.extend(b);
        let shared = run("mpirun", &m);
        let (x, y) = (std::fs::read(&one).unwrap(), std::fs::read(&ranks).unwrap());
        assert!(!x.is_empty());
        assert!(
            x == y,
            "{program:?} {partition}: four ranks differ from one process"
        );
        assert_eq!(
            messages(&shared),
            messages(&whole),
            "{program:?} {partition}"
        );
    }
    // The oblivious cut needs every edge before an edge: refused, by every rank.
    let out = Command::new("mpirun")
        .args(["-np", "2", exe, "wcc", "--input", &cases[0].input, "--mpi"])
        .args(["--mode", "stock", "--partition", "oblivious"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("the oblivious cut"));
}

/// Ranks in pools read their shares of a file too: every pool's region is laid out from
/// the shapes of the ranks' plans and the vertex tables, and the values and the
/// values are those of one process.
#[test]
fn two_pools_of_two_ranks_reading_their_shares_give_the_values_of_one_process() {
    let exe = env!("CARGO_BIN_EXE_bi-graph");
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let region = runs.join("pool");
    for case in share_cases(dir.path()) {
        let (program, partition) = (&case.program, case.partition);
        let one = dir.path().join("one.txt");
        let ranks = dir.path().join("ranks.txt");
        let mut a = case.args();
        a.extend(["--mode", "bi-on-demand"]);
        let mut b = a.clone();
        a.extend(["--nodes", "4", "--output", one.to_str().unwrap()]);
        run(exe, &a);
        b.extend(["--mpi", "--pool-ranks", "2", "--output"]);
        b.extend([
            ranks.to_str().unwrap(),
            "--region",
            region.to_str().unwrap(),
        ]);
        let mut m = vec!["-np", "4", exe];
        m.extend(b);
        let report = run("mpirun", &m);
        let (x, y) = (std::fs::read(&one).unwrap(), std::fs::read(&ranks).unwrap());
        assert!(!x.is_empty());
        assert!(
            x == y,
            "{program:?} {partition}: pools reading shares differ"
        );
        assert!(messages(&report) > 4, "{program:?}: {report}");
        assert_eq!(std::fs::read_dir(&runs).unwrap().count(), 0, "regions left");
    }
}

#[test]
fn two_pools_of_two_ranks_give_the_values_of_one_process() {
    let exe = env!("CARGO_BIN_EXE_bi-graph");
    let dir = tempfile::tempdir().unwrap();
    let region = dir.path().join("pool");
    for program in [&["pagerank"][..], &["wcc"], &["sssp", "--source", "5"]] {
        let one = dir.path().join("one.txt");
        let ranks = dir.path().join("ranks.txt");
        let common = ["--scale", "11", "--mode", "bi-on-demand"];
        let mut a: Vec<&str> = program.to_vec();
        a.extend(common);
        let mut b = a.clone();
        a.extend(["--nodes", "4", "--output", one.to_str().unwrap()]);
        run(exe, &a);
        b.extend([
            "--mpi",
            "--pool-ranks",
            "2",
            "--output",
            ranks.to_str().unwrap(),
        ]);
        b.extend(["--region", region.to_str().unwrap()]);
        let mut m = vec!["-np", "4", exe];
        m.extend(b);
        let report = run("mpirun", &m);
        let (x, y) = (std::fs::read(&one).unwrap(), std::fs::read(&ranks).unwrap());
        assert!(!x.is_empty());
        assert!(x == y, "{program:?}: two pools differ from one process");
        // Values cross between the pools as messages, and the report counts them (the
        // four ranks' sums: more than one a rank).
        assert!(messages(&report) > 4, "{program:?}: {report}");
        // Each pool's first rank removes its region file.
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "only the outputs"
        );
    }
    // Pools share memory for the BI modes; the stock mode runs over MPI alone.
    let out = Command::new("mpirun")
        .args([
            "-np",
            "2",
            exe,
            "wcc",
            "--scale",
            "8",
            "--mpi",
            "--pool-ranks",
            "1",
        ])
        .args(["--mode", "stock"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--pool-ranks runs the bi-on-demand mode")
    );
}
