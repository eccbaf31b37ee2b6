//! What a bench found, in a form the report reads: its ratios, each beside its target,
//! and the series of the paper's figures it reproduces.
//!
//! A bench fills one [`Findings`] and calls [`Findings::write`]; with `BI_REPORT_DIR`
//! set, that writes `<dir>/<bench>.json` (otherwise nothing: a bench run by hand prints
//! its tables and leaves no file). The report command runs every bench with the variable
//! set and assembles the files into one report.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A bound a ratio should keep.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Target {
    /// At most this.
    AtMost(f64),
    /// At least this.
    AtLeast(f64),
}

impl Target {
    /// Whether `value` keeps the bound.
    ///
    /// ```
    /// use bi_kit::bench::Target;
    /// assert!(Target::AtMost(2.0).met(1.5));
    /// assert!(!Target::AtLeast(1.0).met(0.9));
    /// ```
    pub fn met(self, value: f64) -> bool {
        match self {
            Target::AtMost(t) => value <= t,
            Target::AtLeast(t) => value >= t,
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::AtMost(t) => write!(f, "<= {t}"),
            Target::AtLeast(t) => write!(f, ">= {t}"),
        }
    }
}

/// One ratio against a peer measured in the same run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// What is divided by what, e.g. `BiTree / EpochBonsai lookup, 64K keys`.
    pub what: String,
    /// The ratio.
    pub value: f64,
    /// The bound it should keep, if it has one.
    pub target: Option<Target>,
}

/// One curve of a figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Its legend.
    pub name: String,
    /// `(x, y)` points, in order of `x`.
    pub points: Vec<(f64, f64)>,
}

/// A figure (or a table's shape) as curves over one x axis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// Short stable id: `fig3`, `fig11`, `fig12`, `fig13`, `table1`.
    pub id: String,
    /// Title.
    pub title: String,
    /// The x axis's label.
    pub x_label: String,
    /// The y axis's label.
    pub y_label: String,
    /// Whether the x axis is logarithmic (working sets).
    pub log_x: bool,
    /// The curves.
    pub series: Vec<Series>,
}

/// Everything one bench run found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Findings {
    /// The bench's name.
    pub bench: String,
    /// The machine it ran on (processor model and CPU count).
    pub machine: String,
    /// The settings it ran with (as printed at its start).
    pub settings: String,
    /// Whether it ran in quick mode.
    pub quick: bool,
    /// Its ratios.
    pub ratios: Vec<Ratio>,
    /// Its figures.
    pub figures: Vec<Figure>,
}

impl Findings {
    /// Empty findings of bench `bench`, run with `settings`.
    ///
    /// ```
    /// use bi_kit::bench::{Findings, Settings, Target};
    ///
    /// let mut f = Findings::new("doc", &Settings::default());
    /// f.ratio("a / b", 1.5, Some(Target::AtMost(2.0)));
    /// assert!(f.ratios[0].target.unwrap().met(f.ratios[0].value));
    /// f.write().unwrap(); // writes only with BI_REPORT_DIR set
    /// ```
    pub fn new(bench: &str, settings: &super::Settings) -> Findings {
        Findings {
            bench: bench.to_owned(),
            machine: machine(),
            settings: settings.to_string(),
            quick: super::quick(),
            ratios: Vec::new(),
            figures: Vec::new(),
        }
    }

    /// Records a ratio.
    pub fn ratio(&mut self, what: impl Into<String>, value: f64, target: Option<Target>) {
        self.ratios.push(Ratio {
            what: what.into(),
            value,
            target,
        });
    }

    /// Records a figure.
    pub fn figure(&mut self, figure: Figure) {
        self.figures.push(figure);
    }

    /// Where [`write`](Self::write) puts the file: `$BI_REPORT_DIR/<bench>.json`.
    pub fn path(&self) -> Option<PathBuf> {
        let dir = std::env::var_os("BI_REPORT_DIR").filter(|d| !d.is_empty())?;
        Some(PathBuf::from(dir).join(format!("{}.json", self.bench)))
    }

    /// Writes the findings as JSON where [`path`](Self::path) says; nothing without
    /// `BI_REPORT_DIR`.
    pub fn write(&self) -> std::io::Result<()> {
        let Some(path) = self.path() else {
            return Ok(());
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, json)
    }
}

/// The processor model and the machine's number of CPUs (online, whatever this thread
/// is pinned to).
pub fn machine() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or_else(
            || std::env::consts::ARCH.to_owned(),
            |(_, m)| m.trim().to_owned(),
        );
    let listed = info.lines().filter(|l| l.starts_with("processor")).count();
    let cpus = if listed > 0 {
        listed
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    };
    format!("{model}, {cpus} CPUs")
}
