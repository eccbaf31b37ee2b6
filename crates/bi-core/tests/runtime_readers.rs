//! Reader records (`runtime::share`): each registered reader holds a record of its own,
//! gives it back when it leaves, and a record whose holder's process is gone is taken
//! over, while one a live process holds never is.

mod common;

use bi_core::runtime::BiError;
use bi_core::runtime::testing::Setup;
use common::a_gone_process;
use std::sync::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering};

fn per_node(s: &Setup) -> usize {
    s.region.layout().config().readers_per_node() as usize
}

#[test]
fn a_node_gives_its_reader_records_back_as_readers_leave() {
    let s = Setup::new(2, 1);
    let n = per_node(&s);
    // Many more readers come and go than the node has records.
    for _ in 0..3 * n {
        drop(s.nodes[1].reader().unwrap());
    }
    // All the records at once, each its own.
    let all: Vec<_> = (0..n).map(|_| s.nodes[1].reader().unwrap()).collect();
    let mut indices: Vec<usize> = all.iter().map(|r| r.index()).collect();
    indices.sort_unstable();
    indices.dedup();
    assert_eq!(indices.len(), n, "two readers share a record");
    assert!(matches!(
        s.nodes[1].reader(),
        Err(BiError::NoReaderSlot { node: 1 })
    ));
    drop(all);
    // Every record is given back: the node holds as many readers again.
    let again: Vec<_> = (0..n).map(|_| s.nodes[1].reader().unwrap()).collect();
    assert_eq!(again.len(), n);
}

#[test]
#[cfg_attr(miri, ignore = "spawns a process and asks the kernel about it")]
fn a_record_a_live_process_holds_is_never_taken_and_is_once_it_is_gone() {
    let s = Setup::new(2, 1);
    let n = per_node(&s);
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let held = s.hold_reader_record_in(1, 0, sleeper.id()).unwrap();
    let others: Vec<_> = (0..n - 1).map(|_| s.nodes[1].reader().unwrap()).collect();
    assert!(
        others.iter().all(|r| r.index() != held),
        "a live process's record taken"
    );
    assert!(matches!(
        s.nodes[1].reader(),
        Err(BiError::NoReaderSlot { node: 1 })
    ));
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert_eq!(s.nodes[1].reader().unwrap().index(), held);
}

#[test]
#[cfg_attr(miri, ignore = "spawns a process and asks the kernel about it")]
fn two_readers_racing_for_a_gone_process_s_record_do_not_both_get_it() {
    let s = Setup::new(2, 1);
    let gone = a_gone_process();
    let node = &s.nodes[1];
    for round in 0..2000 {
        let held = s.hold_reader_record_in(1, 0, gone).unwrap();
        // The two start together (spinning, not sleeping, so within a few cycles of
        // each other): both find the gone holder and both try to replace it.
        let arrived = AtomicUsize::new(0);
        let both = Barrier::new(2);
        let indices: Vec<usize> = std::thread::scope(|scope| {
            let racers: Vec<_> = (0..2)
                .map(|_| {
                    scope.spawn(|| {
                        arrived.fetch_add(1, Ordering::SeqCst);
                        while arrived.load(Ordering::SeqCst) < 2 {
                            std::hint::spin_loop();
                        }
                        let r = node.reader().unwrap();
                        // Both hold their records at once before either leaves.
                        both.wait();
                        r.index()
                    })
                })
                .collect();
            racers.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert_ne!(
            indices[0], indices[1],
            "round {round}: one record, two readers"
        );
        assert!(
            indices.contains(&held),
            "round {round}: the gone process's record not taken"
        );
    }
}
