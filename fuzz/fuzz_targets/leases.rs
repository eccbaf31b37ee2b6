//! Drives node claims, writer roles and the leases behind them (`bi_core::runtime`'s
//! `claim`, `role` and `lease`) on an emulated machine of two or three nodes, with
//! processes that start, pass, write, stall, exit cleanly or die, and checks that no node
//! and no structure ever has two live owners.
//!
//! The input chooses the emulator seed, the rates of evictions, prefetches and late
//! write-backs, a clock skew of up to 31 ticks per node (the runtime is told twice that),
//! the node count, then up to a couple of hundred steps: start a process on a node
//! (another runtime for a node a process may still run), a clean exit, a death (the
//! process's handles are abandoned, its claim and roles stay in the region), a pass, a
//! clock advance (up to several node leases: every process that does not pass meanwhile
//! stalls), taking the writer role of one of two structures, giving it up, and a write
//! under a role (an allocation and a publication into the structure's slot).
//!
//! The model knows which process claimed each node last and which took each role last;
//! the node records in memory give the heartbeats. Rules:
//!
//! - a start is refused (`NodeTaken`) exactly when the node's claimant is alive by the
//!   documented rule (heartbeat within the node lease, allowing for the skew bound; a
//!   heartbeat the call's own ticks put on the boundary may go either way), and a
//!   displaced process's next pass fails with `NodeTaken`; every other pass succeeds;
//! - taking a role is refused (`WriterAlive`, naming the holder's node) exactly when its
//!   holder is this process or a process that still claims its node and is alive; a
//!   clean exit or a given-up role frees it at once;
//! - a write by a process whose role was taken meanwhile, or whose node was taken, never
//!   publishes: it fails with `RoleLost` (naming both nodes) or `NodeTaken`; a write by
//!   the current holder publishes (or finds its log ring full); after `RoleLost` the
//!   write handle keeps failing;
//! - memory always names the model's claimant and role holder (or nobody).
//!
//! Any violation panics; errors other than the ones named are violations too.
//!
//! `regressions/leases/` keeps the inputs of two gaps this target found in the writer's
//! lease, since closed: a pass that refreshed the heartbeat after a lapse let the writer
//! publish without re-reading its roles, and a handle told `RoleLost` published again.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use bi_core::heap::BumpHeap;
use bi_core::mem::{EmulatedNode, Emulator};
use bi_core::region::{Region, RegionConfig};
use bi_core::runtime::role::WRITER_RECORD_OFFSET;
use bi_core::runtime::{
    BiError, NodeRecord, NodeRuntime, Role, RuntimeConfig, Writer, WriterRecord,
};
use bi_fuzz::hardware::{self, Events, Skew};
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

const MAX_STEPS: usize = 200;
const MAX_PROCESSES: usize = 8;
/// Structures whose writer roles the processes contend for.
const STRUCTURES: usize = 2;
/// The node lease, in ticks.
const LEASE: u64 = 1 << 16;
/// What a clock advance step counts in.
const ADVANCE_UNIT: u64 = LEASE / 16;
/// The pool lock is never contended here (one thread, no guard outlives a step).
const WAIT: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct Input {
    events: Events,
    skew: Skew,
    nodes: bool,
    steps: Vec<Step>,
}

/// The machine's parameters, then steps until the data runs out.
impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Input {
            events: u.arbitrary()?,
            skew: u.arbitrary()?,
            nodes: u.arbitrary()?,
            steps: bi_fuzz::steps(u, MAX_STEPS)?,
        })
    }
}

/// Processes are chosen among the living by index (modulo their number).
#[derive(Arbitrary, Clone, Copy, Debug)]
enum Step {
    /// A new process for this node.
    Start(u8),
    /// A process exits cleanly: its roles, writer and runtime are dropped.
    Exit(u8),
    /// A process dies: nothing of it runs again, and nothing is cleared.
    Die(u8),
    Pass(u8),
    /// Every living process passes.
    PassAll,
    /// Time goes on (in sixteenths of a lease).
    Advance(u8),
    /// A process takes the writer role of a structure.
    TakeRole(u8, u8),
    /// A process gives a role up.
    DropRole(u8, u8),
    /// A process writes a structure whose role it holds (or held).
    Write(u8, u8),
}

struct HeldRole {
    structure: usize,
    role: Role<EmulatedNode>,
    /// Another process took the role since this one did.
    taken: bool,
}

struct Process {
    id: usize,
    node: usize,
    rt: NodeRuntime<EmulatedNode>,
    writer: Option<Writer<EmulatedNode, BumpHeap>>,
    roles: Vec<HeldRole>,
    /// Another process claimed the node since this one did.
    displaced: bool,
    /// A write of this process's handle failed with `RoleLost`.
    told_lost: bool,
    /// The taker the first `RoleLost` named.
    lost_to: Option<Option<usize>>,
}

impl Process {
    fn lost_a_role(&self) -> bool {
        self.roles.iter().any(|r| r.taken)
    }
}

struct Machine {
    region: Region,
    emu: Emulator,
    config: RuntimeConfig,
    skew_bound: u64,
    /// The process that claimed each node last, unless it exited.
    claimant: Vec<Option<usize>>,
    /// The process that took each role last, unless it gave the role up.
    role_holder: [Option<usize>; STRUCTURES],
    /// The node of every process ever started, by id.
    node_of: Vec<usize>,
}

/// The claim rule of `runtime::claim`: a node record naming `holder` with `heartbeat` is
/// alive at `now` (the judge's clock) if its heartbeat is within the lease, allowing for
/// the skew bound, and not further ahead than a lease beyond it.
fn live(holder: u64, heartbeat: u64, now: u64, skew: u64) -> bool {
    holder != 0
        && heartbeat.saturating_add(LEASE) >= now.saturating_sub(skew)
        && heartbeat <= now.saturating_add(skew).saturating_add(LEASE)
}

/// Whether a judge whose clock read somewhere in `before ..= after` must find the record
/// alive (`Some(true)`), must find it dead (`Some(false)`), or may find either.
fn judged(r: &NodeRecord, before: u64, after: u64, skew: u64) -> Option<bool> {
    // Alive for a whole interval of clock readings: the two ends decide.
    let (a, b) = (
        live(r.holder, r.heartbeat, before, skew),
        live(r.holder, r.heartbeat, after, skew),
    );
    (a == b).then_some(a)
}

impl Machine {
    fn slot(&self, structure: usize) -> usize {
        self.region
            .layout()
            .root_entry(structure)
            .expect("root entry")
            .offset
    }

    fn node_record(&self, node: usize) -> NodeRecord {
        let at = self.region.layout().node_record(node).expect("node").offset;
        self.emu.peek(at).expect("node record")
    }

    fn writer_record(&self, structure: usize) -> WriterRecord {
        self.emu
            .peek(self.slot(structure) + WRITER_RECORD_OFFSET)
            .expect("writer record")
    }

    fn start(&self, node: usize) -> Result<NodeRuntime<EmulatedNode>, BiError> {
        NodeRuntime::emulated(
            self.emu.node(node),
            *self.region.layout(),
            self.config.clone(),
        )
    }

    /// Memory names the model's claimants and role holders, or nobody.
    fn check_records(&self, living: &[Process]) {
        for (node, claimant) in self.claimant.iter().enumerate() {
            let r = self.node_record(node);
            assert_eq!(
                r.holder == 0,
                claimant.is_none(),
                "node {node}: record {r:?}, claimant {claimant:?}"
            );
        }
        for p in living {
            let claims = self.claimant[p.node] == Some(p.id);
            assert_eq!(p.displaced, !claims, "process {}", p.id);
            assert_eq!(
                p.rt.holds_claim().expect("holds_claim"),
                claims,
                "process {} on node {}",
                p.id,
                p.node
            );
            for r in &p.roles {
                assert_eq!(
                    r.role.is_held().expect("is_held"),
                    self.role_holder[r.structure] == Some(p.id),
                    "process {}, structure {}",
                    p.id,
                    r.structure
                );
            }
        }
        for (s, holder) in self.role_holder.iter().enumerate() {
            let r = self.writer_record(s);
            assert_eq!(
                r.holder == 0,
                holder.is_none(),
                "structure {s}: record {r:?}, holder {holder:?}"
            );
            if let Some(h) = holder {
                assert_eq!(r.node, self.node_of[*h] as u64 + 1, "structure {s}");
            }
        }
    }
}

fn pick(living: &[Process], p: u8) -> Option<usize> {
    (!living.is_empty()).then(|| usize::from(p) % living.len())
}

fn run(input: &Input) {
    let nodes = 2 + usize::from(input.nodes);
    let (region, emu) = hardware::machine(
        RegionConfig::new(1 << 18)
            .with_log_ring_entries(16)
            .with_root_entries(STRUCTURES as u32),
        nodes,
        &input.events,
        |c| c.clock_skew(input.skew.ticks()).cache_lines(256),
    );
    let layout = *region.layout();
    let mut m = Machine {
        region,
        emu,
        config: RuntimeConfig::default()
            .node_lease(LEASE)
            .reader_lease(LEASE)
            .skew(input.skew.bound())
            .log_full_timeout(Duration::ZERO),
        skew_bound: input.skew.bound(),
        claimant: vec![None; nodes],
        role_holder: [None; STRUCTURES],
        node_of: Vec::new(),
    };
    let heap = layout.heap();
    let per_node = heap.len / nodes / layout.line_size().get() * layout.line_size().get();
    let arena = |node: usize| heap.offset + node * per_node..heap.offset + (node + 1) * per_node;

    let mut living: Vec<Process> = Vec::new();
    // Processes that died: never used again, dropped at the end.
    let mut dead: Vec<Process> = Vec::new();
    let mut value = 0u64;

    // One process per node to begin with.
    let starts = (0..nodes as u8).map(Step::Start);
    let steps = starts.chain(input.steps.iter().take(MAX_STEPS).copied());
    for step in steps {
        match step {
            Step::Start(n) => {
                let node = usize::from(n) % nodes;
                if m.node_of.len() >= MAX_PROCESSES {
                    continue;
                }
                let record = m.node_record(node);
                let clock = m.emu.node(node);
                let before = clock.local_time();
                let got = m.start(node);
                let after = clock.local_time();
                let must = judged(&record, before, after, m.skew_bound);
                match got {
                    Ok(rt) => {
                        assert_ne!(
                            must,
                            Some(true),
                            "node {node} started while its claimant lives: {record:?}, clock {before}..{after}"
                        );
                        let id = m.node_of.len();
                        m.node_of.push(node);
                        for p in living.iter_mut().filter(|p| p.node == node) {
                            p.displaced = true;
                        }
                        m.claimant[node] = Some(id);
                        living.push(Process {
                            id,
                            node,
                            rt,
                            writer: None,
                            roles: Vec::new(),
                            displaced: false,
                            told_lost: false,
                            lost_to: None,
                        });
                    }
                    Err(BiError::NodeTaken { node: n }) => {
                        assert_eq!(n, node);
                        assert_ne!(
                            must,
                            Some(false),
                            "node {node} refused though its claimant is gone: {record:?}, clock {before}..{after}"
                        );
                    }
                    Err(e) => panic!("start on node {node}: {e}"),
                }
            }
            Step::Exit(p) => {
                let Some(i) = pick(&living, p) else { continue };
                let gone = living.remove(i);
                for held in &gone.roles {
                    if m.role_holder[held.structure] == Some(gone.id) {
                        m.role_holder[held.structure] = None;
                    }
                }
                if m.claimant[gone.node] == Some(gone.id) {
                    m.claimant[gone.node] = None;
                }
                let node = gone.node;
                drop(gone);
                if m.claimant[node].is_none() {
                    let r = m.node_record(node);
                    assert_eq!(
                        (r.holder, r.heartbeat),
                        (0, 0),
                        "node {node} after a clean exit"
                    );
                }
            }
            Step::Die(p) => {
                let Some(i) = pick(&living, p) else { continue };
                dead.push(living.remove(i));
            }
            Step::Pass(p) => {
                let Some(i) = pick(&living, p) else { continue };
                pass(&living[i]);
            }
            Step::PassAll => living.iter().for_each(pass),
            Step::Advance(t) => m.emu.advance(u64::from(t) * ADVANCE_UNIT),
            Step::TakeRole(p, s) => {
                let Some(i) = pick(&living, p) else { continue };
                let structure = usize::from(s) % STRUCTURES;
                let taker = &living[i];
                if taker.roles.iter().any(|r| r.structure == structure) {
                    // A process with a handle for the role does not take it again; while
                    // the role is still its own, asking is refused.
                    if m.role_holder[structure] == Some(taker.id) {
                        let got = taker.rt.take_writer_role(m.slot(structure), WAIT);
                        assert!(
                            matches!(got, Err(BiError::WriterAlive { node }) if node == taker.node),
                            "a process took a role it holds: {got:?}"
                        );
                    }
                    continue;
                }
                let holder = m.role_holder[structure];
                let clock = m.emu.node(taker.node);
                let holder_record = holder.map(|h| m.node_record(m.node_of[h]));
                let before = clock.local_time();
                let got = taker.rt.take_writer_role(m.slot(structure), WAIT);
                let after = clock.local_time();
                let must_refuse = match holder {
                    None => Some(false),
                    Some(h) if m.claimant[m.node_of[h]] != Some(h) => Some(false),
                    Some(_) => judged(&holder_record.unwrap(), before, after, m.skew_bound),
                };
                match got {
                    Ok(role) => {
                        assert_ne!(
                            must_refuse,
                            Some(true),
                            "structure {structure} taken by process {} from the live process {holder:?}",
                            taker.id
                        );
                        if let Some(h) = holder {
                            let previous =
                                living.iter_mut().chain(dead.iter_mut()).find(|q| q.id == h);
                            if let Some(q) = previous {
                                for r in q.roles.iter_mut().filter(|r| r.structure == structure) {
                                    r.taken = true;
                                }
                            }
                        }
                        m.role_holder[structure] = Some(living[i].id);
                        living[i].roles.push(HeldRole {
                            structure,
                            role,
                            taken: false,
                        });
                    }
                    Err(BiError::WriterAlive { node }) => {
                        assert_ne!(
                            must_refuse,
                            Some(false),
                            "structure {structure} refused to process {} though its writer {holder:?} is gone",
                            taker.id
                        );
                        assert_eq!(Some(node), holder.map(|h| m.node_of[h]));
                    }
                    Err(e) => panic!("take role {structure}: {e}"),
                }
            }
            Step::DropRole(p, s) => {
                let Some(i) = pick(&living, p) else { continue };
                let structure = usize::from(s) % STRUCTURES;
                let proc = &mut living[i];
                let Some(at) = proc.roles.iter().position(|r| r.structure == structure) else {
                    continue;
                };
                proc.roles.remove(at);
                if !proc.lost_a_role() {
                    // Writes fail after `RoleLost` until the lost roles' handles are gone.
                    proc.told_lost = false;
                    proc.lost_to = None;
                }
                if m.role_holder[structure] == Some(proc.id) {
                    m.role_holder[structure] = None;
                }
            }
            Step::Write(p, s) => {
                let Some(i) = pick(&living, p) else { continue };
                let structure = usize::from(s) % STRUCTURES;
                let slot = m.slot(structure);
                let proc = &mut living[i];
                let Some(held) = proc.roles.iter().find(|r| r.structure == structure) else {
                    continue;
                };
                let taken_here = held.taken;
                let lost_any = proc.lost_a_role();
                if proc.writer.is_none() {
                    let heap = BumpHeap::new(arena(proc.node), layout.line_size()).expect("heap");
                    match proc.rt.writer(heap) {
                        Ok(w) => proc.writer = Some(w),
                        Err(BiError::NodeTaken { .. }) if proc.displaced => continue,
                        Err(e) => panic!("writer of process {}: {e}", proc.id),
                    }
                }
                let w = proc.writer.as_mut().unwrap();
                value += 1;
                let got = w
                    .alloc_sealed(value)
                    .and_then(|link| w.try_publish_link(slot, link));
                match got {
                    Ok(_) => {
                        assert!(
                            !proc.told_lost,
                            "process {} published after its handle was told RoleLost",
                            proc.id
                        );
                        assert!(
                            !taken_here,
                            "process {} on node {} published into structure {structure} after its role was taken",
                            proc.id, proc.node
                        );
                        assert!(
                            !proc.displaced,
                            "process {} published after its node {} was taken",
                            proc.id, proc.node
                        );
                    }
                    Err(BiError::RoleLost { node, taker }) => {
                        assert!(lost_any, "process {} told RoleLost, lost no role", proc.id);
                        assert_eq!(node, proc.node);
                        // The node the record of a lost role names now.
                        let takers: Vec<usize> = proc
                            .roles
                            .iter()
                            .filter(|r| r.taken)
                            .map(|r| m.writer_record(r.structure).node as usize - 1)
                            .collect();
                        // A role once found lost stays lost with the taker found then,
                        // though the role may have moved on since.
                        match proc.lost_to {
                            Some(first) => assert_eq!(taker, first, "RoleLost changed its taker"),
                            None => assert!(
                                taker.is_some_and(|t| takers.contains(&t)),
                                "RoleLost names {taker:?}, the roles went to nodes {takers:?}"
                            ),
                        }
                        proc.told_lost = true;
                        proc.lost_to = Some(taker);
                    }
                    Err(BiError::NodeTaken { node }) => {
                        assert_eq!(node, proc.node);
                        assert!(proc.displaced, "process {} told NodeTaken", proc.id);
                    }
                    Err(BiError::LogFull { .. }) => {}
                    Err(e) => panic!("write by process {}: {e}", proc.id),
                }
            }
        }
        m.check_records(&living);
    }
    drop(living);
    drop(dead);
}

/// A pass: refused exactly when another process claimed the node since.
fn pass(p: &Process) {
    match p.rt.quiesce() {
        Ok(_) => assert!(
            !p.displaced,
            "process {} passed on a node it no longer claims",
            p.id
        ),
        Err(BiError::NodeTaken { node }) => {
            assert_eq!(node, p.node);
            assert!(
                p.displaced,
                "process {} told NodeTaken by its own pass",
                p.id
            );
        }
        Err(e) => panic!("pass of process {}: {e}", p.id),
    }
}

fuzz_target!(|input: Input| run(&input));
