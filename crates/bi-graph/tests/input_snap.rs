//! SNAP-style edge lists: ids, comments, weights, and every kind of malformed line.

use bi_graph::GraphError;
use bi_graph::input::{Format, GraphReader};

fn read(text: &str) -> Result<bi_graph::EdgeList, GraphError> {
    GraphReader::new().read(text.as_bytes(), "g.txt", Format::EdgeList)
}

/// The line and problem of a parse error (panics on anything else: tests only).
fn parse_error(text: &str) -> (usize, String) {
    match read(text) {
        Err(GraphError::Parse {
            file,
            line,
            problem,
        }) => {
            assert_eq!(file.to_str(), Some("g.txt"));
            (line, problem)
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn sparse_ids_become_dense_in_increasing_order() {
    let g =
        read("# comment\n\n900 5\n  5\t17 \n% konect comment\n17 900\n18446744073709551615 5\n")
            .unwrap();
    assert_eq!(g.ids, [5, 17, 900, u64::MAX]);
    assert_eq!(g.edges, [(2, 0), (0, 1), (1, 2), (3, 0)]);
    assert_eq!(g.weights, None);
}

#[test]
fn windows_line_endings_and_a_missing_final_newline_are_fine() {
    let g = read("1 2\r\n2 3\r\n3 1").unwrap();
    assert_eq!(g.ids, [1, 2, 3]);
    assert_eq!(g.num_edges(), 3);
}

#[test]
fn self_loops_and_repeated_edges_are_kept() {
    let g = read("1 1\n1 2\n1 2\n").unwrap();
    assert_eq!(g.edges, [(0, 0), (0, 1), (0, 1)]);
}

#[test]
fn a_third_column_is_a_weight() {
    let g = read("1 2 0.5\n2 3 4\n3 1 1e-3\n").unwrap();
    assert_eq!(g.weights, Some(vec![0.5, 4.0, 1e-3]));
    assert_eq!(g.weight(1), 4.0);
}

#[test]
fn an_empty_file_is_an_empty_graph() {
    let g = read("# nothing\n\n").unwrap();
    assert_eq!((g.num_vertices(), g.num_edges()), (0, 0));
}

#[test]
fn malformed_lines_name_their_line_and_problem() {
    let cases: &[(&str, usize, &str)] = &[
        ("1 2\nx 3\n", 2, "source id 'x'"),
        ("1 2\n3 -4\n", 2, "target id '-4'"),
        ("1 2\n# c\n3\n", 3, "missing target column"),
        ("1 2\n3 4 5 6\n", 2, "extra column '5'"),
        ("1 2 1.0\n3 4 2.0 9\n", 2, "extra column '9'"),
        ("1 2 1.0\n3 4\n", 2, "missing weight column"),
        ("1 2\n3 4 1.0\n", 2, "extra column '1.0'"),
        ("1 2 abc\n", 1, "weight 'abc' is not a number"),
        ("1 2 NaN\n", 1, "weight is NaN"),
        ("1 2 inf\n", 1, "not finite"),
        ("1 2 -3\n", 1, "negative weight"),
        (
            "18446744073709551616 1\n",
            1,
            "not a non-negative 64-bit integer",
        ),
        ("1.5 2\n", 1, "source id '1.5'"),
    ];
    for &(text, line, problem) in cases {
        let (got_line, got_problem) = parse_error(text);
        assert_eq!(got_line, line, "{text:?}: {got_problem}");
        assert!(
            got_problem.contains(problem),
            "{text:?}: {got_problem:?} should mention {problem:?}"
        );
    }
}

#[test]
fn the_error_message_is_file_line_problem() {
    let err = read("1 2\n\n3 z\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "g.txt:3: target id 'z' is not a non-negative 64-bit integer"
    );
}

#[test]
fn negative_weights_can_be_allowed() {
    let g = GraphReader::new()
        .allow_negative_weights(true)
        .read(&b"1 2 -3\n"[..], "g.txt", Format::EdgeList)
        .unwrap();
    assert_eq!(g.weights, Some(vec![-3.0]));
}

#[test]
#[cfg_attr(miri, ignore)] // touches the file system
fn files_are_read_and_missing_files_are_io_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.txt");
    std::fs::write(&path, "3 4\n4 3\n").unwrap();
    let g = bi_graph::input::read_graph(&path).unwrap();
    assert_eq!(g.ids, [3, 4]);
    let missing = dir.path().join("absent.txt");
    match bi_graph::input::read_graph(&missing) {
        Err(GraphError::Io { file, .. }) => assert_eq!(file, missing),
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

#[test]
fn large_files_load_with_correct_ids() {
    // Enough lines to cross several read buffers and progress steps.
    let edges = if cfg!(miri) { 200 } else { 200_000 };
    let mut text = String::new();
    for i in 0..edges as u64 {
        text.push_str(&format!("{} {}\n", i * 3, (i * 7 + 1) % (3 * edges as u64)));
    }
    let g = read(&text).unwrap();
    assert_eq!(g.num_edges(), edges);
    assert!(g.ids.windows(2).all(|w| w[0] < w[1]));
    for (i, &(s, t)) in g.edges.iter().enumerate().step_by(997) {
        let i = i as u64;
        assert_eq!(g.ids[s as usize], i * 3);
        assert_eq!(g.ids[t as usize], (i * 7 + 1) % (3 * edges as u64));
    }
}
