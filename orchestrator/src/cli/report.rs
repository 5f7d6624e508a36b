//! `firstbad report` and `firstbad log`: every format from one report model; a chained hunt's
//! two stages in one report where the format holds two.

use super::{chain_of, load_file, open_state, step_stages, write_or_print, Format};
use firstbad::config::{HuntFile, LocalConfig};
use firstbad::engine;
use firstbad::error::exit_code;
use firstbad::hunt::{self, journal_path, HuntState};
use firstbad::journal::Journal;
use firstbad::report::{self, Commits};
use std::path::{Path, PathBuf};

/// Prints (or writes to `output`) the report in `format`, or the bisect log for `None`.
pub(super) fn report_cmd(
    hunt: &Path,
    format: Option<Format>,
    output: Option<PathBuf>,
) -> anyhow::Result<u8> {
    let file = match load_file(hunt) {
        Ok(f) => f,
        Err(code) => return Ok(code),
    };
    // A metric command hunt's journal is a kernel hunt's, runs for boots: the same reports.
    let Some(ctx) = firstbad::report::Context::of(&file, false) else {
        let HuntFile::Local(cfg) = &file else {
            unreachable!("every kernel hunt is measured")
        };
        return local_report_cmd(hunt, cfg, format, output);
    };
    let (repo, state_dir) = (file.repo(), file.state_dir());
    let Some((id, state)) = open_state(state_dir, "")? else {
        return Ok(no_journal(ctx.name, state_dir, hunt));
    };
    let text = render(&ctx, repo, &id, &state, format);
    let text = with_steps(text, &ctx, repo, state_dir, format)?;
    let source = match chain_of(&file) {
        Some(chain) => open_state(state_dir, engine::chain::SOURCE_STAGE)?
            .map(|(sid, sstate)| render(&ctx, &chain.repo, &sid, &sstate, format)),
        None => None,
    };
    let Some(source) = source else {
        return write_or_print(&text, output);
    };
    // A chained hunt: one report of both stages where the format can hold two; the source
    // stage's, which names the commit, where it cannot.
    let text = match format {
        Some(Format::Markdown) => format!(
            "# Stage 1 of 2: prebuilt kernels\n\n{text}\n# Stage 2 of 2: the source between \
             the last good and the first bad kernel\n\n{source}"
        ),
        Some(Format::Json) => format!(
            "{{\"stages\": {{\"prebuilt\": {}, \"source\": {}}}}}\n",
            text.trim_end(),
            source.trim_end()
        ),
        // The bisect log: only the stage that bisected git revisions has one.
        None | Some(Format::Email) | Some(Format::Html) => source,
    };
    write_or_print(&text, output)
}

/// `text`, the report of a run's first stage, with those of its further steps (a regression of
/// several, issue 31): a section each in Markdown, a `further_steps` list in JSON. The bisect
/// log stays the first stage's (the log of its verdicts, which git replays over its range);
/// email and HTML, one page for one culprit, say where the other reports are.
fn with_steps(
    text: String,
    ctx: &report::Context,
    repo: &Path,
    state_dir: &Path,
    format: Option<Format>,
) -> anyhow::Result<String> {
    let steps = step_stages(state_dir)?;
    if steps.is_empty() {
        return Ok(text);
    }
    let together = open_state(state_dir, hunt::steps::TOGETHER)?
        .and_then(|(id, state)| report::together(&state, &id.bad));
    let mut text = text;
    match format {
        Some(Format::Markdown) => {
            for (n, id, _, state) in &steps {
                text += &format!(
                    "\n# Step {n}: the part of the regression from {} to {}\n\n{}",
                    hunt::short(&id.good),
                    hunt::short(&id.bad),
                    render(ctx, repo, id, state, format)
                );
            }
            if let Some(r) = &together {
                text += &format!(
                    "\n# The culprits reverted together\n\n- recovers: {}\n- {}\n",
                    r.recovers, r.summary
                );
            }
        }
        Some(Format::Json) => {
            let mut whole: serde_json::Value = serde_json::from_str(&text)?;
            let further = steps
                .iter()
                .map(|(_, id, _, state)| {
                    serde_json::from_str(&render(ctx, repo, id, state, format))
                })
                .collect::<Result<Vec<serde_json::Value>, _>>()?;
            whole["further_steps"] = serde_json::Value::Array(further);
            if let Some(r) = &together {
                whole["reverted_together"] = serde_json::to_value(r)?;
            }
            text = serde_json::to_string_pretty(&whole)? + "\n";
        }
        None => {}
        Some(Format::Email) | Some(Format::Html) => eprintln!(
            "firstbad: this run found {} further step(s) of the regression; this report is the \
             first step's: `--format markdown` or `json` has every step",
            steps.len()
        ),
    }
    Ok(text)
}

/// Says that `hunt` has not run yet; the exit code.
fn no_journal(name: &str, state_dir: &Path, hunt: &Path) -> u8 {
    eprintln!(
        "firstbad: {name}: no journal in {}: run `firstbad run {}` first",
        state_dir.display(),
        hunt.display()
    );
    exit_code::BAD_INPUT
}

/// `firstbad report --bundle DIR`: the reproduce bundle of a kernel hunt's culprit.
pub(super) fn bundle_cmd(hunt: &Path, dir: &Path) -> anyhow::Result<u8> {
    let file = match load_file(hunt) {
        Ok(f) => f,
        Err(code) => return Ok(code),
    };
    let HuntFile::Kernel(cfg) = &file else {
        eprintln!(
            "firstbad: {}: a reproduce bundle is made for a kernel hunt; a command hunt's \
             culprit is rerun with `firstbad run` on its hunt file",
            hunt.display()
        );
        return Ok(exit_code::BAD_INPUT);
    };
    let ctx = firstbad::report::Context::of(&file, false).expect("a kernel hunt is measured");
    let Some((id, state)) = open_state(&cfg.state_dir, "")? else {
        return Ok(no_journal(&cfg.name, &cfg.state_dir, hunt));
    };
    let Some(firstbad::journal::HuntEnd::Found { commit }) = &state.end else {
        eprintln!(
            "firstbad: {}: no first bad commit yet: a bundle reproduces a culprit against its \
             parent (`firstbad status {}`)",
            cfg.name,
            hunt.display()
        );
        return Ok(exit_code::BAD_INPUT);
    };
    // The parent the re-test measured, else the culprit's first parent in git.
    let parent = match state.retested_parent(commit) {
        Some(p) => p.to_owned(),
        None => {
            let repo = git2::Repository::open(&cfg.repo)?;
            let oid = git2::Oid::from_str(commit)?;
            let parent = repo.find_commit(oid)?.parent_id(0)?;
            parent.to_string()
        }
    };
    let email = render(&ctx, &cfg.repo, &id, &state, Some(Format::Email));
    let tar = match report::bundle::write(dir, cfg, &parent, commit, &email) {
        Ok(tar) => tar,
        Err(e) if e.is_bad_input() => {
            eprintln!("firstbad: --bundle {}: {e}", dir.display());
            return Ok(exit_code::BAD_INPUT);
        }
        Err(e) => return Err(e.into()),
    };
    eprintln!(
        "firstbad: wrote {} and {}: `{}/{}` boots {} against {}",
        dir.display(),
        tar.display(),
        dir.display(),
        report::bundle::SCRIPT,
        hunt::short(commit),
        hunt::short(&parent)
    );
    Ok(exit_code::OK)
}

/// A measured hunt's report in `format` (the bisect log for `None`).
pub(super) fn render(
    ctx: &report::Context,
    repo: &Path,
    id: &firstbad::journal::HuntIdentity,
    state: &HuntState,
    format: Option<Format>,
) -> String {
    let commits = report::GitCommits::open(repo);
    // A pruned hunt's log and reports also carry the verdicts its answer implies for the
    // pruned commits git would ask for, marked as never booted.
    let implied = hunt::prune::implied_verdicts(repo, id, state);
    let with_implied;
    let state = if implied.is_empty() {
        state
    } else {
        let mut s = state.clone();
        s.verdicts.extend(implied);
        with_implied = s;
        &with_implied
    };
    match format {
        None => report::bisect_log(id, state, &commits),
        Some(Format::Markdown) => report::markdown(ctx.name, ctx.metric, id, state, &commits),
        Some(Format::Email) => {
            report::email::email(&report::Report::build(ctx, id, state, &commits))
        }
        Some(Format::Json) => report::Report::build(ctx, id, state, &commits).json() + "\n",
        Some(Format::Html) => {
            let range = commits.range(&id.good, &id.bad);
            report::html::html(
                &report::Report::build(ctx, id, state, &commits),
                range.as_deref(),
            )
        }
    }
}

/// [`report_cmd`] for a local command hunt: the bisect log and the Markdown report.
fn local_report_cmd(
    hunt: &Path,
    cfg: &LocalConfig,
    format: Option<Format>,
    output: Option<PathBuf>,
) -> anyhow::Result<u8> {
    let path = journal_path(&cfg.state_dir);
    let opened = if path.exists() {
        let j = Journal::open_read_only(&path)?;
        j.identity()?
            .map(|id| j.events().map(|e| (id, e)))
            .transpose()?
    } else {
        None
    };
    let Some((id, entries)) = opened else {
        return Ok(no_journal(&cfg.name, &cfg.state_dir, hunt));
    };
    let commits = report::GitCommits::open(&cfg.repo);
    let text = match format {
        None => report::bisect_log(&id, &HuntState::replay(&entries), &commits),
        Some(Format::Markdown) => report::local::markdown(cfg, &id, &entries, &commits),
        Some(_) => {
            eprintln!(
                "firstbad: {}: a hunt judged by exit status has Markdown reports and the \
                 bisect log (`firstbad log`); email, json and html show samples, which a \
                 hunt with [test] metric has",
                hunt.display()
            );
            return Ok(exit_code::BAD_INPUT);
        }
    };
    write_or_print(&text, output)
}
