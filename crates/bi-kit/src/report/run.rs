//! The benches of the workspace and how one is run for the report.

use serde::Serialize;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// A bench target of the workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bench {
    /// The bench target's name (`cargo bench --bench NAME`).
    pub name: &'static str,
    /// Its package, or `None` for the root crate.
    pub package: Option<&'static str>,
}

impl Bench {
    const fn root(name: &'static str) -> Bench {
        Bench {
            name,
            package: None,
        }
    }

    const fn of(package: &'static str, name: &'static str) -> Bench {
        Bench {
            name,
            package: Some(package),
        }
    }

    /// The arguments of `cargo` that run it.
    ///
    /// ```
    /// use bi_kit::report::BENCHES;
    ///
    /// let tree = BENCHES.iter().find(|b| b.name == "tree").unwrap();
    /// assert_eq!(tree.cargo_args(), ["bench", "-p", "bi-collections", "--bench", "tree"]);
    /// ```
    pub fn cargo_args(&self) -> Vec<&'static str> {
        let mut args = vec!["bench"];
        if let Some(p) = self.package {
            args.extend(["-p", p]);
        }
        args.extend(["--bench", self.name]);
        args
    }
}

/// Every bench, in the order the report runs them.
pub const BENCHES: [Bench; 10] = [
    Bench::root("cache_ops"),
    Bench::root("emulator"),
    Bench::root("read_section"),
    Bench::root("shared_writes"),
    Bench::root("invalidation"),
    Bench::of("bi-collections", "tree"),
    Bench::of("bi-collections", "map"),
    Bench::root("workloads"),
    Bench::of("bi-collections", "delegate"),
    Bench::of("bi-graph", "pagerank"),
];

/// How one bench run went.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchRun {
    /// The bench.
    pub bench: String,
    /// Seconds it took, building included.
    pub seconds: f64,
    /// Whether it exited successfully.
    pub ok: bool,
    /// `ok`, or why not (`exit status: 101`, a command that could not start).
    pub detail: String,
    /// Its output (standard output and error).
    pub log: PathBuf,
}

/// Runs `bench` in quick mode from the workspace at `root` with `cargo` (the `CARGO`
/// of the environment, else `cargo` on the path), `BI_BENCH_QUICK=1` and
/// `BI_REPORT_DIR=findings` (other variables, `BI_PIN` and the like, pass through), its
/// output going to the file `log`. A bench that fails or cannot start is an [`BenchRun`]
/// that says so, not an error.
pub fn run_bench(bench: &Bench, root: &Path, findings: &Path, log: &Path) -> BenchRun {
    let start = Instant::now();
    let result = spawn(bench, root, findings, log);
    let (ok, detail) = match result {
        Ok(status) if status.success() => (true, "ok".to_owned()),
        Ok(status) => (false, status.to_string()),
        Err(e) => (false, e),
    };
    BenchRun {
        bench: bench.name.to_owned(),
        seconds: start.elapsed().as_secs_f64(),
        ok,
        detail,
        log: log.to_owned(),
    }
}

fn spawn(
    bench: &Bench,
    root: &Path,
    findings: &Path,
    log: &Path,
) -> Result<std::process::ExitStatus, String> {
    let out = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("cannot share {}: {e}", log.display()))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    Command::new(&cargo)
        .args(bench.cargo_args())
        .current_dir(root)
        .env("BI_BENCH_QUICK", "1")
        .env("BI_REPORT_DIR", findings)
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", Path::new(&cargo).display()))
}
