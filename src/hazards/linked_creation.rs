//! A region file seen half made: a process that opens a pool's path while another
//! process creates it must find no file there or a whole region, never a file still
//! being lengthened or a header not yet written.
//!
//! The schedule: the shipped [`Region::create`] makes a pool file, and after each step of
//! the creation (the file made, lengthened, its header written back, linked) a look opens
//! the path as another process would. Broken ([`Fault::LinkedCreation`]): the file is made
//! in place at its path, so the looks after its first two steps find it too short, then
//! with a header of zeros. BI: it is made whole under a name of its own beside the path
//! and linked into place, so every look finds nothing there or the whole region. Counted:
//! looks that found a file at the path that is not a whole region.

use super::Hazard;
use bi_core::region::{Region, RegionConfig, RegionError};
use bi_core::runtime::{Fault, RuntimeConfig};

pub(super) const HAZARD: Hazard = Hazard {
    name: "region_file_seen_half_made",
    fault: Fault::LinkedCreation,
    counts: "opens of a pool's path, while it was being created, that found a region half made",
    run,
};

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(format!("pool-{seed}.bi"));
    let linked = !config.faults().has(Fault::LinkedCreation);
    let mut half_made = 0;
    let mut look = || match Region::open(&path) {
        Ok(_) => {}
        Err(RegionError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => half_made += 1,
    };
    let region_config = RegionConfig::new(1 << 20).with_nodes(2);
    Region::create_stepwise(&path, region_config, linked, &mut look).expect("created");
    assert!(Region::open(&path).is_ok(), "whole once created");
    half_made
}
