//! Delegation on real threads: a server thread running `run_until` and client threads
//! sending concurrently, over real memory (`Hardware`) and over the emulator.

mod delegate_mock;

use bi_collections::delegate::{
    ClientConfig, DelegationClient, DelegationLayout, DelegationServer, Idle, ServeTotals,
};
use bi_collections::testing::StopOnDrop;
use bi_core::mem::{Emulator, EmulatorConfig, MemView};
use bi_core::region::{Region, RegionConfig};
use delegate_mock::{RecordingMap, model, op_of, ops_of};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

/// Runs a server on `server_view` and `client_views.len()` clients, client `i` on
/// `client_views[i]`, each sending `per_client` operations (every third one waiting for
/// its acknowledgement, some in runs of twelve); checks that each client's operations
/// were applied once, in order, and returns the mock and the server's totals.
fn run<Vw: MemView + 'static>(
    server_view: Vw,
    client_views: Vec<Vw>,
    layout: DelegationLayout<u64, u64>,
    per_client: u64,
) -> (RecordingMap, ServeTotals) {
    let clients = client_views.len();
    let mut server = DelegationServer::new(server_view, layout, RecordingMap::default())
        .unwrap()
        .with_max_batch(16);
    assert!(
        format!("{server:?}").contains("max_batch: 16"),
        "{server:?}"
    );
    let stop = AtomicBool::new(false);
    // Generous: a loaded machine may deschedule the server for a while.
    let cfg = ClientConfig::default().timeout(Duration::from_secs(30));
    let totals = thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        let serving = s.spawn(|| server.run_until(&stop));
        let workers: Vec<_> = client_views
            .into_iter()
            .enumerate()
            .map(|(i, view)| {
                s.spawn(move || {
                    let mut c = DelegationClient::with_config(view, layout, i, cfg).unwrap();
                    let mut n = 1;
                    while n <= per_client {
                        if n.is_multiple_of(3) {
                            assert_eq!(c.send_sync(op_of(i, n)).unwrap(), n);
                            assert!(c.applied() >= n);
                            n += 1;
                        } else if n % 10 == 1 {
                            // A run of up to 12 in one call (more than a channel holds).
                            let end = per_client.min(n + 11);
                            let ops: Vec<_> = (n..=end).map(|k| op_of(i, k)).collect();
                            assert_eq!(c.send_batch(&ops).unwrap(), end);
                            n = end + 1;
                        } else {
                            assert_eq!(c.send(op_of(i, n)).unwrap(), n);
                            n += 1;
                        }
                    }
                    assert_eq!(c.flush().unwrap(), per_client);
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Release);
        serving.join().unwrap().unwrap()
    });
    let map = server.into_structure();
    for i in 0..clients {
        let expected: Vec<_> = (1..=per_client).map(|k| op_of(i, k)).collect();
        assert_eq!(ops_of(&map.log, i), expected, "client {i}");
    }
    assert_eq!(map.log.len() as u64, clients as u64 * per_client);
    assert_eq!(map.map, model(&vec![per_client; clients]));
    assert_eq!(totals.ops, clients as u64 * per_client);
    assert_eq!(totals.batches as usize, map.batches.len());
    assert!(totals.largest_batch <= 16);
    assert!(
        totals.polls >= totals.batches && totals.batches > 0,
        "{totals:?}"
    );
    (map, totals)
}

#[test]
fn threads_over_real_memory_apply_everything_once_in_order() {
    let (clients, per_client) = if cfg!(miri) { (2, 12) } else { (3, 3_000) };
    let region = Region::anonymous(RegionConfig::new(1 << 20).with_nodes(1)).unwrap();
    let heap = region.layout().heap();
    let layout = DelegationLayout::new(
        heap.offset..heap.end(),
        clients,
        8,
        region.layout().line_size(),
    )
    .unwrap();
    let views = (0..clients).map(|_| region.hardware()).collect();
    run(region.hardware(), views, layout, per_client);
}

#[test]
fn threads_on_emulated_nodes_with_random_evictions_apply_everything_once_in_order() {
    let (clients, per_client) = if cfg!(miri) { (2, 8) } else { (3, 400) };
    let emu = Emulator::new(
        EmulatorConfig::new(1 << 16, 1 + clients)
            .seed(42)
            .eviction_rate(0.1)
            .adjacent_prefetch_rate(0.1)
            .random_prefetch_rate(0.1)
            .late_writebacks(0.05),
    );
    let layout = DelegationLayout::new(0..1 << 16, clients, 4, emu.line_size()).unwrap();
    let views = (0..clients).map(|i| emu.node(1 + i)).collect();
    run(emu.node(0), views, layout, per_client);
    let stats = emu.total_stats();
    // Polls may read a control word the other side has just moved (a refill landing
    // between the invalidation and the load); they simply poll again, and the sequence
    // numbers checked above catch any record read stale. What must never happen is two
    // nodes writing one line.
    assert_eq!(stats.lost_writes, 0, "{stats:?}");
    if !cfg!(miri) {
        // Too few operations under Miri to be sure of both.
        assert!(
            stats.evictions > 0 && stats.prefetches > 0,
            "the caches did interfere"
        );
    }
}

/// A server deep in a nap far longer than a client's timeout still answers the client
/// of its own host in time: the client rings the area's doorbell when its first polls
/// find no answer. Without the ring each write would wait out the minute-long nap and
/// fail with a timeout.
#[test]
#[cfg_attr(miri, ignore = "futex waits and real time")]
fn a_napping_server_is_woken_by_a_client_of_its_host() {
    let region = Region::anonymous(RegionConfig::new(1 << 20).with_nodes(1)).unwrap();
    let heap = region.layout().heap();
    let line = region.layout().line_size();
    let layout = DelegationLayout::<u64, u64>::new(heap.offset..heap.end(), 1, 8, line).unwrap();
    let minute = Duration::from_secs(60);
    let idle = Idle {
        nap: minute,
        warm: Duration::ZERO,
        longest_nap: minute,
    };
    let mut server = DelegationServer::new(region.hardware(), layout, RecordingMap::default())
        .unwrap()
        .with_idle(idle);
    assert_eq!(server.idle(), idle);
    let config = ClientConfig::default().timeout(Duration::from_secs(10));
    let mut client = DelegationClient::with_config(region.hardware(), layout, 0, config).unwrap();
    let stop = AtomicBool::new(false);
    thread::scope(|t| {
        let _stop = StopOnDrop(&stop);
        let serving = t.spawn(|| server.run_until(&stop));
        let sent: Vec<_> = (0..5u64)
            .map(|k| {
                // Long enough for the server to spin, yield and fall into its nap.
                thread::sleep(Duration::from_millis(50));
                client.insert_sync(k, k)
            })
            .collect();
        stop.store(true, Ordering::Release);
        // The server may be asleep again: one more ring ends its nap.
        while !serving.is_finished() {
            region.hardware().ring_doorbell(heap.offset).unwrap();
            thread::sleep(Duration::from_millis(1));
        }
        assert!(sent.iter().all(Result::is_ok), "{sent:?}");
        assert_eq!(serving.join().unwrap().unwrap().ops, 5);
    });
}
