//! The machine settings every bench honours, read from the environment once and printed
//! at its start, so that a NUMA or CXL lab runs the benches unchanged:
//!
//! | variable | meaning | example (two sockets, CXL memory as NUMA node 2) |
//! |---|---|---|
//! | `BI_NODES` | number of BI nodes a bench runs (where it has a choice) | `BI_NODES=2` |
//! | `BI_PIN` | each node's CPUs, `;` between nodes: a CPU list, or `numa:N` for NUMA node `N`'s CPUs | `BI_PIN="0-27;28-55"` or `BI_PIN="numa:0;numa:1"` |
//! | `BI_MEMBIND` | NUMA node(s) the shared memory is bound to (`mbind`, pages moved) | `BI_MEMBIND=2` |
//! | `BI_REGION` | where shared memory lives: a file, a directory (one file per bench), or a DAX / CXL device; default anonymous memory | `BI_REGION=/dev/dax0.0` |
//! | `BI_PERIOD` | the background pass period | `BI_PERIOD=500us` |
//!
//! A node's threads are pinned to the node's CPU set (node `k` uses entry `k` modulo the
//! number of entries); without `BI_PIN` nothing is pinned. A bad value is an error that
//! names the variable ([`SettingsError`]); [`Settings::load`] prints it and exits.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// A CPU set: the CPUs one node's threads run on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSet {
    /// Where it came from (`0-27`, `numa:1`), for the banner.
    pub spec: String,
    /// The CPUs, ascending.
    pub cpus: Vec<usize>,
}

/// The settings a bench runs with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// `BI_NODES`.
    pub nodes: Option<usize>,
    /// `BI_PIN`: one CPU set per node (empty: threads are not pinned).
    pub pin: Vec<CpuSet>,
    /// `BI_MEMBIND`: NUMA nodes the shared memory is bound to (empty: the kernel's
    /// default placement).
    pub membind: Vec<u32>,
    /// `BI_REGION`: a file, directory or device for the shared memory (`None`:
    /// anonymous memory).
    pub region: Option<PathBuf>,
    /// `BI_PERIOD`: the background pass period.
    pub period: Option<Duration>,
}

/// A setting the environment gives wrongly, or a placement the system refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={:?}: {}", self.var, self.value, self.reason)
    }
}

impl std::error::Error for SettingsError {}

impl Settings {
    /// Reads the settings from the environment.
    ///
    /// ```
    /// let settings = bi_kit::bench::Settings::from_env().unwrap();
    /// assert_eq!(settings.nodes_or(2), settings.nodes.unwrap_or(2));
    /// ```
    pub fn from_env() -> Result<Settings, SettingsError> {
        Settings::parse(|var| std::env::var(var).ok())
    }

    /// Reads the settings from `get` (the environment, or a test's table).
    ///
    /// ```
    /// use bi_kit::bench::Settings;
    /// use std::time::Duration;
    ///
    /// let s = Settings::parse(|var| match var {
    ///     "BI_NODES" => Some("2".into()),
    ///     "BI_PIN" => Some("0-1;2,3".into()),
    ///     "BI_PERIOD" => Some("500us".into()),
    ///     _ => None,
    /// })
    /// .unwrap();
    /// assert_eq!(s.nodes, Some(2));
    /// assert_eq!(s.pin[1].cpus, [2, 3]);
    /// assert_eq!(s.period, Some(Duration::from_micros(500)));
    /// assert!(Settings::parse(|v| (v == "BI_NODES").then(|| "zero".into())).is_err());
    /// ```
    pub fn parse(get: impl Fn(&str) -> Option<String>) -> Result<Settings, SettingsError> {
        let mut s = Settings::default();
        let err = |var: &'static str, value: &str, reason: String| SettingsError {
            var,
            value: value.to_owned(),
            reason,
        };
        if let Some(v) = get("BI_NODES") {
            s.nodes = Some(
                v.trim()
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| err("BI_NODES", &v, "expected a positive number".into()))?,
            );
        }
        if let Some(v) = get("BI_PIN") {
            for spec in v.split(';').map(str::trim).filter(|s| !s.is_empty()) {
                let cpus = match spec.strip_prefix("numa:") {
                    Some(node) => numa_cpus(node),
                    None => parse_cpu_list(spec),
                }
                .map_err(|reason| err("BI_PIN", &v, format!("{spec}: {reason}")))?;
                s.pin.push(CpuSet {
                    spec: spec.to_owned(),
                    cpus,
                });
            }
        }
        if let Some(v) = get("BI_MEMBIND") {
            for node in v.split([',', ';']).map(str::trim).filter(|s| !s.is_empty()) {
                let n: u32 = node.parse().map_err(|_| {
                    err("BI_MEMBIND", &v, format!("{node:?} is not a NUMA node id"))
                })?;
                if n as usize >= MASK_BITS {
                    return Err(err(
                        "BI_MEMBIND",
                        &v,
                        format!("NUMA node {n} is out of range"),
                    ));
                }
                s.membind.push(n);
            }
        }
        if let Some(v) = get("BI_REGION").filter(|v| !v.is_empty()) {
            s.region = Some(PathBuf::from(v));
        }
        if let Some(v) = get("BI_PERIOD") {
            s.period = Some(
                humantime::parse_duration(v.trim())
                    .ok()
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| {
                        err(
                            "BI_PERIOD",
                            &v,
                            "expected a duration such as 1ms or 500us".into(),
                        )
                    })?,
            );
        }
        Ok(s)
    }

    /// [`from_env`](Self::from_env), printing the settings under the bench's name; a bad
    /// setting is printed and the process exits with status 2.
    pub fn load(bench: &str) -> Settings {
        match Settings::from_env() {
            Ok(s) => {
                println!("{bench}: {s}");
                s
            }
            Err(e) => {
                eprintln!("{bench}: {e}");
                std::process::exit(2);
            }
        }
    }

    /// `BI_NODES`, else `default`.
    pub fn nodes_or(&self, default: usize) -> usize {
        self.nodes.unwrap_or(default)
    }

    /// `BI_PERIOD`, else `default`.
    pub fn period_or(&self, default: Duration) -> Duration {
        self.period.unwrap_or(default)
    }

    /// Pins the calling thread to node `node`'s CPUs (nothing without `BI_PIN`).
    ///
    /// ```
    /// let settings = bi_kit::bench::Settings::default();
    /// settings.pin_thread(0).unwrap(); // not pinned: nothing to do
    /// ```
    pub fn pin_thread(&self, node: usize) -> Result<(), SettingsError> {
        if self.pin.is_empty() {
            return Ok(());
        }
        let set = &self.pin[node % self.pin.len()];
        pin_current_thread(&set.cpus).map_err(|reason| SettingsError {
            var: "BI_PIN",
            value: set.spec.clone(),
            reason,
        })
    }

    /// Where a bench named `name` puts its shared memory: `None` for anonymous memory
    /// (no `BI_REGION`); else that file or device, or `<dir>/<name>.bi` when `BI_REGION`
    /// is a directory. The bench creates a fresh region there (replacing what it held),
    /// then binds it with [`bind_memory`](Self::bind_memory).
    ///
    /// ```
    /// use bi_kit::bench::Settings;
    ///
    /// assert_eq!(Settings::default().region_file("tree"), None);
    /// let dir = std::env::temp_dir();
    /// let s = Settings { region: Some(dir.clone()), ..Settings::default() };
    /// assert_eq!(s.region_file("tree"), Some(dir.join("tree.bi")));
    /// ```
    pub fn region_file(&self, name: &str) -> Option<PathBuf> {
        let path = self.region.as_deref()?;
        Some(if path.is_dir() {
            path.join(format!("{name}.bi"))
        } else {
            path.to_owned()
        })
    }

    /// Places the memory the calling thread touches first from now on on `BI_MEMBIND`'s
    /// NUMA nodes (`set_mempolicy`); nothing without `BI_MEMBIND`. For shared memory a
    /// bench does not map itself (a library's threads fault it in).
    pub fn bind_thread_memory(&self) -> Result<(), SettingsError> {
        if self.membind.is_empty() {
            return Ok(());
        }
        bind_thread_memory(&self.membind).map_err(|reason| self.membind_refused(reason))
    }

    fn membind_refused(&self, reason: String) -> SettingsError {
        SettingsError {
            var: "BI_MEMBIND",
            value: format!("{:?}", self.membind),
            reason,
        }
    }

    /// Binds `addr .. addr + len` (a mapping of this process) to `BI_MEMBIND`'s NUMA
    /// nodes, moving pages already there; nothing without `BI_MEMBIND`.
    pub fn bind_memory(&self, addr: usize, len: usize) -> Result<(), SettingsError> {
        if self.membind.is_empty() {
            return Ok(());
        }
        bind_memory(addr, len, &self.membind).map_err(|reason| self.membind_refused(reason))
    }
}

impl fmt::Display for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.nodes {
            Some(n) => write!(f, "nodes {n}")?,
            None => write!(f, "nodes (the bench's own)")?,
        }
        if self.pin.is_empty() {
            write!(f, ", threads not pinned")?;
        } else {
            let sets: Vec<&str> = self.pin.iter().map(|s| s.spec.as_str()).collect();
            write!(f, ", pinned per node [{}]", sets.join(" | "))?;
        }
        if self.membind.is_empty() {
            write!(f, ", memory placed by the kernel")?;
        } else {
            write!(f, ", memory bound to NUMA {:?}", self.membind)?;
        }
        match &self.region {
            Some(p) => write!(f, ", region {}", p.display())?,
            None => write!(f, ", region anonymous")?,
        }
        match self.period {
            Some(d) => write!(f, ", pass period {d:?}"),
            None => write!(f, ", pass period (the bench's own)"),
        }
    }
}

/// Parses a Linux CPU list (`0-3,8,10-11`).
fn parse_cpu_list(list: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let bad = || format!("{part:?} is not a CPU or a range of CPUs");
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            ),
            None => {
                let c: usize = part.parse().map_err(|_| bad())?;
                (c, c)
            }
        };
        if lo > hi || hi >= 1 << 16 {
            return Err(bad());
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.is_empty() {
        return Err("no CPU named".into());
    }
    Ok(cpus)
}

/// The CPUs of NUMA node `node`, from sysfs.
fn numa_cpus(node: &str) -> Result<Vec<usize>, String> {
    let n: u32 = node
        .trim()
        .parse()
        .map_err(|_| format!("{node:?} is not a NUMA node id"))?;
    let path = format!("/sys/devices/system/node/node{n}/cpulist");
    let list = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {path}: {e} (no such NUMA node?)"))?;
    parse_cpu_list(list.trim()).map_err(|e| format!("NUMA node {n} has no CPUs ({e})"))
}

#[cfg(target_os = "linux")]
fn pin_current_thread(cpus: &[usize]) -> Result<(), String> {
    // SAFETY: `cpu_set_t` is plain data for which all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let capacity = 8 * size_of::<libc::cpu_set_t>();
    for &c in cpus {
        if c >= capacity {
            return Err(format!("CPU {c} is beyond the {capacity} a CPU set holds"));
        }
        // SAFETY: `c` is below the number of CPUs the set holds (checked above).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid, initialised CPU set of the size passed; pid 0 is the
    // calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    succeeded(rc.into(), "sched_setaffinity")
}

/// `Ok` for a system call that returned 0, else the call and the OS error.
#[cfg(target_os = "linux")]
fn succeeded(rc: libc::c_long, call: &str) -> Result<(), String> {
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("{call}: {}", std::io::Error::last_os_error()))
    }
}

#[cfg(not(target_os = "linux"))]
fn pin_current_thread(_cpus: &[usize]) -> Result<(), String> {
    Err("pinning is supported on Linux only".into())
}

#[cfg(target_os = "linux")]
const MPOL_BIND: libc::c_long = 2;
/// Bits of the node masks passed to the kernel.
const MASK_BITS: usize = 1024;

#[cfg(target_os = "linux")]
fn node_mask(nodes: &[u32]) -> [libc::c_ulong; MASK_BITS / 64] {
    let mut mask = [0; MASK_BITS / 64];
    for &n in nodes {
        mask[n as usize / 64] |= 1 << (n % 64);
    }
    mask
}

#[cfg(target_os = "linux")]
fn bind_memory(addr: usize, len: usize, nodes: &[u32]) -> Result<(), String> {
    const MPOL_MF_MOVE: libc::c_ulong = 1 << 1;
    let mask = node_mask(nodes);
    let page = 4096;
    let start = addr - addr % page;
    let len = (addr + len).next_multiple_of(page) - start;
    // SAFETY: `mbind` only changes the placement policy of pages of this process's
    // own mapping and migrates them; it reads `mask` (valid for `MASK_BITS` bits) and no
    // other memory, and the kernel rejects a range that is not mapped.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            start,
            len,
            MPOL_BIND,
            mask.as_ptr(),
            MASK_BITS as libc::c_ulong,
            MPOL_MF_MOVE,
        )
    };
    succeeded(rc, "mbind")
}

#[cfg(target_os = "linux")]
fn bind_thread_memory(nodes: &[u32]) -> Result<(), String> {
    let mask = node_mask(nodes);
    // SAFETY: `set_mempolicy` sets the calling thread's allocation policy; it reads
    // `mask` (valid for `MASK_BITS` bits) and no other memory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            MPOL_BIND,
            mask.as_ptr(),
            MASK_BITS as libc::c_ulong,
        )
    };
    succeeded(rc, "set_mempolicy")
}

#[cfg(not(target_os = "linux"))]
fn bind_thread_memory(_nodes: &[u32]) -> Result<(), String> {
    Err("memory placement is supported on Linux only".into())
}

#[cfg(not(target_os = "linux"))]
fn bind_memory(_addr: usize, _len: usize, _nodes: &[u32]) -> Result<(), String> {
    Err("memory placement is supported on Linux only".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_reject() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11").unwrap(),
            [0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("2, 1,1").unwrap(), [1, 2]);
        for bad in ["", "3-1", "a", "1-", "70000"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_settings_name_their_variable() {
        let with = |var: &'static str, value: &'static str| {
            Settings::parse(move |v| (v == var).then(|| value.to_owned()))
        };
        assert_eq!(with("BI_NODES", "0").unwrap_err().var, "BI_NODES");
        assert_eq!(with("BI_PIN", "0-x").unwrap_err().var, "BI_PIN");
        assert_eq!(with("BI_PIN", "numa:999999").unwrap_err().var, "BI_PIN");
        assert_eq!(with("BI_MEMBIND", "one").unwrap_err().var, "BI_MEMBIND");
        assert_eq!(with("BI_PERIOD", "soon").unwrap_err().var, "BI_PERIOD");
        assert_eq!(with("BI_PERIOD", "0ms").unwrap_err().var, "BI_PERIOD");
        assert_eq!(with("BI_MEMBIND", "0").unwrap().membind, [0]);
    }

    #[test]
    fn memory_binds_to_numa_node_zero_where_there_is_one() {
        if !std::path::Path::new("/sys/devices/system/node/node0").exists() {
            return; // a kernel without NUMA: nothing to bind to
        }
        let s = Settings::parse(|v| (v == "BI_MEMBIND").then(|| "0".to_owned())).unwrap();
        let buffer = vec![1u8; 1 << 16];
        s.bind_memory(buffer.as_ptr().addr(), buffer.len()).unwrap();
        assert!(buffer.iter().all(|&b| b == 1));
        std::thread::spawn(move || s.bind_thread_memory().unwrap())
            .join()
            .unwrap();
        let absent = Settings {
            membind: vec![1000],
            ..Settings::default()
        };
        assert_eq!(absent.bind_thread_memory().unwrap_err().var, "BI_MEMBIND");
    }

    #[test]
    fn pinning_to_cpu_zero_works_and_the_banner_names_it() {
        let s = Settings::parse(|v| (v == "BI_PIN").then(|| "0".to_owned())).unwrap();
        std::thread::spawn(move || {
            s.pin_thread(3).unwrap();
            assert!(s.to_string().contains("pinned per node [0]"));
        })
        .join()
        .unwrap();
    }
}
