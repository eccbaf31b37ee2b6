//! Property tests of [`NodeHeap`] against a simple model.
//!
//! The model remembers every live block and, per line, whether the line was ever part of a
//! block handed out. After every operation: blocks are line-aligned, whole lines, inside
//! the arena and disjoint from every other live block; `reused` is true exactly when some
//! line of the block was handed out before; the counters match the model; every byte of
//! the arena is either live or counted as free; frees of blocks not handed out are
//! errors; and exhaustion is an `OutOfMemory` value, never a panic.

use bi_alloc::NodeHeap;
use bi_alloc::class::{CLASS_LINES, class_of};
use bi_core::heap::{Block, Heap, HeapError};
use bi_core::line::LineSize;
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Op {
    /// Allocate this many bytes.
    Alloc(usize),
    /// Free the live block at this index (modulo the number of live blocks).
    Free(usize),
    /// Free a made-up block: `(line index, lines)` within the arena.
    Bogus(usize, usize),
}

fn op(max_bytes: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1..=max_bytes).prop_map(Op::Alloc),
        // Mostly small requests, as real objects are.
        4 => (1..=max_bytes / 16).prop_map(Op::Alloc),
        5 => any::<usize>().prop_map(Op::Free),
        1 => (0usize..4096, 1usize..8).prop_map(|(a, b)| Op::Bogus(a, b)),
    ]
}

struct Model {
    start: usize,
    line: usize,
    /// Offset -> length of live blocks.
    live: BTreeMap<usize, usize>,
    /// Per line of the arena: was it ever part of a block handed out?
    ever: Vec<bool>,
    live_bytes: usize,
    peak: usize,
    allocations: u64,
    frees: u64,
    reuses: u64,
    ooms: u64,
}

impl Model {
    fn check_alloc(&mut self, heap: &NodeHeap, bytes: usize, got: Result<Block, HeapError>) {
        let (start, line) = (self.start, self.line);
        let end = start + self.ever.len() * line;
        let lines = bytes.div_ceil(line);
        match got {
            Ok(b) => {
                assert_eq!(b.offset % line, 0, "line-aligned");
                assert_eq!(b.len % line, 0, "whole lines");
                assert!(b.len >= bytes, "large enough");
                let expected_len = match class_of(lines) {
                    Some(c) if CLASS_LINES[c] * line <= end - start => CLASS_LINES[c] * line,
                    _ => lines * line,
                };
                assert_eq!(b.len, expected_len, "rounded to its class");
                assert!(b.offset >= start && b.offset + b.len <= end, "inside arena");
                if let Some((&o, &l)) = self.live.range(..b.offset + b.len).next_back() {
                    assert!(o + l <= b.offset, "overlaps live block {o}+{l}");
                }
                let first = (b.offset - start) / line;
                let span = first..first + b.len / line;
                let was_used = self.ever[span.clone()].iter().any(|&u| u);
                assert_eq!(b.reused, was_used, "reuse reported exactly");
                self.ever[span].iter_mut().for_each(|u| *u = true);
                self.live.insert(b.offset, b.len);
                self.live_bytes += b.len;
                self.peak = self.peak.max(self.live_bytes);
                self.allocations += 1;
                self.reuses += u64::from(b.reused);
            }
            Err(HeapError::OutOfMemory { requested, free }) => {
                assert_eq!(requested, bytes);
                let s = heap.node_stats();
                assert_eq!(free, s.free);
                // Exhaustion only when the untouched space cannot hold the block.
                let need = match class_of(lines) {
                    Some(c) if CLASS_LINES[c] * line <= end - start => CLASS_LINES[c] * line,
                    _ => lines * line,
                };
                assert!(s.untouched < need, "OOM with {} untouched", s.untouched);
                self.ooms += 1;
            }
            Err(HeapError::BadSize { requested }) => {
                assert_eq!(requested, bytes);
                assert!(bytes == 0 || lines * line > end - start);
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }

    fn check_stats(&self, heap: &NodeHeap) {
        let s = heap.node_stats();
        assert_eq!(s.heap.capacity, self.ever.len() * self.line);
        assert_eq!(s.heap.live, self.live_bytes);
        assert_eq!(s.heap.peak, self.peak);
        assert_eq!(s.heap.allocations, self.allocations);
        assert_eq!(s.heap.frees, self.frees);
        assert_eq!(s.heap.reuses, self.reuses);
        assert_eq!(
            s.free + s.heap.live,
            s.heap.capacity,
            "every byte accounted"
        );
        let class_live: usize = s.classes.iter().map(|c| c.live * c.slot_bytes).sum();
        assert_eq!(class_live + s.large.live_bytes, s.heap.live);
        assert_eq!(heap.stats(), s.heap);
    }
}

fn run(line: usize, arena_lines: usize, ops: &[Op]) {
    let l = LineSize::new(line).unwrap();
    let start = 3 * line;
    let mut heap = NodeHeap::new(start..start + arena_lines * line, l).unwrap();
    let mut m = Model {
        start,
        line,
        live: BTreeMap::new(),
        ever: vec![false; arena_lines],
        live_bytes: 0,
        peak: 0,
        allocations: 0,
        frees: 0,
        reuses: 0,
        ooms: 0,
    };
    for op in ops {
        match *op {
            Op::Alloc(bytes) => {
                let got = heap.alloc(bytes);
                m.check_alloc(&heap, bytes, got);
            }
            Op::Free(i) if !m.live.is_empty() => {
                let (&offset, &len) = m.live.iter().nth(i % m.live.len()).unwrap();
                heap.free(Block {
                    offset,
                    len,
                    reused: false,
                })
                .unwrap();
                m.live.remove(&offset);
                m.live_bytes -= len;
                m.frees += 1;
            }
            Op::Free(_) => {}
            Op::Bogus(at, lines) => {
                let offset = start + (at % arena_lines) * line;
                let len = lines * line;
                let b = Block {
                    offset,
                    len,
                    reused: false,
                };
                if m.live.get(&offset) == Some(&len) {
                    // Happens to be live: a legitimate free.
                    heap.free(b).unwrap();
                    m.live.remove(&offset);
                    m.live_bytes -= len;
                    m.frees += 1;
                } else {
                    assert_eq!(heap.free(b), Err(HeapError::ForeignBlock { offset }));
                }
            }
        }
        m.check_stats(&heap);
    }
    // Everything freed: all of it comes back, and one more round works.
    for (&offset, &len) in &m.live {
        heap.free(Block {
            offset,
            len,
            reused: false,
        })
        .unwrap();
    }
    assert_eq!(heap.stats().live, 0);
    assert_eq!(heap.node_stats().large.live_blocks, 0);
}

proptest! {
    // Under Miri every case is interpreted, so a handful stands in for the full run; and
    // Miri cannot open the files proptest uses to persist failures.
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 3 } else { 256 },
        failure_persistence: if cfg!(miri) {
            None
        } else {
            ProptestConfig::default().failure_persistence
        },
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_alloc_free_matches_the_model(
        line in prop::sample::select(vec![32usize, 64, 128]),
        arena_lines in 1usize..300,
        ops in prop::collection::vec(op(100 * 64), 1..if cfg!(miri) { 40 } else { 400 }),
    ) {
        run(line, arena_lines, &ops);
    }

    #[test]
    fn filling_the_arena_ends_in_out_of_memory(
        line in prop::sample::select(vec![32usize, 64, 128]),
        arena_lines in 8usize..200,
        sizes in prop::collection::vec(1usize..20 * 64, 1..50),
    ) {
        let l = LineSize::new(line).unwrap();
        let mut heap = NodeHeap::new(0..arena_lines * line, l).unwrap();
        let mut blocks = Vec::new();
        let mut ooms = 0;
        // Cycle through the sizes until several requests in a row fail.
        for bytes in sizes.iter().cycle().take(4 * arena_lines + sizes.len()) {
            match heap.alloc(*bytes) {
                Ok(b) => blocks.push(b),
                Err(HeapError::OutOfMemory { .. }) => ooms += 1,
                Err(HeapError::BadSize { .. }) => prop_assert!(*bytes > arena_lines * line),
                Err(e) => panic!("{e}"),
            }
        }
        // The smallest request always fits a one-line slot, so the arena really is full
        // of one-line slots once one-line requests fail.
        while heap.alloc(1).is_ok() {}
        let s = heap.node_stats();
        prop_assert!(ooms > 0 || s.untouched == 0);
        prop_assert_eq!(s.untouched, 0);
        prop_assert_eq!(s.classes[0].free + s.classes[0].uncut, 0);
        // Freeing one block makes room for its size again.
        if let Some(b) = blocks.pop() {
            heap.free(b).unwrap();
            let again = heap.alloc(b.len).unwrap();
            prop_assert!(again.reused);
        }
    }
}

#[test]
fn model_runs_on_a_fixed_sequence() {
    let ops: Vec<Op> = (0..200)
        .map(|i| match i % 5 {
            0 | 1 => Op::Alloc(1 + (i * 37) % 300),
            2 => Op::Alloc(1 + (i * 997) % 6000),
            3 => Op::Free(i * 7),
            _ => Op::Bogus(i, 1 + i % 3),
        })
        .collect();
    run(64, 128, &ops);
}
