//! Log overflow: a writer's log of modified lines is a ring of fixed size. A node whose
//! pass falls more than a ring behind finds entries overwritten before it read them: it
//! cannot know which lines they named, so it drops every line of the heap and the root
//! directory it caches (and again once its readers have left), and its readers pay a miss
//! on everything they read next.
//!
//! The region's rings hold eight entries; the writer on node 0 publishes forty values
//! round-robin into eight slots (two entries each: the slot and the object), and the
//! nodes pass every ten publications. Broken ([`Fault::LogBackPressure`]): a full ring
//! overwrites its oldest entries. BI: a full ring refuses ([`BiError::LogFull`]) until
//! every live node has passed since the entries became visible; the blocking `publish`
//! waits for that, and here, in a single-threaded schedule, the wait is the passes
//! themselves. Counted: passes that found a ring overflowed and dropped their whole
//! cache ([`PassReport::overflow`](bi_core::runtime::PassReport::overflow)).

use super::{Hazard, hostile};
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, Fault, RuntimeConfig, Unpublished};

pub(super) const HAZARD: Hazard = Hazard {
    name: "log_overflow",
    fault: Fault::LogBackPressure,
    counts: "passes that found a log ring overflowed and dropped their whole cache",
    run,
};

const SLOTS: usize = 8;
const PUBLICATIONS: u64 = 40;
const PASS_EVERY: u64 = 10;

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let s = Setup::with(
        RegionConfig::new(1 << 18)
            .with_nodes(2)
            .with_log_ring_entries(8),
        |c| hostile(c.seed(seed)),
        config,
    );
    let mut overflows = 0;
    let pass = || -> u64 {
        let reports = s.quiesce_all().expect("pass");
        reports.iter().filter(|r| r.overflow).count() as u64
    };
    // The first pass of a node drops its whole cache anyway: not an overflow.
    pass();
    let mut w = s.writer(0);
    for value in 1..=PUBLICATIONS {
        let slot = s.slot(value as usize % SLOTS);
        let mut bibox = w.alloc(value).expect("heap");
        while let Err(Unpublished { error, bibox: back }) = w.try_publish(slot, bibox) {
            assert!(matches!(error, BiError::LogFull { .. }), "{error}");
            // Back-pressure: the ring has room again once every node has passed.
            overflows += pass();
            bibox = back;
        }
        if value % PASS_EVERY == 0 {
            overflows += pass();
        }
    }
    overflows
}
