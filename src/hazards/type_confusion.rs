//! Type confusion after reuse: a reader keeps a reference to an object after it was
//! retired, its block is reused for an object of another type, and the reader interprets
//! the new object's bytes as the old type.
//!
//! A writer publishes an `Account`, a reader takes its link, the writer replaces and
//! retires it, and once the grace period allows it the block is reused for a `Label`. The
//! reader then follows the link it kept. Broken: the reader reads the payload at the
//! link's offset as an `Account` (it does not check generations). BI: `follow` checks the
//! link's generation against the stamps in the block and refuses the read. Counted:
//! `Account`s accepted whose bytes were not an `Account`.

use super::{Hazard, Variant, two_runtimes};
use bi_core::mem::MemView;
use bi_core::runtime::object::STAMP_BYTES;
use bytemuck::{Pod, Zeroable};

pub(super) const HAZARD: Hazard = Hazard {
    name: "type_confusion_after_reuse",
    counts: "reads through a kept link that accepted another type's bytes",
    run,
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

fn run(variant: Variant, seed: u64) -> u64 {
    let s = two_runtimes(seed, |c| c);
    let (accounts, labels) = (s.slot(0), s.slot(1));
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
    let label = w
        .alloc(Label {
            text: *b"not an account!!",
        })
        .expect("heap");
    debug_assert_eq!(label.offset(), kept.offset(), "the block is reused");
    w.publish(labels, label).expect("publish");
    s.quiesce_all().expect("pass");

    let n1 = s.emu.node(1);
    let accepted = match variant {
        Variant::Broken => {
            let at = kept.offset() + STAMP_BYTES;
            let account: Account = n1.load(at).expect("in bounds");
            account.tag != ACCOUNT
        }
        Variant::Bi => match reader.enter().follow(kept) {
            Ok(Some(account)) => account.tag != ACCOUNT,
            _ => false, // refused: the link is stale
        },
    };
    u64::from(accepted)
}
