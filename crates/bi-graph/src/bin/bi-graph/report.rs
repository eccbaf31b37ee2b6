//! What a run prints: the values file, the agreement between modes, the summary table
//! or its JSON line.

use bi_graph::{Mode, RunStats};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::Duration;

/// A program's values, indexed by dense vertex.
#[derive(Clone, Debug)]
pub enum Values {
    /// PageRank.
    Ranks(Vec<f64>),
    /// Component labels (dense index of the smallest vertex).
    Labels(Vec<u32>),
    /// Distances (`INFINITY` = unreachable).
    Distances(Vec<f64>),
}

/// Writes `vertex_id<TAB>value` lines with original ids.
pub fn write_values(ids: &[u64], values: &Values, out: &mut dyn Write) -> io::Result<()> {
    match values {
        Values::Ranks(ranks) => {
            for (id, rank) in ids.iter().zip(ranks) {
                writeln!(out, "{id}\t{rank}")?;
            }
        }
        Values::Labels(labels) => {
            for (id, &label) in ids.iter().zip(labels) {
                let label_id = ids.get(label as usize).copied().unwrap_or(u64::MAX);
                writeln!(out, "{id}\t{label_id}")?;
            }
        }
        Values::Distances(distances) => {
            for (id, distance) in ids.iter().zip(distances) {
                if distance.is_finite() {
                    writeln!(out, "{id}\t{distance}")?;
                }
            }
        }
    }
    out.flush()
}

/// How far `other` is from `first`, and whether that is a disagreement for `mode`.
#[derive(Clone, Debug)]
pub struct Difference {
    /// Human-readable amount.
    pub text: String,
    /// Beyond what the mode allows.
    pub disagrees: bool,
}

/// Largest L1 distance between PageRank vectors that counts as agreement in modes
/// without staleness (summation order differs between partitionings).
const RANK_AGREEMENT: f64 = 1e-9;

/// Compares the values of a later mode with the first mode's.
///
/// Components and distances are fixed points and must agree exactly in every mode.
/// PageRank after a fixed number of supersteps agrees up to rounding except in
/// `bi-periodic`, whose bounded staleness shifts it slightly: that is reported, not
/// refused.
pub fn compare(first: &Values, other: &Values, mode: Mode) -> Difference {
    match (first, other) {
        (Values::Ranks(a), Values::Ranks(b)) if a.len() == b.len() => {
            let l1: f64 = a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum();
            Difference {
                text: format!("L1 {l1:.2e}"),
                disagrees: mode != Mode::BiPeriodic && l1 > RANK_AGREEMENT,
            }
        }
        (Values::Labels(a), Values::Labels(b)) if a.len() == b.len() => {
            count_differences(a.iter().zip(b).filter(|(x, y)| x != y).count())
        }
        (Values::Distances(a), Values::Distances(b)) if a.len() == b.len() => {
            let differ = |(x, y): (&f64, &f64)| {
                x.is_finite() != y.is_finite()
                    || (x.is_finite() && (x - y).abs() > 1e-9 * x.abs().max(1.0))
            };
            count_differences(a.iter().zip(b).filter(|&p| differ(p)).count())
        }
        _ => Difference {
            text: "wrong length".to_owned(),
            disagrees: true,
        },
    }
}

fn count_differences(n: usize) -> Difference {
    Difference {
        text: if n == 0 {
            "same".to_owned()
        } else {
            format!("{n} differ")
        },
        disagrees: n != 0,
    }
}

/// The name of a mode as the command line spells it.
pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Stock => "stock",
        Mode::BiOnDemand => "bi-on-demand",
        Mode::BiPeriodic => "bi-periodic",
    }
}

/// One row of the summary.
pub struct Row {
    /// The mode.
    pub mode: Mode,
    /// What it measured.
    pub stats: RunStats,
    /// Against the first mode (`None` for the first).
    pub difference: Option<Difference>,
    /// Whether `stats.max_staleness` was measured (the periodic mode measures it only
    /// when asked).
    pub staleness_measured: bool,
}

fn duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns >= 1_000_000_000 {
        format!("{:.2} s", d.as_secs_f64())
    } else if ns >= 1_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} us", ns as f64 / 1e3)
    }
}

/// The summary table, one row per mode.
pub fn summary(rows: &[Row]) -> String {
    let header = [
        "mode",
        "supersteps",
        "time/step",
        "edges gathered",
        "replication",
        "written back",
        "invalidated",
        "messages",
        "max stale",
        "vs first",
    ];
    let mut cells = Vec::new();
    for row in rows {
        let s = &row.stats;
        cells.push(vec![
            mode_name(row.mode).to_owned(),
            s.iterations.to_string(),
            duration(s.time_per_iteration),
            s.edges_gathered.to_string(),
            format!("{:.3}", s.replication_factor),
            s.lines_written_back.to_string(),
            s.lines_invalidated.to_string(),
            s.messages_sent.to_string(),
            if row.staleness_measured {
                s.max_staleness.to_string()
            } else {
                "-".to_owned()
            },
            row.difference
                .as_ref()
                .map_or_else(|| "-".to_owned(), |d| d.text.clone()),
        ]);
    }
    table(&header, cells)
}

/// Where a superstep's time goes, one row per mode ([`bi_graph::Phases`]).
pub fn phases(rows: &[Row]) -> String {
    let header = [
        "phases per step",
        "scatter",
        "gather+apply",
        "partials",
        "values",
        "of which: write back",
        "wait",
        "invalidate",
    ];
    let cells = rows
        .iter()
        .map(|row| {
            let p = &row.stats.phases;
            let mut cells = vec![mode_name(row.mode).to_owned()];
            cells.extend(
                [
                    p.scatter,
                    p.gather_apply,
                    p.partials,
                    p.values,
                    p.write_back,
                    p.wait,
                    p.invalidate,
                ]
                .map(duration),
            );
            cells
        })
        .collect();
    table(&header, cells)
}

/// `cells` under `header`, the first column left-aligned, the others right-aligned.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut cells: Vec<Vec<String>> = vec![header.iter().map(|h| (*h).to_owned()).collect()];
    cells.extend(rows);
    let widths: Vec<usize> = (0..header.len())
        .map(|c| cells.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut text = String::new();
    for row in &cells {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c == 0 {
                let _ = write!(line, "{cell:<w$}", w = widths[c]);
            } else {
                let _ = write!(line, "  {cell:>w$}", w = widths[c]);
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// The summary as one line of JSON: `{"program": "pagerank", "vertices": n, "edges": m,
/// "nodes": k, "modes": [{"mode": "stock", "supersteps": n, "time_per_step_ns": t,
/// "compute_ns": t, "edges_gathered": n, "replication": r, "written_back": n, "invalidated": n, "messages": n,
/// "max_staleness": n, "phases_ns": {"scatter": t, ...}, "vs_first": "same", "agrees":
/// true}, ...]}` (`vs_first` is null for the first mode, `max_staleness` where it was not
/// measured; `phases_ns` per superstep, as [`bi_graph::Phases`] names them).
/// `size` is the graph's vertices and edges.
pub fn json(program: &str, size: (usize, usize), nodes: u64, rows: &[Row]) -> String {
    let modes: Vec<String> = rows
        .iter()
        .map(|row| {
            let s = &row.stats;
            let (vs_first, agrees) = match &row.difference {
                Some(d) => (format!("\"{}\"", d.text), !d.disagrees),
                None => ("null".to_owned(), true),
            };
            format!(
                "{{\"mode\": \"{}\", \"supersteps\": {}, \"time_per_step_ns\": {}, \"compute_ns\": {}, \"edges_gathered\": {}, \"replication\": {:.6}, \"written_back\": {}, \"invalidated\": {}, \"messages\": {}, \"max_staleness\": {}, \"phases_ns\": {}, \"vs_first\": {vs_first}, \"agrees\": {agrees}}}",
                mode_name(row.mode),
                s.iterations,
                s.time_per_iteration.as_nanos(),
                s.compute_time.as_nanos(),
                s.edges_gathered,
                s.replication_factor,
                s.lines_written_back,
                s.lines_invalidated,
                s.messages_sent,
                if row.staleness_measured {
                    s.max_staleness.to_string()
                } else {
                    "null".to_owned()
                },
                phases_json(&s.phases),
            )
        })
        .collect();
    format!(
        "{{\"program\": \"{program}\", \"vertices\": {}, \"edges\": {}, \"nodes\": {nodes}, \"modes\": [{}]}}",
        size.0,
        size.1,
        modes.join(", ")
    )
}

/// A run's phases per superstep as a JSON object of nanoseconds.
fn phases_json(p: &bi_graph::Phases) -> String {
    let fields = [
        ("scatter", p.scatter),
        ("gather_apply", p.gather_apply),
        ("partials", p.partials),
        ("values", p.values),
        ("write_back", p.write_back),
        ("wait", p.wait),
        ("invalidate", p.invalidate),
    ];
    let inner: Vec<String> = fields
        .iter()
        .map(|(name, d)| format!("\"{name}\": {}", d.as_nanos()))
        .collect();
    format!("{{{}}}", inner.join(", "))
}
