//! What the facade's multi-process tests share: the pool each process opens over one
//! region file, a child process that is this test binary running one of its tests, and
//! opening a node that a killed process still claims.
#![allow(dead_code)] // each test binary uses the part it needs

use bi::core::runtime::{BiError, RuntimeConfig};
use bi::{Pool, PoolConfig, PoolError};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long [`open_when_free`] waits for a killed process's claim to lapse.
const CLAIM_WAIT: Duration = Duration::from_secs(10);

/// A pool of `nodes` nodes over a 16 MiB region, opened as `node`, whose node and
/// reader leases are `lease`: long enough that a busy test machine never stalls a live
/// process past them (a live node taken for dead has its readers' memory reclaimed and
/// its structures adopted while it still writes them), short enough that a killed
/// process's node is free again soon.
pub fn pool_config(nodes: u32, node: usize, lease: Duration) -> PoolConfig {
    let ns = lease.as_nanos() as u64;
    let mut c = PoolConfig::default();
    c.region = c.region.with_size(16 << 20).with_nodes(nodes);
    c.node = Some(node);
    c.runtime = RuntimeConfig::default().node_lease(ns).reader_lease(ns);
    c
}

/// This test binary again, running exactly the test `test` (which does its part when the
/// variable the caller sets is present, and returns at once otherwise).
pub fn child(test: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"]);
    cmd
}

/// `open()`, retried while a killed process's claim of the node has not yet lapsed.
///
/// # Panics
///
/// On any other error, or if the node is still taken after ten seconds.
pub fn open_when_free<M>(open: impl Fn() -> Result<Pool<M>, bi::Error>) -> Pool<M>
where
    M: bi::core::mem::MemView + 'static,
{
    let deadline = Instant::now() + CLAIM_WAIT;
    loop {
        match open() {
            Ok(p) => return p,
            Err(e)
                if matches!(e.cause(), PoolError::Runtime(BiError::NodeTaken { .. }))
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("opening the pool: {e}"),
        }
    }
}
