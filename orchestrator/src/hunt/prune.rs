//! Before the first candidate: which commits of the range cannot change the kernel under test
//! (issue 35), decided once per stage from the endpoints' build inputs and journalled, so that a
//! rerun searches the same range.
//!
//! Both endpoints are built first (the baselines boot them anyway). A file that neither
//! endpoint's build read can become an input of a kernel between them only through a change
//! to a file that one of them read (a new `#include`, a Makefile line), and that commit is a
//! candidate itself; a commit that adds, deletes or renames a file always is one.

use super::prelude::{record, HuntRange};
use super::{short, HuntError, HuntState};
use crate::config::{Build, HuntConfig};
use crate::exec::kernel::Kernels;
use crate::journal::{BuildOutcome, Event, Journal, PrunedLink, Pruning};
use std::time::Instant;

/// Decides the stage's pruning if its journal has none yet, journals it, and applies the
/// journalled one to `range`.
pub(crate) async fn prune_range(
    cfg: &HuntConfig,
    range: &mut HuntRange,
    builder: &Kernels,
    journal: &Journal,
    state: &mut HuntState,
) -> Result<(), HuntError> {
    if state.pruned.is_none() {
        let pruning = decide(cfg, range, builder, journal, state).await?;
        match (&pruning.note, pruning.links.is_empty()) {
            (Some(note), _) => tracing::info!("{note}"),
            (None, true) => tracing::info!(
                "every commit of the range changes a file the kernel is built from ({} files, \
                 {:.1} s): none left out",
                pruning.inputs,
                pruning.seconds
            ),
            (None, false) => tracing::info!(
                "{} commit(s) left out: they change no file the kernel is built from ({} \
                 files read by the endpoints' builds; {:.1} s); `firstbad report` lists them",
                pruning.commits().count(),
                pruning.inputs,
                pruning.seconds
            ),
        }
        record(journal, state, Event::Pruned(pruning))?;
    }
    let pruning = state.pruned.as_ref().expect("journalled above or before");
    range.prune(pruning)
}

fn not_pruned(why: impl Into<String>) -> Pruning {
    Pruning {
        note: Some(why.into()),
        ..Pruning::default()
    }
}

async fn decide(
    cfg: &HuntConfig,
    range: &HuntRange,
    builder: &Kernels,
    journal: &Journal,
    state: &mut HuntState,
) -> Result<Pruning, HuntError> {
    let Build::Source(build) = &cfg.build else {
        return Ok(not_pruned(
            "not pruned: prebuilt kernels are not built from source",
        ));
    };
    if !build.prune {
        return Ok(not_pruned(
            "not pruned: [build] prune = false or --no-prune; every commit is a candidate",
        ));
    }
    if !state.boots.is_empty() || !state.verdicts.is_empty() {
        // A journal of a firstbad from before pruning, resumed: its candidates stay.
        return Ok(not_pruned(
            "not pruned: this hunt had boots before firstbad pruned ranges; its candidates \
             stay as they were",
        ));
    }
    let Kernels::Source(kb) = builder else {
        return Ok(not_pruned("not pruned: no source builder"));
    };
    let good = range.goods[0].clone();
    for (commit, which) in [(&good, "good"), (&range.bad, "bad")] {
        if !state.builds.contains_key(commit.as_str()) {
            record(
                journal,
                state,
                Event::BuildStarted {
                    commit: commit.clone(),
                },
            )?;
            tracing::info!(
                "building the {which} endpoint {} first: what its build reads decides which \
                 commits can change the kernel",
                short(commit)
            );
            let outcome = tracing::Instrument::instrument(
                crate::exec::Builder::build(builder, commit),
                tracing::info_span!("build", commit = short(commit)),
            )
            .await?;
            record(
                journal,
                state,
                Event::BuildFinished {
                    commit: commit.clone(),
                    outcome,
                },
            )?;
        }
        if let Some(BuildOutcome::Failed { .. }) = state.builds.get(commit.as_str()) {
            return Ok(not_pruned(format!(
                "not pruned: the {which} endpoint {} does not build",
                short(commit)
            )));
        }
    }
    let started = Instant::now();
    let (Some(g), Some(b)) = (kb.0.inputs(&good), kb.0.inputs(&range.bad)) else {
        return Ok(not_pruned(
            "not pruned: the endpoints' build inputs are not recorded beside their kernels",
        ));
    };
    let inputs = g.union(b);
    let repo = cfg.repo.clone();
    let (bad, goods) = (range.bad.clone(), range.goods.clone());
    let first_parent = range.info.as_ref().is_some_and(|i| i.first_parent);
    let n = inputs.files.len();
    let links = tokio::task::spawn_blocking(move || {
        let history = crate::history::History::open(&repo)?;
        history.unchanged_links(&bad, &goods, first_parent, &inputs)
    })
    .await
    .expect("pruning does not panic")
    .map_err(|e| HuntError::Infrastructure(format!("pruning the range: {e}")))?;
    Ok(Pruning {
        inputs: n,
        links: links
            .into_iter()
            .map(|u| PrunedLink {
                reason: u.reason(),
                commit: u.commit,
                parent: u.parent,
                nth: u.nth,
            })
            .collect(),
        note: None,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The verdicts `git bisect` still needs, after a pruned hunt's own, to reach its answer:
/// each a pruned commit git would ask for, good or bad as the answer implies (bad when it
/// descends from the culprit), with why it was never booted. `firstbad log` writes them as
/// commented verdicts so that `git bisect replay`, which knows nothing of pruning, ends on
/// the same first bad commit. Empty unless the hunt pruned and found its culprit.
pub fn implied_verdicts(
    repo: &std::path::Path,
    id: &crate::journal::HuntIdentity,
    state: &HuntState,
) -> Vec<(String, crate::journal::Verdict, String)> {
    use crate::journal::{HuntEnd, Verdict};
    use crate::search::{Bisection, Next};
    let (Some(pruning), Some(HuntEnd::Found { commit: culprit })) = (&state.pruned, &state.end)
    else {
        return Vec::new();
    };
    let reasons: std::collections::HashMap<&str, &str> = pruning
        .commits()
        .map(|l| (l.commit.as_str(), l.reason.as_str()))
        .collect();
    if reasons.is_empty() {
        return Vec::new();
    }
    let Ok(history) = crate::history::History::open(repo) else {
        return Vec::new();
    };
    let (goods, options) = match &state.range {
        Some(r) => (
            r.goods.clone(),
            crate::history::RangeOptions {
                paths: r.paths.clone(),
                first_parent: r.first_parent,
                ..Default::default()
            },
        ),
        None => (vec![id.good.clone()], Default::default()),
    };
    let Ok(range) = history.range(&id.bad, &goods, &options) else {
        return Vec::new();
    };
    let Ok(mut b) = Bisection::new(&range.dag, &id.bad, &goods) else {
        return Vec::new();
    };
    for (c, v, _) in &state.verdicts {
        let _ = b.mark(c, *v);
    }
    let mut out = Vec::new();
    while let Next::Test(x) = b.next() {
        let Some(reason) = reasons.get(x.as_str()) else {
            break;
        };
        let bad = x == *culprit || history.descends_from(&x, culprit);
        let v = if bad { Verdict::Bad } else { Verdict::Good };
        if b.mark(&x, v).is_err() || out.len() > range.dag.len() {
            break;
        }
        out.push((
            x,
            v,
            format!(
                "implied, not booted: it changes no file the kernel is built from ({reason}), \
                 so it is {} as the answer makes it",
                v.as_str()
            ),
        ));
    }
    out
}
