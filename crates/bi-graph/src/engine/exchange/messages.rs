//! The stock exchange: private replica copies, and messages for everything that crosses.

use super::{Exchange, Meta, Words, padded};
use crate::engine::barrier::{Aborted, Barrier};
use crate::engine::memory::LocalWords;
use crate::engine::plan::{PartPlan, PartShape};
use crate::engine::shared::{Msg, SharedLayout};
use crate::error::GraphError;
use bi_core::channel::{Receiver, Sender};
use bi_core::mem::MemView;

/// Marks the aggregate message that ends a partition's values (no vertex has this index).
const AGGREGATE: u64 = u32::MAX as u64;

/// How messages travel between partitions: every partition sends `out[q]` to every `q`
/// and receives `expect[q]` messages from every `q`, in one step all partitions take.
pub(crate) trait Transport {
    fn exchange(
        &mut self,
        out: &[Vec<Msg>],
        inbox: &mut [Vec<Msg>],
        expect: &[usize],
    ) -> Result<(), GraphError>;
}

/// SPSC channels in shared memory, one per ordered pair of partitions.
pub(crate) struct Channels<'a, V: MemView> {
    senders: Vec<Option<Sender<V, Msg>>>,
    receivers: Vec<Option<Receiver<V, Msg>>>,
    barrier: &'a dyn Barrier,
}

impl<'a, V: MemView> Channels<'a, V> {
    /// Partition `p`'s ends of the channels in `layout`, over `view`.
    pub fn new(
        p: usize,
        layout: &SharedLayout,
        view: &V,
        barrier: &'a dyn Barrier,
    ) -> Result<Self, GraphError> {
        let parts = layout.values.len();
        let channel =
            |from: usize, to: usize| layout.channels.get(from * parts + to).copied().flatten();
        let mut senders = Vec::with_capacity(parts);
        let mut receivers = Vec::with_capacity(parts);
        for q in 0..parts {
            senders.push(match channel(p, q) {
                Some(c) => Some(Sender::new(view.clone(), c)?),
                None => None,
            });
            receivers.push(match channel(q, p) {
                Some(c) => Some(Receiver::new(view.clone(), c)?),
                None => None,
            });
        }
        Ok(Channels {
            senders,
            receivers,
            barrier,
        })
    }
}

impl<V: MemView> Transport for Channels<'_, V> {
    // Partition indices address several parallel per-partition arrays at once.
    #[allow(clippy::needless_range_loop)]
    fn exchange(
        &mut self,
        out: &[Vec<Msg>],
        inbox: &mut [Vec<Msg>],
        expect: &[usize],
    ) -> Result<(), GraphError> {
        let parts = out.len();
        let mut sent = vec![0usize; parts];
        loop {
            let mut progress = false;
            let mut done = true;
            for q in 0..parts {
                if let Some(tx) = &mut self.senders[q]
                    && sent[q] < out[q].len()
                {
                    let n = tx.send_batch(&out[q][sent[q]..])?;
                    sent[q] += n;
                    progress |= n > 0;
                    done &= sent[q] == out[q].len();
                }
                if let Some(rx) = &mut self.receivers[q] {
                    let have = inbox[q].len();
                    if have < expect[q] {
                        let n = rx.recv_batch(&mut inbox[q], expect[q] - have)?;
                        progress |= n > 0;
                        done &= have + n == expect[q];
                    }
                }
            }
            if done {
                return Ok(());
            }
            if !progress {
                if self.barrier.is_aborted() {
                    return Err(Aborted.into());
                }
                std::thread::yield_now();
            }
        }
    }
}

/// One partition's messages of a superstep: what it sends every partition in each phase,
/// what it received from every partition in the last one, and how many it expects from
/// each in either phase. A phase's messages wait in their own outbox until the phase's
/// exchange: values put before the partials are exchanged still travel with the values.
pub(crate) struct Mailbox {
    p: usize,
    /// `out[values][q]`: what the partials (0) or values (1) phase sends partition `q`.
    out: [Vec<Vec<Msg>>; 2],
    inbox: Vec<Vec<Msg>>,
    expect_partials: Vec<usize>,
    expect_values: Vec<usize>,
    /// Next unread message of each partition's inbox.
    cursor: Vec<usize>,
    /// Messages sent so far.
    pub sent: u64,
}

impl Mailbox {
    /// Partition `p`'s mailbox, expecting `expect_partials[q]` partials and
    /// `expect_values[q]` values (its aggregate included) from partition `q`.
    pub fn new(p: usize, expect_partials: Vec<usize>, expect_values: Vec<usize>) -> Self {
        let parts = expect_values.len();
        Mailbox {
            p,
            out: [0, 1].map(|_| vec![Vec::new(); parts]),
            inbox: vec![Vec::new(); parts],
            expect_partials,
            expect_values,
            cursor: vec![0; parts],
            sent: 0,
        }
    }

    /// Sends everything in `out` and receives what every partition sends here.
    pub fn exchange<T: Transport>(
        &mut self,
        transport: &mut T,
        values: bool,
    ) -> Result<(), GraphError> {
        for b in &mut self.inbox {
            b.clear();
        }
        let expect = if values {
            &self.expect_values
        } else {
            &self.expect_partials
        };
        let out = &mut self.out[usize::from(values)];
        transport.exchange(out, &mut self.inbox, expect)?;
        for b in out {
            self.sent += b.len() as u64;
            b.clear();
        }
        self.cursor.fill(0);
        Ok(())
    }

    /// Sends `msg` to partition `q` in the partials phase.
    pub fn send_partial(&mut self, q: usize, msg: Msg) {
        self.out[0][q].push(msg);
    }

    /// Sends `msg` to partition `q` in the values phase.
    pub fn send_value(&mut self, q: usize, msg: Msg) {
        self.out[1][q].push(msg);
    }

    /// Ends this partition's values to every other partition with its aggregate.
    pub fn push_aggregate(&mut self, aggregate: Words, changed: u64) {
        for (q, out) in self.out[1].iter_mut().enumerate() {
            if q != self.p {
                out.push([AGGREGATE, changed, aggregate[0], aggregate[1]]);
            }
        }
    }

    /// What partition `q` sent in the values phase: its values, then its aggregate and
    /// count of changed masters.
    pub fn values_from(&self, q: usize) -> Result<(&[Msg], (Words, u64)), GraphError> {
        let Some((last, values)) = self.inbox[q].split_last() else {
            return Err(GraphError::Exchange {
                what: "missing aggregate",
            });
        };
        if last[0] != AGGREGATE {
            return Err(GraphError::Exchange {
                what: "values after the aggregate",
            });
        }
        Ok((values, ([last[2], last[3]], last[1])))
    }

    /// Every partition's aggregate and changed count into `all`: this one's is `own`,
    /// the others' are what they sent last in the values phase.
    pub fn aggregates(
        &self,
        own: (Words, u64),
        all: &mut [(Words, u64)],
    ) -> Result<(), GraphError> {
        for (q, slot) in all.iter_mut().enumerate() {
            *slot = if q == self.p {
                own
            } else {
                self.values_from(q)?.1
            };
        }
        Ok(())
    }

    /// The next partial partition `q` sent, which must be for master `i`.
    pub fn next_partial(
        &mut self,
        q: usize,
        i: usize,
    ) -> Result<(Option<Meta>, Words), GraphError> {
        let msg = self.inbox[q]
            .get(self.cursor[q])
            .ok_or_else(|| GraphError::Exchange {
                what: "missing partial",
            })?;
        self.cursor[q] += 1;
        if msg[0] != i as u64 {
            return Err(GraphError::Exchange {
                what: "partial out of order",
            });
        }
        Ok((Some(Meta::from_word(msg[1])), [msg[2], msg[3]]))
    }
}

/// PowerGraph's exchange: a replica's partial is a message to its master, a master's
/// value a message to each of its replicas, which copy it into private memory where
/// gather reads it. Messages travel by `T` (channels in shared memory, or MPI).
pub(crate) struct Messages<'a, T> {
    p: usize,
    plan: &'a PartPlan,
    transport: T,
    mail: Mailbox,
    /// Replica copies and this partition's own masters' values, one slot per local.
    copies: Copies,
}

/// A partition's private value slots, `stride` words per local vertex, in two banks
/// (the values of stamp `s` in bank `s % 2`, as in shared memory).
struct Copies {
    words: [Vec<u64>; 2],
    stride: usize,
    dw: usize,
    meta: bool,
}

impl Copies {
    #[inline(always)]
    fn put(&mut self, l: usize, bank: usize, value: &[u64], meta: u64) -> Result<(), GraphError> {
        let stride = self.stride;
        let words = &mut self.words[bank];
        let Some(slot) = l
            .checked_mul(stride)
            .and_then(|base| words.get_mut(base..)?.get_mut(..stride))
        else {
            return Err(out_of_range());
        };
        for (x, &v) in slot.iter_mut().zip(value) {
            *x = v;
        }
        if self.meta {
            slot[value.len()] = meta;
        }
        Ok(())
    }
}

#[cold]
fn out_of_range() -> GraphError {
    GraphError::Exchange {
        what: "replica index out of range",
    }
}

/// The messages partition `p` receives each superstep from each partition: partials
/// from the replicas there that feed its masters, and values of the masters there that
/// it holds replicas of (the aggregate counts as one more).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Expected {
    pub partials: Vec<usize>,
    pub values: Vec<usize>,
}

impl Expected {
    /// What partition `p` receives, from the shape of every partition's plan.
    pub fn from_shapes(shapes: &[PartShape], p: usize) -> Expected {
        Expected::counting(shapes.len(), p, |q| {
            let shape = &shapes[q];
            (shape.feeders[p], shape.mirrors[p])
        })
    }

    /// What partition `p` of `parts` receives, `from(q)` being the partials and values
    /// partition `q` sends it.
    pub fn counting(parts: usize, p: usize, from: impl Fn(usize) -> (usize, usize)) -> Expected {
        let mut expected = Expected::default();
        for q in 0..parts {
            let (partials, values) = if q == p { (0, 0) } else { from(q) };
            expected.partials.push(partials);
            // Every value of a master replicated here, then the aggregate.
            expected.values.push(if q == p { 0 } else { values + 1 });
        }
        expected
    }
}

impl<'a, T: Transport> Messages<'a, T> {
    /// Partition `p`'s exchange over `transport`: its `plan`, what it receives, and its
    /// copies of values in slots of `stride` words of which `data_words` hold the value
    /// (then a meta word if `meta`).
    pub fn new(
        p: usize,
        plan: &'a PartPlan,
        expected: Expected,
        (stride, meta): (usize, bool),
        transport: T,
        data_words: usize,
    ) -> Self {
        Messages {
            p,
            plan,
            transport,
            mail: Mailbox::new(p, expected.partials, expected.values),
            copies: Copies {
                words: [0, 1].map(|_| vec![0; plan.locals() * stride]),
                stride,
                dw: data_words,
                meta,
            },
        }
    }
}

impl<T: Transport> Exchange for Messages<'_, T> {
    type Source<'s>
        = LocalWords<'s>
    where
        Self: 's;

    #[inline]
    fn source(&self, bank: usize) -> LocalWords<'_> {
        LocalWords(&self.copies.words[bank])
    }

    fn value_word(&self, l: usize) -> usize {
        l * self.copies.stride
    }

    #[inline(always)]
    fn put_value(
        &mut self,
        i: usize,
        bank: usize,
        value: &[u64],
        meta: Meta,
    ) -> Result<(), GraphError> {
        let plan = self.plan;
        self.copies
            .put(plan.masters[i] as usize, bank, value, meta.word())?;
        let value = padded(value);
        let mirrors = plan.mirror_start[i] as usize..plan.mirror_start[i + 1] as usize;
        for m in mirrors {
            let q = usize::from(plan.mirror_part[m]);
            let local = u64::from(plan.mirror_local[m]);
            self.mail
                .send_value(q, [local, meta.word(), value[0], value[1]]);
        }
        Ok(())
    }

    fn put_partial(&mut self, l: usize, partial: Words, meta: Meta) -> Result<(), GraphError> {
        let m = usize::from(self.plan.master_of[l]);
        let i = u64::from(self.plan.master_index[l]);
        self.mail
            .send_partial(m, [i, meta.word(), partial[0], partial[1]]);
        Ok(())
    }

    fn exchange_partials(&mut self, _fresh: bool) -> Result<(), GraphError> {
        self.mail.exchange(&mut self.transport, false)
    }

    fn next_partial(&mut self, q: usize, i: usize) -> Result<(Option<Meta>, Words), GraphError> {
        self.mail.next_partial(q, i)
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
        self.mail.exchange(&mut self.transport, true)?;
        for q in (0..all.len()).filter(|&q| q != self.p) {
            for m in self.mail.values_from(q)?.0 {
                let l = usize::try_from(m[0]).unwrap_or(usize::MAX);
                let dw = self.copies.dw;
                self.copies.put(l, bank, &[m[2], m[3]][..dw], m[1])?;
            }
        }
        self.mail.aggregates((aggregate, changed), all)?;
        Ok(())
    }

    fn refresh_values(&mut self, _bank: usize) -> Result<(), GraphError> {
        // Copies are refreshed by every value exchange: nothing is ever stale here.
        Ok(())
    }

    fn messages(&self) -> u64 {
        self.mail.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::barrier::PhaseBarrier;
    use bi_core::channel::ChannelLayout;
    use bi_core::mem::{Emulator, EmulatorConfig};

    /// A partition whose peer failed waits in the exchange for messages that will not
    /// come and for room the peer will not make: it gives up once the barrier is
    /// aborted, instead of waiting for ever.
    #[test]
    #[cfg_attr(miri, ignore = "waits on a thread for real time")]
    fn an_exchange_with_a_failed_partition_ends_when_the_barrier_is_aborted() {
        let emu = Emulator::new(EmulatorConfig::new(1 << 16, 2));
        let line = emu.line_size();
        let to_peer = ChannelLayout::<Msg>::new(0, 8, line).unwrap();
        let from_peer = ChannelLayout::<Msg>::new(8192, 8, line).unwrap();
        to_peer.init(&emu.node(0)).unwrap();
        from_peer.init(&emu.node(1)).unwrap();
        let barrier = PhaseBarrier::new(2);
        let mut channels = Channels {
            senders: vec![None, Some(Sender::new(emu.node(0), to_peer).unwrap())],
            receivers: vec![None, Some(Receiver::new(emu.node(0), from_peer).unwrap())],
            barrier: &barrier,
        };
        // More than the channel holds, and one message the peer never sends.
        let out = [Vec::new(), vec![[0u64; 4]; 20]];
        let mut inbox = [Vec::new(), Vec::new()];
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                barrier.abort();
            });
            let r = channels.exchange(&out, &mut inbox, &[0, 1]);
            assert!(matches!(r, Err(GraphError::Aborted)), "{r:?}");
        });
    }
}
