//! A stale parcel: a long key or value a delegation client sends to the writer (or an old
//! value the writer sends back) arrives as what memory or the reader's cache held before.
//!
//! Items that do not fit a request's record travel in *parcels*: bytes the sender stores
//! in its own area of shared memory and names in the record. The schedule: client 1 on
//! node 1 replaces one 40-byte key's 100-byte value again and again through the shipped
//! [`DelegationServer`] on node 0 (over the shipped [`BiHashMap`]), each request waiting
//! for its reply, so every parcel and every reply is at the start of its area, where the
//! previous one was. The server serves whenever the client fences (node 1's view runs it,
//! so the schedule is one thread). Two rows:
//!
//! - Broken ([`Fault::ParcelWriteback`]): the client publishes the record without writing
//!   the parcel back (nor the server its reply), so the other side reads what memory held
//!   before. BI: each side writes back what it put before it publishes the record or the
//!   acknowledgement that names it.
//! - Broken ([`Fault::ParcelInvalidate`]): the server reads the parcel (and the client its
//!   reply) through its cache, which still holds the previous request's bytes at the same
//!   place. BI: the reader drops its copy and fences first.
//!
//! Counted: replies that reported another old value than the one the client had put, plus
//! the requests left unanswered once a parcel read as garbage broke the channel, plus one
//! if the map ends with another value than the last one sent.

use super::Hazard;
use super::delegation::machine;
use bi_collections::DelegationServer;
use bi_collections::delegate::{ClientConfig, DelegationClient, DelegationLayout};
use bi_collections::map::BiHashMap;
use bi_core::mem::{Access, Observed};
use bi_core::runtime::{Fault, RuntimeConfig};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(super) const WRITEBACK: Hazard = Hazard {
    name: "parcel_published_before_writeback",
    fault: Fault::ParcelWriteback,
    counts: "delegated requests answered wrong, or left unanswered by a garbled parcel",
    run,
};

pub(super) const INVALIDATE: Hazard = Hazard {
    name: "parcel_read_from_the_cache",
    fault: Fault::ParcelInvalidate,
    counts: "delegated requests answered wrong, or left unanswered by a garbled parcel",
    run,
};

/// Bytes of each parcel and reply area.
const PARCEL: usize = 1024;

/// Requests per run.
const ROUNDS: u64 = 24;

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let faults = config.faults();
    let s = machine(config, seed, 3);
    let line = s.emu.line_size();
    let layout = DelegationLayout::<String, String>::with_parcels(s.arena(2), 1, 8, PARCEL, line)
        .expect("area");
    let map = BiHashMap::<String, String>::at(s.slot(0))
        .write_handle(s.writer(0))
        .expect("map");
    let server = DelegationServer::new(s.emu.node(0), layout, map).expect("server");
    let server = Arc::new(Mutex::new(server.with_faults(faults)));
    let serving = server.clone();
    let view = Observed::new(s.emu.node(1), move |access| {
        if access == Access::Fence {
            let mut server = serving.lock().expect("server");
            // A request the server cannot decode breaks its client, not the server.
            server.serve_once(8).expect("serve");
        }
        Ok(())
    });
    // Every request is served at the client's first poll: a reply that has not come by
    // then never will.
    let config = ClientConfig::default().timeout(Duration::from_millis(20));
    let c = DelegationClient::with_config(view, layout, 0, config).expect("client");
    let mut c = c.with_faults(faults);
    let key = text(0xAB, 40);
    let mut previous = None;
    let mut wrong = 0;
    for round in 0..ROUNDS {
        let value = text(round, 100);
        match c.insert_returning(key.clone(), value.clone()) {
            Ok(found) if found == previous => {}
            Ok(_) => wrong += 1,
            Err(_) => {
                wrong += ROUNDS - round;
                break;
            }
        }
        previous = Some(value);
    }
    let last = server.lock().expect("server").structure().get(&key);
    wrong + u64::from(last != Some(text(ROUNDS - 1, 100)))
}

/// A string of `len` bytes that `tag` tells apart from others of its length.
fn text(tag: u64, len: usize) -> String {
    let stamp = format!("{tag:x}.");
    stamp.chars().cycle().take(len).collect()
}
