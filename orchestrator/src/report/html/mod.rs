//! The HTML report: one self-contained file with inline SVG plots (made with plotters), no
//! scripts and no network fetches, so it can be attached to a bug or opened offline.

use super::Report;
use crate::hunt::short;
pub(crate) use plots::svg;
use plots::{path_plot, samples_plot, vmstat_section};
use std::fmt::Write;

mod plots;

/// `s` with the HTML special characters escaped, for text and attribute values, and every
/// control character but a line break and a tab shown as U+FFFD (an ESC from a subject or a
/// command's unit reached the page raw; issue 61, finding 7).
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.push(crate::text::REPLACEMENT),
            c => out.push(c),
        }
    }
    out
}

/// The page's style sheet, inline so the file stands alone.
pub(crate) const CSS: &str = "body{font-family:sans-serif;max-width:1100px;margin:1em auto;padding:0 1em;color:#222}\
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:1.6em}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}td code{overflow-wrap:anywhere}\
code,pre{font-family:monospace}pre{background:#f6f6f6;padding:.6em;overflow-x:auto}\
.culprit{border:2px solid #d62728;padding:.5em 1em;background:#fff6f6}.good{color:#1b9e4b}.bad{color:#d62728}.skip{color:#888}\
.grid{display:grid;grid-template-columns:1fr 1fr;gap:8px}.plot{margin:0;overflow-x:auto}.plot svg{max-width:100%;height:auto}.note{color:#666}.err{color:#d62728}";

/// Renders the HTML report; `range` is the commit range oldest first (good excluded, bad
/// last), for the bisection path.
pub fn html(r: &Report, range: Option<&[String]>) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    );
    let _ = writeln!(
        o,
        "<title>firstbad report: {}</title><style>{CSS}</style></head><body>",
        esc(&r.name)
    );
    let _ = writeln!(o, "<h1>firstbad report: {}</h1>", esc(&r.name));
    let _ = writeln!(
        o,
        "<p>Metric <code>{}</code> ({}), good <code>{}</code> {}, bad <code>{}</code> {}. Status: <b>{}</b>{}.</p>",
        esc(&r.metric),
        r.direction,
        esc(short(&r.good.id)),
        esc(&r.good.subject),
        esc(short(&r.bad.id)),
        esc(&r.bad.subject),
        r.status,
        r.status_detail.as_ref().map(|d| format!(" ({})", esc(d))).unwrap_or_default()
    );
    if let Some(c) = &r.first_bad {
        let _ = writeln!(
            o,
            "<div class=\"culprit\" id=\"first-bad\"><h2>First bad commit</h2>"
        );
        let _ = writeln!(
            o,
            "<p><code>{}</code> <b>{}</b></p><table>",
            esc(&c.id),
            esc(&c.subject)
        );
        if let Some(a) = &c.author {
            let _ = writeln!(o, "<tr><th>Author</th><td>{}</td></tr>", esc(a));
        }
        if let Some(d) = &c.date {
            let _ = writeln!(o, "<tr><th>Date</th><td>{}</td></tr>", esc(d));
        }
        if let Some(l) = &c.link {
            // Only a web address is a link: `javascript:` from `[report] web_link` was live
            // (issue 61, finding 7); anything else is shown as text.
            let _ = if is_web_link(l) {
                writeln!(
                    o,
                    "<tr><th>Link</th><td><a href=\"{0}\">{0}</a></td></tr>",
                    esc(l)
                )
            } else {
                writeln!(o, "<tr><th>Link</th><td>{}</td></tr>", esc(l))
            };
        }
        let _ = writeln!(o, "</table>");
        if let Some(d) = &c.diffstat {
            let _ = writeln!(
                o,
                "<table class=\"diffstat\"><tr><th>file</th><th>+</th><th>-</th></tr>"
            );
            for f in &d.files {
                let _ = writeln!(o, "<tr><td><code>{}</code></td><td class=\"good\">+{}</td><td class=\"bad\">-{}</td></tr>", esc(&f.path), f.insertions, f.deletions);
            }
            let _ = writeln!(
                o,
                "<tr><th>{} file(s)</th><th>+{}</th><th>-{}</th></tr></table>",
                d.files.len(),
                d.insertions,
                d.deletions
            );
        }
        let _ = writeln!(o, "</div>");
    }
    if !r.possible_first_bad.is_empty() {
        let _ = writeln!(o, "<h2>No single first bad commit</h2><p>Only skipped commits are left; the first bad commit is one of:</p><ul>");
        for c in &r.possible_first_bad {
            let _ = writeln!(
                o,
                "<li><code>{}</code> {}</li>",
                esc(short(&c.id)),
                esc(&c.subject)
            );
        }
        let _ = writeln!(o, "</ul>");
    }
    let _ = writeln!(
        o,
        "<h2 id=\"confidence\">Confidence: {}</h2><ul>{}</ul>",
        r.confidence.level,
        r.confidence
            .reasons
            .iter()
            .map(|x| format!("<li>{}</li>", esc(x)))
            .collect::<String>()
    );
    if let Some(g) = &r.regression {
        let _ = writeln!(o, "<h2 id=\"regression\">What regressed</h2><table><tr><th></th><th>boots</th><th>samples</th><th>median ({0})</th><th>p99 ({0})</th></tr>", esc(&g.unit));
        for (label, e) in [("good", &g.good), ("bad", &g.bad)] {
            let _ = writeln!(
                o,
                "<tr><th class=\"{label}\">{label}</th><td>{}</td><td>{}</td><td>{:.2} [{:.2}, {:.2}]</td><td>{:.2} [{:.2}, {:.2}]</td></tr>",
                e.boots, e.samples, e.median.value, e.median.low, e.median.high, e.p99.value, e.p99.low, e.p99.high
            );
        }
        let _ = writeln!(
            o,
            "<tr><th>bad/good</th><td></td><td></td><td>x{:.2} [{:.2}, {:.2}]</td><td>x{:.2} [{:.2}, {:.2}]</td></tr></table><p class=\"note\">Pooled samples of <code>{}</code>; [..]: {}.</p>",
            g.median_ratio.value, g.median_ratio.low, g.median_ratio.high, g.p99_ratio.value, g.p99_ratio.low, g.p99_ratio.high,
            esc(&g.series), esc(&g.interval_method)
        );
    }
    if let Some(k) = &r.samples_kept {
        let _ = writeln!(o, "<p class=\"note\">{}</p>", esc(k.words()));
    }
    let _ = writeln!(
        o,
        "<h2 id=\"path\">Bisection path</h2><figure class=\"plot\" id=\"plot-path\">{}</figure>",
        path_plot(r, range)
    );
    let _ = writeln!(o, "<h2 id=\"samples\">Per-boot samples</h2><figure class=\"plot\" id=\"plot-samples\">{}</figure>", samples_plot(r));
    let _ = writeln!(o, "<h2 id=\"commits\">Tested commits, in order</h2><table><tr><th>step</th><th>commit</th><th>subject</th><th>verdict</th><th>boots ({})</th><th>why</th></tr>", esc(&r.metric));
    for c in &r.commits {
        let v = c.verdict.unwrap_or(match c.role {
            "good-endpoint" => "good",
            "bad-endpoint" => "bad",
            _ => "testing",
        });
        let boots: Vec<String> = c
            .boots
            .iter()
            .map(|b| match (b.value, &b.reason) {
                (Some(v), _) => format!("{v:.2}"),
                (None, Some(reason)) => {
                    format!("<span class=\"skip\">failed: {}</span>", esc(reason))
                }
                _ => "?".into(),
            })
            .collect();
        let why = if c.build == Some("failed") {
            // The first compiler line says why; the rest is in the JSON report and the log.
            let more = c.build_errors.len().saturating_sub(1);
            format!(
                "build failed: <code>{}</code>{}",
                esc(c
                    .build_errors
                    .first()
                    .map_or("see the build log", String::as_str)),
                if more > 0 {
                    format!(" (+{more} lines)")
                } else {
                    String::new()
                }
            )
        } else {
            esc(c
                .reason
                .as_deref()
                .unwrap_or(if c.role == "tested" { "" } else { "endpoint" }))
        };
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td class=\"{v}\">{v}</td><td>{}</td><td>{why}</td></tr>",
            c.step.map(|s| s.to_string()).unwrap_or_default(),
            esc(short(&c.id)),
            esc(&c.subject),
            boots.join(", ")
        );
    }
    let _ = writeln!(o, "</table>");
    let _ = writeln!(
        o,
        "<h2 id=\"snapshot\">Test-host settings that differ between good and bad boots</h2>"
    );
    let has_snapshot = r
        .commits
        .iter()
        .any(|c| c.boots.iter().any(|b| !b.snapshot.is_empty()));
    if !has_snapshot {
        let _ = writeln!(
            o,
            "<p class=\"note\">The results carry no system snapshot.</p>"
        );
    } else if r.snapshot_diff.is_empty() {
        let _ = writeln!(
            o,
            "<p>None: every recorded setting is the same on good and bad boots.</p>"
        );
    } else {
        let _ = writeln!(o, "<table><tr><th>setting</th><th class=\"good\">good</th><th class=\"bad\">bad</th></tr>");
        for d in &r.snapshot_diff {
            let _ = writeln!(
                o,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                esc(&d.setting),
                esc(&d.good.join(" | ")),
                esc(&d.bad.join(" | "))
            );
        }
        let _ = writeln!(o, "</table>");
    }
    vmstat_section(r, &mut o);
    let _ = writeln!(
        o,
        "<h2 id=\"reproduce\">How to reproduce</h2><pre>firstbad {} {}\n# {}</pre>",
        if r.reproduction.is_some() {
            "reproduce"
        } else {
            "run"
        },
        esc(&r.hunt_file.display().to_string()),
        esc(&match &r.command {
            // Each boot of a metric command hunt is one run of its command.
            Some(c) => format!("command, one run per boot: {c}"),
            None => format!("workload: {}", r.workload_file.display()),
        })
    );
    match &r.reproduction {
        // A reproduction bisects nothing: its kernels and workload instead of a bisect log.
        Some(rep) => {
            let release =
                |x: &Option<String>| x.clone().unwrap_or_else(|| "(no measured boot)".into());
            let _ = writeln!(
                o,
                "<h2 id=\"kernels\">Kernels compared</h2><pre>good {} (uname -r {})\nbad  {} (uname -r {})</pre>",
                esc(&format!("{} {}", crate::hunt::short(&r.good.id), r.good.subject)),
                esc(&release(&rep.good_release)),
                esc(&format!("{} {}", crate::hunt::short(&r.bad.id), r.bad.subject)),
                esc(&release(&rep.bad_release)),
            );
            if let Some(w) = &rep.workload {
                let _ = writeln!(o, "<h2 id=\"workload\">Workload</h2><pre>{}</pre>", esc(w));
            }
        }
        None => {
            let _ = writeln!(
                o,
                "<h2 id=\"bisect-log\">git bisect log</h2><pre>{}</pre>",
                esc(&r.bisect_log)
            );
        }
    }
    let _ = writeln!(o, "</body></html>");
    o
}

/// Whether `link` is an http(s) address, the only kind the report makes a live link.
fn is_web_link(link: &str) -> bool {
    let lower = link.trim_start().to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://"))
        && link.trim_start().len() == link.len()
}
