//! Delegation under the non-coherence emulator: clients on other nodes than the server,
//! random evictions and prefetches, deterministic schedules from a seed.

mod delegate_mock;

use bi_collections::delegate::{
    ClientConfig, DelegationClient, DelegationError, DelegationLayout, DelegationServer, WaitingFor,
};
use bi_collections::testing::StopOnDrop;
use bi_collections::{CollectionError, Op};
use bi_core::channel::ChannelError;
use bi_core::line::LineSize;
use bi_core::mem::{EmulatedNode, MemView};
use bi_core::runtime::testing::Setup;
use delegate_mock::{RecordingMap, machine, model, op_of, ops_of};
use rand::Rng;
use std::time::Duration;

type Client = DelegationClient<EmulatedNode, u64, u64>;
type Server = DelegationServer<EmulatedNode, u64, u64, RecordingMap>;

/// A delegation area for `clients` clients in node 0's arena.
fn area(s: &Setup, clients: usize, capacity: usize) -> DelegationLayout<u64, u64> {
    DelegationLayout::new(s.arena(0), clients, capacity, s.emu.line_size()).unwrap()
}

/// Clients `0..n`, client `i` on node `1 + i % (nodes - 1)`, with a short timeout.
fn clients(s: &Setup, layout: DelegationLayout<u64, u64>, n: usize) -> Vec<Client> {
    let others = s.emu.nodes() - 1;
    let cfg = ClientConfig::default().timeout(Duration::from_millis(20));
    (0..n)
        .map(|i| DelegationClient::with_config(s.emu.node(1 + i % others), layout, i, cfg).unwrap())
        .collect()
}

fn send_next(client: &mut Client) -> u64 {
    let n = client.sent() + 1;
    let seq = client.send(op_of(client.index(), n)).unwrap();
    assert_eq!(seq, n);
    seq
}

#[test]
fn every_op_is_applied_once_in_client_order_under_adversarial_caches() {
    let steps = bi_kit::under_miri(3000, 60);
    for seed in bi_kit::seeds(8, 1) {
        let s = machine(4, seed, 0.2);
        let capacity = 4;
        let layout = area(&s, 5, capacity);
        let mut server = Server::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
        let mut clients = clients(&s, layout, 5);
        let mut rng = bi_kit::rng(seed, "schedule");
        for _ in 0..steps {
            let pick = rng.random_range(0..clients.len() + 2);
            if pick < clients.len() {
                let c = &mut clients[pick];
                // Send only what fits: a full channel would wait for this very thread.
                let free = capacity as u64 - (c.sent() - server.acknowledged(pick).unwrap());
                if free > 1 && rng.random_bool(0.3) {
                    let first = c.sent() + 1;
                    let last = first + rng.random_range(0..free);
                    let ops: Vec<_> = (first..=last).map(|k| op_of(pick, k)).collect();
                    assert_eq!(c.send_batch(&ops).unwrap(), last);
                } else if free > 0 {
                    send_next(c);
                } else {
                    let before = c.applied();
                    let ack = c.poll_applied().unwrap();
                    assert!(before <= ack && ack <= c.sent());
                }
            } else {
                server.serve_once(rng.random_range(1..=8)).unwrap();
            }
        }
        while server.serve_once(8).unwrap().ops > 0 {}
        let sent: Vec<u64> = clients.iter().map(|c| c.sent()).collect();
        for c in &mut clients {
            assert_eq!(c.flush().unwrap(), c.sent());
            assert_eq!(c.applied(), c.sent());
        }
        let map = server.into_structure();
        for (i, &n) in sent.iter().enumerate() {
            let expected: Vec<_> = (1..=n).map(|k| op_of(i, k)).collect();
            assert_eq!(ops_of(&map.log, i), expected, "seed {seed} client {i}");
        }
        assert_eq!(map.log.len() as u64, sent.iter().sum::<u64>());
        assert_eq!(map.map, model(&sent));
        assert!(map.batches.iter().all(|&b| (1..=8).contains(&b)));
        let stats = s.emu.total_stats();
        // One thread, so nothing moves between an invalidation and the load after it:
        // no read is stale, and no line has two writers.
        assert_eq!(stats.stale_reads, 0, "seed {seed}: {stats:?}");
        assert_eq!(stats.lost_writes, 0, "seed {seed}: {stats:?}");
        assert!(
            stats.evictions > 0 && stats.prefetches > 0,
            "the caches did interfere"
        );
    }
}

#[test]
fn ops_of_several_clients_coalesce_into_one_batch_acknowledged_under_one_fence() {
    let s = machine(3, 7, 0.0);
    let layout = area(&s, 4, 16);
    let mut server = Server::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
    let mut clients = clients(&s, layout, 4);
    for (i, c) in clients.iter_mut().enumerate() {
        for _ in 0..=i {
            send_next(c);
        }
    }
    s.emu.reset_stats();
    let report = server.serve_once(64).unwrap();
    assert_eq!((report.ops, report.clients), (10, 4));
    assert_eq!(report.batch.applied, 10);
    let stats = s.emu.stats(0);
    // Tails, records, then heads and acknowledgements: three fences for ten operations
    // of four clients (the mock structure fences nothing).
    assert_eq!(stats.fences, 3, "{stats:?}");
    // One head line and one acknowledgement line per client (which also holds the
    // client's latest outcome: a 24-byte result fits beside the acknowledgement).
    assert_eq!(stats.lines_written_back, 8, "{stats:?}");
    assert_eq!(server.structure().batches, [10]);
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(c.poll_applied().unwrap(), i as u64 + 1);
    }
    // An idle poll reads the tails only.
    s.emu.reset_stats();
    assert_eq!(server.serve_once(64).unwrap().ops, 0);
    assert_eq!(s.emu.stats(0).fences, 1);
    assert_eq!(s.emu.stats(0).lines_written_back, 0);
}

#[test]
fn a_short_max_batch_splits_the_work_and_rotates_among_clients() {
    let s = machine(3, 3, 0.1);
    let layout = area(&s, 3, 8);
    let mut server = Server::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
    let mut clients = clients(&s, layout, 3);
    for c in &mut clients {
        for _ in 0..4 {
            send_next(c);
        }
    }
    let mut firsts = Vec::new();
    loop {
        let before = server.structure().log.len();
        let report = server.serve_once(2).unwrap();
        if report.ops == 0 {
            break;
        }
        assert!(report.ops <= 2);
        firsts.push(delegate_mock::client_of(&server.structure().log[before]));
    }
    assert_eq!(server.structure().batches, [2; 6]);
    // The first batches start with different clients: none waits behind the others.
    firsts.truncate(3);
    firsts.sort_unstable();
    assert_eq!(firsts, [0, 1, 2]);
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(c.flush().unwrap(), 4);
        let expected: Vec<_> = (1..=4).map(|k| op_of(i, k)).collect();
        assert_eq!(ops_of(&server.structure().log, i), expected);
    }
}

#[test]
fn a_full_channel_pushes_back_without_losing_anything() {
    let s = machine(2, 11, 0.2);
    let layout = area(&s, 1, 4);
    let mut server = Server::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
    let mut client = clients(&s, layout, 1).pop().unwrap();
    for _ in 0..4 {
        send_next(&mut client);
    }
    let err = client.send(op_of(0, 5)).unwrap_err();
    assert!(matches!(
        err,
        CollectionError::Delegation(DelegationError::Timeout {
            waiting_for: WaitingFor::ChannelSpace,
            seq: 5,
            applied: 0
        })
    ));
    // The refused operation took no sequence number.
    assert_eq!(client.sent(), 4);
    assert_eq!(server.serve_once(64).unwrap().ops, 4);
    assert_eq!(send_next(&mut client), 5);
    assert_eq!(server.serve_once(64).unwrap().ops, 1);
    assert_eq!(client.flush().unwrap(), 5);
    // A run longer than the channel: the part that fits is sent, the error says where
    // the rest starts.
    let run: Vec<_> = (6..=11).map(|k| op_of(0, k)).collect();
    assert!(matches!(
        client.send_batch(&run),
        Err(CollectionError::Delegation(DelegationError::Timeout {
            waiting_for: WaitingFor::ChannelSpace,
            seq: 10,
            applied: 5
        }))
    ));
    assert_eq!(client.sent(), 9);
    assert_eq!(server.serve_once(64).unwrap().ops, 4);
    assert_eq!(client.send_batch(&run[4..]).unwrap(), 11);
    assert_eq!(server.serve_once(64).unwrap().ops, 2);
    assert_eq!(client.flush().unwrap(), 11);
    let expected: Vec<_> = (1..=11).map(|k| op_of(0, k)).collect();
    assert_eq!(server.structure().log, expected);
}

#[test]
fn a_client_whose_server_is_gone_times_out() {
    let s = machine(2, 5, 0.0);
    let layout = area(&s, 1, 2);
    let server = Server::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
    let mut client = clients(&s, layout, 1).pop().unwrap();
    drop(server.into_structure());
    let seq = client.insert(1, 1).unwrap();
    assert!(matches!(
        client.wait_applied(seq + 1),
        Err(CollectionError::Delegation(DelegationError::NotSent {
            seq: 2,
            sent: 1
        }))
    ));
    let err = client.wait_applied(seq).unwrap_err();
    assert!(matches!(
        err,
        CollectionError::Delegation(DelegationError::Timeout {
            waiting_for: WaitingFor::Acknowledgement,
            seq: 1,
            applied: 0
        })
    ));
    assert!(
        err.to_string()
            .contains("timed out waiting for the acknowledgement")
    );
    assert!(matches!(
        client.remove_sync(1),
        Err(CollectionError::Delegation(DelegationError::Timeout {
            waiting_for: WaitingFor::Acknowledgement,
            seq: 2,
            ..
        }))
    ));
    // The channel is now full: sending times out too.
    assert!(matches!(
        client.insert_sync(2, 2),
        Err(CollectionError::Delegation(DelegationError::Timeout {
            waiting_for: WaitingFor::ChannelSpace,
            seq: 3,
            ..
        }))
    ));
}

/// A client whose watch finds its server gone stops waiting then, for an acknowledgement
/// and for channel space alike, with the sequence numbers it was waiting on; while the
/// watch finds the server alive, the client waits until the timeout as before, asking
/// the watch now and then (it may be a system call). The timeout here is a minute: a
/// watch that is not asked ends in `Timeout`.
#[test]
fn a_client_stops_waiting_once_its_watch_finds_the_server_gone() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let s = machine(2, 6, 0.0);
    let layout = area(&s, 1, 2);
    drop(Server::new(s.emu.node(0), layout, RecordingMap::default()).unwrap());
    let attach = |timeout| {
        let cfg = ClientConfig::default().timeout(timeout);
        Client::with_config(s.emu.node(1), layout, 0, cfg).unwrap()
    };
    // Alive: waited for until the timeout, the watch asked meanwhile.
    let asked = Arc::new(AtomicUsize::new(0));
    let mut client = attach(Duration::from_millis(50));
    let count = asked.clone();
    client.watch_server(move || {
        count.fetch_add(1, Ordering::Relaxed);
        false
    });
    let seq = client.insert(1, 1).unwrap();
    let started = std::time::Instant::now();
    assert!(matches!(
        client.wait_applied(seq),
        Err(CollectionError::Delegation(DelegationError::Timeout {
            seq: 1,
            ..
        }))
    ));
    // Asked, and not at every step of the wait: at most once in 5 ms.
    let asks = asked.load(Ordering::Relaxed);
    let most = started.elapsed().as_millis() / 5 + 1;
    assert!(
        asks > 0 && asks as u128 <= most,
        "{asks} asks, {most} at most"
    );
    // Gone from its third look on: the waits end there, well before a minute.
    let mut client = attach(Duration::from_secs(60));
    let looks = Arc::new(AtomicUsize::new(0));
    let l = looks.clone();
    client.watch_server(move || l.fetch_add(1, Ordering::Relaxed) + 1 >= 3);
    let err = client.remove_sync(2).unwrap_err();
    assert!(
        matches!(
            err,
            CollectionError::Delegation(DelegationError::ServerGone {
                waiting_for: WaitingFor::Acknowledgement,
                seq: 2,
                applied: 0
            })
        ),
        "{err:?}"
    );
    assert_eq!(looks.load(Ordering::Relaxed), 3);
    assert!(
        err.to_string()
            .contains("no live process serves the writes")
    );
    // The channel holds two records and is full: sending stops too.
    assert!(matches!(
        client.insert_sync(3, 3),
        Err(CollectionError::Delegation(DelegationError::ServerGone {
            waiting_for: WaitingFor::ChannelSpace,
            seq: 3,
            ..
        }))
    ));
}

/// A server that applies and acknowledges a write and then leaves, between the client's
/// look at its acknowledgement and the watch's look at the server: the write is done,
/// and the client reports it done, not the server gone. The watch here does both (it
/// serves the channel, then says the server is gone), a schedule no timing decides.
#[test]
fn a_write_acknowledged_just_before_its_server_left_is_reported_done() {
    use std::sync::{Arc, Mutex};
    let s = machine(2, 6, 0.0);
    let layout = area(&s, 1, 2);
    let server = Server::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
    let server = Arc::new(Mutex::new(server));
    let cfg = ClientConfig::default().timeout(Duration::from_secs(60));
    let mut client = Client::with_config(s.emu.node(1), layout, 0, cfg).unwrap();
    let leaving = server.clone();
    client.watch_server(move || {
        leaving.lock().unwrap().serve_once(16).unwrap();
        true
    });
    client.insert_sync(7, 70).unwrap();
    assert_eq!(client.applied(), 1);
    assert_eq!(
        server.lock().unwrap().structure().log,
        vec![Op::Insert(7, 70)]
    );
}

#[test]
fn bad_layouts_and_ranges_are_typed_errors() {
    let s = machine(2, 1, 0.0);
    let line = s.emu.line_size();
    let arena = s.arena(0);
    let need = DelegationLayout::<u64, u64>::required_bytes(2, 4, line).unwrap();
    let layout = |range, clients, capacity, line| {
        DelegationLayout::<u64, u64>::new(range, clients, capacity, line).map(|_| ())
    };
    assert!(matches!(
        layout(arena.start + 8..arena.end, 2, 4, line),
        Err(CollectionError::Delegation(
            DelegationError::Misaligned { .. }
        ))
    ));
    assert!(matches!(
        layout(arena.start..arena.start + need - 1, 2, 4, line),
        Err(CollectionError::Delegation(DelegationError::RangeTooSmall { required, .. })) if required == need
    ));
    assert!(layout(arena.start..arena.start + need, 2, 4, line).is_ok());
    assert!(matches!(
        layout(arena.clone(), 0, 4, line),
        Err(CollectionError::Delegation(DelegationError::NoClients))
    ));
    assert!(matches!(
        layout(arena.clone(), 2, 6, line),
        Err(CollectionError::Channel(ChannelError::BadCapacity {
            capacity: 6
        }))
    ));
    // A layout past the end of memory, or for smaller lines than the view's.
    let size = s.emu.size();
    let beyond = DelegationLayout::<u64, u64>::new(size - 64..size + 4096, 1, 4, line).unwrap();
    assert!(Server::new(s.emu.node(0), beyond, RecordingMap::default()).is_err());
    let narrow =
        DelegationLayout::<u64, u64>::new(arena.clone(), 1, 4, LineSize::new(32).unwrap()).unwrap();
    assert!(matches!(
        Server::new(s.emu.node(0), narrow, RecordingMap::default()),
        Err(CollectionError::Channel(ChannelError::LineSize {
            layout: 32,
            view: 64
        }))
    ));

    // Clients: before the server initialised the area, with another layout, or with an
    // index the layout does not have.
    let good = area(&s, 2, 4);
    assert!(matches!(
        Client::new(s.emu.node(1), good, 0),
        Err(CollectionError::Delegation(
            DelegationError::HeaderMismatch { field: "magic", .. }
        ))
    ));
    let _server = Server::new(s.emu.node(0), good, RecordingMap::default()).unwrap();
    let other = area(&s, 3, 4);
    assert!(matches!(
        Client::new(s.emu.node(1), other, 0),
        Err(CollectionError::Delegation(
            DelegationError::HeaderMismatch {
                field: "clients",
                expected: 3,
                found: 2
            }
        ))
    ));
    let other_type = DelegationLayout::<u64, u32>::new(s.arena(0), 2, 4, line).unwrap();
    assert!(matches!(
        DelegationClient::<_, u64, u32>::new(s.emu.node(1), other_type, 0),
        Err(CollectionError::Delegation(
            DelegationError::HeaderMismatch {
                field: "record_size",
                ..
            }
        ))
    ));
    assert!(matches!(
        Client::new(s.emu.node(1), good, 2),
        Err(CollectionError::Delegation(DelegationError::NoSuchClient {
            index: 2,
            clients: 2
        }))
    ));
    assert!(Client::new(s.emu.node(1), good, 1).is_ok());
}

/// Writes a raw record of `kind` and `seq` into slot 0 of client 0's channel and
/// publishes a tail of 1, as a broken client would. A record is a tag word (kind and
/// condition in the top byte, the sequence number below), key, value, expected value.
fn forge_record(view: &EmulatedNode, layout: DelegationLayout<u64, u64>, kind: u64, seq: u64) {
    let channel = layout.channel(0).unwrap();
    let at = channel.slot_offset(0);
    view.store(at, &[kind << 56 | seq, 1, 1, 0]).unwrap();
    view.writeback(at, 32).unwrap();
    view.fence();
    view.store(channel.tail_offset(), &1u64).unwrap();
    view.writeback(channel.tail_offset(), 8).unwrap();
    view.fence();
}

#[test]
fn corrupt_records_are_refused_and_not_acknowledged() {
    let s = machine(3, 9, 0.0);
    let layout = area(&s, 2, 4);
    let mut server = Server::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
    let mut good = Client::new(s.emu.node(2), layout, 1).unwrap();
    let broken = |server: &Server| -> Vec<String> {
        let found = server.broken_clients().iter();
        found.map(|(i, e)| format!("{i}: {e:?}")).collect()
    };
    forge_record(&s.emu.node(1), layout, 1, 7);
    good.insert(10, 10).unwrap();
    // The other client is served; the bad one is not, and is reported.
    assert_eq!(server.serve_once(8).unwrap().ops, 1);
    assert!(matches!(
        server.broken_clients(),
        [(
            0,
            CollectionError::Delegation(DelegationError::SequenceGap {
                client: 0,
                expected: 1,
                found: 7
            })
        )]
    ));
    // Still broken (another way): the first error stays, nothing is applied.
    forge_record(&s.emu.node(1), layout, 9, 1);
    assert_eq!(server.serve_once(8).unwrap().ops, 0);
    assert_eq!(broken(&server).len(), 1);
    assert_eq!(server.acknowledged(0).unwrap(), 0);
    assert_eq!(server.structure().log, [Op::Insert(10, 10)]);
    // A record repaired in place is then served, and the client leaves the list.
    forge_record(&s.emu.node(1), layout, 2, 1);
    assert_eq!(server.serve_once(8).unwrap().ops, 1);
    assert_eq!(server.structure().log, [Op::Insert(10, 10), Op::Remove(1)]);
    assert!(broken(&server).is_empty());
    // A tail that moves back is channel corruption, reported the same way.
    let tail = layout.channel(0).unwrap().tail_offset();
    let node = s.emu.node(1);
    node.store(tail, &0u64).unwrap();
    node.writeback(tail, 8).unwrap();
    node.fence();
    good.insert(11, 11).unwrap();
    assert_eq!(server.serve_once(8).unwrap().ops, 1);
    assert!(matches!(
        server.broken_clients(),
        [(0, CollectionError::Channel(ChannelError::Corrupt { .. }))]
    ));
    assert_eq!(good.flush().unwrap(), 2);
    // Put back where the head is, nothing to take: sane again, it leaves the list.
    node.store(tail, &1u64).unwrap();
    node.writeback(tail, 8).unwrap();
    node.fence();
    assert_eq!(server.serve_once(8).unwrap().ops, 0);
    assert!(broken(&server).is_empty());
}

/// A writer that takes over an area where a channel's counters are corrupt refuses to
/// serve it rather than guess which of its records the dead writer received.
#[test]
fn a_takeover_of_a_corrupt_channel_is_refused() {
    let s = machine(3, 13, 0.0);
    let layout = area(&s, 2, 4);
    drop(Server::new(s.emu.node(0), layout, RecordingMap::default()).unwrap());
    let tail = layout.channel(1).unwrap().tail_offset();
    let node = s.emu.node(2);
    node.store(tail, &1000u64).unwrap();
    node.writeback(tail, 8).unwrap();
    node.fence();
    let taken = Server::resume(s.emu.node(0), layout, RecordingMap::default());
    assert!(
        matches!(
            taken,
            Err(CollectionError::Channel(ChannelError::Corrupt { .. }))
        ),
        "{taken:?}"
    );
}

/// A client whose channel is corrupt does not stop the serving loop: the others' requests
/// are applied while it stays broken.
#[test]
fn a_broken_client_does_not_stop_the_serving_loop() {
    let s = machine(3, 5, 0.0);
    let layout = area(&s, 2, 4);
    let mut server = Server::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
    forge_record(&s.emu.node(1), layout, 9, 1);
    let mut good = Client::new(s.emu.node(2), layout, 1).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|t| {
        let _stop = StopOnDrop(&stop);
        let serving = t.spawn(|| server.run_until(&stop));
        for k in 0..20 {
            good.insert_sync(k, k).unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Release);
        assert_eq!(serving.join().unwrap().unwrap().ops, 20);
    });
    assert_eq!(server.broken_clients().len(), 1);
}

#[test]
fn an_acknowledgement_ahead_of_what_was_sent_is_refused() {
    let s = machine(2, 4, 0.0);
    let layout = area(&s, 1, 4);
    let _server = Server::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
    let mut client = clients(&s, layout, 1).pop().unwrap();
    let node = s.emu.node(0);
    let ack = layout.ack_offset(0).unwrap();
    node.store(ack, &3u64).unwrap();
    node.writeback(ack, 8).unwrap();
    node.fence();
    assert!(matches!(
        client.poll_applied(),
        Err(CollectionError::Delegation(
            DelegationError::BadAcknowledgement {
                ack: 3,
                sent: 0,
                ..
            }
        ))
    ));
}

#[test]
fn a_failed_batch_is_received_again_and_then_acknowledged() {
    let s = machine(3, 2, 0.1);
    let layout = area(&s, 2, 8);
    let mut server = Server::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
    let mut clients = clients(&s, layout, 2);
    for c in &mut clients {
        for _ in 0..3 {
            send_next(c);
        }
    }
    server.structure_mut().fail_after = Some(4);
    assert!(matches!(
        server.serve_once(64),
        Err(CollectionError::Corrupt { .. })
    ));
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(c.poll_applied().unwrap(), 0);
        assert_eq!(server.acknowledged(i).unwrap(), 0);
    }
    assert_eq!(server.serve_once(64).unwrap().ops, 6);
    for c in &mut clients {
        assert_eq!(c.flush().unwrap(), 3);
    }
    let map = server.into_structure();
    // The four operations applied before the failure were applied again, in order.
    assert_eq!(map.log.len(), 4 + 6);
    assert_eq!(map.log[..4], map.log[4..8]);
    assert_eq!(map.map, model(&[3, 3]));
}

/// A client carries the timeout it was given and shows where it stands: its index, what
/// is applied of what it sent, its configuration.
#[test]
fn a_client_shows_its_index_progress_and_configuration() {
    let s = machine(2, 12, 0.0);
    let layout = area(&s, 2, 4);
    let mut server = Server::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
    let timeout = Duration::from_millis(35);
    let config = ClientConfig::default().timeout(timeout);
    assert_eq!(config.timeout_value(), timeout);
    assert_ne!(ClientConfig::default().timeout_value(), timeout);
    let mut client = Client::with_config(s.emu.node(1), layout, 1, config).unwrap();
    client.insert(1, 10).unwrap();
    server.serve_once(8).unwrap();
    client.flush().unwrap();
    let shown = format!("{client:?}");
    for part in ["DelegationClient", "index: 1", "applied: 1", "35ms"] {
        assert!(shown.contains(part), "{part} not in {shown}");
    }
}

/// A server takes a lone record without a second fence only where a record never
/// straddles two lines: one that does is read whole after its own invalidation. Scripted
/// here: records of 48 bytes, and while the server polls (after its invalidations, before
/// it reads the tail) its node's cache refetches the second line of the next record's
/// slot, and only then does the client write that record. Read with the poll's
/// invalidation alone, the record's first line (with its sequence number) would be new
/// and its second line old.
#[test]
fn a_record_that_straddles_two_lines_is_read_whole() {
    use bi_collections::EpochBonsai;
    use bi_collections::delegate::DelegationServer;
    use bi_core::mem::{Access, Observed};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex, OnceLock};
    type Pair = [u64; 2];
    let s = machine(2, 14, 0.0);
    let line = s.emu.line_size().get();
    let layout = DelegationLayout::<u64, Pair>::new(s.arena(0), 1, 8, s.emu.line_size()).unwrap();
    let channel = layout.channel(0).unwrap();
    let record = channel.slot_offset(1) - channel.slot_offset(0);
    assert_eq!(record, 48, "a record's size");
    let straddles = |i: u64| {
        let at = channel.slot_offset(i);
        at / line != (at + record - 1) / line
    };
    let target = (0..8)
        .find(|&i| straddles(i))
        .expect("a slot across two lines");
    // The script: armed, the server's next load of the tail first has its cache refetch
    // the target slot's last line, then has the client send the target record.
    let armed = Arc::new(AtomicBool::new(false));
    let client = Arc::new(OnceLock::<Mutex<DelegationClient<EmulatedNode, u64, Pair>>>::new());
    let (armed_in, client_in, server_node) = (armed.clone(), client.clone(), s.emu.node(0));
    let tail = channel.tail_offset();
    let last_line = channel.slot_offset(target) + record - 1;
    let view = Observed::new(s.emu.node(0), move |access| {
        if access == Access::Load(tail) && armed_in.swap(false, Ordering::SeqCst) {
            server_node.prefetch(last_line).unwrap();
            let mut c = client_in.get().unwrap().lock().unwrap();
            c.insert(target, [target; 2]).unwrap();
        }
        Ok(())
    });
    let mut server = DelegationServer::new(view, layout, EpochBonsai::<u64, Pair>::new()).unwrap();
    let config = ClientConfig::default().timeout(Duration::from_secs(2));
    let attached = DelegationClient::with_config(s.emu.node(1), layout, 0, config).unwrap();
    let client = client.get_or_init(|| Mutex::new(attached));
    for k in 0..target {
        client.lock().unwrap().insert(k, [k; 2]).unwrap();
        assert_eq!(server.serve_once(8).unwrap().ops, 1);
    }
    armed.store(true, Ordering::SeqCst);
    assert_eq!(server.serve_once(8).unwrap().ops, 1);
    assert!(!armed.load(Ordering::SeqCst), "the script ran");
    assert_eq!(server.structure().get(&target), Some([target; 2]));
}

/// A long run through a small channel waits for room many times: each wait's timeout
/// counts from the last progress, not from the start of the run. The server here serves
/// one record each time the client's watch is asked (every 5 ms of waiting), so the run
/// takes far longer than the timeout while no single wait does.
#[test]
fn a_long_run_times_out_only_without_progress() {
    use std::sync::{Arc, Mutex};
    let s = machine(2, 15, 0.0);
    let layout = area(&s, 1, 4);
    let server = Server::new(s.emu.node(0), layout, RecordingMap::default()).unwrap();
    let server = Arc::new(Mutex::new(server));
    let config = ClientConfig::default().timeout(Duration::from_millis(200));
    let mut client = Client::with_config(s.emu.node(1), layout, 0, config).unwrap();
    let serving = server.clone();
    client.watch_server(move || {
        serving.lock().unwrap().serve_once(1).unwrap();
        false
    });
    let run: Vec<_> = (1..=100).map(|k| op_of(0, k)).collect();
    assert_eq!(client.send_batch(&run).unwrap(), 100);
    // All but the last channelful were served while the client waited: 96 waits.
    assert_eq!(server.lock().unwrap().structure().log, run[..96]);
}
