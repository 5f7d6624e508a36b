//! Before the first candidate: which commits of the range cannot change the kernel under test
//! (issue 35), decided once per stage from the endpoints' build inputs and journalled, so that a
//! rerun searches the same range.
//!
//! Both endpoints are built first (the baselines boot them anyway). A file that neither
//! endpoint's build read can become an input of a kernel between them only through a change
//! to a file that one of them read (a new `#include`, a Makefile line), and that commit is a
//! candidate itself; a commit that adds, deletes or renames a file always is one.

use super::prelude::{build_recorded, record, HuntRange};
use super::{short, HuntError, HuntState};
use crate::config::{Build, HuntConfig};
use crate::exec::kernel::Kernels;
use crate::history::RangeOptions;
use crate::journal::{BuildOutcome, Event, Journal, PrunedLink, Pruning, RangeInfo};
use std::time::Instant;

/// The range options a journal's range (`None`: one good, one bad, no option) and pruning
/// (`None`: none, or leave it out) stand for: what `firstbad run` searched, for every place
/// that loads the range again.
pub fn range_options(info: Option<&RangeInfo>, pruning: Option<&Pruning>) -> RangeOptions {
    RangeOptions {
        paths: info.map(|i| i.paths.clone()).unwrap_or_default(),
        first_parent: info.is_some_and(|i| i.first_parent),
        unchanged: pruning
            .map(|p| {
                p.links
                    .iter()
                    .map(|l| (l.commit.clone(), l.parent.clone()))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

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
        .commits(&id.bad)
        .map(|l| (l.commit.as_str(), l.reason.as_str()))
        .collect();
    if reasons.is_empty() {
        return Vec::new();
    }
    let Ok(history) = crate::history::History::open(repo) else {
        return Vec::new();
    };
    let goods = state
        .range
        .as_ref()
        .map_or_else(|| vec![id.good.clone()], |r| r.goods.clone());
    // The range as git sees it: unpruned.
    let options = range_options(state.range.as_ref(), None);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::git_for_tests as git;
    use crate::journal::{HuntEnd, HuntIdentity, Verdict};

    // Issue 35: the bisect log of a pruned hunt still ends, in git, on the hunt's answer: the
    // pruned commits git asks for get the verdict the answer implies, said as never booted.
    #[test]
    fn a_pruned_hunt_s_answer_implies_the_verdicts_git_still_asks_for() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        let mut ids = Vec::new();
        for i in 0..7 {
            git(
                dir,
                &["commit", "-q", "--allow-empty", "-m", &format!("c{i}")],
            );
            ids.push(git(dir, &["rev-parse", "HEAD"]));
        }
        // c2, c3 and c5 change nothing the kernel is built from; c4 is the culprit, found by
        // testing c1 (good) and c4 (bad) among c1, c4, c6.
        let link = |i: usize| PrunedLink {
            commit: ids[i].clone(),
            parent: ids[i - 1].clone(),
            nth: 0,
            reason: "touches only drivers/x.c (not built)".into(),
        };
        let mut state = HuntState {
            pruned: Some(Pruning {
                inputs: 1,
                links: vec![link(2), link(3), link(5)],
                note: None,
                seconds: 0.0,
            }),
            end: Some(HuntEnd::Found {
                commit: ids[4].clone(),
            }),
            ..HuntState::default()
        };
        state.verdicts = vec![
            (ids[1].clone(), Verdict::Good, "measured".into()),
            (ids[4].clone(), Verdict::Bad, "measured".into()),
        ];
        let id = HuntIdentity {
            good: ids[0].clone(),
            bad: ids[6].clone(),
            fingerprint: String::new(),
            meaning: Default::default(),
        };
        let implied = implied_verdicts(dir, &id, &state);
        assert!(
            !implied.is_empty(),
            "git asks for a pruned commit next to c4"
        );
        for (c, v, why) in &implied {
            let i = ids
                .iter()
                .position(|x| x == c)
                .expect("a commit of the range");
            assert!([2, 3, 5].contains(&i), "c{i} was not pruned");
            assert_eq!(*v, if i >= 4 { Verdict::Bad } else { Verdict::Good });
            assert!(why.starts_with("implied, not booted"), "{why}");
        }
        // With them, the unpruned search ends on the culprit.
        let history = crate::history::History::open(dir).expect("open");
        let range = history
            .range(&ids[6], &[ids[0].as_str()], &Default::default())
            .expect("range");
        let mut b = crate::search::Bisection::new(&range.dag, &ids[6], &[ids[0].as_str()])
            .expect("bisection");
        for (c, v, _) in state.verdicts.iter().chain(&implied) {
            b.mark(c, *v).expect("mark");
        }
        assert_eq!(b.next(), crate::search::Next::Found(ids[4].clone()));
    }
}
