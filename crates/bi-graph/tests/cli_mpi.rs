//! `mpirun -np 4 bi-graph ... --mpi`: partitions as MPI ranks, with the stock mode's
//! messages over MPI, give the values of the single-process run.
#![cfg(all(feature = "cli", feature = "mpi"))]
#![cfg(not(miri))] // spawns processes

use std::process::Command;

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} runs (is MPI installed?): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
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
