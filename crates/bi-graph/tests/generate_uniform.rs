//! Uniform random graphs `G(n, m)`: determinism, exact counts, simplicity, flatness.

use bi_graph::generate::Uniform;

fn n() -> u32 {
    if cfg!(miri) { 64 } else { 4096 }
}

#[test]
fn the_same_seed_gives_the_same_graph_and_another_seed_another() {
    let m = 8 * u64::from(n());
    let a = Uniform::new(n(), m, 1).generate().unwrap();
    assert_eq!(a, Uniform::new(n(), m, 1).generate().unwrap());
    assert_ne!(a.edges, Uniform::new(n(), m, 2).generate().unwrap().edges);
}

#[test]
fn exactly_m_distinct_edges_without_loops() {
    for (vertices, m) in [
        (n(), 16 * u64::from(n())),
        (50, 1000),
        (50, 2400),
        (2, 2),
        (3, 0),
    ] {
        let g = Uniform::new(vertices, m, 7).generate().unwrap();
        assert_eq!(g.num_vertices(), vertices as usize);
        assert_eq!(g.num_edges() as u64, m, "G({vertices}, {m})");
        assert!(
            g.edges.windows(2).all(|w| w[0] < w[1]),
            "sorted and distinct"
        );
        assert!(
            g.edges
                .iter()
                .all(|&(s, t)| s != t && s < vertices && t < vertices)
        );
    }
}

#[test]
fn every_pair_is_about_equally_likely() {
    // 20 vertices, 38 of 380 possible edges, many seeds: each source gets ~1/20 of them.
    // The seeds are a sample of the generator's, not reruns of a test: `BI_SEED` does not
    // pick one.
    let seeds = bi_kit::under_miri(400, 10);
    let mut per_source = [0u32; 20];
    for seed in 0..seeds {
        let g = Uniform::new(20, 38, seed).generate().unwrap();
        for &(s, _) in &g.edges {
            per_source[s as usize] += 1;
        }
    }
    assert_eq!(per_source.iter().sum::<u32>(), 38 * seeds as u32);
    if !cfg!(miri) {
        let expected = 38.0 * seeds as f64 / 20.0; // 760
        for count in per_source {
            assert!(
                (f64::from(count) - expected).abs() < 0.2 * expected,
                "{per_source:?}"
            );
        }
    }
}

#[test]
fn too_many_edges_is_an_error() {
    assert!(Uniform::new(10, 91, 0).generate().is_err());
    assert!(Uniform::new(0, 1, 0).generate().is_err());
    assert!(Uniform::new(10, 90, 0).generate().is_ok());
}
