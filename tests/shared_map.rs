//! A short run of the `shared_map` example: one writer and two reader processes share a
//! `BiHashMap` through a region file; one reader is killed with SIGKILL midway.

#![cfg(not(miri))]

use std::path::PathBuf;
use std::process::Command;

/// The example binary, which `cargo test` builds next to the test binaries.
fn example() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target directory");
    dir.join("examples")
        .join(format!("shared_map{}", std::env::consts::EXE_SUFFIX))
}

fn field<'a>(json: &'a str, name: &str) -> &'a str {
    let key = format!("\"{name}\": ");
    let at = json
        .find(&key)
        .unwrap_or_else(|| panic!("{name} missing in {json}"))
        + key.len();
    json[at..].split([',', '}']).next().expect("a value").trim()
}

#[test]
fn writer_and_readers_share_a_map_and_survive_a_killed_reader() {
    let bin = example();
    assert!(
        bin.exists(),
        "{} not built (cargo test builds examples)",
        bin.display()
    );
    let out = Command::new(&bin)
        .args(["--json", "--readers", "2", "--millis", "1500"])
        .output()
        .expect("run shared_map");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "shared_map failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = stdout.lines().last().expect("one JSON line");
    assert_eq!(field(json, "readers"), "2");
    assert!(field(json, "writes").parse::<u64>().unwrap() > 100);
    assert!(field(json, "reads").parse::<u64>().unwrap() > 100);
    assert_eq!(field(json, "lost_writes"), "0");
    let stale: f64 = field(json, "max_staleness_us").parse().unwrap();
    let bound: f64 = field(json, "bound_us").parse().unwrap();
    assert!(stale <= bound, "{json}");
    assert_eq!(field(json, "killed_reader_recovered"), "true", "{json}");
}

#[test]
fn wrong_arguments_are_rejected() {
    let out = Command::new(example())
        .args(["--readers", "1"])
        .output()
        .expect("run shared_map");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--readers"));
}
