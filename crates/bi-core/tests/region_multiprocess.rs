//! Two processes share one region file: the parent builds a structure and publishes it
//! under a root name; a child process (this test binary again, selected by an environment
//! variable and an exact test-name filter) maps the file, finds the structure by name,
//! checks what the parent wrote and publishes a reply; the parent then reads the reply
//! after invalidating its cached copy.
//!
//! Miri can neither map files nor spawn processes, so the test is ignored under it.

use bi_core::mem::MemView;
use bi_core::ptr::ShPtr;
use bi_core::region::{Region, RegionConfig};
use bytemuck::{Pod, Zeroable};
use std::path::Path;
use std::process::Command;

/// Set in the child: the region file to open.
const CHILD_ENV: &str = "BI_REGION_TEST_CHILD_PATH";
/// The name of the test below, used as an exact filter when the binary re-runs itself.
const TEST_NAME: &str = "parent_and_child_share_a_region";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct Board {
    writer_pid: u64,
    values: [u64; 7],
    /// Points to the next board, or null.
    next: ShPtr<Board>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct Reply {
    reader_pid: u64,
    sum: u64,
}

fn publish<T: Pod, V: MemView>(region: &Region, view: &V, ptr: ShPtr<T>, value: &T) {
    region.store(view, ptr, value).unwrap();
    view.writeback(ptr.offset() as usize, size_of::<T>())
        .unwrap();
    view.fence();
}

fn fetch<T: Pod, V: MemView>(region: &Region, view: &V, ptr: ShPtr<T>) -> T {
    view.invalidate(ptr.offset() as usize, size_of::<T>())
        .unwrap();
    view.fence();
    region.load(view, ptr).unwrap()
}

/// The child's side: runs in the second process.
fn child(path: &Path) {
    let region = Region::open(path).expect("child opens the region");
    let view = region.hardware();
    let head = region
        .root::<Board, _>(&view, "boards")
        .unwrap()
        .expect("root published");
    let mut sum = 0;
    let mut at = head;
    let mut seen = 0;
    while !at.is_null() {
        let board = fetch(&region, &view, at);
        assert_ne!(
            board.writer_pid,
            u64::from(std::process::id()),
            "a different process"
        );
        sum += board.values.iter().sum::<u64>();
        at = board.next;
        seen += 1;
    }
    assert_eq!(seen, 2);
    let reply: ShPtr<Reply> = ShPtr::new(region.layout().heap().offset as u64 + 1024);
    publish(
        &region,
        &view,
        reply,
        &Reply {
            reader_pid: std::process::id().into(),
            sum,
        },
    );
    region.set_root(&view, "reply", reply).unwrap();
}

#[test]
#[cfg_attr(miri, ignore = "Miri cannot map files or spawn processes")]
fn parent_and_child_share_a_region() {
    if let Some(path) = std::env::var_os(CHILD_ENV) {
        child(Path::new(&path));
        return;
    }
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .unwrap();
    let path = dir.path().join("shared.bi");
    let region = Region::create(&path, RegionConfig::new(1 << 17).with_nodes(2)).unwrap();
    let view = region.hardware();
    let heap = region.layout().heap().offset as u64;
    let pid = u64::from(std::process::id());
    let second: ShPtr<Board> = ShPtr::new(heap + 128);
    let first: ShPtr<Board> = ShPtr::new(heap + 256);
    publish(
        &region,
        &view,
        second,
        &Board {
            writer_pid: pid,
            values: [10; 7],
            next: ShPtr::null(),
        },
    );
    publish(
        &region,
        &view,
        first,
        &Board {
            writer_pid: pid,
            values: [1, 2, 3, 4, 5, 6, 7],
            next: second,
        },
    );
    region.set_root(&view, "boards", first).unwrap();

    let out = Command::new(std::env::current_exe().unwrap())
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &path)
        .output()
        .expect("spawn the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed with {}:\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1 passed"),
        "the child ran the test: {stdout}"
    );

    let reply = region
        .root::<Reply, _>(&view, "reply")
        .unwrap()
        .expect("child replied");
    let reply = fetch(&region, &view, reply);
    assert_eq!(reply.sum, 28 + 70);
    assert_ne!(reply.reader_pid, pid);
    assert_ne!(reply.reader_pid, 0);
}
