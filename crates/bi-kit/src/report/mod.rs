//! One report of every bench: the `bench-report` binary runs each bench in quick mode
//! ([`run_bench`]), each writing its [`Findings`] as JSON, then reads them back
//! ([`load_findings`]), assembles them ([`Report::assemble`]) and writes `report.json`,
//! `report.md` ([`Report::markdown`]) and one SVG plot per figure ([`plot_svg`]).
//!
//! The assembly is pure: findings in, a [`Report`] out, whose ratios carry whether
//! their targets are met and whose plots carry the file each figure is drawn into.

mod plot;
mod run;

pub use plot::plot_svg;
pub use run::{BENCHES, Bench, BenchRun, run_bench};

use crate::bench::{Figure, Findings, Target};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

/// The ids of the paper's figures (and table) the benches reproduce, in report order.
pub const FIGURE_IDS: [&str; 5] = ["fig3", "fig11", "fig12", "fig13", "table1"];

/// One ratio of one bench, beside its target.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RatioRow {
    /// The bench.
    pub bench: String,
    /// What is divided by what.
    pub what: String,
    /// The ratio.
    pub value: f64,
    /// The bound it should keep, if it has one.
    pub target: Option<Target>,
    /// Whether it keeps it (`None` without a target).
    pub met: Option<bool>,
}

/// One figure of one bench and the SVG file it is drawn into.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plot {
    /// The file's name in the report's directory.
    pub file: String,
    /// The bench that measured it.
    pub bench: String,
    /// The figure's id.
    pub id: String,
    /// The figure's title.
    pub title: String,
    /// The figure (in the report's JSON once, with its findings).
    #[serde(skip)]
    pub figure: Figure,
}

/// Everything one report holds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// The benches run this time (none when only assembling).
    pub runs: Vec<BenchRun>,
    /// What each bench found, in [`BENCHES`] order.
    pub findings: Vec<Findings>,
    /// Every ratio, with whether its target is met.
    pub ratios: Vec<RatioRow>,
    /// Every figure, with its file.
    pub plots: Vec<Plot>,
    /// The ids of [`FIGURE_IDS`] no findings have.
    pub missing_figures: Vec<String>,
    /// What went wrong besides failed runs: findings that could not be read, plots that
    /// could not be drawn.
    pub problems: Vec<String>,
    /// Where criterion's HTML report is, as a link from the report's directory.
    pub criterion_report: String,
}

impl Report {
    /// Assembles `findings` (in any order) and the `runs` that made them; `problems` are
    /// carried into the report as they are.
    pub fn assemble(
        mut findings: Vec<Findings>,
        runs: Vec<BenchRun>,
        problems: Vec<String>,
        criterion_report: String,
    ) -> Report {
        let rank = |f: &Findings| {
            BENCHES
                .iter()
                .position(|b| b.name == f.bench)
                .unwrap_or(BENCHES.len())
        };
        findings.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.bench.cmp(&b.bench)));
        let ratios = findings
            .iter()
            .flat_map(|f| {
                f.ratios.iter().map(|r| RatioRow {
                    bench: f.bench.clone(),
                    what: r.what.clone(),
                    value: r.value,
                    target: r.target,
                    met: r.target.map(|t| t.met(r.value)),
                })
            })
            .collect();
        let all_figures: Vec<(&Findings, &Figure)> = findings
            .iter()
            .flat_map(|f| f.figures.iter().map(move |g| (f, g)))
            .collect();
        let mut ids: Vec<&str> = FIGURE_IDS.to_vec();
        for (_, g) in &all_figures {
            if !ids.contains(&g.id.as_str()) {
                ids.push(&g.id);
            }
        }
        let mut plots = Vec::new();
        for id in &ids {
            let same: Vec<_> = all_figures.iter().filter(|(_, g)| g.id == *id).collect();
            for (k, (f, g)) in same.iter().enumerate() {
                let stem = file_stem(id);
                let file = if same.len() == 1 {
                    format!("{stem}.svg")
                } else {
                    format!("{stem}-{}.svg", k + 1)
                };
                plots.push(Plot {
                    file,
                    bench: f.bench.clone(),
                    id: g.id.clone(),
                    title: g.title.clone(),
                    figure: (*g).clone(),
                });
            }
        }
        let missing_figures = FIGURE_IDS
            .iter()
            .filter(|id| !plots.iter().any(|p| p.id == **id))
            .map(|id| id.to_string())
            .collect();
        Report {
            runs,
            findings,
            ratios,
            plots,
            missing_figures,
            problems,
            criterion_report,
        }
    }

    /// Whether every run succeeded and nothing else went wrong.
    pub fn ok(&self) -> bool {
        self.runs.iter().all(|r| r.ok) && self.problems.is_empty()
    }

    /// The report as JSON.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The report as markdown: the machine and settings, the runs, one table of every
    /// ratio, links to the plots and to criterion's report, the missing figures and the
    /// problems.
    pub fn markdown(&self) -> String {
        let mut md = String::from("# Bench report\n\n");
        distinct(&mut md, "Machine", &self.findings, |f| &f.machine);
        distinct(&mut md, "Settings", &self.findings, |f| &f.settings);
        let quick = self.findings.iter().filter(|f| f.quick).count();
        let _ = writeln!(
            md,
            "- **Quick mode**: {quick} of {} benches\n",
            self.findings.len()
        );
        md.push_str(
            "Every ratio is against a peer measured in the same run of the same bench, \
             never against another run or machine: absolute times drift between runs, \
             same-run ratios do not.\n\n",
        );

        md.push_str("## Benches\n\n| bench | run | seconds | findings |\n|---|---|---|---|\n");
        let mut names: Vec<&str> = BENCHES.iter().map(|b| b.name).collect();
        for n in self
            .findings
            .iter()
            .map(|f| f.bench.as_str())
            .chain(self.runs.iter().map(|r| r.bench.as_str()))
        {
            if !names.contains(&n) {
                names.push(n);
            }
        }
        for name in names {
            let has = self.findings.iter().any(|f| f.bench == name);
            let (run, seconds) = match self.runs.iter().find(|r| r.bench == name) {
                Some(r) if r.ok => (format!("ok ([log]({}))", link(&r.log)), r.seconds),
                Some(r) => (
                    format!("**failed**: {} ([log]({}))", r.detail, link(&r.log)),
                    r.seconds,
                ),
                None => ("not run".to_owned(), f64::NAN),
            };
            let seconds = if seconds.is_nan() {
                "—".to_owned()
            } else {
                format!("{seconds:.0}")
            };
            let has = if has { "yes" } else { "none" };
            let _ = writeln!(md, "| {name} | {run} | {seconds} | {has} |");
        }

        md.push_str(
            "\n## Ratios\n\n| bench | what | value | target | met |\n|---|---|---|---|---|\n",
        );
        for r in &self.ratios {
            let target = r.target.map_or("—".to_owned(), |t| t.to_string());
            let met = match r.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "—",
            };
            let _ = writeln!(
                md,
                "| {} | {} | {:.2} | {} | {} |",
                r.bench,
                cell(&r.what),
                r.value,
                cell(&target),
                met
            );
        }

        md.push_str("\n## Figures\n\n");
        for p in &self.plots {
            let _ = writeln!(
                md,
                "- {}: [{}]({}) ({}, from {})",
                p.id, p.file, p.file, p.title, p.bench
            );
        }
        for id in &self.missing_figures {
            let _ = writeln!(md, "- {id}: missing (no findings have it)");
        }
        let _ = writeln!(
            md,
            "\nCriterion's report of the same runs: [{0}]({0})",
            self.criterion_report
        );

        if !self.problems.is_empty() {
            md.push_str("\n## Problems\n\n");
            for p in &self.problems {
                let _ = writeln!(md, "- {p}");
            }
        }
        md
    }
}

/// A markdown line naming `what` of the findings: one value, or each value with the
/// benches that have it.
fn distinct(md: &mut String, what: &str, findings: &[Findings], of: fn(&Findings) -> &String) {
    let mut values: Vec<(&str, Vec<&str>)> = Vec::new();
    for f in findings {
        match values.iter_mut().find(|(v, _)| *v == of(f).as_str()) {
            Some((_, benches)) => benches.push(&f.bench),
            None => values.push((of(f), vec![&f.bench])),
        }
    }
    match values.as_slice() {
        [] => {
            let _ = writeln!(md, "- **{what}**: unknown (no findings)");
        }
        [(v, _)] => {
            let _ = writeln!(md, "- **{what}**: {v}");
        }
        _ => {
            for (v, benches) in values {
                let _ = writeln!(md, "- **{what}** ({}): {v}", benches.join(", "));
            }
        }
    }
}

/// `text` made safe for a markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// A path as a markdown link target.
fn link(path: &Path) -> String {
    path.display().to_string().replace(' ', "%20")
}

/// A figure id made safe as a file name.
fn file_stem(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Reads every `*.json` file of `dir` as [`Findings`]: the findings read, and for each
/// file that could not be, a message naming it.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("bad.json"), "{").unwrap();
/// let (found, problems) = bi_kit::report::load_findings(dir.path()).unwrap();
/// assert!(found.is_empty());
/// assert!(problems[0].contains("bad.json"));
/// ```
pub fn load_findings(dir: &Path) -> Result<(Vec<Findings>, Vec<String>), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        match std::fs::read_to_string(&path) {
            Err(e) => problems.push(format!("cannot read {}: {e}", path.display())),
            Ok(text) => match serde_json::from_str::<Findings>(&text) {
                Ok(f) => found.push(f),
                Err(e) => problems.push(format!("{} holds no findings: {e}", path.display())),
            },
        }
    }
    Ok((found, problems))
}

/// `to` as a path from the directory `from` (both absolute): `../criterion/report`; `to`
/// itself when the two have nothing but the root in common.
///
/// ```
/// use bi_kit::report::relative_path;
/// use std::path::{Path, PathBuf};
///
/// let to = Path::new("/w/target/criterion/report/index.html");
/// let from = Path::new("/w/target/bench-report");
/// assert_eq!(relative_path(from, to), PathBuf::from("../criterion/report/index.html"));
/// assert_eq!(relative_path(Path::new("/tmp/report"), to), to);
/// ```
pub fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component> = from.components().collect();
    let parts: Vec<Component> = to.components().collect();
    let common = from.iter().zip(&parts).take_while(|(a, b)| a == b).count();
    if common <= 1 {
        return to.to_owned();
    }
    let mut path = PathBuf::new();
    for _ in common..from.len() {
        path.push("..");
    }
    for c in &parts[common..] {
        path.push(c);
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{Ratio, Series};

    fn findings(bench: &str, ratios: Vec<Ratio>, figures: Vec<Figure>) -> Findings {
        Findings {
            bench: bench.into(),
            machine: "Test CPU, 2 CPUs".into(),
            settings: "nodes 2".into(),
            quick: true,
            ratios,
            figures,
        }
    }

    fn ratio(what: &str, value: f64, target: Option<Target>) -> Ratio {
        Ratio {
            what: what.into(),
            value,
            target,
        }
    }

    fn figure(id: &str, log_x: bool) -> Figure {
        Figure {
            id: id.into(),
            title: format!("{id} title"),
            x_label: "working set, KiB".into(),
            y_label: "ns per line".into(),
            log_x,
            series: vec![
                Series {
                    name: "clflush".into(),
                    points: vec![(4.0, 120.0), (64.0, 130.0), (1024.0, 140.0)],
                },
                Series {
                    name: "clwb".into(),
                    points: vec![(4.0, 5.0), (64.0, 6.0), (1024.0, 8.0)],
                },
            ],
        }
    }

    fn fixture() -> Report {
        let found = vec![
            findings(
                "shared_writes",
                vec![
                    ratio(
                        "remote synchronous insert / local insert",
                        3.456,
                        Some(Target::AtMost(3.0)),
                    ),
                    ratio("remote / writer's shared", 1.2, None),
                ],
                vec![],
            ),
            findings(
                "read_section",
                vec![ratio(
                    "BiGuard enter+exit / crossbeam-epoch pin",
                    0.314,
                    Some(Target::AtMost(0.5)),
                )],
                vec![],
            ),
            findings(
                "cache_ops",
                vec![],
                vec![figure("fig3", true), figure("fig11", false)],
            ),
            findings("pagerank", vec![], vec![figure("fig13", false)]),
            findings("tree", vec![], vec![figure("fig13", false)]),
        ];
        let runs = vec![
            BenchRun {
                bench: "read_section".into(),
                seconds: 12.4,
                ok: true,
                detail: "ok".into(),
                log: "logs/read_section.log".into(),
            },
            BenchRun {
                bench: "map".into(),
                seconds: 3.0,
                ok: false,
                detail: "exit status: 101".into(),
                log: "logs/map.log".into(),
            },
        ];
        Report::assemble(found, runs, vec![], "../criterion/report/index.html".into())
    }

    #[test]
    fn ratios_carry_whether_their_targets_are_met() {
        let report = fixture();
        let met: Vec<(&str, Option<bool>)> = report
            .ratios
            .iter()
            .map(|r| (r.bench.as_str(), r.met))
            .collect();
        // In the order of the benches, not of the findings given.
        assert_eq!(
            met,
            [
                ("read_section", Some(true)),
                ("shared_writes", Some(false)),
                ("shared_writes", None)
            ]
        );
        assert!(!report.ok(), "a run failed");
        let json: serde_json::Value = serde_json::from_str(&report.json()).unwrap();
        assert_eq!(json["ratios"][1]["met"], false);
        assert_eq!(json["ratios"][2]["met"], serde_json::Value::Null);
        assert_eq!(json["findings"].as_array().unwrap().len(), 5);
        assert_eq!(json["missing_figures"][0], "fig12");
    }

    #[test]
    fn the_markdown_has_a_row_per_ratio_and_names_missing_figures() {
        let md = fixture().markdown();
        assert!(md.contains("- **Machine**: Test CPU, 2 CPUs\n"), "{md}");
        assert!(md.contains("- **Settings**: nodes 2\n"), "{md}");
        assert!(
            md.contains(
                "| read_section | BiGuard enter+exit / crossbeam-epoch pin | 0.31 | <= 0.5 | yes |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| shared_writes | remote synchronous insert / local insert | 3.46 | <= 3 | **no** |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| shared_writes | remote / writer's shared | 1.20 | — | — |"),
            "{md}"
        );
        assert!(md.contains("- fig3: [fig3.svg](fig3.svg)"), "{md}");
        assert!(md.contains("- fig13: [fig13-1.svg](fig13-1.svg)"), "{md}");
        assert!(md.contains("- fig13: [fig13-2.svg](fig13-2.svg)"), "{md}");
        assert!(
            md.contains("- fig12: missing (no findings have it)"),
            "{md}"
        );
        assert!(!md.contains("- fig3: missing"), "{md}");
        assert!(md.contains("](../criterion/report/index.html)"), "{md}");
        assert!(md.contains("| map | **failed**: exit status: 101"), "{md}");
        assert!(md.contains("| emulator | not run | — | none |"), "{md}");
        assert!(md.contains("same run"), "{md}");
    }

    #[test]
    fn distinct_settings_are_listed_with_their_benches() {
        let mut a = findings("tree", vec![], vec![]);
        let b = findings("map", vec![], vec![]);
        a.settings = "nodes 4".into();
        let md = Report::assemble(vec![a, b], vec![], vec![], String::new()).markdown();
        assert!(md.contains("- **Settings** (tree): nodes 4\n"), "{md}");
        assert!(md.contains("- **Settings** (map): nodes 2\n"), "{md}");
    }

    #[test]
    fn a_small_figure_becomes_a_non_empty_svg() {
        let dir = tempfile::tempdir().unwrap();
        for log_x in [false, true] {
            let path = dir.path().join(format!("fig3-{log_x}.svg"));
            plot_svg(&figure("fig3", log_x), &path).unwrap();
            let svg = std::fs::read_to_string(&path).unwrap();
            assert!(svg.starts_with("<svg") && svg.contains("clwb"), "{svg}");
        }
        // No points at all, or one: still a plot.
        let mut empty = figure("fig11", true);
        empty.series[0].points.clear();
        empty.series[1].points.truncate(1);
        let path = dir.path().join("fig11.svg");
        plot_svg(&empty, &path).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > 0);
    }

    #[test]
    fn unreadable_findings_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let good = findings("tree", vec![], vec![]);
        std::fs::write(
            dir.path().join("tree.json"),
            serde_json::to_string(&good).unwrap(),
        )
        .unwrap();
        std::fs::write(dir.path().join("map.json"), "{\"bench\": 1}").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not findings").unwrap();
        let (found, problems) = load_findings(dir.path()).unwrap();
        assert_eq!(found, [good]);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("map.json"), "{problems:?}");
        let missing = load_findings(&dir.path().join("nowhere")).unwrap_err();
        assert!(missing.contains("nowhere"), "{missing}");
    }
}
