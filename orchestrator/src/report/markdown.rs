//! The Markdown report for a person, and a `git bisect log` that `git bisect replay` accepts.

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

/// `git bisect log` of the hunt: the endpoints, each verdict in order, and the answer. A
/// prebuilt hunt bisected no git revisions: its log says so, and lists its verdicts as
/// comments.
pub fn bisect_log(id: &HuntIdentity, state: &HuntState, commits: &dyn Commits) -> String {
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
        let _ = writeln!(out, "# bad: [{}] {}", id.bad, subject(commits, &id.bad));
        let _ = writeln!(out, "# good: [{}] {}", id.good, subject(commits, &id.good));
        return verdict_lines(out, state, commits);
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
    let _ = writeln!(out, "# bad: [{}] {}", id.bad, subject(commits, &id.bad));
    for g in &range.goods {
        let _ = writeln!(out, "# good: [{g}] {}", subject(commits, g));
    }
    verdict_lines(out, state, commits)
}

/// The verdict lines and the answer of a `git bisect log`.
fn verdict_lines(mut out: String, state: &HuntState, commits: &dyn Commits) -> String {
    for (commit, verdict, _) in &state.verdicts {
        let v = verdict.as_str();
        let _ = writeln!(out, "# {v}: [{commit}] {}", subject(commits, commit));
        let _ = writeln!(out, "git bisect {v} {commit}");
    }
    match &state.end {
        Some(HuntEnd::Found { commit }) => {
            let _ = writeln!(
                out,
                "# first bad commit: [{commit}] {}",
                subject(commits, commit)
            );
        }
        Some(HuntEnd::OnlySkippedLeft { commits: c }) => {
            for commit in c {
                let _ = writeln!(
                    out,
                    "# possible first bad commit: [{commit}] {}",
                    subject(commits, commit)
                );
            }
        }
        _ => {}
    }
    out
}

fn values_cell(state: &HuntState, commit: &str) -> (String, String, String) {
    let vals = state.values(commit);
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
    format!(
        "- confirmation: {verdict}; {probability}\n- evidence: {}\n",
        c.summary
    )
}

/// The Markdown report.
pub fn markdown(
    name: &str,
    metric: &str,
    id: &HuntIdentity,
    state: &HuntState,
    commits: &dyn Commits,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# firstbad report: {name}\n");
    match &state.end {
        Some(HuntEnd::Found { commit }) => {
            let _ = writeln!(out, "## First bad commit\n");
            match commits.info(commit) {
                Some(c) => {
                    let _ = writeln!(out, "    {} {}", short(&c.id), c.subject);
                    let _ = writeln!(out, "\n- commit: `{}`", c.id);
                    let _ = writeln!(out, "- author: {}", c.author);
                    let _ = writeln!(out, "- date: {}", c.date);
                }
                None => {
                    let _ = writeln!(out, "    {commit}\n");
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
                let _ = writeln!(out, "- `{}` {}", short(commit), subject(commits, commit));
            }
        }
        Some(HuntEnd::NotReproduced { message }) => {
            let _ = writeln!(out, "## Regression not reproduced\n\n{message}");
        }
        Some(HuntEnd::Reproduced { summary }) => {
            let _ = writeln!(out, "## Regression reproduced\n\n{summary}");
        }
        Some(HuntEnd::Measured { summary }) => {
            let _ = writeln!(out, "## Measured (one night of a series)\n\n{summary}");
        }
        None => {
            let _ = writeln!(
                out,
                "## In progress\n\n{} verdicts so far{}.",
                state.verdicts.len(),
                state
                    .in_flight()
                    .map(|s| format!("; now: {s}"))
                    .unwrap_or_default()
            );
        }
    }

    let _ = writeln!(out, "\n## Baselines (`{metric}`, one value per boot)\n");
    let _ = writeln!(out, "| endpoint | commit | boots | median | failed |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for (label, c) in [("good", &id.good), ("bad", &id.bad)] {
        let (v, med, f) = values_cell(state, c);
        let _ = writeln!(out, "| {label} | `{}` | {v} | {med} | {f} |", short(c));
    }
    if let Some(s) = &state.baselines {
        let _ = writeln!(out, "\n{s}");
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
            "| {} | `{}` | {} | **{}** | {v} | {med} | {} |",
            i + 1,
            short(commit),
            subject(commits, commit).replace('|', "\\|"),
            verdict.as_str(),
            note.replace('|', "\\|")
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
                "- `{}` boot {n}: {reason} (console: `{}`)",
                short(c),
                console.display()
            );
        }
    }

    let _ = writeln!(out, "\n## git bisect log\n\n```");
    out.push_str(&bisect_log(id, state, commits));
    let _ = writeln!(out, "```");
    out
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
