//! `bi`: look at a pool's region from outside, as `pmempool info` and `check` do for
//! persistent-memory pools. It runs no node and writes nothing, so it can look at a pool
//! live processes are using.
//!
//! ```sh
//! bi inspect /dev/shm/sessions.bi          # nodes, structures, heap, in words
//! bi inspect /dev/shm/sessions.bi --json   # the same as one JSON object
//! bi check /dev/shm/sessions.bi            # exit 0: nothing wrong found; 1: problems listed
//! ```

use bi::inspect::PoolReport;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Inspect and check a bi pool's region (a file or a DAX / CXL device) from outside.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// What the pool holds: its nodes and their passes, its structures and their
    /// writers, its heap's grants.
    Inspect {
        /// The region file or device.
        path: PathBuf,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Validate the region without changing it: its header and layout, root directory,
    /// extent table and writer records. Exit status 1 if anything is wrong (listed),
    /// 2 if the region cannot be read at all.
    Check {
        /// The region file or device.
        path: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let path = match &cli.command {
        Command::Inspect { path, .. } | Command::Check { path } => path,
    };
    let report = match PoolReport::read(path) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("bi: {}: {e} ({:?})", path.display(), e.kind());
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::Inspect { json: true, .. } => match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("bi: {e}");
                return ExitCode::from(2);
            }
        },
        Command::Inspect { .. } => print_report(&report),
        Command::Check { .. } => {
            let problems = report.problems();
            if problems.is_empty() {
                println!("{}: no problem found", path.display());
            } else {
                for p in &problems {
                    println!("{}: {p}", path.display());
                }
                return ExitCode::from(1);
            }
        }
    }
    ExitCode::SUCCESS
}

fn print_report(r: &PoolReport) {
    println!("region: {} bytes, {} nodes", r.size, r.nodes.len());
    println!(
        "heap: {} bytes in {} extents, {} granted",
        r.heap.bytes, r.heap.extents, r.heap.granted
    );
    println!("nodes:");
    for n in r.nodes.iter().filter(|n| n.claimed || n.passes > 0) {
        let age = n.heartbeat_age_ns.unwrap_or(0) as f64;
        let state = match (n.live, n.claimed) {
            (true, _) => format!("live, heartbeat {:.3} ms ago", age / 1e6),
            (false, true) => format!("stale, heartbeat {:.3} s ago", age / 1e9),
            (false, false) => "free".to_string(),
        };
        println!(
            "  {:>3}  passes {:>10}  last pass {:>9} ns (longest {} ns)  overflows {}  {state}",
            n.node, n.passes, n.last_pass_ns, n.longest_pass_ns, n.overflows
        );
        println!(
            "       readers {}  lines invalidated {}  retired bytes waiting {}  rings {}% full",
            n.readers, n.invalidated_lines, n.retired_bytes, n.ring_fill_percent
        );
    }
    println!("structures:");
    for s in &r.structures {
        let writer = match (s.writer_node, s.writer_live) {
            (Some(n), true) => format!(
                "writer node {n}, live, lease renewed {:.3} ms ago",
                s.lease_age_ns.unwrap_or(0) as f64 / 1e6
            ),
            (Some(n), false) => format!("last writer node {n}, gone"),
            (None, _) => "no writer yet".to_string(),
        };
        println!(
            "  {:<32} {:>10} entries {:>12} heap bytes  {writer}  (role taken {} times)",
            format!("{:?}", s.name),
            s.entries,
            s.heap_bytes,
            s.writer_takes
        );
    }
    for e in &r.orphan_extents {
        println!("orphan extent {e}: granted to an owner that names no structure");
    }
}
