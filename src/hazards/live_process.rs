//! A writer process stopped past its lease (SIGSTOP, a debugger, a paused virtual
//! machine) still exists: it may be inside a write, between the check of its lease and
//! the store it guards, and it makes that store when it runs again. Taking its role or
//! its node meanwhile makes two writers of what it held.
//!
//! The schedule: node 0 runs in a process of this host that is stopped (a child process,
//! named as node 0's runner in its share record); node 0's writer holds a structure's
//! role and has published, and its heartbeat ages past the lease. Node 1 then tries to
//! take the structure's role, and a new process tries to claim node 0. Broken
//! ([`Fault::LiveProcess`]): the lease alone judges, and both go through under the
//! stopped process. BI: both are refused while the process exists, and once it is
//! killed both go through. Counted: what was taken while the process existed, and what
//! was still refused once it was gone.

use super::{Hazard, two_runtimes};
use bi_core::runtime::{BiError, Fault, NodeRuntime, RuntimeConfig};
use std::process::{Child, Command};
use std::time::Duration;

pub(super) const HAZARD: Hazard = Hazard {
    name: "stopped_process_taken_over",
    fault: Fault::LiveProcess,
    counts: "roles and nodes taken from a stopped process, or refused once it is gone",
    run,
};

const LEASE: u64 = 1_000_000;
const WAIT: Duration = Duration::from_millis(20);

/// A process of this host that stays stopped until it is killed.
struct Stopped(Child);

impl Stopped {
    fn start() -> Stopped {
        let child = Command::new("sleep").arg("60").spawn().expect("sleep");
        let stop = Command::new("kill")
            .args(["-STOP", &child.id().to_string()])
            .status();
        assert!(stop.expect("kill").success(), "stopping the child");
        Stopped(child)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run(config: RuntimeConfig, seed: u64) -> u64 {
    let config = config.node_lease(LEASE).reader_lease(LEASE);
    let s = two_runtimes(config.clone(), seed, |c| c);
    let stopped = Stopped::start();
    assert!(s.run_node_in(0, stopped.0.id()).expect("share record"));
    let slot = s.slot(0);
    let role = s.nodes[0].take_writer_role(slot, WAIT).expect("role");
    let mut w = s.writer(0);
    let first = w.alloc_sealed(1u64).expect("heap");
    w.publish_link(slot, first).expect("publish");
    // Node 0's process stops with its role held.
    s.emu.advance(2 * LEASE);
    let mut hazards = 0;
    let taken = s.nodes[1].take_writer_role(slot, WAIT);
    match &taken {
        Ok(_) => hazards += 1,
        Err(BiError::WriterAlive { node: 0 }) => {}
        Err(e) => panic!("taking the role: {e}"),
    }
    drop(taken);
    std::mem::forget(role); // the stopped process's handle
    let layout = *s.region.layout();
    let again = NodeRuntime::emulated(s.emu.node(0), layout, config.clone());
    match &again {
        Ok(_) => hazards += 1,
        Err(BiError::NodeTaken { node: 0 }) => {}
        Err(e) => panic!("claiming node 0: {e}"),
    }
    if again.is_ok() {
        return hazards; // node 0 changed hands: nothing more to compare
    }
    // Gone: its role and its node are handed on.
    drop(stopped);
    hazards += u64::from(s.nodes[1].take_writer_role(slot, WAIT).is_err());
    hazards + u64::from(NodeRuntime::emulated(s.emu.node(0), layout, config).is_err())
}
