//! The plain-text report for LKML or bugzilla: what regressed and by how much, the first
//! bad commit as `git log --oneline` prints it, how to reproduce, the `git bisect log`, and
//! the trailers. Lines stay under 80 columns where the data allows.

use super::text::{mail_lines, subject as subject_text, terminal};
use super::{Estimate, Report};
use std::fmt::Write;

fn est(e: &Estimate, unit: &str) -> String {
    format!("{:.2} {unit} [{:.2}, {:.2}]", e.value, e.low, e.high)
}

/// Says what a bad/good ratio's interval shows, for a reader who skips the numbers.
fn change(ratio: &Estimate, direction: &str) -> &'static str {
    let worse_up = direction == "lower-is-better";
    if ratio.low > 1.0 {
        if worse_up {
            "worse: the interval excludes no change"
        } else {
            "better: the interval excludes no change"
        }
    } else if ratio.high < 1.0 {
        if worse_up {
            "better: the interval excludes no change"
        } else {
            "worse: the interval excludes no change"
        }
    } else {
        "no clear change: the interval includes x1"
    }
}

/// Renders the e-mail report: no line longer than a mail's 998 characters, a `Subject:` cut
/// to [`super::text::SUBJECT_CHARS`] of each subject and name, no control character from
/// input ([`super::text`]).
pub fn email(r: &Report) -> String {
    mail_lines(&terminal(&email_text(r)))
}

fn email_text(r: &Report) -> String {
    let mut out = String::new();
    let unit = r.regression.as_ref().map(|g| g.unit.as_str()).unwrap_or("");
    let subject = match (&r.first_bad, &r.regression) {
        (Some(c), Some(g)) => format!(
            "Subject: [REGRESSION] {}: {} median x{:.1}",
            subject_text(&c.subject),
            subject_text(&g.series),
            g.median_ratio.value
        ),
        (Some(c), None) => format!(
            "Subject: [REGRESSION] {}: bisected to {}",
            subject_text(&r.name),
            crate::hunt::short(&c.id)
        ),
        (None, Some(g)) if r.status == "reproduced" => format!(
            "Subject: [REGRESSION] {}: {} median x{:.1} from {} to {} (reproduced)",
            subject_text(&r.name),
            subject_text(&g.series),
            g.median_ratio.value,
            crate::hunt::short(&r.good.id),
            crate::hunt::short(&r.bad.id)
        ),
        // A report that found no regression must not be headed as one.
        _ if r.status == "not-reproduced" => format!(
            "Subject: [NOT REPRODUCED] {}: {} from {} to {}",
            subject_text(&r.name),
            subject_text(&r.metric),
            crate::hunt::short(&r.good.id),
            crate::hunt::short(&r.bad.id)
        ),
        _ => format!(
            "Subject: [REGRESSION] {}: {}",
            subject_text(&r.name),
            r.status
        ),
    };
    let _ = writeln!(out, "{subject}\n");
    let _ = writeln!(out, "Hi,\n");
    noticed(&mut out, r);
    // A prebuilt kernel has no subject: its package and version are its whole name.
    let named = |c: &super::CommitRef, side: &str| {
        let id = crate::hunt::short(&c.id);
        if crate::hunt::is_commit_id(&c.id) {
            format!("{id} (\"{}\", {side})", c.subject)
        } else {
            format!("{id} ({side})")
        }
    };
    let verb = if r.status == "not-reproduced" {
        "did not clearly regress"
    } else {
        "regressed"
    };
    let _ = writeln!(
        out,
        "{} {verb} between {}\nand {}.\n",
        r.metric,
        named(&r.good, "good"),
        named(&r.bad, "bad"),
    );
    if let Some(g) = &r.regression {
        for (label, e, good, bad) in [
            ("median", &g.median_ratio, &g.good.median, &g.bad.median),
            ("p99", &g.p99_ratio, &g.good.p99, &g.bad.p99),
        ] {
            let _ = writeln!(
                out,
                "  {label:<6} {:.2} -> {:.2} {unit}: x{:.2} [{:.2}, {:.2}], {}",
                good.value,
                bad.value,
                e.value,
                e.low,
                e.high,
                change(e, r.direction)
            );
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{}, all samples of each endpoint's boots pooled ({}):\n",
            g.series,
            if g.unit.is_empty() {
                "no unit"
            } else {
                &g.unit
            }
        );
        let _ = writeln!(out, "              {:<30} {:<30}", "median", "p99");
        for (label, e) in [("good", &g.good), ("bad", &g.bad)] {
            let _ = writeln!(
                out,
                "  {label:<4} {:>2}x{:<3} {:<30} {:<30}",
                e.boots,
                e.samples / e.boots.max(1),
                est(&e.median, unit),
                est(&e.p99, unit)
            );
        }
        let _ = writeln!(
            out,
            "  bad/good      {:<30} {:<30}",
            format!(
                "x{:.2} [{:.2}, {:.2}]",
                g.median_ratio.value, g.median_ratio.low, g.median_ratio.high
            ),
            format!(
                "x{:.2} [{:.2}, {:.2}]",
                g.p99_ratio.value, g.p99_ratio.low, g.p99_ratio.high
            )
        );
        let _ = writeln!(
            out,
            "\n  (boots x samples per boot)\n  [..]: {}\n",
            g.interval_method
                .replace(" replicates resampling", " replicates\n  resampling")
        );
        if let Some(k) = &r.samples_kept {
            let _ = writeln!(out, "{}\n", k.words());
        }
    }
    match (&r.first_bad, r.status) {
        (Some(c), _) => {
            let _ = writeln!(out, "The first bad commit is:\n\n  {}\n", c.oneline);
            if let Some(a) = &c.author {
                let _ = writeln!(out, "  Author: {a}");
            }
            if let Some(d) = &c.date {
                let _ = writeln!(out, "  Date:   {d}");
            }
            if let Some(d) = &c.diffstat {
                for f in &d.files {
                    let _ = writeln!(out, "  {} | +{} -{}", f.path, f.insertions, f.deletions);
                }
                let _ = writeln!(
                    out,
                    "  {} file(s) changed, {} insertion(s)(+), {} deletion(s)(-)",
                    d.files.len(),
                    d.insertions,
                    d.deletions
                );
            }
            if let Some(l) = &c.link {
                let _ = writeln!(out, "  {l}");
            }
            let _ = writeln!(out);
        }
        (None, "only-skipped-left") => {
            let _ = writeln!(
                out,
                "Only skipped commits are left; the first bad commit is one of:\n"
            );
            for c in &r.possible_first_bad {
                let _ = writeln!(out, "  {} {}", crate::hunt::short(&c.id), c.subject);
            }
            let _ = writeln!(out);
        }
        (None, status) if r.reproduction.is_some() => {
            let _ = writeln!(
                out,
                "{}{}.\n",
                if status == "reproduced" {
                    "Reproduced"
                } else {
                    "Not reproduced"
                },
                r.status_detail
                    .as_ref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            );
        }
        (None, status) => {
            let _ = writeln!(
                out,
                "No first bad commit: the hunt is {status}{}.\n",
                r.status_detail
                    .as_ref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            );
        }
    }
    let _ = writeln!(
        out,
        "Confidence: {} ({}).\n",
        r.confidence.level,
        r.confidence.reasons.join("; ")
    );
    if let Some(v) = &r.revert {
        let _ = writeln!(out, "Reverted on top of bad: {}.\n", v.summary);
    }
    if let Some(t) = &r.metric_table {
        metric_table(&mut out, t);
    }
    if !r.snapshot_diff.is_empty() {
        let _ = writeln!(
            out,
            "Test-host settings that differ between good and bad boots:\n"
        );
        for d in &r.snapshot_diff {
            let _ = writeln!(
                out,
                "  {}: {} -> {}",
                d.setting,
                d.good.join("|"),
                d.bad.join("|")
            );
        }
        let _ = writeln!(out);
    }
    if let Some(rep) = &r.reproduction {
        reproduction(&mut out, r, rep);
        return out;
    }
    match &r.command {
        Some(command) => {
            let _ = writeln!(
                out,
                "Each commit was built once and its command run several times, interleaved"
            );
            let _ = writeln!(
                out,
                "with the endpoints' runs; good/bad was decided from per-run statistics"
            );
            let _ = writeln!(out, "(a \"boot\" above is one run). To reproduce:\n");
            let _ = writeln!(out, "  firstbad run {}", r.hunt_file.display());
            let _ = writeln!(out, "  (command: {command})\n");
        }
        None => {
            let _ = writeln!(
                out,
                "Each commit was built, booted in a VM and measured by firstbad; good/bad"
            );
            let _ = writeln!(out, "was decided from per-boot statistics. To reproduce:\n");
            let _ = writeln!(out, "  firstbad run {}", r.hunt_file.display());
            let _ = writeln!(out, "  (workload: {})\n", r.workload_file.display());
        }
    }
    let _ = writeln!(out, "git bisect log:\n");
    for l in r.bisect_log.lines() {
        let _ = writeln!(out, "  {l}");
    }
    if !r.trailers.is_empty() {
        let _ = writeln!(out);
        for t in &r.trailers {
            let _ = writeln!(out, "{t}");
        }
    }
    // Mail clients and checkpatch dislike trailing blanks; the tables pad with them.
    out.lines()
        .map(|l| l.trim_end().to_owned() + "\n")
        .collect()
}

/// The kernel test robot's opening, for a culprit: "firstbad noticed a +X% regression of
/// <metric> on: commit <id> ("<subject>")", its link, and what was tested where.
fn noticed(out: &mut String, r: &Report) {
    let Some(c) = &r.first_bad else { return };
    // The hunt's metric from the culprit's parent to the culprit, else bad against good.
    let change = r
        .metric_table
        .as_ref()
        .and_then(|t| t.rows.iter().find(|row| row.name == r.metric))
        .map(|row| row.change_pct)
        .or_else(|| {
            r.regression
                .as_ref()
                .map(|g| 100.0 * (g.median_ratio.value - 1.0))
        });
    let Some(change) = change else { return };
    let _ = writeln!(
        out,
        "firstbad noticed a {change:+.1}% regression of {} on:\n",
        r.metric
    );
    let _ = writeln!(
        out,
        "commit: {} (\"{}\")",
        crate::hunt::short(&c.id),
        c.subject
    );
    if let Some(l) = &c.link {
        let _ = writeln!(out, "{l}");
    }
    let mut hosts: Vec<&str> = r
        .commits
        .iter()
        .filter(|k| k.id == c.id)
        .flat_map(|k| k.boots.iter().map(|b| b.host.as_str()))
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    let hosts = if hosts.is_empty() {
        String::from("its test hosts")
    } else {
        hosts.join(", ")
    };
    let what = match &r.command {
        Some(command) => format!("command: {command}"),
        None => format!("workload: {}", r.workload_parameters.join(", ")),
    };
    let _ = writeln!(out, "\ntesting: {} on {hosts}\n{what}\n", r.name);
}

/// A mean as the robot prints one: fewer decimals as it grows.
fn mean(x: f64) -> String {
    match x.abs() {
        a if a >= 1000.0 => format!("{x:.0}"),
        a if a >= 100.0 => format!("{x:.1}"),
        _ => format!("{x:.2}"),
    }
}

/// Every metric of the workload, parent against culprit, in the kernel test robot's layout.
fn metric_table(out: &mut String, t: &super::metrics::MetricTable) {
    let _ = writeln!(
        out,
        "Every metric of the workload, the culprit's parent against the culprit{}\n\
         (the mean of each commit's boots ± their standard deviation; [*]: moved\n\
         beyond its noise, no boot of one within the other's range and a change of\n\
         at least min_effect):\n",
        if t.revert.is_some() {
            ",\nthen the culprit against its revert on top of bad"
        } else {
            ""
        }
    );
    let revert = t.revert.as_ref();
    let _ = writeln!(
        out,
        "{:>16} {:<27}{}",
        crate::hunt::short(&t.parent.id),
        crate::hunt::short(&t.culprit.id),
        revert.map_or_else(String::new, |r| format!(" {}", crate::hunt::short(&r.id)))
    );
    let wide = if revert.is_some() { 2 } else { 1 };
    let _ = writeln!(
        out,
        "----------------{}",
        " ---------------------------".repeat(wide)
    );
    let _ = writeln!(
        out,
        "         %stddev{}",
        "     %change         %stddev".repeat(wide)
    );
    let _ = writeln!(
        out,
        "             \\{}",
        "          |                \\".repeat(wide)
    );
    for row in &t.rows {
        let reverted = match (row.revert, row.revert_change_pct) {
            (Some(r), Some(pct)) => {
                format!(
                    " {pct:>+10.1}% {:>10} ±{:>3.0}%",
                    mean(r.mean),
                    r.stddev_pct
                )
            }
            _ if revert.is_some() => format!(" {:>27}", "-"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{:>10} ±{:>3.0}% {:>+10.1}% {:>10} ±{:>3.0}%{reverted}  {}{}",
            mean(row.parent.mean),
            row.parent.stddev_pct,
            row.change_pct,
            mean(row.culprit.mean),
            row.culprit.stddev_pct,
            if row.moved { "[*] " } else { "    " },
            row.name
        );
    }
    let first = t.rows.first();
    let (p, c) = first.map_or((0, 0), |r| (r.parent.boots, r.culprit.boots));
    let r = first
        .and_then(|r| r.revert)
        .map_or_else(String::new, |r| format!(", {} of the revert", r.boots));
    let _ = writeln!(out, "\n({p} boots of the parent, {c} of the culprit{r})\n");
}

/// How a reproduction was made, in place of a bisection's: the kernels as they booted, the
/// workload's text, and the command that makes it again.
fn reproduction(out: &mut String, r: &Report, rep: &super::model::Reproduction) {
    let release = |x: &Option<String>| x.clone().unwrap_or_else(|| "(no measured boot)".into());
    let _ = writeln!(
        out,
        "{}, interleaved in a seeded random order,\n\
         until the baselines' statistics confirmed or refuted the difference; nothing\n\
         between them was bisected.\n",
        match &r.command {
            Some(c) => format!("Both were built once and `{c}` run on each"),
            None => "Both kernels were booted in a VM by firstbad, each boot verified by its\n\
                     release"
                .to_owned(),
        }
    );
    if r.command.is_some() {
        // A command's "release" is the commit its checkout holds: said once is enough.
        let _ = writeln!(out, "  good: {} {}", r.good.id, r.good.subject);
        let _ = writeln!(out, "  bad:  {} {}\n", r.bad.id, r.bad.subject);
    } else {
        let _ = writeln!(
            out,
            "  good: {} {} (uname -r {})",
            crate::hunt::short(&r.good.id),
            r.good.subject,
            release(&rep.good_release)
        );
        let _ = writeln!(
            out,
            "  bad:  {} {} (uname -r {})\n",
            crate::hunt::short(&r.bad.id),
            r.bad.subject,
            release(&rep.bad_release)
        );
    }
    let _ = writeln!(
        out,
        "To reproduce:\n\n  firstbad reproduce {}\n",
        r.hunt_file.display()
    );
    if let Some(w) = &rep.workload {
        let _ = writeln!(out, "The workload ({}):\n", r.workload_file.display());
        for l in w.lines() {
            let _ = writeln!(out, "  {l}");
        }
        let _ = writeln!(out);
    }
    for t in &r.trailers {
        let _ = writeln!(out, "{t}");
    }
}
