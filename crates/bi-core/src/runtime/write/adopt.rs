//! Adoption: a writer takes over what an earlier writer of its arena left in memory.
//!
//! A writer process that dies (or restarts) loses its heap's free lists and its queue of
//! retired blocks; memory keeps what it wrote back, which includes every object a
//! returned publication made reachable. The next writer of the structure (after taking
//! its role, see [`role`](crate::runtime::role)) walks the structure from its root, which only
//! the structure knows how to do, and hands the objects it reached to
//! [`Writer::adopt`]: they stay live in the heap. Everything else in the arena is what
//! the dead writer retired, left unlinked in its bag, or allocated without publishing.
//! Readers may still hold links to some of it, and nodes may still cache it, so it is
//! treated as retired at the moment of adoption: the span it covers is logged in the
//! freed ring, so every node's pass invalidates it and waits for its readers that were
//! inside, and it is given back to the heap once that grace period has passed, as any
//! retirement is. Until then allocations wait for it
//! when the heap has nothing else ([`Writer::alloc`] reclaims and retries).

use crate::heap::{Block, Heap, HeapError};
use crate::mem::MemView;
use crate::runtime::fault::Fault;
use crate::runtime::object::{Generation, MAX_OBJECT_LINES, Shape, Stamp};
use crate::runtime::ring::{LogEntry, RingWriter};
use crate::runtime::writer::Retired;
use crate::runtime::{BiError, Writer};

/// What [`Writer::adopt`] took over.
///
/// ```
/// use bi_core::runtime::{AdoptReport, testing::Setup};
///
/// let s = Setup::new(1, 0);
/// let mut w = s.writer(0);
/// // `BumpHeap` cannot take over an arena; a heap that can (`bi-alloc`'s) reports what
/// // it kept live and what it quarantined.
/// assert!(w.adopt(&mut [], &[s.slot(0)]).is_err());
/// assert_eq!(AdoptReport::default().quarantined_bytes, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdoptReport {
    /// Objects kept live.
    pub live_blocks: usize,
    /// Blocks of the rest of the arena, retired until a grace period has passed.
    pub quarantined_blocks: usize,
    /// Their bytes.
    pub quarantined_bytes: usize,
}

impl<V: MemView, H: Heap> Writer<V, H> {
    /// The runs of memory the adopted structure owns: its live objects and the
    /// quarantined blocks, adjacent ones merged (the heap hands out nothing else, so
    /// these are its owned ranges that hold anything).
    fn owned_spans(&self, blocks: &[Block], live: &[(usize, usize)]) -> Vec<(usize, usize)> {
        let mut all: Vec<(usize, usize)> = blocks.iter().map(|b| (b.offset, b.len)).collect();
        all.extend(
            live.iter()
                .map(|&(at, _)| (at, self.heap.block_len(at).unwrap_or(0))),
        );
        all.sort_unstable();
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for (at, len) in all {
            match spans.last_mut() {
                Some((_, end)) if *end == at => *end += len,
                _ => spans.push((at, at + len)),
            }
        }
        spans
    }

    /// Log entries covering `spans` (in pieces as long as an entry allows) and `slots`.
    fn entries(&self, spans: &[(usize, usize)], slots: &[usize]) -> Vec<LogEntry> {
        let inner = &self.inner;
        let (now, line, scope) = (inner.clock.now(), inner.line, self.scope());
        let piece = MAX_OBJECT_LINES * line;
        let mut entries: Vec<LogEntry> = spans
            .iter()
            .flat_map(|&(start, end)| {
                (start..end)
                    .step_by(piece)
                    .map(move |at| LogEntry::new(at, (end - at).min(piece) / line, now, scope))
            })
            .collect();
        entries.extend(
            slots
                .iter()
                .map(|&slot| LogEntry::new(inner.line_floor(slot), 1, now, scope)),
        );
        entries
    }

    /// Logs `entries` in the freed ring (`freed`) or the modified ring, waiting for room;
    /// returns when they became visible.
    ///
    /// An adopter may run a node whose rings a predecessor filled: their entries count as
    /// just written, so room comes only once every live node passed, and a node stopped
    /// inside its lease holds it back until the lease ends. Adoption waits for that
    /// (the configured wait on a full log, plus a lease and the skew bound) rather than
    /// fail the structure's opening on back-pressure a write would only have to retry.
    fn log(&mut self, entries: &[LogEntry], freed: bool) -> Result<u64, BiError> {
        fn ring<V: MemView, H: Heap>(w: &mut Writer<V, H>, freed: bool) -> &mut RingWriter {
            if freed { &mut w.freed } else { &mut w.modified }
        }
        self.wait_up_to(self.adoption_patience(), |w| {
            let inner = w.inner.clone();
            Self::reserve(&inner, ring(w, freed), entries.len())
        })?;
        let inner = self.inner.clone();
        ring(self, freed).append(&inner.view, entries)?;
        let visible = inner.clock.refresh();
        ring(self, freed).visible(entries.len(), visible);
        Ok(visible)
    }

    /// Drops this node's cached copy of the whole heap and fences, so that what follows
    /// reads what is in memory: the first step of adopting a structure that another
    /// node's writer wrote (a restarted process of the same node shares its caches with
    /// its predecessor and may skip it). Costs one invalidation per heap line.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w0 = s.writer(0);
    /// let a = w0.alloc_lines(&[1u64]).unwrap();
    /// w0.publish_lines(s.slot(0), a).unwrap();
    /// let r = s.nodes[1].reader().unwrap();
    /// let read = || {
    ///     let g = r.enter();
    ///     *g.follow(g.line(a, 0).unwrap()).unwrap().unwrap()
    /// };
    /// assert_eq!(read(), 1); // node 1 caches the line
    /// w0.rewrite_lines(&[(a, 0, 2)]).unwrap();
    /// assert_eq!(read(), 1); // no pass yet: still the old version
    /// s.writer(1).invalidate_heap().unwrap();
    /// assert_eq!(read(), 2);
    /// ```
    pub fn invalidate_heap(&self) -> Result<(), BiError> {
        let heap = self.inner.layout.heap();
        self.inner.view.invalidate(heap.offset, heap.len)?;
        self.inner.view.fence();
        Ok(())
    }

    /// The word in `slot` as memory holds it (this node's cached copy dropped first): the
    /// root an earlier writer published last.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(2, 0);
    /// let mut w0 = s.writer(0);
    /// let link = w0.alloc_sealed(1u64).unwrap();
    /// w0.publish_link(s.slot(0), link).unwrap();
    /// let w1 = s.writer(1);
    /// assert_eq!(w1.read_slot(s.slot(0)).unwrap(), link.raw());
    /// ```
    pub fn read_slot(&self, slot: usize) -> Result<u64, BiError> {
        Ok(self.inner.view.load_from_memory(slot)?)
    }

    /// The bytes an object of `size` payload bytes occupies (its lines, stamps included):
    /// what [`adopt`](Self::adopt) takes for it.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let w = s.writer(0);
    /// assert_eq!(w.object_bytes(8).unwrap(), 64); // one 64-byte line, its stamp included
    /// assert_eq!(w.object_bytes(56).unwrap(), 64);
    /// assert_eq!(w.object_bytes(57).unwrap(), 128);
    /// ```
    pub fn object_bytes(&self, size: usize) -> Result<usize, BiError> {
        Ok(Shape::new(size, self.inner.line)?.bytes())
    }

    /// The bytes a line array of `records` records of `size` bytes occupies (see
    /// [`Writer::alloc_lines`]): what [`adopt`](Self::adopt) takes for it.
    ///
    /// ```
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let w = s.writer(0);
    /// assert_eq!(w.lines_bytes(3, 16).unwrap(), 3 * 64); // one line per record
    /// assert!(w.lines_bytes(1, 64).is_err()); // a record must fit one line's payload
    /// ```
    pub fn lines_bytes(&self, records: usize, size: usize) -> Result<usize, BiError> {
        Ok(Shape::of_lines(records, size, self.inner.line)?.bytes())
    }

    /// Takes over this writer's arena from an earlier writer: the blocks of `live` (each
    /// given as its offset and the bytes it occupies, see
    /// [`object_bytes`](Self::object_bytes): what the structure reached from its root)
    /// stay live; the rest of the arena is retired now and given back to the heap
    /// after a grace period. `slots` are the structure's root slots. The heap must be
    /// fresh (nothing handed out) and must own the memory the earlier writer used, which
    /// held nothing but this structure: the structure's extents (`bi_alloc::Extents`),
    /// or the arena of the node it was written on.
    ///
    /// Two things are logged, so that every node's pass acts on them:
    /// - **in the freed ring**, the memory the structure owns (what it reached and the
    ///   rest), as a retirement is: passes invalidate it and wait for the readers that
    ///   were inside before the rest can be reused. Logging the live objects too matters
    ///   twice over: a quarantine that skipped them let a reader on another node load a
    ///   line of one from before the dead writer reused its memory, and the dead writer
    ///   may have written back a line it rewrote in place (a map's bucket) and died
    ///   before the log entry that announces it;
    /// - **in the modified ring**, the root slots, for the same reason: a slot the dead
    ///   writer stored and wrote back, dying before its log entry, would otherwise stay
    ///   old in other nodes' caches until the next publication.
    ///
    /// ```
    /// use bi_core::heap::{BumpHeap, Heap};
    /// use bi_core::runtime::testing::Setup;
    ///
    /// let s = Setup::new(1, 0);
    /// let mut w = s.writer(0);
    /// let kept = w.alloc(7u64).unwrap();
    /// let at = kept.offset();
    /// w.publish(s.slot(0), kept).unwrap();
    /// drop(w); // the writer's process is gone; memory keeps what it wrote back
    ///
    /// // The next writer's heap knows nothing yet: BumpHeap cannot adopt (bi-alloc's
    /// // NodeHeap can), so this shows the error path.
    /// let mut again = s.writer(0);
    /// assert!(again.adopt(&mut [(at, 8)], &[s.slot(0)]).is_err());
    /// ```
    pub fn adopt(
        &mut self,
        live: &mut [(usize, usize)],
        slots: &[usize],
    ) -> Result<AdoptReport, BiError> {
        let quarantined = self.heap.adopt(live).map_err(|e| match e {
            HeapError::ForeignBlock { .. } => BiError::BadConfig {
                reason: "the structure lies outside this writer's arena: it is adopted by a \
                         writer over the arena its earlier writer used (that node's)",
            },
            e => e.into(),
        })?;
        let mut report = AdoptReport {
            live_blocks: live.len(),
            ..AdoptReport::default()
        };
        let spans = self.owned_spans(&quarantined, live);
        if !self.inner.config.faults.has(Fault::AdoptAnnounce) {
            self.log(&self.entries(&[], slots), false)?;
        }
        if self.inner.config.faults.has(Fault::AdoptQuarantine) {
            for block in quarantined {
                self.heap.free(block)?;
            }
            return Ok(report);
        }
        let visible = self.log(&self.entries(&spans, &[]), true)?;
        let inner = &self.inner;
        for block in quarantined {
            // A one-line block goes back tagged with its generation (`give_back`): the
            // one its stamp carries now, so the next object there is stamped above it.
            let generation = if block.len == inner.line {
                let stamp = Stamp::from_raw(inner.view.load_u64(block.offset)?);
                match stamp.is_invalid() {
                    true => Generation::default(),
                    false => stamp.generation(),
                }
            } else {
                Generation::default()
            };
            report.quarantined_blocks += 1;
            report.quarantined_bytes += block.len;
            self.retired_bytes += block.len;
            self.retired.push_back(Retired {
                block,
                generation,
                visible,
            });
        }
        self.note_figures();
        Ok(report)
    }
}
