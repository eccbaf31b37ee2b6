//! Test support: a model checker for shared collections read between quiescence passes.
//!
//! Not part of the protocol. Model-based tests and fuzz targets of [`BiTree`] and
//! [`BiHashMap`] share it, so that both hold the structures to the same rules.
//!
//! # Why a history, not a model
//!
//! A reader on another node reads through a cache nobody invalidates for it on the read
//! path, so between two passes of its node it may see an older publication than the
//! writer's latest. Comparing its reads with the current contents of a `BTreeMap` would
//! reject correct behaviour; accepting anything would miss real bugs. The rule the
//! runtime promises is precise: a value a reader on node `n` returns was *current at some
//! instant since the start of `n`'s last pass*. [`History`] therefore keeps, for every
//! key, every value it held together with the publication from which it held, and
//! remembers which publication was the latest when each node's last pass started.
//!
//! On top of that rule the structures promise two more: *lazy invalidation* (a lookup
//! that misses re-reads from memory, so only a key absent now may be missed) and
//! *exactness after a pass on every node* (then the allowed window holds one value per
//! key, so the same checks become exact). And the memory protocol promises that no read
//! accepts the bytes of an older incarnation of a reused block: [`check_reuse_hazards`]
//! compares the emulator oracle's count of such loads with the loads the readers
//! rejected.
//!
//! # How
//!
//! ```
//! use bi_collections::testing::History;
//! use bi_collections::tree::BiTree;
//! use bi_core::runtime::testing::Setup;
//!
//! let s = Setup::new(2, 3);
//! let tree = BiTree::<u64, u64>::at(s.slot(0));
//! let mut w = tree.write_handle(s.writer(0)).unwrap();
//! let r = tree.read_handle(&s.nodes[1]).unwrap();
//! let mut h = History::<u64, u64>::new(2);
//!
//! w.insert(1, 10).unwrap();
//! h.publish([(1, Some(10))]);
//! h.check_get(1, &1, r.get(&1).unwrap()).unwrap();
//! // A value the key never had is a violation.
//! assert!(h.check_get(1, &1, Some(11)).is_err());
//!
//! h.pass_started(1);
//! s.nodes[1].quiesce().unwrap();
//! h.check_scan(1, &r.enter().iter().unwrap(), |_| true).unwrap();
//! bi_collections::testing::check_reuse_hazards(&s, false).unwrap();
//! ```
//!
//! [`BiTree`]: crate::tree::BiTree
//! [`BiHashMap`]: crate::map::BiHashMap

mod history;
mod machine;

pub use history::History;
#[cfg(test)]
pub(crate) use machine::refused_while_corrupt;
pub use machine::{
    Hardware, check_failed_write, check_reuse_hazards, is_resource_exhaustion, small_heap_writer,
};

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

/// Raises a stop flag when dropped. A test that runs a delegation server on a thread of
/// its own (`run_until(&stop)`) while it sends from another holds one, so that a failed
/// assertion or a client's error on the sending side stops the server: the test then
/// fails at once instead of waiting forever for the server thread to be joined.
///
/// ```
/// use bi_collections::testing::StopOnDrop;
/// use std::sync::atomic::{AtomicBool, Ordering};
///
/// let stop = AtomicBool::new(false);
/// let served = std::thread::scope(|t| {
///     let _stop = StopOnDrop(&stop);
///     let server = t.spawn(|| while !stop.load(Ordering::Acquire) {});
///     std::panic::catch_unwind(|| {
///         let _stop = StopOnDrop(&stop);
///         panic!("a failed assertion on the sending side");
///     })
///     .unwrap_err();
///     server.join()
/// });
/// assert!(served.is_ok());
/// ```
#[derive(Debug)]
pub struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// A broken rule: what was read, where, and what was allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    message: String,
}

impl Violation {
    /// A violation described by `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Violation {
            message: message.into(),
        }
    }

    /// The description.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Violation {}
