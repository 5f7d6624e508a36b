//! Reports of a local command hunt (`[test]`): what ran where, how each run ended, the
//! verdicts, and the `git bisect log`. No boots, no metric.

use super::markdown::subject;
use super::text::{
    markdown as md, markdown_cell_code as cell, markdown_code as code, one_line, terminal,
};
use super::{bisect_log, Commits};
use crate::config::LocalConfig;
use crate::hunt::{short, HuntState};
use crate::journal::{Entry, HuntEnd, HuntIdentity, TestOutcome};
use crate::local::{rounds, runs};
use std::fmt::Write;

fn how(outcome: &Option<TestOutcome>) -> String {
    match outcome {
        None => "running (or interrupted)".into(),
        Some(o) if o.timed_out => format!("timed out after {:.1} s", o.seconds),
        Some(o) if o.cancelled => format!("cancelled after {:.1} s (ruled out)", o.seconds),
        Some(o) => match (o.exit_code, o.signal) {
            (Some(c), _) => format!("exit {c} in {:.1} s", o.seconds),
            (None, Some(s)) => format!("killed by signal {s} after {:.1} s", o.seconds),
            _ => "no exit status".into(),
        },
    }
}

fn end_lines(out: &mut String, state: &HuntState, commits: &dyn Commits) {
    match &state.end {
        Some(HuntEnd::Found { commit }) => {
            let _ = writeln!(out, "## First bad commit\n");
            // An indented code block: literal, one line.
            let _ = writeln!(
                out,
                "    {} {}",
                one_line(short(commit)),
                one_line(&subject(commits, commit))
            );
            if let Some(c) = commits.info(commit) {
                let _ = writeln!(out, "\n- commit: {}", code(&c.id));
                let _ = writeln!(out, "- author: {}", md(&c.author));
                let _ = writeln!(out, "- date: {}", md(&c.date));
            }
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
            let _ = writeln!(out, "## Not reproduced\n\n{}", md(message));
        }
        Some(HuntEnd::Reproduced { summary } | HuntEnd::Measured { summary }) => {
            let _ = writeln!(out, "## Reproduced\n\n{}", md(summary));
        }
        None => {
            let _ = writeln!(
                out,
                "## In progress\n\n{} verdicts so far.",
                state.verdicts.len()
            );
        }
    }
}

/// The Markdown report of a local command hunt. Text from input (subjects, authors, ids, a
/// run's output) is inert: no HTML, no link or image, no control character
/// ([`super::text`]).
pub fn markdown(
    cfg: &LocalConfig,
    id: &HuntIdentity,
    entries: &[Entry],
    commits: &dyn Commits,
) -> String {
    let state = HuntState::replay(entries);
    let mut out = String::new();
    let _ = writeln!(out, "# firstbad report: {}\n", md(&cfg.name));
    end_lines(&mut out, &state, commits);
    let _ = writeln!(
        out,
        "\n## Test\n\n{} (sh -c, in a checkout of each candidate; timeout {} s; {} job(s)); \
         {} rounds.",
        code(&cfg.test.command),
        cfg.test.timeout_s,
        cfg.test.jobs,
        rounds(entries)
    );
    let _ = writeln!(out, "\n## Runs, in the order they started\n");
    let _ = writeln!(out, "| # | commit | subject | checkout | ended | verdict |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for (i, (commit, job, outcome)) in runs(entries).iter().enumerate() {
        let verdict = state
            .verdicts
            .iter()
            .rev()
            .find(|(c, _, _)| c == commit)
            .map(|(_, v, _)| format!("**{}**", v.as_str()))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {job} | {} | {verdict} |",
            i + 1,
            cell(short(commit)),
            md(&subject(commits, commit)),
            how(outcome),
        );
    }
    let failed: Vec<_> = runs(entries)
        .into_iter()
        .filter_map(|(c, _, o)| o.map(|o| (c, o)))
        .filter(|(_, o)| o.exit_code != Some(0) && !o.cancelled && !o.output_tail.is_empty())
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\n## Last lines of runs that did not exit 0\n");
        for (c, o) in failed {
            let _ = writeln!(
                out,
                "{} ({}, {}):\n",
                code(short(&c)),
                how(&Some(o.clone())),
                code(&o.log.display().to_string())
            );
            // A fenced block is literal; a fence longer than any run of backticks in the
            // output cannot be closed by a line of it.
            let tail: Vec<String> = o
                .output_tail
                .iter()
                .map(|l| one_line(l).into_owned())
                .collect();
            let longest = tail
                .iter()
                .flat_map(|l| l.split(|c| c != '`').map(str::len))
                .max()
                .unwrap_or(0);
            let fence = "`".repeat(longest.max(2) + 1);
            let _ = writeln!(out, "{fence}\n{}\n{fence}", tail.join("\n"));
        }
    }
    let _ = writeln!(out, "\n## git bisect log\n\n```");
    out.push_str(&bisect_log(id, &state, commits));
    let _ = writeln!(out, "```");
    terminal(&out).into_owned()
}

/// The status text of a local command hunt at `now_ms` (Unix milliseconds), for a terminal:
/// text from input holds no control character ([`terminal`]).
pub fn status(cfg: &LocalConfig, id: &HuntIdentity, entries: &[Entry], now_ms: i64) -> String {
    let state = HuntState::replay(entries);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "hunt {}: good {} bad {}; command `{}`",
        cfg.name,
        short(&id.good),
        short(&id.bad),
        cfg.test.command
    );
    match &state.end {
        Some(HuntEnd::Found { commit }) => {
            let _ = writeln!(o, "ended: first bad commit {}", short(commit));
        }
        Some(HuntEnd::OnlySkippedLeft { commits }) => {
            let c: Vec<&str> = commits.iter().map(|c| short(c)).collect();
            let _ = writeln!(o, "ended: only skipped commits left ({})", c.join(", "));
        }
        Some(HuntEnd::NotReproduced { message }) => {
            let _ = writeln!(o, "ended: {}", one_line(message));
        }
        Some(HuntEnd::Reproduced { summary } | HuntEnd::Measured { summary }) => {
            let _ = writeln!(o, "ended: reproduced: {}", one_line(summary));
        }
        None => {}
    }
    let all = runs(entries);
    let _ = writeln!(
        o,
        "{} runs, {} verdicts, {} rounds",
        all.len(),
        state.verdicts.len(),
        rounds(entries)
    );
    if state.end.is_none() {
        // Runs without a result: in progress now, or cut short by an interruption.
        let started_at = |commit: &str| {
            entries.iter().rev().find_map(|e| match &e.event {
                crate::journal::Event::TestStarted { commit: c, .. } if c == commit => {
                    Some(e.at_ms)
                }
                _ => None,
            })
        };
        for (commit, job, outcome) in &all {
            if outcome.is_none() {
                let since = started_at(commit).map_or(0, |at| (now_ms - at) / 1000);
                let _ = writeln!(o, "checkout {job}: {} for {since} s", short(commit));
            }
        }
    }
    terminal(&o).into_owned()
}
