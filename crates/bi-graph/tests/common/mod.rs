//! What the `bi-graph` command-line tests share: running the tool and reading its output.
// Each test binary uses some of these.
#![allow(dead_code)]

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
