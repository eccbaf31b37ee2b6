//! What the facade's benches share: the quick-mode switch, the quick criterion
//! configuration, and the median timing their plain tables print.

#![allow(dead_code)] // each bench uses its own part

use criterion::Criterion;
use std::time::{Duration, Instant};

/// Whether to run shortened: `BI_BENCH_QUICK=1` (not `0`), or `-- --quick`.
pub fn quick() -> bool {
    std::env::var_os("BI_BENCH_QUICK").is_some_and(|v| v != "0")
        || std::env::args().any(|a| a == "--quick")
}

/// Criterion from the command line, shortened in quick mode (0.3 s warm-up, 1 s of
/// measurement, 20 samples).
pub fn criterion(quick: bool) -> Criterion {
    let c = Criterion::default().configure_from_args();
    if quick {
        c.warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1))
            .sample_size(20)
    } else {
        c
    }
}

/// Median nanoseconds per unit over `runs` timed calls of `run(n)`, each doing `n`
/// units of work.
pub fn median_ns(runs: usize, n: u64, mut run: impl FnMut(u64)) -> f64 {
    let mut v: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            run(n);
            start.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
