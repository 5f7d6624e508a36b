//! A metric command hunt's builder: each candidate checked out into a tree of its own under
//! `<state_dir>/trees/` and `[test] build` run there once.

use super::super::process;
use super::{last_lines, FAILED_LINES};
use crate::build::checkout_detached;
use crate::config::{LocalConfig, MeasureConfig};
use crate::exec::{Builder, Task};
use crate::hunt::prelude::content_hash;
use crate::hunt::{short, HuntError};
use crate::journal::BuildOutcome;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Checks each candidate out into a tree of its own and builds it there (shared with the
/// blocking thread of each build).
pub(super) struct TreeBuilder(Arc<Trees>);

/// Where the trees and build logs live, and the build.
struct Trees {
    repo: PathBuf,
    trees: PathBuf,
    logs: PathBuf,
    /// Keys the worktrees' names (global to the repository) by the state directory.
    key: String,
    /// The repository's `.git/worktrees/`.
    worktrees: PathBuf,
    build: Option<String>,
    timeout: Duration,
}

/// Where the trees of a hunt in `state_dir` are.
pub(super) fn trees_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("trees")
}

impl TreeBuilder {
    pub(super) fn new(
        cfg: &LocalConfig,
        m: &MeasureConfig,
        state_dir: &Path,
    ) -> Result<TreeBuilder, HuntError> {
        let repo = std::fs::canonicalize(&cfg.repo)
            .map_err(|e| HuntError::BadInput(format!("hunt.repo {}: {e}", cfg.repo.display())))?;
        let state_dir = std::fs::canonicalize(state_dir)
            .map_err(|e| HuntError::BadInput(format!("state dir {}: {e}", state_dir.display())))?;
        for dir in ["trees", "builds", "runs"] {
            std::fs::create_dir_all(state_dir.join(dir)).map_err(|e| {
                HuntError::Infrastructure(format!(
                    "cannot create {}/{dir}: {e}",
                    state_dir.display()
                ))
            })?;
        }
        let worktrees = git2::Repository::open(&repo)
            .map_err(|e| HuntError::BadInput(format!("hunt.repo {}: {e}", repo.display())))?
            .path()
            .join("worktrees");
        Ok(TreeBuilder(Arc::new(Trees {
            repo,
            worktrees,
            trees: trees_dir(&state_dir),
            logs: state_dir.join("builds"),
            key: content_hash(state_dir.to_string_lossy().as_bytes()),
            build: m.build.clone(),
            timeout: Duration::from_secs(m.build_timeout_s),
        })))
    }
}

impl Trees {
    /// Checks `commit` out into its tree and runs the build there.
    fn build_blocking(&self, commit: &str) -> Result<BuildOutcome, crate::build::BuildError> {
        let tree = self.trees.join(short(commit));
        let name = format!("firstbad-tree-{}-{}", self.key, short(commit));
        // A build killed with firstbad (kill -9) leaves the worktree's index locked; the state
        // directory's lock makes this run its only user.
        let stale = self.worktrees.join(&name).join("index.lock");
        if stale.exists() {
            let _ = std::fs::remove_file(&stale);
        }
        checkout_detached(&self.repo, &tree, &name, commit)?;
        let log = self.logs.join(format!("{}.log", short(commit)));
        let Some(build) = &self.build else {
            std::fs::write(&log, "no [test] build: the checkout is the build\n").map_err(|e| {
                crate::build::BuildError::Io {
                    what: format!("writing {}", log.display()),
                    source: e,
                }
            })?;
            return Ok(built(commit, tree, log, 0.0));
        };
        let files = process::create(&log).map_err(|source| crate::build::BuildError::Io {
            what: format!("creating {}", log.display()),
            source,
        })?;
        let ran = match process::run_shell(
            build,
            &tree,
            &[("FIRSTBAD_COMMIT", commit)],
            files,
            self.timeout,
            |_| {},
        ) {
            Ok(ran) => ran,
            // The same on every commit: the input's fault, not this candidate's (issue 32,
            // finding 8).
            Err(e) if e.never_runs() => {
                return Err(crate::build::BuildError::BadInput(format!(
                    "[test] build: {e}: Linux refuses a command (or an environment) this long; \
                     put the build in a script and run the script"
                )))
            }
            Err(e) => {
                return Ok(BuildOutcome::Failed {
                    log,
                    error_lines: vec![e.to_string()],
                })
            }
        };
        if ran.status.success() && !ran.timed_out {
            return Ok(built(commit, tree, log, ran.seconds));
        }
        let how = if ran.timed_out {
            format!("timed out after {} s", self.timeout.as_secs())
        } else {
            ran.status.to_string()
        };
        // The first line is what a verdict quotes: how it ended and the build's last word.
        let mut said = last_lines(&log, FAILED_LINES);
        let mut error_lines = vec![match said.pop() {
            Some(last) => format!("{how}: {last}"),
            None => how,
        }];
        error_lines.extend(said);
        Ok(BuildOutcome::Failed { log, error_lines })
    }
}

/// A built tree: its "release" is the commit the tree must hold when a run starts.
fn built(commit: &str, tree: PathBuf, log: PathBuf, seconds: f64) -> BuildOutcome {
    BuildOutcome::Built {
        kernel_release: commit.to_owned(),
        image: tree,
        log,
        seconds,
        kernel_id: None,
    }
}

impl Builder for TreeBuilder {
    fn build(&self, commit: &str) -> Task<Result<BuildOutcome, crate::build::BuildError>> {
        let trees = Arc::clone(&self.0);
        let commit = commit.to_owned();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || trees.build_blocking(&commit))
                .await
                .unwrap_or_else(|e| {
                    Err(crate::build::BuildError::Io {
                        what: "the build's thread".into(),
                        source: std::io::Error::other(e.to_string()),
                    })
                })
        })
    }
}
