//! `membarrier(2)`: the pass-side barrier that lets readers skip their fence.

#[cfg(all(target_os = "linux", not(miri), not(loom)))]
mod imp {
    use std::sync::OnceLock;

    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    static REGISTERED: OnceLock<bool> = OnceLock::new();

    pub(crate) fn register() -> bool {
        *REGISTERED.get_or_init(|| {
            // SAFETY: membarrier takes (cmd, flags, cpu_id) integers and touches no memory
            // of ours; an unsupported command just returns -1.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_membarrier,
                    CMD_REGISTER_PRIVATE_EXPEDITED,
                    0 as libc::c_long,
                    0 as libc::c_long,
                )
            };
            rc == 0
        })
    }

    pub(crate) fn barrier() {
        // SAFETY: as in `register`; only issued after a successful registration.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                CMD_PRIVATE_EXPEDITED,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        };
        if rc != 0 {
            // Cannot happen after registration; be safe anyway.
            crate::primitive::sync::atomic::fence(crate::primitive::sync::atomic::Ordering::SeqCst);
        }
    }
}

#[cfg(not(all(target_os = "linux", not(miri), not(loom))))]
mod imp {
    // Miri cannot run system calls, loom cannot model them, and other systems lack
    // membarrier: readers fence.
    pub(crate) fn register() -> bool {
        false
    }

    pub(crate) fn barrier() {
        crate::primitive::sync::atomic::fence(crate::primitive::sync::atomic::Ordering::SeqCst);
    }
}

pub(crate) use imp::{barrier, register};
