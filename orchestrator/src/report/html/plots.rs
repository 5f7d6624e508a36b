//! The HTML report's SVG plots, drawn with plotters: the bisection path, the per-boot
//! samples, and vmstat of a good and a bad boot.

use super::esc;
use crate::hunt::short;
use crate::report::{CommitReport, Report};
use plotters::prelude::*;
use std::fmt::Write;

/// A commit's label in a plot: the first 7 characters of its short id (a prebuilt kernel's
/// release may hold multi-byte characters: a byte slice of 7 panicked on one). plotters
/// escapes the text it writes into the SVG.
fn label(id: &str) -> String {
    short(id).chars().take(7).collect()
}

/// Colour of good verdicts and the good endpoint.
const GOOD: RGBColor = RGBColor(0x1b, 0x9e, 0x4b);
/// Colour of bad verdicts and the bad endpoint.
const BAD: RGBColor = RGBColor(0xd6, 0x27, 0x28);
/// Colour of skipped commits.
const SKIP: RGBColor = RGBColor(0x88, 0x88, 0x88);
/// Colour of commits without a verdict yet.
const PENDING: RGBColor = RGBColor(0x1f, 0x77, 0xb4);

fn colour(c: &CommitReport) -> RGBColor {
    match (c.role, c.verdict) {
        ("good-endpoint", _) | (_, Some("good")) => GOOD,
        ("bad-endpoint", _) | (_, Some("bad")) => BAD,
        (_, Some(_)) => SKIP,
        _ => PENDING,
    }
}

pub(crate) type PlotResult = Result<(), Box<dyn std::error::Error>>;

/// Draws with `f` on an SVG of the given size; a drawing error becomes a visible note.
pub(crate) fn svg(
    size: (u32, u32),
    f: impl FnOnce(&DrawingArea<SVGBackend, plotters::coord::Shift>) -> PlotResult,
) -> String {
    let mut buf = String::new();
    let r = {
        let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| e.to_string().into())
            .and_then(|_| f(&root))
            .and_then(|_| root.present().map_err(|e| e.to_string().into()))
    };
    match r {
        // plotters escapes markup but not control characters (a command's unit is input).
        Ok(()) => buf
            .chars()
            .map(|c| match c {
                '\n' | '\t' => c,
                c if c.is_control() => crate::text::REPLACEMENT,
                c => c,
            })
            .collect(),
        Err(e) => format!("<p class=\"err\">plot failed: {}</p>", esc(&e.to_string())),
    }
}

/// The bisection path: each tested commit at its position in the range, by step.
pub(super) fn path_plot(r: &Report, range: Option<&[String]>) -> String {
    let tested: Vec<&CommitReport> = r.commits.iter().filter(|c| c.step.is_some()).collect();
    let pos = |id: &str| -> Option<f64> {
        range
            .and_then(|rg| rg.iter().position(|c| c == id))
            .map(|i| i as f64 + 1.0)
    };
    let n = range.map_or(tested.len() + 1, |rg| rg.len()) as f64;
    svg((900, 320), |root| {
        let steps = tested.len().max(1) as f64;
        let mut chart = ChartBuilder::on(root)
            .caption("Bisection path over the commit range", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(52)
            .build_cartesian_2d(-0.5f64..n + 0.5, -0.5f64..steps + 2.5)?;
        chart
            .configure_mesh()
            .x_desc(if range.is_some() {
                "position in range (commits after good; bad is last)"
            } else {
                "step (range not available)"
            })
            .y_desc("bisection step")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(TRANSPARENT)
            .draw()?;
        let points: Vec<(f64, f64, RGBColor, &CommitReport)> = tested
            .iter()
            .enumerate()
            .map(|(i, c)| {
                (
                    pos(&c.id).unwrap_or(i as f64 + 1.0),
                    c.step.unwrap_or(0) as f64,
                    colour(c),
                    *c,
                )
            })
            .collect();
        chart.draw_series(LineSeries::new(
            points.iter().map(|p| (p.0, p.1)),
            BLACK.mix(0.3),
        ))?;
        chart
            .draw_series([Circle::new((0.0, 0.0), 6, GOOD.filled())])?
            .label("good (endpoint or verdict)")
            .legend(|(x, y)| Circle::new((x, y), 5, GOOD.filled()));
        chart
            .draw_series([Circle::new((n, 0.0), 6, BAD.filled())])?
            .label("bad (endpoint or verdict)")
            .legend(|(x, y)| Circle::new((x, y), 5, BAD.filled()));
        chart
            .draw_series(
                points
                    .iter()
                    .filter(|p| p.2 == SKIP)
                    .map(|p| Circle::new((p.0, p.1), 6, SKIP.filled())),
            )?
            .label("skip")
            .legend(|(x, y)| Circle::new((x, y), 5, SKIP.filled()));
        chart.draw_series(
            points
                .iter()
                .filter(|p| p.2 != SKIP)
                .map(|p| Circle::new((p.0, p.1), 6, p.2.filled())),
        )?;
        chart.draw_series(points.iter().map(|p| {
            Text::new(
                label(&p.3.id),
                (p.0, p.1 - 0.25),
                ("monospace", 11).into_font(),
            )
        }))?;
        if let Some(c) = &r.first_bad {
            let x = pos(&c.id).unwrap_or(n);
            let y = tested
                .iter()
                .find(|t| t.id == c.id)
                .and_then(|t| t.step)
                .unwrap_or(0) as f64;
            chart
                .draw_series([TriangleMarker::new((x, y + 0.3), 8, BAD.filled())])?
                .label("first bad commit")
                .legend(|(x, y)| TriangleMarker::new((x, y), 6, BAD.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    })
}

/// Every sample of every boot, per commit, on a log axis, against the endpoints' medians.
pub(super) fn samples_plot(r: &Report) -> String {
    let unit = r
        .regression
        .as_ref()
        .map(|g| g.unit.clone())
        .unwrap_or_default();
    let series = r
        .regression
        .as_ref()
        .map(|g| g.series.clone())
        .unwrap_or_else(|| r.metric.clone());
    // Columns: good endpoint, tested commits in step order, bad endpoint.
    let mut cols: Vec<&CommitReport> = r
        .commits
        .iter()
        .filter(|c| c.role == "good-endpoint")
        .collect();
    cols.extend(r.commits.iter().filter(|c| c.role == "tested"));
    cols.extend(r.commits.iter().filter(|c| c.role == "bad-endpoint"));
    let all: Vec<f64> = cols
        .iter()
        .flat_map(|c| c.boots.iter().flat_map(|b| b.samples.iter().copied()))
        .filter(|v| *v > 0.0)
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(0.0, f64::max);
    let (lo, hi) = if all.is_empty() {
        (0.1, 10.0)
    } else {
        // Room above the data for the legend.
        (lo / 1.5, hi * 5.0)
    };
    let labels: Vec<String> = cols
        .iter()
        .map(|c| match c.role {
            "good-endpoint" => "good".to_owned(),
            "bad-endpoint" => "bad".to_owned(),
            _ => format!(
                "{}:{}",
                c.step.map(|s| s.to_string()).unwrap_or_else(|| "?".into()),
                label(&c.id)
            ),
        })
        .collect();
    let median_of = |role: &str| {
        r.regression.as_ref().map(|g| {
            if role == "good" {
                g.good.median.value
            } else {
                g.bad.median.value
            }
        })
    };
    let width = (160 + 90 * cols.len() as u32).max(700);
    svg((width, 420), |root| {
        let ncols = cols.len() as f64;
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!("Per-boot samples of {series}, each commit against the baselines"),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d(-0.5f64..ncols - 0.5, (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_labels(cols.len() + 1)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 0.01 && i >= 0.0 && (i as usize) < labels.len() {
                    labels[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .x_desc("commit (step:id), in bisection order")
            .y_desc(format!("{series} ({unit}, log scale)"))
            .y_label_formatter(&|y| format!("{y:.1}"))
            .light_line_style(TRANSPARENT)
            .draw()?;
        if let Some(g) = median_of("good") {
            chart
                .draw_series(LineSeries::new(
                    [(-0.5, g), (ncols - 0.5, g)],
                    GOOD.stroke_width(2),
                ))?
                .label(format!("good baseline median {g:.2} {unit}"))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], GOOD.stroke_width(2)));
        }
        if let Some(b) = median_of("bad") {
            chart
                .draw_series(LineSeries::new(
                    [(-0.5, b), (ncols - 0.5, b)],
                    BAD.stroke_width(2),
                ))?
                .label(format!("bad baseline median {b:.2} {unit}"))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BAD.stroke_width(2)));
        }
        let mut dots = Vec::new();
        let mut boot_medians = Vec::new();
        for (i, c) in cols.iter().enumerate() {
            let measured: Vec<_> = c.boots.iter().filter(|b| !b.samples.is_empty()).collect();
            let nb = measured.len().max(1) as f64;
            for (k, b) in measured.iter().enumerate() {
                // Each boot gets its own strip inside the commit's column.
                let x0 = i as f64 - 0.35 + 0.7 * (k as f64 + 0.5) / nb;
                let w = 0.6 / nb;
                for (j, v) in b.samples.iter().enumerate() {
                    let jitter = ((j * 37 % 17) as f64 / 16.0 - 0.5) * w;
                    if *v > 0.0 {
                        dots.push((x0 + jitter, *v, colour(c)));
                    }
                }
                let mut s = b.samples.clone();
                s.sort_by(f64::total_cmp);
                if let Some(m) = firstbad_wire::percentile(&s, 50.0) {
                    boot_medians.push((x0, m));
                }
            }
        }
        chart
            .draw_series(
                dots.iter()
                    .map(|(x, y, c)| Circle::new((*x, *y), 2, c.mix(0.45).filled())),
            )?
            .label("one sample (colour: verdict)")
            .legend(|(x, y)| Circle::new((x, y), 3, PENDING.mix(0.6).filled()));
        chart
            .draw_series(boot_medians.iter().map(|(x, y)| {
                Rectangle::new(
                    [(x - 0.06, *y * 0.97), (x + 0.06, *y * 1.03)],
                    BLACK.filled(),
                )
            }))?
            .label("median of one boot")
            .legend(|(x, y)| Rectangle::new([(x - 6, y - 2), (x + 6, y + 2)], BLACK.filled()));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    })
}

/// vmstat columns of one boot over time.
fn vmstat_plot(
    title: &str,
    c: &CommitReport,
    cols: &[(&str, RGBColor)],
    y_desc: &str,
    y_max: f64,
) -> Option<String> {
    let boot = c.boots.iter().find(|b| !b.vmstat.is_empty())?;
    let t: Vec<f64> = boot.vmstat.get("t_s").cloned().unwrap_or_else(|| {
        (0..boot.vmstat.values().map(Vec::len).max().unwrap_or(0))
            .map(|i| i as f64)
            .collect()
    });
    let t_max = t.iter().copied().fold(1.0, f64::max);
    Some(svg((440, 280), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!("{title}: boot {} of {}", boot.boot, label(&c.id)),
                ("sans-serif", 15),
            )
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..t_max, 0f64..y_max)?;
        chart
            .configure_mesh()
            .x_desc("time since run start (s)")
            .y_desc(y_desc)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(TRANSPARENT)
            .draw()?;
        for (name, colour) in cols {
            if let Some(v) = boot.vmstat.get(*name) {
                let colour = *colour;
                chart
                    .draw_series(LineSeries::new(
                        t.iter().copied().zip(v.iter().copied()),
                        colour.stroke_width(2),
                    ))?
                    .label(*name)
                    .legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2))
                    });
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }))
}

pub(super) fn vmstat_section(r: &Report, out: &mut String) {
    let good = r.commits.iter().find(|c| c.role == "good-endpoint");
    let bad = r.commits.iter().find(|c| c.role == "bad-endpoint");
    let (Some(good), Some(bad)) = (good, bad) else {
        return;
    };
    let max_of = |names: &[&str]| {
        [good, bad]
            .iter()
            .flat_map(|c| {
                c.boots.iter().flat_map(|b| {
                    names
                        .iter()
                        .filter_map(|n| b.vmstat.get(*n))
                        .flatten()
                        .copied()
                })
            })
            .fold(1.0, f64::max)
            * 1.1
    };
    let io = [("bi", PENDING), ("bo", BAD)];
    let cpu = [("us", GOOD), ("sy", PENDING), ("wa", BAD)];
    let io_max = max_of(&["bi", "bo"]);
    let plots: Vec<Option<String>> = vec![
        vmstat_plot("good", good, &io, "block I/O (KiB/s)", io_max),
        vmstat_plot("bad", bad, &io, "block I/O (KiB/s)", io_max),
        vmstat_plot("good", good, &cpu, "CPU time (%)", 100.0),
        vmstat_plot("bad", bad, &cpu, "CPU time (%)", 100.0),
    ];
    let _ = writeln!(
        out,
        "<h2 id=\"vmstat\">vmstat: a good and a bad boot side by side</h2>"
    );
    if plots.iter().all(Option::is_none) {
        let _ = writeln!(out, "<p class=\"note\">The results carry no vmstat series (an agent without vmstat sampling).</p>");
        return;
    }
    let _ = writeln!(out, "<div class=\"grid\">");
    for p in plots.into_iter().flatten() {
        let _ = writeln!(out, "<figure class=\"plot vmstat\">{p}</figure>");
    }
    let _ = writeln!(out, "</div>");
}
