//! The BI exchange: every value and partial in one slot of its writer's lines, read in
//! place by the others.

use super::{Exchange, Words};
use crate::engine::barrier::Barrier;
use crate::engine::memory::{DirectWords, ViewWords, WordSource, read_slot, write_slot};
use crate::engine::plan::PartPlan;
use crate::engine::shared::SharedLayout;
use crate::engine::worker::SyncPlan;
use crate::error::GraphError;
use bi_core::mem::{MemError, MemView};
use bi_core::runtime::{Fault, Faults};
use std::sync::atomic::AtomicU64;

/// How a partition loads shared words in its hot loops.
pub(crate) trait Loads<V>: Send {
    /// The loads' source, borrowing the view.
    type Source<'s>: WordSource
    where
        Self: 's,
        V: 's;
    /// The source over `view`.
    fn source<'s>(&'s self, view: &'s V) -> Self::Source<'s>;
}

/// Plain loads of the region's words (hardware: what the view does, without its checks
/// of alignment and range on every word). Not under loom, whose words are its atomics.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) struct Direct<'a>(pub &'a [AtomicU64]);

impl<V> Loads<V> for Direct<'_> {
    type Source<'s>
        = DirectWords<'s>
    where
        Self: 's,
        V: 's;
    #[inline]
    fn source<'s>(&'s self, _view: &'s V) -> DirectWords<'s> {
        DirectWords(self.0)
    }
}

/// Loads through the view (the emulator, whose caches the view is).
pub(crate) struct Viewed;

impl<V: MemView> Loads<V> for Viewed {
    type Source<'s>
        = ViewWords<'s, V>
    where
        V: 's;
    #[inline]
    fn source<'s>(&'s self, view: &'s V) -> ViewWords<'s, V> {
        ViewWords(view)
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
) -> Result<(), GraphError> {
    for &(o, l) in own {
        view.writeback(o, l).map_err(mem)?;
    }
    view.fence();
    barrier.wait()?;
    for &(o, l) in remote.iter().copied().flatten().filter(|_| invalidate) {
        view.invalidate(o, l).map_err(mem)?;
    }
    view.fence();
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
    sync: &'a [SyncPlan],
    barrier: &'a dyn Barrier,
    faults: Faults,
    view: V,
    loads: R,
    dw: usize,
    gw: usize,
    aw: usize,
    /// Next slot, in this partition's partial array, for each master partition.
    next: Vec<usize>,
    /// Next slot to read in each partition's segment for this partition's masters.
    cursor: Vec<usize>,
}

fn mem(e: MemError) -> GraphError {
    GraphError::Runtime(e.into())
}

impl<'a, V: MemView, R: Loads<V>> SharedSlots<'a, V, R> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        p: usize,
        plans: &'a [PartPlan],
        layout: &'a SharedLayout,
        sync: &'a [SyncPlan],
        barrier: &'a dyn Barrier,
        faults: Faults,
        view: V,
        loads: R,
        words: [usize; 3],
    ) -> Self {
        let [dw, gw, aw] = words;
        SharedSlots {
            p,
            plan: &plans[p],
            layout,
            sync,
            barrier,
            faults,
            view,
            loads,
            dw,
            gw,
            aw,
            next: layout.segments.get(p).cloned().unwrap_or_default(),
            cursor: vec![0; plans.len()],
        }
    }

    /// Writes the slot at word `base`, with its meta word when the layout keeps one.
    fn put(&self, base: usize, w: &[u64], meta: Option<u64>) -> Result<(), GraphError> {
        write_slot(&self.view, base, w, meta).map_err(mem)
    }

    fn writeback(&self, ranges: &[(usize, usize)]) -> Result<(), GraphError> {
        for &(o, l) in ranges {
            self.view.writeback(o, l).map_err(mem)?;
        }
        Ok(())
    }

    /// Quiescence at a phase end: write back `own`, meet, drop `remote`.
    fn meet(&self, own: &[(usize, usize)], remote: &[&[(usize, usize)]]) -> Result<(), GraphError> {
        let invalidate = !self.faults.has(Fault::GraphBarrier);
        meet(&self.view, self.barrier, own, remote, invalidate)
    }

    fn parts(&self) -> usize {
        self.sync.len()
    }
}

impl<V: MemView, R: Loads<V>> Exchange for SharedSlots<'_, V, R> {
    type Source<'s>
        = R::Source<'s>
    where
        Self: 's;

    #[inline]
    fn source(&self) -> R::Source<'_> {
        self.loads.source(&self.view)
    }

    fn value_word(&self, l: usize) -> usize {
        let m = usize::from(self.plan.master_of[l]);
        self.layout
            .value_word(m, self.plan.master_index[l] as usize)
    }

    #[inline]
    fn put_value(&mut self, i: usize, value: Words, meta: u64) -> Result<(), GraphError> {
        let base = self.layout.value_word(self.p, i);
        let meta = self.layout.value_meta.then_some(meta);
        self.put(base, &value[..self.dw], meta)
    }

    #[inline]
    fn put_partial(&mut self, l: usize, partial: Words, meta: u64) -> Result<(), GraphError> {
        let m = usize::from(self.plan.master_of[l]);
        let base = self.layout.partial_word(self.p, self.next[m]);
        self.next[m] += 1;
        let meta = self.layout.partial_meta.then_some(meta);
        self.put(base, &partial[..self.gw], meta)
    }

    fn exchange_partials(&mut self, fresh: bool) -> Result<(), GraphError> {
        self.next.clone_from(&self.layout.segments[self.p]);
        self.cursor.fill(0);
        let sync = &self.sync[self.p];
        if fresh && self.parts() > 1 {
            self.meet(&[sync.own_partials], &[&sync.remote_partials])
        } else {
            Ok(self.barrier.wait()?)
        }
    }

    #[inline]
    fn next_partial(&mut self, q: usize, _i: usize) -> Result<(Option<u64>, Words), GraphError> {
        let layout = self.layout;
        let base = layout.partial_word(q, layout.segments[q][self.p] + self.cursor[q]);
        self.cursor[q] += 1;
        read_slot(&self.source(), base, self.gw, layout.partial_meta).map_err(mem)
    }

    fn exchange_values(
        &mut self,
        aggregate: Words,
        changed: u64,
        fresh: bool,
        all: &mut [(Words, u64)],
    ) -> Result<(), GraphError> {
        let sync = &self.sync[self.p];
        let base = sync.own_aggregate.0 / 8;
        self.put(base, &aggregate[..self.aw], Some(changed))?;
        // Aggregates are always exchanged fresh; values only when asked.
        if fresh && self.parts() > 1 {
            self.writeback(&[sync.own_values])?;
        }
        let remote_values: &[(usize, usize)] = if fresh { &sync.remote_values } else { &[] };
        self.meet(
            &[sync.own_aggregate],
            &[&sync.remote_aggregates, remote_values],
        )?;
        for (q, slot) in all.iter_mut().enumerate() {
            if q == self.p {
                *slot = (aggregate, changed);
                continue;
            }
            let base = self.sync[q].own_aggregate.0 / 8;
            let mut w = [0u64; 2];
            for (k, x) in w.iter_mut().enumerate().take(self.aw) {
                *x = self.view.load_u64((base + k) * 8).map_err(mem)?;
            }
            let c = self.view.load_u64((base + self.aw) * 8).map_err(mem)?;
            *slot = (w, c);
        }
        Ok(())
    }

    fn refresh_values(&mut self) -> Result<(), GraphError> {
        let sync = &self.sync[self.p];
        self.meet(&[sync.own_values], &[&sync.remote_values])
    }

    fn messages(&self) -> u64 {
        0
    }
}
