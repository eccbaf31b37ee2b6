//! What the `bi-graph` command-line tests share: running the tool and reading its output.
// Each test binary uses some of these.
#![allow(dead_code)]

use std::path::Path;
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

/// A run reading shares: the program's arguments, the cut it is checked under, its
/// input file.
pub struct ShareCase {
    pub program: Vec<String>,
    pub partition: &'static str,
    pub input: String,
}

impl ShareCase {
    /// The program's arguments, then its input and cut.
    pub fn args(&self) -> Vec<&str> {
        let mut args: Vec<&str> = self.program.iter().map(String::as_str).collect();
        args.extend(["--input", &self.input, "--partition", self.partition]);
        args
    }
}

/// The runs that read shares, over a generated graph written as an edge list in `dir`:
/// PageRank with the random cut, WCC with the grid cut, and shortest paths with the
/// by-target cut over the same edges with weights.
pub fn share_cases(dir: &Path) -> Vec<ShareCase> {
    let graph = dir.join("graph.txt");
    let graph = graph.to_str().unwrap().to_owned();
    run_ok(&["generate", "--scale", "11", "--output", &graph]);
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
    let case = |program: &[&str], partition, input: &str| ShareCase {
        program: program.iter().map(|s| s.to_string()).collect(),
        partition,
        input: input.to_owned(),
    };
    vec![
        case(&["pagerank"], "random", &graph),
        case(&["wcc"], "grid", &graph),
        case(
            &["sssp", "--source", &source],
            "by-target",
            weighted.to_str().unwrap(),
        ),
    ]
}
