//! Delegated writes decided twice or on the wrong value: clients on other nodes send
//! their writes through a channel in shared memory to the one node that writes the
//! structure (the shipped [`DelegationServer`] over the shipped [`BiHashMap`]). Two rows.
//!
//! **A request applied twice after a takeover**: client 1 sends four inserts; the server
//! applies and publishes two of them and dies before it acknowledges any (the structure
//! fails part-way through the batch); a new server resumes the area. Broken
//! ([`Fault::DelegationTakeover`]): it serves the requests it finds unacknowledged, so the
//! two the dead server applied are applied again. BI: it reports them failed to the client
//! and applies none of them. Counted: requests the structure applied more than once.
//!
//! **A condition decided at the start of its batch**: in one batch, client 1 inserts a key and
//! then inserts it again only if it is absent, and client 2 removes it only if it is
//! present. Broken ([`Fault::ConditionsAtBatchStart`]): each condition is decided on what the map
//! held before the batch, so the insert-if-absent overwrites the insert before it and the
//! remove-if-present finds nothing to remove. BI: each condition sees what the batch's earlier
//! requests left at the key, which ends absent. Counted: keys that end with a value the
//! batch's requests, applied in order, would not leave.

use super::Hazard;
use bi_collections::delegate::{ClientConfig, DelegationClient, DelegationLayout};
use bi_collections::map::BiHashMap;
use bi_collections::{ApplyBatch, BatchReport, CollectionError, Condition, DelegationServer, Op};
use bi_core::mem::EmulatedNode;
use bi_core::region::RegionConfig;
use bi_core::runtime::testing::Setup;
use bi_core::runtime::{Fault, RuntimeConfig};
use std::collections::BTreeMap;
use std::time::Duration;

pub(super) const TAKEOVER: Hazard = Hazard {
    name: "request_applied_twice_after_takeover",
    fault: Fault::DelegationTakeover,
    counts: "delegated requests the structure applied more than once",
    run: |config, seed| {
        let s = machine(config.clone(), seed, 3);
        let layout = area(&s, 1);
        let map = BiHashMap::<u64, u64>::at(s.slot(0))
            .write_handle(s.writer(0))
            .expect("map");
        let dying = Recorded {
            structure: map,
            applied: Vec::new(),
            fail_after: Some(2),
        };
        let mut first = DelegationServer::new(s.emu.node(0), layout, dying).expect("server");
        let mut c = client(&s, layout, 0);
        for k in 0..4 {
            c.insert(k, seed * 100 + k).expect("send");
        }
        // Two requests applied and published, none acknowledged.
        first
            .serve_once(8)
            .expect_err("the structure fails part-way");
        let dead = first.into_structure();
        let mut second =
            DelegationServer::resume_with(s.emu.node(0), layout, dead, config.faults())
                .expect("takeover");
        second.serve_once(8).expect("serve");
        let applied = &second.structure().applied;
        let mut times = BTreeMap::<_, u64>::new();
        for op in applied {
            *times.entry(format!("{op:?}")).or_default() += 1;
        }
        times.values().map(|&n| n - 1).sum()
    },
};

pub(super) const GUARDS: Hazard = Hazard {
    name: "condition_decided_at_batch_start",
    fault: Fault::ConditionsAtBatchStart,
    counts: "keys left with a value the batch's requests, applied in order, would not leave",
    run: |config, seed| {
        let s = machine(config.clone(), seed, 4);
        let map = BiHashMap::<u64, u64>::at(s.slot(0))
            .write_handle(s.writer(0))
            .expect("map");
        let layout = area(&s, 2);
        let mut server = DelegationServer::new(s.emu.node(0), layout, map)
            .expect("server")
            .with_faults(config.faults());
        let (mut a, mut b) = (client(&s, layout, 0), client(&s, layout, 1));
        let key = seed + 1;
        a.send(Op::Insert(key, 5)).expect("send");
        a.send_conditional(Op::Insert(key, 7), Condition::Absent)
            .expect("send");
        b.send_conditional(Op::Remove(key), Condition::Present)
            .expect("send");
        // One batch, client 1's requests before client 2's.
        assert_eq!(server.serve_once(16).expect("serve").ops, 3);
        a.flush().expect("acknowledged");
        b.flush().expect("acknowledged");
        u64::from(server.structure().get(&key).is_some())
    },
};

/// `nodes` emulated nodes (the last one's share of the heap holds the delegation area)
/// whose caches evict, prefetch and write back late at random.
pub(super) fn machine(config: RuntimeConfig, seed: u64, nodes: u32) -> Setup {
    let rate = 0.2;
    Setup::with(
        RegionConfig::new(1 << 18).with_nodes(nodes),
        |c| c.seed(seed).every_event(rate),
        config,
    )
}

/// The delegation area: the last node's share of the heap (no writer runs there).
fn area(s: &Setup, clients: usize) -> DelegationLayout<u64, u64> {
    let last = s.emu.nodes() - 1;
    DelegationLayout::new(s.arena(last), clients, 8, s.emu.line_size()).expect("area")
}

/// Client `index`, on node `1 + index`.
fn client(
    s: &Setup,
    layout: DelegationLayout<u64, u64>,
    index: usize,
) -> DelegationClient<EmulatedNode, u64, u64> {
    let config = ClientConfig::default().timeout(Duration::from_secs(10));
    DelegationClient::with_config(s.emu.node(1 + index), layout, index, config).expect("client")
}

/// A structure that keeps every operation it applied and can fail part-way through its
/// next batch, as a writer that dies does.
struct Recorded<S> {
    structure: S,
    applied: Vec<Op<u64, u64>>,
    /// Fail the next batch after applying this many of its operations.
    fail_after: Option<usize>,
}

impl<S: ApplyBatch<u64, u64>> ApplyBatch<u64, u64> for Recorded<S> {
    fn apply_batch(&mut self, ops: &[Op<u64, u64>]) -> Result<BatchReport, CollectionError> {
        let done = self.fail_after.take().unwrap_or(ops.len()).min(ops.len());
        let report = self.structure.apply_batch(&ops[..done])?;
        self.applied.extend_from_slice(&ops[..done]);
        if done < ops.len() {
            return Err(CollectionError::Corrupt {
                reason: "the writer died part-way through the batch",
            });
        }
        Ok(report)
    }
}
