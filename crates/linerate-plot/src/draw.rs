//! Drawing a [`Chart`]: axes and lines in the plotting area, the legend
//! in a column of its own right of it (it covers no line), lines of
//! per-interval figures as step functions, colours readable on white.

use crate::{Chart, PlotError, Series};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// The lines' colours after the first total's black: each one's contrast
/// ratio against white is at least 3 (WCAG 2's figure for graphics), so
/// no line is pale on the white ground.
pub(crate) const PALETTE: [(u8, u8, u8); 11] = [
    (0x1f, 0x77, 0xb4), // blue
    (0xd6, 0x27, 0x28), // red
    (0x22, 0x8b, 0x22), // green
    (0x94, 0x67, 0xbd), // purple
    (0xe6, 0x51, 0x00), // dark orange
    (0x00, 0x83, 0x8f), // teal
    (0x8c, 0x56, 0x4b), // brown
    (0xc2, 0x18, 0x5b), // dark pink
    (0x6b, 0x6b, 0x00), // olive
    (0x39, 0x49, 0xab), // indigo
    (0x7f, 0x7f, 0x7f), // grey
];

/// An axis number without needless decimals (1000, 2.5, 0.99).
fn axis_number(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.to_string() }
}

fn font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            include_bytes!("../assets/DejaVuSans.ttf"),
        );
    });
}

impl Series {
    /// The polylines that draw it. A per-interval series: each interval a
    /// level from its start to its end, adjoining intervals joined by a
    /// vertical step, a gap between intervals left open. Otherwise its
    /// points joined.
    pub(crate) fn pieces(&self) -> Vec<Vec<(f64, f64)>> {
        if self.starts.len() != self.points.len() {
            return vec![self.points.clone()];
        }
        let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
        let mut prev_end = f64::NAN;
        for (&start, &(end, v)) in self.starts.iter().zip(&self.points) {
            // Adjoining: this interval starts where the last one ended
            // (within a microsecond of rounding).
            let adjoining = (start - prev_end).abs() < 1e-6;
            match out.last_mut() {
                Some(line) if adjoining => line.extend([(start, v), (end, v)]),
                _ => out.push(vec![(start, v), (end, v)]),
            }
            prev_end = end;
        }
        out
    }
}

/// The legend's column: its width in pixels, each line's label (cut to
/// fit), the row height and the font size.
struct Legend {
    width: u32,
    labels: Vec<String>,
    row: u32,
    font: u32,
}

impl Legend {
    fn of<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, c: &Chart) -> Legend {
        let (w, h) = root.dim_in_pixel();
        let n = c.series.len().max(1) as u32;
        // Rows of 18 px, smaller when the lines are many.
        let row = (h.saturating_sub(40) / n).clamp(10, 18);
        let font = (row - 4).min(13);
        let style: TextStyle = ("sans-serif", font).into();
        let max = w * 2 / 5;
        let width_of = |t: &str| root.estimate_text_size(t, &style).map_or(0, |s| s.0);
        let labels: Vec<String> = c
            .series
            .iter()
            .map(|s| {
                let mut label = s.name.clone();
                while width_of(&label) + 44 > max && label.chars().count() > 4 {
                    label.pop();
                    while label.ends_with(' ') {
                        label.pop();
                    }
                    label.pop();
                    label.push('…');
                }
                label
            })
            .collect();
        let widest = labels.iter().map(|l| width_of(l)).max().unwrap_or(0);
        Legend {
            width: (widest + 44).clamp(100, max),
            labels,
            row,
            font,
        }
    }

    /// Draws each line's mark and label, top down.
    fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        styles: &[ShapeStyle],
    ) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let text =
            TextStyle::from(("sans-serif", self.font)).pos(Pos::new(HPos::Left, VPos::Center));
        for (i, (label, st)) in self.labels.iter().zip(styles).enumerate() {
            let y = 48 + (i as u32 * self.row) as i32;
            area.draw(&PathElement::new(vec![(6, y), (28, y)], *st))
                .map_err(|e| e.to_string())?;
            area.draw(&Text::new(label.as_str(), (34, y), text.clone()))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// Each line's style: totals thick (the first black), the others thin.
fn styles(c: &Chart) -> Vec<ShapeStyle> {
    let mut totals = 0;
    c.series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if s.total {
                totals += 1;
                line_style(totals - 1, true)
            } else {
                line_style(i + 1, false)
            }
        })
        .collect()
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, c: &Chart) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    font();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (x0, x1, y1) = bounds(c);
    let title = if c.left_out > 0 {
        format!("{} ({} more lines not drawn)", c.title, c.left_out)
    } else {
        c.title.clone()
    };
    let legend = Legend::of(root, c);
    let (plot, legend_area) = root.split_horizontally(root.dim_in_pixel().0 - legend.width);
    // A count on the x axis: a tick per whole number (up to 10).
    let x_labels = if c.x_whole {
        ((x1 - x0).floor() as usize + 1).clamp(2, 10)
    } else {
        8
    };
    let x_format = |v: &f64| {
        if c.x_whole && v.fract() != 0.0 {
            String::new()
        } else {
            axis_number(*v)
        }
    };
    let styles = styles(c);
    let mut b = ChartBuilder::on(&plot);
    b.caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72);
    macro_rules! body {
        ($ch:expr) => {{
            let mut ch = $ch;
            ch.configure_mesh()
                .x_labels(x_labels)
                .x_label_formatter(&x_format)
                .y_label_formatter(&|v| axis_number(*v))
                .x_desc(c.x_label.as_str())
                .y_desc(c.y_label.as_str())
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(|e| e.to_string())?;
            for (s, &st) in c.series.iter().zip(&styles) {
                for piece in s.pieces() {
                    ch.draw_series(LineSeries::new(piece, st))
                        .map_err(|e| e.to_string())?;
                }
                // A line of one point draws nothing: its point is marked.
                if s.marked() {
                    ch.draw_series(s.points.iter().map(|&p| Circle::new(p, 4, st.filled())))
                        .map_err(|e| e.to_string())?;
                }
            }
        }};
    }
    if c.log_x {
        body!(
            b.build_cartesian_2d((x0..x1).log_scale(), 0.0..y1)
                .map_err(|e| e.to_string())?
        );
    } else {
        body!(
            b.build_cartesian_2d(x0..x1, 0.0..y1)
                .map_err(|e| e.to_string())?
        );
    }
    legend.draw(&legend_area, &styles)?;
    root.present().map_err(|e| e.to_string())
}

/// The chart's axes: x from, x to, y to (y from 0).
fn bounds(c: &Chart) -> (f64, f64, f64) {
    let pts = || c.series.iter().flat_map(|s| s.points.iter());
    let starts = c.series.iter().flat_map(|s| s.starts.iter());
    let (mut x0, mut x1) = pts().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    x0 = starts.fold(x0, |a, &s| a.min(s));
    // A little headroom over the highest line (the legend is beside).
    let y1 = pts().fold(0.0f64, |a, p| a.max(p.1)) * 1.1;
    let y1 = c.y_max.unwrap_or(if y1 > 0.0 { y1 } else { 1.0 });
    if c.log_x {
        x0 = x0.max(1e-3);
    } else {
        x0 = x0.min(0.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    // Markers at the last x stay inside the plotting area.
    if c.series.iter().any(Series::marked) {
        if c.log_x {
            x1 *= 1.1;
        } else {
            x1 += (x1 - x0) * 0.05;
        }
    }
    (x0, x1, y1)
}

/// Line `i`'s style: totals thick (the first black), the others thin.
fn line_style(i: usize, total: bool) -> ShapeStyle {
    let color = if total && i == 0 {
        BLACK.to_rgba()
    } else {
        let (r, g, b) = PALETTE[i % PALETTE.len()];
        RGBColor(r, g, b).to_rgba()
    };
    color.stroke_width(if total { 3 } else { 1 })
}

/// The chart as SVG text.
pub fn svg(c: &Chart) -> Result<String, PlotError> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (960, 540)).into_drawing_area();
        draw(&root, c).map_err(PlotError::Draw)?;
    }
    Ok(out)
}

/// Writes the chart to `path`: SVG or PNG by its extension.
pub fn render(c: &Chart, path: &Path) -> Result<(), PlotError> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => std::fs::write(path, svg(c)?).map_err(|e| PlotError::Draw(e.to_string())),
        Some("png") => {
            let root = BitMapBackend::new(path, (1280, 720)).into_drawing_area();
            draw(&root, c).map_err(PlotError::Draw)
        }
        _ => Err(PlotError::Format(path.display().to_string())),
    }
}

/// The files `plot -o OUT` draws `figures` into: each figure once, in
/// the order asked; one figure into OUT, several each into OUT with its
/// name before the extension (run.rate.svg, run.loss.svg).
pub fn outputs(out: &Path, figures: &[crate::Figure]) -> Vec<(crate::Figure, std::path::PathBuf)> {
    let mut once: Vec<crate::Figure> = Vec::new();
    for &f in figures {
        if !once.contains(&f) {
            once.push(f);
        }
    }
    let many = once.len() > 1;
    let stem = out.file_stem().unwrap_or_default().to_string_lossy();
    let ext = out.extension().unwrap_or_default().to_string_lossy();
    (once.iter())
        .map(|&f| match many {
            false => (f, out.to_path_buf()),
            true => (f, out.with_file_name(format!("{stem}.{}.{ext}", f.name()))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// WCAG 2's contrast ratio of a colour against white.
    fn contrast_on_white((r, g, b): (u8, u8, u8)) -> f64 {
        let lin = |c: u8| {
            let c = f64::from(c) / 255.0;
            if c <= 0.03928 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        let l = 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
        1.05 / (l + 0.05)
    }

    /// Issue 43 item 7: no pale line (the palette had a pale yellow).
    #[test]
    fn every_line_colour_is_readable_on_white() {
        for c in PALETTE {
            assert!(
                contrast_on_white(c) >= 3.0,
                "{c:?}: {}",
                contrast_on_white(c)
            );
        }
        // The check can fail: the old pale yellow would.
        assert!(contrast_on_white((0xff, 0xeb, 0x3b)) < 3.0);
        // Every line drawn takes its colour from the palette or is black.
        for (i, total) in [(0, false), (5, false), (13, false), (1, true), (14, true)] {
            let c = line_style(i, total).color;
            assert!(contrast_on_white((c.0, c.1, c.2)) >= 3.0, "{i} {total}");
        }
    }

    #[test]
    fn a_per_interval_series_is_drawn_as_steps_with_gaps_left_open() {
        let s = Series {
            name: "x".into(),
            points: vec![(1.0, 5.0), (2.0, 7.0), (4.0, 7.0)],
            starts: vec![0.0, 1.0, 3.0],
            total: false,
            marks: false,
        };
        assert_eq!(
            s.pieces(),
            vec![
                vec![(0.0, 5.0), (1.0, 5.0), (1.0, 7.0), (2.0, 7.0)],
                vec![(3.0, 7.0), (4.0, 7.0)]
            ]
        );
        assert!(!s.marked());
    }

    #[test]
    fn each_figure_once_and_named_when_several() {
        use crate::Figure::{Loss, Rate};
        let one = super::outputs(Path::new("d/run.svg"), &[Rate, Rate]);
        assert_eq!(one, [(Rate, "d/run.svg".into())]);
        let two = super::outputs(Path::new("d/run.svg"), &[Rate, Loss, Rate]);
        assert_eq!(
            two,
            [
                (Rate, "d/run.rate.svg".into()),
                (Loss, "d/run.loss.svg".into())
            ]
        );
    }
}
