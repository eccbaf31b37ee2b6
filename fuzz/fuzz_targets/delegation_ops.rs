//! Drives delegated writes of a `BiHashMap<String, Vec<u8>>` on an emulated four-node
//! machine: two clients on their own nodes send arbitrary sequences of inserts, removals
//! and conditional requests (keys and values of every length class, some too long to cross),
//! one at a time or as batches, and the server on node 0 serves batches of arbitrary
//! size at arbitrary moments. Each client writes its own keys, so its operations apply in
//! its order whatever the interleaving; the map must end as each client's model says,
//! every refused item must be `ItemTooLarge` with nothing sent, no channel may be found
//! broken and no acknowledgement may go missing. Any violation panics.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use bi_collections::delegate::{
    DelegationClient, DelegationError, DelegationLayout, DelegationServer,
};
use bi_collections::map::BiHashMap;
use bi_collections::{CollectionError, Condition, Op};
use bi_core::region::RegionConfig;
use bi_core::runtime::RuntimeConfig;
use bi_core::runtime::testing::Setup;
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;

const CLIENTS: usize = 2;
const MAX_STEPS: usize = 200;
/// Bytes of each parcel and reply area (the longest item is 8 bytes shorter).
const PARCEL: usize = 1024;
/// Records per client channel.
const CAPACITY: usize = 8;

#[derive(Debug)]
struct Input {
    seed: u64,
    rate: u8,
    steps: Vec<Step>,
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Input {
            seed: u.arbitrary()?,
            rate: u.arbitrary()?,
            steps: bi_fuzz::steps(u, MAX_STEPS)?,
        })
    }
}

#[derive(Arbitrary, Debug)]
enum Step {
    /// Client, key, value length (scaled), condition.
    Insert(u8, u8, u16, u8),
    Remove(u8, u8, u8),
    /// Client, then (key, value length) pairs sent as one batch.
    Batch(u8, Vec<(u8, u16)>),
    /// The server serves up to this many records.
    Serve(u8),
}

/// Key `k` of client `c`: empty, inline, one line or several.
fn key(c: usize, k: u8) -> String {
    let len = [0, 5, 16, 17, 60, 200][k as usize % 6];
    let mut s = format!("{c}/{k}:");
    while s.len() < len {
        s.push((b'a' + (k % 26)) as char);
    }
    s
}

/// A value of `len` bytes (up to a little past what crosses) that `tag` tells apart.
fn value(len: u16, tag: usize) -> Vec<u8> {
    let len = len as usize % (PARCEL + 64);
    (0..len).map(|i| (tag * 7 + i) as u8).collect()
}

/// Bytes of the parcel area an item takes (none if it fits its word).
fn cost(bytes: usize) -> usize {
    if bytes <= 16 {
        0
    } else {
        8 + bytes.next_multiple_of(8)
    }
}

fn condition(g: u8, model: Option<&Vec<u8>>, tag: usize) -> Condition<Vec<u8>> {
    match g % 6 {
        0 => Condition::Absent,
        1 => Condition::Present,
        2 => Condition::Equals(model.cloned().unwrap_or_default()),
        3 => Condition::Equals(value(tag as u16, tag)),
        _ => Condition::Always,
    }
}

fuzz_target!(|input: Input| {
    let rate = f64::from(input.rate % 64) / 256.0;
    let s = Setup::with(
        RegionConfig::new(8 << 20).with_nodes(CLIENTS as u32 + 2),
        |c| {
            c.seed(input.seed)
                .eviction_rate(rate / 8.0)
                .adjacent_prefetch_rate(rate)
                .random_prefetch_rate(rate)
                .late_writebacks(rate)
        },
        RuntimeConfig::default(),
    );
    let map = BiHashMap::<String, Vec<u8>>::at(s.slot(0))
        .write_handle(s.writer(0))
        .expect("map");
    let last = s.emu.nodes() - 1;
    let layout =
        DelegationLayout::with_parcels(s.arena(last), CLIENTS, CAPACITY, PARCEL, s.emu.line_size())
            .expect("layout");
    let mut server = DelegationServer::new(s.emu.node(0), layout, map).expect("server");
    let mut clients: Vec<DelegationClient<_, String, Vec<u8>>> = (0..CLIENTS)
        .map(|i| DelegationClient::new(s.emu.node(1 + i), layout, i).expect("client"))
        .collect();
    // Each client's model, and the bytes of its parcel area its unacknowledged records
    // use (as the client counts them).
    let mut models: Vec<BTreeMap<String, Vec<u8>>> = vec![BTreeMap::new(); CLIENTS];
    let mut used = [0usize; CLIENTS];
    let limit = PARCEL - 8;
    // Serves until client `c` has seen every record it sent applied.
    let drain = |server: &mut DelegationServer<_, String, Vec<u8>, _>,
                 client: &mut DelegationClient<_, String, Vec<u8>>| {
        while client.sent() > client.applied() {
            server.serve_once(64).expect("serve");
            client.poll_applied().expect("poll");
        }
    };
    for (tag, step) in input.steps.iter().enumerate() {
        // The client and what it sends: nothing here waits for the server (which
        // serves only in `Serve` steps), so room is made first where the client would.
        let (c, ops, condition) = match step {
            Step::Serve(n) => {
                server.serve_once(usize::from(*n) + 1).expect("serve");
                continue;
            }
            Step::Batch(c, pairs) => {
                let c = *c as usize % CLIENTS;
                let (mut bytes, mut ops) = (0, Vec::new());
                for &(k, len) in pairs.iter().take(CAPACITY) {
                    let (k, v) = (key(c, k), value(len, tag + ops.len()));
                    bytes += cost(k.len()) + cost(v.len());
                    if bytes > PARCEL {
                        break; // the rest would wait for the server mid-batch
                    }
                    ops.push(Op::Insert(k, v));
                }
                (c, ops, Condition::Always)
            }
            Step::Insert(c, k, len, g) => {
                let c = *c as usize % CLIENTS;
                let k = key(c, *k);
                let condition = condition(*g, models[c].get(&k), tag);
                (c, vec![Op::Insert(k, value(*len, tag))], condition)
            }
            Step::Remove(c, k, g) => {
                let c = *c as usize % CLIENTS;
                let k = key(c, *k);
                let condition = condition(*g, models[c].get(&k), tag);
                (c, vec![Op::Remove(k)], condition)
            }
        };
        let expected = match &condition {
            Condition::Equals(e) => cost(e.len()),
            _ => 0,
        };
        let bytes: usize = expected
            + ops
                .iter()
                .map(|op| match op {
                    Op::Insert(k, v) => cost(k.len()) + cost(v.len()),
                    Op::Remove(k) => cost(k.len()),
                })
                .sum::<usize>();
        let client = &mut clients[c];
        let waiting = (client.sent() - client.applied()) as usize;
        if waiting == 0 {
            used[c] = 0;
        } else if waiting + ops.len() > CAPACITY || used[c] + bytes > PARCEL {
            drain(&mut server, client);
            used[c] = 0;
        }
        let sent = client.sent();
        let result = match ops.as_slice() {
            [op] => client.send_conditional(op.clone(), condition.clone()),
            ops => client.send_batch(ops),
        };
        match result {
            Ok(_) => {
                assert!(
                    bytes <= PARCEL,
                    "an operation too long for its parcel area was sent"
                );
                used[c] += bytes;
                for op in ops {
                    let (k, v) = match op {
                        Op::Insert(k, v) => (k, Some(v)),
                        Op::Remove(k) => (k, None),
                    };
                    if condition.admits(models[c].get(&k), |a, b| a == b) {
                        match v {
                            Some(v) => models[c].insert(k, v),
                            None => models[c].remove(&k),
                        };
                    }
                }
            }
            Err(CollectionError::Delegation(DelegationError::ItemTooLarge {
                limit: l, ..
            })) => {
                assert!(
                    bytes > PARCEL && l == limit,
                    "refused an operation that fits"
                );
                assert_eq!(client.sent(), sent, "a refused operation was sent");
            }
            Err(e) => panic!("send: {e}"),
        }
    }
    for client in &mut clients {
        drain(&mut server, client);
    }
    assert!(
        server.broken_clients().is_empty(),
        "{:?}",
        server.broken_clients()
    );
    let mut want: Vec<(String, Vec<u8>)> = models.into_iter().flatten().collect();
    want.sort();
    let mut found = server.structure().entries().expect("entries");
    found.sort();
    assert_eq!(found, want);
});
