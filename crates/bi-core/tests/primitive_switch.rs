//! Every synchronisation primitive of the library comes through `src/primitive.rs`, the
//! one switch between `std` and loom: this test reads the library's sources and fails on
//! an atomic, a fence, a lock or a thread operation taken from `std` (or `core`)
//! anywhere else, except in the files listed below with the reason they may.

use std::path::{Path, PathBuf};

/// Files that may name `std`'s primitives, and why.
const ALLOWED: &[(&str, &str)] = &[
    ("primitive.rs", "the switch itself"),
    (
        "runtime/node/background.rs",
        "an operating-system thread; loom models run passes on their own threads",
    ),
    (
        "cache/x86_64.rs",
        "compiler fences around cache instructions order the instructions, not threads",
    ),
    ("cache/aarch64.rs", "likewise, around `dc` and `dsb`"),
    (
        "cache/nop.rs",
        "the fence of a machine without cache instructions is the hardware fence itself",
    ),
    (
        "cache/mod.rs",
        "a test's counter, in the module's unit tests",
    ),
    (
        "region/mod.rs",
        "serialises one process's root directory updates; no modelled protocol",
    ),
    ("region/tests.rs", "unit tests with real threads"),
    ("runtime/mod.rs", "unit tests with real threads"),
];

/// Whether a statement takes a primitive from `std` or `core`: a path through their
/// `sync` naming an atomic, a fence or a lock, or through `thread` naming an operation
/// that hands the processor to another thread.
fn takes_primitive(statement: &str) -> bool {
    let names = |module: &str, items: &[&str]| {
        ["std::", "core::"].iter().any(|root| {
            statement.contains(&format!("{root}{module}"))
                && items.iter().any(|item| statement.contains(item))
        })
    };
    names("sync", &["atomic", "Mutex", "RwLock", "Condvar", "Barrier"])
        || names("thread", &["yield_now", "spawn", "park", "Builder"])
}

/// The code statements of a source file with their first line numbers: comments and
/// documentation dropped (doctests run real threads), a `use` spanning several lines
/// joined into one.
fn statements(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open_use = false;
    for (n, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        if open_use {
            out.last_mut().unwrap().1.push_str(code);
        } else {
            out.push((n + 1, code.to_owned()));
        }
        open_use = (open_use || code.starts_with("use ") || code.starts_with("pub(crate) use "))
            && !code.contains(';');
    }
    out
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("the library's sources") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
#[cfg_attr(miri, ignore)] // reads the source tree
fn every_primitive_comes_through_the_switch() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 20, "the sources were found");
    let mut found = Vec::new();
    for file in &files {
        let name = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if ALLOWED.iter().any(|(f, _)| *f == name) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (n, code) in statements(&text) {
            if takes_primitive(&code) {
                found.push(format!("{name}:{n}: {code}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "primitives taken around crate::primitive:\n{}",
        found.join("\n")
    );
}

/// The detector sees the forms a primitive is imported or named in.
#[test]
fn the_detector_sees_every_form() {
    for taken in [
        "use std::sync::atomic::{AtomicU64, Ordering};",
        "use std::sync::{Arc,Mutex};",
        "std::sync::atomic::fence(Ordering::SeqCst);",
        "core::sync::atomic::compiler_fence(SeqCst);",
        "std::thread::yield_now();",
        "let t = std::thread::Builder::new()",
    ] {
        assert!(takes_primitive(taken), "{taken}");
    }
    for fine in [
        "use std::sync::{Arc, PoisonError};",
        "use crate::primitive::sync::atomic::fence;",
        "use std::sync::OnceLock;",
        "std::thread::sleep(d);",
    ] {
        assert!(!takes_primitive(fine), "{fine}");
    }
    let joined = statements("use std::sync::{\n    Arc,\n    Mutex,\n};\nfn f() {}\n");
    assert!(
        takes_primitive(&joined[0].1) && joined.len() == 2,
        "{joined:?}"
    );
}

/// The list names only files that exist and still need it.
#[test]
#[cfg_attr(miri, ignore)]
fn every_allowed_file_still_needs_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (file, why) in ALLOWED {
        let text = std::fs::read_to_string(src.join(file))
            .unwrap_or_else(|_| panic!("{file} ({why}) is not in the sources"));
        let uses = statements(&text)
            .iter()
            .any(|(_, code)| takes_primitive(code));
        assert!(
            uses,
            "{file} no longer takes a primitive from std: drop it from the list"
        );
    }
}
