//! Loading a bisection range from a git repository: revisions, the candidate DAG, commit info.
//!
//! This is the only place where the search meets git2. It resolves the user's revisions with
//! git's own syntax, checks that they make a bisectable range, and hands [`crate::search`] the
//! candidate DAG (`bad ^good...`) in the order it requires: children before parents, the bad
//! commit first, parents outside the range left out.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use git2::{ErrorCode, Oid, Repository};

use crate::search::{Dag, DagError};

mod paths;
mod prune;
mod walk;

pub use prune::Unchanged;

/// `git ARGS` in `dir` with a fixed identity and no user or system configuration, for unit
/// tests that make real repositories; its trimmed standard output.
#[cfg(test)]
pub(crate) fn git_for_tests(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "A")
        .env("GIT_AUTHOR_EMAIL", "a@example.org")
        .env("GIT_COMMITTER_NAME", "C")
        .env("GIT_COMMITTER_EMAIL", "c@example.org")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

use paths::{PathCache, Pathspec};
use walk::{dag_of, walk};

/// A revision as the user wrote it and the commit it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// What the user wrote (`v6.1`, `HEAD~3`, `origin/master@{2.weeks.ago}`...).
    pub spec: String,
    /// The commit's full id in lowercase hex.
    pub id: String,
}

/// How to narrow a range, as options of `git bisect start` do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeOptions {
    /// Only commits that change one of these paths are tested (`git bisect start -- <paths>`):
    /// literal paths from the top of the tree, a trailing `/` meaning a directory.
    pub paths: Vec<String>,
    /// Follow only the first parent of merges (`git bisect start --first-parent`).
    pub first_parent: bool,
    /// (commit, parent) links along which nothing the kernel is built from changes
    /// ([`History::unchanged_links`]): the commit is TREESAME to that parent, as a commit that
    /// changes none of `paths` is.
    pub unchanged: HashSet<(String, String)>,
}

/// A range ready to bisect: its candidate DAG, the revisions that bound it, and what was
/// changed about the user's revisions to make it bisectable.
#[derive(Debug, Clone)]
pub struct Range {
    /// The candidates, bad first, TREESAME commits marked when paths are given.
    pub dag: Dag,
    /// The bad revision.
    pub bad: Revision,
    /// The good revisions that bound the range, after merge bases replaced diverged ones.
    pub goods: Vec<Revision>,
    /// What a person must be told, e.g. that a merge base stands in for a good revision.
    pub notes: Vec<String>,
}

/// A git repository to bisect in.
pub struct History {
    repo: Repository,
}

/// What a report says about one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// Full id in lowercase hex.
    pub id: String,
    /// First line of the message.
    pub subject: String,
    /// Author as `Name <email>`, the way `git log` shows it.
    pub author: String,
    /// Author date as `YYYY-MM-DD HH:MM:SS +hhmm` in the author's time zone (`git log
    /// --date=iso`).
    pub date: String,
    /// Author name alone.
    pub author_name: String,
    /// Author e-mail address alone.
    pub author_email: String,
    /// Author date, seconds since the epoch.
    pub author_time: i64,
    /// Author's UTC offset in minutes.
    pub author_offset_minutes: i32,
    /// Committer date, seconds since the epoch.
    pub commit_time: i64,
}

/// Why a range could not be loaded; each names the revisions involved.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The repository could not be opened.
    #[error("cannot open git repository {path}")]
    Open {
        /// The path tried.
        path: PathBuf,
        /// git's reason.
        #[source]
        source: git2::Error,
    },
    /// git does not know this revision.
    #[error("revision {spec:?} does not exist in {repo}")]
    RevisionNotFound {
        /// The revision as written.
        spec: String,
        /// The repository searched.
        repo: PathBuf,
        /// git's reason.
        #[source]
        source: git2::Error,
    },
    /// The revision names more than one object.
    #[error("revision {spec:?} is ambiguous in {repo}: give more hex digits or a full name")]
    AmbiguousRevision {
        /// The revision as written.
        spec: String,
        /// The repository searched.
        repo: PathBuf,
    },
    /// The revision names something that is not a commit and does not peel to one.
    #[error("revision {spec:?} names a {kind}, not a commit")]
    NotACommit {
        /// The revision as written.
        spec: String,
        /// What it names (blob, tree...).
        kind: String,
    },
    /// Good and bad are the same commit.
    #[error("good {good:?} and bad {bad:?} are the same commit {id}: there is nothing to bisect")]
    GoodEqualsBad {
        /// The good revision as written.
        good: String,
        /// The bad revision as written.
        bad: String,
        /// The commit both name.
        id: String,
    },
    /// Good is newer than bad: the two were most likely swapped.
    #[error(
        "good {good:?} ({good_id}) is a descendant of bad {bad:?} ({bad_id}), not an ancestor: \
         did you swap good and bad?"
    )]
    GoodAfterBad {
        /// The good revision as written.
        good: String,
        /// Its commit.
        good_id: String,
        /// The bad revision as written.
        bad: String,
        /// Its commit.
        bad_id: String,
    },
    /// Good is on another branch than bad; firstbad bisects only ancestry ranges.
    #[error(
        "good {good:?} ({good_id}) is not an ancestor of bad {bad:?} ({bad_id}): pick a good \
         commit that bad contains, e.g. their merge base {merge_base}"
    )]
    GoodNotAncestor {
        /// The good revision as written.
        good: String,
        /// Its commit.
        good_id: String,
        /// The bad revision as written.
        bad: String,
        /// Its commit.
        bad_id: String,
        /// The best common ancestor of the two.
        merge_base: String,
    },
    /// A `paths` entry is not a literal path firstbad can match as git does.
    #[error("path {path:?} cannot be used to limit the range: {why}")]
    BadPath {
        /// The path as written.
        path: String,
        /// What is wrong and how to fix it.
        why: String,
    },
    /// Good and bad share no history at all.
    #[error("good {good:?} ({good_id}) and bad {bad:?} ({bad_id}) have no common history")]
    Unrelated {
        /// The good revision as written.
        good: String,
        /// Its commit.
        good_id: String,
        /// The bad revision as written.
        bad: String,
        /// Its commit.
        bad_id: String,
    },
    /// A commit id given back for a report is not a full hex id.
    #[error("{id:?} is not a full commit id")]
    BadId {
        /// The text given.
        id: String,
    },
    /// git failed while reading history.
    #[error("git failed while {action}")]
    Git {
        /// What was being done.
        action: String,
        /// git's reason.
        #[source]
        source: git2::Error,
    },
    /// The walk gave a list the search refuses (a bug in this module or in libgit2's sort).
    #[error("the revision walk gave an invalid candidate DAG")]
    Dag(#[from] DagError),
}

fn git_err(action: impl Into<String>) -> impl FnOnce(git2::Error) -> HistoryError {
    let action = action.into();
    move |source| HistoryError::Git { action, source }
}

impl History {
    /// Opens the repository at `path` (a work tree, a `.git` directory or a bare repository).
    pub fn open(path: &Path) -> Result<History, HistoryError> {
        Repository::open(path)
            .map(|repo| History { repo })
            .map_err(|source| HistoryError::Open {
                path: path.to_path_buf(),
                source,
            })
    }

    /// The underlying git2 repository.
    pub fn repo(&self) -> &Repository {
        &self.repo
    }

    /// Resolves any revision git accepts to the full id of the commit it names.
    pub fn resolve(&self, spec: &str) -> Result<String, HistoryError> {
        self.revision(spec).map(|r| r.id)
    }

    /// Resolves any revision git accepts (tags are peeled), keeping what the user wrote.
    pub fn revision(&self, spec: &str) -> Result<Revision, HistoryError> {
        let repo = &self.repo;
        let object = repo
            .revparse_single(spec)
            .map_err(|source| match source.code() {
                ErrorCode::Ambiguous => HistoryError::AmbiguousRevision {
                    spec: spec.to_string(),
                    repo: repo.path().to_path_buf(),
                },
                _ => HistoryError::RevisionNotFound {
                    spec: spec.to_string(),
                    repo: repo.path().to_path_buf(),
                    source,
                },
            })?;
        let kind = object
            .kind()
            .map_or_else(|| "unknown object".to_string(), |k| k.to_string());
        let commit = object
            .peel_to_commit()
            .map_err(|_| HistoryError::NotACommit {
                spec: spec.to_string(),
                kind,
            })?;
        Ok(Revision {
            spec: spec.to_string(),
            id: commit.id().to_string(),
        })
    }

    /// Resolves `bad` and `goods` (any revision syntax), checks that each good is a proper
    /// ancestor of bad, and loads the candidate DAG `bad ^good...` in the order
    /// [`crate::search::Dag`] requires: children before parents, bad first.
    ///
    /// With no good at all, the range is the whole history of bad (as `git bisect` allows).
    /// A good on another branch than bad is an error here; [`History::range`] uses the merge
    /// base instead.
    pub fn load_range<S: AsRef<str>>(&self, bad: &str, goods: &[S]) -> Result<Dag, HistoryError> {
        let bad = self.revision(bad)?;
        let goods = goods
            .iter()
            .map(|g| self.revision(g.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let commits = walk(&self.repo, &bad, &goods)?;
        for good in &goods {
            // Issue 24: asking libgit2 first costs a merge-base search over the whole
            // history (26 s of 34 at 1.2 million commits); the walk answers the usual case.
            if !commits.names_parent(oid(&good.id)?) {
                check_ancestry(&self.repo, good, &bad)?;
            }
        }
        dag_of(&commits, None)
    }

    /// Loads a range with `git bisect start` options: several goods, `-- <paths>`,
    /// `--first-parent`. A good that is neither ancestor nor descendant of bad is replaced by
    /// the merge base of the two, and [`Range::notes`] says so; equal, swapped (good a
    /// descendant of bad) or unrelated revisions are errors.
    pub fn range<S: AsRef<str>>(
        &self,
        bad: &str,
        goods: &[S],
        options: &RangeOptions,
    ) -> Result<Range, HistoryError> {
        let bad = self.revision(bad)?;
        let asked = goods
            .iter()
            .map(|g| self.revision(g.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        // Walk first: a good that a walked commit names as a parent is an ancestor of bad,
        // which spares the merge-base search (issue 24); the others are checked one by one.
        let first = walk(&self.repo, &bad, &asked)?;
        let mut effective: Vec<Revision> = Vec::new();
        let mut notes = Vec::new();
        let mut replaced = false;
        for good in asked {
            let checked = if first.names_parent(oid(&good.id)?) {
                Ok(())
            } else {
                check_ancestry(&self.repo, &good, &bad)
            };
            let good = match checked {
                Ok(()) => good,
                Err(HistoryError::GoodNotAncestor {
                    good,
                    good_id,
                    bad,
                    merge_base,
                    ..
                }) => {
                    notes.push(format!(
                        "good {good:?} ({}) is not an ancestor of bad {bad:?}: bisecting from \
                         their merge base {} instead, which is measured as the good baseline",
                        short_id(&good_id),
                        short_id(&merge_base)
                    ));
                    replaced = true;
                    Revision {
                        spec: format!("merge-base({good}, {bad})"),
                        id: merge_base,
                    }
                }
                Err(e) => return Err(e),
            };
            if !effective.iter().any(|g| g.id == good.id) {
                effective.push(good);
            }
        }
        let mut commits = if replaced {
            walk(&self.repo, &bad, &effective)?
        } else {
            first
        };
        let paths = options
            .paths
            .iter()
            .map(|p| Pathspec::new(p))
            .collect::<Result<Vec<_>, _>>()?;
        let bottoms = effective
            .iter()
            .map(|g| oid(&g.id))
            .collect::<Result<HashSet<_>, _>>()?;
        if options.first_parent {
            // First-parent mode follows only first parents, so what bad reaches shrinks; the
            // goods still exclude all their ancestors (git's default, unlike
            // --exclude-first-parent-only).
            commits = commits.first_parents();
        }
        let info = if paths.is_empty() && options.unchanged.is_empty() {
            None
        } else {
            // How each commit compares with each parent at the paths (and, pruned, at what
            // the kernel is built from); the search redoes git's history simplification from
            // these after every verdict.
            let mut cache = PathCache::default();
            let mut info = Vec::with_capacity(commits.len());
            for i in 0..commits.len() {
                let id = commits.ids[i];
                let mine = if paths.is_empty() {
                    None
                } else {
                    Some(cache.get(&self.repo, id, &paths)?)
                };
                let root_treesame = mine.as_ref().is_some_and(|m| m.iter().all(Option::is_none));
                let mut links = Vec::with_capacity(commits.parents(i).len());
                for &p in commits.parents(i) {
                    let at_paths = match &mine {
                        Some(m) => cache.get(&self.repo, p, &paths)? == *m,
                        None => false,
                    };
                    let pruned = options.unchanged.contains(&(id.to_string(), p.to_string()));
                    links.push((p, bottoms.contains(&p), at_paths || pruned));
                }
                info.push((links, root_treesame));
            }
            Some(info)
        };
        let dag = dag_of(&commits, info)?;
        Ok(Range {
            dag,
            bad,
            goods: effective,
            notes,
        })
    }

    /// Whether `commit` descends from `ancestor` (false when either is unknown).
    pub fn descends_from(&self, commit: &str, ancestor: &str) -> bool {
        match (oid(commit), oid(ancestor)) {
            (Ok(c), Ok(a)) => self.repo.graph_descendant_of(c, a).unwrap_or(false),
            _ => false,
        }
    }

    /// Subject, author and dates of one commit, for reports.
    pub fn info(&self, id: &str) -> Result<CommitInfo, HistoryError> {
        let commit = self
            .repo
            .find_commit(oid(id)?)
            .map_err(git_err(format!("reading commit {id}")))?;
        let author = commit.author();
        let name = String::from_utf8_lossy(author.name_bytes()).into_owned();
        let email = String::from_utf8_lossy(author.email_bytes()).into_owned();
        let when = author.when();
        Ok(CommitInfo {
            id: commit.id().to_string(),
            subject: String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default())
                .into_owned(),
            author: format!("{name} <{email}>"),
            date: iso_date(when.seconds(), when.offset_minutes()),
            author_name: name,
            author_email: email,
            author_time: when.seconds(),
            author_offset_minutes: when.offset_minutes(),
            commit_time: commit.time().seconds(),
        })
    }
}

fn short_id(id: &str) -> &str {
    &id[..12.min(id.len())]
}

/// `YYYY-MM-DD HH:MM:SS +hhmm` for a time and a UTC offset, as `git log --date=iso` shows it.
pub(crate) fn iso_date(seconds: i64, offset_minutes: i32) -> String {
    let local = seconds + i64::from(offset_minutes) * 60;
    let (days, secs) = (local.div_euclid(86_400), local.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let sign = if offset_minutes < 0 { '-' } else { '+' };
    let off = offset_minutes.unsigned_abs();
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} {sign}{:02}{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60,
        off / 60,
        off % 60
    )
}

/// Checks that `good` is a proper ancestor of `bad`, naming both when it is not.
fn check_ancestry(repo: &Repository, good: &Revision, bad: &Revision) -> Result<(), HistoryError> {
    if good.id == bad.id {
        return Err(HistoryError::GoodEqualsBad {
            good: good.spec.clone(),
            bad: bad.spec.clone(),
            id: good.id.clone(),
        });
    }
    let g = oid(&good.id)?;
    let b = oid(&bad.id)?;
    if repo
        .graph_descendant_of(b, g)
        .map_err(git_err("checking that good is an ancestor of bad"))?
    {
        return Ok(());
    }
    let names = (
        good.spec.clone(),
        good.id.clone(),
        bad.spec.clone(),
        bad.id.clone(),
    );
    let (good, good_id, bad, bad_id) = names;
    match repo.merge_base(g, b) {
        Err(e) if e.code() == ErrorCode::NotFound => Err(HistoryError::Unrelated {
            good,
            good_id,
            bad,
            bad_id,
        }),
        Err(source) => Err(HistoryError::Git {
            action: format!("finding the merge base of {good_id} and {bad_id}"),
            source,
        }),
        Ok(base) if base == b => Err(HistoryError::GoodAfterBad {
            good,
            good_id,
            bad,
            bad_id,
        }),
        Ok(base) => Err(HistoryError::GoodNotAncestor {
            good,
            good_id,
            bad,
            bad_id,
            merge_base: base.to_string(),
        }),
    }
}

fn oid(id: &str) -> Result<Oid, HistoryError> {
    Oid::from_str(id).map_err(|_| HistoryError::BadId { id: id.to_string() })
}

#[cfg(test)]
mod tests {
    use super::iso_date;

    #[test]
    fn dates_read_like_git_log_iso() {
        assert_eq!(iso_date(0, 0), "1970-01-01 00:00:00 +0000");
        // 2024-02-29 12:34:56 UTC seen from UTC-05:30.
        assert_eq!(iso_date(1_709_210_096, -330), "2024-02-29 07:04:56 -0530");
        assert_eq!(iso_date(951_782_400, 60), "2000-02-29 01:00:00 +0100");
    }
}
