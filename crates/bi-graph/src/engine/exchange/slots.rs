//! The BI exchange: every value and partial in one slot of its writer's lines, read in
//! place by the others.

use super::{Exchange, Meta, Quiescence, Words, lap};
use crate::engine::barrier::Barrier;
use crate::engine::memory::{DirectWords, ViewWords, WordSource, out_of_bounds, read_slot};
use crate::engine::plan::PartPlan;
use crate::engine::shared::SharedLayout;
use crate::engine::tracked::Marks;
use crate::engine::worker::SyncPlan;
use crate::error::GraphError;
use bi_core::mem::{MemError, MemView};
use bi_core::runtime::{Fault, Faults};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// How a partition loads and stores shared words in its hot loops.
pub(crate) trait Access<V>: Send {
    /// The loads' source, borrowing the view.
    type Source<'s>: WordSource
    where
        Self: 's,
        V: 's;
    /// The source over `view` whose word 0 is the view's word `base`.
    fn source<'s>(&'s self, view: &'s V, base: usize) -> Self::Source<'s>;
    /// Stores `x` at word `i` of `view`.
    fn store(&self, view: &V, i: usize, x: u64) -> Result<(), MemError>;
}

/// Plain loads and stores of the region's words (hardware: what the view does, with the
/// same orderings, without its checks of alignment on every word). Not under loom, whose
/// words are its atomics.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) struct Direct<'a>(pub &'a [AtomicU64]);

impl<V> Access<V> for Direct<'_> {
    type Source<'s>
        = DirectWords<'s>
    where
        Self: 's,
        V: 's;
    #[inline]
    fn source<'s>(&'s self, _view: &'s V, base: usize) -> DirectWords<'s> {
        DirectWords(self.0.get(base..).unwrap_or_default())
    }
    #[inline(always)]
    fn store(&self, _view: &V, i: usize, x: u64) -> Result<(), MemError> {
        let word = self
            .0
            .get(i)
            .ok_or_else(|| out_of_bounds(i, self.0.len()))?;
        word.store(x, Ordering::Release);
        Ok(())
    }
}

/// Loads and stores through the view (the emulator, whose caches the view is).
pub(crate) struct Viewed;

impl<V: MemView> Access<V> for Viewed {
    type Source<'s>
        = ViewWords<'s, V>
    where
        V: 's;
    #[inline]
    fn source<'s>(&'s self, view: &'s V, base: usize) -> ViewWords<'s, V> {
        ViewWords { view, base }
    }
    #[inline]
    fn store(&self, view: &V, i: usize, x: u64) -> Result<(), MemError> {
        view.store_u64(i.saturating_mul(8), x)
    }
}

/// Writes a slot from word `base`: the value words, then the meta word when given.
#[inline(always)]
pub(crate) fn write_slot<V, A: Access<V>>(
    access: &A,
    view: &V,
    base: usize,
    words: &[u64],
    meta: Option<u64>,
) -> Result<(), MemError> {
    for (k, &x) in words.iter().enumerate() {
        access.store(view, base + k, x)?;
    }
    match meta {
        Some(m) => access.store(view, base + words.len(), m),
        None => Ok(()),
    }
}

/// Quiescence at a phase end, the BI exchanges' only synchronisation: write back the
/// lines this partition wrote (`own`), fence, wait at the barrier, then drop the lines of
/// others it will read (`remote`; not with `invalidate` off, the negative control) and
/// fence.
pub(crate) fn meet<V: MemView>(
    view: &V,
    barrier: &dyn Barrier,
    own: &[(usize, usize)],
    remote: &[&[(usize, usize)]],
    invalidate: bool,
    spent: &mut Quiescence,
) -> Result<(), GraphError> {
    let mut since = Instant::now();
    for &(o, l) in own {
        view.writeback(o, l).map_err(mem)?;
    }
    view.fence();
    lap(&mut since, &mut spent.write_back);
    barrier.wait()?;
    lap(&mut since, &mut spent.wait);
    for &(o, l) in remote.iter().copied().flatten().filter(|_| invalidate) {
        view.invalidate(o, l).map_err(mem)?;
    }
    view.fence();
    lap(&mut since, &mut spent.invalidate);
    Ok(())
}

/// Bounded Incoherence's exchange: a replica reads its master's value slot where the
/// master wrote it, a master reads its replicas' partial slots where they wrote them.
/// Each line has one writer; the only question is when a reader's copy of another
/// partition's line is refreshed, and that is `fresh`: write back before the barrier,
/// invalidate what will be read after it. Without `fresh` (the periodic mode) the
/// runtime's background passes refresh lines, and the phase ends only wait.
pub(crate) struct SharedSlots<'a, V, R> {
    p: usize,
    plan: &'a PartPlan,
    layout: &'a SharedLayout,
    sync: &'a SyncPlan,
    barrier: &'a dyn Barrier,
    faults: Faults,
    view: V,
    access: R,
    gw: usize,
    aw: usize,
    /// Word of this partition's first value slot, in each bank.
    own_values: [usize; 2],
    /// The layout's value slot shape, at hand for `put_value`.
    value_stride: usize,
    value_meta: bool,
    /// Next slot, in this partition's partial array, for each master partition.
    next: Vec<usize>,
    /// Next slot to read in each partition's segment for this partition's masters.
    cursor: Vec<usize>,
    /// Where its stores are marked for the periodic mode's passes.
    marks: Option<&'a Marks>,
    spent: Quiescence,
}

fn mem(e: MemError) -> GraphError {
    GraphError::Runtime(e.into())
}

impl<'a, V: MemView, R: Access<V>> SharedSlots<'a, V, R> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        p: usize,
        plan: &'a PartPlan,
        layout: &'a SharedLayout,
        sync: &'a SyncPlan,
        barrier: &'a dyn Barrier,
        faults: Faults,
        view: V,
        access: R,
        words: [usize; 3],
        marks: Option<&'a Marks>,
    ) -> Self {
        let [_, gw, aw] = words;
        SharedSlots {
            p,
            plan,
            layout,
            sync,
            barrier,
            faults,
            view,
            access,
            gw,
            aw,
            own_values: [0, 1].map(|b| layout.value_word(p, 0) + layout.bank_words(b)),
            value_stride: layout.value_stride,
            value_meta: layout.value_meta,
            next: layout.segments.get(p).cloned().unwrap_or_default(),
            cursor: vec![0; layout.values.len()],
            marks,
            spent: Quiescence::default(),
        }
    }

    /// Writes the slot at word `base`, with its meta word when the layout keeps one.
    #[inline(always)]
    fn put(&self, base: usize, w: &[u64], meta: Option<u64>) -> Result<(), GraphError> {
        write_slot(&self.access, &self.view, base, w, meta).map_err(mem)?;
        if let Some(marks) = self.marks {
            marks.mark(base, w.len() + usize::from(meta.is_some()));
        }
        Ok(())
    }

    fn writeback(&mut self, ranges: &[(usize, usize)]) -> Result<(), GraphError> {
        let mut since = Instant::now();
        for &(o, l) in ranges {
            self.view.writeback(o, l).map_err(mem)?;
        }
        lap(&mut since, &mut self.spent.write_back);
        Ok(())
    }

    /// Quiescence at a phase end: write back `own`, meet, drop `remote`.
    fn meet(
        &mut self,
        own: &[(usize, usize)],
        remote: &[&[(usize, usize)]],
    ) -> Result<(), GraphError> {
        let invalidate = !self.faults.has(Fault::GraphBarrier);
        let spent = &mut self.spent;
        meet(&self.view, self.barrier, own, remote, invalidate, spent)
    }

    fn parts(&self) -> usize {
        self.layout.values.len()
    }
}

impl<V: MemView, R: Access<V>> Exchange for SharedSlots<'_, V, R> {
    type Source<'s>
        = R::Source<'s>
    where
        Self: 's;

    #[inline]
    fn source(&self, bank: usize) -> R::Source<'_> {
        self.access.source(&self.view, self.layout.bank_words(bank))
    }

    fn value_word(&self, l: usize) -> usize {
        let m = usize::from(self.plan.master_of[l]);
        self.layout
            .value_word(m, self.plan.master_index[l] as usize)
    }

    #[inline(always)]
    fn put_value(
        &mut self,
        i: usize,
        bank: usize,
        value: &[u64],
        meta: Meta,
    ) -> Result<(), GraphError> {
        let base = self.own_values[bank] + i * self.value_stride;
        let meta = self.value_meta.then_some(meta.word());
        self.put(base, value, meta)
    }

    #[inline]
    fn put_partial(&mut self, l: usize, partial: Words, meta: Meta) -> Result<(), GraphError> {
        let m = usize::from(self.plan.master_of[l]);
        let base = self.layout.partial_word(self.p, self.next[m]);
        self.next[m] += 1;
        let meta = self.layout.partial_meta.then_some(meta.word());
        self.put(base, &partial[..self.gw], meta)
    }

    fn exchange_partials(&mut self, fresh: bool) -> Result<(), GraphError> {
        self.next.clone_from(&self.layout.segments[self.p]);
        self.cursor.fill(0);
        let sync = self.sync;
        if fresh && self.parts() > 1 {
            self.meet(&[sync.own_partials], &[&sync.remote_partials])
        } else {
            let mut since = Instant::now();
            self.barrier.wait()?;
            lap(&mut since, &mut self.spent.wait);
            Ok(())
        }
    }

    #[inline]
    fn next_partial(&mut self, q: usize, _i: usize) -> Result<(Option<Meta>, Words), GraphError> {
        let layout = self.layout;
        let base = layout.partial_word(q, layout.segments[q][self.p] + self.cursor[q]);
        self.cursor[q] += 1;
        let (meta, words) =
            read_slot(&self.source(0), base, self.gw, layout.partial_meta).map_err(mem)?;
        Ok((meta.map(Meta::from_word), words))
    }

    fn exchange_values(
        &mut self,
        bank: usize,
        aggregate: Words,
        changed: u64,
        fresh: bool,
        all: &mut [(Words, u64)],
    ) -> Result<(), GraphError> {
        let sync = self.sync;
        let base = sync.own_aggregate[bank].0 / 8;
        self.put(base, &aggregate[..self.aw], Some(changed))?;
        // Aggregates are always exchanged fresh, in the line of `bank` (a partition that
        // is done reading them may already write the next superstep's, in the other
        // line); values only when asked.
        if fresh && self.parts() > 1 {
            self.writeback(&[sync.own_values[bank]])?;
        }
        let remote_values: &[(usize, usize)] = if fresh {
            &sync.remote_values[bank]
        } else {
            &[]
        };
        self.meet(
            &[sync.own_aggregate[bank]],
            &[&sync.remote_aggregates[bank], remote_values],
        )?;
        for (q, slot) in all.iter_mut().enumerate() {
            if q == self.p {
                *slot = (aggregate, changed);
                continue;
            }
            let base = self.layout.aggregate_line(q, bank).0 / 8;
            let mut w = [0u64; 2];
            for (k, x) in w.iter_mut().enumerate().take(self.aw) {
                *x = self.view.load_u64((base + k) * 8).map_err(mem)?;
            }
            let c = self.view.load_u64((base + self.aw) * 8).map_err(mem)?;
            *slot = (w, c);
        }
        Ok(())
    }

    fn refresh_values(&mut self, bank: usize) -> Result<(), GraphError> {
        let sync = self.sync;
        self.meet(&[sync.own_values[bank]], &[&sync.remote_values[bank]])
    }

    fn messages(&self) -> u64 {
        0
    }

    fn quiescence(&self) -> Quiescence {
        self.spent
    }
}
