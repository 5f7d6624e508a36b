//! Commit metadata for reports: subjects, authors, diffstats and the range's commits, from git
//! ([`GitCommits`]) or from whatever else implements [`Commits`].

use crate::history::{CommitInfo, History};
use serde::Serialize;
use std::path::Path;

/// Commit metadata lookup; unknown commits get their id as subject.
pub trait Commits {
    /// Subject, author and date of a commit.
    fn info(&self, id: &str) -> Option<CommitInfo>;
    /// What the commit changes against its first parent (`git show --stat`).
    fn diffstat(&self, _id: &str) -> Option<Diffstat> {
        None
    }
    /// The commits of `good..bad`, oldest first (bad last), for drawing the bisection path.
    fn range(&self, _good: &str, _bad: &str) -> Option<Vec<String>> {
        None
    }
}

/// Commit metadata from a git repository.
pub struct GitCommits {
    history: Option<History>,
    repo: Option<git2::Repository>,
}

impl GitCommits {
    /// Opens the repository at `path`; a missing repository gives a lookup that knows no
    /// commit (reports still render, with ids only).
    pub fn open(path: &Path) -> GitCommits {
        GitCommits {
            history: History::open(path).ok(),
            repo: git2::Repository::open(path).ok(),
        }
    }
}

impl Commits for GitCommits {
    fn info(&self, id: &str) -> Option<CommitInfo> {
        self.history.as_ref()?.info(id).ok()
    }

    fn range(&self, good: &str, bad: &str) -> Option<Vec<String>> {
        let repo = self.repo.as_ref()?;
        let mut walk = repo.revwalk().ok()?;
        walk.push(git2::Oid::from_str(bad).ok()?).ok()?;
        walk.hide(git2::Oid::from_str(good).ok()?).ok()?;
        walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
            .ok()?;
        walk.map(|o| o.ok().map(|o| o.to_string())).collect()
    }

    fn diffstat(&self, id: &str) -> Option<Diffstat> {
        let repo = self.repo.as_ref()?;
        let commit = repo.find_commit(git2::Oid::from_str(id).ok()?).ok()?;
        let tree = commit.tree().ok()?;
        let parent_tree = commit.parent(0).ok().and_then(|p| p.tree().ok());
        let diff = repo
            .diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), None)
            .ok()?;
        let mut files = Vec::new();
        for i in 0..diff.deltas().len() {
            let Ok(Some(patch)) = git2::Patch::from_diff(&diff, i) else {
                continue;
            };
            let (_, insertions, deletions) = patch.line_stats().ok()?;
            let delta = patch.delta();
            let path = delta
                .new_file()
                .path()
                .or_else(|| delta.old_file().path())
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            files.push(FileChange {
                path,
                insertions,
                deletions,
            });
        }
        Some(Diffstat {
            insertions: files.iter().map(|f| f.insertions).sum(),
            deletions: files.iter().map(|f| f.deletions).sum(),
            files,
        })
    }
}

/// What a commit changes: `git show --stat`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diffstat {
    /// Changed files.
    pub files: Vec<FileChange>,
    /// Lines added in all files.
    pub insertions: usize,
    /// Lines removed in all files.
    pub deletions: usize,
}

/// One changed file of a [`Diffstat`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileChange {
    /// Path in the tree.
    pub path: String,
    /// Lines added.
    pub insertions: usize,
    /// Lines removed.
    pub deletions: usize,
}
