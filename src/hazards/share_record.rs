//! Two processes that claim one free node at the same moment both write its claim and
//! then its share record (which names the runner's process, so that processes of its
//! host ask the kernel whether it still exists rather than trust its lease). The claim
//! settles on one of them; the share record that landed last may be the other's. A
//! record that names the loser makes the winner a runner nobody can ask about: once its
//! heartbeat ages (its process stopped, or only slow), its roles are taken although it
//! still exists, and its stores land beside its successor's when it runs again.
//!
//! The schedule: node 0's runtime holds the claim of its node; the share record a
//! losing claimant wrote lands after node 0's own; node 0 passes once. Then the record
//! is read as another process of the host reads it before it judges node 0's runner:
//! does it name the runner that holds node 0's claim? (The nodes of this catalog run in
//! one process, which the kernel is never asked about, so the row counts what another
//! process would be told rather than taking a role.) Broken
//! ([`Fault::ShareRecordRepair`]): the pass leaves the loser's record. BI: the pass makes
//! the record name node 0's runner again. Counted: passes after which the record named
//! another claimant.

use super::{Hazard, two_runtimes};
use bi_core::mem::MemView;
use bi_core::runtime::share::{SHARE_SLOT, ShareRecord};
use bi_core::runtime::{Fault, RuntimeConfig};

pub(super) const HAZARD: Hazard = Hazard {
    name: "share_record_of_a_losing_claimant",
    fault: Fault::ShareRecordRepair,
    counts: "passes after which node 0's share record named a losing claimant, not its runner",
    run,
};

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let s = two_runtimes(config, seed, |c| c);
    let layout = s.region.layout();
    let record = layout.node_record(0).expect("node 0").offset;
    let at = record + SHARE_SLOT * layout.slot_size();
    let view = s.nodes[0].view();
    let mut hazards = 0;
    for round in 0..3u64 {
        // The losing claimant's share record lands last: its own token, its process.
        let mine: ShareRecord = view.load_from_memory(at).expect("share record");
        let loser = ShareRecord {
            runner: mine.runner ^ (2 << round),
            pid: u64::from(u32::MAX),
            ..mine
        };
        view.store_to_memory(at, &loser).expect("share record");
        s.nodes[0].quiesce().expect("pass");
        let holder = s.nodes[0].record().expect("node record").holder;
        let seen: ShareRecord = s.nodes[1]
            .view()
            .load_from_memory(at)
            .expect("share record");
        hazards += u64::from(seen.runner != holder || seen.pid != mine.pid);
    }
    hazards
}
