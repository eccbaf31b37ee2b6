//! `--processes`: this program as the launcher of one process per partition, and as one
//! of those processes.
//!
//! The launcher starts this program again, with the same arguments, once per partition,
//! telling each which partition it is, over which region file, in `BI_GRAPH_PARTITION`
//! and `BI_GRAPH_REGION`, and then either:
//!
//! - of which mode, in `BI_GRAPH_MODE`: such a process loads the same graph, runs its
//!   partition of that mode and exits; the launcher collects the values (a graph the
//!   launcher generated or holds whole), or
//! - through which directory the partitions exchange, in `BI_GRAPH_EXCHANGE`: each reads
//!   only its share of the input file and runs every mode asked for; partition 0
//!   gathers the values and reports, as rank 0 does over MPI, and the launcher only
//!   watches (an edge list cut by endpoints).

use crate::Failure;
use crate::report::mode_name;
use bi_graph::{Launch, Mode, PartitionOf, Placement};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

const PARTITION: &str = "BI_GRAPH_PARTITION";
const MODE: &str = "BI_GRAPH_MODE";
const REGION: &str = "BI_GRAPH_REGION";
const EXCHANGE: &str = "BI_GRAPH_EXCHANGE";

/// This process as one partition of a launched run.
pub struct Worker {
    /// The mode it runs, when it loads the whole graph; `None` when it reads a share
    /// and runs every mode asked for.
    pub mode: Option<Mode>,
    pub partition: usize,
    region: PathBuf,
    /// Where the partitions exchange, when each reads a share.
    pub exchange: Option<PathBuf>,
    /// The launcher's process id, when this system has one to compare.
    launcher: Option<u32>,
}

impl Worker {
    /// The partition this process is, when a launcher started it.
    pub fn from_env() -> Result<Option<Worker>, String> {
        let Some(partition) = std::env::var_os(PARTITION) else {
            return Ok(None);
        };
        let bad = |what: &str| format!("{what} is not what a launching bi-graph sets");
        let partition = partition
            .to_str()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| bad(PARTITION))?;
        let exchange: Option<PathBuf> = std::env::var_os(EXCHANGE).map(Into::into);
        let mode = match std::env::var(MODE) {
            Err(_) if exchange.is_some() => None,
            m => Some(
                m.ok()
                    .and_then(|m| {
                        [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic]
                            .into_iter()
                            .find(|&mode| mode_name(mode) == m)
                    })
                    .ok_or_else(|| bad(MODE))?,
            ),
        };
        let region = std::env::var_os(REGION).ok_or_else(|| bad(REGION))?.into();
        Ok(Some(Worker {
            mode,
            partition,
            region,
            exchange,
            launcher: parent_id(),
        }))
    }

    /// Removes the run's region file (and exchange directory) if the launcher that
    /// would have is gone (this process was adopted by another parent): the partitions
    /// of a killed launcher leave nothing behind.
    pub fn clean_up_if_orphaned(&self) {
        if self.launcher.is_some() && self.launcher != parent_id() {
            remove_region(&self.region);
            if let Some(dir) = &self.exchange {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }

    pub fn placement(&self) -> Placement {
        Placement::Partition(PartitionOf {
            region: self.region.clone(),
            partition: self.partition,
            exchange: self.exchange.clone(),
        })
    }

    /// Whether this process writes the values and the summary: partition 0 of a run
    /// whose partitions read shares.
    pub fn reports(&self) -> bool {
        self.exchange.is_some() && self.partition == 0
    }
}

fn parent_id() -> Option<u32> {
    #[cfg(unix)]
    return Some(std::os::unix::process::parent_id());
    #[cfg(not(unix))]
    None
}

/// A fresh region file's path: `region`, or one in /dev/shm or the temporary directory
/// named for this process and `what`.
fn fresh_region(region: Option<&Path>, what: &str) -> Result<PathBuf, Failure> {
    let region = match region {
        Some(path) => path.to_path_buf(),
        None => {
            let shm = Path::new("/dev/shm");
            let dir = if shm.is_dir() {
                shm.to_path_buf()
            } else {
                std::env::temp_dir()
            };
            dir.join(format!("bi-graph-{}-{what}.bi", std::process::id()))
        }
    };
    if region.exists() {
        // Never taken over, and so never removed afterwards.
        return Err(Failure::Message(format!(
            "{} exists: --region needs a path where no file is",
            region.display()
        )));
    }
    Ok(region)
}

/// This program again, with the same arguments.
fn this_program() -> Result<(PathBuf, Vec<std::ffi::OsString>), Failure> {
    let program = std::env::current_exe().map_err(|e| {
        Failure::Message(format!("cannot find this program to start it again: {e}"))
    })?;
    Ok((program, std::env::args_os().skip(1).collect()))
}

/// The launcher's placement for one mode: a fresh region file (`region`, or one in
/// /dev/shm or the temporary directory) and this program again for every partition.
pub fn launch(region: Option<&Path>, mode: Mode) -> Result<Placement, Failure> {
    let region = fresh_region(region, mode_name(mode))?;
    let (program, args) = this_program()?;
    let file = region.clone();
    let spawn = move |partition: usize| {
        Command::new(&program)
            .args(&args)
            .env(PARTITION, partition.to_string())
            .env(MODE, mode_name(mode))
            .env(REGION, &file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
    };
    Ok(Placement::Processes(Launch {
        region,
        spawn: Arc::new(spawn),
    }))
}

/// Runs every mode with one process per partition, each reading its share of the
/// input: starts them (partition 0 with this process's standard output, as it reports)
/// and waits for them.
pub fn launch_shares(region: Option<&Path>, parts: usize) -> Result<(), Failure> {
    let region = fresh_region(region, "shares")?;
    let (program, args) = this_program()?;
    let (file, exchange) = (region.clone(), bi_graph::engine::exchange_dir(&region));
    let spawn = move |partition: usize| {
        let mut command = Command::new(&program);
        command
            .args(&args)
            .env(PARTITION, partition.to_string())
            .env(REGION, &file)
            .env(EXCHANGE, &exchange)
            .stdin(Stdio::null());
        if partition != 0 {
            command.stdout(Stdio::null());
        }
        command.spawn()
    };
    let launch = Launch {
        region,
        spawn: Arc::new(spawn),
    };
    bi_graph::engine::launch_shares(&launch, parts)?;
    Ok(())
}

/// The region file a launcher creates.
pub fn region_of(placement: &Placement) -> Option<PathBuf> {
    match placement {
        Placement::Processes(launch) => Some(launch.region.clone()),
        _ => None,
    }
}

pub use bi_graph::engine::remove_region;
