//! A stand-in structure for the delegation tests: a `BTreeMap` that logs every operation
//! it applies and the size of every batch, and can be told to fail part-way through one.

#![allow(dead_code)] // each test binary uses its own part

use bi_collections::delegate::DelegationServer;
use bi_collections::testing::StopOnDrop;
use bi_collections::{ApplyBatch, BatchReport, CollectionError, Op, Stored};
use bi_core::mem::EmulatedNode;
use bi_core::region::RegionConfig;
use bi_core::runtime::RuntimeConfig;
use bi_core::runtime::testing::Setup;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// An emulated machine of `nodes` nodes with the given eviction and prefetch rates.
pub fn machine(nodes: usize, seed: u64, rate: f64) -> Setup {
    Setup::with(
        RegionConfig::new(1 << 18).with_nodes(nodes as u32),
        |c| c.seed(seed).every_event(rate),
        RuntimeConfig::default(),
    )
}

/// The mock structure.
#[derive(Debug, Default)]
pub struct RecordingMap {
    /// The contents.
    pub map: BTreeMap<u64, u64>,
    /// Every operation applied, in order.
    pub log: Vec<Op<u64, u64>>,
    /// The size of every batch applied.
    pub batches: Vec<usize>,
    /// Fail the next batch after applying this many of its operations.
    pub fail_after: Option<usize>,
}

impl ApplyBatch<u64, u64> for RecordingMap {
    fn apply_batch(&mut self, ops: &[Op<u64, u64>]) -> Result<BatchReport, CollectionError> {
        let mut report = BatchReport::default();
        for (i, op) in ops.iter().enumerate() {
            if self.fail_after.is_some_and(|n| n == i) {
                self.fail_after = None;
                return Err(CollectionError::Corrupt {
                    reason: "injected failure",
                });
            }
            self.log.push(*op);
            match *op {
                Op::Insert(k, v) => match self.map.insert(k, v) {
                    Some(_) => report.replaced += 1,
                    None => report.inserted += 1,
                },
                Op::Remove(k) => report.removed += usize::from(self.map.remove(&k).is_some()),
            }
            report.applied += 1;
        }
        self.batches.push(ops.len());
        Ok(report)
    }
}

/// The `n`-th operation (from 1) of client `client`: mostly inserts over a few keys of
/// the client's own, every fifth a removal. Values carry `n`, so a replayed or
/// reordered insertion changes the log.
pub fn op_of(client: usize, n: u64) -> Op<u64, u64> {
    let key = ((client as u64) << 32) | (n % 7);
    if n.is_multiple_of(5) {
        Op::Remove(key)
    } else {
        Op::Insert(key, n)
    }
}

/// The client an operation of [`op_of`] came from.
pub fn client_of(op: &Op<u64, u64>) -> usize {
    let (Op::Insert(k, _) | Op::Remove(k)) = *op;
    (k >> 32) as usize
}

/// The operations of `client` in `log`, in order.
pub fn ops_of(log: &[Op<u64, u64>], client: usize) -> Vec<Op<u64, u64>> {
    log.iter()
        .copied()
        .filter(|op| client_of(op) == client)
        .collect()
}

/// What the map holds after clients `0..clients` each applied their first `sent[c]`
/// operations (clients touch disjoint keys, so interleaving does not matter).
pub fn model(sent: &[u64]) -> BTreeMap<u64, u64> {
    let mut map = BTreeMap::new();
    for (c, &n) in sent.iter().enumerate() {
        for i in 1..=n {
            match op_of(c, i) {
                Op::Insert(k, v) => {
                    map.insert(k, v);
                }
                Op::Remove(k) => {
                    map.remove(&k);
                }
            }
        }
    }
    map
}

/// Runs `work` on this thread while `server` serves on another (stopped also when
/// `work` panics, so that a failure ends the test instead of hanging it, and reported
/// with the server's own error if it had one).
pub fn with_server<K, V, S, R>(
    server: &mut DelegationServer<EmulatedNode, K, V, S>,
    work: impl FnOnce() -> R,
) -> R
where
    K: Stored + Send,
    V: Stored + Send,
    S: ApplyBatch<K, V> + Send,
{
    let stop = AtomicBool::new(false);
    let (r, served) = std::thread::scope(|scope| {
        let _stop = StopOnDrop(&stop);
        let serving = scope.spawn(|| server.run_until(&stop));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        stop.store(true, Ordering::Release);
        (r, serving.join().unwrap())
    });
    match r {
        Ok(r) => {
            served.unwrap();
            r
        }
        Err(panic) => {
            if let Err(e) = served {
                eprintln!("the server stopped with: {e}");
            }
            for (client, e) in server.broken_clients() {
                eprintln!("client {client} is broken: {e}");
            }
            std::panic::resume_unwind(panic)
        }
    }
}
