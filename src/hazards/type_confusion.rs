//! A link kept past its section: a reader keeps a link to an object as plain data, the
//! writer replaces and retires the object, the grace period passes and the block is given
//! back to the heap. Two rows follow the kept link with the runtime's reader.
//!
//! **Type confusion after reuse**: the block is reused for an object of another type (a
//! `Label`) and the reader reads the new object's bytes as the old type (an `Account`).
//! Broken ([`Fault::GenerationBump`]): the reused block's object keeps the generation of
//! the block's last one, so the kept link matches it. BI: the generation moves on and
//! the read is refused. Counted: `Account`s accepted whose bytes were not an `Account`.
//!
//! **A retired object read as live**: the block is not reused yet and still holds the
//! retired `Account`. Broken ([`Fault::FreedMark`]): the read ignores the FREED mark the
//! retirement wrote into its first line. BI: the read is refused. Counted: retired
//! `Account`s returned through the kept link.

use super::{Hazard, two_runtimes};
use bi_core::heap::BumpHeap;
use bi_core::mem::EmulatedNode;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{Fault, Link, Reader, RuntimeConfig, Writer};
use bytemuck::{Pod, Zeroable};

pub(super) const HAZARD: Hazard = Hazard {
    name: "type_confusion_after_reuse",
    fault: Fault::GenerationBump,
    counts: "reads through a kept link that accepted another type's bytes",
    run: |config, seed| {
        let (s, mut w, reader, kept) = kept_link_of_a_freed_object(config, seed);
        let label = w
            .alloc(Label {
                text: *b"not an account!!",
            })
            .expect("heap");
        debug_assert_eq!(label.offset(), kept.offset(), "the block is reused");
        w.publish(s.slot(1), label).expect("publish");
        s.quiesce_all().expect("pass");
        let accepted = matches!(reader.enter().follow(kept), Ok(Some(a)) if a.tag != ACCOUNT);
        u64::from(accepted)
    },
};

pub(super) const RETIRED: Hazard = Hazard {
    name: "retired_object_read_as_live",
    fault: Fault::FreedMark,
    counts: "retired objects returned through a kept link",
    run: |config, seed| {
        let (_s, _w, reader, kept) = kept_link_of_a_freed_object(config, seed);
        u64::from(matches!(reader.enter().follow(kept), Ok(Some(_))))
    },
};

const ACCOUNT: u64 = 0xACC0_0000_0000_0ACC;

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Account {
    tag: u64,
    balance: u64,
}

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Label {
    text: [u8; 16],
}

/// The schedule both rows share: node 1's reader keeps the link to an `Account` the
/// writer then replaces and retires; returns once the grace period gave the block back
/// (not yet reused).
fn kept_link_of_a_freed_object(
    config: RuntimeConfig,
    seed: u64,
) -> (
    Setup,
    Writer<EmulatedNode, BumpHeap>,
    Reader<EmulatedNode>,
    Link<Account>,
) {
    let s = two_runtimes(config, seed, |c| c);
    let accounts = s.slot(0);
    let mut w = s.writer(0);
    let b = w
        .alloc(Account {
            tag: ACCOUNT,
            balance: 100,
        })
        .expect("heap");
    w.publish(accounts, b).expect("publish");
    s.quiesce_all().expect("pass");
    let reader = s.nodes[1].reader().expect("reader slot");
    let kept = reader
        .enter()
        .load::<Account>(accounts)
        .expect("read")
        .expect("published")
        .link(); // the reader keeps the link beyond its section (as plain data)
    let b = w
        .alloc(Account {
            tag: ACCOUNT,
            balance: 200,
        })
        .expect("heap");
    let old = w.publish(accounts, b).expect("publish");
    w.retire(old).expect("retire");
    while w.reclaim().expect("reclaim").freed_blocks == 0 {
        s.quiesce_all().expect("pass");
    }
    (s, w, reader, kept)
}
