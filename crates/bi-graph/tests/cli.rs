//! The `bi-graph` tool, run as a user runs it.
#![cfg(feature = "cli")]
#![cfg(not(miri))] // spawns processes

mod common;
use common::{bi_graph, run_ok, stderr, stdout};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A small SNAP file: ids 5, 10, 20, 30 and 7000000000; 30 is dangling (no out-edge);
/// 7000000000 -> 5 is a separate component; 40 only has a self-loop.
const SNAP: &str = "\
# FromNodeId\tToNodeId
10\t20
20\t10
20\t30
10\t30
7000000000\t5

40 40
";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `vertex_id -> value` from an output file, checking its format on the way.
fn values(path: &Path) -> BTreeMap<u64, String> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|line| {
            let (id, value) = line.split_once('\t').expect("id<TAB>value");
            assert!(!value.contains('\t'), "{line:?}");
            (id.parse().expect("integer id"), value.to_owned())
        })
        .collect()
}

#[test]
fn pagerank_writes_every_original_id_and_ranks_summing_to_one() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "g.txt", SNAP);
    let output = dir.path().join("ranks.tsv");
    let out = run_ok(&[
        "pagerank",
        "--input",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--iterations",
        "50",
        "--nodes",
        "2",
    ]);
    let ranks = values(&output);
    assert_eq!(
        ranks.keys().copied().collect::<Vec<_>>(),
        [5, 10, 20, 30, 40, 7_000_000_000]
    );
    let ranks: BTreeMap<u64, f64> = ranks
        .into_iter()
        .map(|(k, v)| (k, v.parse().unwrap()))
        .collect();
    let total: f64 = ranks.values().sum();
    assert!((total - 1.0).abs() < 1e-6, "ranks sum to {total}");
    // 30 receives from both 10 and 20; 7000000000 receives nothing but teleports.
    assert!(ranks[&30] > ranks[&10] && ranks[&30] > ranks[&7_000_000_000]);
    assert!(ranks[&5] > ranks[&7_000_000_000]);
    assert!(stdout(&out).contains("bi-on-demand"), "{}", stdout(&out));
}

#[test]
fn wcc_labels_are_the_smallest_original_id_of_each_component() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "g.txt", SNAP);
    let output = dir.path().join("wcc.tsv");
    run_ok(&[
        "wcc",
        "--input",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--mode",
        "stock",
    ]);
    let labels = values(&output);
    let expected: BTreeMap<u64, String> = [
        (5, "5"),
        (10, "10"),
        (20, "10"),
        (30, "10"),
        (40, "40"),
        (7_000_000_000, "5"),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_owned()))
    .collect();
    assert_eq!(labels, expected);
}

#[test]
fn sssp_takes_an_original_source_and_omits_unreachable_vertices() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        dir.path(),
        "w.txt",
        "100 200 1.5\n200 300 2\n100 300 4\n300 100 1\n900 100 1\n",
    );
    let output = dir.path().join("d.tsv");
    run_ok(&[
        "sssp",
        "--input",
        input.to_str().unwrap(),
        "--source",
        "100",
        "--output",
        output.to_str().unwrap(),
    ]);
    let d = values(&output);
    let expected: BTreeMap<u64, String> = [(100, "0"), (200, "1.5"), (300, "3.5")]
        .into_iter()
        .map(|(k, v)| (k, v.to_owned()))
        .collect();
    assert_eq!(d, expected);
}

#[test]
fn an_unknown_sssp_source_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "g.txt", SNAP);
    let out = bi_graph(&["sssp", "--input", input.to_str().unwrap(), "--source", "11"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("error: unknown source vertex 11"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn matrix_market_isolated_vertices_are_written_too() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        dir.path(),
        "m.mtx",
        "%%MatrixMarket matrix coordinate pattern symmetric\n4 4 2\n2 1\n3 2\n",
    );
    let output = dir.path().join("wcc.tsv");
    run_ok(&[
        "wcc",
        "--input",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ]);
    let labels = values(&output);
    assert_eq!(labels.len(), 4);
    assert_eq!(labels[&3], "1");
    assert_eq!(labels[&4], "4");
}

#[test]
fn malformed_input_names_file_and_line_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "bad.txt", "1 2\n# fine\n3 four\n");
    let out = bi_graph(&["pagerank", "--input", input.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let expected = format!("error: {}:3: target id 'four'", input.display());
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let out = bi_graph(&["wcc", "--input", "/nonexistent/graph.txt"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("error: /nonexistent/graph.txt:"),
        "{}",
        stderr(&out)
    );
}

/// `generate` writes the graph `--scale` generates: read back, it gives the same run.
#[test]
fn generate_writes_the_graph_a_run_generates() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("k9.txt");
    let file = file.to_str().unwrap();
    run_ok(&["generate", "--scale", "9", "--seed", "3", "--output", file]);
    let text = std::fs::read_to_string(file).unwrap();
    let edges = text.lines().filter(|l| !l.starts_with('#')).count();
    let json = |args: &[&str]| {
        let mut a = vec!["wcc", "--json", "--mode", "stock"];
        a.extend(args);
        stdout(&run_ok(&a))
    };
    let generated = json(&["--scale", "9", "--seed", "3"]);
    let read = json(&["--input", file]);
    let field = |text: &str, name: &str| -> usize {
        let at = text.find(&format!("\"{name}\": ")).unwrap() + name.len() + 4;
        text[at..]
            .split([',', '}'])
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(field(&generated, "edges"), edges);
    assert_eq!(field(&read, "edges"), edges);
    // The file names only vertices with edges; the generator keeps isolated ones too.
    assert!(field(&read, "vertices") <= field(&generated, "vertices"));
    let out = bi_graph(&["generate", "--scale", "40", "--output", file]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn wrong_arguments_are_usage_errors() {
    for args in [
        &["pagerank", "--iterations", "5", "--tolerance", "1e-6"][..],
        &["pagerank", "--mode", "fast"],
        &["pagerank", "--partition", "metis"],
        &["pagerank", "--nodes", "0"],
        &["pagerank", "--tolerance", "-1"],
        &["pagerank", "--input", "g.txt", "--scale", "10"],
        &["sssp"],
        &["wcc", "--tolerance", "1e-3"],
        &["bfs"],
    ] {
        let out = bi_graph(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    let out = bi_graph(&["pagerank", "--iterations", "5", "--tolerance", "1e-6"]);
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn help_documents_every_option_and_its_default() {
    let out = run_ok(&["pagerank", "--help"]);
    let help = stdout(&out);
    for option in [
        "--input",
        "--iterations",
        "--tolerance",
        "--nodes",
        "--partition",
        "--mode",
        "--output",
        "--seed",
        "--scale",
        "--edge-factor",
        "--backend",
        "--phases",
        "random",
        "oblivious",
        "grid",
        "stock",
        "bi-on-demand",
        "bi-periodic",
        "all",
        "[default: 16]",
        "[default: 20]",
        "[default: 2]",
    ] {
        assert!(
            help.contains(option),
            "pagerank --help lacks {option}:\n{help}"
        );
    }
    let sssp = stdout(&run_ok(&["sssp", "--help"]));
    assert!(sssp.contains("--source"), "{sssp}");
    let top = stdout(&run_ok(&["--help"]));
    for program in ["pagerank", "wcc", "sssp"] {
        assert!(top.contains(program), "{top}");
    }
}

#[test]
fn mode_all_runs_three_modes_and_a_generated_graph_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("ranks.tsv");
    let out = run_ok(&[
        "pagerank",
        "--scale",
        "8",
        "--iterations",
        "5",
        "--mode",
        "all",
        "--output",
        output.to_str().unwrap(),
    ]);
    let table = stdout(&out);
    for mode in [
        "stock",
        "bi-on-demand",
        "bi-periodic",
        "time/step",
        "replication",
    ] {
        assert!(table.contains(mode), "{table}");
    }
    assert_eq!(table.lines().count(), 4, "{table}");
    let ranks = values(&output);
    assert_eq!(ranks.len(), 256);
    assert_eq!(
        ranks.keys().copied().collect::<Vec<_>>(),
        (0..256).collect::<Vec<u64>>()
    );
}

/// `--phases` adds a table after the summary: a row per mode, a column per phase.
#[test]
fn phases_follow_the_summary_a_row_per_mode() {
    let out = run_ok(&[
        "pagerank",
        "--scale",
        "7",
        "--nodes",
        "2",
        "--iterations",
        "4",
        "--mode",
        "all",
        "--phases",
    ]);
    let text = stdout(&out);
    let (summary, phases) = text
        .split_once("\n\n")
        .expect("a blank line between the tables");
    assert_eq!(summary.lines().count(), 4, "{text}");
    let rows: Vec<&str> = phases.lines().collect();
    assert_eq!(rows.len(), 4, "{text}");
    assert!(rows[0].starts_with("phases per step") && rows[0].contains("invalidate"));
    for (row, mode) in rows[1..]
        .iter()
        .zip(["stock", "bi-on-demand", "bi-periodic"])
    {
        assert!(row.starts_with(mode), "{text}");
        assert_eq!(row.split_whitespace().count(), 1 + 7 * 2, "{row}"); // value and unit
    }
}

#[test]
fn output_dash_writes_values_to_stdout_and_the_summary_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "g.txt", SNAP);
    let out = run_ok(&["wcc", "--input", input.to_str().unwrap(), "--output", "-"]);
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 6, "{text}");
    assert!(text.lines().all(|l| l.split('\t').count() == 2), "{text}");
    assert!(stderr(&out).contains("time/step"));
}

#[test]
fn json_prints_one_summary_line_with_every_mode() {
    let out = run_ok(&[
        "pagerank",
        "--scale",
        "6",
        "--nodes",
        "2",
        "--mode",
        "all",
        "--iterations",
        "3",
        "--json",
    ]);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    let line = lines[0];
    assert!(
        line.starts_with("{\"program\": \"pagerank\", \"vertices\": 64, "),
        "{line}"
    );
    assert!(line.ends_with("}]}"), "{line}");
    for mode in ["stock", "bi-on-demand", "bi-periodic"] {
        assert!(
            line.contains(&format!("{{\"mode\": \"{mode}\", \"supersteps\": 3, ")),
            "{line}"
        );
    }
    assert_eq!(line.matches("\"agrees\": true").count(), 3, "{line}");
    assert!(line.contains("\"vs_first\": null"), "{line}");
    for phase in [
        "scatter",
        "gather_apply",
        "partials",
        "values",
        "write_back",
        "wait",
        "invalidate",
    ] {
        assert_eq!(line.matches(&format!("\"{phase}\": ")).count(), 3, "{line}");
    }
    // Balanced: every object and list opened is closed.
    assert_eq!(line.matches('{').count(), line.matches('}').count());
    assert_eq!(line.matches('[').count(), line.matches(']').count());
}

#[test]
fn json_and_values_on_standard_output_are_refused() {
    let out = bi_graph(&["wcc", "--scale", "6", "--json", "--output", "-"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--json prints the summary on standard output"));
    assert!(stdout(&out).is_empty());
}
