//! What every bench shares: the quick-mode switch, criterion shortened for it, the median
//! timing the plain tables print, the machine [`Settings`] read from the environment, and
//! the [`Findings`] the report assembles.

mod findings;
mod settings;

pub use findings::{Figure, Findings, Ratio, Series, Target, machine};
pub use settings::{CpuSet, Settings, SettingsError};

use criterion::Criterion;
use std::time::{Duration, Instant};

/// Whether to run shortened: `BI_BENCH_QUICK=1` (not `0`), or `-- --quick`.
///
/// ```
/// // Set by the environment or the command line of `cargo bench`.
/// let _ = bi_kit::bench::quick();
/// ```
pub fn quick() -> bool {
    std::env::var_os("BI_BENCH_QUICK").is_some_and(|v| v != "0")
        || std::env::args().any(|a| a == "--quick")
}

/// Criterion from the command line, shortened in quick mode (0.3 s warm-up, 1 s of
/// measurement, 20 samples, and no plots: drawing criterion's plots takes longer than
/// quick measurements). Full runs draw them in criterion's HTML report
/// (`target/criterion/report/index.html`).
///
/// ```
/// let c = bi_kit::bench::criterion(true);
/// # drop(c);
/// ```
pub fn criterion(quick: bool) -> Criterion {
    let c = Criterion::default().configure_from_args();
    if quick {
        c.warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1))
            .sample_size(20)
            .without_plots()
    } else {
        c
    }
}

/// Median nanoseconds per unit over `runs` timed calls of `run(n)`, each doing `n`
/// units of work.
///
/// ```
/// let ns = bi_kit::bench::median_ns(3, 1_000, |n| {
///     for i in 0..n {
///         std::hint::black_box(i);
///     }
/// });
/// assert!(ns >= 0.0);
/// ```
pub fn median_ns(runs: usize, n: u64, mut run: impl FnMut(u64)) -> f64 {
    let mut v: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            run(n);
            start.elapsed().as_nanos() as f64 / n.max(1) as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
