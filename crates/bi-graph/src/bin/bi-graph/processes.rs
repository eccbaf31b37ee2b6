//! `--processes`: this program as the launcher of one process per partition, and as one
//! of those processes.
//!
//! The launcher starts this program again, with the same arguments, once per partition,
//! telling each which partition it is, of which mode, over which region file, in
//! `BI_GRAPH_PARTITION`, `BI_GRAPH_MODE` and `BI_GRAPH_REGION`. Such a process loads
//! the same graph, runs its partition and exits; the launcher collects the values.

use crate::Failure;
use crate::report::mode_name;
use bi_graph::{Launch, Mode, PartitionOf, Placement};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

const PARTITION: &str = "BI_GRAPH_PARTITION";
const MODE: &str = "BI_GRAPH_MODE";
const REGION: &str = "BI_GRAPH_REGION";

/// This process as one partition of a launched run.
pub struct Worker {
    pub mode: Mode,
    partition: usize,
    region: PathBuf,
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
        let mode = std::env::var(MODE)
            .ok()
            .and_then(|m| {
                [Mode::Stock, Mode::BiOnDemand, Mode::BiPeriodic]
                    .into_iter()
                    .find(|&mode| mode_name(mode) == m)
            })
            .ok_or_else(|| bad(MODE))?;
        let region = std::env::var_os(REGION).ok_or_else(|| bad(REGION))?.into();
        Ok(Some(Worker {
            mode,
            partition,
            region,
            launcher: parent_id(),
        }))
    }

    /// Removes the run's region file if the launcher that would have is gone (this
    /// process was adopted by another parent): the partitions of a killed launcher
    /// leave nothing behind.
    pub fn clean_up_if_orphaned(&self) {
        if self.launcher.is_some() && self.launcher != parent_id() {
            remove_region(&self.region);
        }
    }

    pub fn placement(&self) -> Placement {
        Placement::Partition(PartitionOf {
            region: self.region.clone(),
            partition: self.partition,
        })
    }
}

fn parent_id() -> Option<u32> {
    #[cfg(unix)]
    return Some(std::os::unix::process::parent_id());
    #[cfg(not(unix))]
    None
}

/// The launcher's placement for one mode: a fresh region file (`region`, or one in
/// /dev/shm or the temporary directory) and this program again for every partition.
pub fn launch(region: Option<&Path>, mode: Mode) -> Result<Placement, Failure> {
    let region = match region {
        Some(path) => path.to_path_buf(),
        None => {
            let shm = Path::new("/dev/shm");
            let dir = if shm.is_dir() {
                shm.to_path_buf()
            } else {
                std::env::temp_dir()
            };
            dir.join(format!(
                "bi-graph-{}-{}.bi",
                std::process::id(),
                mode_name(mode)
            ))
        }
    };
    if region.exists() {
        // Never taken over, and so never removed afterwards.
        return Err(Failure::Message(format!(
            "{} exists: --region needs a path where no file is",
            region.display()
        )));
    }
    let program = std::env::current_exe().map_err(|e| {
        Failure::Message(format!("cannot find this program to start it again: {e}"))
    })?;
    let args: Vec<_> = std::env::args_os().skip(1).collect();
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

/// The region file a launcher creates.
pub fn region_of(placement: &Placement) -> Option<PathBuf> {
    match placement {
        Placement::Processes(launch) => Some(launch.region.clone()),
        _ => None,
    }
}

/// Removes a launcher's region file and the emulator's history beside it.
pub fn remove_region(path: &Path) {
    let _ = std::fs::remove_file(path);
    let mut history = path.as_os_str().to_owned();
    history.push(".history");
    let _ = std::fs::remove_file(history);
}
