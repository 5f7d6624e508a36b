//! Before the first candidate: which commits of the range cannot change the kernel under test
//! (issue 35), decided once per stage from the endpoints' build inputs and journalled, so that a
//! rerun searches the same range.
//!
//! Both endpoints are built first (the baselines boot them anyway). A file that neither
//! endpoint's build read can become an input of a kernel between them only through a change
//! to a file that one of them read (a new `#include`, a Makefile line), and that commit is a
//! candidate itself; a commit that adds, deletes or renames a file always is one.

use super::build::build_recorded;
use super::Kernels;
use crate::config::{Build, HuntConfig};
use crate::hunt::prelude::{record, HuntRange};
use crate::hunt::{short, HuntError, HuntState};
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
                pruning.commits(&range.bad).count(),
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
            tracing::info!(
                "building the {which} endpoint {} first: what its build reads decides which \
                 commits can change the kernel",
                short(commit)
            );
            build_recorded(journal, state, builder, commit).await?;
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
