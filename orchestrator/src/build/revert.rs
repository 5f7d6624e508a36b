//! A confirmed culprit reverted on top of the bad endpoint (issue 34): what a maintainer asks
//! first ("does reverting it bring the speed back?") and KernelCI's legacy bisection checked
//! (the revert on top passing three times).
//!
//! The revert is git's (`git revert --no-commit <culprit>` on top of bad, `-m 1` for a merge)
//! made in memory by libgit2 and kept as a commit in the repository's object store: no
//! checkout, branch or ref of the user's is touched, and the builder checks it out into its
//! own worktree like any candidate, so its kernel carries its own id in its release string.
//! The commit is a function of the two commits alone (its author, committer and dates are
//! fixed from the bad endpoint), so a rerun that makes it again makes the same id.

use std::path::Path;

pub use crate::journal::RevertMade;

/// The person (and date) of every revert commit firstbad makes.
const NAME: &str = "firstbad";
const EMAIL: &str = "firstbad@localhost";

/// Reverts `culprit` on top of `onto` in the repository at `repo`, as
/// `git revert --no-commit` would in a checkout of `onto`.
pub fn revert_on_top(repo: &Path, culprit: &str, onto: &str) -> RevertMade {
    revert_all_on_top(repo, &[culprit], onto)
}

/// The reverter of a hunt over the repository at `repo`: the culprits it is given reverted
/// together on top of a commit ([`revert_all_on_top`]).
pub fn reverter(repo: &Path) -> impl Fn(&[String], &str) -> RevertMade + Send {
    let repo = repo.to_owned();
    move |culprits, onto| {
        let culprits: Vec<&str> = culprits.iter().map(String::as_str).collect();
        revert_all_on_top(&repo, &culprits, onto)
    }
}

/// Reverts every one of `culprits` on top of `onto`, newest first (a culprit that descends
/// from another is reverted before it, as `git revert` of a range does), each a commit of its
/// own on the last: the last is the revert of them all. What the issue of several culprits asks
/// of them together; one culprit is [`revert_on_top`]. A revert that conflicts names its files;
/// one that changes nothing is passed over, and all of them changing nothing is
/// [`RevertMade::Empty`].
pub fn revert_all_on_top(repo: &Path, culprits: &[&str], onto: &str) -> RevertMade {
    match try_revert(repo, culprits, onto) {
        Ok(made) => made,
        Err(e) => RevertMade::Failed {
            error: e.message().to_owned(),
        },
    }
}

fn try_revert(repo: &Path, culprits: &[&str], onto: &str) -> Result<RevertMade, git2::Error> {
    let repo = git2::Repository::open(repo)?;
    let onto = repo.find_commit(git2::Oid::from_str(onto)?)?;
    let mut culprits = culprits
        .iter()
        .map(|c| repo.find_commit(git2::Oid::from_str(c)?))
        .collect::<Result<Vec<_>, _>>()?;
    // Newest first: a descendant before its ancestor (their order otherwise as given).
    let mut i = 0;
    while i < culprits.len() {
        let later = (i + 1..culprits.len())
            .find(|&j| repo.graph_descendant_of(culprits[j].id(), culprits[i].id()) == Ok(true));
        match later {
            Some(j) => {
                let c = culprits.remove(j);
                culprits.insert(i, c);
            }
            None => i += 1,
        }
    }
    let when = onto.committer().when();
    let sig = git2::Signature::new(NAME, EMAIL, &when)?;
    let mut top = onto.clone();
    for culprit in &culprits {
        // A merge is reverted against its first parent, the line a first-parent hunt walks.
        let mainline = if culprit.parent_count() > 1 { 1 } else { 0 };
        let mut index = repo.revert_commit(culprit, &top, mainline, None)?;
        if index.has_conflicts() {
            let mut files: Vec<String> = index
                .conflicts()?
                .filter_map(|c| c.ok())
                .filter_map(|c| c.our.or(c.their).or(c.ancestor))
                .map(|e| String::from_utf8_lossy(&e.path).into_owned())
                .collect();
            files.sort();
            files.dedup();
            return Ok(RevertMade::Conflicts { files });
        }
        let tree = repo.find_tree(index.write_tree_to(&repo)?)?;
        if tree.id() == top.tree_id() {
            continue;
        }
        let subject = culprit.summary().unwrap_or("");
        let message = format!(
            "Revert \"{subject}\"\n\nThis reverts commit {}.\n\nMade by firstbad on top of {} to \
             measure how much of the regression reverting it recovers.\n",
            culprit.id(),
            onto.id()
        );
        // No ref is updated: the commit lives in the object store, where the builder finds it.
        let id = repo.commit(None, &sig, &sig, &message, &tree, &[&top])?;
        top = repo.find_commit(id)?;
    }
    if top.id() == onto.id() {
        return Ok(RevertMade::Empty);
    }
    Ok(RevertMade::Applied {
        revert: top.id().to_string(),
    })
}

impl RevertMade {
    /// What it gave, for a person (`onto` and `culprit` as a person reads them).
    pub fn describe(&self, culprit: &str, onto: &str) -> String {
        match self {
            RevertMade::Applied { revert } => {
                format!("{culprit} reverted on top of {onto} as {revert}")
            }
            RevertMade::Conflicts { files } => format!(
                "reverting {culprit} on top of {onto} does not apply cleanly: {} file(s) in \
                 conflict ({}); nothing was built or booted",
                files.len(),
                files.iter().take(8).cloned().collect::<Vec<_>>().join(", ")
            ),
            RevertMade::Empty => format!(
                "reverting {culprit} on top of {onto} changes nothing: {onto} no longer has its \
                 change; nothing was built or booted"
            ),
            RevertMade::Failed { error } => {
                format!("git could not revert {culprit} on top of {onto}: {error}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository of commits that each write `files` (path, content) on top of the last.
    fn history(dir: &Path, commits: &[&[(&str, &str)]]) -> Vec<String> {
        let repo = git2::Repository::init(dir).unwrap();
        let sig = git2::Signature::new("t", "t@t", &git2::Time::new(1_700_000_000, 0)).unwrap();
        let mut ids: Vec<String> = Vec::new();
        for (i, files) in commits.iter().enumerate() {
            for (path, content) in *files {
                std::fs::write(dir.join(path), content).unwrap();
            }
            let mut index = repo.index().unwrap();
            index
                .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
                .unwrap();
            index.write().unwrap();
            let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
            let parent = ids
                .last()
                .map(|p| repo.find_commit(git2::Oid::from_str(p).unwrap()).unwrap());
            let parents: Vec<&git2::Commit> = parent.iter().collect();
            let id = repo
                .commit(Some("HEAD"), &sig, &sig, &format!("c{i}"), &tree, &parents)
                .unwrap();
            ids.push(id.to_string());
        }
        ids
    }

    /// Real git, real files: the revert applies on top of a later commit, leaves the user's
    /// HEAD, index and files as they were, and is the same commit when made again.
    #[test]
    fn a_revert_on_top_is_a_commit_of_its_own_and_leaves_the_checkout_alone() {
        let dir = tempfile::tempdir().unwrap();
        let ids = history(
            dir.path(),
            &[
                &[("a", "1\n"), ("b", "x\n")],
                &[("a", "2\n")],
                &[("b", "y\n")],
            ],
        );
        let made = revert_on_top(dir.path(), &ids[1], &ids[2]);
        let RevertMade::Applied { revert } = &made else {
            panic!("{made:?}")
        };
        let repo = git2::Repository::open(dir.path()).unwrap();
        let commit = repo
            .find_commit(git2::Oid::from_str(revert).unwrap())
            .unwrap();
        assert_eq!(commit.parent_id(0).unwrap().to_string(), ids[2]);
        let tree = commit.tree().unwrap();
        let blob = |name: &str| {
            let e = tree.get_name(name).unwrap();
            let b = repo.find_blob(e.id()).unwrap();
            String::from_utf8(b.content().to_vec()).unwrap()
        };
        assert_eq!((blob("a"), blob("b")), ("1\n".into(), "y\n".into()));
        assert_eq!(repo.head().unwrap().target().unwrap().to_string(), ids[2]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a")).unwrap(),
            "2\n"
        );
        assert!(
            repo.statuses(None).unwrap().is_empty(),
            "the checkout is clean"
        );
        assert_eq!(revert_on_top(dir.path(), &ids[1], &ids[2]), made);
    }

    /// Two culprits reverted together on top of a later commit: one commit whose tree has
    /// both changes undone and the later one kept, the same whatever order they are named in,
    /// its parents the revert of the newer and then `onto`.
    #[test]
    fn several_culprits_revert_newest_first_into_one_commit() {
        let dir = tempfile::tempdir().unwrap();
        let ids = history(
            dir.path(),
            &[
                &[("a", "1\n"), ("b", "x\n"), ("c", "p\n")],
                &[("a", "2\n")],
                &[("b", "y\n")],
                &[("c", "q\n")],
            ],
        );
        let made = revert_all_on_top(dir.path(), &[&ids[1], &ids[2]], &ids[3]);
        assert_eq!(
            revert_all_on_top(dir.path(), &[&ids[2], &ids[1]], &ids[3]),
            made
        );
        let RevertMade::Applied { revert } = &made else {
            panic!("{made:?}")
        };
        let repo = git2::Repository::open(dir.path()).unwrap();
        let top = repo
            .find_commit(git2::Oid::from_str(revert).unwrap())
            .unwrap();
        let tree = top.tree().unwrap();
        let blob = |name: &str| {
            let b = repo.find_blob(tree.get_name(name).unwrap().id()).unwrap();
            String::from_utf8(b.content().to_vec()).unwrap()
        };
        assert_eq!(
            (blob("a"), blob("b"), blob("c")),
            ("1\n".into(), "x\n".into(), "q\n".into())
        );
        let first = top.parent(0).unwrap();
        assert!(
            first.message().unwrap().contains(&ids[2]),
            "the newer first"
        );
        assert_eq!(first.parent_id(0).unwrap().to_string(), ids[3]);
        // One of them alone is the single revert.
        assert_eq!(
            revert_all_on_top(dir.path(), &[&ids[1]], &ids[3]),
            revert_on_top(dir.path(), &ids[1], &ids[3])
        );
    }

    /// A later commit that rewrote the culprit's lines: a conflict, named by its file; a later
    /// commit that undid it: nothing to revert.
    #[test]
    fn a_revert_that_does_not_apply_names_its_files_and_an_undone_change_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let ids = history(
            dir.path(),
            &[
                &[("a", "1\n")],
                &[("a", "2\n")],
                &[("a", "3\n")],
                &[("a", "1\n")],
            ],
        );
        assert_eq!(
            revert_on_top(dir.path(), &ids[1], &ids[2]),
            RevertMade::Conflicts {
                files: vec!["a".into()]
            }
        );
        // On top of a commit that undid the change, the revert changes nothing.
        let dir3 = tempfile::tempdir().unwrap();
        let ids3 = history(
            dir3.path(),
            &[
                &[("a", "1\n"), ("b", "1\n")],
                &[("a", "2\n")],
                &[("a", "1\n")],
            ],
        );
        assert_eq!(
            revert_on_top(dir3.path(), &ids3[1], &ids3[2]),
            RevertMade::Empty
        );
        assert!(matches!(
            revert_on_top(dir.path(), &"0".repeat(40), &ids[2]),
            RevertMade::Failed { .. }
        ));
    }
}
