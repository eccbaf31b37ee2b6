//! String keys and values through delegation: parcels to the writer, old values back in
//! replies, on emulated nodes whose caches keep stale lines and whose write-backs land
//! late; and every limit a typed error that writes nothing.

mod delegate_mock;

use bi_collections::delegate::{
    ClientConfig, DelegationClient, DelegationError, DelegationLayout, DelegationServer,
};
use bi_collections::map::{BiHashMap, MapWriteHandle};
use bi_collections::{CollectionError, Condition, Op};
use bi_core::heap::BumpHeap;
use bi_core::mem::EmulatedNode;
use bi_core::region::RegionConfig;
use bi_core::runtime::RuntimeConfig;
use bi_core::runtime::testing::Setup;
use delegate_mock::with_server;
use rand::Rng;
use rand::rngs::SmallRng;
use std::collections::BTreeMap;
use std::time::Duration;

type Map = MapWriteHandle<String, String, EmulatedNode, BumpHeap>;
type Client = DelegationClient<EmulatedNode, String, String>;

/// Bytes of each parcel and reply area: the longest item that crosses is 8 bytes less.
const PARCEL: usize = 4096;
const LIMIT: usize = PARCEL - 8;

fn machine(seed: u64, rate: f64) -> Setup {
    Setup::with(
        RegionConfig::new(16 << 20).with_nodes(4),
        |c| {
            c.seed(seed)
                .eviction_rate(rate / 10.0)
                .adjacent_prefetch_rate(rate)
                .random_prefetch_rate(rate)
                .late_writebacks(rate)
        },
        RuntimeConfig::default(),
    )
}

/// The delegation area: the last node's share of the heap (no writer runs there).
fn area(s: &Setup, clients: usize) -> DelegationLayout<String, String> {
    let last = s.emu.nodes() - 1;
    let line = s.emu.line_size();
    DelegationLayout::with_parcels(s.arena(last), clients, 8, PARCEL, line).unwrap()
}

fn map(s: &Setup) -> Map {
    BiHashMap::<String, String>::at(s.slot(0))
        .write_handle(s.writer(0))
        .unwrap()
}

fn client(s: &Setup, layout: DelegationLayout<String, String>, index: usize) -> Client {
    let config = ClientConfig::default().timeout(Duration::from_secs(5));
    DelegationClient::with_config(s.emu.node(1 + index), layout, index, config).unwrap()
}

/// A string of `len` bytes that `tag` tells apart from others of its length.
fn text(tag: u64, len: usize) -> String {
    let stamp = format!("{tag:x}.");
    stamp.chars().cycle().take(len).collect()
}

/// A length: empty, inline (up to 16), a line or two, or up to the limit.
fn length(rng: &mut SmallRng) -> usize {
    match rng.random_range(0..8) {
        0 => 0,
        1 | 2 => rng.random_range(1..=16),
        3 => 17,
        4 | 5 => rng.random_range(17..200),
        6 => rng.random_range(200..LIMIT / 2),
        _ => rng.random_range(LIMIT / 2..=LIMIT),
    }
}

/// Bytes of the parcel area an item takes (none if it fits its word).
fn parcel_cost(item: &str) -> usize {
    if item.len() <= 16 {
        0
    } else {
        8 + item.len().next_multiple_of(8)
    }
}

fn same_kind(a: DelegationError, b: DelegationError) -> bool {
    std::mem::discriminant(&a) == std::mem::discriminant(&b)
}

/// Client `index` writes its own keys at random (plain and conditional, long and short),
/// synchronously or as batches, and checks every value found against its model.
fn play(client: &mut Client, seed: u64, steps: usize) -> BTreeMap<String, String> {
    let mut rng = bi_kit::rng(seed, &format!("client {}", client.index()));
    let mut model = BTreeMap::new();
    let keys: Vec<String> = (0..12)
        .map(|k| {
            let len = [0, 3, 16, 17, 40, 300][k % 6];
            format!("{}{}", client.index(), text(k as u64, len))
        })
        .collect();
    for step in 0..steps as u64 {
        let key = keys[rng.random_range(0..keys.len())].clone();
        if rng.random_bool(0.1) {
            // A batch of plain inserts, sent without waiting: parcels fill the area and
            // the client waits for acknowledgements before it starts it again.
            let ops: Vec<_> = (0..rng.random_range(1..6))
                .map(|i| {
                    let k = keys[rng.random_range(0..keys.len())].clone();
                    Op::Insert(k, text(step * 8 + i, length(&mut rng)))
                })
                .collect();
            // An insert whose key and value together do not fit the parcel area is
            // refused, and then nothing of the batch is sent.
            let too_large = ops.iter().any(|op| match op {
                Op::Insert(k, v) => parcel_cost(k) + parcel_cost(v) > PARCEL,
                Op::Remove(_) => false,
            });
            let before = client.sent();
            let result = client.send_batch(&ops);
            let sent = (client.sent() - before) as usize;
            match (result, too_large) {
                (Ok(_), false) => assert_eq!(sent, ops.len(), "step {step}"),
                (Err(CollectionError::Delegation(DelegationError::ItemTooLarge { .. })), true) => {
                    assert_eq!(
                        sent, 0,
                        "step {step}: a refused batch sent some of its operations"
                    )
                }
                (got, _) => panic!("step {step}: too large {too_large}: {got:?}"),
            }
            for op in ops.into_iter().take(sent) {
                if let Op::Insert(k, v) = op {
                    model.insert(k, v);
                }
            }
            continue;
        }
        let now = model.get(&key).cloned();
        let expected = match &now {
            Some(v) if rng.random_bool(0.5) => v.clone(),
            _ => text(step + 1_000_000, length(&mut rng)),
        };
        let condition = match rng.random_range(0..6) {
            0 => Condition::Absent,
            1 => Condition::Present,
            2 | 3 => Condition::Equals(expected),
            _ => Condition::Always,
        };
        let op = if rng.random_bool(0.7) {
            Op::Insert(key.clone(), text(step, length(&mut rng)))
        } else {
            Op::Remove(key.clone())
        };
        let cost = parcel_cost(&key)
            + match (&op, &condition) {
                (Op::Insert(_, v), _) => parcel_cost(v),
                _ => 0,
            }
            + match &condition {
                Condition::Equals(v) => parcel_cost(v),
                _ => 0,
            };
        if cost > PARCEL {
            // Together too long for the parcel area: refused before anything is sent.
            let sent = client.sent();
            let err = client.request(op, condition).unwrap_err();
            let refused = DelegationError::ItemTooLarge {
                len: 0,
                limit: LIMIT,
            };
            assert!(matches!(err, CollectionError::Delegation(e) if same_kind(e, refused)));
            assert_eq!(client.sent(), sent);
            continue;
        }
        let admitted = condition.admits(now.as_ref(), |a, b| a == b);
        let found = client.request(op.clone(), condition.clone()).unwrap();
        assert_eq!(
            found,
            if admitted { Ok(now) } else { Err(now) },
            "step {step}: {key:?} under a {} condition",
            match condition {
                Condition::Equals(_) => "compare",
                Condition::Absent => "absent",
                Condition::Present => "present",
                Condition::Always => "plain",
            }
        );
        if admitted {
            match op {
                Op::Insert(k, v) => model.insert(k, v),
                Op::Remove(k) => model.remove(&k),
            };
        }
    }
    client.flush().unwrap();
    model
}

/// Two clients on two nodes write string keys and values of every length class through
/// one server; every old value each gets back is the one its model holds, and the map
/// ends as the two models together.
#[test]
#[cfg_attr(miri, ignore)] // threads spinning on emulated memory: minutes under Miri
fn strings_cross_to_the_writer_and_old_values_come_back() {
    for seed in bi_kit::seeds(3, 3) {
        let s = machine(seed, 0.2);
        let layout = area(&s, 2);
        let mut server = DelegationServer::new(s.emu.node(0), layout, map(&s)).unwrap();
        let models = with_server(&mut server, || {
            std::thread::scope(|scope| {
                let players: Vec<_> = (0..2)
                    .map(|i| {
                        let mut c = client(&s, layout, i);
                        scope.spawn(move || play(&mut c, seed, 150))
                    })
                    .collect();
                let played: Vec<_> = players.into_iter().map(|p| p.join()).collect();
                played.into_iter().map(|p| p.unwrap()).collect::<Vec<_>>()
            })
        });
        let mut all: BTreeMap<String, String> = BTreeMap::new();
        models.into_iter().for_each(|m| all.extend(m));
        let w = server.into_structure();
        let mut found = w.entries().unwrap();
        found.sort();
        assert_eq!(found, all.into_iter().collect::<Vec<_>>(), "seed {seed}");
    }
}

/// What does not cross is refused before anything is written: an item longer than the
/// area, a key and value that together are, and a remote write to a key whose value
/// (put there by the writer's own handle) is longer than a reply carries.
#[test]
fn items_longer_than_a_parcel_are_typed_errors_that_write_nothing() {
    let s = machine(7, 0.2);
    let layout = area(&s, 1);
    let mut server = DelegationServer::new(s.emu.node(0), layout, map(&s)).unwrap();
    let big = text(9, LIMIT + 100);
    server
        .structure_mut()
        .insert("big".into(), big.clone())
        .unwrap();
    // A value of exactly the limit, put there by the writer's own handle, comes back.
    let at_limit = text(5, LIMIT);
    server
        .structure_mut()
        .insert("at limit".into(), at_limit.clone())
        .unwrap();
    let mut c = client(&s, layout, 0);
    with_server(&mut server, || {
        let removal = c.remove_returning("at limit".into());
        assert_eq!(removal.unwrap(), Some(at_limit));
        let again = c.remove_returning("at limit".into());
        assert!(again.unwrap().is_none(), "the first removal was applied");
        let too_large = |e: CollectionError| match e {
            CollectionError::Delegation(DelegationError::ItemTooLarge { len, limit }) => {
                assert_eq!(limit, LIMIT);
                len
            }
            e => panic!("not ItemTooLarge: {e}"),
        };
        // Exactly the limit crosses; one byte more does not, and nothing is sent.
        let edge = text(1, LIMIT);
        assert_eq!(
            c.insert_returning("edge".into(), edge.clone()).unwrap(),
            None
        );
        let sent = c.sent();
        let err = c
            .insert_returning("over".into(), text(2, LIMIT + 1))
            .unwrap_err();
        assert_eq!(too_large(err), LIMIT + 1);
        // A key and a value that fit alone but not together.
        let (k, v) = (text(3, LIMIT / 2 + 8), text(4, LIMIT / 2 + 8));
        assert!(too_large(c.insert_returning(k.clone(), v).unwrap_err()) > LIMIT);
        assert_eq!(c.sent(), sent, "nothing was sent");
        assert_eq!(c.remove_returning(k).unwrap(), None, "nothing was written");
        // The writer's own 4,188-byte value cannot be reported back: refused, kept.
        let err = c
            .insert_returning("big".into(), "small".into())
            .unwrap_err();
        assert_eq!(too_large(err), big.len());
        let err = c.remove_returning("big".into()).unwrap_err();
        assert_eq!(too_large(err), big.len());
        assert_eq!(c.remove_returning("edge".into()).unwrap(), Some(edge));
    });
    assert_eq!(server.structure().get("big"), Some(big));
    assert_eq!(server.structure().get("over"), None);
}

/// An item that can never cross is refused at once, whatever is in flight: the client
/// does not first wait for the writes it sent before (no server serves here, so such a
/// wait would end in a timeout), and a batch holding one sends none of its operations.
/// The error counts every byte that had to cross, the expected value's included.
#[test]
fn an_item_that_can_never_cross_is_refused_at_once_with_writes_in_flight() {
    let s = machine(8, 0.0);
    let layout = area(&s, 1);
    let _idle = DelegationServer::new(s.emu.node(0), layout, map(&s)).unwrap();
    let config = ClientConfig::default().timeout(Duration::from_millis(200));
    let mut c = DelegationClient::with_config(s.emu.node(1), layout, 0, config).unwrap();
    let too_large = |e: CollectionError| match e {
        CollectionError::Delegation(DelegationError::ItemTooLarge { len, limit }) => {
            assert_eq!(limit, LIMIT);
            len
        }
        e => panic!("not ItemTooLarge: {e}"),
    };
    let over = text(2, LIMIT + 1);
    // A write whose value takes a parcel, sent and never applied.
    assert_eq!(c.insert("long".into(), text(1, 300)).unwrap(), 1);
    let err = c.send(Op::Insert("over".into(), over.clone())).unwrap_err();
    assert_eq!(too_large(err), LIMIT + 1);
    // A condition's expected value counts too.
    let condition = Condition::Equals(over.clone());
    let err = c.send_conditional(Op::Insert("k".into(), "v".into()), condition);
    assert_eq!(too_large(err.unwrap_err()), LIMIT + 1);
    // A batch: the fitting operation before the one that cannot fit is not sent either.
    let batch = [
        Op::Insert("fits".into(), text(3, 100)),
        Op::Insert("over".into(), over),
    ];
    assert_eq!(too_large(c.send_batch(&batch).unwrap_err()), LIMIT + 1);
    assert_eq!(c.sent(), 1);
    // A removal sent after them is the second operation.
    assert_eq!(c.remove("long".into()).unwrap(), 2);
    let removal = Condition::Equals(text(1, 300));
    assert_eq!(
        c.send_conditional(Op::Remove("gone".into()), removal)
            .unwrap(),
        3
    );
}
