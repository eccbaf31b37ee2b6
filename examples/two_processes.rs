//! A writer process and a reader process share a map through a region file: the whole
//! setup of each is two statements (open the pool, open the map by name and type).
//!
//! ```sh
//! cargo run --release --example two_processes
//! ```
//!
//! The parent starts the reader first (it finds an empty map), then the writer, which
//! opens a shared handle (taking the map's writer role and serving other processes'
//! writes), inserts 10,000 orders and then a last key that says it is done; the reader
//! waits for that key, checks every order, and writes a receipt into the map through its
//! own shared handle, which sends the insert to the writer process and returns the old
//! value. The writer waits for the receipt. Each runs as one node of the region (the
//! writer node 0, the reader node 1), with its own background pass. A third process of
//! the same host joins the reader's node instead of running one of its own
//! (`PoolConfig::join`): it reads through the reader's node, whose pass covers its
//! readers too.

use bi::{Pool, PoolConfig};
use bytemuck::{Pod, Zeroable};
use std::error::Error;
use std::process::Command;
use std::time::{Duration, Instant};

/// A value that is not a plain integer: it lives behind a link in the map.
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
struct Order {
    customer: u64,
    cents: u64,
    quantity: u32,
    flags: u32,
    placed_at: u64,
    pad: [u64; 3],
}

// Stored as its bytes in the map's lines.
impl bi::collections::Plain for Order {}

fn order(id: u64) -> Order {
    Order {
        customer: id % 97,
        cents: id * 125,
        quantity: (id % 9) as u32 + 1,
        flags: 0,
        placed_at: id,
        pad: [0; 3],
    }
}

const ORDERS: u64 = 10_000;
const DONE: u64 = u64::MAX;
/// The key the reader writes, through the writer, once it has checked every order.
const RECEIPT: u64 = u64::MAX - 1;

const WRITER_NODE: usize = 0;
const READER_NODE: usize = 1;

fn writer(path: &str) -> Result<(), Box<dyn Error>> {
    let pool = Pool::open_or_create(
        path,
        PoolConfig {
            node: Some(WRITER_NODE),
            ..PoolConfig::default()
        },
    )?;
    // The writer role, and a thread serving the other processes' writes.
    let orders = pool.map::<u64, Order>("orders")?;
    assert!(orders.is_writer());

    for id in 0..ORDERS {
        orders.insert(id, order(id))?;
    }
    orders.insert(DONE, order(ORDERS))?;
    // Stay (and keep serving and passing) until the reader's receipt arrives.
    let deadline = Instant::now() + Duration::from_secs(60);
    while orders.get(&RECEIPT)?.is_none() {
        if Instant::now() > deadline {
            return Err("the reader sent no receipt".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    println!(
        "writer (node {}): the reader's receipt arrived",
        pool.node()
    );
    Ok(())
}

fn reader(path: &str) -> Result<(), Box<dyn Error>> {
    let pool = Pool::open_or_create(
        path,
        PoolConfig {
            node: Some(READER_NODE),
            ..PoolConfig::default()
        },
    )?;
    let orders = pool.map_reader::<u64, Order>("orders")?;
    check(&orders)?;
    println!("reader (node {}): all {ORDERS} orders present", pool.node());
    // A write from a process that is not the writer: sent to it, old value returned.
    let shared = pool.map::<u64, Order>("orders")?;
    assert!(!shared.is_writer());
    let before = shared.insert(RECEIPT, order(ORDERS))?;
    println!("reader: receipt written through the writer (old value {before:?})");
    // Stay (and keep passing for the joined process) until it is done.
    std::thread::sleep(Duration::from_millis(1000));
    Ok(())
}

/// A second process of the reader's host: it joins the reader's node (retrying until the
/// reader runs it) and reads only.
fn joined(path: &str) -> Result<(), Box<dyn Error>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let pool = loop {
        match Pool::open_or_create(
            path,
            PoolConfig {
                join: Some(READER_NODE),
                ..PoolConfig::default()
            },
        ) {
            Ok(pool) => break pool,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(e.into()),
        }
    };
    let orders = loop {
        match pool.map_reader::<u64, Order>("orders") {
            Ok(orders) => break orders,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(e.into()),
        }
    };
    check(&orders)?;
    println!(
        "joined reader (node {}, run by the reader): all {ORDERS} orders present",
        pool.node()
    );
    Ok(())
}

/// Waits for the writer's last key, then checks every order.
fn check(
    orders: &bi::collections::map::MapReadHandle<u64, Order, bi::core::mem::Hardware>,
) -> Result<(), Box<dyn Error>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while orders.get(&DONE)?.is_none() {
        if Instant::now() > deadline {
            return Err("the writer never finished".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    for id in 0..ORDERS {
        if orders.get(&id)? != Some(order(id)) {
            return Err(format!("order {id} is wrong or missing").into());
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("writer") => return writer(&args[2]),
        Some("reader") => return reader(&args[2]),
        Some("joined") => return joined(&args[2]),
        _ => {}
    }
    // `--keep PATH`: the pool at PATH (replaced if there), left there afterwards for a
    // look (`bi inspect PATH`).
    let dir = tempfile::tempdir()?;
    let path = match args.iter().position(|a| a == "--keep") {
        Some(i) => {
            let path = std::path::PathBuf::from(args.get(i + 1).ok_or("--keep needs a path")?);
            if path.exists() {
                std::fs::remove_file(&path)?;
            }
            path
        }
        None => dir.path().join("orders.bi"),
    };
    let me = std::env::current_exe()?;
    let mut reader = Command::new(&me).arg("reader").arg(&path).spawn()?;
    let mut joined = Command::new(&me).arg("joined").arg(&path).spawn()?;
    let writer = Command::new(&me).arg("writer").arg(&path).status()?;
    let read = reader.wait()?;
    let joined = joined.wait()?;
    if !(writer.success() && read.success() && joined.success()) {
        return Err(format!("writer: {writer}, reader: {read}, joined: {joined}").into());
    }
    println!(
        "three processes (two nodes) shared a map through {}",
        path.display()
    );
    Ok(())
}
