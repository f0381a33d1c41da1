//! PNG plots of throughput against threads, like the seeds' figures (seed 004's Figure 1,
//! seed 000's Figure 2), drawn with `plotters`.
//!
//! Text needs a TrueType font: the first of a few common system fonts found is used; with
//! none, no plot is drawn and the caller is told why.

use crate::engines::BenchResult;
use plotters::prelude::*;
use std::path::Path;

/// One line of a plot: a name and its (threads, value) points.
pub type Series = (String, Vec<(f64, f64)>);

const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Registers a system font as "sans-serif" once; false if none is installed.
fn font() -> bool {
    static FOUND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FOUND.get_or_init(|| {
        FONTS.iter().any(|p| {
            std::fs::read(p).is_ok_and(|bytes| {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
            })
        })
    })
}

/// Draws `series` (y against threads) into the PNG file `path`.
pub fn lines(path: &Path, title: &str, y_label: &str, series: &[Series]) -> BenchResult<()> {
    if !font() {
        return Err(format!("no TrueType font found (looked for {FONTS:?}); no plot drawn").into());
    }
    let err = |e: &dyn std::fmt::Display| format!("plotting {}: {e}", path.display());
    let max_x = series
        .iter()
        .flat_map(|s| &s.1)
        .map(|p| p.0)
        .fold(1.0, f64::max);
    let max_y = series
        .iter()
        .flat_map(|s| &s.1)
        .map(|p| p.1)
        .fold(1.0, f64::max);
    let root = BitMapBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..max_x * 1.04, 0f64..max_y * 1.12)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("threads")
        .y_desc(y_label)
        .label_style(("sans-serif", 15))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
            });
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 16))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
