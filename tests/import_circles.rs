//! No circle of imports between the files of any crate of the workspace: this test reads
//! every crate's `src/`, resolves the paths each file's code names (`crate::`, `super::`,
//! `self::`, through the re-exports of `mod.rs` and `lib.rs`) to the files that define
//! them, and fails on a circle, printing it. A folder's `mod.rs` (or a crate's `lib.rs`)
//! is the folder's face, not a file of it: names it defines itself are not edges. Unit
//! tests and comments are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside one crate: `["runtime", "node", "claim"]`.
type ModPath = Vec<String>;

struct Crate {
    /// Every module of the crate, with its text, and whether it is a folder's face.
    files: BTreeMap<ModPath, (String, bool)>,
    /// Names a face re-exports or imports from a child: `(face, name)` to the path named.
    aliases: BTreeMap<(ModPath, String), ModPath>,
}

fn read_crate(src: &Path) -> Crate {
    fn walk(dir: &Path, at: &ModPath, out: &mut BTreeMap<ModPath, (String, bool)>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                let mut sub = at.clone();
                sub.push(stem);
                walk(&path, &sub, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let face = matches!(stem.as_str(), "mod" | "lib" | "main");
                let mut module = at.clone();
                if !face {
                    module.push(stem);
                }
                // A crate's binaries (`src/bin/*`) are crates of their own: skipped.
                if at.first().is_some_and(|f| f == "bin") {
                    continue;
                }
                out.entry(module).or_insert((text, face));
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(src, &Vec::new(), &mut files);
    let mut aliases = BTreeMap::new();
    for (face, (text, is_face)) in &files {
        if !is_face {
            continue;
        }
        for statement in code_of(text).split(';') {
            let s = statement.trim();
            let Some(path) = s
                .strip_prefix("pub use ")
                .or_else(|| s.strip_prefix("pub(crate) use "))
                .or_else(|| s.strip_prefix("use "))
            else {
                continue;
            };
            for (target, name) in expand(path) {
                let mut full = face.clone();
                full.extend(target.split("::").map(String::from));
                aliases.insert((face.clone(), name), full);
            }
        }
    }
    Crate { files, aliases }
}

/// The paths of one `use` tree with the name each binds: `a::{b, c::d}` gives `a::b` as
/// `b` and `a::c::d` as `d` (one level of braces; `self` and globs are skipped).
fn expand(tree: &str) -> Vec<(String, String)> {
    let tree: String = tree.split_whitespace().collect();
    let (prefix, group) = match tree.find("::{") {
        Some(i) => (&tree[..i], tree[i + 3..].trim_end_matches('}')),
        None => {
            return last_name(&tree)
                .map(|n| vec![(tree.clone(), n)])
                .unwrap_or_default();
        }
    };
    group
        .split(',')
        .filter(|item| !item.is_empty() && *item != "self" && !item.contains('*'))
        .filter_map(|item| {
            let full = format!("{prefix}::{item}");
            last_name(&full).map(|n| (full, n))
        })
        .collect()
}

fn last_name(path: &str) -> Option<String> {
    let path = path.split(" as ").next().unwrap_or(path);
    let name = path.rsplit("::").next()?;
    (!name.is_empty() && !name.contains('*') && !name.contains('{')).then(|| name.to_string())
}

/// A file's code: without comment lines and without its unit tests.
fn code_of(text: &str) -> String {
    let mut body = text;
    for marker in ["#[cfg(test)]\nmod tests", "#[cfg(all(test"] {
        if let Some(at) = body.find(marker) {
            body = &body[..at];
        }
    }
    body.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The file a path names: the longest prefix of it that is a module, following a face's
/// aliases; `None` for a face's own items, or what lies outside the crate.
fn resolve(krate: &Crate, path: &[String], depth: usize) -> Option<ModPath> {
    if depth > 8 {
        return None;
    }
    let mut at: ModPath = Vec::new();
    for (i, segment) in path.iter().enumerate() {
        let mut next = at.clone();
        next.push(segment.clone());
        if krate.files.contains_key(&next) {
            at = next;
            continue;
        }
        if let Some(target) = krate.aliases.get(&(at.clone(), segment.clone())) {
            let mut rest = target.clone();
            rest.extend(path[i + 1..].iter().cloned());
            return resolve(krate, &rest, depth + 1);
        }
        break;
    }
    let (_, face) = krate.files.get(&at)?;
    (!face).then_some(at)
}

/// The files a module's code names.
fn edges(krate: &Crate, module: &ModPath, is_face: bool, code: &str) -> BTreeSet<ModPath> {
    let own = if is_face {
        module.clone()
    } else {
        module[..module.len() - 1].to_vec()
    };
    let mut found = BTreeSet::new();
    let mut note = |path: ModPath| {
        if let Some(file) = resolve(krate, &path, 0)
            && &file != module
        {
            found.insert(file);
        }
    };
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", own[..own.len().saturating_sub(1)].to_vec()),
        ("self::", own.clone()),
    ] {
        let mut rest = code;
        while let Some(i) = rest.find(prefix) {
            let before = rest[..i].chars().last();
            rest = &rest[i + prefix.len()..];
            // `super::super::`, or `x::crate::` inside another path: not this form.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let end = rest
                .find(|c: char| {
                    !(c.is_alphanumeric()
                        || c == '_'
                        || c == ':'
                        || c == '{'
                        || c == '}'
                        || c == ','
                        || c == ' '
                        || c == '\n')
                })
                .unwrap_or(rest.len());
            let tree = &rest[..end];
            let tree = match tree.find("::{") {
                Some(_) => &tree[..tree.find('}').map_or(tree.len(), |j| j + 1)],
                None => tree.split([' ', '\n', ',', '{', '}']).next().unwrap_or(""),
            };
            for (path, _) in expand(tree) {
                let mut full = base.clone();
                full.extend(path.split("::").filter(|s| !s.is_empty()).map(String::from));
                note(full);
            }
        }
    }
    found
}

/// A circle in `graph`, if there is one.
fn circle(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Option<Vec<ModPath>> {
    fn visit(
        at: &ModPath,
        graph: &BTreeMap<ModPath, BTreeSet<ModPath>>,
        path: &mut Vec<ModPath>,
        done: &mut BTreeSet<ModPath>,
    ) -> Option<Vec<ModPath>> {
        if let Some(i) = path.iter().position(|p| p == at) {
            let mut found = path[i..].to_vec();
            found.push(at.clone());
            return Some(found);
        }
        if done.contains(at) {
            return None;
        }
        path.push(at.clone());
        for next in graph.get(at).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(at.clone());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|start| visit(start, graph, &mut Vec::new(), &mut done))
}

fn graph_of(krate: &Crate) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    krate
        .files
        .iter()
        .filter(|(_, (_, face))| !face)
        .map(|(m, (text, face))| (m.clone(), edges(krate, m, *face, &code_of(text))))
        .collect()
}

#[test]
fn no_crate_has_a_circle_of_imports_between_its_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut crates = vec![root.join("src")];
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            crates.push(src);
        }
    }
    let (mut total, mut circles) = (0, Vec::new());
    for src in &crates {
        let krate = read_crate(src);
        let graph = graph_of(&krate);
        total += graph.values().map(BTreeSet::len).sum::<usize>();
        if let Some(c) = circle(&graph) {
            let names: Vec<String> = c.iter().map(|m| m.join("/")).collect();
            circles.push(format!("{}: {}", src.display(), names.join(" -> ")));
        }
    }
    assert!(crates.len() >= 6, "read every crate: {crates:?}");
    assert!(total > 250, "found the imports ({total})");
    assert!(
        circles.is_empty(),
        "circles of imports:\n{}",
        circles.join("\n")
    );
}

#[test]
fn paths_resolve_through_faces_and_circles_are_named() {
    let files = BTreeMap::from([
        (
            vec![],
            ("pub use a::Thing;\nmod a;\nmod b;".to_string(), true),
        ),
        (
            vec!["a".to_string()],
            ("use crate::b::f;\npub struct Thing;".to_string(), false),
        ),
        (
            vec!["b".to_string()],
            ("use super::Thing;\npub fn f() {}".to_string(), false),
        ),
    ]);
    let mut krate = Crate {
        files,
        aliases: BTreeMap::new(),
    };
    krate.aliases.insert(
        (vec![], "Thing".to_string()),
        vec!["a".to_string(), "Thing".to_string()],
    );
    let graph = graph_of(&krate);
    assert_eq!(graph[&vec!["b".to_string()]].len(), 1, "{graph:?}");
    assert_eq!(circle(&graph).map(|c| c.len()), Some(3));
    assert_eq!(
        expand("a::{b, c::d}"),
        [("a::b".into(), "b".into()), ("a::c::d".into(), "d".into())]
    );
}
