//! Path-limited ranges: literal pathspecs and the tree entries they name in each commit.

use std::collections::HashMap;
use std::path::Path;

use git2::{ErrorCode, Oid, Repository};

use super::{git_err, HistoryError};

/// One `paths` entry: a literal path from the top of the tree.
pub(super) struct Pathspec {
    path: String,
    /// Written with a trailing `/`: only a directory matches.
    dir_only: bool,
}

impl Pathspec {
    pub(super) fn new(raw: &str) -> Result<Pathspec, HistoryError> {
        let bad = |why: &str| HistoryError::BadPath {
            path: raw.to_string(),
            why: why.to_string(),
        };
        if raw.contains(['*', '?', '[']) || raw.starts_with(':') {
            return Err(bad(
                "wildcards and pathspec magic are not supported: list literal paths such as \"mm/\"",
            ));
        }
        let trimmed = raw.trim_start_matches("./");
        let dir_only = trimmed.ends_with('/');
        let path = trimmed.trim_end_matches('/').to_string();
        if path.is_empty()
            || path == "."
            || path.starts_with('/')
            || path.split('/').any(|c| c == "..")
        {
            return Err(bad(
                "give a path relative to the top of the tree, such as \"fs/ext4/\"",
            ));
        }
        Ok(Pathspec { path, dir_only })
    }
}

/// The tree entries (id and mode) of each path in each commit, memoised: comparing them is
/// git's tree comparison limited to the paths.
#[derive(Default)]
pub(super) struct PathCache {
    entries: HashMap<Oid, Vec<Option<(Oid, i32)>>>,
}

impl PathCache {
    pub(super) fn get(
        &mut self,
        repo: &Repository,
        commit: Oid,
        paths: &[Pathspec],
    ) -> Result<Vec<Option<(Oid, i32)>>, HistoryError> {
        if let Some(e) = self.entries.get(&commit) {
            return Ok(e.clone());
        }
        let tree = repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(git_err(format!("reading the tree of {commit}")))?;
        let mut e = Vec::with_capacity(paths.len());
        for p in paths {
            let entry = match tree.get_path(Path::new(&p.path)) {
                Ok(entry) if !p.dir_only || entry.kind() == Some(git2::ObjectType::Tree) => {
                    Some((entry.id(), entry.filemode()))
                }
                Ok(_) => None,
                Err(err) if err.code() == ErrorCode::NotFound => None,
                Err(source) => {
                    return Err(HistoryError::Git {
                        action: format!("looking up {} in {commit}", p.path),
                        source,
                    })
                }
            };
            e.push(entry);
        }
        self.entries.insert(commit, e.clone());
        Ok(e)
    }
}
