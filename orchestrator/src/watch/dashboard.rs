//! `firstbad dashboard <series> --out DIR`: the series as static HTML (inline SVG, no
//! scripts, nothing fetched) and the same data as JSON. Per metric, every boot's value night by
//! night, the head's median each night, failed nights and the changes marked; every change with
//! its state and a link to its hunt's HTML report, copied beside the page.

use super::db::{RegressionState, SeriesDb, SeriesState};
use super::reports::hunt_reports;
use super::{db_path, describe, WatchError};
use crate::config::SeriesConfig;
use crate::hunt::short;
use crate::report::html::{esc, svg, CSS};
use crate::stats::median;
use plotters::prelude::*;
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Colour of the head's boots and medians.
const HEAD: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
/// Colour of the reference's boots.
const REFERENCE: RGBColor = RGBColor(0x99, 0x99, 0x99);
/// Colour of regressions and failed nights.
const BAD: RGBColor = RGBColor(0xd6, 0x27, 0x28);
/// Colour of improvements.
const GOOD: RGBColor = RGBColor(0x1b, 0x9e, 0x4b);

/// The JSON export: the series as the dashboard shows it.
#[derive(Debug, Serialize)]
pub struct Export {
    /// `firstbad-series/1`.
    pub schema: &'static str,
    /// The series' name.
    pub name: String,
    /// The branch followed and where from.
    pub branch: String,
    /// The remote.
    pub remote: String,
    /// The metric the series is judged by.
    pub metric: String,
    /// The reference now.
    pub reference: Option<String>,
    /// Every night, oldest first.
    pub nights: Vec<NightExport>,
    /// Every change found.
    pub changes: Vec<ChangeExport>,
}

/// A night in the export.
#[derive(Debug, Serialize)]
pub struct NightExport {
    /// Its number.
    pub night: u32,
    /// When it started (Unix ms).
    pub started_ms: i64,
    /// The head tested.
    pub head: String,
    /// The reference booted beside it.
    pub reference: String,
    /// "measured", "reference" (the first night), "failed", "running".
    pub state: &'static str,
    /// Why it failed.
    pub failed: Option<String>,
    /// Median of the head's values (the series metric).
    pub head_median: Option<f64>,
    /// Median of the reference's values.
    pub reference_median: Option<f64>,
    /// Every boot, with every metric.
    pub boots: Vec<super::db::SeriesBoot>,
}

/// A change in the export.
#[derive(Debug, Serialize)]
pub struct ChangeExport {
    /// Its number.
    pub id: u32,
    /// First night after it.
    pub night: u32,
    /// Last commit tested before.
    pub good: String,
    /// First commit tested after.
    pub bad: String,
    /// Relative move, > 0 worse.
    pub effect: f64,
    /// A regression (else an improvement).
    pub regression: bool,
    /// "detected", "hunting", "culprit found", "not reproduced", "ambiguous",
    /// "budget spent", "acknowledged", "improvement".
    pub state: &'static str,
    /// The hunt's outcome in a line.
    pub outcome: Option<String>,
    /// The culprit, when found.
    pub culprit: Option<String>,
    /// The detector's figures.
    pub summary: String,
    /// The hunt's HTML report, relative to the dashboard.
    pub report: Option<String>,
}

fn state_of(c: &super::db::Change) -> &'static str {
    match (&c.outcome, c.acknowledged, c.regression) {
        (_, _, false) => "improvement",
        (_, true, _) => "acknowledged",
        (None, false, _) => "hunting",
        (Some(RegressionState::Found { .. }), ..) => "culprit found",
        (Some(RegressionState::NotReproduced { .. }), ..) => "not reproduced",
        (Some(RegressionState::Ambiguous { .. }), ..) => "ambiguous",
        (Some(RegressionState::BudgetSpent { .. }), ..) => "budget spent",
        (Some(RegressionState::Hunting), ..) => "hunting",
    }
}

/// The export of a series' state.
pub fn export(cfg: &SeriesConfig, state: &SeriesState, reports: &[(u32, String)]) -> Export {
    let nights = state
        .nights
        .iter()
        .map(|n| {
            let (h, r) = (n.values(&n.head), n.values(&n.reference));
            NightExport {
                night: n.night,
                started_ms: n.started_ms,
                head: n.head.clone(),
                reference: n.reference.clone(),
                state: match (&n.boots, &n.failed) {
                    (Some(b), _) if b.is_empty() => "reference",
                    (Some(_), _) => "measured",
                    (None, Some(_)) => "failed",
                    (None, None) => "running",
                },
                failed: n.failed.clone(),
                head_median: (!h.is_empty()).then(|| median(&h)),
                reference_median: (!r.is_empty()).then(|| median(&r)),
                boots: n.boots.clone().unwrap_or_default(),
            }
        })
        .collect();
    let changes = state
        .changes
        .iter()
        .map(|c| ChangeExport {
            id: c.id,
            night: c.night,
            good: c.good.clone(),
            bad: c.bad.clone(),
            effect: c.effect,
            regression: c.regression,
            state: state_of(c),
            outcome: c.outcome.as_ref().map(describe),
            culprit: match &c.outcome {
                Some(RegressionState::Found { culprit, .. }) => Some(culprit.clone()),
                _ => None,
            },
            summary: c.summary.clone(),
            report: reports
                .iter()
                .find(|(id, _)| *id == c.id)
                .map(|(_, f)| f.clone()),
        })
        .collect();
    Export {
        schema: "firstbad-series/1",
        name: cfg.name.clone(),
        branch: cfg.branch.clone(),
        remote: cfg.remote.clone(),
        metric: cfg.metric().to_owned(),
        reference: state.reference.clone(),
        nights,
        changes,
    }
}

/// Writes `index.html`, `series.json` and each hunt's `hunt-NNN.html` into `out`; returns
/// the page's path.
pub fn write(cfg: &SeriesConfig, out: &Path) -> Result<PathBuf, WatchError> {
    let path = db_path(&cfg.state_dir);
    if !path.exists() {
        return Err(WatchError::BadInput(format!(
            "{}: no series database in {}: run `firstbad watch {}` first",
            cfg.source.display(),
            cfg.state_dir.display(),
            cfg.source.display()
        )));
    }
    let (state, _) = SeriesDb::read(&path)?;
    let io = |what: &Path, e: std::io::Error| {
        WatchError::BadInput(format!("--out: writing {}: {e}", what.display()))
    };
    std::fs::create_dir_all(out).map_err(|e| io(out, e))?;
    let mut reports = Vec::new();
    for c in &state.changes {
        let hunt = super::hunt_of(cfg, c);
        if let Some(r) = hunt_reports(&hunt)? {
            let name = format!("hunt-{:03}.html", c.id);
            std::fs::copy(&r.html, out.join(&name)).map_err(|e| io(&out.join(&name), e))?;
            reports.push((c.id, name));
        }
    }
    let export = export(cfg, &state, &reports);
    let json = serde_json::to_string_pretty(&export).expect("the export serialises");
    std::fs::write(out.join("series.json"), json + "\n")
        .map_err(|e| io(&out.join("series.json"), e))?;
    let page = out.join("index.html");
    std::fs::write(&page, html(&export)).map_err(|e| io(&page, e))?;
    Ok(page)
}

/// The page.
pub fn html(e: &Export) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>firstbad: {name}</title>\
         <style>{CSS}</style></head><body>\n<h1>firstbad series {name}</h1>\n<p>{branch} of \
         <code>{remote}</code>; reference <code>{reference}</code>; {n} nights.</p>\n",
        name = esc(&e.name),
        branch = esc(&e.branch),
        remote = esc(&e.remote),
        reference = e.reference.as_deref().map_or("(none)", short),
        n = e.nights.len(),
    );
    let _ = writeln!(o, "<h2>Changes</h2>");
    if e.changes.is_empty() {
        let _ = writeln!(o, "<p class=\"note\">No change found so far.</p>");
    } else {
        let _ = writeln!(
            o,
            "<table><tr><th>#</th><th>night</th><th>move</th><th>between</th><th>state</th>\
             <th>hunt</th></tr>"
        );
        for c in &e.changes {
            let class = if c.regression { "bad" } else { "good" };
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td class=\"{class}\">{:+.1}%</td><td><code>{}</code>..<code>{}</code></td>\
                 <td>{}{}</td><td>{}</td></tr>",
                c.id,
                c.night,
                c.effect * 100.0,
                short(&c.good),
                short(&c.bad),
                esc(c.state),
                c.outcome
                    .as_ref()
                    .map_or_else(String::new, |d| format!(": {}", esc(d))),
                c.report.as_ref().map_or_else(
                    || "—".to_owned(),
                    |r| format!("<a href=\"{}\">report</a>", esc(r))
                ),
            );
        }
        let _ = writeln!(o, "</table>");
    }
    let mut metrics: Vec<String> = vec![e.metric.clone()];
    let others: BTreeSet<&String> = e
        .nights
        .iter()
        .flat_map(|n| n.boots.iter().flat_map(|b| b.metrics.keys()))
        .filter(|m| **m != e.metric)
        .collect();
    metrics.extend(others.into_iter().cloned());
    for m in &metrics {
        let _ = writeln!(
            o,
            "<h2>{}</h2>\n<figure class=\"plot\">{}</figure>",
            esc(m),
            plot(e, m)
        );
    }
    let _ = writeln!(o, "<h2>Nights</h2>\n<table><tr><th>night</th><th>head</th><th>reference</th><th>{}: head median</th><th>reference median</th><th>state</th></tr>", esc(&e.metric));
    for n in &e.nights {
        let med = |v: Option<f64>| v.map_or_else(|| "—".to_owned(), |v| format!("{v:.3}"));
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            n.night,
            short(&n.head),
            short(&n.reference),
            med(n.head_median),
            med(n.reference_median),
            esc(&match &n.failed {
                Some(why) => format!("failed: {why}"),
                None => n.state.to_owned(),
            })
        );
    }
    let _ = writeln!(
        o,
        "</table>\n<p class=\"note\">The same data: <a href=\"series.json\">series.json</a>.</p>\n</body></html>"
    );
    o
}

/// Metric `m` night by night: each boot of the head and the reference, the head's median,
/// failed nights at the foot, changes as vertical lines.
fn plot(e: &Export, m: &str) -> String {
    let value = |b: &super::db::SeriesBoot| {
        if m == e.metric {
            b.value.filter(|_| b.workload.is_none())
        } else {
            b.metrics.get(m).copied()
        }
    };
    let mut head = Vec::new();
    let mut reference = Vec::new();
    let mut medians = Vec::new();
    for n in &e.nights {
        let x = n.night as f64;
        let mut hv = Vec::new();
        for (k, b) in n.boots.iter().enumerate() {
            let Some(v) = value(b) else { continue };
            // Head to the right of the night's tick, the reference to the left.
            let jitter = (k % 5) as f64 * 0.03;
            if b.commit == n.head {
                head.push((x + 0.08 + jitter, v));
                hv.push(v);
            } else {
                reference.push((x - 0.08 - jitter, v));
            }
        }
        if !hv.is_empty() {
            medians.push((x, median(&hv)));
        }
    }
    let all: Vec<f64> = head.iter().chain(&reference).map(|p| p.1).collect();
    let (lo, hi) = match (
        all.iter().copied().reduce(f64::min),
        all.iter().copied().reduce(f64::max),
    ) {
        // Room above the data for the legend.
        (Some(lo), Some(hi)) if hi > lo => (lo - (hi - lo) * 0.1, hi + (hi - lo) * 0.7),
        (Some(v), _) => (v * 0.5, v * 1.5 + 1.0),
        _ => (0.0, 1.0),
    };
    let last = e.nights.last().map_or(1, |n| n.night) as f64;
    let failed: Vec<f64> = e
        .nights
        .iter()
        .filter(|n| n.state == "failed")
        .map(|n| n.night as f64)
        .collect();
    let width = (200 + 40 * e.nights.len() as u32).clamp(700, 1600);
    svg((width, 380), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!("{m}: every boot, night by night"),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(0.5f64..last + 0.5, lo..hi)?;
        chart
            .configure_mesh()
            .x_desc("night")
            .y_desc(m)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .light_line_style(TRANSPARENT)
            .draw()?;
        for c in &e.changes {
            let colour = if c.regression { BAD } else { GOOD };
            let x = c.night as f64 - 0.5;
            chart
                .draw_series(LineSeries::new([(x, lo), (x, hi)], colour.stroke_width(2)))?
                .label(format!(
                    "change #{} ({:+.0}%, {})",
                    c.id,
                    c.effect * 100.0,
                    c.state
                ))
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2))
                });
        }
        chart
            .draw_series(
                reference
                    .iter()
                    .map(|p| Circle::new(*p, 3, REFERENCE.filled())),
            )?
            .label("reference boot")
            .legend(|(x, y)| Circle::new((x, y), 3, REFERENCE.filled()));
        chart
            .draw_series(head.iter().map(|p| Circle::new(*p, 3, HEAD.filled())))?
            .label("head boot")
            .legend(|(x, y)| Circle::new((x, y), 3, HEAD.filled()));
        chart
            .draw_series(LineSeries::new(
                medians.iter().copied(),
                HEAD.stroke_width(2),
            ))?
            .label("head median")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], HEAD.stroke_width(2)));
        if !failed.is_empty() {
            chart
                .draw_series(
                    failed
                        .iter()
                        .map(|x| Cross::new((*x, lo + (hi - lo) * 0.04), 6, BAD.stroke_width(2))),
                )?
                .label("head did not build or boot")
                .legend(|(x, y)| Cross::new((x, y), 5, BAD.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    })
}
