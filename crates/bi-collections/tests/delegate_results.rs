//! Old values through delegation, and a writer that dies with operations in flight:
//! the real map and tree as the server's structure, clients on other nodes, adversarial
//! emulated caches.

mod delegate_mock;

use bi_collections::delegate::{
    ClientConfig, DelegationClient, DelegationError, DelegationLayout, DelegationServer, Outcome,
};
use bi_collections::map::BiHashMap;
use bi_collections::testing::StopOnDrop;
use bi_collections::tree::BiTree;
use bi_collections::{ApplyBatch, BatchReport, CollectionError, Condition, Op};
use bi_core::heap::HeapError;
use bi_core::mem::EmulatedNode;
use bi_core::runtime::BiError;
use bi_core::runtime::testing::Setup;
use delegate_mock::{machine, with_server};
use rand::Rng;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Client = DelegationClient<EmulatedNode, u64, u64>;

/// The delegation area: the last node's share of the heap (no writer runs there).
fn area(s: &Setup, clients: usize) -> DelegationLayout<u64, u64> {
    let last = s.emu.nodes() - 1;
    DelegationLayout::new(s.arena(last), clients, 8, s.emu.line_size()).unwrap()
}

fn client(s: &Setup, layout: DelegationLayout<u64, u64>, index: usize) -> Client {
    let config = ClientConfig::default().timeout(Duration::from_secs(10));
    DelegationClient::with_config(s.emu.node(1 + index), layout, index, config).unwrap()
}

/// Client `index` inserts and removes its own keys (`index * 1000 + 0..16`) at random,
/// synchronously, plain or conditional (insert-if-absent, replace-if-present,
/// compare-and-set and compare-and-remove, expecting the right value or a wrong one),
/// and checks every value found and every decision against its model of them.
fn play(client: &mut Client, seed: u64, steps: usize) -> BTreeMap<u64, u64> {
    let mut rng = bi_kit::rng(seed, &format!("client {}", client.index()));
    let mut model = BTreeMap::new();
    let base = client.index() as u64 * 1000;
    for step in 0..steps as u64 {
        let key = base + rng.random_range(0..16);
        let now = model.get(&key).copied();
        // A value the key holds half the time it holds one.
        let expected = match now {
            Some(v) if rng.random_bool(0.5) => v,
            _ => step + 1_000_000,
        };
        let condition = match rng.random_range(0..6) {
            0 => Condition::Absent,
            1 => Condition::Present,
            2 | 3 => Condition::Equals(expected),
            _ => Condition::Always,
        };
        let op = if rng.random_bool(0.7) {
            Op::Insert(key, step)
        } else {
            Op::Remove(key)
        };
        let admitted = condition.admits(now.as_ref(), |a, b| a == b);
        let found = client.request(op, condition).unwrap();
        let what = format!("{op:?} under {condition:?} at step {step}");
        assert_eq!(found, if admitted { Ok(now) } else { Err(now) }, "{what}");
        if admitted {
            match op {
                Op::Insert(k, v) => model.insert(k, v),
                Op::Remove(k) => model.remove(&k),
            };
        }
    }
    model
}

/// A server thread over `structure` and two client threads of `steps` operations each;
/// returns the structure.
fn serve_two_clients<S: ApplyBatch<u64, u64> + Send>(
    s: &Setup,
    seed: u64,
    structure: S,
    steps: usize,
) -> S {
    let layout = area(s, 2);
    let mut server = DelegationServer::new(s.emu.node(0), layout, structure).unwrap();
    let stop = AtomicBool::new(false);
    let steps = if cfg!(miri) { 8 } else { steps };
    std::thread::scope(|scope| {
        let _stop = StopOnDrop(&stop);
        let serving = scope.spawn(|| server.run_until(&stop));
        let players: Vec<_> = (0..2)
            .map(|i| {
                let mut c = client(s, layout, i);
                scope.spawn(move || play(&mut c, seed, steps))
            })
            .collect();
        // Every player joined before any failure is raised: the server must be stopped
        // for the scope to end.
        let played: Vec<_> = players.into_iter().map(|p| p.join()).collect();
        stop.store(true, Ordering::Release);
        serving.join().unwrap().unwrap();
        for p in played {
            p.unwrap();
        }
    });
    server.into_structure()
}

#[test]
fn remote_inserts_and_removals_return_the_old_value_of_the_map() {
    for seed in bi_kit::seeds(3, 1) {
        let s = machine(4, seed, 0.1);
        let map = BiHashMap::<u64, u64>::at(s.slot(0))
            .write_handle(s.writer(0))
            .unwrap();
        let map = serve_two_clients(&s, seed, map, 300);
        assert!(map.len() <= 32);
        let stats = s.emu.total_stats();
        assert_eq!(stats.reuse_hazards, 0, "seed {seed}: {stats:?}");
    }
}

#[test]
fn remote_inserts_and_removals_return_the_old_value_of_the_tree() {
    let s = machine(4, 5, 0.1);
    let tree = BiTree::<u64, u64>::at(s.slot(0))
        .write_handle(s.writer(0))
        .unwrap();
    // Path copying with a heap that never reuses (no pass runs): few enough operations
    // for node 0's share of the heap.
    let tree = serve_two_clients(&s, 5, tree, 40);
    tree.check_invariants().unwrap();
}

type Recording = DelegationServer<EmulatedNode, u64, u64, delegate_mock::RecordingMap>;

/// A server over the mock structure (which does not tell old values) and its one client.
fn recording_server(s: &Setup) -> (Recording, Client) {
    let layout = area(s, 1);
    let structure = delegate_mock::RecordingMap::default();
    let server = DelegationServer::new(s.emu.node(0), layout, structure).unwrap();
    (server, client(s, layout, 0))
}

#[test]
fn a_structure_that_does_not_report_old_values_says_so() {
    let s = machine(3, 1, 0.0);
    let (mut server, mut c) = recording_server(&s);
    c.insert(1, 1).unwrap();
    server.serve_once(8).unwrap();
    c.flush().unwrap();
    // The mock structure cannot tell old values: the outcome says applied, and the
    // papaya-style call refuses to guess.
    let seq = c.send(Op::Remove(1)).unwrap();
    server.serve_once(8).unwrap();
    c.wait_applied(seq).unwrap();
    let seq = c.sent() + 1;
    let err = with_server(&mut server, || c.insert_returning(2, 2)).unwrap_err();
    assert!(matches!(
        err,
        CollectionError::Delegation(DelegationError::NoOldValues { seq: s }) if s == seq
    ));
    assert_eq!(server.structure().map.get(&2), Some(&2));
}

/// Three clients add to one counter with compare-and-set retry loops while a fourth
/// inserts and removes other keys (so batches mix conditional and plain requests): no
/// increment is lost or applied twice.
#[test]
fn compare_and_set_from_several_clients_loses_no_increment() {
    let s = machine(6, 3, 0.1);
    let map = BiHashMap::<u64, u64>::at(s.slot(0))
        .write_handle(s.writer(0))
        .unwrap();
    let layout = area(&s, 4);
    let mut server = DelegationServer::new(s.emu.node(0), layout, map).unwrap();
    let per_client = if cfg!(miri) { 3 } else { 40 };
    let (adders, retries) = with_server(&mut server, || {
        let mut first = client(&s, layout, 0);
        assert_eq!(first.insert_if_absent(0, 0).unwrap(), None);
        assert_eq!(first.insert_if_absent(0, 9).unwrap(), Some(0));
        std::thread::scope(|scope| {
            let adders: Vec<_> = (1..4)
                .map(|i| {
                    let mut c = client(&s, layout, i);
                    scope.spawn(move || {
                        let (mut seen, mut retries) = (0, 0);
                        for _ in 0..per_client {
                            while let Err(now) = c.compare_and_set(0, seen, seen + 1).unwrap() {
                                seen = now.unwrap();
                                retries += 1;
                            }
                            seen += 1;
                        }
                        retries
                    })
                })
                .collect();
            for k in 1..=per_client as u64 * 3 {
                first.insert_returning(100 + k, k).unwrap();
                first.remove_returning(100 + k / 2).unwrap();
            }
            let retries: u64 = adders.into_iter().map(|a| a.join().unwrap()).sum();
            (3 * per_client as u64, retries)
        })
    });
    assert_eq!(server.structure().get(&0), Some(adders));
    // Each adder starts from 0 and learns the counter from its refusals: all but the
    // first to reach the writer are refused at least once.
    assert!(retries >= 2, "{retries} retries");
    let stats = s.emu.total_stats();
    assert_eq!(stats.reuse_hazards, 0, "{stats:?}");
}

#[test]
fn a_structure_that_cannot_tell_what_it_finds_refuses_conditional_requests() {
    let s = machine(3, 1, 0.0);
    let (mut server, mut c) = recording_server(&s);
    let outcomes = with_server(&mut server, || {
        [Condition::Absent, Condition::Always, Condition::Equals(1)].map(|condition| {
            c.send_conditional_returning(Op::Insert(1, 1), condition)
                .unwrap()
        })
    });
    assert_eq!(
        outcomes,
        [Outcome::Undecided, Outcome::Applied, Outcome::Undecided]
    );
    // Only the unconditional insert was applied.
    assert_eq!(server.structure().log, vec![Op::Insert(1, 1)]);
    let seq = c.sent() + 1;
    let err = with_server(&mut server, || c.insert_if_absent(2, 2)).unwrap_err();
    assert!(matches!(
        err,
        CollectionError::Delegation(DelegationError::NoOldValues { seq: s }) if s == seq
    ));
}

/// The writer dies with operations received and unacknowledged, at every point of a
/// script; its successor resumes the area. Every operation is acknowledged as applied
/// exactly when the structure holds its effect, or reported failed and never applied,
/// also when the wait that learned of the failure was for an earlier operation.
#[test]
fn a_writer_dying_with_operations_in_flight_never_has_them_applied_twice() {
    for pending in 0..=8u64 {
        let s = machine(3, pending, 0.2);
        let layout = area(&s, 1);
        let map = BiHashMap::<u64, u64>::at(s.slot(0))
            .write_handle(s.writer(0))
            .unwrap();
        let mut first = DelegationServer::new(s.emu.node(0), layout, map).unwrap();
        let mut c = client(&s, layout, 0);
        // Three operations applied and acknowledged.
        for k in 0..3 {
            c.insert(k, k).unwrap();
        }
        first.serve_once(8).unwrap();
        // `pending` more sent; the writer dies before serving them.
        for k in 0..pending {
            c.insert(100 + k, k).unwrap();
        }
        let map = first.into_structure();
        let mut second = DelegationServer::resume(s.emu.node(0), layout, map).unwrap();
        let sent = c.sent();
        // The third was applied before the failed range starts: its wait, the first
        // to learn of the death, reports nothing; the flush then reports the range.
        c.wait_applied(3).unwrap();
        assert_eq!(c.applied(), sent);
        match c.flush() {
            Ok(_) => assert_eq!(pending, 0),
            Err(CollectionError::Delegation(DelegationError::WriterDied { first, last })) => {
                assert_eq!((first, last), (4, sent), "pending {pending}");
            }
            Err(e) => panic!("pending {pending}: {e}"),
        }
        // Nothing of the failed operations was applied, and nothing is later.
        second.serve_once(8).unwrap();
        let map = second.structure();
        for k in 0..pending {
            assert_eq!(map.get(&(100 + k)), None, "pending {pending}");
        }
        // The client goes on with the new writer, old values as the map holds them.
        let outcome = with_server(&mut second, || c.send_returning(Op::Insert(1, 50)));
        assert_eq!(outcome.unwrap(), Outcome::Replaced(Some(1)));
        assert_eq!(second.structure().len(), 3);
    }
}

/// Values too large to sit beside the acknowledgement travel in the result slots.
#[test]
fn large_old_values_come_back_through_the_result_slots() {
    type Big = [u64; 5];
    let s = machine(3, 2, 0.2);
    let line = s.emu.line_size();
    let layout = DelegationLayout::<u64, Big>::new(s.arena(2), 1, 8, line).unwrap();
    let map = BiHashMap::<u64, Big>::at(s.slot(0))
        .write_handle(s.writer(0))
        .unwrap();
    let mut server = DelegationServer::new(s.emu.node(0), layout, map).unwrap();
    let config = ClientConfig::default().timeout(Duration::from_secs(10));
    let mut c = DelegationClient::with_config(s.emu.node(1), layout, 0, config).unwrap();
    let mut model = BTreeMap::new();
    with_server(&mut server, || {
        for i in 0..if cfg!(miri) { 4 } else { 200u64 } {
            let (key, value) = (i % 7, [i; 5]);
            assert_eq!(
                c.insert_returning(key, value).unwrap(),
                model.insert(key, value)
            );
        }
    });
}

/// What a client is told was applied was applied: a server that takes a few records per
/// batch acknowledges those and no more, however many others already wait in the
/// channel, and the client's view of what is done never runs ahead of the structure.
#[test]
fn an_acknowledgement_covers_only_what_the_server_applied() {
    use bi_collections::EpochBonsai;
    use bi_core::mem::{Emulator, EmulatorConfig};

    let emu = Emulator::new(EmulatorConfig::new(1 << 14, 2).seed(3));
    let layout = DelegationLayout::<u64, u64>::new(0..1 << 14, 1, 16, emu.line_size()).unwrap();
    let mut server = DelegationServer::new(emu.node(0), layout, EpochBonsai::new()).unwrap();
    let mut client = DelegationClient::new(emu.node(1), layout, 0).unwrap();
    let mut sent = 0;
    for _ in 0..10 {
        for _ in 0..5 {
            client.insert(sent, sent).unwrap();
            sent += 1;
        }
        for batch in [1, 3] {
            server.serve_once(batch).unwrap();
            let acknowledged = client.poll_applied().unwrap();
            let applied = server.structure().iter().len() as u64;
            assert_eq!(
                acknowledged, applied,
                "acknowledged beyond what was applied"
            );
        }
    }
    while server.serve_once(16).unwrap().ops > 0 {}
    assert_eq!(client.flush().unwrap(), sent);
    assert_eq!(server.structure().iter().len() as u64, sent);
}

type SmallTree = bi_collections::tree::TreeWriteHandle<u64, u64, EmulatedNode, bi_alloc::NodeHeap>;

/// A tree whose writer, on node 0, has a heap of 16 KiB.
fn tree_on_a_small_heap(s: &Setup) -> SmallTree {
    let writer = bi_collections::testing::small_heap_writer(s, 16 * 1024);
    BiTree::<u64, u64>::at(s.slot(0))
        .write_handle(writer)
        .unwrap()
}

/// Whether `r` is the report of a refusal for lack of room, for a wait up to `seq`.
fn is_no_room(r: Result<(), CollectionError>, seq: u64) -> bool {
    match r {
        Err(CollectionError::Delegation(DelegationError::NoRoom { upto })) => upto == seq,
        _ => false,
    }
}

/// Inserts keys 0, 1, ... one at a time until the writer's heap refuses one, which is
/// reported once; returns that key (the number of keys in the structure). `probe` tells
/// the structure's length and what it holds at a key.
fn fill<S: ApplyBatch<u64, u64>>(
    c: &mut Client,
    server: &mut DelegationServer<EmulatedNode, u64, u64, S>,
    probe: impl Fn(&S, u64) -> (usize, Option<u64>),
) -> u64 {
    for k in 0..10_000u64 {
        let seq = c.insert(k, k).unwrap();
        server.serve_once(8).unwrap();
        match c.wait_applied(seq) {
            Ok(()) => {}
            r => {
                assert!(is_no_room(r, seq), "write {seq}");
                c.wait_applied(seq).unwrap(); // reported once
                assert_eq!(probe(server.structure(), k), (k as usize, None));
                return k;
            }
        }
    }
    panic!("a 16 KiB heap fills up")
}

/// [`fill`]'s probe of a tree.
fn in_tree(t: &SmallTree, k: u64) -> (usize, Option<u64>) {
    (t.len(), t.try_get(&k).unwrap())
}

/// A remote write the writer's heap has no room for is refused: it writes nothing, its
/// client is told (`NoRoom`, once), and the operations sent after it stay in the channel
/// until room comes back, then are applied in order, once each.
#[test]
fn a_write_the_heap_has_no_room_for_is_reported_and_the_rest_wait_for_room() {
    let s = machine(3, 4, 0.2);
    let layout = area(&s, 1);
    let mut server =
        DelegationServer::new(s.emu.node(0), layout, tree_on_a_small_heap(&s)).unwrap();
    let mut c = client(&s, layout, 0);
    let full = fill(&mut c, &mut server, in_tree);
    // Three more: the first is refused, the two after it wait in the channel.
    let ops: Vec<_> = (1..=3).map(|i| Op::Insert(full + i, i)).collect();
    let last = c.send_batch(&ops).unwrap();
    assert_eq!(server.serve_once(8).unwrap().ops, 1);
    assert_eq!(c.poll_applied().unwrap(), last - 2);
    assert!(is_no_room(c.wait_applied(last - 2), last - 2));
    // Room comes back once the replaced nodes' grace period is over.
    let w = server.structure_mut();
    w.writer().flush_deferred().unwrap();
    for _ in 0..3 {
        s.quiesce_all().unwrap();
    }
    w.reclaim().unwrap();
    assert_eq!(server.serve_once(8).unwrap().ops, 2);
    c.flush().unwrap();
    let tree = server.structure();
    assert_eq!(tree.try_get(&(full + 1)).unwrap(), None);
    assert_eq!(tree.try_get(&(full + 2)).unwrap(), Some(2));
    assert_eq!(tree.try_get(&(full + 3)).unwrap(), Some(3));
    assert_eq!(tree.len(), full as usize + 2);
}

/// The same with a map behind the server: a map's batch that runs out of heap has
/// applied the operations before the failing one, and the server reports the refusal
/// and keeps the rest waiting instead of taking the whole batch for failed.
#[test]
fn a_map_write_the_heap_has_no_room_for_is_reported_and_the_rest_wait() {
    let s = machine(3, 6, 0.2);
    let layout = area(&s, 1);
    let writer = bi_collections::testing::small_heap_writer(&s, 6 * 1024);
    let map = BiHashMap::<u64, u64>::at(s.slot(0))
        .write_handle(writer)
        .unwrap();
    let mut server = DelegationServer::new(s.emu.node(0), layout, map).unwrap();
    let mut c = client(&s, layout, 0);
    let full = fill(&mut c, &mut server, |m, k| (m.len(), m.get(&k)));
    assert!(full > 20, "{full} keys");
    let ops: Vec<_> = (1..=3).map(|i| Op::Insert(full + i, i)).collect();
    let last = c.send_batch(&ops).unwrap();
    server.serve_once(8).unwrap();
    assert!(is_no_room(c.wait_applied(last - 2), last - 2));
    assert_eq!(server.structure().len(), full as usize);
}

/// A server that takes over counts refusals on from the count in memory, not from a copy
/// its node's cache holds (here prefetched when the count was 1): otherwise its next
/// refusal would write a count the client has already seen, and go unreported.
#[test]
fn a_resumed_server_counts_refusals_on_from_memory() {
    let s = machine(3, 5, 0.0);
    let layout = area(&s, 1);
    let mut first = DelegationServer::new(s.emu.node(0), layout, tree_on_a_small_heap(&s)).unwrap();
    let config = ClientConfig::default().timeout(Duration::from_secs(10));
    let mut c = DelegationClient::with_config(s.emu.node(2), layout, 0, config).unwrap();
    let full = fill(&mut c, &mut first, in_tree);
    s.emu
        .node(1)
        .prefetch(layout.ack_offset(0).unwrap())
        .unwrap();
    let seq = c.insert(full, 1).unwrap();
    first.serve_once(8).unwrap();
    assert!(is_no_room(c.wait_applied(seq), seq));
    // The writer's process ends; its successor starts on node 1.
    let tree = first.into_structure();
    let mut second = DelegationServer::resume(s.emu.node(1), layout, tree).unwrap();
    let seq = c.insert(full, 2).unwrap();
    second.serve_once(8).unwrap();
    assert!(is_no_room(c.wait_applied(seq), seq));
}

/// A map with room for `room` more inserts: the next fails for lack of heap, after the
/// operations before it in its batch were applied (their old values reported). With
/// `broken`, a batch fails for another reason.
struct Cramped {
    map: BTreeMap<u64, u64>,
    room: usize,
    broken: bool,
}

impl ApplyBatch<u64, u64> for Cramped {
    fn apply_batch(&mut self, ops: &[Op<u64, u64>]) -> Result<BatchReport, CollectionError> {
        self.apply_reporting(ops, &mut Vec::new())
    }

    fn old_values(
        &self,
        ops: &[Op<u64, u64>],
        olds: &mut Vec<Option<u64>>,
    ) -> Result<bool, CollectionError> {
        olds.clear();
        olds.extend(
            ops.iter()
                .map(|(Op::Insert(k, _) | Op::Remove(k))| self.map.get(k).copied()),
        );
        Ok(true)
    }

    fn reports_applied_prefix(&self) -> bool {
        true
    }

    fn apply_reporting(
        &mut self,
        ops: &[Op<u64, u64>],
        olds: &mut Vec<Option<u64>>,
    ) -> Result<BatchReport, CollectionError> {
        olds.clear();
        if self.broken {
            let reason = "a structure that fails";
            return Err(CollectionError::Corrupt { reason });
        }
        let mut report = BatchReport::default();
        for op in ops {
            match *op {
                Op::Insert(k, v) => {
                    if self.room == 0 {
                        let full = HeapError::OutOfMemory {
                            requested: 64,
                            free: 0,
                        };
                        return Err(CollectionError::Runtime(BiError::Heap(full)));
                    }
                    self.room -= 1;
                    olds.push(self.map.insert(k, v));
                }
                Op::Remove(k) => olds.push(self.map.remove(&k)),
            }
            report.applied += 1;
        }
        Ok(report)
    }
}

/// In a batch whose second operation finds no room, the first is applied and the
/// second refused and reported; the operations after it, of this client and of another,
/// are neither applied nor acknowledged, and are applied once room comes back.
#[test]
fn only_what_was_applied_is_acknowledged_when_room_runs_out() {
    let s = machine(3, 8, 0.0);
    let layout = area(&s, 2);
    let cramped = Cramped {
        map: BTreeMap::new(),
        room: 1,
        broken: false,
    };
    let mut server = DelegationServer::new(s.emu.node(0), layout, cramped).unwrap();
    let (mut c0, mut c1) = (client(&s, layout, 0), client(&s, layout, 1));
    for k in 0..3 {
        c0.insert(k, k).unwrap();
        c1.insert(10 + k, k).unwrap();
    }
    assert_eq!(server.serve_once(16).unwrap().ops, 2);
    assert!(is_no_room(c0.wait_applied(2), 2));
    assert_eq!((c0.applied(), c1.poll_applied().unwrap()), (2, 0));
    assert_eq!(server.structure().map, BTreeMap::from([(0, 0)]));
    server.structure_mut().room = 10;
    assert_eq!(server.serve_once(16).unwrap().ops, 4);
    assert_eq!((c0.flush().unwrap(), c1.flush().unwrap()), (3, 3));
    let expected = [(0, 0), (2, 2), (10, 0), (11, 1), (12, 2)];
    assert_eq!(server.structure().map, BTreeMap::from(expected));
    // Any other failure stops the server, and nothing is acknowledged.
    server.structure_mut().broken = true;
    c0.insert(20, 20).unwrap();
    assert!(matches!(
        server.serve_once(16),
        Err(CollectionError::Corrupt { .. })
    ));
    assert_eq!(c0.poll_applied().unwrap(), 3);
}

/// Outcomes too large for the acknowledgement's line go to result slots, written back as
/// one or two ranges (two where the slots wrap): the last outcome of batches of five,
/// starting at every position in a ring of eight slots, reads right on a machine whose
/// caches never write back a line unasked.
#[test]
fn the_last_outcome_of_a_batch_comes_back_at_every_slot_position() {
    type Big = [u64; 5];
    let s = machine(2, 9, 0.0);
    let line = s.emu.line_size();
    let layout = DelegationLayout::<u64, Big>::new(s.arena(1), 1, 8, line).unwrap();
    let map = BiHashMap::<u64, Big>::at(s.slot(0))
        .write_handle(s.writer(0))
        .unwrap();
    let server = DelegationServer::new(s.emu.node(0), layout, map).unwrap();
    let server = Arc::new(Mutex::new(server));
    let config = ClientConfig::default().timeout(Duration::from_secs(2));
    let mut c = DelegationClient::with_config(s.emu.node(1), layout, 0, config).unwrap();
    // Served when asked: what the client sent before it waits is one batch.
    c.watch_server(move || {
        server.lock().unwrap().serve_once(16).unwrap();
        false
    });
    let mut model = BTreeMap::new();
    for i in 0..16u64 {
        for k in (0..4).map(|d| (i + d) % 7) {
            c.send(Op::Insert(k, [i; 5])).unwrap();
            model.insert(k, [i; 5]);
        }
        let (key, value) = ((i + 4) % 7, [100 + i; 5]);
        assert_eq!(
            c.insert_returning(key, value).unwrap(),
            model.insert(key, value),
            "batch {i}"
        );
    }
}

/// Two writers die in a row before the client looks: the first successor's report of the
/// operations it failed survives the second takeover, which has nothing to report.
#[test]
fn a_failure_report_survives_a_second_takeover() {
    let s = machine(3, 10, 0.0);
    let layout = area(&s, 1);
    let map = BiHashMap::<u64, u64>::at(s.slot(0))
        .write_handle(s.writer(0))
        .unwrap();
    let first = DelegationServer::new(s.emu.node(0), layout, map).unwrap();
    let mut c = client(&s, layout, 0);
    for k in 0..3 {
        c.insert(k, k).unwrap();
    }
    let second = DelegationServer::resume(s.emu.node(0), layout, first.into_structure()).unwrap();
    let map = second.into_structure();
    let mut third = DelegationServer::resume(s.emu.node(0), layout, map).unwrap();
    assert!(matches!(
        c.flush(),
        Err(CollectionError::Delegation(DelegationError::WriterDied {
            first: 1,
            last: 3
        }))
    ));
    c.insert(9, 9).unwrap();
    third.serve_once(8).unwrap();
    assert_eq!(c.flush().unwrap(), 4);
    assert_eq!(third.structure().len(), 1);
}
