//! Runs every bench in quick mode, one after another, and assembles what they found into
//! one report: `report.md`, `report.json` and an SVG plot per figure.
//!
//! ```text
//! cargo run --release -p bi-kit --bin bench-report -- [--out DIR] [--only NAME,...] [--skip-run]
//! ```
//!
//! Each bench runs as `cargo bench [-p PKG] --bench NAME` with `BI_BENCH_QUICK=1` and
//! `BI_REPORT_DIR=<out>/findings`; the other `BI_*` settings pass through from the
//! environment. Its output goes to `<out>/logs/NAME.log`. A bench that fails is named in
//! the report and makes the exit status non-zero; the others still run. The report
//! assembles every findings file in `<out>/findings`, so a run of some benches keeps the
//! findings of the others from an earlier run.

use bi_kit::report::{self, BENCHES, Bench, Report};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(about = "Runs every bench in quick mode and assembles one report")]
struct Args {
    /// Where the report goes [default: bench-report in the workspace's target directory].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Runs only these benches (comma-separated names).
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    only: Vec<String>,
    /// Runs nothing: assembles the findings already in `<out>/findings`.
    #[arg(long)]
    skip_run: bool,
}

/// The workspace's root and target directories.
struct Workspace {
    root: PathBuf,
    target: PathBuf,
}

fn workspace() -> Result<Workspace, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("cargo metadata printed no JSON: {e}"))?;
    let dir = |key: &str| {
        meta[key]
            .as_str()
            .map(PathBuf::from)
            .ok_or_else(|| format!("cargo metadata names no {key}"))
    };
    Ok(Workspace {
        root: dir("workspace_root")?,
        target: dir("target_directory")?,
    })
}

/// The benches `--only` names (all without it), or which names are unknown.
fn selected(only: &[String]) -> Result<Vec<Bench>, String> {
    let only: Vec<&str> = only
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .collect();
    let unknown: Vec<&str> = only
        .iter()
        .copied()
        .filter(|n| !BENCHES.iter().any(|b| b.name == *n))
        .collect();
    if !unknown.is_empty() {
        let known: Vec<&str> = BENCHES.iter().map(|b| b.name).collect();
        return Err(format!(
            "unknown bench {} (the benches: {})",
            unknown.join(", "),
            known.join(", ")
        ));
    }
    Ok(BENCHES
        .into_iter()
        .filter(|b| only.is_empty() || only.contains(&b.name))
        .collect())
}

fn create_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn run(args: Args) -> Result<bool, String> {
    let ws = workspace()?;
    let benches = selected(&args.only)?;
    let out = args.out.unwrap_or_else(|| ws.target.join("bench-report"));
    create_dir(&out)?;
    let out =
        std::path::absolute(&out).map_err(|e| format!("cannot resolve {}: {e}", out.display()))?;
    let findings_dir = out.join("findings");
    let logs = out.join("logs");

    let mut runs = Vec::new();
    if !args.skip_run {
        create_dir(&findings_dir)?;
        create_dir(&logs)?;
        for bench in &benches {
            // A findings file left from an earlier run must not pass for this run's.
            let old = findings_dir.join(format!("{}.json", bench.name));
            if let Err(e) = std::fs::remove_file(&old)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                return Err(format!("cannot remove {}: {e}", old.display()));
            }
            eprintln!("{:<14} running ...", bench.name);
            let log = logs.join(format!("{}.log", bench.name));
            let mut outcome = report::run_bench(bench, &ws.root, &findings_dir, &log);
            eprintln!(
                "{:<14} {:>6.1} s  {}",
                bench.name,
                outcome.seconds,
                if outcome.ok {
                    "ok".to_owned()
                } else {
                    format!("failed ({}), see {}", outcome.detail, log.display())
                }
            );
            outcome.log = report::relative_path(&out, &log);
            runs.push(outcome);
        }
    }

    if args.skip_run && !findings_dir.is_dir() {
        return Err(format!(
            "no findings in {} (run without --skip-run first)",
            findings_dir.display()
        ));
    }
    let (findings, problems) = report::load_findings(&findings_dir)?;
    let criterion = ws.target.join("criterion/report/index.html");
    let criterion = report::relative_path(&out, &criterion);
    let mut report = Report::assemble(findings, runs, problems, criterion.display().to_string());
    for plot in &report.plots {
        if let Err(e) = report::plot_svg(&plot.figure, &out.join(&plot.file)) {
            report.problems.push(e);
        }
    }
    for p in &report.problems {
        eprintln!("bench-report: {p}");
    }
    write(&out.join("report.json"), &report.json())?;
    write(&out.join("report.md"), &report.markdown())?;
    eprintln!("report: {}", out.join("report.md").display());
    Ok(report.ok())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bench-report: {e}");
            ExitCode::from(2)
        }
    }
}
