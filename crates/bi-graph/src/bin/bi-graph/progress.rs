//! Progress bars on standard error, drawn only when it is a terminal.

use bi_graph::Observer;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex, PoisonError};

/// Draws one bar per phase the engine or the readers report.
#[derive(Default)]
pub struct Bars {
    current: Mutex<Option<ProgressBar>>,
}

impl Bars {
    /// Bars when standard error is a terminal, nothing otherwise (logs stay clean).
    pub fn for_terminal() -> Option<Arc<dyn Observer>> {
        if std::io::stderr().is_terminal() {
            Some(Arc::new(Bars::default()))
        } else {
            None
        }
    }

    fn with_bar(&self, f: impl FnOnce(&mut Option<ProgressBar>)) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut current);
    }
}

fn style(phase: &str, total: u64) -> ProgressStyle {
    let template = match (phase, total) {
        (_, 0) => "{spinner} {msg} {elapsed}",
        ("load", _) => "{msg:>10} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        _ => "{msg:>10} [{bar:40}] {pos}/{len} ({elapsed})",
    };
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl Observer for Bars {
    fn start(&self, phase: &str, total: u64) {
        self.with_bar(|current| {
            if let Some(old) = current.take() {
                old.finish_and_clear();
            }
            let bar = if total == 0 {
                ProgressBar::new_spinner()
            } else {
                ProgressBar::new(total)
            };
            bar.set_style(style(phase, total));
            bar.set_message(phase.to_owned());
            *current = Some(bar);
        });
    }

    fn advance(&self, n: u64) {
        self.with_bar(|current| {
            if let Some(bar) = current {
                bar.inc(n);
            }
        });
    }

    fn finish(&self) {
        self.with_bar(|current| {
            if let Some(bar) = current.take() {
                bar.finish_and_clear();
            }
        });
    }
}
