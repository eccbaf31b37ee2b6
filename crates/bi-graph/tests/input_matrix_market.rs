//! Matrix Market coordinate files: header, size line, entries, symmetry, detection.

use bi_graph::GraphError;
use bi_graph::input::{Format, GraphReader};

fn read(text: &str) -> Result<bi_graph::EdgeList, GraphError> {
    GraphReader::new().read(text.as_bytes(), "m.mtx", Format::MatrixMarket)
}

fn parse_error(text: &str) -> (usize, String) {
    match read(text) {
        Err(GraphError::Parse { line, problem, .. }) => (line, problem),
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn general_real_entries_are_weighted_edges_with_one_based_ids() {
    let g = read(
        "%%MatrixMarket matrix coordinate real general\n% comment\n\n4 4 3\n1 2 0.5\n2 3 2\n4 1 1e1\n",
    )
    .unwrap();
    assert_eq!(g.ids, [1, 2, 3, 4]);
    assert_eq!(g.edges, [(0, 1), (1, 2), (3, 0)]);
    assert_eq!(g.weights, Some(vec![0.5, 2.0, 10.0]));
}

#[test]
fn symmetric_entries_stand_for_both_directions_but_the_diagonal_once() {
    let g =
        read("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n2 1\n3 1\n2 2\n").unwrap();
    assert_eq!(g.edges, [(1, 0), (0, 1), (2, 0), (0, 2), (1, 1)]);
    assert_eq!(g.weights, None);
}

#[test]
fn integer_fields_and_isolated_rows() {
    let g = read("%%MatrixMarket matrix coordinate integer general\n5 5 1\n1 5 7\n").unwrap();
    assert_eq!(g.num_vertices(), 5);
    assert_eq!(g.weights, Some(vec![7.0]));
}

#[test]
fn banner_words_are_case_insensitive() {
    let g = read("%%matrixmarket MATRIX Coordinate Pattern General\n2 2 1\n1 2\n").unwrap();
    assert_eq!(g.edges, [(0, 1)]);
}

#[test]
fn malformed_files_name_their_line_and_problem() {
    let cases: &[(&str, usize, &str)] = &[
        ("", 1, "missing %%MatrixMarket banner"),
        ("1 2\n", 1, "bad header"),
        (
            "%%MatrixMarket matrix array real general\n",
            1,
            "'array' is not supported",
        ),
        (
            "%%MatrixMarket matrix coordinate complex general\n",
            1,
            "'complex'",
        ),
        (
            "%%MatrixMarket matrix coordinate real hermitian\n",
            1,
            "'hermitian'",
        ),
        (
            "%%MatrixMarket matrix coordinate real\n",
            1,
            "missing symmetry",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n% only comments\n",
            3,
            "missing size line",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n3 4 1\n",
            2,
            "must be square",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n3 3\n",
            2,
            "missing entries",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n3 3 x\n",
            2,
            "'x' is not an integer",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n2 2 5\n",
            2,
            "do not fit",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n",
            4,
            "after 1 of the 2 entries",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2\n2 3\n",
            4,
            "more entries",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n0 2\n",
            3,
            "row index 0 is out of range 1..=3",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 4\n",
            3,
            "column index 4 is out of range",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1\n",
            3,
            "missing column column",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2 3\n",
            3,
            "extra column '3'",
        ),
        (
            "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 2\n",
            3,
            "missing value column",
        ),
        (
            "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 2 nan\n",
            3,
            "NaN",
        ),
        (
            "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 2 -1\n",
            3,
            "negative weight",
        ),
        (
            "%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 2 1.5\n",
            3,
            "not an integer",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n999999999 999999999 1\n",
            2,
            "too sparse",
        ),
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
#[cfg_attr(miri, ignore)] // touches the file system
fn the_format_is_detected_by_banner_or_extension() {
    let dir = tempfile::tempdir().unwrap();
    let banner = dir.path().join("graph.data");
    std::fs::write(
        &banner,
        "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n2 1\n",
    )
    .unwrap();
    let g = bi_graph::input::read_graph(&banner).unwrap();
    assert_eq!((g.ids.clone(), g.edges), (vec![1, 2], vec![(1, 0)]));

    // A .mtx name without the banner is read as Matrix Market, so the banner is missed.
    let named = dir.path().join("graph.MTX");
    std::fs::write(&named, "1 2\n").unwrap();
    match bi_graph::input::read_graph(&named) {
        Err(GraphError::Parse {
            line: 1, problem, ..
        }) => assert!(problem.contains("bad header")),
        other => panic!("expected a header error, got {other:?}"),
    }

    // Forcing the format overrides the extension.
    let g = GraphReader::new()
        .format(Format::EdgeList)
        .read_path(&named)
        .unwrap();
    assert_eq!(g.ids, [1, 2]);
}
