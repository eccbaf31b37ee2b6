//! What the `bi-graph` command-line tests share: running the tool and reading its output.
// Each test binary uses some of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `bi-graph` with `args` to the end.
pub fn bi_graph(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bi-graph"))
        .args(args)
        .output()
        .expect("the binary runs")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `bi-graph` with `args`, which must succeed.
pub fn run_ok(args: &[&str]) -> Output {
    let out = bi_graph(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    out
}

/// The figure in the run report's `messages` column (right-aligned under its heading).
pub fn messages(report: &str) -> u64 {
    let mut lines = report.lines().skip_while(|l| !l.contains("messages"));
    let heading = lines
        .next()
        .unwrap_or_else(|| panic!("no report: {report}"));
    let end = heading.find("messages").unwrap() + "messages".len();
    let row = lines.next().unwrap_or_else(|| panic!("no row: {report}"));
    let figure = row[..end].split_whitespace().last().unwrap();
    figure
        .parse()
        .unwrap_or_else(|_| panic!("{figure:?} in {report}"))
}

/// A generated graph written as an edge list in `dir`, the same edges with weights (for
/// shortest paths), and the id of a vertex of both: inputs for runs reading shares.
pub fn shares_inputs(dir: &Path) -> (PathBuf, PathBuf, String) {
    let graph = dir.join("graph.txt");
    run_ok(&[
        "generate",
        "--scale",
        "11",
        "--output",
        graph.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&graph).unwrap();
    assert!(
        text.lines().count() > 20_000,
        "the generated graph is written whole"
    );
    let weighted = dir.join("weighted.txt");
    let lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .enumerate()
        .map(|(i, l)| format!("{l} {}", 1 + i % 5))
        .collect();
    std::fs::write(&weighted, lines.join("\n")).unwrap();
    let source = lines[0].split_whitespace().next().unwrap().to_owned();
    (graph, weighted, source)
}
