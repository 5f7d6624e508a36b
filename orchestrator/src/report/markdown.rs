//! The Markdown report for a person, and a `git bisect log` that `git bisect replay` accepts.

use super::text::{
    markdown as md, markdown_cell_code as cell, markdown_code as code, one_line, terminal,
};
use super::Commits;
use crate::hunt::{short, HuntState};
use crate::journal::{BootOutcome, BuildOutcome, HuntEnd, HuntIdentity, Verdict};
use crate::stats::median;
use std::fmt::Write;

pub(crate) fn subject(commits: &dyn Commits, id: &str) -> String {
    commits.info(id).map(|c| c.subject).unwrap_or_else(|| {
        if crate::hunt::is_commit_id(id) {
            "(unknown commit)".into()
        } else {
            // A prebuilt kernel: its id (package and version) is its whole name.
            "(prebuilt kernel)".into()
        }
    })
}

/// Whether the hunt's candidates are prebuilt kernels (`[build] kind = "prebuilt"`), from
/// its journal's identity.
pub fn is_prebuilt(id: &HuntIdentity) -> bool {
    id.meaning.contains_key("build.kernels")
}

/// A commit's subject on one line of a log or a code block ([`one_line`]).
fn line_subject(commits: &dyn Commits, id: &str) -> String {
    one_line(&subject(commits, id)).into_owned()
}

/// `git bisect log` of the hunt: the endpoints, each verdict in order, and the answer. A
/// prebuilt hunt bisected no git revisions: its log says so, and lists its verdicts as
/// comments. Text from input holds no control character ([`terminal`]).
pub fn bisect_log(id: &HuntIdentity, state: &HuntState, commits: &dyn Commits) -> String {
    terminal(&bisect_log_text(id, state, commits)).into_owned()
}

fn bisect_log_text(id: &HuntIdentity, state: &HuntState, commits: &dyn Commits) -> String {
    let mut out = String::new();
    if is_prebuilt(id) {
        let _ = writeln!(
            out,
            "# No git bisect log: this hunt's candidates are prebuilt kernels, not git \
             revisions.\n# Its verdicts, in order (bad {}, good {}):",
            id.bad, id.good
        );
        for (commit, verdict, _) in &state.verdicts {
            let _ = writeln!(out, "# {}: {commit}", verdict.as_str());
        }
        match &state.end {
            Some(HuntEnd::Found { commit }) => {
                let _ = writeln!(out, "# first bad kernel: {commit}");
            }
            Some(HuntEnd::OnlySkippedLeft { commits: c }) => {
                for commit in c {
                    let _ = writeln!(out, "# possible first bad kernel: {commit}");
                }
            }
            _ => {}
        }
        return out;
    }
    let Some(range) = &state.range else {
        let _ = writeln!(out, "git bisect start '{}' '{}'", id.bad, id.good);
        let _ = writeln!(
            out,
            "# bad: [{}] {}",
            id.bad,
            line_subject(commits, &id.bad)
        );
        let _ = writeln!(
            out,
            "# good: [{}] {}",
            id.good,
            line_subject(commits, &id.good)
        );
        return verdict_lines(out, id, state, commits);
    };
    // Several goods, paths, first-parent: the start line carries them, as git writes it.
    let mut start = String::from("git bisect start");
    if range.first_parent {
        start.push_str(" '--first-parent'");
    }
    for rev in std::iter::once(&id.bad).chain(&range.goods) {
        let _ = write!(start, " '{rev}'");
    }
    if !range.paths.is_empty() {
        start.push_str(" '--'");
        for p in &range.paths {
            let _ = write!(start, " '{}'", p.replace('\'', "'\\''"));
        }
    }
    for note in &range.notes {
        let _ = writeln!(out, "# note: {note}");
    }
    let _ = writeln!(out, "{start}");
    let _ = writeln!(
        out,
        "# bad: [{}] {}",
        id.bad,
        line_subject(commits, &id.bad)
    );
    for g in &range.goods {
        let _ = writeln!(out, "# good: [{g}] {}", line_subject(commits, g));
    }
    verdict_lines(out, id, state, commits)
}

/// The verdict lines and the answer of a `git bisect log`.
fn verdict_lines(
    mut out: String,
    id: &HuntIdentity,
    state: &HuntState,
    commits: &dyn Commits,
) -> String {
    if let Some(n) = state
        .pruned
        .as_ref()
        .map(|p| p.commits(&id.bad).count())
        .filter(|&n| n > 0)
    {
        let _ = writeln!(
            out,
            "# note: {n} commit(s) that change no file the kernel is built from were not \
             tested (firstbad's pruning); git, which does not know them, may ask for one"
        );
    }
    for (commit, verdict, reason) in &state.verdicts {
        let v = verdict.as_str();
        if reason.starts_with("implied, not booted") {
            let _ = writeln!(out, "# {}", one_line(reason));
        }
        let _ = writeln!(out, "# {v}: [{commit}] {}", line_subject(commits, commit));
        let _ = writeln!(out, "git bisect {v} {commit}");
    }
    match &state.end {
        Some(HuntEnd::Found { commit }) => {
            let _ = writeln!(
                out,
                "# first bad commit: [{commit}] {}",
                line_subject(commits, commit)
            );
        }
        Some(HuntEnd::OnlySkippedLeft { commits: c }) => {
            for commit in c {
                let _ = writeln!(
                    out,
                    "# possible first bad commit: [{commit}] {}",
                    line_subject(commits, commit)
                );
            }
        }
        _ => {}
    }
    out
}

fn values_cell(state: &HuntState, commit: &str) -> (String, String, String) {
    let vals = state.raw_values(commit);
    let fails = state.failures(commit);
    let v = vals
        .iter()
        .map(|v| format!("{v:.1}"))
        .collect::<Vec<_>>()
        .join(", ");
    let med = if vals.is_empty() {
        "-".into()
    } else {
        format!("{:.1}", median(&vals))
    };
    let f = if fails.is_empty() {
        String::new()
    } else {
        format!("{} failed", fails.len())
    };
    (v, med, f)
}

/// Whether the final re-test bore the culprit `commit` out, with its posterior probability,
/// as list items: a reader of the Markdown must not take an unconfirmed answer for a sure one.
/// A boot taken while the machine's neighbours kept it this busy (the largest stalled share of
/// CPU, I/O or memory) is listed by name: on this project's 2-core machine a good kernel's
/// boot read 41.8 ms against a 4.3 ms centre beside a neighbour's burst.
const BUSY_BOOT: f64 = 0.2;
/// At most this many busy boots are listed, the busiest first.
const BUSY_LISTED: usize = 10;

/// The machine's load during the boots of local hosts ([`Event::BootPressure`]): the median
/// stalled shares, and the busiest boots with their values.
///
/// [`Event::BootPressure`]: crate::journal::Event::BootPressure
fn pressure_lines(out: &mut String, state: &HuntState) {
    let mut boots: Vec<(&str, &crate::hunt::BootRecord, crate::journal::HostPressure)> = state
        .boots
        .iter()
        .flat_map(|(c, rs)| rs.iter().map(move |r| (c.as_str(), r)))
        .filter_map(|(c, r)| r.pressure.map(|p| (c, r, p)))
        .collect();
    if boots.is_empty() {
        return;
    }
    boots.sort_by_key(|(_, r, _)| r.seq);
    let med = |f: fn(&crate::journal::HostPressure) -> Option<f64>| {
        let v: Vec<f64> = boots.iter().filter_map(|(_, _, p)| f(p)).collect();
        if v.is_empty() {
            "-".to_owned()
        } else {
            format!("{:.0}%", 100.0 * median(&v))
        }
    };
    let _ = writeln!(
        out,
        "\n## The machine's load during the boots ({} boots of local hosts)\n\nMedian share of \
         each boot's time in which some task on this machine waited: CPU {}, I/O {}, memory {} \
         (/proc/pressure).",
        boots.len(),
        med(|p| p.cpu),
        med(|p| p.io),
        med(|p| p.memory)
    );
    let mut busy: Vec<_> = boots
        .iter()
        .filter(|(_, _, p)| p.worst() >= BUSY_BOOT)
        .collect();
    busy.sort_by(|a, b| b.2.worst().total_cmp(&a.2.worst()));
    if busy.is_empty() {
        let _ = writeln!(
            out,
            "No boot ran with a stalled share of {:.0}% or more.",
            100.0 * BUSY_BOOT
        );
        return;
    }
    let _ = writeln!(
        out,
        "{} boot(s) ran with a stalled share of {:.0}% or more{}:\n",
        busy.len(),
        100.0 * BUSY_BOOT,
        if busy.len() > BUSY_LISTED {
            format!(", the {BUSY_LISTED} busiest")
        } else {
            String::new()
        }
    );
    for (c, r, p) in busy.into_iter().take(BUSY_LISTED) {
        let value = match &r.outcome {
            BootOutcome::Measured { value, .. } => format!("{value:.2}"),
            BootOutcome::Failed { .. } => "failed".to_owned(),
        };
        let _ = writeln!(
            out,
            "- {} boot {} on {}: {value}, {}",
            code(short(c)),
            r.boot,
            md(&r.host),
            p.brief()
        );
    }
}

fn confirmation_lines(state: &HuntState, commit: &str) -> String {
    let Some(c) = state.confirmation.as_ref().filter(|c| c.commit == commit) else {
        return "- confirmation: not run (the journal has no final re-test of the culprit)\n"
            .to_owned();
    };
    let verdict = if c.confirmed {
        "**confirmed** by the final re-test against its parent"
    } else {
        "**NOT confirmed**: the final re-test against its parent did not bear it out"
    };
    // As the hunt writes it in the summary: one decimal (99.1%).
    let probability = match c.confidence {
        Some(p) => format!("posterior probability {:.1}%", p * 100.0),
        None => "no posterior probability (absolute-threshold mode has no model)".to_owned(),
    };
    let mut lines = format!(
        "- confirmation: {verdict}; {probability}\n- evidence: {}\n",
        md(&c.summary)
    );
    if let Some(r) = state.reverted.as_ref().filter(|r| r.commit == commit) {
        let _ = writeln!(lines, "- revert on top of bad: {}", md(&r.summary));
    }
    lines
}

/// The Markdown report. Text from input (subjects, authors, ids, reasons) is inert: no HTML,
/// no link or image, no control character ([`super::text`]).
pub fn markdown(
    name: &str,
    metric: &str,
    id: &HuntIdentity,
    state: &HuntState,
    commits: &dyn Commits,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# firstbad report: {}\n", md(name));
    match &state.end {
        Some(HuntEnd::Found { commit }) => {
            let _ = writeln!(out, "## First bad commit\n");
            match commits.info(commit) {
                Some(c) => {
                    // An indented code block: literal, one line.
                    let _ = writeln!(
                        out,
                        "    {} {}",
                        one_line(short(&c.id)),
                        one_line(&c.subject)
                    );
                    let _ = writeln!(out, "\n- commit: {}", code(&c.id));
                    let _ = writeln!(out, "- author: {}", md(&c.author));
                    let _ = writeln!(out, "- date: {}", md(&c.date));
                }
                None => {
                    let _ = writeln!(out, "    {}\n", one_line(commit));
                }
            }
            out.push_str(&confirmation_lines(state, commit));
        }
        Some(HuntEnd::OnlySkippedLeft { commits: c }) => {
            let _ = writeln!(
                out,
                "## No single first bad commit\n\nOnly skipped commits are left; the first bad commit is one of:\n"
            );
            for commit in c {
                let _ = writeln!(
                    out,
                    "- {} {}",
                    code(short(commit)),
                    md(&subject(commits, commit))
                );
            }
        }
        Some(HuntEnd::NotReproduced { message }) => {
            let _ = writeln!(out, "## Regression not reproduced\n\n{}", md(message));
        }
        Some(HuntEnd::Reproduced { summary }) => {
            let _ = writeln!(out, "## Regression reproduced\n\n{}", md(summary));
        }
        Some(HuntEnd::Measured { summary }) => {
            let _ = writeln!(
                out,
                "## Measured (one night of a series)\n\n{}",
                md(summary)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "## In progress\n\n{} verdicts so far{}.",
                state.verdicts.len(),
                state
                    .in_flight()
                    .map(|s| format!("; now: {}", md(&s)))
                    .unwrap_or_default()
            );
        }
    }

    let _ = writeln!(
        out,
        "\n## Baselines ({}, one value per boot)\n",
        code(metric)
    );
    let _ = writeln!(out, "| endpoint | commit | boots | median | failed |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for (label, c) in [("good", &id.good), ("bad", &id.bad)] {
        let (v, med, f) = values_cell(state, c);
        let _ = writeln!(out, "| {label} | {} | {v} | {med} | {f} |", cell(short(c)));
    }
    if let Some(s) = &state.baselines {
        let _ = writeln!(out, "\n{}", md(s));
    }
    if let Some(k) = super::samples_kept(state, metric) {
        let _ = writeln!(out, "\n{}", k.words());
    }
    if let Some(f) = &state.forecast {
        let _ = writeln!(out, "\n## Forecast, made before the first candidate\n");
        for line in f.lines() {
            let _ = writeln!(out, "- {}", md(&line));
        }
        let spent = state.boots_since_forecast();
        let so_far = if state.end.is_some() { "" } else { " so far" };
        let _ = writeln!(
            out,
            "- spent{so_far}: {spent} boots after the baselines (forecast: median {:.0}, 90% \
             within {:.0})",
            f.boots.median, f.boots.p90
        );
    }

    let _ = writeln!(out, "\n## Tested commits, in order\n");
    let _ = writeln!(
        out,
        "| # | commit | subject | verdict | boots | median | note |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for (i, (commit, verdict, reason)) in state.verdicts.iter().enumerate() {
        let (v, med, f) = values_cell(state, commit);
        let note = match (verdict, state.builds.get(commit)) {
            (Verdict::Skip, Some(BuildOutcome::Failed { .. })) => reason.clone(),
            (Verdict::Skip, _) => reason.clone(),
            _ => f,
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | **{}** | {v} | {med} | {} |",
            i + 1,
            cell(short(commit)),
            md(&subject(commits, commit)),
            verdict.as_str(),
            md(&note)
        );
    }

    let failed: Vec<_> = state
        .boots
        .iter()
        .flat_map(|(c, boots)| boots.iter().map(move |b| (c, b)))
        .filter_map(|(c, b)| match &b.outcome {
            BootOutcome::Failed {
                reason, console, ..
            } => Some((c, b.boot, reason, console)),
            _ => None,
        })
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\n## Failed boots (never counted as good or bad)\n");
        for (c, n, reason, console) in failed {
            let _ = writeln!(
                out,
                "- {} boot {n}: {} (console: {})",
                code(short(c)),
                md(reason),
                code(&console.display().to_string())
            );
        }
    }

    pressure_lines(&mut out, state);

    if let Some(p) = &state.pruned {
        let left: Vec<_> = p.commits(&id.bad).collect();
        if !left.is_empty() {
            let _ = writeln!(
                out,
                "\n## Not booted: {} commit(s) that cannot change this kernel\n\nThey change \
                 no file that the endpoints' builds read ({} source files), so the search \
                 treated them as commits outside `-- <paths>` (`firstbad run --no-prune` boots \
                 them).\n",
                left.len(),
                p.inputs
            );
            for l in left {
                let _ = writeln!(
                    out,
                    "- {} {}: {}",
                    code(short(&l.commit)),
                    md(&subject(commits, &l.commit)),
                    md(&l.reason)
                );
            }
        }
    }

    let _ = writeln!(out, "\n## git bisect log\n\n```");
    out.push_str(&bisect_log(id, state, commits));
    let _ = writeln!(out, "```");
    terminal(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Event;

    struct NoCommits;
    impl Commits for NoCommits {
        fn info(&self, _: &str) -> Option<crate::history::CommitInfo> {
            None
        }
    }

    /// Commits whose every field is hostile: markup, a link, an image, terminal escapes.
    struct Hostile;
    const SUBJECT: &str = "<img src=x onerror=alert(1)> [click](javascript:alert(2)) \
                           ![i](javascript:alert(3)) \x1b]0;owned\x07\x1b[2J\n```\n<b>";
    impl Commits for Hostile {
        fn info(&self, id: &str) -> Option<crate::history::CommitInfo> {
            Some(crate::history::CommitInfo {
                id: id.to_owned(),
                subject: SUBJECT.to_owned(),
                author: "<script>alert(4)</script> [me](javascript:alert(5)) <a@b.c>".into(),
                date: "2024-01-01 00:00:00 +0000\x1b[31m".into(),
                author_name: String::new(),
                author_email: String::new(),
                author_time: 0,
                author_offset_minutes: 0,
                commit_time: 0,
            })
        }
    }

    /// Issue 32, finding 4: subjects and author names went raw into the Markdown report
    /// (`<img onerror>`, `javascript:` links stayed live), and an ESC in them or in a failed
    /// run's reason reached the terminal of `firstbad report` and `firstbad log`.
    #[test]
    fn hostile_subjects_authors_and_reasons_are_inert_in_the_markdown_report_and_the_log() {
        let (good, mid, bad) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
        let id = HuntIdentity {
            good: good.clone(),
            bad: bad.clone(),
            fingerprint: String::new(),
            meaning: Default::default(),
        };
        let mut state = HuntState::default();
        state.apply(&Event::BootFinished {
            commit: mid.clone(),
            boot: 1,
            host: "q".into(),
            outcome: BootOutcome::Failed {
                reason: "exit 3: <iframe src=javascript:alert(6)> \x1b]8;;http://x\x07".into(),
                console: "/tmp/`<b>`".into(),
                untestable: false,
            },
        });
        state.apply(&Event::Verdict {
            commit: mid.clone(),
            verdict: Verdict::Skip,
            reason: "[skip](javascript:alert(7)) \x1b[2J".into(),
        });
        state.apply(&Event::Finished {
            end: HuntEnd::Found {
                commit: bad.clone(),
            },
        });
        let md = markdown("<b>name</b>", "ms", &id, &state, &Hostile);
        // Code blocks and spans are literal in Markdown: what is live is in the rest.
        let mut prose = String::new();
        let mut fenced = false;
        for line in md.lines() {
            if line.starts_with("```") {
                fenced = !fenced;
            } else if !fenced && !line.starts_with("    ") {
                // An escaped backtick is a character; the others open and close our spans.
                prose.extend(line.replace("\\`", "'").split('`').step_by(2));
                prose.push('\n');
            }
        }
        assert!(!fenced, "the bisect log's fence is closed once:\n{md}");
        for live in [
            "<img", "<script", "<iframe", "<b>", "[click](", "![i](", "[me](", "[skip](",
        ] {
            assert!(!prose.contains(live), "{live} is live in:\n{md}");
        }
        assert!(
            md.contains("&lt;img src=x onerror=alert(1)&gt; \\[click\\](javascript:alert(2))"),
            "{md}"
        );
        let log = bisect_log(&id, &state, &Hostile);
        for text in [&md, &log] {
            let control: Vec<char> = text
                .chars()
                .filter(|c| c.is_control() && *c != '\n')
                .collect();
            assert!(control.is_empty(), "{control:?} in:\n{text}");
        }
        assert!(log.contains("# skip: ["), "{log}");
    }

    #[test]
    fn a_prebuilt_hunt_has_no_git_bisect_log_and_says_so() {
        let (good, mid, bad) = (
            "linux-image-6.1.0-47-cloud-amd64=6.1.170-3",
            "linux-image-6.1.0-53-cloud-amd64=6.1.182-1",
            "linux-image-6.1.0-57-cloud-amd64=6.1.192-3",
        );
        let id = HuntIdentity {
            good: good.into(),
            bad: bad.into(),
            fingerprint: String::new(),
            meaning: [("build.kernels".to_owned(), format!("{bad}, {mid}"))].into(),
        };
        let mut state = HuntState::default();
        state.apply(&Event::Verdict {
            commit: mid.into(),
            verdict: Verdict::Good,
            reason: String::new(),
        });
        state.apply(&Event::Finished {
            end: HuntEnd::Found { commit: bad.into() },
        });
        let log = bisect_log(&id, &state, &NoCommits);
        assert!(log.starts_with("# No git bisect log"), "{log}");
        assert!(!log.contains("git bisect start"), "{log}");
        assert!(
            log.contains(&format!("# good: {mid}\n# first bad kernel: {bad}")),
            "{log}"
        );
        let md = markdown("p", "m", &id, &state, &NoCommits);
        // The full names, not their first 12 characters.
        assert!(md.contains(&format!("`{mid}` | (prebuilt kernel)")), "{md}");
    }
}
