//! Checks on the emulated machine as a whole: reuse hazards and legal failures.

use super::Violation;
use crate::CollectionError;
use bi_core::runtime::BiError;
use bi_core::runtime::testing::Setup;

/// Every load of an older incarnation of a reused block (counted by the emulator's
/// oracle) must have been rejected by a reader's generation check: the oracle's count may
/// not exceed the readers' rejected loads. With `no_prefetch` (the machine ran without
/// prefetch), the grace period alone keeps such lines out of every cache: the count must
/// be zero.
pub fn check_reuse_hazards(s: &Setup, no_prefetch: bool) -> Result<(), Violation> {
    let hazards = s.emu.total_stats().reuse_hazards;
    let rejected: u64 = s.nodes.iter().map(|n| n.mismatches()).sum();
    if hazards > rejected {
        return Err(Violation::new(format!(
            "{hazards} loads of reused blocks' old incarnations, only {rejected} rejected"
        )));
    }
    if no_prefetch && hazards > 0 {
        return Err(Violation::new(format!(
            "{hazards} loads of reused blocks' old incarnations without prefetch"
        )));
    }
    Ok(())
}

/// Whether `e` is a documented, legal failure of a write on a small machine: the heap is
/// exhausted or a log ring is full. The structure then stays as last published.
pub fn is_resource_exhaustion(e: &CollectionError) -> bool {
    matches!(
        e,
        CollectionError::Runtime(BiError::Heap(_) | BiError::LogFull { .. })
    )
}
