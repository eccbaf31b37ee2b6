//! One partition's superstep loop: gather, apply, scatter, whatever the mode.
//!
//! Each superstep a partition runs, with an exchange between the phases:
//!
//! 1. scatter (programs with signalling): for local vertices whose master changed in the
//!    previous superstep, visit their scatter edges and record signals locally;
//! 2. gather and apply: replicas that feed a master fold their local gather edges into a
//!    partial and put it; each master folds its own gather edges and, if no replica
//!    feeds it, applies at once and puts its new value (into the other bank of value
//!    slots than the one this superstep reads, so no one waits for anyone);
//! 3. masters that replicas feed (vertex cuts only): once the partials are exchanged,
//!    fold them in increasing partition order, apply and put;
//! 4. the values and every partition's share of the global aggregate are exchanged.
//!
//! How values cross partitions is the [`Exchange`]'s business, not this loop's.

use super::exchange::{Exchange, Meta, Words, bank, lap};
use super::memory::{WordSource, decode, encode, words_of};
use super::plan::{Csr, PartPlan};
use super::program::{VertexInfo, VertexProgram};
use super::tracked::Watch;
use crate::config::{Observer, Phases};
use crate::error::GraphError;
use bi_core::mem::MemError;
use bi_core::runtime::{Fault, Faults};

/// What every partition shares (read-only) during a run.
pub(crate) struct Ctx<'a, P> {
    pub program: &'a P,
    /// Partitions in the run.
    pub parts: usize,
    pub in_degree: &'a [u32],
    pub out_degree: &'a [u32],
    /// Values may be read stale (the periodic mode): confirm the superstep that would end
    /// the run with a fresh one.
    pub stale_reads: bool,
    /// Read the stamps of the values and partials gathered, and keep the largest lag
    /// ([`EngineConfig::measure_staleness`](crate::EngineConfig::measure_staleness)).
    pub measure_staleness: bool,
    pub max_iterations: usize,
    pub observer: Option<&'a dyn Observer>,
    /// Called first on each partition's thread, with the partition.
    pub on_partition_start: Option<&'a (dyn Fn(usize) + Send + Sync)>,
    /// Some replica, on some partition, feeds its master: supersteps exchange partials.
    pub partials: bool,
    /// Mechanisms switched off ([`RunOptions::faults`](crate::RunOptions::faults)).
    pub faults: Faults,
}

/// The lines a partition writes back and invalidates to publish and to see others.
#[derive(Clone, Debug, Default)]
pub(crate) struct SyncPlan {
    /// Its own value slots read elsewhere (one range per bank).
    pub own_values: [(usize, usize); 2],
    /// Its own partial slots (one range).
    pub own_partials: (usize, usize),
    /// Its own aggregate line, per bank.
    pub own_aggregate: [(usize, usize); 2],
    /// Value slots of other partitions' masters that its replicas read, per bank.
    pub remote_values: [Vec<(usize, usize)>; 2],
    /// Partial slots of its masters' replicas on other partitions.
    pub remote_partials: Vec<(usize, usize)>,
    /// Other partitions' aggregate lines, per bank.
    pub remote_aggregates: [Vec<(usize, usize)>; 2],
    /// The lines of the other partitions' written-line logs it reads (periodic mode).
    pub remote_logs: Vec<(usize, usize)>,
    /// The remote value and partial lines it reads, by the log word of their group.
    pub watches: Vec<Watch>,
}

/// What a partition hands back.
#[derive(Debug, Default)]
pub(crate) struct PartitionResult<D> {
    pub masters: Vec<(u32, D)>,
    /// Time spent in supersteps (after initialisation).
    pub compute_time: std::time::Duration,
    pub iterations: usize,
    pub messages: u64,
    pub max_staleness: u64,
    pub edges_gathered: u64,
    /// Time in each phase, summed over the supersteps.
    pub phases: Phases,
}

impl<D> PartitionResult<D> {
    /// The measurements alone, without the values (what another process is told).
    pub fn measurements(&self) -> PartitionResult<()> {
        PartitionResult {
            masters: Vec::new(),
            compute_time: self.compute_time,
            iterations: self.iterations,
            messages: self.messages,
            max_staleness: self.max_staleness,
            edges_gathered: self.edges_gathered,
            phases: self.phases,
        }
    }
}

fn mem_err(e: MemError) -> GraphError {
    GraphError::Runtime(bi_core::runtime::BiError::from(e))
}

pub(crate) struct Worker<'a, P: VertexProgram, X> {
    ctx: &'a Ctx<'a, P>,
    p: usize,
    plan: &'a PartPlan,
    exchange: X,
    /// Per local vertex: word of the value slot its reads go to, in the source of either
    /// bank ([`Exchange::source`]).
    slot: Vec<u32>,
    /// The masters' gather edges, by master index.
    masters: Gatherers,
    /// The gather edges of the replicas that feed their master, by feeder index.
    feeders: Gatherers,
    /// Master indices of the masters that replicas feed, ascending.
    fed: Vec<u32>,
    /// Whether replicas feed each master.
    is_fed: Vec<bool>,
    /// This partition's masters' data, by master index.
    mdata: Vec<P::Data>,
    /// This partition's masters as the program sees them, by master index.
    minfo: Vec<VertexInfo>,
    /// The masters' own partials, by master index.
    partial: Vec<P::Gather>,
    /// The feeding replicas' partials, by feeder index.
    feeder_partial: Vec<P::Gather>,
    signal: Vec<bool>,
    /// Work proportional to the frontier (signalling programs read fresh): the local
    /// vertices a neighbour's change put out of date, the only ones gathered next.
    dirty: Option<Vec<bool>>,
    edges_gathered: u64,
    globals: P::Aggregate,
    /// Every partition's aggregate and changed count, filled by each value exchange.
    aggregates: Vec<(Words, u64)>,
    max_staleness: u64,
    /// Time in each phase of the supersteps so far (quiescence excepted: the exchange
    /// keeps that).
    phases: Phases,
}

/// The gather edges of one group of local vertices, gatherer `k` being local vertex
/// `locals[k]`.
struct Gatherers {
    locals: Vec<u32>,
    /// One per direction gathered over.
    dirs: Vec<GatherEdges>,
}

/// One direction of a group's gather edges: gatherer `k`'s neighbours are
/// `slots[offsets[k]..offsets[k + 1]]`, as the words of their value slots.
struct GatherEdges {
    offsets: Vec<usize>,
    slots: Vec<u32>,
    weights: Option<Vec<f64>>,
}

impl Gatherers {
    /// The edges of `locals` across `csrs`, each neighbour as its value slot's word.
    fn new(locals: Vec<u32>, csrs: &[&Csr], slot: &[u32]) -> Self {
        let dirs = csrs
            .iter()
            .map(|csr| {
                let mut dir = GatherEdges {
                    offsets: Vec::with_capacity(locals.len() + 1),
                    slots: Vec::new(),
                    weights: csr.weights.as_ref().map(|_| Vec::new()),
                };
                dir.offsets.push(0);
                for &l in &locals {
                    let range = csr.range(l as usize);
                    dir.slots
                        .extend(csr.cols[range.clone()].iter().map(|&c| slot[c as usize]));
                    if let (Some(out), Some(w)) = (&mut dir.weights, &csr.weights) {
                        out.extend_from_slice(&w[range]);
                    }
                    dir.offsets.push(dir.slots.len());
                }
                dir
            })
            .collect();
        Gatherers { locals, dirs }
    }
}

/// Folds gatherer `k`'s edges, reading its neighbours' values from `src`; returns the
/// sum and the number of edges. With `MEASURE`, also reads each neighbour's stamp and
/// records how far it lags `expect` in `staleness`.
#[inline(always)]
fn fold<P: VertexProgram, S: WordSource, const MEASURE: bool>(
    program: &P,
    dirs: &[GatherEdges],
    k: usize,
    src: &S,
    expect: u64,
    staleness: &mut u64,
) -> Result<(P::Gather, u64), MemError> {
    let dw = words_of::<P::Data>();
    let mut read = |c: u32| -> Result<P::Data, MemError> {
        let c = c as usize;
        if MEASURE {
            let stamp = Meta::from_word(src.word(c + dw)?).stamp();
            *staleness = (*staleness).max(expect.saturating_sub(stamp));
        }
        src.value(c)
    };
    let mut acc = program.zero();
    let mut edges = 0;
    for dir in dirs {
        let range = dir.offsets[k]..dir.offsets[k + 1];
        edges += range.len() as u64;
        match &dir.weights {
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
    Ok((acc, edges))
}

/// Masters folded before any of them applies: enough to amortise taking the exchange's
/// source, few enough that their partials stay in the L1 cache.
const BLOCK: usize = 256;

/// Folds the edges of gatherers `range` of `group` into `out` (one sum per gatherer),
/// reading neighbours from `src`: every gatherer, or with `dirty` only those whose local
/// vertex is marked (clearing the marks; the others keep their sum). Returns the number
/// of edges folded.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn fold_range<P: VertexProgram, S: WordSource, const MEASURE: bool>(
    program: &P,
    group: &Gatherers,
    range: std::ops::Range<usize>,
    src: &S,
    out: &mut [P::Gather],
    mut dirty: Option<&mut [bool]>,
    expect: u64,
    staleness: &mut u64,
) -> Result<u64, MemError> {
    // The common case in one tight loop: one direction, no weights, every vertex, no
    // stamps read.
    if let ([one], None) = (&group.dirs[..], &dirty)
        && one.weights.is_none()
        && !MEASURE
    {
        let offsets = &one.offsets[range.start..=range.end];
        for (sum, ends) in out.iter_mut().zip(offsets.windows(2)) {
            let mut acc = program.zero();
            for &c in &one.slots[ends[0]..ends[1]] {
                acc = program.sum(acc, program.gather(1.0, &src.value(c as usize)?));
            }
            *sum = acc;
        }
        return Ok((offsets[offsets.len() - 1] - offsets[0]) as u64);
    }
    let mut edges = 0;
    for (k, sum) in range.zip(out) {
        let l = group.locals[k] as usize;
        if let Some(dirty) = dirty.as_deref_mut()
            && !std::mem::take(&mut dirty[l])
        {
            continue;
        }
        let (acc, e) = fold::<P, S, MEASURE>(program, &group.dirs, k, src, expect, staleness)?;
        *sum = acc;
        edges += e;
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
        if Meta::from_word(src.word(s as usize + dw)?) != Meta::new(stamp, true) {
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
    /// Partition `p`'s loop over its `plan`.
    pub fn new(ctx: &'a Ctx<'a, P>, p: usize, plan: &'a PartPlan, exchange: X) -> Self {
        let locals = plan.locals();
        let slot: Vec<u32> = (0..locals).map(|l| exchange.value_word(l) as u32).collect();
        let program = ctx.program;
        let gdir = program.gather_direction();
        let csrs: Vec<&Csr> = [
            (plan.incoming.as_ref(), gdir.incoming()),
            (plan.outgoing.as_ref(), gdir.outgoing()),
        ]
        .into_iter()
        .filter_map(|(csr, wanted)| csr.filter(|_| wanted))
        .collect();
        let feeding: Vec<u32> = (0..locals as u32)
            .filter(|&l| plan.feeds[l as usize])
            .collect();
        let is_fed: Vec<bool> = (0..plan.masters.len())
            .map(|i| {
                let mirrors = plan.mirror_start[i] as usize..plan.mirror_start[i + 1] as usize;
                plan.mirror_feeds[mirrors].iter().any(|&f| f)
            })
            .collect();
        Worker {
            ctx,
            p,
            plan,
            exchange,
            masters: Gatherers::new(plan.masters.clone(), &csrs, &slot),
            feeder_partial: vec![program.zero(); feeding.len()],
            feeders: Gatherers::new(feeding, &csrs, &slot),
            fed: (0..plan.masters.len() as u32)
                .filter(|&i| is_fed[i as usize])
                .collect(),
            is_fed,
            slot,
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
            partial: vec![program.zero(); plan.masters.len()],
            signal: vec![false; locals],
            // Every vertex gathers in the first superstep.
            dirty: (!program.always_active() && !ctx.stale_reads).then(|| vec![true; locals]),
            edges_gathered: 0,
            globals: program.aggregate_zero(),
            aggregates: vec![([0; 2], 0); ctx.parts],
            max_staleness: 0,
            phases: Phases::default(),
        }
    }

    /// Exchanges the values of `bank` and the aggregates: returns the combined aggregate
    /// and the number of masters that changed everywhere.
    fn exchange_values(
        &mut self,
        bank: usize,
        agg: P::Aggregate,
        changed: u64,
        fresh: bool,
    ) -> Result<(P::Aggregate, u64), GraphError> {
        let program = self.ctx.program;
        self.exchange
            .exchange_values(bank, encode(&agg), changed, fresh, &mut self.aggregates)?;
        let mut total = program.aggregate_zero();
        let mut changed_total = 0;
        for &(a, c) in &self.aggregates {
            total = program.combine(total, decode(&a));
            changed_total += c;
        }
        Ok((total, changed_total))
    }

    /// The banks of value slots superstep `step` reads (the values of stamp `step`) and
    /// writes (those of stamp `step + 1`): the two banks in turn, or with
    /// [`Fault::ValueBanks`] (the negative control) one bank for everything.
    fn banks(&self, step: usize) -> (usize, usize) {
        if self.ctx.faults.has(Fault::ValueBanks) {
            return (0, 0);
        }
        (bank(step as u64), bank(step as u64 + 1))
    }

    fn init(&mut self) -> Result<(), GraphError> {
        let program = self.ctx.program;
        let (first, second) = self.banks(0);
        // Reads that may be stale may also come before a bank's first values reach
        // memory: both banks start with the initial values, so a stale read finds a
        // value some superstep had, never the region's zeros.
        let both =
            self.ctx.stale_reads && second != first && !self.ctx.faults.has(Fault::SecondBankStart);
        let mut agg = program.aggregate_zero();
        let mut active = 0;
        for i in 0..self.plan.masters.len() {
            let info = self.minfo[i];
            let d = program.init(&info);
            let initially = program.initially_active(&info);
            active += u64::from(initially);
            agg = program.combine(agg, program.aggregate(&info, &d, &d));
            let words = encode(&d);
            let words = &words[..words_of::<P::Data>()];
            self.exchange
                .put_value(i, first, words, Meta::new(0, initially))?;
            if both {
                self.exchange
                    .put_value(i, second, words, Meta::new(0, initially))?;
            }
            self.mdata.push(d);
        }
        if both {
            self.exchange.refresh_values(second)?;
        }
        let (total, _) = self.exchange_values(first, agg, active, true)?;
        self.globals = program.globals(total);
        Ok(())
    }

    fn scatter(&mut self, step: usize) -> Result<(), GraphError> {
        let src = self.exchange.source(self.banks(step).0);
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

    /// Master `i` applies `acc` (if active) and puts its new value with stamp `stamp`;
    /// returns whether the value changed.
    #[inline(always)]
    fn apply_master(
        &mut self,
        i: usize,
        acc: P::Gather,
        active: bool,
        (bank, stamp): (usize, u64),
        agg: &mut P::Aggregate,
    ) -> Result<bool, GraphError> {
        let program = self.ctx.program;
        let info = &self.minfo[i];
        let old = self.mdata[i];
        let new = if active {
            program.apply(info, &old, acc, &self.globals)
        } else {
            old
        };
        let words = encode(&new);
        let changed = encode(&old) != words;
        *agg = program.combine(*agg, program.aggregate(info, &old, &new));
        self.mdata[i] = new;
        let words = &words[..words_of::<P::Data>()];
        self.exchange
            .put_value(i, bank, words, Meta::new(stamp, changed))?;
        Ok(changed)
    }

    /// Superstep `step`'s gather and apply (phases 2 and 3); returns this partition's
    /// aggregate and number of changed masters. `force` applies every master, signalled
    /// or not (the periodic mode's confirming superstep).
    fn gather_apply<const MEASURE: bool>(
        &mut self,
        step: usize,
        fresh: bool,
        force: bool,
    ) -> Result<(P::Aggregate, u64), GraphError> {
        let program = self.ctx.program;
        let mut since = std::time::Instant::now();
        let always = program.always_active() || force;
        let (expect, stamp) = (step as u64, step as u64 + 1);
        let (read, write) = self.banks(step);
        let mut agg = program.aggregate_zero();
        let (mut changed, mut edges, mut staleness) = (0, 0, 0);
        // Replicas that feed fold their edges, then put their partials stamped with this
        // superstep and their signal.
        edges += fold_range::<P, _, MEASURE>(
            program,
            &self.feeders,
            0..self.feeders.locals.len(),
            &self.exchange.source(read),
            &mut self.feeder_partial,
            self.dirty.as_deref_mut(),
            expect,
            &mut staleness,
        )
        .map_err(mem_err)?;
        for (k, &l) in self.feeders.locals.iter().enumerate() {
            let signalled = std::mem::take(&mut self.signal[l as usize]);
            let partial = encode(&self.feeder_partial[k]);
            self.exchange
                .put_partial(l as usize, partial, Meta::new(stamp, signalled))?;
        }
        // Masters fold their edges, a block at a time; those no replica feeds apply at
        // once.
        let masters = self.masters.locals.len();
        for block in (0..masters).step_by(BLOCK) {
            let block = block..masters.min(block + BLOCK);
            edges += fold_range::<P, _, MEASURE>(
                program,
                &self.masters,
                block.clone(),
                &self.exchange.source(read),
                &mut self.partial[block.clone()],
                self.dirty.as_deref_mut(),
                expect,
                &mut staleness,
            )
            .map_err(mem_err)?;
            for i in block {
                if self.is_fed[i] {
                    continue;
                }
                let l = self.masters.locals[i] as usize;
                let active = always || std::mem::take(&mut self.signal[l]);
                let acc = self.partial[i];
                changed +=
                    u64::from(self.apply_master(i, acc, active, (write, stamp), &mut agg)?);
            }
        }
        self.edges_gathered += edges;
        self.max_staleness = self.max_staleness.max(staleness);
        lap(&mut since, &mut self.phases.gather_apply);
        if !self.ctx.partials {
            return Ok((agg, changed));
        }
        // The others fold their partials in increasing partition order, their own
        // included, then apply.
        self.exchange.exchange_partials(fresh)?;
        let plan = self.plan;
        for f in 0..self.fed.len() {
            let i = self.fed[f] as usize;
            let l = plan.masters[i] as usize;
            let mut acc = program.zero();
            let mut signalled = std::mem::take(&mut self.signal[l]);
            let mut own_done = false;
            let mirrors = plan.mirror_start[i] as usize..plan.mirror_start[i + 1] as usize;
            for m in mirrors.filter(|&m| plan.mirror_feeds[m]) {
                let q = usize::from(plan.mirror_part[m]);
                if q > self.p && !own_done {
                    acc = program.sum(acc, self.partial[i]);
                    own_done = true;
                }
                let (partial_meta, g) = self.exchange.next_partial(q, i)?;
                let partial_meta = partial_meta.unwrap_or(Meta::new(stamp, false));
                let written = partial_meta.stamp();
                if written == 0 {
                    continue; // never written (periodic mode: not yet visible)
                }
                if self.ctx.measure_staleness {
                    self.max_staleness = self.max_staleness.max(stamp - written.min(stamp));
                }
                signalled |= partial_meta.flag();
                acc = program.sum(acc, decode(&g));
            }
            if !own_done {
                acc = program.sum(acc, self.partial[i]);
            }
            changed += u64::from(self.apply_master(
                i,
                acc,
                always || signalled,
                (write, stamp),
                &mut agg,
            )?);
        }
        lap(&mut since, &mut self.phases.partials);
        Ok((agg, changed))
    }

    pub fn run(mut self) -> Result<PartitionResult<P::Data>, GraphError> {
        if let Some(start) = self.ctx.on_partition_start {
            start(self.p);
        }
        let program = self.ctx.program;
        let stale_reads = self.ctx.stale_reads;
        self.init()?;
        let quiesced_before = self.exchange.quiescence();
        let started = std::time::Instant::now();
        let mut step = 0;
        let mut confirming = false;
        while step < self.ctx.max_iterations {
            let fresh = !stale_reads || confirming;
            let mut since = std::time::Instant::now();
            if !program.always_active() {
                self.scatter(step)?;
                lap(&mut since, &mut self.phases.scatter);
            }
            let force = stale_reads && confirming;
            let (agg, changed) = if self.ctx.measure_staleness {
                self.gather_apply::<true>(step, fresh, force)?
            } else {
                self.gather_apply::<false>(step, fresh, force)?
            };
            let mut since = std::time::Instant::now();
            let (total, changed_total) =
                self.exchange_values(self.banks(step).1, agg, changed, fresh)?;
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
                self.exchange.refresh_values(self.banks(step).0)?;
                lap(&mut since, &mut self.phases.values);
                confirming = true;
                continue;
            }
            lap(&mut since, &mut self.phases.values);
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
        let quiesced = self.exchange.quiescence();
        let phases = Phases {
            write_back: quiesced.write_back - quiesced_before.write_back,
            wait: quiesced.wait - quiesced_before.wait,
            invalidate: quiesced.invalidate - quiesced_before.invalidate,
            ..self.phases
        };
        Ok(PartitionResult {
            masters,
            compute_time: started.elapsed(),
            iterations: step,
            messages: self.exchange.messages(),
            max_staleness: self.max_staleness,
            edges_gathered: self.edges_gathered,
            phases,
        })
    }
}
