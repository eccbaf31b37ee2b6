//! Whether the process that runs a node is still there, asked of this host's kernel.
//!
//! Other nodes judge a node's runner by its heartbeat: once it is older than the lease,
//! the runner counts as dead, and its node and its writer roles are taken over. A lease cannot tell a dead process from a stopped one, though: a
//! process stopped (SIGSTOP, a debugger, a paused virtual machine) between the check of
//! its lease and the store it guards makes that store when it runs again, after its
//! successor adopted the structure and reused what the store links to.
//!
//! On its own host the kernel can tell. So the runner names itself in its node's share
//! record ([`ShareRecord`](crate::runtime::share::ShareRecord)): its host, its pid namespace,
//! its process id and the moment that process started (which no later process with the
//! same id has). A holder whose record names a process of this host that still exists
//! is alive, whatever its heartbeat: its roles and its node wait until it runs again
//! (and renews) or is gone. A holder whose process is gone (it exited, was killed, is a
//! zombie, or its id now belongs to a process that started later) is dead at once,
//! however fresh its heartbeat: a writer restarted right after a crash takes the role
//! without waiting out the dead one's lease. A runner on another host, a record of
//! another process's claim, a process in another pid namespace, or a kernel that will
//! not say (`/proc` hidden), leaves the lease as the only judge ([`Presence::Unknown`]).
//!
//! The pool lock keeps to its lease: a stopped holder of a ticket is passed over once
//! its lease ends, so that calls that need the lock keep their bound. What it guards
//! commits with one store right after [`PoolLockGuard::check`](crate::runtime::PoolLockGuard::check),
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

/// This process's pid namespace (the inode `/proc/self/ns/pid` names), 0 where the
/// kernel will not say: process ids mean the same only within one.
pub(crate) fn pid_space() -> u64 {
    if cfg!(miri) {
        return 0;
    }
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|l| {
            let l = l.to_str()?;
            l.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
        })
        .unwrap_or(0)
}

/// What this host's kernel says of a runner's process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Presence {
    /// It still exists, running or stopped: its holder is alive.
    There,
    /// It is gone: no process has its id, the one that has it started later, or it
    /// ended (a zombie). Its holder is dead, whatever its heartbeat.
    Gone,
    /// The kernel cannot say (another host or pid namespace, `/proc` hidden, or this
    /// process itself): the lease judges.
    Unknown,
}

impl Presence {
    /// Whether a holder is alive: what the kernel says, or, where it cannot say,
    /// `lease_live`.
    pub(crate) fn or_lease(self, lease_live: bool) -> bool {
        match self {
            Presence::There => true,
            Presence::Gone => false,
            Presence::Unknown => lease_live,
        }
    }
}

/// What the kernel says of the process `pid` that started at `at`, asked from a process
/// of the same host and pid namespace. This process itself is [`Presence::Unknown`]: a
/// second runtime of one process is judged by its lease, as a test's nodes are.
pub(crate) fn presence(pid: u64, at: u64) -> Presence {
    let Ok(id) = libc::pid_t::try_from(pid) else {
        return Presence::Unknown;
    };
    if cfg!(miri) || id <= 0 || at == 0 || pid == u64::from(std::process::id()) {
        return Presence::Unknown;
    }
    // SAFETY: signal 0 is no signal: `kill` only checks that a process with this
    // (positive) id exists and could be signalled; it touches no memory.
    let gone = unsafe { libc::kill(id, 0) } != 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    if gone {
        return Presence::Gone;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{id}/stat")) else {
        // It exists but `/proc` will not show it (`hidepid`), or it ended meanwhile.
        return Presence::Unknown;
    };
    let ended = stat_field(&stat, 3).is_some_and(|s| matches!(s, "Z" | "X" | "x"));
    match stat_field(&stat, 22).and_then(|s| s.parse::<u64>().ok()) {
        _ if ended => Presence::Gone,
        Some(start) if start == at => Presence::There,
        Some(_) => Presence::Gone,
        None => Presence::Unknown,
    }
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
        assert_eq!(
            presence(me, at),
            Presence::Unknown,
            "this process is judged by its lease"
        );
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let at = started(pid).expect("a running child");
        assert_eq!(presence(u64::from(pid), at), Presence::There);
        assert_eq!(
            presence(u64::from(pid), at + 1),
            Presence::Gone,
            "another start: not it"
        );
        // SAFETY: stops and continues our own child; touches no memory of ours.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
        assert_eq!(
            presence(u64::from(pid), at),
            Presence::There,
            "a stopped process is there"
        );
        child.kill().unwrap();
        // Killed but not yet reaped: a zombie, not there.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while presence(u64::from(pid), at) == Presence::There && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(presence(u64::from(pid), at), Presence::Gone);
        child.wait().unwrap();
        assert_eq!(
            presence(u64::from(pid), at),
            Presence::Gone,
            "reaped: no such process"
        );
        assert_eq!(presence(0, at), Presence::Unknown);
        assert_eq!(presence(u64::from(pid), 0), Presence::Unknown);
        assert_eq!(presence(u64::MAX, at), Presence::Unknown);
        // The namespace's number is the inode of the namespace file itself.
        use std::os::unix::fs::MetadataExt;
        let ns = std::fs::metadata("/proc/self/ns/pid").unwrap().ino();
        assert_eq!(pid_space(), ns);
        // A live process asked right after a gone one (whose question left ESRCH in
        // errno, which a successful call does not clear) is there.
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let other_at = started(other.id()).expect("a running child");
        assert_eq!(presence(u64::from(pid), at), Presence::Gone);
        assert_eq!(presence(u64::from(other.id()), other_at), Presence::There);
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
