//! One name per mechanism in the hazard catalog: each file of `src/hazards/` is named
//! after the switch its rows turn off (`Fault::PublishOrder` in `publish_order.rs`), or
//! after the family its switches share (`snapshot.rs` for `SnapshotSum` and
//! `SnapshotRecollect`). The files that hold rows of unrelated switches sharing one
//! program are listed below with those switches, so a new row lands where its name says
//! or is added here on purpose. Read from the source, so it runs without the `hazards`
//! feature.

use std::collections::BTreeSet;
use std::path::Path;

/// Files whose rows share one program over several unrelated switches, and the switches.
const SHARED_PROGRAMS: &[(&str, &[&str])] = &[
    // A takeover and a batch's conditions, over one delegation area and its clients.
    (
        "delegation",
        &["delegation_takeover", "conditions_at_batch_start"],
    ),
    // Memory a dead node or a stuck reader holds back: one retire-and-reclaim program.
    ("liveness", &["node_lease", "reader_lease"]),
    // A reader inside while its block is reused: the wait and the record it waits on.
    ("reuse_under_reader", &["grace_wait", "reader_record"]),
    // A kept link to an object freed and reused: the generation and the FREED mark.
    ("type_confusion", &["freed_mark", "generation_bump"]),
    // A writer that lost its role writing on: its lease, a pass's renewal, lost roles.
    (
        "writer_lease",
        &["lease_lapse", "lost_roles", "writer_lease"],
    ),
];

fn snake(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The switches a file's rows name (`fault: Fault::X`), as `snake_case`.
fn switches(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("fault: Fault::"))
        .map(|rest| snake(rest.trim_end_matches(',')))
        .collect()
}

#[test]
fn every_hazard_file_is_named_after_its_switch() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/hazards");
    let mut wrong = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        if stem == "mod" {
            continue;
        }
        files += 1;
        let found = switches(&std::fs::read_to_string(&path).unwrap());
        assert!(!found.is_empty(), "{stem}.rs names no switch");
        let named = found
            .iter()
            .all(|f| *f == stem || f.starts_with(&format!("{stem}_")));
        let listed = SHARED_PROGRAMS
            .iter()
            .find(|(file, _)| *file == stem)
            .map(|(_, fs)| fs.iter().map(|f| f.to_string()).collect::<BTreeSet<_>>());
        match listed {
            Some(listed) if listed == found => {}
            Some(listed) => wrong.push(format!(
                "{stem}.rs: its switches {found:?} are not the ones listed, {listed:?}"
            )),
            None if named => {}
            None => wrong.push(format!("{stem}.rs holds rows of {found:?}")),
        }
    }
    assert!(files > 30, "read {files} files from {}", dir.display());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_name_rule_reads_switches_as_written() {
    assert_eq!(snake("PublishOrder"), "publish_order");
    let text =
        "    name: \"x\",\n    fault: Fault::SnapshotSum,\n    fault: Fault::SnapshotRecollect,\n";
    assert_eq!(
        switches(text),
        BTreeSet::from(["snapshot_sum".to_string(), "snapshot_recollect".to_string()])
    );
}
