//! The two-level exchange: shared slots inside a pool, messages between pools.

use super::messages::{Mailbox, Transport};
use super::slots::{Access, meet, write_slot};
use super::{Exchange, Meta, Quiescence, Words, padded};
use crate::engine::barrier::Barrier;
use crate::engine::memory::read_slot;
use crate::engine::plan::{PartPlan, PartShape};
use crate::engine::pools::Pools;
use crate::engine::shared::SharedLayout;
use crate::error::GraphError;
use bi_core::mem::{MemError, MemView};
use bi_core::runtime::{Fault, Faults};

fn mem(e: MemError) -> GraphError {
    GraphError::Runtime(e.into())
}

/// The lines one phase writes back (`own`) and drops (`remote`, pool peers' lines).
struct PhaseLines {
    own: Vec<(usize, usize)>,
    remote: Vec<(usize, usize)>,
}

/// Bounded Incoherence inside a pool (slots in the pool's region, quiescence at every
/// phase end, as on demand), messages by `T` between pools: a replica's partial to its
/// master in another pool, a master's value to its receiver in each other pool, which
/// puts it in a mirror slot that the pool's replicas read in place.
pub(crate) struct PooledSlots<'a, V, R, T> {
    p: usize,
    plan: &'a PartPlan,
    layout: &'a SharedLayout,
    pools: &'a Pools,
    barrier: &'a dyn Barrier,
    faults: Faults,
    transport: T,
    mail: Mailbox,
    view: V,
    access: R,
    /// The lines the partials phase writes back and drops.
    partial_lines: PhaseLines,
    /// The lines the values phase writes back and drops, by bank.
    value_lines: [PhaseLines; 2],
    words: [usize; 3],
    /// Value slot word of each local vertex (own slot, a pool peer's, or a mirror).
    slots: Vec<u32>,
    /// Next slot of this partition's partials for each master partition in the pool.
    next: Vec<usize>,
    /// Next slot of each pool peer's partials for this partition's masters.
    cursor: Vec<usize>,
    spent: Quiescence,
}

impl<'a, V: MemView, R: Access<V>, T: Transport> PooledSlots<'a, V, R, T> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        p: usize,
        plan: &'a PartPlan,
        shapes: &[PartShape],
        layout: &'a SharedLayout,
        pools: &'a Pools,
        barrier: &'a dyn Barrier,
        faults: Faults,
        transport: T,
        view: V,
        access: R,
        words: [usize; 3],
    ) -> Self {
        let parts = shapes.len();
        let same = |q: usize| pools.of(q) == pools.of(p);
        let slots: Vec<u32> = (0..plan.locals())
            .map(|l| match pools.replica_mirror[p][l] {
                Some((r, k)) => layout.mirror_word(r as usize, k as usize) as u32,
                None => {
                    let m = usize::from(plan.master_of[l]);
                    layout.value_word(m, plan.master_index[l] as usize) as u32
                }
            })
            .collect();
        // What this partition writes back, and the lines of its pool peers it reads.
        let own_value_lines = |w: u32| {
            let at = w as usize * 8;
            let (v, m) = (layout.values[p], layout.mirrors[p]);
            (v.offset..v.offset + v.len).contains(&at) || (m.offset..m.offset + m.len).contains(&at)
        };
        let remote_values = slots
            .iter()
            .filter(|&&w| !own_value_lines(w))
            .map(|&w| w as usize * 8)
            .collect();
        let ext = |e: crate::engine::shared::Extent| (e.offset, e.len);
        let partials = PhaseLines {
            own: vec![ext(layout.partials[p])],
            remote: (0..parts)
                .filter(|&q| q != p && same(q))
                .map(|q| layout.segment_range(q, p, shapes[q].feeders[p]))
                .filter(|&(_, len)| len > 0)
                .collect(),
        };
        let own_values = [ext(layout.values[p]), ext(layout.mirrors[p])];
        let remote_values = layout.runs(remote_values);
        let value_lines = [0, 1].map(|b| PhaseLines {
            own: layout.in_bank(&own_values, b),
            remote: layout.in_bank(&remote_values, b),
        });
        let expect_partials = (0..parts)
            .map(|q| if same(q) { 0 } else { shapes[q].feeders[p] })
            .collect();
        // Every other partition's aggregate, and the values this one receives.
        let expect_values = (0..parts)
            .map(|q| {
                if q == p {
                    0
                } else {
                    pools.values_from(q, p) + 1
                }
            })
            .collect();
        PooledSlots {
            p,
            plan,
            layout,
            pools,
            barrier,
            faults,
            transport,
            view,
            access,
            partial_lines: partials,
            value_lines,
            words,
            slots,
            next: layout.segments[p].clone(),
            cursor: vec![0; parts],
            mail: Mailbox::new(p, expect_partials, expect_values),
            spent: Quiescence::default(),
        }
    }

    fn same_pool(&self, q: usize) -> bool {
        self.pools.of(q) == self.pools.of(self.p)
    }

    /// Sends and receives this phase's messages (values land in the mirror slots of
    /// `values`' bank), then quiescence inside the pool over the phase's lines.
    fn exchange(&mut self, values: Option<usize>) -> Result<(), GraphError> {
        self.mail.exchange(&mut self.transport, values.is_some())?;
        if let Some(bank) = values {
            // Values from other pools land in this partition's mirror slots first.
            let (dw, meta) = (self.words[0], self.layout.value_meta);
            for q in (0..self.pools.mirrors.len()).filter(|&q| q != self.p) {
                let (received, _) = self.mail.values_from(q)?;
                for m in received {
                    let k = usize::try_from(m[0]).unwrap_or(usize::MAX);
                    if k >= self.pools.mirrors[self.p] {
                        return Err(GraphError::Exchange {
                            what: "a value for a mirror slot this partition does not have",
                        });
                    }
                    let at = self.layout.mirror_word(self.p, k) + self.layout.bank_words(bank);
                    write_slot(
                        &self.access,
                        &self.view,
                        at,
                        &[m[2], m[3]][..dw],
                        meta.then_some(m[1]),
                    )
                    .map_err(mem)?;
                }
            }
        }
        let lines = match values {
            Some(b) => &self.value_lines[b],
            None => &self.partial_lines,
        };
        let invalidate = !self.faults.has(Fault::GraphBarrier);
        meet(
            &self.view,
            self.barrier,
            &lines.own,
            &[&lines.remote],
            invalidate,
            &mut self.spent,
        )?;
        self.cursor.fill(0);
        Ok(())
    }
}

impl<V: MemView, R: Access<V>, T: Transport> Exchange for PooledSlots<'_, V, R, T> {
    type Source<'s>
        = R::Source<'s>
    where
        Self: 's;

    #[inline]
    fn source(&self, bank: usize) -> R::Source<'_> {
        self.access.source(&self.view, self.layout.bank_words(bank))
    }

    fn value_word(&self, l: usize) -> usize {
        self.slots[l] as usize
    }

    fn put_value(
        &mut self,
        i: usize,
        bank: usize,
        value: &[u64],
        meta: Meta,
    ) -> Result<(), GraphError> {
        let base = self.layout.value_word(self.p, i) + self.layout.bank_words(bank);
        let slot_meta = self.layout.value_meta.then_some(meta.word());
        write_slot(&self.access, &self.view, base, value, slot_meta).map_err(mem)?;
        let value = padded(value);
        let starts = &self.pools.send_start[self.p];
        let sends = starts[i] as usize..starts[i + 1] as usize;
        for &(r, k) in &self.pools.sends[self.p][sends] {
            self.mail
                .send_value(r as usize, [u64::from(k), meta.word(), value[0], value[1]]);
        }
        Ok(())
    }

    fn put_partial(&mut self, l: usize, partial: Words, meta: Meta) -> Result<(), GraphError> {
        let m = usize::from(self.plan.master_of[l]);
        if !self.same_pool(m) {
            let i = u64::from(self.plan.master_index[l]);
            self.mail
                .send_partial(m, [i, meta.word(), partial[0], partial[1]]);
            return Ok(());
        }
        let base = self.layout.partial_word(self.p, self.next[m]);
        self.next[m] += 1;
        let slot_meta = self.layout.partial_meta.then_some(meta.word());
        write_slot(
            &self.access,
            &self.view,
            base,
            &partial[..self.words[1]],
            slot_meta,
        )
        .map_err(mem)
    }

    fn exchange_partials(&mut self, _fresh: bool) -> Result<(), GraphError> {
        self.next.clone_from(&self.layout.segments[self.p]);
        self.exchange(None)
    }

    fn next_partial(&mut self, q: usize, i: usize) -> Result<(Option<Meta>, Words), GraphError> {
        if !self.same_pool(q) {
            return self.mail.next_partial(q, i);
        }
        let layout = self.layout;
        let base = layout.partial_word(q, layout.segments[q][self.p] + self.cursor[q]);
        self.cursor[q] += 1;
        let (meta, words) =
            read_slot(&self.source(0), base, self.words[1], layout.partial_meta).map_err(mem)?;
        Ok((meta.map(Meta::from_word), words))
    }

    fn exchange_values(
        &mut self,
        bank: usize,
        aggregate: Words,
        changed: u64,
        _fresh: bool,
        all: &mut [(Words, u64)],
    ) -> Result<(), GraphError> {
        self.mail.push_aggregate(aggregate, changed);
        self.exchange(Some(bank))?;
        self.mail.aggregates((aggregate, changed), all)
    }

    fn refresh_values(&mut self, _bank: usize) -> Result<(), GraphError> {
        // Every exchange is fresh here.
        Ok(())
    }

    fn messages(&self) -> u64 {
        self.mail.sent
    }

    fn quiescence(&self) -> Quiescence {
        self.spent
    }
}
