//! Whether the process that runs a node is still there, asked of this host's kernel.
//!
//! Other nodes judge a node's runner by its heartbeat: once it is older than the lease,
//! the runner counts as dead, and its node and its writer roles are taken over. A lease cannot tell a dead process from a stopped one, though: a
//! process stopped (SIGSTOP, a debugger, a paused virtual machine) between the check of
//! its lease and the store it guards makes that store when it runs again, after its
//! successor adopted the structure and reused what the store links to.
//!
//! On its own host the kernel can tell. So the runner names itself in its node's share
//! record ([`ShareRecord`](super::share::ShareRecord)): its host, its process id and the
//! moment that process started (which no later process with the same id has). A holder
//! whose record names a process of this host that still exists is alive, whatever its
//! heartbeat: its roles and its node wait until it runs again (and renews) or is gone.
//! A process that exited, was killed or is a zombie no longer exists. A runner on
//! another host, a record of another process's claim, a process in another pid
//! namespace, or a kernel that will not say (`/proc` hidden), leaves the lease as the
//! only judge.
//!
//! The pool lock keeps to its lease: a stopped holder of a ticket is passed over once
//! its lease ends, so that calls that need the lock keep their bound. What it guards
//! commits with one store right after [`PoolLockGuard::check`](super::PoolLockGuard::check),
//! a window of a few instructions, where a write to a structure is a publication long.

/// Reads field `n` (1-based, as `proc(5)` numbers them) of `/proc/<pid>/stat`, after the
/// command name (which may hold spaces and parentheses): the state is field 3.
fn stat_field(stat: &str, n: usize) -> Option<&str> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_ascii_whitespace().nth(n.checked_sub(3)?)
}

/// The start time (field 22, in clock ticks since boot) of process `pid`, if it exists
/// and has not ended (a zombie has ended: it only waits to be reaped).
pub(crate) fn started(pid: u32) -> Option<u64> {
    if cfg!(miri) {
        return None; // isolated from the file system
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    if matches!(stat_field(&stat, 3)?, "Z" | "X" | "x") {
        return None;
    }
    stat_field(&stat, 22)?.parse().ok()
}

/// This process: its id and start time, 0 and 0 where the kernel will not say.
pub(crate) fn this() -> (u64, u64) {
    let pid = std::process::id();
    match started(pid) {
        Some(at) => (u64::from(pid), at),
        None => (0, 0),
    }
}

/// Whether the process `pid` that started at `at` still runs on this host, and is not
/// this process (a second runtime of one process is judged by its lease, as a test's
/// nodes are). A process that stopped still runs in this sense.
pub(crate) fn still_there(pid: u64, at: u64) -> bool {
    let Ok(pid) = u32::try_from(pid) else {
        return false;
    };
    pid != 0 && at != 0 && pid != std::process::id() && started(pid) == Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_counted_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 777 1 2";
        assert_eq!(stat_field(stat, 3), Some("S"));
        assert_eq!(stat_field(stat, 4), Some("1"));
        assert_eq!(stat_field(stat, 22), Some("777"));
        assert_eq!(stat_field(stat, 2), None);
        assert_eq!(stat_field("no name", 3), None);
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn a_child_is_there_until_it_has_exited_and_a_reused_id_is_not_it() {
        let (me, at) = this();
        assert_eq!(me, u64::from(std::process::id()));
        assert_eq!(Some(at), started(std::process::id()));
        assert_ne!(at, 0);
        assert!(!still_there(me, at), "this process is judged by its lease");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let at = started(pid).expect("a running child");
        assert!(still_there(u64::from(pid), at));
        assert!(
            !still_there(u64::from(pid), at + 1),
            "another start: not it"
        );
        // SAFETY: stops and continues our own child; touches no memory of ours.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
        assert!(
            still_there(u64::from(pid), at),
            "a stopped process is there"
        );
        child.kill().unwrap();
        // Killed but not yet reaped: a zombie, not there.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while still_there(u64::from(pid), at) && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(!still_there(u64::from(pid), at));
        child.wait().unwrap();
        assert!(!still_there(u64::from(pid), at));
    }
}
