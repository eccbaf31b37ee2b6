//! No input makes a reader panic, and well-formed edge lists read back exactly.

use bi_graph::input::{Format, GraphReader};
use proptest::prelude::*;

/// Bytes that look a little like graph files, so the parsers get past their first line.
fn graph_like_bytes() -> impl Strategy<Value = Vec<u8>> {
    let pieces = prop_oneof![
        Just(b"%%MatrixMarket matrix coordinate real general\n".to_vec()),
        Just(b"%%MatrixMarket matrix coordinate pattern symmetric\n".to_vec()),
        Just(b"3 3 2\n".to_vec()),
        Just(b"# c\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b" ".to_vec()),
        Just(b"\t".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"-".to_vec()),
        Just(b"nan".to_vec()),
        "[0-9]{1,21}".prop_map(String::into_bytes),
        proptest::collection::vec(any::<u8>(), 0..8),
    ];
    proptest::collection::vec(pieces, 0..24).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(bi_kit::prop::config(256, 8))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        for format in [Format::EdgeList, Format::MatrixMarket] {
            let _ = GraphReader::new().read(&bytes[..], "x", format);
        }
    }

    #[test]
    fn graph_like_bytes_never_panic_and_results_are_consistent(bytes in graph_like_bytes()) {
        for format in [Format::EdgeList, Format::MatrixMarket] {
            if let Ok(g) = GraphReader::new().read(&bytes[..], "x", format) {
                let n = g.num_vertices();
                prop_assert!(g.edges.iter().all(|&(s, t)| (s as usize) < n && (t as usize) < n));
                prop_assert!(g.ids.windows(2).all(|w| w[0] < w[1]));
                if let Some(w) = &g.weights {
                    prop_assert_eq!(w.len(), g.num_edges());
                }
            }
        }
    }

    #[test]
    fn written_edge_lists_read_back(
        edges in proptest::collection::vec((any::<u64>(), 0u64..50), 0..64),
        weighted in any::<bool>(),
    ) {
        let mut text = String::from("# generated\n");
        for (i, (s, t)) in edges.iter().enumerate() {
            if weighted {
                text.push_str(&format!("{s}\t{t} {}.5\n", i));
            } else {
                text.push_str(&format!("{s} {t}\n"));
            }
        }
        let g = GraphReader::new().read(text.as_bytes(), "x", Format::EdgeList).unwrap();
        let mut ids: Vec<u64> = edges.iter().flat_map(|&(s, t)| [s, t]).collect();
        ids.sort_unstable();
        ids.dedup();
        prop_assert_eq!(&g.ids, &ids);
        let back: Vec<(u64, u64)> =
            g.edges.iter().map(|&(s, t)| (g.ids[s as usize], g.ids[t as usize])).collect();
        prop_assert_eq!(back, edges.clone());
        if weighted && !edges.is_empty() {
            let expected: Vec<f64> = (0..edges.len()).map(|i| i as f64 + 0.5).collect();
            prop_assert_eq!(g.weights, Some(expected));
        } else {
            prop_assert_eq!(g.weights, None);
        }
    }
}
