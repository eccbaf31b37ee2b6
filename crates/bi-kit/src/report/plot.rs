//! One figure drawn as an SVG file.

use crate::bench::Figure;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use std::path::Path;

/// Pixels of a plot.
const SIZE: (u32, u32) = (900, 560);

/// Draws `figure` into the SVG file `path`: its title, axis labels, a logarithmic x axis
/// when it asks for one (points with `x <= 0` are left out there), and one line with
/// points per series, named in a legend.
///
/// ```
/// use bi_kit::bench::{Figure, Series};
///
/// let figure = Figure {
///     id: "fig0".into(),
///     title: "Cost per line".into(),
///     x_label: "lines".into(),
///     y_label: "ns".into(),
///     log_x: true,
///     series: vec![Series { name: "a".into(), points: vec![(1.0, 2.0), (10.0, 3.0)] }],
/// };
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("fig0.svg");
/// bi_kit::report::plot_svg(&figure, &path).unwrap();
/// assert!(std::fs::read_to_string(&path).unwrap().contains("<svg"));
/// ```
pub fn plot_svg(figure: &Figure, path: &Path) -> Result<(), String> {
    let series: Vec<(&str, Vec<(f64, f64)>)> = figure
        .series
        .iter()
        .map(|s| {
            let points = s
                .points
                .iter()
                .copied()
                .filter(|&(x, y)| x.is_finite() && y.is_finite() && (!figure.log_x || x > 0.0))
                .collect();
            (s.name.as_str(), points)
        })
        .collect();
    let all = || series.iter().flat_map(|(_, p)| p.iter());
    let (x_lo, x_hi) = span(all().map(|p| p.0));
    let (y_lo, y_hi) = span(all().map(|p| p.1));
    let y = y_lo.min(0.0)..y_hi + (y_hi - y_lo.min(0.0)).abs() * 0.05;
    let drawn = if figure.log_x {
        let (lo, hi) = if all().next().is_none() {
            (1.0, 10.0)
        } else if x_lo < x_hi {
            (x_lo, x_hi)
        } else {
            (x_lo / 2.0, x_hi * 2.0)
        };
        draw(figure, &series, path, (lo..hi).log_scale(), y)
    } else {
        draw(figure, &series, path, x_lo..x_hi, y)
    };
    drawn.map_err(|e| format!("cannot draw {} into {}: {e}", figure.id, path.display()))
}

/// The smallest and largest of `values`, widened to a non-empty range (`0..1` for none).
fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if lo > hi {
        (0.0, 1.0)
    } else if lo == hi {
        (lo - 1.0, hi + 1.0)
    } else {
        (lo, hi)
    }
}

/// An axis label: at most three decimals, without trailing zeros (`10`, `0.25`).
fn tick(v: &f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    match s {
        "0" | "-0" if *v != 0.0 => format!("{v:.1e}"),
        "-0" => "0".to_owned(),
        s => s.to_owned(),
    }
}

fn draw<X>(
    figure: &Figure,
    series: &[(&str, Vec<(f64, f64)>)],
    path: &Path,
    x: X,
    y: std::ops::Range<f64>,
) -> Result<(), Box<dyn std::error::Error>>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&figure.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_desc(&figure.x_label)
        .y_desc(&figure.y_label)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .draw()?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(
                LineSeries::new(points.iter().copied(), color.stroke_width(2)).point_size(3),
            )?
            .label(*name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
