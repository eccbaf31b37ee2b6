//! Shared handles (`Pool::map`, `Pool::tree`): writes from any process return the old
//! value, whichever process is the writer, with plain and string keys and values; a
//! writer killed with a request in flight never has it applied twice.
//!
//! The killed writer is this test binary again, selected by an environment variable and
//! an exact test-name filter. Miri can neither map files nor spawn processes.

use bi::collections::CollectionError;
use bi::collections::delegate::DelegationError;
use bi::{ErrorKind, Pool, PoolConfig, PoolError};
use rand::Rng;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;

const CHILD_ENV: &str = "BI_SHARED_WRITER_CHILD";
/// Set for a writer child that serves the string map instead of the plain one.
const STRINGS_ENV: &str = "BI_SHARED_WRITER_STRINGS";
const CHILD_TEST: &str = "writer_child_process";
const WRITER_NODE: usize = 1;
/// Node and reader lease: long enough that a busy test machine never stalls a live
/// process past it (a live node taken for dead has its readers' memory reclaimed, and its
/// structures adopted while it still writes them).
const LEASE: Duration = Duration::from_millis(300);

fn config(node: usize) -> PoolConfig {
    common::pool_config(3, node, LEASE)
}

/// Two pools of one new region file (two processes' worth: nodes 0 and 1); the
/// directory lives as long as the first value.
fn two_pools(name: &str) -> (tempfile::TempDir, Pool, Pool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{name}.bi"));
    let here = Pool::open_or_create(&path, config(0)).unwrap();
    let there = Pool::open_or_create(&path, config(1)).unwrap();
    (dir, here, there)
}

#[test]
#[cfg_attr(miri, ignore)]
fn writes_from_any_process_return_the_old_value_and_honour_guards() {
    let (_dir, here, there) = two_pools("shared");
    let writer = here.map::<u64, u64>("m").unwrap();
    let remote = there.map::<u64, u64>("m").unwrap();
    // A node runs one writer: the tree's is the other pool, and this one is a remote
    // of it once it serves.
    let err = here.tree::<u32, u64>("t").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WriterAlive);
    assert!(matches!(err.cause(), PoolError::WriterTaken));
    let wt = there.tree::<u32, u64>("t").unwrap();
    let rt = here.tree::<u32, u64>("t").unwrap();
    assert!(writer.is_writer() && !remote.is_writer() && wt.is_writer() && !rt.is_writer());
    let mut model = BTreeMap::new();
    let mut rng = bi_kit::rng(7, "operations");
    for step in 0..2000u64 {
        let key = rng.random_range(0..64u64);
        let via = if rng.random_bool(0.5) {
            &writer
        } else {
            &remote
        };
        let now = model.get(&key).copied();
        // Compare-and-set and compare-and-remove expect the right value half the time.
        let expected = now.filter(|_| rng.random_bool(0.5)).unwrap_or(u64::MAX);
        match rng.random_range(0..10) {
            0..6 => {
                assert_eq!(
                    via.insert(key, step).unwrap(),
                    model.insert(key, step),
                    "step {step}"
                );
                let t = if step % 2 == 0 { &wt } else { &rt };
                t.insert(key as u32, step).unwrap();
            }
            6 => {
                assert_eq!(via.insert_if_absent(key, step).unwrap(), now, "step {step}");
                model.entry(key).or_insert(step);
            }
            7 => {
                let found = via.compare_and_set(key, expected, step).unwrap();
                if now == Some(expected) {
                    assert_eq!(found, Ok(expected), "step {step}");
                    model.insert(key, step);
                } else {
                    assert_eq!(found, Err(now), "step {step}");
                }
            }
            8 => {
                let found = via.compare_and_remove(&key, expected).unwrap();
                if now == Some(expected) {
                    assert_eq!(found, Ok(expected), "step {step}");
                    model.remove(&key);
                } else {
                    assert_eq!(found, Err(now), "step {step}");
                }
            }
            _ => assert_eq!(via.remove(&key).unwrap(), model.remove(&key), "step {step}"),
        }
    }
    // Every key as the writer's node reads it, and as the remote node reads it after a
    // pass (a replaced value reaches another node's reads at its next pass).
    for k in 0..64 {
        assert_eq!(writer.get(&k).unwrap(), model.get(&k).copied());
    }
    std::thread::sleep(Duration::from_millis(20));
    for k in 0..64 {
        assert_eq!(remote.get(&k).unwrap(), model.get(&k).copied());
    }
    assert_eq!(writer.writer().unwrap().unwrap().len(), model.len());
    assert!(remote.writer().unwrap().is_none());
}

#[test]
#[cfg_attr(miri, ignore)]
fn extend_builds_from_either_side() {
    let (_dir, here, there) = two_pools("extend");
    let writer = here.map::<u64, u64>("m").unwrap();
    let remote = there.map::<u64, u64>("m").unwrap();
    // More than one batch from the remote side, then the writer overwrites half.
    assert_eq!(remote.extend((0..9_000).map(|k| (k, k))).unwrap(), 9_000);
    assert_eq!(
        writer.extend((0..4_500).map(|k| (k, k + 1))).unwrap(),
        4_500
    );
    assert_eq!(writer.extend(std::iter::empty()).unwrap(), 0);
    let w = writer.writer().unwrap().unwrap();
    assert_eq!(w.len(), 9_000);
    for k in [0, 4_499, 4_500, 8_999] {
        assert_eq!(
            w.get(&k),
            Some(if k < 4_500 { k + 1 } else { k }),
            "key {k}"
        );
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn threads_of_a_remote_process_share_its_client() {
    let (_dir, here, there) = two_pools("threads");
    let writer = here.map::<u64, u64>("m").unwrap();
    std::thread::scope(|s| {
        for t in 0..3u64 {
            let there = &there;
            s.spawn(move || {
                // Each thread its own handle (its own reader), one client between them.
                let m = there.map::<u64, u64>("m").unwrap();
                for i in 0..300 {
                    let key = t * 1000 + i % 50;
                    let old = m.insert(key, i).unwrap();
                    assert_eq!(old, (i >= 50).then(|| i - 50), "thread {t}, {i}");
                }
            });
        }
    });
    assert_eq!(writer.writer().unwrap().unwrap().len(), 150);
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_remote_handle_needs_a_serving_writer() {
    let (_dir, here, there) = two_pools("unserved");
    // The writer uses its plain handle: it serves nobody.
    let _plain = here.map_writer::<u64, u64>("m").unwrap();
    let r = there.map::<u64, u64>("m");
    let err = r.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NoWriter);
    assert!(matches!(err.cause(), PoolError::NoWriterYet), "{err:?}");
}

/// A child process killed when the test ends, passed or failed (the writer child serves
/// until killed).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the writer process over the region file at `path` (serving the string map if
/// `strings`) and waits until it serves.
fn spawn_writer(path: &Path, strings: bool) -> KillOnDrop {
    let mut cmd = common::child(CHILD_TEST);
    cmd.env(CHILD_ENV, path).stdout(Stdio::piped());
    if strings {
        cmd.env(STRINGS_ENV, "1");
    }
    let mut child = KillOnDrop(cmd.spawn().expect("spawn the writer"));
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    // The harness prints the test's name on the same line.
    assert!(lines.any(|l| l.unwrap().ends_with("serving")));
    child
}

/// The writer process: opens the shared map (taking the writer role), says so, and
/// serves until killed.
#[test]
fn writer_child_process() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return; // not the child
    };
    let pool = Pool::open_or_create(Path::new(&path), config(WRITER_NODE)).expect("writer pool");
    // Held for their serving threads.
    let (_plain, _strings);
    if std::env::var(STRINGS_ENV).is_ok() {
        let m = pool.map::<String, Vec<u8>>("s").expect("the string map");
        assert!(m.is_writer());
        _strings = m;
    } else {
        let m = pool.map::<u64, u64>("m").expect("the shared map");
        assert!(m.is_writer());
        _plain = m;
    }
    println!("serving");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_request_to_a_killed_writer_is_never_applied_twice() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.bi");
    let client_pool = Pool::open_or_create(&path, config(0)).unwrap();
    let mut child = spawn_writer(&path, false);
    let m = client_pool.map::<u64, u64>("m").unwrap();
    assert!(!m.is_writer());
    for k in 0..100 {
        assert_eq!(m.insert(k, k).unwrap(), None);
    }
    assert_eq!(m.insert(5, 50).unwrap(), Some(5));
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    // The request goes into the channel; nobody serves it. It times out (the client
    // timeout, a second, outlasts the 300 ms lease), this handle takes the role, and the
    // error says the writer died: its takeover reported the request failed.
    let err = m.insert(1000, 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NoWriter, "{err}");
    assert!(
        matches!(
            err.cause(),
            PoolError::Collection(CollectionError::Delegation(DelegationError::WriterDied {
                first: 102,
                last: 102
            }))
        ),
        "{err}"
    );
    // The dead writer's lease lapses: the remote handle takes the writer role on its
    // next write (adopting the map) and applies it here, with no retry by the caller;
    // the request that timed out is reported failed by the area's new server, and never
    // applied.
    std::thread::sleep(LEASE * 2);
    assert_eq!(m.insert(1001, 2).unwrap(), None);
    assert!(m.is_writer());
    assert_eq!(m.get(&1000).unwrap(), None, "a failed request was applied");
    assert_eq!(m.get(&5).unwrap(), Some(50));
    assert_eq!(m.insert(5, 51).unwrap(), Some(50));
    assert_eq!(m.writer().unwrap().unwrap().len(), 101);
    // Another process finds the role held (the handle's process is alive) and sends its
    // writes there.
    let successor = Pool::open_or_create(&path, config(WRITER_NODE)).unwrap();
    let other = successor.map::<u64, u64>("m").unwrap();
    assert!(!other.is_writer());
    assert_eq!(other.insert(1002, 3).unwrap(), None);
    assert_eq!(m.get(&1002).unwrap(), Some(3));
    assert_eq!(other.get(&1000).unwrap(), None);
}

/// A writer restarted while its dead predecessor's lease runs takes the role when it
/// opens the map (the kernel says the predecessor's process is gone), with the two
/// statements of a service and no loop: every acknowledged write of the dead writer is
/// there.
#[test]
#[cfg_attr(miri, ignore)]
fn a_writer_restarted_within_the_dead_ones_lease_takes_the_role_back() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("restarted.bi");
    let mut child = spawn_writer(&path, false);
    {
        let client_pool = Pool::open_or_create(&path, config(0)).unwrap();
        let m = client_pool.map::<u64, u64>("m").unwrap();
        for k in 0..50 {
            assert_eq!(m.insert(k, k * 10).unwrap(), None);
        }
    }
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    // Restarted at once, on any free node, while the lease of the dead writer runs.
    let pool = Pool::open_or_create(&path, config(0)).unwrap();
    let m = pool.map::<u64, u64>("m").unwrap();
    assert!(
        m.is_writer(),
        "the dead writer's process is gone: the role is free"
    );
    assert_eq!(m.insert(1001, 2).unwrap(), None);
    for k in 0..50 {
        assert_eq!(m.get(&k).unwrap(), Some(k * 10), "key {k}");
    }
    // Every handle of the process writes here now, without opening again.
    let again = pool.map::<u64, u64>("m").unwrap();
    assert!(again.is_writer());
    assert_eq!(again.insert(1001, 3).unwrap(), Some(2));
}

/// A key of 0 to 80 bytes (inline, one line, several).
fn text_key(i: u64) -> String {
    match i % 4 {
        0 => "k".repeat(i as usize % 9),
        1 => format!("a shared prefix longer than any line's payload, then: {i}"),
        2 => format!("user:{i:08}"),
        _ => format!("{i:x}").repeat(1 + i as usize % 7),
    }
}

/// A value of 0 to 5,000 bytes that `tag` tells apart.
fn blob(tag: u64, rng: &mut impl Rng) -> Vec<u8> {
    let len = match rng.random_range(0..4) {
        0 => rng.random_range(0..=16),
        1 => rng.random_range(17..200),
        _ => rng.random_range(200..5_000),
    };
    (0..len).map(|j| (tag as usize * 31 + j) as u8).collect()
}

/// String keys and byte-string values written from both processes: every old value
/// comes back byte for byte, guards compare whole values, and both nodes read the
/// result by `&str`.
#[test]
#[cfg_attr(miri, ignore)]
fn string_writes_from_any_process_return_the_old_value() {
    let (_dir, here, there) = two_pools("strings");
    let writer = here.map::<String, Vec<u8>>("s").unwrap();
    let remote = there.map::<String, Vec<u8>>("s").unwrap();
    let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut rng = bi_kit::rng(11, "operations");
    for step in 0..600u64 {
        let key = text_key(rng.random_range(0..40));
        let via = if rng.random_bool(0.5) {
            &writer
        } else {
            &remote
        };
        let now = model.get(&key).cloned();
        let expected = match &now {
            Some(v) if rng.random_bool(0.5) => v.clone(),
            _ => blob(step + 100_000, &mut rng),
        };
        let value = blob(step, &mut rng);
        match rng.random_range(0..10) {
            0..6 => {
                let old = via.insert(key.clone(), value.clone()).unwrap();
                assert_eq!(old, model.insert(key, value), "step {step}");
            }
            6 => {
                let old = via.insert_if_absent(key.clone(), value.clone()).unwrap();
                assert_eq!(old, now, "step {step}");
                model.entry(key).or_insert(value);
            }
            7 => {
                let found = via.compare_and_set(key.clone(), expected.clone(), value.clone());
                if now.as_ref() == Some(&expected) {
                    assert_eq!(found.unwrap(), Ok(expected), "step {step}");
                    model.insert(key, value);
                } else {
                    assert_eq!(found.unwrap(), Err(now), "step {step}");
                }
            }
            8 => {
                let found = via
                    .compare_and_remove(key.as_str(), expected.clone())
                    .unwrap();
                if now.as_ref() == Some(&expected) {
                    assert_eq!(found, Ok(expected), "step {step}");
                    model.remove(&key);
                } else {
                    assert_eq!(found, Err(now), "step {step}");
                }
            }
            _ => {
                let old = via.remove(key.as_str()).unwrap();
                assert_eq!(old, model.remove(&key), "step {step}");
            }
        }
    }
    // Many entries from the remote side: its parcel area fills and starts again.
    let many: Vec<(String, Vec<u8>)> = (0..300)
        .map(|i| {
            (
                format!("bulk {i:04} {}", "x".repeat(40)),
                vec![i as u8; 2_000],
            )
        })
        .collect();
    assert_eq!(remote.extend(many.clone()).unwrap(), many.len());
    model.extend(many);
    for (k, v) in &model {
        assert_eq!(writer.get(k.as_str()).unwrap().as_ref(), Some(v), "{k:?}");
    }
    std::thread::sleep(Duration::from_millis(20));
    for (k, v) in &model {
        assert_eq!(remote.get(k.as_str()).unwrap().as_ref(), Some(v), "{k:?}");
    }
}

/// A remote write carries keys and values of up to 256 KiB less 8 bytes; past that it
/// is a typed error and nothing is written, as is a remote write that would have to
/// report a value the writer's own handle made longer than that. Values of a MiB go in
/// through the writer's handle.
#[test]
#[cfg_attr(miri, ignore)]
fn remote_string_writes_have_a_typed_limit() {
    let (_dir, here, there) = two_pools("limits");
    let writer = here.map::<String, Vec<u8>>("s").unwrap();
    let remote = there.map::<String, Vec<u8>>("s").unwrap();
    let limit = bi::collections::delegate::DEFAULT_PARCEL_BYTES - 8;
    let too_large = |r: Result<Option<Vec<u8>>, bi::Error>| {
        let err = r.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TooLarge);
        match err.cause() {
            PoolError::Collection(CollectionError::Delegation(DelegationError::ItemTooLarge {
                len,
                limit: l,
            })) => {
                assert_eq!(*l, limit);
                *len
            }
            other => panic!("not ItemTooLarge: {other:?}"),
        }
    };
    assert_eq!(remote.insert("edge".into(), vec![1; limit]).unwrap(), None);
    assert_eq!(
        too_large(remote.insert("over".into(), vec![2; limit + 1])),
        limit + 1
    );
    let mib = vec![3u8; 1 << 20];
    assert_eq!(writer.insert("mib".into(), mib.clone()).unwrap(), None);
    assert_eq!(too_large(remote.insert("mib".into(), vec![4])), 1 << 20);
    assert_eq!(too_large(remote.remove("mib")), 1 << 20);
    assert_eq!(writer.get("mib").unwrap(), Some(mib.clone()));
    assert_eq!(writer.get("over").unwrap(), None);
    assert_eq!(remote.remove("edge").unwrap(), Some(vec![1; limit]));
    assert_eq!(writer.remove("mib").unwrap(), Some(mib));
}

/// A writer process serves a string map; this process writes strings to it as a
/// remote and reads them back on its own node.
#[test]
#[cfg_attr(miri, ignore)]
fn string_requests_cross_to_a_writer_process() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strings.bi");
    let client_pool = Pool::open_or_create(&path, config(0)).unwrap();
    let _child = spawn_writer(&path, true);
    let m = client_pool.map::<String, Vec<u8>>("s").unwrap();
    assert!(!m.is_writer());
    let mut rng = bi_kit::rng(3, "operations");
    let mut model = BTreeMap::new();
    for step in 0..300u64 {
        let key = text_key(rng.random_range(0..60));
        let value = blob(step, &mut rng);
        assert_eq!(
            m.insert(key.clone(), value.clone()).unwrap(),
            model.insert(key, value),
            "step {step}"
        );
    }
    for (k, v) in &model {
        assert_eq!(m.get(k.as_str()).unwrap().as_ref(), Some(v), "{k:?}");
    }
    let first = model.keys().next().unwrap().clone();
    assert_eq!(m.remove(first.as_str()).unwrap(), model.remove(&first));
    assert_eq!(m.get(first.as_str()).unwrap(), None);
}

/// A node whose channel holds what no client writes is reported by the writer's handle
/// (the serving thread stops serving it and goes on with the others).
#[test]
#[cfg_attr(miri, ignore)]
fn the_writer_reports_a_node_whose_channel_is_corrupt() {
    use bi::collections::delegate::DelegationLayout;
    use bi::core::mem::MemView;
    let (_dir, here, there) = two_pools("broken");
    let writer = here.map::<u64, u64>("m").unwrap();
    let remote = there.map::<u64, u64>("m").unwrap();
    assert_eq!(remote.insert(1, 10).unwrap(), None);
    assert!(writer.broken_clients().is_empty());
    // Node 1's tail, moved far past anything its channel can hold.
    let nodes = here.region().layout().config().nodes() as usize;
    let layout =
        DelegationLayout::<u64, u64>::named(here.region(), here.runtime(), "m", nodes, false)
            .unwrap()
            .expect("the writer's area");
    let tail = layout.channel(there.node()).unwrap().tail_offset();
    let view = there.runtime().view();
    view.store(tail, &1_000_000u64).unwrap();
    view.writeback(tail, 8).unwrap();
    view.fence();
    let deadline = Instant::now() + Duration::from_secs(10);
    while writer.broken_clients().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let broken = writer.broken_clients();
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert_eq!(broken[0].0, there.node());
    assert!(remote.broken_clients().is_empty(), "only the writer knows");
    assert_eq!(
        writer.insert(1, 11).unwrap(),
        Some(10),
        "the writer goes on"
    );
}

/// One handle serves every thread of a process: it is `Send + Sync + Clone`, 64 threads
/// write and read through it at once, and 1,000 short-lived threads (more than the
/// node's 512 reader records) read through it one batch after another, each thread's
/// reader record handed on when it ends.
#[test]
#[cfg_attr(miri, ignore)]
fn one_handle_serves_every_thread() {
    fn shareable<T: Send + Sync + Clone>() {}
    shareable::<bi::SharedMap<u64, u64>>();
    shareable::<bi::SharedTree<String, String>>();
    let (_dir, here, there) = two_pools("threads");
    let writer = here.map::<u64, u64>("m").unwrap();
    let remote = there.map::<u64, u64>("m").unwrap();
    std::thread::scope(|s| {
        for t in 0..64u64 {
            let (w, r) = (writer.clone(), &remote);
            s.spawn(move || {
                assert_eq!(r.insert(t, t).unwrap(), None);
                assert_eq!(r.get(&t).unwrap(), Some(t)); // its own write, at once
                assert_eq!(w.insert(1000 + t, t).unwrap(), None);
            });
        }
    });
    for batch in 0..125u64 {
        std::thread::scope(|s| {
            for t in 0..8 {
                let r = remote.clone();
                s.spawn(move || {
                    let k = (batch * 8 + t) % 64;
                    assert_eq!(r.get_fresh(&k).unwrap(), Some(k), "key {k}");
                });
            }
        });
    }
    assert_eq!(writer.writer().unwrap().unwrap().len(), 128);
}

/// Stops `child` with SIGSTOP and returns once the kernel shows it stopped (a stop is
/// delivered asynchronously).
fn stop(child: &KillOnDrop) {
    let pid = child.0.id() as libc::pid_t;
    // SAFETY: kill(2) takes plain integers and touches no memory of this process.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let stopped = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('T'))
        })
    };
    while !stopped() {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `PoolConfig::write_timeout` is what a remote write waits: with 50 ms, writes to a
/// stopped writer (alive: its role stays its own) fail several times over within 300 ms
/// (with the default second, once); once it is killed, the handle takes the role.
#[test]
#[cfg_attr(miri, ignore)]
fn a_remote_write_waits_the_pools_write_timeout() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("timeout.bi");
    let quick = PoolConfig {
        write_timeout: Duration::from_millis(50),
        ..config(0)
    };
    let client_pool = Pool::open_or_create(&path, quick).unwrap();
    let mut child = spawn_writer(&path, false);
    let m = client_pool.map::<u64, u64>("m").unwrap();
    assert!(!m.is_writer());
    assert_eq!(m.insert(1, 1).unwrap(), None);
    stop(&child);
    let mut timeouts = 0;
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        match m.insert(2, 2) {
            Err(e) if e.kind() == ErrorKind::Timeout => timeouts += 1,
            r => panic!("a write to a stopped writer: {r:?}"),
        }
    }
    assert!(timeouts >= 2, "{timeouts} timed-out writes");
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let mut k = 2;
    loop {
        match m.insert(k, k) {
            Ok(_) => break,
            Err(e) if matches!(e.kind(), ErrorKind::Timeout | ErrorKind::NoWriter) => {}
            Err(e) => panic!("{e}"),
        }
        k += 1;
        assert!(k < 10_000, "the role was never taken");
    }
    assert!(m.is_writer());
    assert_eq!(m.get(&1).unwrap(), Some(1));
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_write_to_a_writer_that_dies_stops_waiting_before_its_timeout() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dies.bi");
    let timeout = Duration::from_secs(600);
    let patient = PoolConfig {
        write_timeout: timeout,
        ..config(0)
    };
    let client_pool = Pool::open_or_create(&path, patient).unwrap();
    let mut child = spawn_writer(&path, false);
    let m = client_pool.map::<u64, u64>("m").unwrap();
    assert!(!m.is_writer());
    assert_eq!(m.insert(1, 1).unwrap(), None);
    // Stopped, the writer takes the write into its channel and never applies it; it is
    // killed while the write waits.
    stop(&child);
    let started = Instant::now();
    let waited = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            child.0.kill().unwrap();
            child.0.wait().unwrap();
        });
        let e = m.insert(2, 2).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NoWriter, "{e}");
        started.elapsed()
    });
    assert!(waited < timeout / 2, "waited {waited:?}");
    // The handle took the role over, and the write the dead writer never applied is not
    // there.
    assert!(m.is_writer());
    assert_eq!(m.get(&2).unwrap(), None);
    assert_eq!(m.get(&1).unwrap(), Some(1));
}

/// A value of 100 KiB: a few hundred fill a test pool.
fn big_value() -> Vec<u8> {
    vec![7u8; 100 << 10]
}

/// How a test writes one key: `insert` or `remove`, through some handle.
type Write<'a> = &'a dyn Fn(&str, Option<Vec<u8>>) -> Result<Option<Vec<u8>>, bi::Error>;

/// Inserts big values under `key-00000`, `key-00001`, ... through `write` until the pool
/// refuses one with the heap's error; returns how many went in.
fn fill_until_refused(write: Write<'_>) -> usize {
    let mut stored = 0;
    let refused = loop {
        match write(&format!("key-{stored:05}"), Some(big_value())) {
            Ok(None) => stored += 1,
            Ok(Some(_)) => panic!("a new key replaced a value"),
            Err(e) => break e,
        }
        assert!(stored < 10_000, "the pool never filled");
    };
    assert_eq!(refused.kind(), bi::ErrorKind::HeapExhausted, "{refused}");
    assert!(stored > 10, "{stored} values fitted");
    stored
}

/// Removes half of the `stored` keys through `write`, then inserts `after` until the
/// freed room takes it (removed values come back after their grace period).
fn free_and_write_again(write: Write<'_>, stored: usize) {
    for k in 0..stored / 2 {
        assert!(write(&format!("key-{k:05}"), None).unwrap().is_some());
    }
    for _ in 0..200 {
        match write("after", Some(big_value())) {
            Ok(_) => return,
            Err(e) if e.kind() == bi::ErrorKind::HeapExhausted => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    }
    panic!("remote writes never resumed");
}

/// How a test reads one key through some handle.
type Read<'a> = &'a dyn Fn(&str) -> Result<Option<Vec<u8>>, bi::Error>;

/// Fills the pool through `write` until it refuses a value (read back through `read`: not
/// there), runs `full` while the pool is full, then frees room and writes again.
fn full_pool_round(write: Write<'_>, read: Read<'_>, full: impl FnOnce()) {
    let stored = fill_until_refused(write);
    assert_eq!(read(&format!("key-{stored:05}")).unwrap(), None);
    full();
    free_and_write_again(write, stored);
    assert_eq!(read("after").unwrap(), Some(big_value()));
}

/// A remote write into a full pool fails with the heap's error (nothing written), not a
/// timeout; once room is freed, remote writes go through again.
#[test]
#[cfg_attr(miri, ignore)]
fn a_full_pool_refuses_remote_writes_and_takes_them_again_once_freed() {
    let (_dir, here, there) = two_pools("full");
    let writer = here.map::<String, Vec<u8>>("s").unwrap();
    let remote = there.map::<String, Vec<u8>>("s").unwrap();
    let write = |k: &str, v: Option<Vec<u8>>| match v {
        Some(v) => remote.insert(k.to_owned(), v),
        None => remote.remove(k),
    };
    full_pool_round(&write, &|k| writer.get(k), || {
        // A batch that runs out part way: what went in is whole, the rest is refused.
        let batch = (0..20).map(|i| (format!("batch-{i}"), vec![i as u8; 100 << 10]));
        let err = remote.extend(batch).unwrap_err();
        assert_eq!(err.kind(), bi::ErrorKind::HeapExhausted, "{err}");
        for i in 0..20u8 {
            let got = writer.get(format!("batch-{i}").as_str()).unwrap();
            assert!(got.is_none_or(|v| v == vec![i; 100 << 10]), "batch-{i}");
        }
    });
    assert_eq!(writer.insert("local".into(), vec![1]).unwrap(), None);
}

/// The same for a tree.
#[test]
#[cfg_attr(miri, ignore)]
fn a_full_pool_refuses_remote_tree_writes_and_takes_them_again_once_freed() {
    let (_dir, here, there) = two_pools("full-tree");
    let writer = here.tree::<String, Vec<u8>>("t").unwrap();
    let remote = there.tree::<String, Vec<u8>>("t").unwrap();
    let write = |k: &str, v: Option<Vec<u8>>| match v {
        Some(v) => remote.insert(k.to_owned(), v),
        None => remote.remove(k),
    };
    full_pool_round(&write, &|k| writer.get(k), || {});
}

/// A write the writer's own handle refuses (an item larger than the pool) leaves the
/// process the writer, and it writes on: only a role another process took makes a
/// handle give the role up.
#[test]
#[cfg_attr(miri, ignore = "maps a file and starts threads")]
fn a_write_the_writer_refuses_leaves_it_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let pool = bi::Pool::open_or_create(
        dir.path().join("pool.bi"),
        bi::PoolConfig::with_size(16 << 20),
    )
    .unwrap();
    let m = pool.map::<u64, String>("m").unwrap();
    assert!(m.is_writer());
    let err = m.insert(1, "x".repeat(32 << 20)).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            bi::ErrorKind::TooLarge | bi::ErrorKind::HeapExhausted
        ),
        "{err}"
    );
    assert!(
        m.is_writer(),
        "the refusal made the writer give its role up"
    );
    m.insert(2, "y".into()).unwrap();
    assert_eq!(m.get(&2).unwrap().as_deref(), Some("y"));
}
