//! One partition's superstep loop: gather, apply, scatter, whatever the mode.
//!
//! Each superstep a partition runs, with an exchange between the phases:
//!
//! 1. scatter (programs with signalling): for local vertices whose master changed in the
//!    previous superstep, visit their scatter edges and record signals locally;
//! 2. gather: fold every local vertex's local gather edges into a partial sum; replicas
//!    with local gather edges put theirs for their masters;
//! 3. apply: each master folds its partials in increasing partition order, applies, and
//!    puts its new value together with its share of the global aggregate.
//!
//! How values cross partitions is the [`Exchange`]'s business, not this loop's.

use super::exchange::{Exchange, Words};
use super::memory::{WordSource, decode, encode, words_of};
use super::plan::PartPlan;
use super::program::{VertexInfo, VertexProgram};
use crate::config::Observer;
use crate::error::GraphError;
use bi_core::mem::MemError;
use bi_core::runtime::{Fault, Faults};

/// What every partition shares (read-only) during a run.
pub(crate) struct Ctx<'a, P> {
    pub program: &'a P,
    pub plans: &'a [PartPlan],
    pub in_degree: &'a [u32],
    pub out_degree: &'a [u32],
    /// Values may be read stale (the periodic mode): measure staleness, and confirm the
    /// superstep that would end the run with a fresh one.
    pub stale_reads: bool,
    pub max_iterations: usize,
    pub observer: Option<&'a dyn Observer>,
    /// Called first on each partition's thread, with the partition.
    pub on_partition_start: Option<&'a (dyn Fn(usize) + Send + Sync)>,
    /// Mechanisms switched off ([`RunOptions::faults`](crate::RunOptions::faults)).
    pub faults: Faults,
}

/// The lines a partition writes back and invalidates to publish and to see others.
#[derive(Clone, Debug, Default)]
pub(crate) struct SyncPlan {
    /// Its own value slots (one range).
    pub own_values: (usize, usize),
    /// Its own partial slots (one range).
    pub own_partials: (usize, usize),
    /// Its own aggregate line.
    pub own_aggregate: (usize, usize),
    /// Value slots of other partitions' masters that its replicas read.
    pub remote_values: Vec<(usize, usize)>,
    /// Partial slots of its masters' replicas on other partitions.
    pub remote_partials: Vec<(usize, usize)>,
    /// Other partitions' aggregate lines.
    pub remote_aggregates: Vec<(usize, usize)>,
}

/// What a partition hands back.
#[derive(Debug, Default)]
pub(crate) struct Outcome<D> {
    pub masters: Vec<(u32, D)>,
    /// Time spent in supersteps (after initialisation).
    pub compute_time: std::time::Duration,
    pub iterations: usize,
    pub messages: u64,
    pub max_staleness: u64,
    pub edges_gathered: u64,
}

impl<D> Outcome<D> {
    /// The measurements alone, without the values (what another process is told).
    pub fn measurements(&self) -> Outcome<()> {
        Outcome {
            masters: Vec::new(),
            compute_time: self.compute_time,
            iterations: self.iterations,
            messages: self.messages,
            max_staleness: self.max_staleness,
            edges_gathered: self.edges_gathered,
        }
    }
}

fn mem_err(e: MemError) -> GraphError {
    GraphError::Runtime(bi_core::runtime::BiError::from(e))
}

/// The meta word of a value or partial: the superstep that wrote it and one flag.
fn meta(stamp: u64, flag: bool) -> u64 {
    stamp << 1 | u64::from(flag)
}

/// A meta word's stamp.
fn stamp_of(meta: u64) -> u64 {
    meta >> 1
}

pub(crate) struct Worker<'a, P: VertexProgram, X> {
    ctx: &'a Ctx<'a, P>,
    p: usize,
    plan: &'a PartPlan,
    exchange: X,
    /// Per local vertex: word of the value slot its reads go to.
    slot: Vec<u32>,
    /// The gather edges, per direction gathered over.
    gather: Vec<GatherEdges<'a>>,
    /// This partition's masters' data, by master index.
    mdata: Vec<P::Data>,
    /// This partition's masters as the program sees them, by master index.
    minfo: Vec<VertexInfo>,
    partial: Vec<P::Gather>,
    signal: Vec<bool>,
    /// Work proportional to the frontier (signalling programs read fresh): the local
    /// vertices a neighbour's change put out of date, the only ones gathered next.
    dirty: Option<Vec<bool>>,
    edges_gathered: u64,
    globals: P::Aggregate,
    /// Every partition's aggregate and changed count, filled by each value exchange.
    aggregates: Vec<(Words, u64)>,
    max_staleness: u64,
}

/// One direction of a partition's gather edges: local vertex `l`'s neighbours are
/// `slots[offsets[l]..offsets[l + 1]]`, as the words of their value slots.
struct GatherEdges<'a> {
    offsets: &'a [usize],
    slots: Vec<u32>,
    weights: Option<&'a [f64]>,
}

/// Folds the gather edges of local vertices into `out`, reading neighbours from `src`:
/// every vertex, or with `dirty` only those marked (clearing the marks; the others keep
/// their partial). With `MEASURE`, also reads each neighbour's stamp and records the
/// staleness. Returns the number of edges gathered.
#[allow(clippy::too_many_arguments)]
fn gather_all<P: VertexProgram, S: WordSource, const MEASURE: bool>(
    program: &P,
    dirs: &[GatherEdges<'_>],
    src: &S,
    out: &mut [P::Gather],
    mut dirty: Option<&mut [bool]>,
    expect: u64,
    staleness: &mut u64,
) -> Result<u64, MemError> {
    let dw = words_of::<P::Data>();
    let mut read = |c: u32| -> Result<P::Data, MemError> {
        let c = c as usize;
        if MEASURE {
            let stamp = stamp_of(src.word(c + dw)?);
            *staleness = (*staleness).max(expect.saturating_sub(stamp));
        }
        src.value(c)
    };
    // The common case in one tight loop: one direction, no weights, every vertex.
    if let ([one], None) = (dirs, dirty.as_deref())
        && one.weights.is_none()
    {
        for (slot, ends) in out.iter_mut().zip(one.offsets.windows(2)) {
            let mut acc = program.zero();
            for &c in &one.slots[ends[0]..ends[1]] {
                acc = program.sum(acc, program.gather(1.0, &read(c)?));
            }
            *slot = acc;
        }
        return Ok(one.slots.len() as u64);
    }
    let mut edges = 0;
    for (l, slot) in out.iter_mut().enumerate() {
        if let Some(dirty) = dirty.as_deref_mut()
            && !std::mem::take(&mut dirty[l])
        {
            continue;
        }
        let mut acc = program.zero();
        for dir in dirs {
            let range = dir.offsets[l]..dir.offsets[l + 1];
            edges += range.len() as u64;
            match dir.weights {
                None => {
                    for &c in &dir.slots[range] {
                        acc = program.sum(acc, program.gather(1.0, &read(c)?));
                    }
                }
                Some(w) => {
                    for (&c, &w) in dir.slots[range.clone()].iter().zip(&w[range]) {
                        acc = program.sum(acc, program.gather(w, &read(c)?));
                    }
                }
            }
        }
        *slot = acc;
    }
    Ok(edges)
}

/// Visits the edges of local vertices changed at stamp `stamp`: across scatter edges
/// it marks the neighbours the program signals, and across the reverse of gather edges
/// it marks the neighbours whose partial the change makes out of date (`dirty`).
fn scatter_all<P: VertexProgram, S: WordSource>(
    program: &P,
    plan: &PartPlan,
    slot: &[u32],
    src: &S,
    signal: &mut [bool],
    dirty: Option<&mut [bool]>,
    stamp: u64,
) -> Result<(), MemError> {
    let dw = words_of::<P::Data>();
    let scatter = program.scatter_direction();
    let gather = program.gather_direction();
    let mark = dirty.is_some();
    // (edges, scatter across them, a neighbour across them gathers from the vertex)
    let csrs = [
        (
            plan.outgoing.as_ref(),
            scatter.outgoing(),
            mark && gather.incoming(),
        ),
        (
            plan.incoming.as_ref(),
            scatter.incoming(),
            mark && gather.outgoing(),
        ),
    ];
    let mut scratch = [];
    let dirty = dirty.unwrap_or(&mut scratch);
    for (l, &s) in slot.iter().enumerate() {
        if src.word(s as usize + dw)? != meta(stamp, true) {
            continue;
        }
        let d: P::Data = src.value(s as usize)?;
        for &(csr, scatters, marks) in &csrs {
            let Some(csr) = csr.filter(|_| scatters || marks) else {
                continue;
            };
            for e in csr.range(l) {
                let n = csr.cols[e] as usize;
                if marks {
                    dirty[n] = true;
                }
                if scatters {
                    let nd: P::Data = src.value(slot[n] as usize)?;
                    if program.scatter(csr.weight(e), &d, &nd) {
                        signal[n] = true;
                    }
                }
            }
        }
    }
    Ok(())
}

impl<'a, P: VertexProgram, X: Exchange> Worker<'a, P, X> {
    pub fn new(ctx: &'a Ctx<'a, P>, p: usize, exchange: X) -> Self {
        let plan = &ctx.plans[p];
        let locals = plan.locals();
        let slot: Vec<u32> = (0..locals).map(|l| exchange.value_word(l) as u32).collect();
        let program = ctx.program;
        let gdir = program.gather_direction();
        let gather = [
            (plan.incoming.as_ref(), gdir.incoming()),
            (plan.outgoing.as_ref(), gdir.outgoing()),
        ]
        .into_iter()
        .filter_map(|(csr, wanted)| csr.filter(|_| wanted))
        .map(|csr| GatherEdges {
            offsets: &csr.offsets,
            slots: csr.cols.iter().map(|&c| slot[c as usize]).collect(),
            weights: csr.weights.as_deref(),
        })
        .collect();
        Worker {
            ctx,
            p,
            plan,
            exchange,
            slot,
            gather,
            mdata: Vec::with_capacity(plan.masters.len()),
            minfo: plan
                .masters
                .iter()
                .map(|&l| {
                    let v = plan.globals[l as usize];
                    VertexInfo {
                        id: v,
                        in_degree: ctx.in_degree[v as usize],
                        out_degree: ctx.out_degree[v as usize],
                    }
                })
                .collect(),
            partial: vec![program.zero(); locals],
            signal: vec![false; locals],
            // Every vertex gathers in the first superstep.
            dirty: (!program.always_active() && !ctx.stale_reads).then(|| vec![true; locals]),
            edges_gathered: 0,
            globals: program.aggregate_zero(),
            aggregates: vec![([0; 2], 0); ctx.plans.len()],
            max_staleness: 0,
        }
    }

    /// Exchanges values and aggregates: returns the combined aggregate and the number of
    /// masters that changed everywhere.
    fn exchange_values(
        &mut self,
        agg: P::Aggregate,
        changed: u64,
        fresh: bool,
    ) -> Result<(P::Aggregate, u64), GraphError> {
        let program = self.ctx.program;
        self.exchange
            .exchange_values(encode(&agg), changed, fresh, &mut self.aggregates)?;
        let mut total = program.aggregate_zero();
        let mut changed_total = 0;
        for &(a, c) in &self.aggregates {
            total = program.combine(total, decode(&a));
            changed_total += c;
        }
        Ok((total, changed_total))
    }

    fn init(&mut self) -> Result<(), GraphError> {
        let program = self.ctx.program;
        let mut agg = program.aggregate_zero();
        let mut active = 0;
        for i in 0..self.plan.masters.len() {
            let info = self.minfo[i];
            let d = program.init(&info);
            let initially = program.initially_active(&info);
            active += u64::from(initially);
            agg = program.combine(agg, program.aggregate(&info, &d, &d));
            self.exchange.put_value(i, encode(&d), meta(0, initially))?;
            self.mdata.push(d);
        }
        let (total, _) = self.exchange_values(agg, active, true)?;
        self.globals = program.globals(total);
        Ok(())
    }

    fn scatter(&mut self, step: usize) -> Result<(), GraphError> {
        let src = self.exchange.source();
        scatter_all(
            self.ctx.program,
            self.plan,
            &self.slot,
            &src,
            &mut self.signal,
            self.dirty
                .as_deref_mut()
                .filter(|_| !self.ctx.faults.has(Fault::FrontierMarks)),
            step as u64,
        )
        .map_err(mem_err)
    }

    fn gather(&mut self, step: usize, fresh: bool) -> Result<(), GraphError> {
        let (program, plan) = (self.ctx.program, self.plan);
        let dirs = &self.gather[..];
        let out = &mut self.partial[..];
        let dirty = self.dirty.as_deref_mut();
        let expect = step as u64;
        let mut st = 0;
        self.edges_gathered += {
            let src = self.exchange.source();
            if self.ctx.stale_reads {
                gather_all::<P, _, true>(program, dirs, &src, out, dirty, expect, &mut st)
            } else {
                gather_all::<P, _, false>(program, dirs, &src, out, dirty, expect, &mut st)
            }
            .map_err(mem_err)?
        };
        self.max_staleness = self.max_staleness.max(st);
        // Replicas that feed put their partials, stamped with this superstep and their
        // signal.
        let stamp = step as u64 + 1;
        for l in 0..plan.locals() {
            if !plan.feeds[l] {
                continue;
            }
            let signalled = std::mem::take(&mut self.signal[l]);
            self.exchange
                .put_partial(l, encode(&self.partial[l]), meta(stamp, signalled))?;
        }
        self.exchange.exchange_partials(fresh)
    }

    /// Folds partials, applies, puts the new values; returns this partition's aggregate
    /// and number of changed masters.
    fn apply(&mut self, step: usize, force: bool) -> Result<(P::Aggregate, u64), GraphError> {
        let program = self.ctx.program;
        let always = program.always_active() || force;
        let plan = self.plan;
        let mut agg = program.aggregate_zero();
        let mut changed_count = 0;
        let stamp = step as u64 + 1;
        let globals = self.globals;
        for i in 0..plan.masters.len() {
            let l = plan.masters[i] as usize;
            let mut acc = program.zero();
            let mut signalled = std::mem::take(&mut self.signal[l]);
            let mut own_done = false;
            let mirrors = plan.mirror_start[i] as usize..plan.mirror_start[i + 1] as usize;
            for m in mirrors.filter(|&m| plan.mirror_feeds[m]) {
                let q = usize::from(plan.mirror_part[m]);
                if q > self.p && !own_done {
                    acc = program.sum(acc, self.partial[l]);
                    own_done = true;
                }
                let (partial_meta, g) = self.exchange.next_partial(q, i)?;
                let partial_meta = partial_meta.unwrap_or(meta(stamp, false));
                let written = stamp_of(partial_meta);
                if written == 0 {
                    continue; // never written (periodic mode: not yet visible)
                }
                self.max_staleness = self.max_staleness.max(stamp - written.min(stamp));
                signalled |= partial_meta & 1 == 1;
                acc = program.sum(acc, decode(&g));
            }
            if !own_done {
                acc = program.sum(acc, self.partial[l]);
            }
            let info = self.minfo[i];
            let old = self.mdata[i];
            let new = if always || signalled {
                program.apply(&info, &old, acc, &globals)
            } else {
                old
            };
            let words = encode(&new);
            let changed = encode(&old) != words;
            changed_count += u64::from(changed);
            agg = program.combine(agg, program.aggregate(&info, &old, &new));
            self.mdata[i] = new;
            self.exchange.put_value(i, words, meta(stamp, changed))?;
        }
        Ok((agg, changed_count))
    }

    pub fn run(mut self) -> Result<Outcome<P::Data>, GraphError> {
        if let Some(start) = self.ctx.on_partition_start {
            start(self.p);
        }
        let program = self.ctx.program;
        let stale_reads = self.ctx.stale_reads;
        self.init()?;
        let started = std::time::Instant::now();
        let mut step = 0;
        let mut confirming = false;
        while step < self.ctx.max_iterations {
            let fresh = !stale_reads || confirming;
            if !program.always_active() {
                self.scatter(step)?;
            }
            self.gather(step, fresh)?;
            let (agg, changed) = self.apply(step, stale_reads && confirming)?;
            let (total, changed_total) = self.exchange_values(agg, changed, fresh)?;
            self.globals = program.globals(total);
            if self.p == 0
                && let Some(o) = self.ctx.observer
            {
                o.advance(1);
            }
            let done =
                program.converged(step, &total) || (!program.always_active() && changed_total == 0);
            step += 1;
            if done && !fresh {
                // Stale reads may have hidden work: confirm with one fresh superstep.
                self.exchange.refresh_values()?;
                confirming = true;
                continue;
            }
            confirming = false;
            if done {
                break;
            }
        }
        let masters = self
            .plan
            .masters
            .iter()
            .zip(&self.mdata)
            .map(|(&l, &d)| (self.plan.globals[l as usize], d))
            .collect();
        Ok(Outcome {
            masters,
            compute_time: started.elapsed(),
            iterations: step,
            messages: self.exchange.messages(),
            max_staleness: self.max_staleness,
            edges_gathered: self.edges_gathered,
        })
    }
}
