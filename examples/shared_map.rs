//! One writer process and several reader processes share a `BiHashMap` through a region
//! file, each process acting as one node. Readers measure how stale what they read is;
//! midway, one reader is killed with SIGKILL and the writer checks that reclamation
//! resumes once the dead node's lease has expired.
//!
//! ```sh
//! cargo run --release --example shared_map
//! cargo run --release --example shared_map -- --json --readers 3 --millis 3000
//! ```
//!
//! Each process acts as one node of the region (node 0 writes, nodes 1.. read) and runs
//! its own background quiescence pass. The writer records when each heartbeat version
//! became visible and readers record which versions they saw when, in files next to the
//! region, from which the parent computes staleness: the time a reader kept reading a
//! value after its successor had been published. (On a coherent machine this is zero;
//! the bound is what the protocol guarantees where caches are not coherent.)
//!
//! After the main run the writer's own process is killed with SIGKILL five times while
//! inserting, and each time a new process for node 0 adopts the map (found by name: it
//! is a named, typed map with one writer); halfway, a process of another node tries to
//! become a second writer and must be refused. This process then checks, as a node of
//! its own, that every key a killed writer acknowledged is in the map.
//!
//! With `BI_EMULATE=<seed>` every process runs its node over the non-coherence emulator
//! ([`bi::Emulation`]): its cache is its own, memory is the region file, and the
//! emulator's oracle, shared through a file beside the region, counts stale reads, reuse
//! hazards and lost writes across the processes; each process that is not killed
//! reports its counts, and the run fails if a write-back overwrote newer bytes or a node
//! loaded reused memory more often than its reads were rejected by their stamp checks
//! (the protocol lets a prefetched line of reused memory be loaded, never accepted).
//!
//! With `--json` the run prints one JSON object:
//! `{"readers": n, "writes": n, "reads": n, "lost_writes": 0, "max_staleness_us": x,
//! "bound_us": y, "longest_pass_span_us": z, "killed_reader_recovered": true,
//! "writer_restarts": 5, "lost_acknowledged": 0, "second_writer_refused": true,
//! "emulated": false}` (with `BI_EMULATE`, `"emulated": true` and an `"oracle"` object
//! of the summed counts: `stale_reads`, `max_staleness_ns`, `reuse_hazards`,
//! `reuse_accepted`, `lost_writes`). A reader node's staleness is judged against the
//! bound (two periods plus clock skew) or, if its pass thread was kept from running on
//! time, the longest span of two of its passes plus the skew, whichever is larger. The
//! process exits with status 1 if a write was lost, staleness exceeded that, reclamation
//! did not resume, an acknowledged write was lost or a second writer was not refused.

use bi::Emulation;
use bi::alloc::NodeHeap;
use bi::collections::CollectionError;
use bi::collections::{ApplyBatch, BiHashMap, Op};
use bi::core::mem::{EmulatedNode, Hardware, MemView};
use bi::core::region::{Region, RegionConfig};
use bi::core::runtime::{BiError, Clock, NodeRuntime, RuntimeConfig, TickClock};
use clap::{Parser, ValueEnum};
use std::collections::BTreeMap;
use std::error::Error;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The map's name in the region.
const ROOT: &str = "shared_map";
/// Keys the writer updates round-robin; key 0 is the writer's heartbeat.
const KEYS: u64 = 4096;
/// A value: the version written, a second word, and a payload that makes the record too
/// large to sit in a bucket line (64 bytes with the key): each one lives in its own
/// object behind a link, so every update retires the old one and reclamation has work.
type Value = [u64; 8];

fn value(first: u64, second: u64) -> Value {
    let mut v = [0; 8];
    v[0] = first;
    v[1] = second;
    v
}
/// Key under which the writer publishes how many rounds it wrote, once it is done.
const DONE: u64 = u64::MAX;

/// Share a hash map between processes through a region file.
#[derive(Parser, Debug, Clone)]
#[command(version, about)]
struct Args {
    /// Print one JSON object instead of a report.
    #[arg(long)]
    json: bool,
    /// Reader processes (one is killed midway; at least 2).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=14))]
    readers: u32,
    /// How long the writer writes, in milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(200..=600_000))]
    millis: u64,
    /// Background quiescence period of every node, in microseconds.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(50..=1_000_000))]
    period_us: u64,
    /// Region file (a temporary file by default).
    #[arg(long)]
    region: Option<PathBuf>,
    /// Internal: the role of a child process.
    #[arg(long, value_enum, hide = true)]
    role: Option<Role>,
    /// Internal: the node a child process runs as.
    #[arg(long, hide = true, default_value_t = 0)]
    node: usize,
    /// Internal: the first key a restarted writer inserts (past its predecessors').
    #[arg(long, hide = true, default_value_t = 0)]
    start: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Role {
    Writer,
    Reader,
    /// A later writer: adopts the map and inserts acknowledged keys until killed.
    Restart,
    /// Tries to become a second writer while one is alive.
    Second,
}

fn main() {
    let args = Args::parse();
    let result = match Emulation::from_env() {
        Ok(Some(_)) => run::<EmulatedNode>(&args),
        Ok(None) => run::<Hardware>(&args),
        Err(e) => Err(e.into()),
    };
    if let Err(e) = result {
        eprintln!("shared_map: {e}");
        std::process::exit(1);
    }
}

fn run<M: NodeView>(args: &Args) -> Result<(), Box<dyn Error>> {
    match args.role {
        Some(Role::Writer) => writer::<M>(args),
        Some(Role::Reader) => reader::<M>(args),
        Some(Role::Restart) => restarted_writer::<M>(args),
        Some(Role::Second) => second_writer::<M>(args),
        None => parent::<M>(args),
    }
}

/// How a process's node sees the region: the hardware, or the emulator when
/// `BI_EMULATE` asks for it.
trait NodeView: MemView + 'static {
    fn of(region: &Region, node: usize) -> Result<Self, Box<dyn Error>>;
    /// The emulator oracle's counts for this node, as report pairs (none on hardware).
    fn oracle(&self) -> Vec<(&'static str, u64)>;
}

impl NodeView for Hardware {
    fn of(region: &Region, _node: usize) -> Result<Self, Box<dyn Error>> {
        Ok(region.hardware())
    }

    fn oracle(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

impl NodeView for EmulatedNode {
    fn of(region: &Region, node: usize) -> Result<Self, Box<dyn Error>> {
        let e = Emulation::from_env()?.ok_or("BI_EMULATE was unset")?;
        Ok(region.emulated(node, e.machine())?)
    }

    fn oracle(&self) -> Vec<(&'static str, u64)> {
        let s = self.stats();
        vec![
            ("oracle_stale_reads", s.stale_reads),
            ("oracle_max_staleness_ns", s.max_staleness),
            ("oracle_reuse_hazards", s.reuse_hazards),
            ("oracle_lost_writes", s.lost_writes),
        ]
    }
}

/// The oracle counts of the processes that reported, summed (the staleness: the largest).
#[derive(Default)]
struct Oracle {
    reported: bool,
    stale_reads: u64,
    max_staleness_ns: u64,
    reuse_hazards: u64,
    /// Loads of reused memory beyond the reads that were rejected and retried (their
    /// stamps did not match), process by process: loads the protocol may have accepted.
    reuse_accepted: u64,
    lost_writes: u64,
}

impl Oracle {
    fn add(&mut self, r: &impl Fn(&str) -> Option<u64>) {
        if let Some(n) = r("oracle_stale_reads") {
            self.reported = true;
            self.stale_reads += n;
            self.max_staleness_ns = self
                .max_staleness_ns
                .max(r("oracle_max_staleness_ns").unwrap_or(0));
            let reused = r("oracle_reuse_hazards").unwrap_or(0);
            self.reuse_hazards += reused;
            self.reuse_accepted += reused.saturating_sub(r("oracle_rejected_reads").unwrap_or(0));
            self.lost_writes += r("oracle_lost_writes").unwrap_or(0);
        }
    }

    fn add_pairs(&mut self, pairs: &[(&'static str, u64)]) {
        self.add(&|k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| *v));
    }
}

/// `pairs`, then this node's oracle counts, as one report line.
/// This node's oracle counts (none on hardware) with the reads its runtime rejected: a
/// load of reused memory is caught when the read that made it fails its stamp check, so a
/// node's reuse hazards beyond its rejected reads are loads the protocol may have accepted.
fn oracle_of<M: NodeView>(rt: &NodeRuntime<M>) -> Vec<(&'static str, u64)> {
    let mut pairs = rt.view().oracle();
    if !pairs.is_empty() {
        pairs.push(("oracle_rejected_reads", rt.mismatches()));
    }
    pairs
}

fn report_with_oracle<M: NodeView>(rt: &NodeRuntime<M>, pairs: &[(&str, u64)]) {
    let mut all = pairs.to_vec();
    all.extend(oracle_of(rt));
    report(&all);
}

fn runtime_config(period: Duration) -> RuntimeConfig {
    // Leases of 200 periods (at least 200 ms): long enough for a pass that invalidates the
    // whole heap on a busy machine, short enough that a killed node is excluded quickly.
    let lease = (period.as_nanos() as u64)
        .saturating_mul(200)
        .max(200_000_000);
    RuntimeConfig::default()
        .node_lease(lease)
        .reader_lease(lease)
        .log_full_timeout(Duration::from_secs(2))
}

fn node_runtime<M: NodeView>(
    region: &Region,
    node: usize,
    period: Duration,
) -> Result<NodeRuntime<M>, Box<dyn Error>> {
    let clock: Arc<dyn Clock> = Arc::new(TickClock::new());
    Ok(NodeRuntime::new(
        M::of(region, node)?,
        *region.layout(),
        node,
        runtime_config(period),
        clock,
    )?)
}

/// A line of `key=value` pairs a child prints for the parent.
fn report(pairs: &[(&str, u64)]) {
    let line: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("{}", line.join(" "));
    let _ = std::io::stdout().flush();
}

fn parse_report(line: &str) -> impl Fn(&str) -> Option<u64> + '_ {
    move |key| {
        line.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.parse().ok())
    }
}

fn spawn(args: &Args, region: &Path, role: &str, node: usize) -> Result<Child, Box<dyn Error>> {
    Ok(Command::new(std::env::current_exe()?)
        .arg("--role")
        .arg(role)
        .arg("--node")
        .arg(node.to_string())
        .arg("--region")
        .arg(region)
        .arg("--millis")
        .arg(args.millis.to_string())
        .arg("--period-us")
        .arg(args.period_us.to_string())
        .arg("--readers")
        .arg(args.readers.to_string())
        .arg("--start")
        .arg(args.start.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?)
}

/// Child processes that are killed if the parent returns early (an error), so no reader
/// is left spinning without its writer.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn last_line(child: Child) -> Result<String, Box<dyn Error>> {
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(format!("a child process failed: {}", out.status).into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().last().unwrap_or_default().to_owned())
}

/// The writer publishes heartbeat version `v` at writer time `t_v`; a reader that starts
/// a lookup at `t0` and sees version `v` read a value that had been superseded for
/// `t0 - t_{v+1}` (zero if `v` was still current). Writer and readers share one host
/// clock (CLOCK_MONOTONIC), so the times compare directly.
fn staleness(published: &[u64], seen: &[(u64, u64)]) -> u64 {
    seen.iter()
        .filter_map(|&(v, t0)| {
            let next = published.get(v as usize + 1)?;
            Some(t0.saturating_sub(*next))
        })
        .max()
        .unwrap_or(0)
}

fn read_pairs(path: &Path) -> Result<Vec<(u64, u64)>, Box<dyn Error>> {
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').ok_or("malformed record line")?;
            Ok((a.parse()?, b.parse()?))
        })
        .collect()
}

fn write_pairs(path: &Path, pairs: impl Iterator<Item = (u64, u64)>) -> Result<(), Box<dyn Error>> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for (a, b) in pairs {
        writeln!(out, "{a} {b}")?;
    }
    out.flush()?;
    Ok(())
}

fn parent<M: NodeView>(args: &Args) -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let path = args
        .region
        .clone()
        .unwrap_or_else(|| dir.path().join("shared_map.region"));
    let nodes = args.readers + 1;
    Region::create(
        &path,
        RegionConfig::new(32 << 20)
            .with_nodes(nodes)
            .with_log_ring_entries(1 << 14),
    )?;
    // kids.0[0] is the writer, kids.0[n] the reader of node n.
    let mut kids = Children(vec![spawn(args, &path, "writer", 0)?]);
    // Wait until the writer has created the map and named its root.
    let mut ready = String::new();
    BufReader::new(kids.0[0].stdout.as_mut().ok_or("no writer stdout")?).read_line(&mut ready)?;
    if !ready.starts_with("ready") {
        return Err(format!("writer did not start: {ready:?}").into());
    }
    for n in 1..nodes as usize {
        kids.0.push(spawn(args, &path, "reader", n)?);
    }
    // Every reader has run a pass and is reading: let the writer go.
    for r in &mut kids.0[1..] {
        let mut line = String::new();
        BufReader::new(r.stdout.as_mut().ok_or("no reader stdout")?).read_line(&mut line)?;
        if !line.starts_with("ready") {
            return Err(format!("a reader did not start: {line:?}").into());
        }
    }
    writeln!(kids.0[0].stdin.as_mut().ok_or("no writer stdin")?, "go")?;
    // Kill the reader of node 1 midway, inside or outside a read section.
    std::thread::sleep(Duration::from_millis(args.millis / 2));
    let mut victim = kids.0.remove(1);
    let killed_at = TickClock::new().now();
    let killed = victim.kill();
    victim.wait()?;
    killed?;

    let writer = kids.0.remove(0);
    let w = last_line(writer)?;
    let w = parse_report(&w);
    let mut oracle = Oracle::default();
    oracle.add(&w);
    let writes = w("writes").ok_or("writer report lacks writes")?;
    let bound = w("bound_ns").ok_or("writer report lacks bound")?;
    let skew = w("skew_ns").ok_or("writer report lacks skew")?;
    // (time, blocks freed) of every reclaim that ran with node 1 excluded.
    let excluded = read_pairs(&path.with_extension("excluded"))?;
    let after: Vec<_> = excluded.iter().filter(|(t, _)| *t > killed_at).collect();
    let excluded_at = after.first().map_or(0, |(t, _)| *t);
    let freed_after: u64 = after.iter().map(|(_, f)| f).sum();
    let early = excluded.len() - after.len();
    let published: Vec<u64> = read_pairs(&record_path(&path, 0))?
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    let (mut reads, mut lost, mut regressions, mut max_stale) = (0u64, 0u64, 0u64, 0u64);
    // A node's staleness is bounded by the span of two of its passes (plus the skew of
    // the two clocks compared): two periods while its pass thread runs when it asks; more
    // on a machine with fewer cores than busy threads, or where passes are slow (under
    // the emulator). A node is judged by the larger of the two.
    let (mut over_bound, mut longest_span) = (false, 0u64);
    for node in 2..nodes as usize {
        let line = last_line(kids.0.remove(0))?;
        let r = parse_report(&line);
        reads += r("reads").ok_or("reader report lacks reads")?;
        lost += r("lost").ok_or("reader report lacks lost")?;
        regressions += r("regressions").ok_or("reader report lacks regressions")?;
        let span = r("pass_span_ns").ok_or("reader report lacks its pass span")?;
        oracle.add(&r);
        let seen = read_pairs(&record_path(&path, node))?;
        let stale = staleness(&published, &seen);
        over_bound |= stale > bound.max(span + skew);
        longest_span = longest_span.max(span);
        max_stale = max_stale.max(stale);
    }
    // Recovered: after the kill, the writer excluded the dead node and freed memory again.
    let recovered = !after.is_empty() && freed_after > 0;
    let (restarts, lost_acked, refused) =
        restart_phase::<M>(args, &path, WRITER_RESTARTS, &mut oracle)?;
    if args.json {
        let emulated = if oracle.reported {
            format!(
                "true, \"oracle\": {{\"stale_reads\": {}, \"max_staleness_ns\": {}, \"reuse_hazards\": {}, \"reuse_accepted\": {}, \"lost_writes\": {}}}",
                oracle.stale_reads,
                oracle.max_staleness_ns,
                oracle.reuse_hazards,
                oracle.reuse_accepted,
                oracle.lost_writes
            )
        } else {
            "false".to_owned()
        };
        println!(
            "{{\"readers\": {}, \"writes\": {writes}, \"reads\": {reads}, \"lost_writes\": {lost}, \"max_staleness_us\": {:.3}, \"bound_us\": {:.1}, \"longest_pass_span_us\": {:.1}, \"killed_reader_recovered\": {recovered}, \"writer_restarts\": {restarts}, \"lost_acknowledged\": {lost_acked}, \"second_writer_refused\": {refused}, \"emulated\": {emulated}}}",
            args.readers,
            max_stale as f64 / 1e3,
            bound as f64 / 1e3,
            longest_span as f64 / 1e3
        );
    } else {
        println!(
            "shared_map: 1 writer and {} reader processes over {}",
            args.readers,
            path.display()
        );
        println!("  writes {writes}, reads {reads}, lost writes {lost}, regressions {regressions}");
        println!(
            "  max staleness {:.3} us (bound {:.1} us: two periods plus clock skew; the longest span of two passes on a reader's node was {:.1} us)",
            max_stale as f64 / 1e3,
            bound as f64 / 1e3,
            longest_span as f64 / 1e3
        );
        println!(
            "  node 1 killed midway; excluded {:.1} ms later, then {freed_after} blocks freed: recovered = {recovered}",
            excluded_at.saturating_sub(killed_at) as f64 / 1e6
        );
        if early > 0 {
            println!(
                "  (node 1 was also excluded during {early} reclaims while alive: its passes were late on a busy machine)"
            );
        }
    }
    if !args.json {
        println!(
            "  then the writer was killed with SIGKILL {restarts} times while inserting; each successor adopted the map: {lost_acked} acknowledged keys lost, a second writer refused = {refused}"
        );
        if oracle.reported {
            println!(
                "  emulated (BI_EMULATE): the oracle counted {} stale reads (oldest {:.1} us), {} loads of reused memory ({} not caught by a rejected read), {} lost write-backs",
                oracle.stale_reads,
                oracle.max_staleness_ns as f64 / 1e3,
                oracle.reuse_hazards,
                oracle.reuse_accepted,
                oracle.lost_writes
            );
        }
    }
    if lost > 0
        || regressions > 0
        || over_bound
        || !recovered
        || lost_acked > 0
        || !refused
        || oracle.lost_writes > 0
        || oracle.reuse_accepted > 0
    {
        std::process::exit(1);
    }
    Ok(())
}

/// Where node `node` leaves its records (next to the region file).
fn record_path(region: &Path, node: usize) -> PathBuf {
    region.with_extension(format!("node{node}"))
}

fn writer<M: NodeView>(args: &Args) -> Result<(), Box<dyn Error>> {
    let path = args.region.as_ref().ok_or("--region is required")?;
    let region = Region::open(path)?;
    let period = Duration::from_micros(args.period_us);
    let rt = node_runtime::<M>(&region, 0, period)?;
    let heap = NodeHeap::for_node(region.layout(), 0)?;
    let map = BiHashMap::<u64, Value>::named(&region, &rt, ROOT)?;
    let mut handle = map.take_writer(&rt, rt.writer(heap)?)?;
    let background = rt.start_background(period);
    let clock = rt.clock().clone();

    // published[v] = when heartbeat version v became visible.
    let mut published = vec![0u64];
    handle.insert(0, value(0, clock.refresh()))?;
    report(&[("ready", 1)]);
    let mut go = String::new();
    std::io::stdin().read_line(&mut go)?;
    let start = Instant::now();
    let run = Duration::from_millis(args.millis);
    let (mut writes, mut key) = (1u64, 1u64);
    let mut excluded: Vec<(u64, u64)> = Vec::new();
    while start.elapsed() < run {
        let version = published.len() as u64;
        let mut ops = Vec::with_capacity(33);
        ops.push(Op::Insert(0, value(version, 0)));
        for _ in 0..32 {
            ops.push(Op::Insert(key, value(version, 0)));
            key = key % (KEYS - 1) + 1;
        }
        handle.apply_batch(&ops)?;
        published.push(clock.refresh());
        writes += ops.len() as u64;
        let r = handle.reclaim()?;
        // Every reclaim that ran with node 1 excluded, and what it freed (a live node can
        // be excluded for a while on a busy machine too, and come back).
        if r.grace.lease_expired.contains(&1) {
            excluded.push((clock.refresh(), r.freed_blocks as u64));
        }
        std::thread::sleep(Duration::from_micros(300));
    }
    // The final round: every key gets a known value; then, in a later batch, DONE. A
    // batch publishes its buckets one by one, so a reader may see part of a batch before
    // the rest; once it sees DONE, the whole final round was published before.
    let ops: Vec<_> = (1..KEYS)
        .map(|k| Op::Insert(k, value(u64::MAX - k, 0)))
        .collect();
    handle.apply_batch(&ops)?;
    handle.insert(DONE, value(published.len() as u64, 0))?;
    writes += ops.len() as u64 + 1;
    write_pairs(
        &record_path(path, 0),
        published.iter().enumerate().map(|(v, &t)| (v as u64, t)),
    )?;
    write_pairs(&path.with_extension("excluded"), excluded.into_iter())?;
    // Keep passing while the readers finish (they stop once they see DONE).
    std::thread::sleep(Duration::from_millis(300) + period * 20);
    background.stop();
    let skew = rt.config().skew_bound();
    let bound = 2 * period.as_nanos() as u64 + skew;
    report_with_oracle(
        &rt,
        &[("writes", writes), ("bound_ns", bound), ("skew_ns", skew)],
    );
    Ok(())
}

fn reader<M: NodeView>(args: &Args) -> Result<(), Box<dyn Error>> {
    let path = args.region.as_ref().ok_or("--region is required")?;
    let region = Region::open(path)?;
    let period = Duration::from_micros(args.period_us);
    let rt = node_runtime::<M>(&region, args.node, period)?;
    let map = BiHashMap::<u64, Value>::named(&region, &rt, ROOT)?;
    let handle = map.read_handle(&rt)?;
    rt.quiesce()?;
    let background = rt.start_background(period);
    let clock = rt.clock().clone();
    report(&[("ready", 1)]);
    // For each heartbeat version seen, the latest time a lookup that saw it started.
    let mut seen: BTreeMap<u64, u64> = BTreeMap::new();
    let (mut reads, mut regressions) = (0u64, 0u64);
    let mut last = vec![0u64; KEYS as usize];
    let mut probe = args.node as u64;
    // A reader whose writer died never sees DONE: give up well after the writer's end.
    let deadline =
        Instant::now() + Duration::from_millis(args.millis * 3) + Duration::from_secs(10);
    loop {
        if Instant::now() > deadline {
            return Err("the writer never finished (gave up waiting for DONE)".into());
        }
        let t0 = clock.refresh();
        let view = handle.enter();
        if view.get(&DONE)?.is_some() {
            break;
        }
        if let Some([v, ..]) = view.get(&0)? {
            let t = seen.entry(v).or_insert(t0);
            *t = (*t).max(t0);
        }
        for _ in 0..16 {
            probe = probe
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = 1 + (probe >> 33) % (KEYS - 1);
            if let Some([v, ..]) = view.get(&k)? {
                // Versions of one key never go backwards on one node.
                if v < last[k as usize] {
                    regressions += 1;
                }
                last[k as usize] = v;
            }
        }
        reads += 18;
        drop(view);
        // Leave the cores to the writer and the pass threads (few cores serve every process).
        std::thread::yield_now();
    }
    // After two passes of this node, every key must hold its final value.
    rt.quiesce()?;
    rt.quiesce()?;
    let view = handle.enter();
    let lost = (1..KEYS)
        .filter(|k| !matches!(view.get(k), Ok(Some([v, 0, ..])) if v == u64::MAX - k))
        .count() as u64;
    drop(view);
    let span = background.longest_span();
    background.stop();
    write_pairs(&record_path(path, args.node), seen.into_iter())?;
    report_with_oracle(
        &rt,
        &[
            ("reads", reads),
            ("lost", lost),
            ("regressions", regressions),
            ("pass_span_ns", span.as_nanos() as u64),
        ],
    );
    Ok(())
}

/// Times the writer is killed and restarted after the main run.
const WRITER_RESTARTS: u64 = 5;
/// Keys the restarted writers insert start here (past the workload's keys).
const RESTART_KEYS: u64 = 1 << 32;

/// A node's runtime, waiting for a killed predecessor's claim of the node to lapse.
fn rejoin<M: NodeView>(
    region: &Region,
    node: usize,
    period: Duration,
) -> Result<NodeRuntime<M>, Box<dyn Error>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match node_runtime(region, node, period) {
            Err(e)
                if Instant::now() < deadline
                    && matches!(e.downcast_ref(), Some(BiError::NodeTaken { .. })) =>
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            r => return r,
        }
    }
}

/// A writer started after another died: adopts the map (every acknowledged write of its
/// predecessors must be in it) and inserts keys from `--node`'s start on, printing `ack k`
/// after each insert returned, until it is killed.
fn restarted_writer<M: NodeView>(args: &Args) -> Result<(), Box<dyn Error>> {
    let path = args.region.as_ref().ok_or("--region is required")?;
    let region = Region::open(path)?;
    let period = Duration::from_micros(args.period_us);
    let rt = rejoin::<M>(&region, 0, period)?;
    let _background = rt.start_background(period);
    let heap = NodeHeap::for_node(region.layout(), 0)?;
    let map = BiHashMap::<u64, Value>::named(&region, &rt, ROOT)?;
    let mut handle = map.take_writer(&rt, rt.writer(heap)?)?;
    report(&[("adopted", handle.len() as u64)]);
    for k in RESTART_KEYS + args.start.. {
        handle.insert(k, value(k, 7))?;
        report(&[("ack", k)]);
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(())
}

/// Tries to take the map's writer role while another process holds it: prints
/// `refused=1` if it was refused as it must be.
fn second_writer<M: NodeView>(args: &Args) -> Result<(), Box<dyn Error>> {
    let path = args.region.as_ref().ok_or("--region is required")?;
    let region = Region::open(path)?;
    let period = Duration::from_micros(args.period_us);
    let rt = rejoin::<M>(&region, args.node, period)?;
    let heap = NodeHeap::for_node(region.layout(), args.node)?;
    let map = BiHashMap::<u64, Value>::named(&region, &rt, ROOT)?;
    let refused = matches!(
        map.take_writer(&rt, rt.writer(heap)?),
        Err(CollectionError::Runtime(BiError::WriterAlive { .. }))
    );
    report(&[("refused", u64::from(refused))]);
    Ok(())
}

/// After the main run: the writer's process is killed with SIGKILL `restarts` times, each
/// time while inserting; the next one adopts the map. Halfway, another process tries to
/// become a second writer. Finally this process, as a node of its own, checks that every
/// acknowledged key is in the map. Returns (restarts, acknowledged keys lost, second
/// writer refused).
fn restart_phase<M: NodeView>(
    args: &Args,
    path: &Path,
    restarts: u64,
    oracle: &mut Oracle,
) -> Result<(u64, u64, bool), Box<dyn Error>> {
    let mut acked = Vec::new();
    let mut refused = false;
    for round in 0..restarts {
        let start = Args {
            start: acked.last().map_or(0, |k| k - RESTART_KEYS + 1),
            ..args.clone()
        };
        let mut writer = Children(vec![spawn(&start, path, "restart", 0)?]);
        let mut out = BufReader::new(writer.0[0].stdout.take().ok_or("no writer stdout")?);
        let mut line = String::new();
        out.read_line(&mut line)?;
        let adopted = parse_report(&line)("adopted").ok_or("the restarted writer did not adopt")?;
        if adopted < acked.len() as u64 {
            return Err("a restarted writer adopted a map missing acknowledged keys".into());
        }
        if round == restarts / 2 {
            let second = spawn(args, path, "second", 2)?;
            refused = parse_report(&last_line(second)?)("refused") == Some(1);
        }
        // Let it insert for a while, then kill it wherever it is.
        let until = Instant::now() + Duration::from_millis(20 + 10 * round);
        while Instant::now() < until {
            line.clear();
            if out.read_line(&mut line)? == 0 {
                return Err("a restarted writer stopped".into());
            }
            if let Some(k) = parse_report(&line)("ack") {
                acked.push(k);
            }
        }
        // (Dropping the `Children` kills and reaps it.)
        drop(writer);
        // Acknowledgements printed before the kill still count.
        for l in out.lines() {
            if let Some(k) = parse_report(&l?)("ack") {
                acked.push(k);
            }
        }
    }
    // Check as node 2, once that node's claim (held by the second writer) is free.
    let region = Region::open(path)?;
    let period = Duration::from_micros(args.period_us);
    let rt = rejoin::<M>(&region, 2, period)?;
    let map = BiHashMap::<u64, Value>::named(&region, &rt, ROOT)?;
    let r = map.read_handle(&rt)?;
    rt.quiesce()?;
    let lost = acked
        .iter()
        .filter(|&&k| !matches!(r.get(&k), Ok(Some([v, 7, ..])) if v == k))
        .count() as u64;
    oracle.add_pairs(&oracle_of(&rt));
    Ok((restarts, lost, refused))
}
