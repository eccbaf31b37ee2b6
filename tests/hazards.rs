//! The hazard catalog bites: every row shows its hazard with its mechanism switched off
//! and never with every mechanism on, under the same seeds; and every switch the shipped
//! code has is some row's.

use bi::core::runtime::Fault;
use bi::hazards::catalog;

/// `BI_HAZARD=name` runs one row only (while working on it).
fn selected() -> Vec<bi::hazards::Hazard> {
    let only = std::env::var("BI_HAZARD").ok();
    catalog()
        .into_iter()
        .filter(|h| only.as_deref().is_none_or(|o| o == h.name))
        .collect()
}

#[test]
fn every_hazard_has_a_working_negative_control() {
    let seeds = 8;
    for hazard in selected() {
        let row = bi::hazards::run(&hazard, seeds);
        assert!(
            row.broken > 0,
            "{} ({:?}): the broken variant never showed it",
            row.hazard,
            row.fault
        );
        assert_eq!(row.bi, 0, "{}: the shipped protocol showed it", row.hazard);
        assert_eq!(row.seeds, seeds);
    }
}

#[test]
fn every_switch_has_a_row() {
    let rows = catalog();
    let missing: Vec<Fault> = Fault::ALL
        .iter()
        .copied()
        .filter(|f| rows.iter().all(|h| h.fault != *f))
        .collect();
    assert!(
        missing.is_empty(),
        "switches no row shows needed: {missing:?}"
    );
    let mut names: Vec<_> = rows.iter().map(|h| h.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), rows.len(), "two rows share a name");
}
