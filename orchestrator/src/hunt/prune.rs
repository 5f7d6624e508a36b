//! What a pruned range means once it is journalled (issue 35): the range options it stands
//! for, for every place that loads the range again, and the verdicts `git bisect` would still
//! need. The pruning itself is decided, with builds, by [`crate::engine`].

use super::HuntState;
use crate::history::RangeOptions;
use crate::journal::{Pruning, RangeInfo};

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
    use crate::journal::{HuntEnd, HuntIdentity, PrunedLink, Verdict};

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
