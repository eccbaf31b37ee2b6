//! One partition's superstep loop, in all three modes.
//!
//! Each superstep a partition runs, with a barrier (or a message exchange) between them:
//!
//! 1. scatter (programs with signalling): for local vertices whose master changed in the
//!    previous superstep, visit their scatter edges and record signals locally;
//! 2. gather: fold every local vertex's local gather edges into a partial sum; replicas
//!    publish theirs (stored in the partition's own lines, or sent as a message);
//! 3. apply: each master folds its partials in increasing partition order, applies, and
//!    publishes its new value (in its own slot, or sent to every replica) together with
//!    its share of the global aggregate.
//!
//! What "publish" costs is the mode: see the crate documentation.

use super::barrier::{Aborted, PhaseBarrier};
use super::memory::{DirectWords, ViewWords, WordSource, decode, encode, words_of};
use super::plan::{Csr, PartPlan};
use super::program::{VertexInfo, VertexProgram};
use super::shared::{Msg, SharedLayout};
use crate::config::{Mode, Observer};
use crate::error::GraphError;
use bi_core::channel::{Receiver, Sender};
use bi_core::mem::{MemError, MemView};
use bi_core::runtime::{Fault, Faults};
use std::sync::atomic::AtomicU64;

/// What every partition shares (read-only) during a run.
pub(crate) struct Ctx<'a, P> {
    pub program: &'a P,
    pub plans: &'a [PartPlan],
    pub layout: &'a SharedLayout,
    pub sync: &'a [SyncPlan],
    pub in_degree: &'a [u32],
    pub out_degree: &'a [u32],
    pub mode: Mode,
    pub max_iterations: usize,
    pub barrier: &'a PhaseBarrier,
    pub observer: Option<&'a dyn Observer>,
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
#[derive(Debug)]
pub(crate) struct Outcome<D> {
    pub masters: Vec<(u32, D)>,
    /// Time spent in supersteps (after initialisation).
    pub compute_time: std::time::Duration,
    pub iterations: usize,
    pub messages: u64,
    pub max_staleness: u64,
}

impl From<Aborted> for GraphError {
    fn from(_: Aborted) -> Self {
        GraphError::Aborted
    }
}

fn mem_err(e: MemError) -> GraphError {
    GraphError::Runtime(bi_core::runtime::BiError::from(e))
}

fn corrupt(what: &'static str) -> GraphError {
    GraphError::Exchange { what }
}

pub(crate) struct Worker<'a, P: VertexProgram, V: MemView> {
    ctx: &'a Ctx<'a, P>,
    p: usize,
    parts: usize,
    plan: &'a PartPlan,
    view: V,
    direct: Option<&'a [AtomicU64]>,
    stock: bool,
    dw: usize,
    gw: usize,
    /// Per local vertex: word of the value slot its reads go to (shared or `copies`).
    slot: Vec<u32>,
    gather_in: Vec<u32>,
    gather_out: Vec<u32>,
    copies: Vec<u64>,
    mdata: Vec<P::Data>,
    partial: Vec<P::Gather>,
    signal: Vec<bool>,
    globals: P::Aggregate,
    senders: Vec<Option<Sender<V, Msg>>>,
    receivers: Vec<Option<Receiver<V, Msg>>>,
    out: Vec<Vec<Msg>>,
    inbox: Vec<Vec<Msg>>,
    expect_partials: Vec<usize>,
    expect_values: Vec<usize>,
    messages: u64,
    max_staleness: u64,
}

/// Folds the gather edges of every local vertex into `out`, reading neighbours from
/// `src`. With `MEASURE`, also reads each neighbour's stamp and records the staleness.
#[allow(clippy::too_many_arguments)]
fn gather_all<P: VertexProgram, S: WordSource + ?Sized, const MEASURE: bool>(
    program: &P,
    plan: &PartPlan,
    gather_in: &[u32],
    gather_out: &[u32],
    src: &S,
    out: &mut [P::Gather],
    expect: u64,
    staleness: &mut u64,
) -> Result<(), MemError> {
    let dw = words_of::<P::Data>();
    let dirs: [(Option<&Csr>, &[u32]); 2] = [
        (plan.incoming.as_ref(), gather_in),
        (plan.outgoing.as_ref(), gather_out),
    ];
    for (l, slot) in out.iter_mut().enumerate() {
        let mut acc = program.zero();
        for &(csr, cols) in &dirs {
            let (Some(csr), false) = (csr, cols.is_empty()) else {
                continue;
            };
            let range = csr.range(l);
            match csr.weights.as_deref() {
                None => {
                    for &c in &cols[range] {
                        let d: P::Data = src.value(c as usize)?;
                        if MEASURE {
                            let stamp = src.word(c as usize + dw)? >> 1;
                            *staleness = (*staleness).max(expect.saturating_sub(stamp));
                        }
                        acc = program.sum(acc, program.gather(1.0, &d));
                    }
                }
                Some(w) => {
                    for e in range {
                        let c = cols[e] as usize;
                        let d: P::Data = src.value(c)?;
                        if MEASURE {
                            let stamp = src.word(c + dw)? >> 1;
                            *staleness = (*staleness).max(expect.saturating_sub(stamp));
                        }
                        acc = program.sum(acc, program.gather(w[e], &d));
                    }
                }
            }
        }
        *slot = acc;
    }
    Ok(())
}

/// Visits the scatter edges of local vertices changed at stamp `stamp`, marking signals.
fn scatter_all<P: VertexProgram, S: WordSource + ?Sized>(
    program: &P,
    plan: &PartPlan,
    slot: &[u32],
    src: &S,
    signal: &mut [bool],
    stamp: u64,
) -> Result<(), MemError> {
    let dw = words_of::<P::Data>();
    let dir = program.scatter_direction();
    let csrs = [
        plan.outgoing.as_ref().filter(|_| dir.outgoing()),
        plan.incoming.as_ref().filter(|_| dir.incoming()),
    ];
    for (l, &s) in slot.iter().enumerate() {
        let meta = src.word(s as usize + dw)?;
        if meta != (stamp << 1) | 1 {
            continue;
        }
        let d: P::Data = src.value(s as usize)?;
        for csr in csrs.iter().flatten() {
            for e in csr.range(l) {
                let n = csr.cols[e] as usize;
                let nd: P::Data = src.value(slot[n] as usize)?;
                if program.scatter(csr.weight(e), &d, &nd) {
                    signal[n] = true;
                }
            }
        }
    }
    Ok(())
}

macro_rules! with_source {
    ($self:ident, |$src:ident| $body:expr) => {
        if $self.stock {
            let $src: &[u64] = &$self.copies[..];
            $body
        } else if let Some(words) = $self.direct {
            let $src = &DirectWords(words);
            $body
        } else {
            let $src = &ViewWords(&$self.view);
            $body
        }
    };
}

// Partition indices address several parallel per-partition arrays at once.
#[allow(clippy::needless_range_loop)]
impl<'a, P: VertexProgram, V: MemView> Worker<'a, P, V> {
    pub fn new(
        ctx: &'a Ctx<'a, P>,
        p: usize,
        view: V,
        direct: Option<&'a [AtomicU64]>,
    ) -> Result<Self, GraphError> {
        let plan = &ctx.plans[p];
        let parts = ctx.plans.len();
        let layout = ctx.layout;
        let stock = ctx.mode == Mode::Stock;
        let locals = plan.locals();
        let slot: Vec<u32> = (0..locals)
            .map(|l| {
                if stock {
                    (l * layout.value_stride) as u32
                } else {
                    let m = usize::from(plan.master_of[l]);
                    layout.value_word(m, plan.master_index[l] as usize) as u32
                }
            })
            .collect();
        let program = ctx.program;
        let to_slots = |csr: Option<&Csr>, wanted: bool| -> Vec<u32> {
            match csr {
                Some(csr) if wanted => csr.cols.iter().map(|&c| slot[c as usize]).collect(),
                _ => Vec::new(),
            }
        };
        let gdir = program.gather_direction();
        let gather_in = to_slots(plan.incoming.as_ref(), gdir.incoming());
        let gather_out = to_slots(plan.outgoing.as_ref(), gdir.outgoing());
        let mut senders = Vec::new();
        let mut receivers = Vec::new();
        for q in 0..parts {
            let tx = match layout.channels.get(p * parts + q).copied().flatten() {
                Some(l) if stock => Some(Sender::new(view.clone(), l)?),
                _ => None,
            };
            let rx = match layout.channels.get(q * parts + p).copied().flatten() {
                Some(l) if stock => Some(Receiver::new(view.clone(), l)?),
                _ => None,
            };
            senders.push(tx);
            receivers.push(rx);
        }
        let expect_partials = (0..parts)
            .map(|q| {
                if q == p {
                    0
                } else {
                    ctx.plans[q].replicas_of(p)
                }
            })
            .collect();
        let expect_values = (0..parts)
            .map(|q| {
                if q == p {
                    0
                } else {
                    ctx.plans[q].mirrors_on(p) + 1
                }
            })
            .collect();
        Ok(Worker {
            ctx,
            p,
            parts,
            plan,
            view,
            direct,
            stock,
            dw: words_of::<P::Data>(),
            gw: words_of::<P::Gather>(),
            slot,
            gather_in,
            gather_out,
            copies: if stock {
                vec![0; locals * layout.value_stride]
            } else {
                Vec::new()
            },
            mdata: Vec::with_capacity(plan.masters.len()),
            partial: vec![program.zero(); locals],
            signal: vec![false; locals],
            globals: program.aggregate_zero(),
            senders,
            receivers,
            out: vec![Vec::new(); parts],
            inbox: vec![Vec::new(); parts],
            expect_partials,
            expect_values,
            messages: 0,
            max_staleness: 0,
        })
    }

    fn info(&self, l: usize) -> VertexInfo {
        let v = self.plan.globals[l];
        VertexInfo {
            id: v,
            in_degree: self.ctx.in_degree[v as usize],
            out_degree: self.ctx.out_degree[v as usize],
        }
    }

    /// A word of shared memory, read directly on hardware and through the view otherwise.
    #[inline]
    fn shared_word(&self, i: usize) -> Result<u64, GraphError> {
        match self.direct {
            Some(words) => DirectWords(words).word(i),
            None => ViewWords(&self.view).word(i),
        }
        .map_err(mem_err)
    }

    fn store_words(&self, word: usize, w: &[u64]) -> Result<(), GraphError> {
        for (k, &x) in w.iter().enumerate() {
            self.view.store_u64((word + k) * 8, x).map_err(mem_err)?;
        }
        Ok(())
    }

    fn writeback(&self, ranges: &[(usize, usize)]) -> Result<(), GraphError> {
        for &(o, l) in ranges {
            self.view.writeback(o, l).map_err(mem_err)?;
        }
        Ok(())
    }

    fn invalidate(&self, ranges: &[(usize, usize)]) -> Result<(), GraphError> {
        if self.ctx.faults.has(Fault::GraphBarrier) {
            return Ok(());
        }
        for &(o, l) in ranges {
            self.view.invalidate(o, l).map_err(mem_err)?;
        }
        Ok(())
    }

    /// Publishes master `i`'s value: its own slot (BI) or its copy plus one message per
    /// replica (stock).
    fn put_value(&mut self, i: usize, data: &P::Data, meta: u64) -> Result<(), GraphError> {
        let w = encode(data);
        if self.stock {
            let l = self.plan.masters[i] as usize;
            let base = self.slot[l] as usize;
            self.copies[base..base + self.dw].copy_from_slice(&w[..self.dw]);
            if self.ctx.layout.value_meta {
                self.copies[base + self.dw] = meta;
            }
            let (a, b) = (
                self.plan.mirror_start[i] as usize,
                self.plan.mirror_start[i + 1] as usize,
            );
            for m in a..b {
                let q = usize::from(self.plan.mirror_part[m]);
                let lq = u64::from(self.plan.mirror_local[m]);
                self.out[q].push([lq, meta, w[0], w[1]]);
            }
        } else {
            let base = self.ctx.layout.value_word(self.p, i);
            self.store_words(base, &w[..self.dw])?;
            if self.ctx.layout.value_meta {
                self.view
                    .store_u64((base + self.dw) * 8, meta)
                    .map_err(mem_err)?;
            }
        }
        Ok(())
    }

    /// Sends everything in `out` and receives `expect[q]` messages from every `q`.
    fn exchange(&mut self, values: bool) -> Result<(), GraphError> {
        let mut sent = vec![0usize; self.parts];
        for b in &mut self.inbox {
            b.clear();
        }
        loop {
            let mut progress = false;
            let mut done = true;
            for q in 0..self.parts {
                if let Some(tx) = &mut self.senders[q]
                    && sent[q] < self.out[q].len()
                {
                    let n = tx.send_batch(&self.out[q][sent[q]..])?;
                    sent[q] += n;
                    progress |= n > 0;
                    done &= sent[q] == self.out[q].len();
                }
                let expect = if values {
                    self.expect_values[q]
                } else {
                    self.expect_partials[q]
                };
                if let Some(rx) = &mut self.receivers[q] {
                    let have = self.inbox[q].len();
                    if have < expect {
                        let n = rx.recv_batch(&mut self.inbox[q], expect - have)?;
                        progress |= n > 0;
                        done &= have + n == expect;
                    }
                }
            }
            if done {
                break;
            }
            if !progress {
                if self.ctx.barrier.is_aborted() {
                    return Err(Aborted.into());
                }
                std::thread::yield_now();
            }
        }
        for b in &mut self.out {
            self.messages += b.len() as u64;
            b.clear();
        }
        Ok(())
    }

    /// Publishes values and aggregates and learns everyone else's: returns the combined
    /// aggregate and the number of masters that changed.
    fn sync_values(
        &mut self,
        agg: P::Aggregate,
        changed: u64,
        fresh: bool,
    ) -> Result<(P::Aggregate, u64), GraphError> {
        let program = self.ctx.program;
        let aw = words_of::<P::Aggregate>();
        let mut parts_agg = vec![(program.aggregate_zero(), 0u64); self.parts];
        parts_agg[self.p] = (agg, changed);
        if self.stock {
            let a = encode(&agg);
            for q in 0..self.parts {
                if q != self.p {
                    self.out[q].push([u64::from(u32::MAX), changed, a[0], a[1]]);
                }
            }
            self.exchange(true)?;
            for q in 0..self.parts {
                if q == self.p {
                    continue;
                }
                let msgs = std::mem::take(&mut self.inbox[q]);
                let Some((last, values)) = msgs.split_last() else {
                    return Err(corrupt("missing aggregate"));
                };
                for m in values {
                    let base = *self
                        .slot
                        .get(m[0] as usize)
                        .ok_or_else(|| corrupt("replica index out of range"))?
                        as usize;
                    self.copies[base..base + self.dw].copy_from_slice(&[m[2], m[3]][..self.dw]);
                    if self.ctx.layout.value_meta {
                        self.copies[base + self.dw] = m[1];
                    }
                }
                parts_agg[q] = (decode(&[last[2], last[3]]), last[1]);
                self.inbox[q] = msgs;
            }
        } else {
            let sync = &self.ctx.sync[self.p];
            let a = encode(&agg);
            let base = sync.own_aggregate.0 / 8;
            self.store_words(base, &a[..aw])?;
            self.view
                .store_u64((base + aw) * 8, changed)
                .map_err(mem_err)?;
            if fresh && self.parts > 1 {
                self.writeback(&[sync.own_values])?;
            }
            self.writeback(&[sync.own_aggregate])?;
            self.view.fence();
            self.ctx.barrier.wait()?;
            self.invalidate(&sync.remote_aggregates)?;
            if fresh {
                self.invalidate(&sync.remote_values)?;
            }
            self.view.fence();
            for q in 0..self.parts {
                if q == self.p {
                    continue;
                }
                let base = self.ctx.sync[q].own_aggregate.0 / 8;
                let mut w = [0u64; 2];
                for (k, x) in w.iter_mut().enumerate().take(aw) {
                    *x = self.view.load_u64((base + k) * 8).map_err(mem_err)?;
                }
                let c = self.view.load_u64((base + aw) * 8).map_err(mem_err)?;
                parts_agg[q] = (decode(&w), c);
            }
        }
        let mut total = program.aggregate_zero();
        let mut changed_total = 0;
        for (a, c) in parts_agg {
            total = program.combine(total, a);
            changed_total += c;
        }
        Ok((total, changed_total))
    }

    /// Makes the current values visible everywhere (periodic mode, before a confirming
    /// superstep).
    fn sync_values_fresh(&mut self) -> Result<(), GraphError> {
        let sync = &self.ctx.sync[self.p];
        self.writeback(&[sync.own_values])?;
        self.view.fence();
        self.ctx.barrier.wait()?;
        self.invalidate(&sync.remote_values)?;
        self.view.fence();
        Ok(())
    }

    fn init(&mut self) -> Result<(), GraphError> {
        let program = self.ctx.program;
        let mut agg = program.aggregate_zero();
        let mut active = 0;
        for i in 0..self.plan.masters.len() {
            let info = self.info(self.plan.masters[i] as usize);
            let d = program.init(&info);
            let initially = program.initially_active(&info);
            active += u64::from(initially);
            agg = program.combine(agg, program.aggregate(&info, &d, &d));
            self.put_value(i, &d, u64::from(initially))?;
            self.mdata.push(d);
        }
        let (total, _) = self.sync_values(agg, active, true)?;
        self.globals = total;
        Ok(())
    }

    fn scatter(&mut self, step: usize) -> Result<(), GraphError> {
        let program = self.ctx.program;
        let (plan, slot) = (self.plan, &self.slot[..]);
        let signal = &mut self.signal[..];
        with_source!(self, |src| scatter_all(
            program,
            plan,
            slot,
            src,
            signal,
            step as u64
        ))
        .map_err(mem_err)
    }

    fn gather(&mut self, step: usize, fresh: bool) -> Result<(), GraphError> {
        let program = self.ctx.program;
        let plan = self.plan;
        let (gin, gout) = (&self.gather_in[..], &self.gather_out[..]);
        let out = &mut self.partial[..];
        let measure = self.ctx.mode == Mode::BiPeriodic;
        let expect = step as u64;
        let mut st = 0;
        let r = if measure {
            with_source!(self, |src| gather_all::<P, _, true>(
                program, plan, gin, gout, src, out, expect, &mut st
            ))
        } else {
            with_source!(self, |src| gather_all::<P, _, false>(
                program, plan, gin, gout, src, out, expect, &mut st
            ))
        };
        r.map_err(mem_err)?;
        self.max_staleness = self.max_staleness.max(st);
        // Replicas publish their partials, grouped by master partition.
        let stamp = (step as u64 + 1) << 1;
        let mut next = self
            .ctx
            .layout
            .segments
            .get(self.p)
            .cloned()
            .unwrap_or_default();
        for l in 0..plan.locals() {
            let m = usize::from(plan.master_of[l]);
            if m == self.p {
                continue;
            }
            let k = next[m];
            next[m] += 1;
            let g = encode(&self.partial[l]);
            let meta = stamp | u64::from(self.signal[l]);
            self.signal[l] = false;
            if self.stock {
                let i = u64::from(plan.master_index[l]);
                self.out[m].push([i, meta, g[0], g[1]]);
            } else {
                let base = self.ctx.layout.partial_word(self.p, k);
                self.store_words(base, &g[..self.gw])?;
                if self.ctx.layout.partial_meta {
                    self.view
                        .store_u64((base + self.gw) * 8, meta)
                        .map_err(mem_err)?;
                }
            }
        }
        if self.stock {
            self.exchange(false)?;
        } else {
            let sync = &self.ctx.sync[self.p];
            if fresh && self.parts > 1 {
                self.writeback(&[sync.own_partials])?;
                self.view.fence();
            }
            self.ctx.barrier.wait()?;
            if fresh {
                self.invalidate(&sync.remote_partials)?;
                self.view.fence();
            }
        }
        Ok(())
    }

    /// Folds partials, applies, publishes; returns this partition's aggregate and number
    /// of changed masters.
    fn apply(&mut self, step: usize, force: bool) -> Result<(P::Aggregate, u64), GraphError> {
        let program = self.ctx.program;
        let always = program.always_active() || force;
        let plan = self.plan;
        let mut cursor = vec![0usize; self.parts];
        let mut agg = program.aggregate_zero();
        let mut changed_count = 0;
        let stamp = step as u64 + 1;
        for i in 0..plan.masters.len() {
            let l = plan.masters[i] as usize;
            let mut acc = program.zero();
            let mut signalled = self.signal[l];
            self.signal[l] = false;
            let mut own_done = false;
            let (a, b) = (
                plan.mirror_start[i] as usize,
                plan.mirror_start[i + 1] as usize,
            );
            for m in a..b {
                let q = usize::from(plan.mirror_part[m]);
                if q > self.p && !own_done {
                    acc = program.sum(acc, self.partial[l]);
                    own_done = true;
                }
                let (meta, g) = if self.stock {
                    let msg = self.inbox[q]
                        .get(cursor[q])
                        .ok_or_else(|| corrupt("missing partial"))?;
                    cursor[q] += 1;
                    if msg[0] != i as u64 {
                        return Err(corrupt("partial out of order"));
                    }
                    (msg[1], [msg[2], msg[3]])
                } else {
                    let layout = self.ctx.layout;
                    let base = layout.partial_word(q, layout.segments[q][self.p] + cursor[q]);
                    cursor[q] += 1;
                    let mut g = [0u64; 2];
                    for (k, x) in g.iter_mut().enumerate().take(self.gw) {
                        *x = self.shared_word(base + k)?;
                    }
                    let meta = if layout.partial_meta {
                        self.shared_word(base + self.gw)?
                    } else {
                        stamp << 1
                    };
                    (meta, g)
                };
                if meta >> 1 == 0 {
                    continue; // never written (periodic mode: not yet visible)
                }
                self.max_staleness = self.max_staleness.max(stamp - (meta >> 1).min(stamp));
                signalled |= meta & 1 == 1;
                acc = program.sum(acc, decode(&g));
            }
            if !own_done {
                acc = program.sum(acc, self.partial[l]);
            }
            let info = self.info(l);
            let old = self.mdata[i];
            let new = if always || signalled {
                program.apply(&info, &old, acc, &self.globals)
            } else {
                old
            };
            let changed = bytemuck::bytes_of(&old) != bytemuck::bytes_of(&new);
            changed_count += u64::from(changed);
            agg = program.combine(agg, program.aggregate(&info, &old, &new));
            self.mdata[i] = new;
            self.put_value(i, &new, (stamp << 1) | u64::from(changed))?;
        }
        Ok((agg, changed_count))
    }

    pub fn run(mut self) -> Result<Outcome<P::Data>, GraphError> {
        let program = self.ctx.program;
        let periodic = self.ctx.mode == Mode::BiPeriodic;
        self.init()?;
        let started = std::time::Instant::now();
        let mut step = 0;
        let mut confirming = false;
        while step < self.ctx.max_iterations {
            let fresh = !periodic || confirming;
            if !program.always_active() {
                self.scatter(step)?;
            }
            self.gather(step, fresh)?;
            let (agg, changed) = self.apply(step, periodic && confirming)?;
            let (total, changed_total) = self.sync_values(agg, changed, fresh)?;
            self.globals = total;
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
                self.sync_values_fresh()?;
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
            messages: self.messages,
            max_staleness: self.max_staleness,
        })
    }
}
