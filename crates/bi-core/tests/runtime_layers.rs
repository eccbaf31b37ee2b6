//! The runtime's folders import one another downward only: this test reads the sources
//! of `src/runtime/` and fails on a file of a folder that names a file of a folder above
//! its own, or of the other side at its rank ([`FOLDERS`]): through `super::` or
//! `crate::runtime::`, directly or through a name a `mod.rs` re-exports. Unit tests and
//! comments are left out: a test may use anything. (Circles between files, inside a
//! folder or anywhere else in the workspace, are the facade's `import_circles` test.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The runtime's folders, lowest first: a file may name files of its own folder (without
/// a circle), of folders listed before it, and the root's vocabulary ([`VOCABULARY`]).
/// Folders of one rank (the read and the write side) may not name each other.
const FOLDERS: &[&[&str]] = &[&["format"], &["node"], &["read", "write"], &["kinds"]];

/// Files of the runtime's root that every folder may name: its error and its switches.
const VOCABULARY: &[&str] = &["error", "fault"];

/// The sibling modules a file's code names: `super::name` paths, the names inside
/// `super::{..}` groups, and `crate::runtime::name` paths, each mapped to the file that
/// defines it (`reexports`: item names `mod.rs` re-exports, to their module).
fn names(
    code: &str,
    modules: &BTreeSet<String>,
    reexports: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut note = |name: &str| {
        if modules.contains(name) {
            found.insert(name.to_string());
        } else if let Some(m) = reexports.get(name) {
            found.insert(m.clone());
        }
    };
    for prefix in ["super::", "crate::runtime::"] {
        let mut rest = code;
        while let Some(at) = rest.find(prefix) {
            rest = &rest[at + prefix.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let head = item.trim().split("::").next().unwrap_or("").trim();
                    note(head.split_whitespace().next().unwrap_or(""));
                }
            } else {
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                note(&rest[..end]);
            }
        }
    }
    found
}

/// A file's code: without comment lines and without its unit tests.
fn code_of(text: &str) -> String {
    let body = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    body.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `mod.rs`'s re-exports (`pub use m::{A, B};`, `use m::A;`): item name to module.
fn reexports(mod_rs: &str, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in mod_rs.lines() {
        let line = line.trim();
        let Some(path) = line
            .strip_prefix("pub use ")
            .or_else(|| line.strip_prefix("use "))
        else {
            continue;
        };
        let Some((module, items)) = path.trim_end_matches(';').split_once("::") else {
            continue;
        };
        if !modules.contains(module) {
            continue;
        }
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.trim();
            if !item.is_empty() && !item.contains("::") {
                map.insert(item.to_string(), module.to_string());
            }
        }
    }
    map
}

/// Every `.rs` file under `dir`, as (folder, module name, text); `mod.rs` files apart.
fn sources(dir: &Path, folder: &str, out: &mut Vec<(String, String, String)>, mods: &mut String) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            sources(&path, &name, out, mods);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            if name == "mod" {
                mods.push_str(&text);
            } else {
                out.push((folder.to_string(), name, text));
            }
        }
    }
}

#[test]
fn the_runtimes_folders_import_one_another_downward_only() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/runtime");
    let (mut files, mut mods) = (Vec::new(), String::new());
    sources(&dir, "", &mut files, &mut mods);
    // The test harness sits above everything it sets up.
    files.retain(|(_, m, _)| m != "testing");
    let modules: BTreeSet<String> = files.iter().map(|(_, m, _)| m.clone()).collect();
    assert_eq!(modules.len(), files.len(), "one name per file");
    assert!(modules.len() > 20, "read the runtime's files: {modules:?}");
    let folder: BTreeMap<&str, &str> = files
        .iter()
        .map(|(f, m, _)| (m.as_str(), f.as_str()))
        .collect();
    let rank = |m: &str| FOLDERS.iter().position(|rank| rank.contains(&folder[m]));
    let reexports = reexports(&mods, &modules);
    let graph: BTreeMap<String, BTreeSet<String>> = files
        .iter()
        .map(|(_, m, text)| {
            let mut uses = names(&code_of(text), &modules, &reexports);
            uses.remove(m);
            (m.clone(), uses)
        })
        .collect();
    let edges: usize = graph.values().map(BTreeSet::len).sum();
    assert!(edges > 50, "found the imports: {graph:?}");
    for (m, uses) in &graph {
        let Some(r) = rank(m) else { continue };
        for u in uses {
            let below = rank(u)
                .is_some_and(|ru| ru < r || (ru == r && folder[u.as_str()] == folder[m.as_str()]));
            assert!(
                VOCABULARY.contains(&u.as_str()) || below,
                "{}/{m} names {u}, which is not in its folder or one below it",
                folder[m.as_str()]
            );
        }
    }
}

#[test]
fn names_are_read_from_code_and_resolved_through_reexports() {
    let modules: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
    let reexports = BTreeMap::from([("Thing".to_string(), "c".to_string())]);
    let code = code_of(
        "use super::b::X;\n// super::a::Comment\nuse super::{Thing, other};\n#[cfg(test)]\nmod tests {\n use crate::runtime::a::Y;\n}\n",
    );
    let found = names(&code, &modules, &reexports);
    assert_eq!(found, ["b", "c"].map(String::from).into());
}
