//! A commit checked out into the builder's own worktree, never the user's checkout.

use super::*;

/// Removes every linked worktree of `repo_path` checked out under `dir` (their files and the
/// repository's record of them), then `dir` itself: the trees of a series' night once it is
/// measured, or of its hunt once it ended, which nothing reads again. A worktree elsewhere is
/// left alone. Returns how many were removed.
pub fn remove_worktrees_under(repo_path: &Path, dir: &Path) -> Result<usize, BuildError> {
    let Ok(under) = std::fs::canonicalize(dir) else {
        return Ok(0);
    };
    let repo = git2::Repository::open(repo_path)?;
    let mut removed = 0;
    for name in repo.worktrees()?.iter().flatten() {
        let tree = repo.find_worktree(name)?;
        let at = std::fs::canonicalize(tree.path()).unwrap_or_else(|_| tree.path().to_owned());
        if !at.starts_with(&under) {
            continue;
        }
        let mut opts = git2::WorktreePruneOptions::new();
        opts.valid(true).working_tree(true).locked(true);
        tree.prune(Some(&mut opts))?;
        removed += 1;
    }
    std::fs::remove_dir_all(&under).map_err(io("removing the trees' directory"))?;
    Ok(removed)
}

/// Checks `commit` out into `src`, a linked worktree of `repo_path` named `name` (created on
/// first use, detached HEAD; the user's own checkout is never touched). Only files that differ
/// are rewritten; untracked files are kept, as `git checkout` keeps them.
pub fn checkout_detached(
    repo_path: &Path,
    src: &Path,
    name: &str,
    commit: &str,
) -> Result<(), BuildError> {
    let repo = git2::Repository::open(repo_path)?;
    let oid = git2::Oid::from_str(commit)?;
    let target = repo.find_commit(oid)?;
    let admin = repo.path().join("worktrees").join(name);
    if src.join(".git").exists() && !owns(src, &admin) {
        // A checkout copied or moved with its state directory: its `.git` names another
        // worktree (the original's), and libgit2 would check candidates out into the original's
        // files and test a stale tree here (issue 19, finding 5). It is made anew under this
        // directory's own name; the other worktree is left alone (its hunt may be running).
        tracing::warn!(
            "{} belongs to another worktree (a copied or moved state directory?): making it anew",
            src.display()
        );
        std::fs::remove_dir_all(src).map_err(io("removing a copied worktree"))?;
    }
    if !src.join(".git").exists() {
        if let Ok(stale) = repo.find_worktree(name) {
            // Ours only if it was at `src`: a worktree of this name checked out elsewhere
            // belongs to someone else, and pruning it would delete their files.
            let same = |p: &Path| std::fs::canonicalize(p).ok();
            let elsewhere = stale.path().exists() && same(stale.path()) != same(src);
            if elsewhere {
                return Err(BuildError::Io {
                    what: format!(
                        "checking out into {}: the repository's worktree {name:?} is checked \
                         out at {}, which is not this build cache's",
                        src.display(),
                        stale.path().display()
                    ),
                    source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
                });
            }
            let mut opts = git2::WorktreePruneOptions::new();
            opts.valid(true).working_tree(true).locked(true);
            stale.prune(Some(&mut opts))?;
        }
        if src.exists() {
            std::fs::remove_dir_all(src).map_err(io("removing a stale worktree"))?;
        }
        // What an interrupted attempt may have left, which libgit2 neither lists nor prunes:
        // the administrative directory and the branch it was made through (both ours by name).
        if admin.exists() {
            std::fs::remove_dir_all(&admin).map_err(io("removing a stale worktree entry"))?;
        }
        if let Ok(mut b) = repo.find_branch(name, git2::BranchType::Local) {
            b.delete()?;
        }
        // libgit2 adds a worktree on a new branch; create it at the target, then detach
        // and delete the branch so the user's repository keeps no trace but the worktree.
        let branch = repo.branch(name, &target, true)?;
        let mut opts = git2::WorktreeAddOptions::new();
        opts.reference(Some(branch.get()));
        repo.worktree(name, src, Some(&opts))?;
        let wt = git2::Repository::open(src)?;
        wt.set_head_detached(oid)?;
        drop(wt);
        repo.find_branch(name, git2::BranchType::Local)?.delete()?;
    }
    let wt = git2::Repository::open(src)?;
    let target = wt.find_commit(oid)?;
    let mut co = git2::build::CheckoutBuilder::new();
    co.force().remove_untracked(false);
    wt.checkout_tree(target.as_object(), Some(&mut co))?;
    wt.set_head_detached(oid)?;
    Ok(())
}

/// Whether the linked worktree at `src` is the one administered at `admin`: its `.git` file
/// names `admin`, and `admin` names it back.
fn owns(src: &Path, admin: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).ok();
    // A relative path (git's worktree.useRelativePaths) is relative to the file's directory.
    let named = |file: &Path, prefix: &str| {
        let text = std::fs::read_to_string(file).ok()?;
        let p = PathBuf::from(text.trim().strip_prefix(prefix)?.trim());
        Some(file.parent()?.join(p))
    };
    let forward = named(&src.join(".git"), "gitdir:").and_then(|p| canon(&p));
    let back = named(&admin.join("gitdir"), "").and_then(|p| canon(&p));
    forward.is_some() && forward == canon(admin) && back == canon(&src.join(".git"))
}
