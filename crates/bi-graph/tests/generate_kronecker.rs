//! Kronecker (R-MAT) graphs: determinism, size, simplicity and skew.

use bi_graph::EdgeList;
use bi_graph::generate::{Kronecker, Uniform};

fn scale() -> u32 {
    if cfg!(miri) { 6 } else { 12 }
}

fn out_degrees(g: &EdgeList) -> Vec<u32> {
    let mut d = vec![0u32; g.num_vertices()];
    for &(s, _) in &g.edges {
        d[s as usize] += 1;
    }
    d
}

fn assert_simple(g: &EdgeList) {
    let n = g.num_vertices() as u32;
    assert!(g.edges.iter().all(|&(s, t)| s != t && s < n && t < n));
    let mut sorted = g.edges.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), g.num_edges(), "repeated edges");
}

#[test]
fn the_same_seed_gives_the_same_graph_and_another_seed_another() {
    let a = Kronecker::graph500(scale(), 1).generate().unwrap();
    let b = Kronecker::graph500(scale(), 1).generate().unwrap();
    let c = Kronecker::graph500(scale(), 2).generate().unwrap();
    assert_eq!(a, b);
    assert_ne!(a.edges, c.edges);
}

#[test]
fn vertices_and_edges_are_counted_as_documented() {
    let s = scale();
    let g = Kronecker::graph500(s, 3).generate().unwrap();
    let n = 1usize << s;
    assert_eq!(g.num_vertices(), n);
    assert_eq!(g.ids, (0..n as u64).collect::<Vec<_>>());
    assert_eq!(g.weights, None);
    assert_simple(&g);
    // Duplicates and loops cost some edges, never most of them.
    assert!(g.num_edges() <= 16 * n);
    assert!(g.num_edges() > 8 * n, "{} edges", g.num_edges());
}

#[test]
fn unpermuted_graphs_concentrate_edges_at_low_labels() {
    let g = Kronecker {
        permute: false,
        ..Kronecker::graph500(scale(), 4)
    }
    .generate()
    .unwrap();
    assert_simple(&g);
    let degrees = out_degrees(&g);
    let hub = (0..degrees.len()).max_by_key(|&v| degrees[v]).unwrap_or(0);
    // With a = 0.57 the top-left quadrant dominates: vertex 0 has the most out-edges.
    assert_eq!(hub, 0, "hub {hub} degree {}", degrees[hub]);
    // Edges come out sorted when not permuted.
    assert!(g.edges.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn kronecker_degrees_are_skewed_and_uniform_ones_are_not() {
    let s = scale();
    let k = Kronecker::graph500(s, 5).generate().unwrap();
    let u = Uniform::new(1 << s, k.num_edges() as u64, 5)
        .generate()
        .unwrap();
    let mean = k.num_edges() as f64 / k.num_vertices() as f64;
    let max_k = *out_degrees(&k).iter().max().unwrap() as f64;
    let max_u = *out_degrees(&u).iter().max().unwrap() as f64;
    let isolated_k = out_degrees(&k).iter().filter(|&&d| d == 0).count();
    let isolated_u = out_degrees(&u).iter().filter(|&&d| d == 0).count();
    assert!(max_k > 10.0 * mean, "R-MAT max {max_k}, mean {mean}");
    assert!(max_u < 3.0 * mean, "uniform max {max_u}, mean {mean}");
    assert!(
        isolated_k > 10 * isolated_u.max(1),
        "{isolated_k} vs {isolated_u}"
    );
}

#[test]
fn edge_factor_scales_the_edges() {
    let small = Kronecker {
        edge_factor: 2,
        ..Kronecker::graph500(scale(), 6)
    }
    .generate()
    .unwrap();
    let large = Kronecker::graph500(scale(), 6).generate().unwrap();
    assert!(small.num_edges() <= 2 << scale());
    assert!(large.num_edges() > 3 * small.num_edges());
}

#[test]
fn bad_parameters_are_errors() {
    for bad in [
        Kronecker::graph500(0, 0),
        Kronecker::graph500(32, 0),
        Kronecker {
            edge_factor: 0,
            ..Kronecker::graph500(4, 0)
        },
        Kronecker {
            a: 0.9,
            b: 0.2,
            ..Kronecker::graph500(4, 0)
        },
        Kronecker {
            c: f64::NAN,
            ..Kronecker::graph500(4, 0)
        },
        Kronecker {
            edge_factor: u32::MAX,
            ..Kronecker::graph500(31, 0)
        },
    ] {
        assert!(
            matches!(
                bad.generate(),
                Err(bi_graph::GraphError::InvalidArgument { .. })
            ),
            "{bad:?}"
        );
    }
}
