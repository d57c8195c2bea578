//! The report's charts, each drawn by plotters into an SVG string. Category axes (ClusterQueues) are labelled
//! by hand at the pixel rows plotters maps them to, so every name shows whatever the count.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::ReportError;
use crate::duration::format_duration;
use crate::sim::metrics::{EvictionRecord, FlavorUtilisation, QueueReport};

/// Width and height of a chart in SVG pixels (it scales down with the page).
const SIZE: (u32, u32) = (960, 340);
/// Space for ClusterQueue names left of category charts.
const NAME_AREA: u32 = 150;
const FONT: &str = "sans-serif";

/// Colours that stay distinct for the common kinds of colour blindness (Okabe and Ito's palette).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

/// The i-th series colour.
pub(super) fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

const GRID: RGBColor = RGBColor(232, 232, 232);

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Draws into a fresh SVG canvas of `size` and returns the SVG text.
pub(super) fn svg(
    chart: &'static str,
    size: (u32, u32),
    draw: impl FnOnce(&Area<'_>) -> Result<(), String>,
) -> Result<String, ReportError> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| e.to_string())
            .map_err(ReportError::draw(chart))?;
        draw(&root).map_err(ReportError::draw(chart))?;
        root.present()
            .map_err(|e| e.to_string())
            .map_err(ReportError::draw(chart))?;
    }
    Ok(out)
}

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Axis numbers without a needless ".0".
fn axis_number(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn hours(seconds: f64) -> f64 {
    seconds / 3600.0
}

/// A right-aligned, vertically centred label at pixel `at`.
fn name_label(root: &Area<'_>, text: &str, at: (i32, i32)) -> Result<(), String> {
    let style = TextStyle::from((FONT, 14).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
    root.draw(&Text::new(text.to_string(), at, style))
        .map_err(s)
}

/// GPUs in use per flavor over time, as a percentage of the flavor's GPUs (a step line per flavor).
pub(super) fn utilisation(
    flavors: &[FlavorUtilisation],
    duration_seconds: f64,
) -> Result<String, ReportError> {
    let end = hours(duration_seconds).max(1.0 / 60.0);
    svg("GPU utilisation", SIZE, |root| {
        let mut chart = ChartBuilder::on(root)
            .margin(14)
            .x_label_area_size(42)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..end, 0f64..110f64)
            .map_err(s)?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .bold_line_style(GRID)
            .x_label_formatter(&axis_number)
            .y_label_formatter(&axis_number)
            .x_desc("hours since the start")
            .y_desc("GPUs in use (% of flavor)")
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .draw()
            .map_err(s)?;
        for (i, f) in flavors.iter().enumerate() {
            let c = colour(i);
            let cap = f.gpus.max(1) as f64;
            let mut points = Vec::with_capacity(f.steps.len() * 2);
            let mut last: Option<f64> = None;
            for step in &f.steps {
                let x = hours(step.at_seconds);
                let y = 100.0 * step.gpus_in_use as f64 / cap;
                if let Some(prev) = last {
                    points.push((x, prev));
                }
                points.push((x, y));
                last = Some(y);
            }
            if let Some(prev) = last {
                points.push((end, prev));
            }
            chart
                .draw_series(AreaSeries::new(points.clone(), 0.0, c.mix(0.12)))
                .map_err(s)?;
            chart
                .draw_series(LineSeries::new(points, c.stroke_width(2)))
                .map_err(s)?
                .label(format!(
                    "{} ({} GPUs, mean {:.1}%)",
                    f.flavor,
                    f.gpus,
                    100.0 * f.mean_utilisation
                ))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, 13))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(s)
    })
}

/// Wait from arrival to first admission per ClusterQueue, as the fraction of admitted workloads admitted
/// within each wait (an empirical cumulative distribution: a curve hugging the left edge means short waits).
pub(super) fn waits(queues: &[QueueReport]) -> Result<String, ReportError> {
    let longest = queues
        .iter()
        .filter_map(|q| q.wait_samples.last())
        .fold(0f64, |a, &b| a.max(b));
    let end = hours(longest).max(1.0 / 60.0) * 1.02;
    svg("wait-time distribution", SIZE, |root| {
        let mut chart = ChartBuilder::on(root)
            .margin(14)
            .x_label_area_size(42)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..end, 0f64..100f64)
            .map_err(s)?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .bold_line_style(GRID)
            .x_label_formatter(&axis_number)
            .y_label_formatter(&axis_number)
            .x_desc("wait before first admission (hours)")
            .y_desc("% of admitted workloads")
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .draw()
            .map_err(s)?;
        for (i, q) in queues.iter().enumerate() {
            if q.wait_samples.is_empty() {
                continue;
            }
            let c = colour(i);
            let n = q.wait_samples.len() as f64;
            let mut points = vec![(0.0, 0.0)];
            for (k, w) in q.wait_samples.iter().enumerate() {
                let x = hours(*w);
                points.push((x, 100.0 * k as f64 / n));
                points.push((x, 100.0 * (k + 1) as f64 / n));
            }
            points.push((end, 100.0));
            let d = |v: f64| format_duration((v * 1000.0) as i64);
            chart
                .draw_series(LineSeries::new(points, c.stroke_width(2)))
                .map_err(s)?
                .label(format!(
                    "{}: p50 {}, p90 {}, max {}",
                    q.cluster_queue,
                    d(q.wait_seconds.p50),
                    d(q.wait_seconds.p90),
                    d(q.wait_seconds.max)
                ))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, 13))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(s)
    })
}

/// Height of a category chart with `rows` rows.
fn rows_height(rows: usize) -> u32 {
    (90 + 44 * rows.max(1)).min(2000) as u32
}

/// Each ClusterQueue's share of the GPU-hours used (bar) against its share of the nominal GPUs (black tick).
pub(super) fn fairness(queues: &[QueueReport]) -> Result<String, ReportError> {
    let n = queues.len().max(1);
    let top = queues
        .iter()
        .map(|q| q.usage_share.max(q.entitlement_share))
        .fold(0f64, f64::max);
    let end = (100.0 * top * 1.15).clamp(1.0, 100.0);
    svg("fairness", (SIZE.0, rows_height(n)), |root| {
        let mut chart = ChartBuilder::on(root)
            .margin(14)
            .x_label_area_size(42)
            .y_label_area_size(NAME_AREA)
            .build_cartesian_2d(0f64..end, -0.5f64..(n as f64 - 0.5))
            .map_err(s)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .light_line_style(WHITE)
            .bold_line_style(GRID)
            .x_label_formatter(&axis_number)
            .y_label_formatter(&axis_number)
            .x_desc("% of all GPU-hours (bar) vs % of nominal GPU quota (black tick)")
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .draw()
            .map_err(s)?;
        for (i, q) in queues.iter().enumerate() {
            // The first queue on top.
            let y = (n - 1 - i) as f64;
            let c = colour(i);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(0.0, y - 0.3), (100.0 * q.usage_share, y + 0.3)],
                    c.filled(),
                )))
                .map_err(s)?;
            let e = 100.0 * q.entitlement_share;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(e, y - 0.42), (e, y + 0.42)],
                    BLACK.stroke_width(4),
                )))
                .map_err(s)?;
            let (_, py) = chart.backend_coord(&(0.0, y));
            name_label(root, &q.cluster_queue, (NAME_AREA as i32 + 4, py))?;
            let text = format!(
                "{:.1}% used / {:.1}% entitled ({:.0} GPU-h)",
                100.0 * q.usage_share,
                e,
                q.gpu_hours
            );
            let (px, _) = chart.backend_coord(&(100.0 * q.usage_share.max(q.entitlement_share), y));
            let style =
                TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
            // Beside the longer of the two marks, or inside the bar when that would run off the chart.
            let at = if px + 330 < SIZE.0 as i32 {
                (px + 8, py)
            } else {
                (NAME_AREA as i32 + 24, py)
            };
            root.draw(&Text::new(text, at, style)).map_err(s)?;
        }
        Ok(())
    })
}

/// Whether an eviction reason is a preemption (the rest are failures: timeouts, deactivation, ...).
pub(super) fn is_preemption(reason: &str) -> bool {
    reason.starts_with("Preempted")
}

/// Preemptions (circles, area by lost GPU-hours) and other evictions (crosses) per ClusterQueue over time,
/// with instants where scheduling did not settle as red dashes.
pub(super) fn timeline(
    queues: &[String],
    evictions: &[EvictionRecord],
    unsettled_at_seconds: &[f64],
    duration_seconds: f64,
) -> Result<String, ReportError> {
    let n = queues.len().max(1);
    let end = hours(duration_seconds).max(1.0 / 60.0);
    let row = |cq: &str| {
        queues
            .iter()
            .position(|q| q == cq)
            .map(|i| (n - 1 - i) as f64)
    };
    // The legend sits in the space above the top row.
    let top = n as f64 + 1.2;
    svg(
        "preemption timeline",
        (SIZE.0, rows_height(n) + 70),
        |root| {
            let mut chart = ChartBuilder::on(root)
                .margin(14)
                .x_label_area_size(42)
                .y_label_area_size(NAME_AREA)
                .build_cartesian_2d(0f64..end, -0.5f64..top)
                .map_err(s)?;
            chart
                .configure_mesh()
                .y_labels(0)
                .light_line_style(WHITE)
                .bold_line_style(GRID)
                .x_label_formatter(&axis_number)
                .y_label_formatter(&axis_number)
                .x_desc("hours since the start")
                .label_style((FONT, 13))
                .axis_desc_style((FONT, 14))
                .draw()
                .map_err(s)?;
            let red = RGBColor(200, 30, 30);
            for &t in unsettled_at_seconds {
                let x = hours(t);
                chart
                    .draw_series(DashedLineSeries::new(
                        vec![(x, -0.5), (x, n as f64 - 0.5)],
                        6,
                        4,
                        red.stroke_width(2),
                    ))
                    .map_err(s)?;
            }
            for (i, q) in queues.iter().enumerate() {
                let (_, py) = chart.backend_coord(&(0.0, (n - 1 - i) as f64));
                name_label(root, q, (NAME_AREA as i32 + 4, py))?;
            }
            let mut preempted = Vec::new();
            let mut failed = Vec::new();
            for e in evictions {
                let Some(y) = row(&e.cluster_queue) else {
                    continue;
                };
                let x = hours(e.at_seconds);
                if is_preemption(&e.reason) {
                    let r = (3.0 + 2.0 * e.lost_gpu_hours.max(0.0).sqrt()).min(16.0) as i32;
                    preempted.push(Circle::new((x, y), r, colour(0).mix(0.45).filled()));
                } else {
                    failed.push(Cross::new((x, y), 6, colour(5).stroke_width(2)));
                }
            }
            let blue = colour(0);
            chart
                .draw_series(preempted)
                .map_err(s)?
                .label("preemption (area ~ GPU-hours lost)")
                .legend(move |(x, y)| Circle::new((x + 8, y), 5, blue.mix(0.6).filled()));
            let orange = colour(5);
            chart
                .draw_series(failed)
                .map_err(s)?
                .label("other eviction (failure, timeout, deactivation)")
                .legend(move |(x, y)| Cross::new((x + 8, y), 5, orange.stroke_width(2)));
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
                .map_err(s)?
                .label("scheduling did not settle")
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], red.stroke_width(2))
                });
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .label_font((FONT, 13))
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK.mix(0.3))
                .draw()
                .map_err(s)
        },
    )
}
