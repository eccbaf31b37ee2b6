//! The writer's host dies **in the middle of** a scripted workload on a named tree and
//! on a named map: at every cache or memory operation of the script in turn, one run per
//! operation, not only between the structures' operations (that is `tree_takeover` and
//! `map_takeover`).
//!
//! The writer's node sees memory through a [`Mortal`] view over its [`EmulatedNode`]: it
//! counts the node's operations (loads, stores, write-backs, invalidations, flushes,
//! fences, reuse notices) and, at the `k`-th, the host dies: the node's cache is lost
//! ([`EmulatedNode::crash`]: nothing it had not written back reaches memory) and that
//! operation and every later one fail, so the call in flight returns an error and
//! nothing more of the dead process reaches memory. The script starts the process (its
//! runtime claims the node), takes the writer role, publishes (inserts, replacements,
//! removals), retires what those replace through the writer's bag, passes on both nodes
//! and reclaims, then allocates again in the memory given back. A reader on node 1 reads
//! the whole structure after every step and must find one version the writer published
//! (the tree's reads are snapshots by construction, the map's by its snapshot read).
//!
//! After each death a new process on node 0 adopts the structure, and the test checks:
//! - every write whose call returned `Ok` is there, and the one in flight is wholly there
//!   or wholly absent (the adopted contents are one of exactly two maps);
//! - the reader on node 1 reads a published version right after the adoption and,
//!   after its next pass, exactly the adopted contents, with no error: adoption logs
//!   the structure's memory and announces its root slots, since the dead writer may
//!   have written a line or a slot back and died before logging it (a map's bucket
//!   lines are covered by the memory adoption logs as a retirement);
//! - after two passes and a reclaim, nothing the dead writer left (retired, in its bag,
//!   allocated and never published) is held back, and the heap's live bytes are at most
//!   what the adopted contents occupy (see [`Subject::live_bound`]);
//! - the new writer goes on (allocating in that memory), and node 1 then reads exactly
//!   its contents;
//! - the oracle counts no read of reused memory, on either node, over the whole run.
//!
//! The hardware evicts lines at random (so memory holds any prefix of the writer's
//! stores when it dies), lands write-backs late and in any order until a fence (so a
//! death loses any subset of those in flight), and prefetches adjacent lines. A death at
//! the fence that ends a call (a fence reports nothing) counts that call as in flight:
//! its caller never saw it return. It does not prefetch lines at
//! random: a random prefetch can refill a freed line after its last invalidation, which
//! the protocol does not prevent but rejects (the generation check), so the oracle's
//! count is then bounded by the rejected reads rather than zero (the tree's script
//! without any death shows 4 such rejected reads on node 1 at a random prefetch rate of
//! 0.05).

use bi_alloc::NodeHeap;
use bi_alloc::class::{CLASS_LINES, class_of};
use bi_collections::CollectionError;
use bi_collections::map::{BiHashMap, MapReadHandle, MapWriteHandle};
use bi_collections::tree::{BiTree, Node, TreeReadHandle, TreeWriteHandle};
use bi_core::heap::Heap;
use bi_core::mem::{Access, EmulatedNode, MemError, Observed};
use bi_core::region::{Region, RegionConfig};
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{
    EmulatedClock, NodeRuntime, ReaderOrdering, ReclaimReport, RuntimeConfig, Writer,
};
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

const LEASE: u64 = 1_000_000;

fn config() -> RuntimeConfig {
    RuntimeConfig::default()
        .node_lease(LEASE)
        .reader_lease(LEASE)
        .reader_ordering(ReaderOrdering::Emulated)
}

/// What a view does, as counted by a [`Fuse`] (indexes [`Fuse::done`]).
#[derive(Clone, Copy, Debug)]
enum OpKind {
    Load,
    Store,
    WriteBack,
    Invalidate,
    Flush,
    Fence,
    NoteReuse,
    Prefetch,
}

const KINDS: [OpKind; 8] = [
    OpKind::Load,
    OpKind::Store,
    OpKind::WriteBack,
    OpKind::Invalidate,
    OpKind::Flush,
    OpKind::Fence,
    OpKind::NoteReuse,
    OpKind::Prefetch,
];

/// The life of one host, shared by every clone of its view.
#[derive(Debug, Default)]
struct Fuse {
    /// Operations attempted so far, the fatal one included.
    ops: AtomicU64,
    /// The operation the host dies at (1-based; 0: it does not die by itself).
    at: u64,
    dead: AtomicBool,
    /// Operations that went through, by kind.
    done: [AtomicU64; KINDS.len()],
}

impl Fuse {
    fn dying_at(at: u64) -> Arc<Fuse> {
        Arc::new(Fuse {
            at,
            ..Fuse::default()
        })
    }

    fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// The host dies now: its cache is lost, and nothing of it reaches memory any more.
    fn kill(&self, node: &EmulatedNode) {
        self.dead.store(true, Ordering::SeqCst);
        node.crash();
    }

    fn count(&self) -> u64 {
        self.ops.load(Ordering::SeqCst)
    }
}

/// What every operation of a dead host returns.
const DEAD: MemError = MemError::BadSize {
    requested: 0,
    reason: "the host is dead",
};

/// A node's view that can die: with a fuse, it counts every operation, and at the fuse's
/// `at`-th the host dies ([`Fuse::kill`]) instead of doing it; that operation and all
/// later ones fail with [`DEAD`] (a fence, which cannot fail, does nothing). Without a
/// fuse it is the node's view as it is. (The word-sized and validated reads, and the
/// accesses that bypass the cache, are made of the operations it counts, as
/// `EmulatedNode`'s are.)
type Mortal = Observed<EmulatedNode>;

fn mortal(node: EmulatedNode, fuse: Option<Arc<Fuse>>) -> Mortal {
    let host = node.clone();
    Observed::new(node, move |access| {
        let Some(fuse) = &fuse else {
            return Ok(());
        };
        if fuse.is_dead() {
            return Err(DEAD);
        }
        if fuse.ops.fetch_add(1, Ordering::SeqCst) + 1 == fuse.at {
            fuse.kill(&host);
            return Err(DEAD);
        }
        let kind = match access {
            Access::Load(_) => OpKind::Load,
            Access::Store(_) | Access::CompareExchange(_) => OpKind::Store,
            Access::WriteBack(..) => OpKind::WriteBack,
            Access::Invalidate(..) => OpKind::Invalidate,
            Access::Flush(..) => OpKind::Flush,
            Access::Fence => OpKind::Fence,
            Access::NoteReuse(..) => OpKind::NoteReuse,
            Access::Prefetch(_) => OpKind::Prefetch,
        };
        fuse.done[kind as usize].fetch_add(1, Ordering::Relaxed);
        Ok(())
    })
}

type Rt = NodeRuntime<Mortal>;
type NodeWriter = Writer<Mortal, NodeHeap>;
type Contents = BTreeMap<u64, u64>;

/// The runtime of a new process on node `n` of `s`, over a view with `fuse` (what
/// `NodeRuntime::emulated` makes, over a [`Mortal`] view).
fn runtime(
    s: &Setup,
    n: usize,
    fuse: Option<Arc<Fuse>>,
    config: RuntimeConfig,
) -> Result<Rt, CollectionError> {
    let node = s.emu.node(n);
    let clock = Arc::new(EmulatedClock::new(node.clone()));
    let layout = *s.region.layout();
    Ok(NodeRuntime::new(
        mortal(node, fuse),
        layout,
        n,
        config,
        clock,
    )?)
}

/// A structure under test, named "s", with `u64` keys and values as the test sees them.
trait Subject {
    type W;
    type R;
    /// The workload the writer's host dies in the middle of.
    fn script() -> Vec<Step>;
    /// Opens the structure by name (made if missing) and a reader of it.
    fn open_reader(region: &Region, rt: &Rt) -> Result<Self::R, CollectionError>;
    /// Takes the structure's writer role (adopting it if it has a root).
    fn take(region: &Region, rt: &Rt, writer: NodeWriter) -> Result<Self::W, CollectionError>;
    fn insert(w: &mut Self::W, k: u64, v: u64) -> Result<Option<u64>, CollectionError>;
    fn remove(w: &mut Self::W, k: u64) -> Result<Option<u64>, CollectionError>;
    fn reclaim(w: &mut Self::W) -> Result<ReclaimReport, CollectionError>;
    fn writer(w: &mut Self::W) -> &NodeWriter;
    /// The contents as the writer's handle holds them, its invariants checked.
    fn contents(w: &mut Self::W) -> Contents;
    /// The contents as the reader sees them.
    fn read(r: &Self::R) -> Result<Contents, CollectionError>;
    /// The most heap bytes a structure holding `contents` occupies.
    fn live_bound(w: &mut Self::W, contents: &Contents) -> usize;
}

/// One step of a script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// The process starts: its runtime claims node 0.
    Start,
    /// It takes the node's writer, passes on both nodes, and takes the structure's role.
    Take,
    Insert(u64, u64),
    Remove(u64),
    /// A pass on node 0, then on node 1.
    Pass,
    Reclaim,
}

/// What the model does with a step.
fn apply(model: &mut Contents, step: Step) {
    match step {
        Step::Insert(k, v) => {
            model.insert(k, v);
        }
        Step::Remove(k) => {
            model.remove(&k);
        }
        Step::Start | Step::Take | Step::Pass | Step::Reclaim => {}
    }
}

/// The steps both scripts share: `keys` publications into a growing structure, updates
/// (replacements and removals) of `updates` keys, passes, a reclaim, and publications
/// of new keys in the memory the reclaim gave back.
fn script(keys: u64, updates: u64) -> Vec<Step> {
    use Step::*;
    let mut s = vec![Start, Take];
    for i in 0..keys {
        s.push(Insert((i * 7) % keys, 100 + i));
        if i == keys / 2 {
            s.push(Pass);
        }
    }
    s.push(Pass);
    for i in 0..updates {
        let k = (i * 5 + 3) % keys;
        s.push(if i % 3 == 2 {
            Remove(k)
        } else {
            Insert(k, 200 + i)
        });
    }
    s.extend([Pass, Pass, Reclaim]);
    for k in keys..keys + 4 {
        s.push(Insert(k, 300 + k));
    }
    s.extend([Pass, Reclaim]);
    s
}

struct Tree;

impl Subject for Tree {
    type W = TreeWriteHandle<u64, u64, Mortal, NodeHeap>;
    type R = TreeReadHandle<u64, u64, Mortal>;

    /// Every update copies its path: the 30 updates retire more than one bag of
    /// `RETIRE_BATCH` (64) nodes before the first reclaim.
    fn script() -> Vec<Step> {
        script(16, 14)
    }
    fn open_reader(region: &Region, rt: &Rt) -> Result<Self::R, CollectionError> {
        BiTree::<u64, u64>::named(region, rt, "s")?.read_handle(rt)
    }
    fn take(region: &Region, rt: &Rt, writer: NodeWriter) -> Result<Self::W, CollectionError> {
        BiTree::<u64, u64>::named(region, rt, "s")?.take_writer(rt, writer)
    }
    fn insert(w: &mut Self::W, k: u64, v: u64) -> Result<Option<u64>, CollectionError> {
        w.insert(k, v)
    }
    fn remove(w: &mut Self::W, k: u64) -> Result<Option<u64>, CollectionError> {
        w.remove(&k)
    }
    fn reclaim(w: &mut Self::W) -> Result<ReclaimReport, CollectionError> {
        w.reclaim()
    }
    fn writer(w: &mut Self::W) -> &NodeWriter {
        w.writer()
    }
    fn contents(w: &mut Self::W) -> Contents {
        w.check_invariants().expect("the tree's invariants");
        let all: Contents = w
            .iter()
            .expect("the writer reads its tree")
            .into_iter()
            .collect();
        assert_eq!(all.len(), w.len());
        all
    }
    fn read(r: &Self::R) -> Result<Contents, CollectionError> {
        Ok(r.enter().iter()?.into_iter().collect())
    }
    /// One node (one line) per entry, and nothing else.
    fn live_bound(w: &mut Self::W, contents: &Contents) -> usize {
        let node = w.writer().object_bytes(size_of::<Node<u64, u64>>());
        contents.len() * node.unwrap()
    }
}

/// A map whose values do not fit a bucket entry: every pair is an object of its own, so
/// every replacement and removal retires one through the bag.
struct Map;

/// 48 bytes: with its key, more than an entry's 48 bytes of a bucket line.
type Value = [u64; 6];

fn value(v: u64) -> Value {
    [
        v,
        !v,
        v.rotate_left(17),
        v ^ 0x5555,
        v.wrapping_mul(3),
        v + 1,
    ]
}

/// The `u64` a value was made from; a value made of two writes is a panic.
fn unvalue(x: Value) -> u64 {
    assert_eq!(x, value(x[0]), "a torn value");
    x[0]
}

/// Keys of the map scripts (checked one by one: the writer's handle has no iterator).
const MAP_KEYS: u64 = 32;

impl Subject for Map {
    type W = MapWriteHandle<u64, Value, Mortal, NodeHeap>;
    type R = MapReadHandle<u64, Value, Mortal>;

    /// 21 pairs replaced or removed: the reclaims are what retire the bag.
    fn script() -> Vec<Step> {
        script(20, 21)
    }
    fn open_reader(region: &Region, rt: &Rt) -> Result<Self::R, CollectionError> {
        BiHashMap::<u64, Value>::named(region, rt, "s")?.read_handle(rt)
    }
    fn take(region: &Region, rt: &Rt, writer: NodeWriter) -> Result<Self::W, CollectionError> {
        BiHashMap::<u64, Value>::named(region, rt, "s")?.take_writer(rt, writer)
    }
    fn insert(w: &mut Self::W, k: u64, v: u64) -> Result<Option<u64>, CollectionError> {
        Ok(w.insert(k, value(v))?.map(unvalue))
    }
    fn remove(w: &mut Self::W, k: u64) -> Result<Option<u64>, CollectionError> {
        Ok(w.remove(&k)?.map(unvalue))
    }
    fn reclaim(w: &mut Self::W) -> Result<ReclaimReport, CollectionError> {
        w.reclaim()
    }
    fn writer(w: &mut Self::W) -> &NodeWriter {
        w.writer()
    }
    fn contents(w: &mut Self::W) -> Contents {
        let all: Contents = (0..MAP_KEYS)
            .filter_map(|k| w.get(&k).map(|v| (k, unvalue(v))))
            .collect();
        assert_eq!(all.len(), w.len(), "keys outside the script's");
        all
    }
    fn read(r: &Self::R) -> Result<Contents, CollectionError> {
        let view = r.enter();
        let mut all = Contents::new();
        for kv in view.iter() {
            let (k, v) = kv?;
            assert!(all.insert(k, unvalue(v)).is_none(), "key {k} twice");
        }
        Ok(all)
    }
    /// The array (its header, buckets, counters and tag lines, in the slot of the heap's
    /// size class that holds it), the writer's rewrite journal (two lines), one pair
    /// object per entry, and at most one overflow line per entry.
    fn live_bound(w: &mut Self::W, contents: &Contents) -> usize {
        // Header, buckets, counters and tag lines (28 buckets' tags a line here).
        let buckets = w.capacity();
        let lines = buckets + 2 + buckets.div_ceil(28);
        let writer = w.writer();
        let line = writer.lines_bytes(1, 8).unwrap();
        let journal = writer.lines_bytes(2, 56).unwrap();
        let array = class_of(lines).map_or(lines, |c| CLASS_LINES[c]) * line + journal;
        let pair = writer.object_bytes(size_of::<(u64, Value)>()).unwrap();
        array + contents.len() * (pair + line)
    }
}

/// Keys and values as strings and byte strings: every entry owns a string for its key
/// (longer than a word holds) and one for its value (one to three lines), written with
/// the entry and retired with it.
fn text_key(k: u64) -> String {
    format!("a key longer than a word, number {k:04}")
}

fn text_value(v: u64) -> Vec<u8> {
    let mut x = v.to_ne_bytes().to_vec();
    x.extend((0..[0usize, 40, 130][(v % 3) as usize]).map(|i| (v as u8).wrapping_add(i as u8)));
    x
}

/// The `u64` a value was made from; a torn or foreign value is a panic.
fn text_unvalue(x: Vec<u8>) -> u64 {
    let v = u64::from_ne_bytes(x[..8].try_into().expect("8 bytes at least"));
    assert_eq!(x, text_value(v), "a torn value");
    v
}

/// The key number of a text key.
fn text_unkey(k: &str) -> u64 {
    k.rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a key of the script")
}

/// The most bytes the strings of one entry occupy.
fn text_strings_bytes(writer: &NodeWriter) -> usize {
    let key = writer.object_bytes(8 + text_key(0).len()).unwrap();
    key + writer.object_bytes(8 + text_value(2).len()).unwrap()
}

struct TextTree;

impl Subject for TextTree {
    type W = TreeWriteHandle<String, Vec<u8>, Mortal, NodeHeap>;
    type R = TreeReadHandle<String, Vec<u8>, Mortal>;

    fn script() -> Vec<Step> {
        script(12, 12)
    }
    fn open_reader(region: &Region, rt: &Rt) -> Result<Self::R, CollectionError> {
        BiTree::<String, Vec<u8>>::named(region, rt, "s")?.read_handle(rt)
    }
    fn take(region: &Region, rt: &Rt, writer: NodeWriter) -> Result<Self::W, CollectionError> {
        BiTree::<String, Vec<u8>>::named(region, rt, "s")?.take_writer(rt, writer)
    }
    fn insert(w: &mut Self::W, k: u64, v: u64) -> Result<Option<u64>, CollectionError> {
        Ok(w.insert(text_key(k), text_value(v))?.map(text_unvalue))
    }
    fn remove(w: &mut Self::W, k: u64) -> Result<Option<u64>, CollectionError> {
        Ok(w.remove(text_key(k).as_str())?.map(text_unvalue))
    }
    fn reclaim(w: &mut Self::W) -> Result<ReclaimReport, CollectionError> {
        w.reclaim()
    }
    fn writer(w: &mut Self::W) -> &NodeWriter {
        w.writer()
    }
    fn contents(w: &mut Self::W) -> Contents {
        w.check_invariants().expect("the tree's invariants");
        let all: Contents = w
            .iter()
            .expect("the writer reads its tree")
            .into_iter()
            .map(|(k, v)| (text_unkey(&k), text_unvalue(v)))
            .collect();
        assert_eq!(all.len(), w.len());
        all
    }
    fn read(r: &Self::R) -> Result<Contents, CollectionError> {
        let all = r.enter().iter()?;
        Ok(all
            .into_iter()
            .map(|(k, v)| (text_unkey(&k), text_unvalue(v)))
            .collect())
    }
    /// A node (two lines: three 24-byte words) and two strings per entry.
    fn live_bound(w: &mut Self::W, contents: &Contents) -> usize {
        let node = w.writer().object_bytes(72).unwrap();
        contents.len() * (node + text_strings_bytes(w.writer()))
    }
}

struct TextMap;

impl Subject for TextMap {
    type W = MapWriteHandle<String, Vec<u8>, Mortal, NodeHeap>;
    type R = MapReadHandle<String, Vec<u8>, Mortal>;

    fn script() -> Vec<Step> {
        script(16, 15)
    }
    fn open_reader(region: &Region, rt: &Rt) -> Result<Self::R, CollectionError> {
        BiHashMap::<String, Vec<u8>>::named(region, rt, "s")?.read_handle(rt)
    }
    fn take(region: &Region, rt: &Rt, writer: NodeWriter) -> Result<Self::W, CollectionError> {
        BiHashMap::<String, Vec<u8>>::named(region, rt, "s")?.take_writer(rt, writer)
    }
    fn insert(w: &mut Self::W, k: u64, v: u64) -> Result<Option<u64>, CollectionError> {
        Ok(w.insert(text_key(k), text_value(v))?.map(text_unvalue))
    }
    fn remove(w: &mut Self::W, k: u64) -> Result<Option<u64>, CollectionError> {
        Ok(w.remove(text_key(k).as_str())?.map(text_unvalue))
    }
    fn reclaim(w: &mut Self::W) -> Result<ReclaimReport, CollectionError> {
        w.reclaim()
    }
    fn writer(w: &mut Self::W) -> &NodeWriter {
        w.writer()
    }
    fn contents(w: &mut Self::W) -> Contents {
        let all: Contents = w
            .entries()
            .expect("the writer reads its map")
            .into_iter()
            .map(|(k, v)| (text_unkey(&k), text_unvalue(v)))
            .collect();
        assert_eq!(all.len(), w.len(), "a key twice");
        all
    }
    fn read(r: &Self::R) -> Result<Contents, CollectionError> {
        let view = r.enter();
        let mut all = Contents::new();
        for kv in view.iter() {
            let (k, v) = kv?;
            let k = text_unkey(&k);
            assert!(all.insert(k, text_unvalue(v)).is_none(), "key {k} twice");
        }
        Ok(all)
    }
    /// The array (header and buckets, in its size class's slot), and per entry at most
    /// one overflow line and its two strings.
    fn live_bound(w: &mut Self::W, contents: &Contents) -> usize {
        // Header, buckets, counters and tag lines (28 buckets' tags a line here).
        let buckets = w.capacity();
        let lines = buckets + 2 + buckets.div_ceil(28);
        let writer = w.writer();
        let line = writer.lines_bytes(1, 8).unwrap();
        let journal = writer.lines_bytes(2, 56).unwrap();
        let array = class_of(lines).map_or(lines, |c| CLASS_LINES[c]) * line + journal;
        array + contents.len() * (line + text_strings_bytes(writer))
    }
}

/// An emulated machine of two nodes, whose node 1 runs a process with a reader of "s".
struct Machine<S: Subject> {
    /// The region and the emulator. Its own runtimes are dropped (releasing their
    /// claims): this test's are over [`Mortal`] views.
    setup: Setup,
    node1: Rt,
    reader: S::R,
}

impl<S: Subject> Machine<S> {
    fn new() -> Self {
        let mut setup = Setup::with(
            RegionConfig::new(1 << 18).with_nodes(2),
            |c| {
                c.seed(7)
                    .eviction_rate(0.01)
                    .adjacent_prefetch_rate(0.2)
                    .late_writebacks(0.05)
            },
            config(),
        );
        setup.nodes.clear();
        let node1 = runtime(&setup, 1, None, config()).unwrap();
        let reader = S::open_reader(&setup.region, &node1).unwrap();
        Machine {
            setup,
            node1,
            reader,
        }
    }

    fn pass1(&self) {
        self.node1.quiesce().expect("node 1 passes");
    }

    fn read(&self, at: u64, when: &str) -> Contents {
        S::read(&self.reader).unwrap_or_else(|e| panic!("death at {at}: node 1 reads {when}: {e}"))
    }
}

/// Node 0's writer with a fresh heap over node 0's arena, a pass on both nodes (a new
/// writer counts its rings' old entries as just written until then, and adopting appends
/// to the freed ring), and the structure's writer role.
fn take<S: Subject>(m: &Machine<S>, rt: &Rt) -> Result<S::W, CollectionError> {
    let line = m.setup.region.layout().line_size();
    let heap = NodeHeap::new(m.setup.arena(0), line).expect("node 0's heap");
    let writer = rt.writer(heap)?;
    rt.quiesce()?;
    m.pass1();
    S::take(&m.setup.region, rt, writer)
}

/// The process on node 0: what it has made so far.
struct Process<S: Subject> {
    rt: Option<Rt>,
    w: Option<S::W>,
}

/// What a run of the script up to the death left.
struct Outcome<S: Subject> {
    process: Process<S>,
    /// The contents the acknowledged writes make.
    acked: Contents,
    /// The step whose call failed (none if the host died after the script).
    in_flight: Option<Step>,
    /// Blocks the writer had retired after each step that returned.
    retired: Vec<usize>,
    /// What the script's reclaims gave back.
    reclaimed: Vec<ReclaimReport>,
}

impl<S: Subject> Outcome<S> {
    /// Runs `step` in the process; returns the value an insert or removal replaced.
    fn step(
        &mut self,
        m: &Machine<S>,
        fuse: &Arc<Fuse>,
        step: Step,
    ) -> Result<Option<u64>, CollectionError> {
        let p = &mut self.process;
        match step {
            Step::Start => {
                p.rt = Some(runtime(&m.setup, 0, Some(fuse.clone()), config())?);
                Ok(None)
            }
            Step::Take => {
                p.w = Some(take(m, p.rt.as_ref().expect("started"))?);
                Ok(None)
            }
            Step::Insert(k, v) => S::insert(p.w.as_mut().expect("taken"), k, v),
            Step::Remove(k) => S::remove(p.w.as_mut().expect("taken"), k),
            Step::Pass => {
                p.rt.as_ref().expect("started").quiesce()?;
                m.pass1();
                Ok(None)
            }
            Step::Reclaim => {
                let report = S::reclaim(p.w.as_mut().expect("taken"))?;
                self.reclaimed.push(report);
                Ok(None)
            }
        }
    }
}

/// Runs the script with a host that dies at operation `at` (0: never), checking after
/// every step that returns that what it returned agrees with the model and that node 1
/// reads one of the versions published so far.
fn run_script<S: Subject>(m: &Machine<S>, fuse: &Arc<Fuse>, at: u64) -> Outcome<S> {
    let mut out = Outcome {
        process: Process { rt: None, w: None },
        acked: Contents::new(),
        in_flight: None,
        retired: Vec::new(),
        reclaimed: Vec::new(),
    };
    let mut published = vec![Contents::new()];
    for (i, step) in S::script().into_iter().enumerate() {
        let r = catch_unwind(AssertUnwindSafe(|| out.step(m, fuse, step)));
        let r = r.unwrap_or_else(|panic| {
            eprintln!("death at operation {at}: step {i} ({step:?}) panicked");
            resume_unwind(panic)
        });
        // A host that died during the call never returned from it, even where the
        // operation it died at reports nothing (a fence): the call was in flight.
        let r = r.and_then(|old| match fuse.is_dead() {
            true => Err(CollectionError::Runtime(DEAD.into())),
            false => Ok(old),
        });
        match r {
            Ok(old) => {
                if let Step::Insert(k, _) | Step::Remove(k) = step {
                    let had = out.acked.get(&k).copied();
                    assert_eq!(old, had, "death at {at}: step {i} ({step:?}) returned");
                }
                apply(&mut out.acked, step);
                if published.last() != Some(&out.acked) {
                    published.push(out.acked.clone());
                }
                let w = out.process.w.as_mut();
                out.retired
                    .push(w.map_or(0, |w| S::writer(w).retired_blocks()));
            }
            Err(e) => {
                assert!(
                    fuse.is_dead(),
                    "death at {at}: step {i} ({step:?}) failed while the host lived: {e}"
                );
                out.in_flight = Some(step);
                break;
            }
        }
        let seen = m.read(at, &format!("after step {i}"));
        assert!(
            published.contains(&seen),
            "death at {at}: after step {i} ({step:?}) node 1 reads {seen:?}, never published"
        );
    }
    out
}

/// Runs the script with death at operation `at` (past the script's end: the host dies
/// right after its last step), restarts node 0, adopts and checks. Returns the number of
/// operations the script performed (the fatal one included).
fn die_at<S: Subject>(at: u64) -> u64 {
    let m = Machine::<S>::new();
    let fuse = Fuse::dying_at(at);
    let out = run_script(&m, &fuse, at);
    let ops = fuse.count();
    if !fuse.is_dead() {
        fuse.kill(&m.setup.emu.node(0));
    }
    // The dead process's handles are dropped rather than forgotten (forgetting would leak
    // a machine per run): its view is dead, so none of their destructors reaches memory,
    // as when a killed process runs none.
    drop(out.process);
    // Node 0's lease runs out while node 1 keeps passing.
    for _ in 0..4 {
        m.setup.emu.advance(LEASE / 2);
        m.pass1();
    }
    let rt = runtime(&m.setup, 0, None, config())
        .unwrap_or_else(|e| panic!("death at {at}: a new process cannot start: {e}"));
    let mut w = take(&m, &rt).unwrap_or_else(|e| panic!("death at {at}: adoption fails: {e}"));
    let got = S::contents(&mut w);
    let mut whole = out.acked.clone();
    if let Some(step) = out.in_flight {
        apply(&mut whole, step);
    }
    assert!(
        got == out.acked || got == whole,
        "death at {at} in {:?}: adopted {got:?}, acknowledged {:?}",
        out.in_flight,
        out.acked
    );
    // Before its next pass node 1 may still read the version before the write in flight
    // (adopting is publishing, and a publication reaches other nodes at their next
    // pass); after it, exactly the adopted one.
    let early = m.read(at, "right after the adoption");
    assert!(
        early == out.acked || early == whole,
        "death at {at}: right after the adoption node 1 reads {early:?}, never published"
    );
    m.pass1();
    let seen = m.read(at, "after the adoption and a pass");
    assert_eq!(
        seen, got,
        "death at {at} in {:?}: after a pass node 1 reads other contents than the \
         adopted ones",
        out.in_flight
    );

    // Nothing the dead writer left is held back after two passes and a reclaim.
    for _ in 0..2 {
        rt.quiesce().unwrap();
        m.pass1();
    }
    S::reclaim(&mut w).unwrap();
    let bound = S::live_bound(&mut w, &got);
    let writer = S::writer(&mut w);
    assert_eq!(
        (writer.retired_bytes(), writer.deferred()),
        (0, 0),
        "death at {at}: memory still held back after the grace period"
    );
    let live = writer.heap().stats().live;
    assert!(
        live <= bound,
        "death at {at}: {live} bytes live for {} entries (bound {bound})",
        got.len()
    );

    // The new writer goes on, in the memory given back.
    let mut model = got;
    for k in 0..24u64 {
        let step = match k % 3 {
            0 => Step::Remove(k),
            _ => Step::Insert(k, 1000 + k),
        };
        let old = match step {
            Step::Insert(k, v) => S::insert(&mut w, k, v),
            Step::Remove(k) => S::remove(&mut w, k),
            _ => unreachable!(),
        };
        let old = old.unwrap_or_else(|e| panic!("death at {at}: the new writer's {step:?}: {e}"));
        if let Step::Insert(k, _) | Step::Remove(k) = step {
            assert_eq!(old, model.get(&k).copied(), "death at {at}: {step:?}");
        }
        apply(&mut model, step);
    }
    rt.quiesce().unwrap();
    m.pass1();
    assert_eq!(S::contents(&mut w), model, "death at {at}: the new writer");
    assert_eq!(
        m.read(at, "after the new writer's updates"),
        model,
        "death at {at}: node 1 after the new writer's updates"
    );
    for n in 0..2 {
        assert_eq!(
            m.setup.emu.stats(n).reuse_hazards,
            0,
            "death at {at}: node {n} read reused memory"
        );
    }
    ops
}

/// The script without a death: its number of operations, after checking that it does
/// what it is for (retires, gives memory back, allocates in it).
fn count<S: Subject>(bag_before_reclaim: bool) -> u64 {
    let m = Machine::<S>::new();
    let fuse = Fuse::dying_at(0);
    let mut out = run_script(&m, &fuse, 0);
    assert_eq!(out.in_flight, None);
    if bag_before_reclaim {
        // The structures retire only through the writer's bag: blocks retired before
        // the first reclaim are a bag that filled up and was retired.
        let first = S::script().iter().position(|s| *s == Step::Reclaim);
        assert!(
            out.retired[..first.unwrap()].iter().any(|&r| r > 0),
            "no bag was retired before the first reclaim"
        );
    }
    assert!(
        out.reclaimed.iter().any(|r| r.freed_blocks > 0),
        "the script's reclaims give nothing back: {:?}",
        out.reclaimed
    );
    let heap = S::writer(out.process.w.as_mut().unwrap()).heap().stats();
    assert!(heap.reuses > 0, "the script allocates in memory given back");
    let by_kind: Vec<String> = KINDS
        .iter()
        .zip(&fuse.done)
        .map(|(k, n)| format!("{k:?} {}", n.load(Ordering::Relaxed)))
        .collect();
    eprintln!(
        "{} steps, {} operations ({}); {heap:?}",
        S::script().len(),
        fuse.count(),
        by_kind.join(", ")
    );
    fuse.count()
}

/// Death at every operation of the script and right after it: every one, no stride
/// (4,458 runs for the tree, about 19 s in a debug build; 2,813 for the map, about 15 s).
fn sweep<S: Subject>(bag_before_reclaim: bool) {
    let ops = count::<S>(bag_before_reclaim);
    let started = Instant::now();
    for at in 1..=ops + 1 {
        let seen = die_at::<S>(at);
        assert_eq!(seen, at.min(ops), "the script runs the same way every time");
    }
    eprintln!("{} deaths in {:?}", ops + 1, started.elapsed());
}

#[test]
fn a_tree_survives_its_writers_host_dying_at_every_operation() {
    sweep::<Tree>(true);
}

#[test]
fn a_map_survives_its_writers_host_dying_at_every_operation() {
    sweep::<Map>(false);
}

#[test]
fn a_tree_of_strings_survives_its_writers_host_dying_at_every_operation() {
    sweep::<TextTree>(true);
}

#[test]
fn a_map_of_strings_survives_its_writers_host_dying_at_every_operation() {
    sweep::<TextMap>(false);
}
