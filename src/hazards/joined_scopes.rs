//! A structure only a joined process reads: several processes of one host can be one
//! node (one runs it, the others join), and the runner's passes must act on what only
//! the joined processes read, although no reader of the runner declared it.
//!
//! The schedule: node 0's writer publishes a structure under its own scope; a second
//! process of node 1's host joins the node, declares the structure and reads it (the
//! host's cache now holds the slot and the object); the writer publishes newer
//! versions, retiring each old one; every node passes; the joined process reads again.
//! Broken ([`Fault::JoinedScopes`]): the runner's passes ignore the node's joined flag
//! and skip the structure (none of the runner's readers declared it), so the joined
//! process reads the version its host cached before the updates. BI: with a joined
//! process the passes skip nothing. Counted: reads by the joined process after the
//! passes that did not return the newest version.

use super::{Hazard, two_runtimes};
use bi_core::runtime::{Fault, NodeRuntime, RuntimeConfig, Scope};

pub(super) const HAZARD: Hazard = Hazard {
    name: "joined_process_skipped",
    fault: Fault::JoinedScopes,
    counts: "reads by a joined process, after passes, of a version older than the newest",
    run,
};

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let s = two_runtimes(config.clone(), seed, |c| c);
    // Both nodes run: fresh heartbeats, and node 1 can be joined.
    s.quiesce_all().expect("pass");
    let joined =
        NodeRuntime::emulated_join(s.emu.node(1), *s.region.layout(), config).expect("join");
    let mut w = s.writer(0);
    let slot = s.slot(0);
    let scope = Scope::of_slot(slot);
    w.set_scope(scope).expect("scope");
    let first = w.alloc(1u64).expect("heap");
    w.publish(slot, first).expect("publish");
    s.quiesce_all().expect("pass");
    let reader = joined.reader().expect("reader slot");
    reader.use_scope(scope).expect("declare");
    // The joined process caches the slot's line (in its host's cache: node 1's).
    let cached = reader.enter().load::<u64>(slot).expect("read").map(|v| *v);
    debug_assert_eq!(cached, Some(1));
    let newest = 2 + seed % 8;
    for version in 2..=newest {
        let b = w.alloc(version).expect("heap");
        let old = w.publish(slot, b).expect("publish");
        w.retire(old).expect("retire");
    }
    for _ in 0..3 {
        s.quiesce_all().expect("pass");
    }
    let read = reader.enter().load::<u64>(slot).expect("read").map(|v| *v);
    u64::from(read != Some(newest))
}
