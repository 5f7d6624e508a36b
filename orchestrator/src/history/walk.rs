//! The range walk: `bad ^good...` in topological order, read into flat arrays.
//!
//! A kernel range is over a million commits (issue 24): commits are read as raw objects (no
//! parsed commit per candidate in libgit2's cache) and kept as ids, parents in one array and
//! times, then handed to [`DagBuilder`] without a `String` or `Vec` per commit.

use std::collections::{HashMap, HashSet};

use git2::{Oid, Repository, Sort};

use super::{git_err, oid, HistoryError, Revision};
use crate::search::{Dag, DagBuilder, PathInfo, PathLink};

/// Walks `bad ^goods` in topological order: each commit with all its parents and its
/// committer time.
pub(super) fn walk(
    repo: &Repository,
    bad: &Revision,
    goods: &[Revision],
) -> Result<Walked, HistoryError> {
    // Every commit is read once, so libgit2's object cache only costs: past ~256 MB of
    // commits it evicts from its hash map on every insertion, which made the walk of 1.2
    // million commits take 25 s instead of 2.5 s (issue 24), and it holds that 256 MB. The
    // setting is libgit2's, for the whole process; nothing in firstbad rereads objects in bulk.
    git2::opts::enable_caching(false);
    let mut walk = repo
        .revwalk()
        .map_err(git_err("starting a revision walk"))?;
    walk.set_sorting(Sort::TOPOLOGICAL)
        .map_err(git_err("sorting the revision walk"))?;
    walk.push(oid(&bad.id)?)
        .map_err(git_err(format!("walking from bad {}", bad.id)))?;
    for good in goods {
        walk.hide(oid(&good.id)?)
            .map_err(git_err(format!("hiding good {}", good.id)))?;
    }
    let mut ids = Vec::new();
    for next in walk {
        ids.push(next.map_err(git_err("walking the range"))?);
    }
    let odb = repo.odb().map_err(git_err("opening the object database"))?;
    let mut walked = Walked {
        parents: Vec::with_capacity(ids.len() + ids.len() / 8),
        parent_end: Vec::with_capacity(ids.len()),
        times: Vec::with_capacity(ids.len()),
        ids,
    };
    for &id in &walked.ids {
        // The raw object, not `find_commit`: a parsed commit per candidate would fill
        // libgit2's object cache (issue 24: a million commits).
        let object = odb
            .read(id)
            .map_err(git_err(format!("reading commit {id}")))?;
        let time =
            parse_commit(object.data(), &mut walked.parents).ok_or_else(|| HistoryError::Git {
                action: format!("reading commit {id}"),
                source: git2::Error::from_str("malformed commit object"),
            })?;
        walked.parent_end.push(walked.parents.len());
        walked.times.push(time);
    }
    Ok(walked)
}

/// The commits of a range as the walk gave them, children first: ids, all parents (in and
/// out of the range) in flat arrays, committer times.
pub(super) struct Walked {
    pub(super) ids: Vec<Oid>,
    parents: Vec<Oid>,
    parent_end: Vec<usize>,
    times: Vec<i64>,
}

impl Walked {
    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether a walked commit has `id` as a parent: then `id` is an ancestor of bad.
    pub(super) fn names_parent(&self, id: Oid) -> bool {
        self.parents.contains(&id)
    }

    pub(super) fn parents(&self, i: usize) -> &[Oid] {
        let start = if i == 0 { 0 } else { self.parent_end[i - 1] };
        &self.parents[start..self.parent_end[i]]
    }

    /// Only first parents, and only the commits bad reaches through them.
    pub(super) fn first_parents(self) -> Walked {
        let mut reached: HashSet<Oid> = HashSet::new();
        if let Some(&first) = self.ids.first() {
            reached.insert(first);
        }
        let mut kept = Walked {
            ids: Vec::new(),
            parents: Vec::new(),
            parent_end: Vec::new(),
            times: Vec::new(),
        };
        for i in 0..self.len() {
            if !reached.contains(&self.ids[i]) {
                continue;
            }
            if let Some(&p) = self.parents(i).first() {
                reached.insert(p);
                kept.parents.push(p);
            }
            kept.ids.push(self.ids[i]);
            kept.parent_end.push(kept.parents.len());
            kept.times.push(self.times[i]);
        }
        kept
    }
}

/// Reads a raw commit object's parents (appended to `parents`, in order) and committer time.
fn parse_commit(data: &[u8], parents: &mut Vec<Oid>) -> Option<i64> {
    for line in data.split(|&b| b == b'\n') {
        if line.is_empty() {
            // The end of the headers, and no committer line.
            return None;
        }
        if let Some(hex) = line.strip_prefix(b"parent ") {
            let hex = std::str::from_utf8(hex).ok()?;
            parents.push(Oid::from_str(hex).ok()?);
        } else if let Some(who) = line.strip_prefix(b"committer ") {
            // `Name <email> 1700000000 +0100`: the time is the second word from the end.
            let mut words = who.rsplit(|&b| b == b' ');
            let _zone = words.next()?;
            let time = std::str::from_utf8(words.next()?).ok()?;
            return time.parse().ok();
        }
    }
    None
}

/// Per commit, its links to each parent (id, is a starting good, same at the paths) and
/// whether a root has none of the paths.
pub(super) type PathLinks = Vec<(Vec<(Oid, bool, bool)>, bool)>;

/// Lowercase hex of an object id, without an allocation per commit.
fn hex<'a>(id: &Oid, out: &'a mut [u8; 40]) -> &'a str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (k, b) in id.as_bytes().iter().enumerate() {
        out[2 * k] = DIGITS[usize::from(b >> 4)];
        out[2 * k + 1] = DIGITS[usize::from(b & 15)];
    }
    std::str::from_utf8(&out[..2 * id.as_bytes().len()]).expect("hex digits are ASCII")
}

/// Builds the search's DAG from commits listed children first, dropping parents outside.
pub(super) fn dag_of(commits: &Walked, info: Option<PathLinks>) -> Result<Dag, HistoryError> {
    let index: HashMap<Oid, usize> = commits
        .ids
        .iter()
        .enumerate()
        .map(|(i, &id)| (id, i))
        .collect();
    let mut builder = DagBuilder::with_capacity(commits.len(), commits.parents.len());
    let mut buf = [0u8; 40];
    for i in 0..commits.len() {
        let parents = commits
            .parents(i)
            .iter()
            .filter_map(|p| index.get(p).copied());
        builder.push(hex(&commits.ids[i], &mut buf), parents, commits.times[i]);
    }
    let dag = builder.build()?;
    let Some(info) = info else { return Ok(dag) };
    let info = info
        .into_iter()
        .map(|(links, root_treesame)| PathInfo {
            links: links
                .into_iter()
                .map(|(p, bottom, same)| PathLink {
                    parent: index.get(&p).copied(),
                    bottom,
                    same,
                })
                .collect(),
            root_treesame,
        })
        .collect();
    Ok(dag.with_paths(info)?)
}
