//! Named roots and pointers under the non-coherence emulator: a root published by one node
//! is found by another even when that node holds a stale copy of the root directory,
//! because root lookups invalidate the directory first. The negative control reads the
//! same directory bytes without invalidating and sees the stale (empty) entry.

use bi_core::mem::{Emulator, EmulatorConfig, MemView};
use bi_core::ptr::ShPtr;
use bi_core::region::{Region, RegionConfig};

fn setup() -> (Region, Emulator) {
    let region = Region::anonymous(RegionConfig::new(1 << 17).with_nodes(2)).unwrap();
    let cfg = EmulatorConfig::new(region.layout().size(), 2).seed(7);
    let emu = Emulator::over(region.backing().clone(), cfg).unwrap();
    (region, emu)
}

#[test]
fn root_published_by_one_node_is_found_by_another_despite_a_stale_directory() {
    let (region, emu) = setup();
    let (a, b) = (emu.node(0), emu.node(1));
    let dir = region.layout().root_directory();

    // B looks first: nothing there, and now B caches the (empty) directory lines.
    assert_eq!(region.root::<u64, _>(&b, "answer").unwrap(), None);
    let first_entry: [u8; 64] = b.load(dir.offset).unwrap();

    // A allocates (here: picks) a heap slot, writes the value, writes it back, and
    // publishes the root.
    let ptr: ShPtr<u64> = ShPtr::new(region.layout().heap().offset as u64);
    ptr.store(&a, &42).unwrap();
    a.writeback(ptr.offset() as usize, 8).unwrap();
    a.fence();
    region.set_root(&a, "answer", ptr).unwrap();

    // Negative control: B's cached directory line still shows the old entry.
    let stale_entry: [u8; 64] = b.load(dir.offset).unwrap();
    assert_eq!(stale_entry, first_entry);
    assert!(
        emu.stats(1).stale_reads > 0,
        "the directory copy on B is stale"
    );

    // The root lookup invalidates the directory, so B finds the root and the value.
    let found = region
        .root::<u64, _>(&b, "answer")
        .unwrap()
        .expect("root found");
    assert_eq!(found, ptr);
    b.invalidate(found.offset() as usize, 8).unwrap();
    b.fence();
    assert_eq!(found.load(&b).unwrap(), 42);
    assert_eq!(emu.total_stats().reuse_hazards, 0);
}

#[test]
fn a_pointer_value_not_written_back_is_invisible_to_the_other_node() {
    let (region, emu) = setup();
    let (a, b) = (emu.node(0), emu.node(1));
    let ptr: ShPtr<u64> = ShPtr::new(region.layout().heap().offset as u64 + 64);
    ptr.store(&a, &9).unwrap(); // never written back
    assert_eq!(ptr.load(&b).unwrap(), 0);
    a.writeback(ptr.offset() as usize, 8).unwrap();
    a.fence();
    b.invalidate(ptr.offset() as usize, 8).unwrap();
    b.fence();
    assert_eq!(ptr.load(&b).unwrap(), 9);
}
