//! Combining on a node under the non-coherence emulator: threads of one node share one
//! channel through a `NodeCombiner`; every operation is applied exactly once and in the
//! order its thread sent it, and a combiner that dies mid-batch leaves its waiters with a
//! typed error and nothing applied twice.

mod delegate_mock;

use bi_collections::delegate::{DelegationError, DelegationLayout, DelegationServer, NodeCombiner};
use bi_collections::testing::StopOnDrop;
use bi_collections::{CollectionError, Op};
use bi_core::mem::{Access, EmulatedNode, Observed};
use bi_core::runtime::testing::Setup;
use delegate_mock::{RecordingMap, machine, op_of, ops_of};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

fn area(s: &Setup, clients: usize) -> DelegationLayout<u64, u64> {
    DelegationLayout::new(s.arena(0), clients, 16, s.emu.line_size()).unwrap()
}

fn is_combiner_died(r: &Result<(), CollectionError>) -> bool {
    matches!(
        r,
        Err(CollectionError::Delegation(DelegationError::CombinerDied))
    )
}

#[test]
fn combined_operations_are_applied_once_in_each_threads_order() {
    const THREADS: usize = 3;
    const OPS: u64 = 40;
    for seed in bi_kit::seeds(4, 4) {
        let s = machine(3, seed, 0.2);
        let layout = area(&s, 2);
        let mut server =
            DelegationServer::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
        // Node 1's threads share client 0, node 2's share client 1.
        let combiners: Vec<_> = (0..2)
            .map(|i| NodeCombiner::new(s.emu.node(1 + i), layout, i).unwrap())
            .collect();
        let stop = AtomicBool::new(false);
        std::thread::scope(|sc| {
            let _stop = StopOnDrop(&stop);
            let serving = sc.spawn(|| server.run_until(&stop));
            let threads: Vec<_> = (0..2 * THREADS)
                .map(|t| {
                    let c = combiners[t / THREADS].clone();
                    sc.spawn(move || {
                        // Every third operation waits; the others are queued and waited
                        // for at the end, so batches mix threads and queued runs.
                        let mut pending = Vec::new();
                        for n in 1..=OPS {
                            if n % 3 == 0 {
                                c.send_sync(op_of(t, n)).unwrap();
                            } else {
                                pending.push(c.send(op_of(t, n)));
                            }
                        }
                        for p in pending {
                            p.wait().unwrap();
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            stop.store(true, Ordering::Release);
            serving.join().unwrap().unwrap();
        });
        let log = &server.structure().log;
        assert_eq!(log.len() as u64, 2 * THREADS as u64 * OPS, "seed {seed}");
        for t in 0..2 * THREADS {
            let want: Vec<Op<u64, u64>> = (1..=OPS).map(|n| op_of(t, n)).collect();
            assert_eq!(ops_of(log, t), want, "thread {t}, seed {seed}");
        }
    }
}

/// A node's view that panics at the `n`-th write-back or invalidation once `countdown`
/// is armed with `n`: the thread doing it dies in the middle of whatever it was doing.
fn dying(node: EmulatedNode, countdown: Arc<AtomicI64>) -> Observed<EmulatedNode> {
    Observed::new(node, move |access| {
        if matches!(access, Access::WriteBack(..) | Access::Invalidate(..))
            && countdown.fetch_sub(1, Ordering::SeqCst) == 1
        {
            panic!("the combining thread dies here");
        }
        Ok(())
    })
}

#[test]
fn a_combiner_that_dies_mid_batch_fails_its_waiters_and_applies_nothing_twice() {
    const OPS: u64 = 5;
    let mut died_before_sending = 0;
    let mut died_after_sending = 0;
    // Death at every cache operation of the batch in turn: while writing its records,
    // while publishing the tail, while waiting for the acknowledgement.
    for at in 1..=8 {
        let s = machine(2, at as u64, 0.0);
        let layout = area(&s, 1);
        let mut server =
            DelegationServer::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
        let countdown = Arc::new(AtomicI64::new(i64::MAX));
        let view = dying(s.emu.node(1), countdown.clone());
        let combiner = NodeCombiner::new(view, layout, 0).unwrap();
        let mut pending: Vec<_> = (1..=OPS).map(|n| combiner.send(op_of(0, n))).collect();
        countdown.store(at, Ordering::SeqCst);
        let stop = AtomicBool::new(false);
        let (carrier, others) = std::thread::scope(|sc| {
            let _stop = StopOnDrop(&stop);
            let serving = sc.spawn(|| server.run_until(&stop));
            let first = pending.remove(0);
            let carrier = sc.spawn(move || first.wait()).join();
            let others: Vec<_> = pending.into_iter().map(|p| p.wait()).collect();
            // Whatever reached the channel is applied, once.
            for _ in 0..1000 {
                std::thread::yield_now();
            }
            stop.store(true, Ordering::Release);
            serving.join().unwrap().unwrap();
            (carrier, others)
        });
        let applied = ops_of(&server.structure().log, 0);
        let prefix: Vec<_> = (1..=applied.len() as u64).map(|n| op_of(0, n)).collect();
        assert_eq!(
            applied, prefix,
            "death at {at}: applied in order, each once"
        );
        assert!(applied.len() as u64 <= OPS);
        match carrier {
            Err(_) => {
                // It died carrying the whole queue: every other waiter learns it, and
                // the node's channel is not used again.
                assert!(others.iter().all(is_combiner_died), "death at {at}");
                assert!(is_combiner_died(&combiner.insert_sync(99, 99)));
                if applied.is_empty() {
                    died_before_sending += 1;
                } else {
                    assert_eq!(applied.len() as u64, OPS, "a batch is published whole");
                    died_after_sending += 1;
                }
            }
            Ok(r) => {
                // The countdown ran past the batch: everything went through.
                r.unwrap();
                assert!(others.iter().all(Result::is_ok));
                assert_eq!(applied.len() as u64, OPS);
            }
        }
        assert_eq!(
            server.structure().log.len(),
            applied.len(),
            "nothing else applied"
        );
    }
    assert!(died_before_sending > 0, "some deaths came before the tail");
    assert!(died_after_sending > 0, "some deaths came after the tail");
}

#[test]
fn operations_queued_by_several_threads_cross_as_one_batch() {
    let s = machine(2, 0, 0.0);
    let layout = area(&s, 1);
    let mut server = DelegationServer::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
    let combiner = NodeCombiner::new(s.emu.node(1), layout, 0).unwrap();
    let (a, b) = (combiner.clone(), combiner.clone());
    let pending: Vec<_> = (1..=4)
        .flat_map(|n| [a.send(op_of(0, n)), b.send(op_of(1, n))])
        .collect();
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let _stop = StopOnDrop(&stop);
        let serving = sc.spawn(|| server.run_until(&stop));
        for p in pending {
            p.wait().unwrap();
        }
        stop.store(true, Ordering::Release);
        serving.join().unwrap().unwrap();
    });
    // One channel publication, one batch for the server, one acknowledgement.
    assert_eq!(server.structure().batches, vec![8]);
}
