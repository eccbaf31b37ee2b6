//! No library code builds an error it may not return: `x.ok_or(SomeError::Variant { .. })`
//! builds the error before it knows whether `x` is empty, and drops it again when `x`
//! holds a value. The error types have drop glue, so that drop is a call on the success
//! path: two of them cost a map lookup 44 instructions. This test reads every crate's
//! `src/` and fails on such a call, naming file and line; the form to write is
//! `ok_or_else(|| SomeError::Variant { .. })`.

use std::path::{Path, PathBuf};

/// Whether `line` hands `ok_or` (or `unwrap_or`, `or`) an error it builds on the spot.
fn builds_error_eagerly(line: &str) -> bool {
    ["ok_or(", "unwrap_or(Err(", ".or(Err("].iter().any(|call| {
        line.match_indices(call).any(|(at, _)| {
            let arg = line[at + call.len()..].trim_start();
            let arg = arg.strip_prefix("Err(").unwrap_or(arg);
            let head: String = arg
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            // A constructor: `SomeError::Variant`, `corrupt(...)`, `bad.into()` are built
            // by the call; a plain local (`too_large`) was built once, before it.
            head.contains("Error::")
                || arg.starts_with("corrupt(")
                || arg.starts_with(&format!("{head}.into()"))
        })
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_matcher_tells_an_eager_error_from_a_lazy_one() {
    assert!(builds_error_eagerly(
        "    .ok_or(BiError::OutOfSection { offset: i,"
    ));
    assert!(builds_error_eagerly(
        "let x = y.ok_or(CollectionError::Corrupt {"
    ));
    assert!(builds_error_eagerly(r#"read.ok_or(corrupt("a miss"))"#));
    assert!(builds_error_eagerly(
        "return record.outcome().ok_or(bad.into());"
    ));
    assert!(builds_error_eagerly(
        ".unwrap_or(Err(GraphError::PartitionPanicked { partition: p }))"
    ));
    assert!(!builds_error_eagerly(
        "    .ok_or_else(|| BiError::OutOfSection { offset: i,"
    ));
    assert!(!builds_error_eagerly(
        "offset.checked_add(len).ok_or(too_large)?;"
    ));
    assert!(!builds_error_eagerly(
        "self.0.get(r - 1).copied().ok_or(())"
    ));
}

#[test]
fn no_library_code_builds_an_error_it_may_drop_unused() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    assert!(files.len() > 100, "found only {} source files", files.len());
    let mut found = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if !code.starts_with("//") && builds_error_eagerly(line) {
                found.push(format!(
                    "{}:{}: {}",
                    path.strip_prefix(root).unwrap().display(),
                    n + 1,
                    code
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "errors built before they are known to be needed (write ok_or_else(|| ...)):\n{}",
        found.join("\n")
    );
}
