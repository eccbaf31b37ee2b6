//! Every hazard of the catalog shows up under its broken variant and never under the real
//! protocol, with the same seeds.

#[test]
fn every_hazard_has_a_working_negative_control() {
    let seeds = if cfg!(miri) { 1 } else { 8 };
    for hazard in bi::hazards::catalog() {
        let row = bi::hazards::run(&hazard, seeds);
        assert!(
            row.broken > 0,
            "{}: the broken variant never showed it",
            row.hazard
        );
        assert_eq!(row.bi, 0, "{}: the real protocol showed it", row.hazard);
        assert_eq!(row.seeds, seeds);
    }
}

#[test]
fn json_lines_have_the_documented_shape() {
    let row = bi::hazards::HazardRow {
        hazard: "x",
        counts: "y",
        broken: 3,
        bi: 0,
        seeds: 2,
    };
    assert_eq!(
        row.to_json(),
        r#"{"hazard": "x", "broken": 3, "bi": 0, "seeds": 2}"#
    );
}
