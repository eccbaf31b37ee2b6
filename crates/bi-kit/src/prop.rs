//! Proptest settings for the workspace's property tests.

use proptest::test_runner::Config;

/// `cases` cases normally, `miri_cases` under Miri (every case is interpreted there), and
/// no failure persistence under Miri (its isolation forbids the file system).
///
/// ```
/// let c = bi_kit::prop::config(256, 2);
/// assert_eq!(c.cases, if cfg!(miri) { 2 } else { 256 });
/// ```
pub fn config(cases: u32, miri_cases: u32) -> Config {
    let mut c = Config::with_cases(crate::under_miri(cases, miri_cases));
    if cfg!(miri) {
        c.failure_persistence = None;
    }
    c
}
