//! Publication order, shown needed: a node that reads a slot straight from memory finds
//! the object the slot names already there, because a publication fences the object's
//! write-back before it stores the slot. With [`Fault::PublishOrder`] the slot is written
//! back first and both reach memory under one later fence; on a machine whose
//! write-backs land late and in any order (as `clwb`'s do), the reader then sometimes
//! finds the slot before the object and cannot validate it.
//!
//! On a machine whose write-backs land when asked, the two orders cannot be told apart:
//! that is why the emulator's adversarial machines make them late.

use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{BiError, Fault, RuntimeConfig};
use std::sync::atomic::{AtomicBool, Ordering};

const PUBLICATIONS: u64 = 4000;

/// Sets its flag when dropped.
struct Stop<'a>(&'a AtomicBool);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Publishes `PUBLICATIONS` new objects into one slot while node 1 reads the slot fresh
/// in a loop; returns (reads, reads whose object did not validate).
fn reads_before_the_object_landed(config: RuntimeConfig) -> (u64, u64) {
    let s = Setup::with(
        RegionConfig::new(1 << 22).with_nodes(2),
        |c| c.seed(3).late_writebacks(0.5),
        config,
    );
    let slot = s.slot(0);
    let done = AtomicBool::new(false);
    std::thread::scope(|t| {
        let reading = t.spawn(|| {
            let r = s.nodes[1].reader().unwrap();
            let (mut reads, mut torn) = (0, 0);
            while !done.load(Ordering::Acquire) {
                let g = r.enter();
                match g.load_fresh::<u64>(slot) {
                    Ok(_) => {}
                    Err(BiError::StaleLink { .. }) => torn += 1,
                    Err(e) => panic!("node 1: {e}"),
                }
                reads += 1;
            }
            (reads, torn)
        });
        // The reader stops however this ends (a panic here included).
        let _stop = Stop(&done);
        let mut w = s.writer(0);
        for i in 0..PUBLICATIONS {
            let link = w.alloc_sealed(i).unwrap();
            w.publish_link(slot, link).unwrap();
            if i % 64 == 63 {
                // Passes consume the modified ring, which would otherwise fill.
                s.quiesce_all().unwrap();
            }
        }
        drop(_stop);
        reading.join().unwrap()
    })
}

#[test]
#[cfg_attr(miri, ignore = "thousands of publications against a polling thread")]
fn a_slot_never_reaches_memory_before_its_object() {
    let (reads, torn) = reads_before_the_object_landed(RuntimeConfig::default());
    assert!(reads > 0);
    assert_eq!(
        torn, 0,
        "{torn} of {reads} fresh reads found the slot before its object"
    );
}

#[test]
#[cfg_attr(miri, ignore = "thousands of publications against a polling thread")]
fn without_the_fence_before_the_slot_a_reader_finds_the_slot_first() {
    let mut torn = 0;
    for _ in 0..20 {
        let (_, t) =
            reads_before_the_object_landed(RuntimeConfig::default().fault(Fault::PublishOrder));
        torn += t;
        if torn > 0 {
            break;
        }
    }
    assert!(torn > 0, "the reader never found a slot before its object");
}
